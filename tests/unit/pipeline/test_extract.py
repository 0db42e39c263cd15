"""The deterministic generate modes (`declrag.pipeline.stages.generate`): ``extractive`` answers in the passages' own words with exact
spans and abstains by a threshold and by the question's details; ``verified`` checks each sentence an LM wrote and
drops or replaces what its passages do not support. Through the program, the stream, HTTP and MCP."""

from __future__ import annotations

import json

import anyio
import pytest
from dspy.utils.dummies import DummyLM
from mcp import Client

from declrag.config import ProgramConfig, answer_mode
from declrag.lm import using_lm
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.stages.generate._extract import (
    candidates,
    check,
    cited_sentences,
    extract,
    missing_details,
    shown,
    spans,
)
from declrag.pipeline.stages.generate._kinds import answer_kind, holds_kind
from declrag.pipeline.program import LOCAL_DEFAULT_MODE, RAGProgram, default_config
from declrag.pipeline.stages.generate._streaming import Done, astream
from declrag.stores._lancedb import LanceStore
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus
from tests.conftest import asked_plain_and_streamed

Q = "What is the capital of Italy?"
LOW = {"min_score": 0.0, "require_details": False}  # HashEmbedder's cosines are low: tests set the threshold



def make(store, mode: str, **generate) -> RAGProgram:
    cfg = ProgramConfig.model_validate({"generate": {"mode": mode, **generate}})
    return RAGProgram(cfg, store=store, embedder=HashEmbedder())


def ask(prog, answer: str | None = None, question: str = Q, **kw):
    lm = DummyLM([{"answer": answer or "unused"}] * 4, adapter=PlainTextAdapter())
    with using_lm(lm):
        return prog(question=question, **kw)


# ------------------------------------------------------------------------------------------- the pieces
def test_every_piece_is_an_exact_span_within_the_limit_even_without_sentence_boundaries():
    table = "| year | city | people |\n" + "\n".join(f"| {1900 + i} | Rome | {i * 1000} |" for i in range(40))
    code = "def f(x): return " + " + ".join(f"x * {i}" for i in range(200))
    long = "The Colosseum, " + ", ".join(f"built with stone number {i}" for i in range(60)) + ", stands in Rome."
    for text in (table, code, long, "x" * 1000):
        got = spans(text, 120)
        assert got and all(0 < b - a <= 120 and text[a:b].strip() == text[a:b] for a, b in got)
    assert spans("", 100) == [] and spans("   \n  ", 100) == []


def test_candidates_keep_a_repeated_sentence_once_and_number_their_passage():
    got = candidates(["Rome is old. Rome is big.", "Rome is big. Paris is far."], 400)
    assert [(p.n, p.text) for p in got] == [(1, "Rome is old."), (1, "Rome is big."), (2, "Paris is far.")]
    assert all(shown(p.text) for p in candidates(["Rome is old.\n[12]\n[3, 4]\nParis is far."], 400))


def test_extract_takes_the_answering_sentence_and_abstains_on_what_the_passages_never_name(minilm):
    passages = ["The Colosseum is an amphitheatre in Rome. It was built under the Flavian emperors.",
                "Rome is the capital of Italy. It has many fountains."]
    qv = minilm.embed_query(Q)
    got = extract(Q, passages, minilm.embed_documents, qv, max_sentences=1)
    assert [(p.n, p.text) for p in got.pieces] == [(2, "Rome is the capital of Italy.")]
    assert got.text() == "Rome is the capital of Italy. [2]"
    q2 = "What is the capital of Portugal?"
    gone = extract(q2, passages, minilm.embed_documents, minilm.embed_query(q2), min_score=0.0)
    assert gone.pieces == [] and "Portugal" in gone.reason
    q3 = "How do volcanoes form under the ocean floor?"
    far = extract(q3, passages, minilm.embed_documents, minilm.embed_query(q3), min_score=0.5)
    assert far.pieces == [] and "closely enough" in far.reason and "under 0.5" in far.reason
    assert missing_details("When did Napoleon visit Rome in 1805?", passages[0]) == ["1805", "Napoleon"]


@pytest.mark.parametrize("question,kind", [
    ("In what country is Normandy located?", "country"), ("Which nations signed it?", "country"),
    ("When were the Normans in Normandy?", "date"),
    ("What year did the war end?", "date"), ("How many people live in Rome?", "number"),
    ("What percentage of voters turned out?", "number"), ("Who ruled the duchy?", "name"),
    ("Where is the Colosseum?", "name"), ("Which authors does the Milan thesis cite?", "name"),
    ("What is the capital of Italy?", "name"), ("What is a thesis?", None), ("Why is the sky blue?", None),
    ("How does BM25 work?", None), ("What kind of store is it?", None),
    ("What is the default tabsize in Heinz's guide?", "value"), ("What does formfeed default to?", "value"),
    ("In Hackl's guide, what diameter does a vertex have by default?", "value"),
    ("How large is a plane by default?", "number"), ("Why is the default 8?", None),
    ("Which command resets the scheduler?", "command"), ("How do I install Tesseract?", "command"),
    ("What shell command builds the docs?", "command"), ("Which option turns OCR off?", "code"),
])
def test_the_question_says_what_kind_of_answer_it_wants(question, kind):
    assert answer_kind(question) == kind


def test_a_sentence_holds_the_kind_only_with_something_the_question_lacks():
    q = "In what country is Normandy located?"
    assert holds_kind("Normandy is a region in France.", "country", q)
    assert not holds_kind("Upper Normandy reaches the river Seine.", "country", q)  # names, but no country
    assert holds_kind("Normandy is a region in France.", "name", q)
    assert not holds_kind("Normandy is located on the coast.", "name", q)  # only the question's own name
    assert holds_kind("The Normans came in 911.", "date", "When did the Normans come?")
    assert holds_kind("They came in March.", "date", "When did they come?")
    assert not holds_kind("They came by sea.", "date", "When did they come?")
    assert holds_kind("About 2,800,000 people live there.", "number", "How many people live in Rome?")
    assert not holds_kind("Anything at all 12.", None, "What is it?")
    default = "What is the default comment style?"
    assert holds_kind("Comments are set in \\itshape unless changed.", "value", default)  # a command as code
    assert holds_kind("The tab size is 8.", "value", "What is the default tabsize?")
    assert not holds_kind("Comments can be styled as you like.", "value", default)
    assert not holds_kind("Use \\lstset to change it.", "value", "How does \\lstset set the default?")  # asked


def test_typed_answers_add_the_weight_to_the_sentences_that_hold_what_is_asked(minilm):
    q = "In what country is Normandy located?"
    passages = ["Normandy lies along the northern coast, where the land meets the sea. Its rivers flow through France "
                "and into the Channel."]
    qv = minilm.embed_query(q)
    both = {"max_sentences": 2, "min_score": 0.0, "order": "score"}
    plain = {p.text: p.score for p in extract(q, passages, minilm.embed_documents, qv, **both).pieces}
    typed = {p.text: p.score for p in extract(q, passages, minilm.embed_documents, qv, type_weight=0.5,
                                              **both).pieces}
    rivers, coast = (next(t for t in plain if t.startswith(w)) for w in ("Its rivers", "Normandy lies"))
    assert typed[rivers] == pytest.approx(plain[rivers] + 0.5) and typed[coast] == plain[coast]
    first = extract(q, passages, minilm.embed_documents, qv, type_weight=0.5, max_sentences=1, min_score=0.0)
    assert "France" in first.text()
    # the weight counts toward the threshold: a sentence holding what is asked answers on less likeness
    alone, line = [passages[0].split(". ")[1]], plain[rivers] + 0.25
    assert extract(q, alone, minilm.embed_documents, qv, min_score=line, require_details=False).pieces == []
    assert extract(q, alone, minilm.embed_documents, qv, min_score=line, require_details=False,
                   type_weight=0.5).pieces


def test_a_markdown_heading_is_never_an_answer():
    got = candidates(["# `declrag mcp`\n\nThe server listens on stdin. It answers tools."], 300)
    assert [p.text for p in got] == ["The server listens on stdin.", "It answers tools."]


def test_the_detail_rule_reads_the_documents_identity(minilm):
    q = "Which authors does the Milan thesis trace the retrieve-then-generate design back to?"
    passages = ["The retrieve-then-generate design goes back to Lewis et al., who combined a retriever with a "
                "sequence-to-sequence generator."]
    qv = minilm.embed_query(q)
    bare = extract(q, passages, minilm.embed_documents, qv, min_score=0.0)
    assert bare.pieces == [] and "Milan" in bare.reason
    known = extract(q, passages, minilm.embed_documents, qv, min_score=0.0,
                    identities=["Politecnico di Milano · Master Thesis 2 Background > 2.1 Retrieval"])  # Milan(o)
    assert known.pieces and "Lewis" in known.text()
    other = extract(q, passages, minilm.embed_documents, qv, min_score=0.0,
                    identities=["TU Wien · Bachelor Thesis"])
    assert other.pieces == [] and "Milan" in other.reason  # another document's identity still refuses


@pytest.mark.parametrize("question,context,missing", [
    ("Is the standard of living in San Franciscio high?", "San Francisco has a high standard of living.", []),
    ("Is the standard of living in San Diego high?", "San Francisco has a high standard of living.", ["San Diego"]),
    ("Why are the Japanese called Nippon?", "The name Nippon for Japan came into use later.", []),
    ("How many Victorians are Buddhist?", "Buddhism is practised by 168,637 people in Victoria.", []),
    ("What are the other three Watson concepts?", "Watson has collections, fields and queries.", []),
    ("What are the other 3 Watson concepts?", "Watson has collections, fields and queries.", ["3"]),
    ("What about pricing? Is there a free trial?", "IBM Cloud offers a free trial.", []),
    ("Which command compares nDCG@10 of embedders?", "`declrag bench embed` compares nDCG@10.", []),
    ("What did Austria sign in 1805?", "Australia signed a treaty in 1805.", ["Austria"]),
])
def test_the_detail_rule_forgives_a_misspelling_an_ending_and_a_spelled_count_and_no_other_name(question, context,
                                                                                                  missing):
    assert missing_details(question, context) == missing


def test_the_words_that_name_a_document_are_found_in_its_identity(minilm):
    q = "In the conversations guide, what is the character limit on a history by default?"
    passages = ["A history longer than 50,000 characters is cut from its oldest turns."]
    qv = minilm.embed_query(q)
    bare = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, max_sentences=1)
    named = extract(q, passages, minilm.embed_documents, qv, min_score=0.0, max_sentences=1,
                    identities=["Conversations guide · History"])
    assert named.pieces[0].score > bare.pieces[0].score  # "conversations", "guide" now count as held


def test_a_question_in_another_language_gets_a_bounded_answer_or_the_abstention(minilm):
    passages = ["Rome is the capital of Italy. " * 30]
    q = "Quelle est la capitale de l'Italie ?"
    got = extract(q, passages, minilm.embed_documents, minilm.embed_query(q), max_piece_chars=80)
    assert got.pieces == [] or all(len(p.text) <= 80 for p in got.pieces)


def test_check_flags_invented_details_wrong_citations_and_unsupported_sentences(minilm):
    passages = ["Paris is the capital of France.", "Rome is the capital of Italy. It has many fountains."]
    found = check("Rome is the capital of Italy [1]. Rome was founded by Napoleon in 1805 [2]. "
                  "Bananas grow well on the moon [2].", passages, minilm.embed_documents)
    first, second, third = found
    assert first.supported and first.by == 2 and first.wrong_citation and first.cited == [1]
    assert not second.supported and set(second.missing) == {"Napoleon", "1805"}
    assert not third.supported and third.lexical == 0.0 and third.by is None
    assert cited_sentences("Rome. [1] Paris [2].") == [("Rome.", [1]), ("Paris.", [2])]


# ------------------------------------------------------------------------------------------- the program
def test_extractive_answers_without_an_lm_with_exact_quotes(store):
    prog = make(store, "extractive", extract=LOW)
    assert "generate" not in prog.lm_stages()
    a = ask(prog)
    assert not a.abstained and a.usage["total"]["calls"] == 0 and a.checked["mode"] == "extractive"
    assert a.stages["generate"] == "extractive"
    docs = store.document_texts([c["doc_id"] for c in a.citations])
    quoted = [docs[c["doc_id"]][s:e] for c in a.citations for s, e in c.get("quotes", [])]
    assert quoted and all(q in a.answer for q in quoted)  # every sentence of the answer is its document's own
    assert "Rome is the capital of Italy." in quoted


def test_extractive_abstains_below_its_threshold(store):
    a = ask(make(store, "extractive", extract={"min_score": 0.99, "type_weight": 0.0}))
    assert a.abstained and a.answer == "I don't know." and all(c["nearest"] for c in a.citations)
    assert "under 0.99" in a.checked["reason"]


def test_verified_drops_an_invented_sentence_and_puts_the_passages_own_in_its_place(store):
    lm_answer = "Rome is the capital of Italy [1]. It was founded by Napoleon Bonaparte in 1805 [1]."
    kept = ask(make(store, "verified", unsupported="drop", extract=LOW), lm_answer)
    assert kept.answer.startswith("Rome is the capital of Italy. [") and "Napoleon" not in kept.answer
    assert kept.dropped_sentences == 1 and kept.checked["replaced"] == 0
    assert kept.checked["unsupported"][0]["missing"] == ["1805", "Napoleon Bonaparte"]
    swapped = ask(make(store, "verified", extract=LOW), lm_answer)
    assert swapped.dropped_sentences == 1 and swapped.checked["replaced"] == 1
    assert "Napoleon" not in swapped.answer and swapped.answer.count("[") == 2
    assert any(c.get("quotes") for c in swapped.citations)  # the stand-in is cited with its exact span
    plain = ask(make(store, "lm"), lm_answer)
    assert "Napoleon" in plain.answer and plain.dropped_sentences == 0  # the lm mode leaves the answer alone


def test_verified_abstains_when_nothing_the_lm_said_is_supported(store):
    a = ask(make(store, "verified", unsupported="drop", extract=LOW), "Bananas grow well on the moon [1].")
    assert a.abstained and a.dropped_sentences == 1 and a.to_dict()["dropped_sentences"] == 1


def test_verified_asks_no_lm_when_the_passages_do_not_answer(store):
    a = ask(make(store, "verified", extract={"min_score": 0.99, "type_weight": 0.0}),
            "Rome was founded by Napoleon [1].")
    assert a.abstained and a.usage["total"]["calls"] == 0 and "under 0.99" in a.checked["reason"]


def test_the_default_program_on_the_local_model_answers_in_the_measured_mode():
    assert answer_mode(default_config()) == LOCAL_DEFAULT_MODE
    assert answer_mode(default_config(model="openai/gpt-4o-mini")) == "lm"
    assert answer_mode(default_config(model="local/smollm2")) == "lm"  # a model named is a model to write with
    chosen = ProgramConfig.model_validate({"generate": {"mode": "verified"}})
    assert answer_mode(default_config(chosen)) == "verified"  # a mode set by the user stands


def test_generating_switches_the_mode_and_keeps_the_rest(store):
    prog = make(store, "lm", variant="terse")
    other = prog.generating("extractive")
    assert other.config.generate.mode == "extractive" and other.config.generate.variant == "terse"
    assert other.store is prog.store and prog.config.generate.mode == "lm"


# ------------------------------------------------------------------------------------- stream, HTTP, MCP
def test_an_extractive_answer_streams_through_the_lms_path(store):
    prog = make(store, "extractive", extract=LOW)

    async def go():
        return [item async for item in astream(prog, lambda: prog(question=Q))]

    items = anyio.run(go)
    pieces, done = [i for i in items if isinstance(i, str)], items[-1]
    assert isinstance(done, Done) and pieces and "".join(pieces) == done.result.answer == done.streamed


def test_serve_reports_quotes_and_dropped_sentences(store):
    from declrag.serve import ServeSettings, create_app
    from declrag.testing import ScriptedLM

    lm_answer = "Rome is the capital of Italy [1]. It was founded by Napoleon Bonaparte in 1805 [1]."
    prog = make(store, "verified", unsupported="drop", extract=LOW)
    app = create_app(prog, "v", "runs/v/best", ServeSettings(),
                     lm_override=lambda: ScriptedLM({}, {"answer": lm_answer}))
    r, streamed, metrics = asked_plain_and_streamed(app, Q)
    assert r["dropped_sentences"] == 1 and "Napoleon" not in r["answer"]
    assert "declrag_dropped_sentences_total 2.0" in metrics
    events = [dict(line.split(": ", 1) for line in block.splitlines()) for block in streamed.strip().split("\n\n")]
    last = json.loads(events[-1]["data"])
    assert events[-1]["event"] == "answer" and last["dropped_sentences"] == 1 and "Napoleon" not in last["answer"]
    sent = "".join(json.loads(e["data"])["text"] for e in events if e["event"] == "delta")
    assert sent == last["answer"]  # only the checked answer is streamed: the dropped words never reach the client


def test_mcp_ask_carries_the_quotes(store):
    from declrag.serve.mcp import build_server

    prog = make(store, "extractive", extract=LOW)

    async def go():
        async with Client(build_server(prog, "x")) as c:
            return await c.call_tool("ask", {"question": Q})

    r = anyio.run(go)
    assert not r.is_error
    cites = r.structured_content["citations"]
    assert any(c["quotes"] for c in cites) and r.structured_content["dropped_sentences"] == 0


# ------------------------------------------------------------------------------------------- mistakes
@pytest.mark.parametrize("args, says", [
    (["eval", "--dataset", "squad-v2.0", "--modes", "lm,extractve"], "--modes: unknown generate mode 'extractve'"),
    (["eval", "--dataset", "squad-v2.0", "--modes", " , "], "--modes is empty"),
    (["bench", "answers", "--mode", "verifed"], "unknown --mode 'verifed'"),
    (["bench", "answers", "--n", "0"], "--n must be at least 1"),
    (["bench", "answers", "--dataset", "squad-v3"], "unknown --dataset 'squad-v3'"),
], ids=["eval-mode-typo", "eval-no-mode", "bench-mode-typo", "bench-n", "bench-dataset"])
def test_a_wrong_mode_or_setting_is_one_line_before_any_work(capsys, args, says):
    from declrag.cli import main

    code = main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and says in lines[0] and "Traceback" not in err and len(lines) <= 2, err


def test_a_wrong_mode_in_a_config_names_the_field(tmp_path, capsys):
    from declrag.cli import main

    f = tmp_path / "p.yaml"
    f.write_text("generate: {mode: extractiv}\n")
    code = main(["ask", Q, "--config", str(f)])
    err = capsys.readouterr().err
    assert code == 2 and "generate.mode" in err and "Traceback" not in err, err


def test_compile_searches_the_modes_with_their_own_settings():
    import optuna

    from declrag.optimize._space import apply, read_space, sample

    space = read_space("default")
    assert space.params["generate_mode"].choices == ["lm", "extractive", "verified"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = {}
    for _ in range(40):
        values = sample(study.ask(), space)
        mode = values["generate_mode"]
        seen[mode] = values
        assert ("generate_prompt" in values) == (mode != "extractive")  # no prompt to search without an LM
        assert ("extract_min_score" in values) == (mode != "lm")
        assert ("unsupported" in values) == (mode == "verified")
        cfg = apply(space.base, values, space.params)
        assert cfg.generate.mode == mode
        if mode != "lm":
            assert cfg.generate.extract.min_score == values["extract_min_score"]
    assert set(seen) == {"lm", "extractive", "verified"}


def test_eval_runs_the_modes_side_by_side(tmp_path, capsys):
    from declrag.cli import main
    from declrag.testing import ScriptedLM

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rome.txt").write_text("Rome is the capital of Italy. The Colosseum is an amphitheatre in Rome.")
    (docs / "paris.txt").write_text("Paris is the capital of France. The Eiffel Tower stands in Paris.")
    assert main(["index", str(docs), "--store", str(tmp_path / "s"), "-q"]) == 0
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "a", "question": "What is the capital of Italy?", "answers": ["Rome"]}\n'
                    '{"id": "b", "question": "Where does the Eiffel Tower stand?", "answers": ["Paris"]}\n')
    capsys.readouterr()
    with using_lm(ScriptedLM({}, {"answer": "Rome is the capital of Italy [1]. Napoleon built it in 1805 [1]."})):
        code = main(["eval", "--dataset", str(gold), "--store", str(tmp_path / "s"), "--modes", "lm,extractive,verified",
                     "--metrics", "faithfulness,sia,token_match", "--runs", str(tmp_path / "runs"), "--name", "m",
                     "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "extractive - lm" in out and "verified - lm" in out and "faithfulness" in out
    rows = {m: [json.loads(x) for x in (tmp_path / "runs" / f"m-{m}" / "records.jsonl").read_text().splitlines()]
            for m in ("lm", "extractive", "verified")}
    assert all(r["metrics"]["faithfulness"] == 1.0 for r in rows["extractive"])
    assert all("Napoleon" in r["answer"] for r in rows["lm"])
    assert all("Napoleon" not in r["answer"] and r["dropped_sentences"] == 1 for r in rows["verified"])


def test_extractive_reads_the_conversation(minilm, tmp_path):
    """A follow-up that names nothing is answered from what the conversation was about (with the turns left out,
    "What is its capital city?" picks Rome's sentence here)."""
    from declrag.testing.store_contract import TEXTS

    store = LanceStore(tmp_path / "s")
    docs, chunks, _ = corpus(HashEmbedder())
    store.upsert(docs, chunks, minilm.embed_documents([c.text for c in chunks]))
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive", "extract": {
        "min_score": 0.0, "max_sentences": 1, "require_details": False, "conversation_weight": 0.5}},
        "history": {"query": "off"}})  # the search ignores the turns before: only the answer's choice reads them
    prog = RAGProgram(cfg, store=store, embedder=minilm)
    history = [{"role": "user", "content": "Tell me about Japan."}, {"role": "assistant", "content": "Gladly."}]
    a = prog(question="What is its capital city?", history=history)
    assert a.answer == f"{TEXTS['tokyo'][0]} [{a.citations[0]['n']}]" and a.citations[0]["doc_id"] == "tokyo"


def test_a_code_block_s_lines_are_candidates_of_their_own_with_the_line_that_introduces_them():
    text = ("Settings are listed above.\n\nRun the reset command:\n\n```bash\nschedctl reset --all --keep-logs\n"
            "```\nIt takes a minute.")
    got = {p.text: (p.code, p.lead) for p in candidates([text], 300, wrapped=True)}
    assert got["schedctl reset --all --keep-logs"] == (True, "Run the reset command:")
    assert "```bash" not in got and "```" not in got  # a fence is no sentence
    assert got["It takes a minute."] == (False, "")
    # a passage cut from a document may start inside a block: its lines up to the bare closing fence are code
    tail = "--keep-logs --force\n```\n\nThe reset takes a minute."
    assert {p.text: p.code for p in candidates([tail], 300)} == {"--keep-logs --force": True,
                                                                 "The reset takes a minute.": False}


def test_a_command_question_is_answered_with_the_command_line():
    passages = ["| `alpha_limit` | integer | 244 | Upper bound of the alpha stage. |\n"
                "| `bravo_limit` | integer | 607 | Upper bound of the bravo stage. |\n\n## Resetting\n\n"
                "Run the reset command:\n\n```bash\nschedctl reset --all --keep-logs\n```"]
    emb = HashEmbedder()
    got = extract("Which command resets the scheduler?", passages, emb.embed_documents,
                  emb.embed_query("Which command resets the scheduler?"), type_weight=0.2, min_score=0.0)
    assert "schedctl reset --all --keep-logs" in [p.text for p in got.pieces]


def test_the_answer_shows_the_text_as_read_and_cites_it_as_written():
    passages = ["The calibra-\ntion of the pitch sensor is re-\npeated every ninety days. The oﬃcial ﬁgure is 12."]
    emb = HashEmbedder()
    got = extract("How often is the calibration of the pitch sensor repeated?", passages, emb.embed_documents,
                  emb.embed_query("How often is the calibration of the pitch sensor repeated?"), min_score=0.0,
                  max_sentences=1, wrapped=True)
    [piece] = got.pieces
    assert passages[0][piece.start:piece.end] == piece.text and "calibra-\ntion" in piece.text
    assert got.text() == "The calibration of the pitch sensor is repeated every ninety days. [1]"
