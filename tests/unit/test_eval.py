"""`declrag eval` and the Evaluation runner: records, summary, report, resume, bounds, probes, compare,
and clear errors on bad golden sets and options."""

from __future__ import annotations

import json

import pytest

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.evaluate.evaluation import EvalSpec, Evaluation, compare
from declrag.golden import Example, GoldenSet, load_golden
from declrag.lm import using_lm
from declrag.pipeline.program import RAGProgram
from declrag.stores._lancedb import LanceStore
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.testing.store_contract import corpus

EXAMPLES = [
    Example(id="q1", question="What is the capital of Italy?", answers=("Rome",), gold={"rome": 1}),
    Example(id="q2", question="Where is the Eiffel Tower?", answers=("Paris",), gold={"paris": 1}),
    Example(id="q3", question="What can be seen from Tokyo?", answers=("Mount Fuji",), gold={"tokyo": 1}),
    Example(id="q4", question="Who is the king of Berlin?", answerable=False, gold={"berlin": 1}),
    Example(id="q5", question="What is the capital of Mars?", answerable=False),
]
METRICS = ["em", "f1", "token_match", "faithfulness", "sia", "hit@1", "abstained"]


@pytest.fixture
def setup(tmp_path):
    emb = HashEmbedder()
    store = LanceStore(tmp_path / "store")
    docs, chunks, vecs = corpus(emb)
    store.upsert(docs, chunks, vecs)
    golden = GoldenSet("tiny", docs, {"dev": list(EXAMPLES)})
    prog = RAGProgram(ProgramConfig(), store=store, embedder=emb)
    return prog, golden, tmp_path


def run(prog, golden, out, lm, **spec):
    with using_lm(lm):
        return Evaluation(prog, golden, EvalSpec(dataset="tiny", split="dev", metrics=METRICS, **spec), out,
                          progress=False).run()


def answers_rome():
    return ScriptedLM({}, {"answer": "Rome is the capital of Italy [1]."})


def test_records_summary_and_report(setup):
    prog, golden, tmp = setup
    s = run(prog, golden, tmp / "run", answers_rome())
    recs = [json.loads(x) for x in (tmp / "run" / "records.jsonl").read_text().splitlines()]
    assert s["n"] == 5 and len(recs) == 5
    assert set(s["metrics"]) == set(METRICS)
    for v in s["metrics"].values():
        assert set(v) == {"mean", "ci95", "n"} and (v["mean"] is None or v["ci95"][0] <= v["mean"] <= v["ci95"][1])
    assert {"usage", "wall_s", "confusion", "abstention", "latency_ms"} <= set(s)
    q1 = next(r for r in recs if r["id"] == "q1")
    assert q1["metrics"]["em"] == 0.0 and q1["metrics"]["f1"] > 0 and q1["metrics"]["token_match"] == 1.0
    assert q1["passages"][0]["chunk_id"] and q1["passages"][0]["text"] and q1["citations"][0]["n"] == 1
    assert q1["usage"]["program"]["total"]["calls"] >= 0 and "judges" in q1["usage"]
    q4 = next(r for r in recs if r["id"] == "q4")
    assert q4["metrics"]["sia"] == 0.0 and q4["flags"]["sia"]["rule"] == "answered an unanswerable question"
    assert sum(s["confusion"].values()) == 4  # q5 has no gold passage
    assert s["abstention"]["n_unanswerable"] == 2
    for f in ("summary.json", "report.md", "report.html", "config.json", "plots/metrics.png"):
        assert (tmp / "run" / f).exists(), f
    assert "<table>" in (tmp / "run" / "report.html").read_text()


def test_resume_computes_only_what_is_missing(setup):
    prog, golden, tmp = setup
    run(prog, golden, tmp / "run", answers_rome())
    lines = (tmp / "run" / "records.jsonl").read_text().splitlines()
    (tmp / "run" / "records.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40] + "\n")  # a crash mid-write
    lm = answers_rome()
    s = run(prog, golden, tmp / "run", lm)
    assert s["n"] == 5 and s["computed"] == 2  # the cut line and the missing one
    assert len((tmp / "run" / "records.jsonl").read_text().splitlines()) == 6  # the cut line stays, ignored
    again = answers_rome()
    s = run(prog, golden, tmp / "run", again)
    assert s["computed"] == 0 and again.ms == 0.0  # nothing asked of the LM


def test_new_metrics_are_added_from_the_records(setup):
    prog, golden, tmp = setup
    run(prog, golden, tmp / "run", answers_rome())
    lm = answers_rome()
    with using_lm(lm):
        s = Evaluation(prog, golden, EvalSpec(dataset="tiny", split="dev", metrics=METRICS + ["rougeL"]), tmp / "run",
                       progress=False).run()
    assert lm.ms == 0.0 and s["metrics"]["rougeL"]["n"] == 5


def test_bounds_and_probes(setup):
    prog, golden, tmp = setup
    lm = ScriptedLM({"from what you know": {"answer": "I don't know."}}, {"answer": "I don't know."})
    s = run(prog, golden, tmp / "run", lm, closed_book=True, oracle=True, probes=True)
    assert s["bounds"]["closed_book"]["abstention"] == 1.0 and s["bounds"]["oracle"]["abstention"] == 1.0
    assert s["bounds"]["oracle"]["sia"]["mean"] == pytest.approx(2 / 5)  # right to abstain only on q4, q5
    assert s["probes"] == {"no_context_abstention": 1.0, "irrelevant_context_abstention": 1.0}
    assert "Reference bounds" in (tmp / "run" / "report.md").read_text()


def test_compare_tells_a_real_gain_from_noise(setup):
    prog, golden, tmp = setup
    run(prog, golden, tmp / "a", ScriptedLM({}, {"answer": "I don't know."}))
    run(prog, golden, tmp / "b", answers_rome())
    r = compare(tmp / "a", tmp / "b")
    assert r["n"] == 5
    assert r["metrics"]["abstained"]["diff"] == -1.0 and r["metrics"]["abstained"]["significant"]
    assert r["metrics"]["em"]["diff"] == -0.4 and r["metrics"]["em"]["ci95"][1] <= 0


def test_sampling_is_seeded(setup):
    prog, golden, tmp = setup
    a = Evaluation(prog, golden, EvalSpec("tiny", "dev", limit=3, seed=1, metrics=["em"]), tmp / "x", progress=False)
    b = Evaluation(prog, golden, EvalSpec("tiny", "dev", limit=3, seed=1, metrics=["em"]), tmp / "y", progress=False)
    assert [e.id for e in a.examples] == [e.id for e in b.examples] and len(a.examples) == 3


@pytest.mark.parametrize("line, message", [
    ('{"id": "a", "answers": ["x"]}', "no `question`"),
    ('{"id": "a", "question": "q?", "answers": [42]}', "reference answer 42 is not a string"),
    ('{"id": "a", "question": "q?", "answers": 7}', "is not a string"),
])
def test_bad_golden_rows_are_named(tmp_path, line, message):
    f = tmp_path / "gold.jsonl"
    f.write_text('{"id": "z", "question": "fine?"}\n' + line + "\n")
    with pytest.raises(DeclragError) as e:
        load_golden(str(f))
    assert f"{f}:2" in str(e.value) and message in str(e.value)


def test_duplicate_ids_are_named(tmp_path):
    f = tmp_path / "gold.jsonl"
    f.write_text('{"id": "a", "question": "q1?"}\n{"id": "b", "question": "q2?"}\n{"id": "a", "question": "q3?"}\n')
    with pytest.raises(DeclragError, match=r"gold.jsonl:3: duplicate example id 'a' \(first on line 1\)"):
        load_golden(str(f))


def test_cli_eval_rejects_unknown_metrics_and_missing_judges(capsys, tmp_path):
    from declrag.cli import main

    f = tmp_path / "gold.jsonl"
    f.write_text('{"id": "a", "question": "q?", "answers": ["x"]}\n')
    assert main(["eval", "--dataset", str(f), "--metrics", "f1,bleu", "--runs", str(tmp_path)]) == 2
    assert "unknown metric 'bleu'" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(f), "--metrics", "sia_llm", "--runs", str(tmp_path)]) == 2
    assert "needs an LLM judge" in capsys.readouterr().err
    assert main(["eval", "--runs", str(tmp_path)]) == 2
    assert "--dataset is required" in capsys.readouterr().err
