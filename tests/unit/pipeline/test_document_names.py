"""Answers that know which document the user means (`declrag.pipeline.stages.generate`): a name the document holds anywhere
(its title page, a running footer) counts for its passages; a name only another document holds refuses a passage;
a quote cut by its chunk's edge is taken whole from the document; an abstention says why and cites the passages
nearest to the question."""

from __future__ import annotations

import pytest
from dspy.utils.dummies import DummyLM

from declrag.config import ChunkerConfig, IngestConfig, ProgramConfig
from declrag.text.sentences import sentence_spans
from declrag.ingest.indexer import Indexer
from declrag.lm import using_lm
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.stages.retrieve._documents import DocumentIndex
from declrag.pipeline.stages.generate._extract import extract, missing_details
from declrag.pipeline.stages.generate._names import whole
from declrag.pipeline.program import NEAREST_CITED, RAGProgram
from declrag.serve._openai_compat import content
from declrag.stores import open_store
from declrag.testing import HashEmbedder
from declrag.types import Document

WIEN = ("Evaluating retrieval for question answering\n\nBachelor thesis by Anna Berger\n\n"
        + "The evaluation used the held-out split of the corpus. " * 3
        + "\n\nThis thesis is available at the TU Wien library.\n\n"
        + "The retriever returned five passages for each question. The answerer read them in rank order. " * 2
        + "\n\nThis thesis is available at the TU Wien library.\n")
TUM = ("Dense retrieval at scale\n\nMaster thesis by Jonas Keller\n\n"
       + "The retriever returned ten passages for each question. Passages were cut at 512 tokens. " * 2
       + "\n\nTechnische Universitaet Muenchen (TUM), 2021\n")


def question_about(who: str) -> str:
    return f"How many passages did the retriever return for each question in the {who} thesis?"


# ------------------------------------------------------------------------------------------- the rule
def test_a_name_the_document_holds_anywhere_counts_for_its_passages():
    q = question_about("TU Wien")
    passage = "The retriever returned five passages for each question."
    assert missing_details(q, passage) == ["TU Wien"]
    assert missing_details(q, passage, WIEN) == []  # its footer names it
    assert missing_details(q, passage, TUM) == ["TU Wien"]  # another document's words do not


def test_the_passage_of_the_document_the_question_names_answers(minilm):
    q = question_about("TUM")
    passages = ["The retriever returned five passages for each question.",  # the TU Wien thesis: best, wrong
                "The retriever returned ten passages for each question."]  # the TUM thesis
    docs = [WIEN, TUM]
    qv = minilm.embed_query(q)
    got = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, documents=lambda n: docs[n - 1])
    assert got.pieces and {p.n for p in got.pieces} == {2} and "ten" in got.text()
    blind = extract(q, passages, minilm.embed_documents, qv, min_score=0.0)  # no document: no passage names TUM
    assert blind.pieces == [] and "TUM" in blind.reason


def test_a_document_the_corpus_does_not_hold_is_still_refused(minilm):
    q = question_about("TU Graz")
    passages = ["The retriever returned five passages for each question.",
                "The retriever returned ten passages for each question."]
    docs = [WIEN, TUM]
    got = extract(q, passages, minilm.embed_documents, minilm.embed_query(q), min_score=0.0,
                  documents=lambda n: docs[n - 1])
    assert got.pieces == [] and got.reason == "the passages never mention TU Graz"


def test_a_name_every_document_holds_does_not_decide(minilm):
    footer = "\n\nCopyright Acme Research Labs.\n"
    q = "How many passages did the retriever return for each question at Acme Research Labs?"
    passages = ["The retriever returned five passages for each question.",
                "The retriever returned ten passages for each question."]
    docs = [WIEN + footer, TUM + footer]
    qv = minilm.embed_query(q)
    got = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, max_sentences=2,
                  documents=lambda n: docs[n - 1])
    assert {p.n for p in got.pieces} == {1, 2}  # as if the name were not asked: both documents hold it


def test_a_question_naming_two_documents_abstains_with_its_reason(minilm):
    q = "How many passages did the retriever return in the TU Wien thesis and in the TUM thesis?"
    passages = ["The retriever returned five passages for each question.",
                "The retriever returned ten passages for each question."]
    docs = [WIEN, TUM]
    got = extract(q, passages, minilm.embed_documents, minilm.embed_query(q), min_score=0.0,
                  documents=lambda n: docs[n - 1])
    assert got.pieces == [] and "the passages never mention" in got.reason  # no one document holds both names


# ------------------------------------------------------------------------------------------- whole sentences
def test_a_quote_cut_by_its_passages_edge_is_widened_to_its_sentence():
    doc = "Activation functions matter. The network uses ReLU in every hidden layer and a softmax at the end. Done."
    cut = doc.index("in every")  # a chunk that begins mid-sentence
    a, b = whole(doc, cut, doc.index(" Done."))
    assert doc[a:b] == "The network uses ReLU in every hidden layer and a softmax at the end."
    assert whole(doc, 0, 10, limit=30) == (0, 28)
    assert whole(doc, 0, 10, limit=5) == (0, 10)  # its end lies past the limit: kept as it was
    long = "x " * 800 + "end of a very long sentence. Next."
    assert whole(long, 1000, 1010, limit=100) == (1000, 1010)  # a sentence longer than the limit: kept as it was
    end = long.index(". Next") + 1
    assert whole(long, end - 20, end - 10, limit=100) == (end - 20, end)  # its start too far, its end near


@pytest.fixture(scope="module")
def fixed_store(tmp_path_factory):
    """A store of three documents cut into fixed 24-token chunks, which cut most sentences."""
    folder = tmp_path_factory.mktemp("names")
    store, meta = open_store(folder / "store", IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=24,
                                                                                  overlap=0)))
    docs = [Document(id="wien", text=WIEN, source=str(folder / "wien.txt")),
            Document(id="tum", text=TUM, source=str(folder / "tum.txt")),
            Document(id="rome", source=str(folder / "rome.txt"),
                     text="Rome is the capital of Italy and has been a centre of power for nearly three thousand "
                          "years, its river the Tiber crossing the city from north to south. " * 4)]
    Indexer(store, meta.ingest, HashEmbedder(), progress=False).index_documents(docs)
    return store


def ask(store, question: str, **extract_settings):
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive", "extract": extract_settings},
                                        "retrieve": {"k": 4}})
    prog = RAGProgram(cfg, store=store, embedder=HashEmbedder())
    with using_lm(DummyLM([{"answer": "unused"}], adapter=PlainTextAdapter())):
        return prog(question=question)


@pytest.mark.parametrize("question", ["What is the capital of Italy?", "Which river crosses Rome?",
                                      "How many passages did the retriever return?", "Where is the thesis?"])
def test_no_extractive_answer_quotes_a_sentence_cut_by_a_chunk_boundary(fixed_store, question):
    a = ask(fixed_store, question, min_score=0.0, require_details=False)
    assert not a.abstained
    texts = fixed_store.document_texts(["wien", "tum", "rome"])
    for c in a.citations:
        doc = texts[c["doc_id"]]
        starts = {s for s, _ in sentence_spans(doc)}
        ends = {e for _, e in sentence_spans(doc)}
        for s, e in c["quotes"]:
            assert s in starts and e in ends, (doc[s:e], c["span"])
            assert doc[s:e] in a.answer
            assert c["span"][0] <= s and e <= c["span"][1]  # the passage handed over grew to hold the quote
            assert doc[s:e] in a.passages[c["n"] - 1].text


def test_an_abstention_says_why_and_cites_the_nearest_passages(fixed_store):
    a = ask(fixed_store, question_about("TU Graz"), min_score=0.0)
    assert a.abstained and a.reason == "the passages never mention TU Graz"
    assert 1 <= len(a.citations) <= NEAREST_CITED and all(c["nearest"] for c in a.citations)
    assert [c["n"] for c in a.citations] == list(range(1, len(a.citations) + 1))
    said = content({"answer": a.answer, "abstained": True, "reason": a.reason})
    assert said == "I don't know. The passages never mention TU Graz."
    answered = ask(fixed_store, question_about("TU Wien"), min_score=0.0)
    assert not answered.abstained and not any(c.get("nearest") for c in answered.citations)
    assert {c["doc_id"] for c in answered.citations} == {"wien"}


# ------------------------------------------------------------------------------------------- retrieval
def test_a_document_level_signal_finds_the_named_documents_passages_first(fixed_store):
    index = DocumentIndex(fixed_store)
    got = index.scores("Technische Universitaet Muenchen")
    assert got["tum"] == 1.0 and "wien" not in got and "rome" not in got
    q = "How many passages did the retriever return for each question in the Muenchen thesis?"

    def docs(weight: float) -> list[str]:
        cfg = ProgramConfig.model_validate({"retrieve": {"k": 3, "documents": weight, "named": False}})
        prog = RAGProgram(cfg, store=fixed_store, embedder=HashEmbedder())
        return [h.doc_id for h in prog.retrieve(queries=prog.rewrite(question=q))]

    alone, mixed, named = docs(0.0), docs(0.5), docs(1.0)
    # the named document's passages first, among the k the program hands over
    assert alone[:3].count("tum") < mixed[:3].count("tum") < named[:3].count("tum") == 3
    # the deeper pool is cut back to what the program asked for: k, and as many stand-ins for best-first's hand-over
    assert mixed[0] == "tum" and len(mixed) == 6


def test_a_sentence_wrapped_over_lines_is_one_sentence():
    from declrag.text.sentences import sentence_spans

    text = ("Per default the loop size\nis 1cm. The next one\n(see below) is here.\nA Heading\n\n"
            "New para: first\nline. Done")
    assert [text[a:b] for a, b in sentence_spans(text)][:2] == ["Per default the loop size", "is 1cm."]
    assert [text[a:b] for a, b in sentence_spans(text, wrapped=True)] == [
        "Per default the loop size\nis 1cm.", "The next one\n(see below) is here.", "A Heading",
        "New para: first\nline.", "Done"]  # a blank line, a line that ends a sentence, a capital: hard breaks


def test_the_words_that_name_a_document_count_as_held_by_its_passages(minilm):
    q = question_about("TUM")
    passages = ["The retriever returned ten passages for each question."]
    qv = minilm.embed_query(q)
    blind = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, require_details=False)
    named = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, documents=lambda n: TUM)
    assert named.pieces[0].score > blind.pieces[0].score  # "TUM" names the document, not what the sentence says


def test_a_pdfs_title_page_names_the_passages_of_its_other_pages(tmp_path):
    """A PDF is a document per page (``SOURCE#page=N``): the names on its title page count for its later pages."""
    store, meta = open_store(tmp_path / "store", IngestConfig())
    src = str(tmp_path / "thesis.pdf")
    pages = ["Evaluating retrieval\n\nBachelor thesis by Anna Berger, TU Wien, 2021",
             "The retriever returned five passages for each question. The answerer read them in rank order."]
    docs = [Document(id=f"{src}#page={n}", text=t, source=src, page=n) for n, t in enumerate(pages, 1)]
    other = Document(id="notes.txt", text="The retriever returned nine passages. Notes by Jonas Keller.",
                     source=str(tmp_path / "notes.txt"))
    Indexer(store, meta.ingest, HashEmbedder(), progress=False).index_documents([*docs, other])
    assert DocumentIndex(store).named(question_about("Anna Berger")) == [d.id for d in docs]  # every page of it
    a = ask(store, question_about("TU Wien"), min_score=0.0)
    assert not a.abstained and 2 in {c["page"] for c in a.citations} and "five passages" in a.answer
    assert "nine" not in a.answer  # the other document's passage, which does not name it
    assert ask(store, question_about("TU Graz"), min_score=0.0).abstained


def test_the_documents_a_question_names_are_found_by_the_names_only_they_hold(fixed_store, monkeypatch):
    from declrag.pipeline.stages.retrieve import _documents as documents
    index = DocumentIndex(fixed_store)
    source = {d: d for d in fixed_store.documents()}  # a document that is not a PDF's page: its own id
    assert index.named("How many passages in the Muenchen thesis?") == [source["tum"]]
    assert index.named("How many passages in Anna Berger's thesis?") == [source["wien"]]  # a possessive
    assert index.named("Did the TUM thesis of 2021 cut passages?") == [source["tum"]]  # both name it: shared
    assert index.named(question_about("TU Graz")) == []  # no document holds it: it names none
    assert index.named("Which passages did Anna Berger and Jonas Keller count?") == sorted(
        [source["wien"], source["tum"]])  # two documents named, none holds both: either
    monkeypatch.setattr(documents, "NAMED_AT_MOST", 0)
    assert index.named("How many passages in the Muenchen thesis?") == []  # held by more than that: names none


def test_the_retriever_also_searches_the_documents_the_question_names(fixed_store):
    q = "Which held-out split of the corpus did the evaluation use in the thesis from Muenchen?"

    def docs(named: bool, where: dict | None = None) -> list[str]:
        cfg = ProgramConfig.model_validate({"retrieve": {"k": 3, "named": named, "where": where}})
        prog = RAGProgram(cfg, store=fixed_store, embedder=HashEmbedder())
        return [h.doc_id for h in prog.retrieve(queries=prog.rewrite(question=q))]

    blind, named = docs(False), docs(True)
    assert "tum" not in blind[:3] and named[0] == "tum"  # its words are Wien's, its name TUM's
    wien = fixed_store.documents()["wien"].source
    assert set(docs(True, {"source": wien})) == {"wien"}  # the named search keeps to the program's own filter
    q = "Which held-out split of the corpus did the evaluation use in the thesis from TU Wien?"
    assert docs(False)[:3] == docs(True)[:3]  # the search over all found the named document: left as it was


def test_beyond_its_bound_the_index_over_whole_documents_is_not_built_nor_read_again(fixed_store, monkeypatch, caplog):
    from declrag.pipeline.stages.retrieve import _documents as documents

    monkeypatch.setattr(documents, "MAX_DOCUMENTS", 2)  # the store holds three
    index = DocumentIndex(fixed_store)
    reads = []
    monkeypatch.setattr(fixed_store, "documents", lambda: reads.append(1) or type(fixed_store).documents(fixed_store))
    for _ in range(3):
        assert index.named("How many passages in the Muenchen thesis?") == [] and index.scores("Muenchen") == {}
    assert len(reads) == 1 and caplog.text.count("more than 2") == 1  # counted once, said once


def test_a_document_without_names_and_a_name_every_document_holds_decide_nothing(tmp_path, minilm):
    store, meta = open_store(tmp_path / "store", IngestConfig())
    plain = "the retriever returned seven passages for each question and the answerer read them in order. " * 3
    docs = [Document(id=f"d{i}", text=t + "\n\nCopyright Acme Research Labs.", source=str(tmp_path / f"d{i}.txt"))
            for i, t in enumerate([WIEN, TUM, plain])]
    Indexer(store, meta.ingest, HashEmbedder(), progress=False).index_documents(docs)
    index = DocumentIndex(store)
    assert index.named("How many passages at Acme Research Labs?") == []  # every document holds it
    assert index.named("How many passages in the TUM thesis at Acme Research Labs?") == ["d1"]
    q = "How many passages did the retriever return in the Acme Research Labs report by Jonas Keller?"
    got = extract(q, [plain], minilm.embed_documents, minilm.embed_query(q), min_score=0.0,
                  documents=lambda n: docs[2].text)
    assert got.pieces == [] and got.reason == "the passages never mention Jonas Keller"  # no names of its own
