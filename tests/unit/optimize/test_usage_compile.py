"""`declrag compile --usage SOURCE` (`declrag.optimize._usage`, `declrag.optimize._select.by_usage`): a served program's
rated questions become real gold, and they have the last word on what ships; bad sources get one clear line."""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from declrag.cli import main
from declrag.errors import DeclragError
from declrag.golden import Example, GoldenSet
from declrag.optimize import Budget, CompileOptions, compile
from declrag.optimize._select import CHECK_MARGIN, DOCUMENT_MARGIN, select
from declrag.optimize._objective import score
from declrag.optimize._space import apply, read_space
from declrag.optimize._usage import DECIDES, usage_questions
from declrag.pipeline.stages.select._explore import settings
from declrag.types import Chunk, Document, GoldSpan, Hit
from declrag.usage import UsageStore, golden_rows, row_of, span_hash

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
    assert u.counts == {"questions": 6, "helpful": 3, "not_helpful": 2, "unrated": 1, "stale": 1, "deleted": 1,
                        "changed": 0, "fair": 1}
    gold = {e.question.lower(): e for e in u.gold}
    assert set(gold) == {"what is the capital of france?", "which tower stands in paris?", "where is the colosseum?"}
    france = gold["what is the capital of france?"]
    assert [(g.doc, g.start, g.end) for g in france.spans] == [("paris", 0, 31)]  # the cited passage, not rome
    colosseum = gold["where is the colosseum?"]
    assert [(g.doc, DOCS[1].text[g.start:g.end]) for g in colosseum.spans] == [("rome", "amphitheatre in Rome")]
    assert all(e.metadata["kind"] == "usage" for e in u.gold) and france.metadata["asked"] == 2
    assert u.summary()["decides"] is False and u.summary()["need"] == DECIDES
    assert colosseum.metadata["fair"] and not france.metadata["fair"]  # a correction is fair; its own passage is not


def test_rated_spans_in_sentences_a_synthetic_set_took_out_are_gold_on_the_served_documents(tmp_path):
    """A synthetic set scores its own questions over a copy of the documents with its inverse-cloze sentences taken
    out; the users asked theirs of the documents served, so their spans are judged there: none lost to the copy."""
    served = "Rome is old. The Colosseum is an amphitheatre. Rome has many fountains."
    cut = "The Colosseum is an amphitheatre. "
    copy = Document("rome", served.replace(cut, ""), metadata={"removed": [[13, cut]]})
    assert copy.original().text == served
    fountains, colosseum = served.index("Rome has"), served.index(cut)
    rows = [{"id": "u1", "question": "What does Rome have?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": fountains, "end": len(served)}]},
            {"id": "u2", "question": "What is the Colosseum?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": colosseum, "end": colosseum + len(cut) - 1,
                        "hash": span_hash(cut[:-1])}]}]
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    u = usage_questions(tmp_path / "u.jsonl", [copy])
    assert [served[g.start:g.end] for e in u.gold for g in e.spans] == ["Rome has many fountains.", cut[:-1]]
    assert u.counts["stale"] == 0


def test_a_span_in_a_document_since_deleted_or_changed_is_stale_and_says_which(tmp_path):
    docs = [Document("rome", "Rome is old. The Colosseum is a stadium now.")]
    was = "Rome is old. The Colosseum is an amphitheatre."
    rows = [{"id": "u1", "question": "How old is Rome?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": 0, "end": 12, "hash": span_hash(was[:12])}]},
            {"id": "u2", "question": "What is the Colosseum?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "rome", "start": 13, "end": 46, "hash": span_hash(was[13:46])}]},
            {"id": "u3", "question": "Where is Paris?", "metadata": {"rating": "helpful"},
             "spans": [{"doc": "paris", "start": 0, "end": 10}]}]
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    u = usage_questions(tmp_path / "u.jsonl", docs)
    assert [e.id for e in u.gold] == ["u1"]  # the sentence that did not change
    assert (u.counts["stale"], u.counts["deleted"], u.counts["changed"]) == (2, 1, 1)


def test_an_answer_records_the_fingerprint_of_what_it_cites_and_the_export_keeps_it(tmp_path):
    text = "Paris is the capital of France. The Eiffel Tower stands in Paris."
    hit = Hit(Chunk("paris#0", "paris", text, 0, len(text), 0), 0.9, text=text, start=0, end=len(text))
    payload = {"id": "a1", "answer": "Paris [1]", "abstained": False,
               "citations": [{"n": 1, "chunk_id": "docs/paris#0", "doc_id": "docs/paris", "span": [0, len(text)],
                              "quotes": [[0, 31]]}]}  # a served citation names its document by its public path
    row = row_of(payload, [hit], route="/v1/ask", program="demo", version="v1", question="Capital of France?",
                 where=None, history=[])
    assert row["citations"][0]["hash"] == span_hash(text) and row["citations"][0]["quote_hashes"] == [
        span_hash(text[:31])]
    s = UsageStore(tmp_path / "u.sqlite3")
    s.add_answers([row])
    s.add_feedback("a1", True, citation=1)
    [exported] = golden_rows(s.records())
    s.close()
    assert exported["spans"] == [{"doc": "docs/paris", "start": 0, "end": 31, "hash": span_hash(text[:31])}]


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
    return SimpleNamespace(number=number, values=[value], params={"lexical": lexical}, user_attrs={})


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


def test_the_served_programs_own_helpful_ratings_never_choose_a_program():
    """A helpful rating of the served program's own passages names a passage it found: however many, they can keep
    the baseline, never ship a change the held-out questions do not back."""
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]
    comp, base, lex = _comp(held), _trial(0, 0.5, False), _trial(1, 0.7, True)
    chosen, why = select(comp, [base, lex], base, lex, scorer(0.1))
    assert chosen is base and "ict questions' gain does not hold" in why["candidates"][0]["why"]  # no labels: no
    users = [_ex(i, "usage") for i in range(3 * DECIDES)]
    chosen, why = select(comp, [base, lex], base, lex, scorer(0.1), users)
    assert chosen is base and not why["usage"]["decides"] and why["usage"]["questions"] == 3 * DECIDES


SPACE = """name: u
objective: {metrics: {ndcg@budget: 1.0}}
split: {source: train, test_split: test, fractions: {dev: 1.0}, seed: 13}
params:
  alpha:  {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.05}
  fusion: {path: retrieve.fusion, type: categorical, choices: [relative, ranked]}
"""


def _explored(i: int, served: dict, changes: list[dict]) -> Example:
    return Example(id=f"usage-{i}", question=f"q{i}", gold={"d": 1}, metadata={
        "kind": "usage", "fair": True, "explored": {"served": served, "changes": changes}})


def test_fair_questions_choose_among_the_rankers_they_were_explored_with(tmp_path):
    """nq-long's case: more weight on the vector leg loses on both synthetic writers, so the search never leads with
    it; the users' ratings of explored answers (the served program's neighbours multileaved) ship it."""
    (tmp_path / "u.yaml").write_text(SPACE)
    space = read_space(tmp_path / "u.yaml")
    held = [_ex(i, "keywords") for i in range(30)] + [_ex(i, "ict") for i in range(30)]
    comp = SimpleNamespace(**{**vars(_comp(held)), "space": space})
    values = space.baseline_values()
    served = settings(apply(space.base, values, space.params))
    changes = [{"retrieve.alpha": 0.25}, {"retrieve.alpha": 0.75}, {"retrieve.fusion": "ranked"},
               {"retrieve.named": True}]  # the space has no parameter for the named search: not a candidate
    lift = {0.75: 0.15, 0.25: -0.05}

    def score(comp, params, examples, label):
        _, out = scorer(0.0)(comp, {}, examples, label)
        return {}, [x + (lift.get(params.get("alpha"), -0.1 if params.get("fusion") == "ranked" else 0.0)
                         + random.Random(f"{e.id}{params}").uniform(-0.05, 0.05)) * (e.metadata["kind"] == "usage")
                    for x, e in zip(out, examples)]

    base = SimpleNamespace(number=0, values=[0.5], params=values, user_attrs={"baseline": True})
    low = SimpleNamespace(number=3, values=[0.6], params={**values, "alpha": 0.25}, user_attrs={})
    fair = [_explored(i, served, changes) for i in range(DECIDES + 10)]
    chosen, why = select(comp, [base, low], base, low, score, fair)
    assert chosen.params == {**values, "alpha": 0.75} and chosen.user_attrs["ranker"] == "retrieve.alpha=0.75"
    assert chosen.number > 3 and why["usage"]["decides"] and why["usage"]["chosen"] == chosen.number
    names = {r["name"] for r in why["usage"]["candidates"]}
    assert names == {"trial 3", "retrieve.alpha=0.75", "retrieve.fusion=ranked"}  # the study's own trial reused
    assert why["why"].startswith(f"your users' fair rated questions decide ({DECIDES + 10}): retrieve.alpha=0.75 "
                                 "has the highest lower bound"), why["why"]
    # a served program that loses on them (SciFact's) is taken back: the baseline ships
    worse = {**values, "alpha": 0.2}
    lift.update({0.2: -0.1, 0.0: -0.2, 0.45: -0.02, 0.75: 0.0})
    fair = [_explored(i, settings(apply(space.base, worse, space.params)),
                      [{"retrieve.alpha": 0.0}, {"retrieve.alpha": 0.45}]) for i in range(DECIDES)]
    chosen, why = select(comp, [base, low], base, low, score, fair)
    assert chosen is base and "the served program" in {r["name"] for r in why["usage"]["candidates"]}
    assert why["why"].endswith("not above 0, the baseline ships"), why["why"]


def test_a_ranker_the_fair_questions_choose_must_not_find_fewer_of_their_documents(tmp_path):
    """SciFact's case: with every answer explored and rated, a window of 1 finds the words the answers took more
    often (its passages hold their neighbours) and, within the same budget, fewer of the documents; its users want
    the document. Checked on the same fair questions by their documents, it does not ship; alpha .75, which loses
    nothing there, does."""
    (tmp_path / "u.yaml").write_text(SPACE + "  window: {path: retrieve.window, type: int, low: 0, high: 1}\n")
    space = read_space(tmp_path / "u.yaml")
    comp = SimpleNamespace(**{**vars(_comp([_ex(i, "ict") for i in range(40)])), "space": space})
    values = space.baseline_values()
    served = settings(apply(space.base, values, space.params))
    base = SimpleNamespace(number=0, values=[0.5], params=values, user_attrs={"baseline": True})

    def scored(lift_words: dict, lift_documents: dict):
        def score(comp, params, examples, label):
            change = next((f"{k}={v}" for k, v in params.items() if values.get(k) != v), "")
            out = []
            for e in examples:
                noise = random.Random(f"{e.id}{change}").uniform(-0.02, 0.02)
                lift = (lift_words if e.spans else lift_documents).get(change, 0.0)
                out.append(0.5 + (lift + noise) * (e.metadata["kind"] == "usage"))
            return {}, out
        return score

    fair = [replace(_explored(i, served, [{"retrieve.window": 1}, {"retrieve.alpha": 0.75}]),
                    spans=(GoldSpan(doc="d", start=0, end=40),)) for i in range(60)]
    chosen, why = select(comp, [base], base, base, scored({"window=1": 0.15}, {"window=1": -0.05}), fair)
    assert chosen is base, why
    assert why["why"].startswith("your users' fair rated questions decide (60): retrieve.window=1 has the highest")
    assert why["why"].endswith(f"below -{DOCUMENT_MARGIN}): the baseline ships"), why["why"]
    assert [c["name"] for c in why["usage"]["by_document"]] == ["retrieve.window=1"]
    assert why["usage"]["by_document"][0]["gain"] < -0.04
    # window leads on the words and is checked first; alpha .75, next, loses nothing by documents: it ships
    chosen, why = select(comp, [base], base, base, scored({"window=1": 0.15, "alpha=0.75": 0.1},
                                                          {"window=1": -0.05, "alpha=0.75": 0.0}), fair)
    assert chosen.user_attrs.get("ranker") == "retrieve.alpha=0.75", why["why"]
    assert [c["name"] for c in why["usage"]["by_document"]] == ["retrieve.window=1", "retrieve.alpha=0.75"]
    assert why["why"].endswith("retrieve.alpha=0.75 ships") and why["usage"]["chosen"] == chosen.number


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


def _export(path: Path, n: int, explored: dict | None = None) -> None:
    """``n`` rated questions about the tiny corpus, as `declrag usage export` writes them (``explored``: the
    rankers each was explored with)."""
    corpus = {json.loads(x)["_id"]: json.loads(x)["text"] for x in (TINY / "corpus.jsonl").read_text().splitlines()}
    rows = []
    for i in range(n):
        doc = sorted(corpus)[i % len(corpus)]
        first = corpus[doc].split(". ")[0]
        rows.append({"id": f"usage-{i}", "question": f"Tell me, {'please, ' * (i // 6)}about {first.split()[0]}",
                     "spans": [{"doc": doc, "start": 0, "end": len(first)}], "gold": {doc: 1},
                     "metadata": {"source": "usage", "asked": 1, "version": "v1", "rating": "helpful",
                                  **({"explored": explored} if explored else {})}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_compile_reads_a_usage_export_and_says_what_it_used(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("name: u\nobjective: {metrics: {ndcg@budget: 1.0}}\n"
                     "split: {fractions: {train: 0.25, dev: 0.5, test: 0.25}, seed: 3}\n"
                     "params:\n  k: {path: retrieve.k, type: int, low: 1, high: 3}\nprompt_optimizer: {name: none}\n")
    sp = read_space(space)
    _export(tmp_path / "usage.jsonl", DECIDES + 4, {
        "served": settings(apply(sp.base, sp.baseline_values(), sp.params)),
        "changes": [{"retrieve.k": 2}, {"retrieve.k": 3}]})
    s = compile(CompileOptions(space, str(TINY / "gold.jsonl"), "u", tmp_path / "runs", Budget(max_trials=3),
                               progress=False, usage=tmp_path / "usage.jsonl"))
    assert s.summary["usage"]["gold"] == DECIDES + 4 and s.summary["usage"]["decides"]
    sel = s.selection
    assert sel["applied"] and sel["usage"]["questions"] == DECIDES + 4, sel
    assert sel["why"].startswith(f"your users' fair rated questions decide ({DECIDES + 4})"), sel["why"]
    assert {r["name"] for r in sel["usage"]["candidates"]} <= {"retrieve.k=2", "retrieve.k=3", "trial 1", "trial 2"}
    assert len(sel["usage"]["candidates"]) == 2  # the two rankers, as the study's trials where it has them
    # the command: what it read, in one line; a source that is not one, in one line, and nothing written
    code = main(["compile", "--space", str(space), "--dataset", str(TINY / "gold.jsonl"), "--name", "v",
                 "--runs", str(tmp_path / "runs"), "--max-trials", "3", "-q", "--usage", str(tmp_path / "usage.jsonl")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"usage {tmp_path / 'usage.jsonl'}: {DECIDES + 4} questions ({DECIDES + 4} rated helpful" in out.out
    assert f"{DECIDES + 4} of them fair" in out.out
    code = main(["compile", "--space", str(space), "--dataset", str(TINY / "gold.jsonl"), "--name", "w",
                 "--runs", str(tmp_path / "runs"), "-q", "--usage", str(tmp_path / "nope.sqlite3")])
    err = capsys.readouterr().err
    assert code == 2 and "no such usage store" in err and "Traceback" not in err, err
    assert not (tmp_path / "runs" / "w" / "compile.json").exists()  # read first: the name is still free


def test_users_questions_are_scored_on_the_served_documents_and_the_sets_own_on_its_copy():
    """`score` asks a rated question of the program as it ships (over the served documents, `Objective.shipping`)
    and the synthetic set's own questions of the trial's program (over its copy), each in its place."""
    asked: list[tuple[str, str]] = []
    copy_prog, served_prog = SimpleNamespace(name="copy"), SimpleNamespace(name="served")

    def retrieval_scores(prog, examples):
        asked.extend((prog.name, e.id) for e in examples)
        return {"ndcg@10": 1.0 if prog is served_prog else 0.5}

    comp = SimpleNamespace(space=SimpleNamespace(objective=SimpleNamespace(retrieval_only=True,
                                                                           metrics={"ndcg@10": 1.0})),
                           shipping=lambda prog: served_prog, retrieval_scores=retrieval_scores)
    copy_prog.embedder = served_prog.embedder = SimpleNamespace(embed_queries=lambda qs: None)
    examples = [Example(id="s1", question="q1", gold={"d": 1}),
                Example(id="u1", question="q2", gold={"d": 1}, metadata={"kind": "usage"}),
                Example(id="s2", question="q3", gold={"d": 1})]
    result, per = score(comp, copy_prog, examples, "held out")
    assert sorted(asked) == [("copy", "s1"), ("copy", "s2"), ("served", "u1")]
    assert per == [0.5, 1.0, 0.5] and set(result["parts"]) == {"golden", "usage"}
