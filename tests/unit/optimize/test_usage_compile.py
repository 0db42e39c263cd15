"""`declrag compile --usage SOURCE` (`declrag.optimize.usage`, `declrag.optimize.select.by_usage`): a served program's
rated questions become real gold, and they have the last word on what ships; bad sources get one clear line."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from declrag.cli import main
from declrag.errors import DeclragError
from declrag.golden import Example, GoldenSet
from declrag.optimize import Budget, CompileOptions, compile
from declrag.optimize.select import CHECK_MARGIN, select
from declrag.optimize.usage import DECIDES, usage_questions
from declrag.types import Document
from declrag.usage import UsageStore

TINY = Path(__file__).parents[2] / "data" / "tiny"
DOCS = [Document("paris", "Paris is the capital of France. The Eiffel Tower stands in Paris."),
        Document("rome", "Rome is the capital of Italy. The Colosseum is an amphitheatre in Rome.")]


def answer(i: int, question: str, cites: list[tuple[str, int, int]]) -> dict:
    return {"id": f"a{i}", "ts": time.time() + i, "route": "/v1/ask", "program": "demo", "version": "v1",
            "question": question, "history": [], "filter": None,
            "passages": [{"chunk_id": f"{d}#0", "doc_id": d, "span": [s, e], "score": 0.5} for d, s, e in cites],
            "citations": [{"n": n, "chunk_id": f"{d}#0", "doc_id": d, "span": [s, e]}
                          for n, (d, s, e) in enumerate(cites, 1)],
            "answer": "...", "abstained": False, "reason": None, "latency_ms": 5.0}


def test_rated_questions_become_gold_where_this_corpus_still_holds_them(tmp_path):
    s = UsageStore(tmp_path / "u.sqlite3")
    s.add_answers([
        answer(1, "What is the capital of France?", [("paris", 0, 31), ("rome", 0, 29)]),
        answer(2, "Which tower stands in Paris?", [("paris", 32, 65)]),
        answer(3, "Where is the Colosseum?", [("paris", 0, 31)]),
        answer(4, "What is the capital of Italy?", [("rome", 0, 29)]),
        answer(5, "Who built the pyramids?", [("cairo", 0, 30)]),  # a document this corpus does not have
        answer(6, "What is in Rome?", [("rome", 30, 74)]),
        answer(7, "what is the capital of  FRANCE?", [("paris", 0, 31)])])  # asked again, rated again
    s.add_feedback("a1", True, citation=1)  # the first citation answered
    s.add_feedback("a2", True)  # helpful, no citation named: every cited passage is gold
    s.add_feedback("a3", False, correction="amphitheatre in Rome")  # wrong passage; the user says what answers
    s.add_feedback("a4", False)  # not helpful, nothing said: no label
    s.add_feedback("a5", True, citation=1)
    s.add_feedback("a7", True, citation=1)
    s.close()
    u = usage_questions(tmp_path / "u.sqlite3", DOCS)
    assert u.counts == {"questions": 6, "helpful": 3, "not_helpful": 2, "unrated": 1, "stale": 1}
    gold = {e.question.lower(): e for e in u.gold}
    assert set(gold) == {"what is the capital of france?", "which tower stands in paris?", "where is the colosseum?"}
    france = gold["what is the capital of france?"]
    assert [(g.doc, g.start, g.end) for g in france.spans] == [("paris", 0, 31)]  # the cited passage, not rome
    colosseum = gold["where is the colosseum?"]
    assert [(g.doc, DOCS[1].text[g.start:g.end]) for g in colosseum.spans] == [("rome", "amphitheatre in Rome")]
    assert all(e.metadata["kind"] == "usage" for e in u.gold) and france.metadata["asked"] == 2
    assert u.summary()["decides"] is False and u.summary()["need"] == DECIDES


def test_spans_of_the_served_documents_move_onto_a_synthetic_sets_copy(tmp_path):
    """A synthetic set scores over a copy of the documents with its inverse-cloze sentences taken out; the served
    program answers over the documents with them put back, so a rated span is moved onto the copy."""
    served = "Rome is old. The Colosseum is an amphitheatre. Rome has many fountains."
    cut = "The Colosseum is an amphitheatre. "
    copy = Document("rome", served.replace(cut, ""), metadata={"removed": [[13, cut]]})
    assert copy.original().text == served
    fountains = served.index("Rome has")
    rows = [{"id": "u1", "question": "What does Rome have?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": fountains, "end": len(served)}]},
            {"id": "u2", "question": "What is the Colosseum?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": served.index(cut), "end": served.index(cut) + len(cut)}]}]
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    u = usage_questions(tmp_path / "u.jsonl", [copy])
    (g,) = u.gold[0].spans
    assert copy.text[g.start:g.end] == "Rome has many fountains."
    assert len(u.gold) == 1 and u.counts["stale"] == 1  # a span wholly inside the taken-out sentence: not gold here


def test_a_served_file_name_relative_to_the_indexed_folder_finds_its_document(tmp_path):
    """`declrag serve` names files relative to the folder it indexed; the compile's set names them by full path."""
    docs = [Document("/home/me/docs/a.md", "Alpha is first."), Document("/home/me/docs/b/a.md", "Beta is second.")]
    rows = [{"id": f"u{i}", "question": "Which?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": name, "start": 0, "end": 5}]} for i, name in enumerate(["a.md", "docs/a.md", "b/a.md"])]
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    u = usage_questions(tmp_path / "u.jsonl", docs)
    assert [e.spans[0].doc for e in u.gold] == ["/home/me/docs/a.md", "/home/me/docs/b/a.md"]
    assert u.counts["stale"] == 1  # "a.md" names two documents: not guessed


@pytest.mark.parametrize("source, says", [
    ("nope.sqlite3", "--usage nope.sqlite3: no such usage store"),
    ("nope.jsonl", "--usage nope.jsonl: no such file"),
    ("bad.jsonl", "bad.jsonl:2: not JSON"),
    ("mysql://u@h/db", "not a PostgreSQL URI nor a file"),
])
def test_a_usage_source_that_is_not_one_says_so(tmp_path, monkeypatch, source, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"question": "ok", "metadata": {}}\n{oops\n')
    with pytest.raises(DeclragError) as e:
        usage_questions(source, DOCS)
    assert says in e.value.message


def _ex(i: int, kind: str) -> Example:
    meta = {"synthetic": True, "kind": kind} if kind != "usage" else {"kind": "usage"}
    return Example(id=f"{kind}-{i}", question=f"q{i}", gold={"d": 1}, metadata=meta)


def _comp(held: list[Example]):
    golden = GoldenSet(name="syn", documents=[], splits={"train": [_ex(0, "ict")], "dev": held})
    return SimpleNamespace(golden=golden, splits={}, program=lambda params: params, space=SimpleNamespace(
        split=SimpleNamespace(source="train", test_split="test"), objective=SimpleNamespace(retrieval_only=True),
        synthetic_ships=None))


def _trial(number: int, value: float, lexical: bool):
    return SimpleNamespace(number=number, values=[value], params={"lexical": lexical})


def scorer(real_gain: float):
    """Per-question scores: a lexical program gains on keyword questions, loses on inverse-cloze ones, and gains
    ``real_gain`` on the users' questions; the baseline scores 0.5 with noise."""
    def score(comp, params, examples, label):
        out = []
        for e in examples:
            rng = random.Random(e.id)  # each question's own draws: the same baseline score in every call
            base = 0.5 + rng.uniform(-0.2, 0.2)
            kind = e.metadata["kind"]
            gain = ({"keywords": 0.2, "ict": -0.05, "usage": real_gain}[kind] + rng.uniform(-0.03, 0.03)
                    if params.get("lexical") else 0.0)
            out.append(base + gain)
        return {}, out
    return score


def test_enough_rated_questions_decide_what_ships_over_the_synthetic_writers():
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]
    comp, base, lex = _comp(held), _trial(0, 0.5, False), _trial(1, 0.7, True)
    chosen, why = select(comp, [base, lex], base, lex, scorer(0.1))
    assert chosen is base and "ict questions' gain does not hold" in why["candidates"][0]["why"]  # no labels: no
    users = [_ex(i, "usage") for i in range(DECIDES)]
    chosen, why = select(comp, [base, lex], base, lex, scorer(0.1), users)
    assert chosen is lex and why["why"].startswith(f"your users' rated questions decide ({DECIDES})"), why["why"]
    assert why["usage"]["decides"] and why["usage"]["candidates"][0]["gain"] == pytest.approx(0.1, abs=0.02)
    chosen, why = select(comp, [base, lex], base, lex, scorer(-0.1), users)  # the users' questions lose: no
    assert chosen is base and why["usage"]["chosen"] is None


def test_the_users_questions_choose_among_every_trial_not_only_the_synthetic_leaders():
    """nq-long's case: the one change that real questions reward (more weight on the vector leg) loses on both
    synthetic writers, so it never leads the search; with enough rated questions it still ships."""
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]

    def score(comp, params, examples, label):
        _, out = scorer(0.0)(comp, {}, examples, label)
        lift = params.get("lift", {})
        return {}, [x + lift.get(e.metadata["kind"], 0.0) + random.Random(f"{e.id}{params}").uniform(-.02, .02)
                    * bool(lift) for x, e in zip(out, examples)]

    base = SimpleNamespace(number=0, values=[0.5], params={})
    leaders = [SimpleNamespace(number=i, values=[0.9 - i / 100], params={"lift": {"keywords": 0.1, "usage": -0.05}, "i": i})
               for i in range(1, 7)]
    dense = SimpleNamespace(number=9, values=[0.2], params={"lift": {"keywords": -0.2, "ict": -0.1, "usage": 0.15}})
    trials = [base, *leaders, dense]
    users = [_ex(i, "usage") for i in range(2 * DECIDES)]
    chosen, why = select(_comp(held), trials, base, leaders[0], score, users)
    assert chosen is dense, why["why"]
    u = why["usage"]
    assert u["picked"] == 9 and u["pick"] == u["check"] == DECIDES and u["check_lower"] > 0
    assert len(u["candidates"]) == len(trials) - 1  # every distinct trial but the baseline was scored on them
    assert "trial 9 gains most on half of them (20), and on the other half its gain" in why["why"]


def test_a_few_rated_questions_can_only_keep_the_baseline():
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]

    def agreeing(comp, params, examples, label):  # both writers gain; the users' questions lose
        _, out = scorer(0.0)(comp, {}, examples, label)
        return {}, [x + (({"usage": -0.2}.get(e.metadata["kind"], 0.1)) if params.get("lexical") else 0.0)
                    for x, e in zip(out, examples)]

    comp, base, cand = _comp(held), _trial(0, 0.5, False), _trial(1, 0.7, True)
    assert select(comp, [base, cand], base, cand, agreeing)[0] is cand  # synthetic questions alone: it ships
    few = [_ex(i, "usage") for i in range(8)]
    chosen, why = select(comp, [base, cand], base, cand, agreeing, few)
    assert chosen is base and f"on your users' 8 rated questions it may be worse" in why["why"]
    assert f"below -{CHECK_MARGIN}" in why["why"] and not why["usage"]["decides"]


def test_without_held_out_questions_a_few_rated_ones_can_still_keep_the_baseline():
    """A real golden set cut from one pool has no held-out questions: the search's best ships, unless the users'
    few rated questions see it worse."""
    comp = _comp([])
    comp.golden.splits.pop("dev")
    base, cand = _trial(0, 0.5, False), _trial(1, 0.7, True)
    few = [_ex(i, "usage") for i in range(8)]
    chosen, why = select(comp, [base, cand], base, cand, scorer(-0.2), few)
    assert chosen is base and "may be worse" in why["why"] and why["held_out"] == 0
    assert select(comp, [base, cand], base, cand, scorer(0.05), few)[0] is cand
    assert select(comp, [base, cand], base, cand, scorer(-0.2))[0] is cand  # no usage: the search's best


def test_on_synthetic_questions_only_the_spaces_shippable_parameters_may_change():
    """SciFact's case: both writers back bigger passages, which real claims punish; a space that lets synthetic
    questions ship only alpha and fusion ships the default, and a candidate that changes alpha alone still ships."""
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]
    comp = _comp(held)
    comp.space.synthetic_ships = ["alpha", "fusion"]

    def score(comp, params, examples, label):
        _, out = scorer(0.0)(comp, {}, examples, label)
        return {}, [x + (0.1 if params.get("lift") else 0.0) for x in out]

    base = SimpleNamespace(number=0, values=[0.5], params={"alpha": 0.5, "window": 0})
    bigger = SimpleNamespace(number=1, values=[0.9], params={"alpha": 0.5, "window": 1, "lift": 1})
    chosen, why = select(comp, [base, bigger], base, bigger, score)
    assert chosen is base and "no finished trial differs from it only in alpha, fusion" in why["why"], why
    assert why["applied"] and why["chosen"] is None and why["held_out"] == 60
    comp.space.synthetic_ships = None  # a space that names none: any parameter, as before
    assert select(comp, [base, bigger], base, bigger, score)[0] is bigger
    comp.space.synthetic_ships = ["alpha", "fusion", "lift"]
    alpha = SimpleNamespace(number=2, values=[0.8], params={"alpha": 0.3, "window": 0, "lift": 1})
    assert select(comp, [base, bigger, alpha], base, bigger, score)[0] is alpha
    users = [_ex(i, "usage") for i in range(DECIDES * 2)]  # real questions choose among every parameter
    assert select(comp, [base, bigger], base, bigger, lambda *a: score(*a), users)[1]["usage"]["picked"] == 1


def _export(path: Path, n: int) -> None:
    """``n`` rated questions about the tiny corpus, as `declrag usage export` writes them."""
    corpus = {json.loads(x)["_id"]: json.loads(x)["text"] for x in (TINY / "corpus.jsonl").read_text().splitlines()}
    rows = []
    for i in range(n):
        doc = sorted(corpus)[i % len(corpus)]
        first = corpus[doc].split(". ")[0]
        rows.append({"id": f"usage-{i}", "question": f"Tell me, {'please, ' * (i // 6)}about {first.split()[0]}",
                     "spans": [{"doc": doc, "start": 0, "end": len(first)}], "gold": {doc: 1},
                     "metadata": {"source": "usage", "asked": 1, "version": "v1", "rating": "helpful"}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_compile_reads_a_usage_export_and_says_what_it_used(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("name: u\nobjective: {metrics: {ndcg@budget: 1.0}}\n"
                     "split: {fractions: {train: 0.25, dev: 0.5, test: 0.25}, seed: 3}\n"
                     "params:\n  k: {path: retrieve.k, type: int, low: 1, high: 3}\nprompt_optimizer: {name: none}\n")
    _export(tmp_path / "usage.jsonl", DECIDES + 4)
    s = compile(CompileOptions(space, str(TINY / "gold.jsonl"), "u", tmp_path / "runs", Budget(max_trials=3),
                               progress=False, usage=tmp_path / "usage.jsonl"))
    assert s.summary["usage"]["gold"] == DECIDES + 4 and s.summary["usage"]["decides"]
    sel = s.selection
    assert sel["applied"] and sel["usage"]["questions"] == DECIDES + 4, sel
    assert sel["why"].startswith(f"your users' rated questions decide ({DECIDES + 4})") or \
        sel["why"] == "every finished trial is the baseline's program", sel["why"]
    # the command: what it read, in one line; a source that is not one, in one line, and nothing written
    code = main(["compile", "--space", str(space), "--dataset", str(TINY / "gold.jsonl"), "--name", "v",
                 "--runs", str(tmp_path / "runs"), "--max-trials", "3", "-q", "--usage", str(tmp_path / "usage.jsonl")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"usage {tmp_path / 'usage.jsonl'}: {DECIDES + 4} questions ({DECIDES + 4} rated helpful" in out.out
    code = main(["compile", "--space", str(space), "--dataset", str(TINY / "gold.jsonl"), "--name", "w",
                 "--runs", str(tmp_path / "runs"), "-q", "--usage", str(tmp_path / "nope.sqlite3")])
    err = capsys.readouterr().err
    assert code == 2 and "no such usage store" in err and "Traceback" not in err, err
    assert not (tmp_path / "runs" / "w" / "compile.json").exists()  # read first: the name is still free
