"""`declrag synth`: a golden set from a folder of the user's own files (real paragraphs, the real embedder),
loadable with --dataset, split by document, deterministic for a seed, filtered and counted; bad input is one
clear error and writes nothing."""

from __future__ import annotations

import json
import random

import pytest

from declrag.cli import main
from declrag.golden import load_golden
from declrag.synth import Candidate, cloze_query, split_by_document
from declrag.types import GoldSpan

from tests.conftest import shared


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """45 SQuAD v2.0 dev paragraphs (real Wikipedia text) as Markdown, text and HTML files."""
    data = json.loads(shared("squad-v2.0", "dev-v2.0.json").read_text())
    paras = [(a["title"].replace("_", " "), p["context"]) for a in data["data"] for p in a["paragraphs"][:3]][:45]
    d = tmp_path_factory.mktemp("my-docs")
    for i, (title, text) in enumerate(paras):
        if i % 3 == 0:
            (d / f"note-{i}.md").write_text(f"# {title} notes {i}\n\n{text}\n")
        elif i % 3 == 1:
            (d / f"page-{i}.html").write_text(f"<html><head><title>{title} page {i}</title></head>"
                                              f"<body><p>{text}</p></body></html>")
        else:
            (d / f"plain-{i}.txt").write_text(text)
    return d


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.slow
def test_a_folder_becomes_a_golden_set(capsys, tmp_path, folder, minilm):
    out = tmp_path / "mine"
    code, stdout, err = run(capsys, "synth", str(folder), "--out", str(out), "--n", "40", "--generator", "cloze", "-q")
    assert code == 0, err
    assert "questions from 45 documents" in stdout and f"--dataset {out}" in stdout
    golden = load_golden(str(out))  # the folder declares itself (dataset.yaml)
    assert set(golden.splits) == {"train", "dev", "test"}
    examples = [e for s in golden.splits.values() for e in s]
    assert 30 <= len(examples) <= 40
    # gold documents are the ids `declrag index` gives the files, with the same text
    from declrag.api import load_documents

    indexed = {d.id: d for d in load_documents([folder])[0]}
    corpus = {d.id: d for d in golden.documents}
    assert set(corpus) == set(indexed) and all(corpus[i].text == indexed[i].text for i in corpus)
    # 45 documents: split by document, no document's questions in two splits
    assert "Split by document." in golden.description
    docs_of = {name: {g for e in exs for g in e.gold} for name, exs in golden.splits.items()}
    assert not (docs_of["train"] & docs_of["dev"]) and not (docs_of["train"] & docs_of["test"]) \
        and not (docs_of["dev"] & docs_of["test"])
    # provenance, and the filters' evidence
    for e in examples:
        m = e.metadata
        assert m["synthetic"] and m["kind"] in ("cloze", "title") and list(e.gold) == [m["source_doc"]]
        ranks = m["filters"]["round_trip_rank"]
        assert ranks["keyword"] is not None or ranks["vector"] is not None
        if m["kind"] == "cloze":  # a cropped sentence of its span, not the sentence itself
            a, b = m["span"]
            sentence = corpus[m["source_doc"]].text[a:b]
            assert e.question != sentence and all(w in sentence for w in e.question.split())
            assert e.gold_spans() == (GoldSpan(m["source_doc"], a, b),)  # scored on the passages covering it
        else:  # a title question is about its whole document
            assert e.gold_spans() == ()
    from declrag.synth import normalize

    assert len({normalize(e.question) for e in examples}) == len(examples)
    report = json.loads((out / "report.json").read_text())
    assert report["generated"] - sum(report["removed"].values()) >= report["kept"] == len(examples)
    assert "Synthetic" in (out / "dataset.yaml").read_text()
    # the same seed makes the same set; another seed another one
    again = tmp_path / "again"
    assert run(capsys, "synth", str(folder), "--out", str(again), "--n", "40", "--generator", "cloze", "-q")[0] == 0
    assert all((out / f).read_text() == (again / f).read_text() for f in ("train.jsonl", "dev.jsonl", "test.jsonl"))
    other = tmp_path / "other"
    assert run(capsys, "synth", str(folder), "--out", str(other), "--n", "40", "--seed", "14", "--generator", "cloze",
               "-q")[0] == 0
    assert (out / "test.jsonl").read_text() != (other / "test.jsonl").read_text()
    # an existing set is not replaced without --force
    code, _, err = run(capsys, "synth", str(folder), "--out", str(out), "--n", "40", "--seed", "14", "--generator",
                       "cloze", "-q")
    assert code == 2 and "exists" in err and "--force" in err
    assert len(load_golden(str(out)).splits["train"]) == len(golden.splits["train"])
    assert run(capsys, "synth", str(folder), "--out", str(out), "--n", "40", "--seed", "14", "--generator", "cloze",
               "--force", "-q")[0] == 0
    assert (out / "test.jsonl").read_text() == (other / "test.jsonl").read_text()


@pytest.mark.parametrize("args, says", [
    (["{tmp}/src", "--n", "0"], "--n must be at least 30"),
    (["{tmp}/src", "--n", "29"], "a train, dev and test split"),
    (["{tmp}/src", "--model", "nosuch/model-x"], "nosuch"),
    (["{tmp}/nowhere"], "no such file or folder"),
    ([], "nothing to draw questions from"),
    (["{tmp}/empty"], "no documents with text"),
    (["{tmp}/short"], "no passage of at least 30 words"),
])
def test_bad_input_is_one_error_and_writes_nothing(capsys, tmp_path, args, says):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "blank.txt").write_text("   \n")
    (tmp_path / "src").mkdir()
    sentence = "Wind turbines turn the kinetic energy of moving air into electricity. "
    (tmp_path / "src" / "a.txt").write_text(sentence * 9)
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "a.txt").write_text("Wind turbines turn the kinetic energy of moving air into electricity.")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    model = [] if "--model" in argv else ["--model", "none"]
    code, _, err = run(capsys, "synth", *argv, *model, "--out", str(tmp_path / "out"), "-q")
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_cloze_queries_are_cropped_sentences_in_order():
    passage = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
               "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway.")
    rng = random.Random(3)
    for _ in range(20):
        made = cloze_query(passage, 100, rng)
        assert made is not None
        query, (a, b) = made
        sentence = passage[a - 100:b - 100]
        words = query.split()
        assert 4 <= len(words) < len(sentence.split())
        at = 0
        for w in words:  # every word from the sentence, in its order
            at = sentence.index(w, at) + len(w)
    assert cloze_query("Too short.", 0, rng) is None


def test_splits_hold_whole_documents_in_the_declared_proportions():
    rng = random.Random(1)
    cands = [Candidate(question=f"q{i}", kind="cloze", doc_id=f"d{rng.randrange(60)}", span=(0, 1)) for i in range(300)]
    splits = split_by_document(cands, seed=5)
    assert sum(len(v) for v in splits.values()) == 300
    docs = {k: {c.doc_id for c in v} for k, v in splits.items()}
    assert not (docs["train"] & docs["dev"]) and not (docs["train"] & docs["test"]) and not (docs["dev"] & docs["test"])
    assert 0.15 <= len(splits["test"]) / 300 <= 0.3 and 0.15 <= len(splits["dev"]) / 300 <= 0.3
    assert split_by_document(cands, seed=5) == splits


def _scripted(fail_every: int = 5, interrupt_after: int | None = None):
    """A stand-in LM that writes a question of each type from the passage it is given (a few replies with no
    question at all, as a small model gives), and answers from the passage: factoid answers are spans, explanatory
    ones its first sentence. ``interrupt_after`` calls, it raises KeyboardInterrupt (a killed run)."""
    import re as _re

    from declrag.text.keywords import STOPWORDS_EN
    from declrag.testing._fakes import StreamingLM

    calls = {"n": 0}

    def reply(messages: list) -> str:
        calls["n"] += 1
        if interrupt_after is not None and calls["n"] > interrupt_after:
            raise KeyboardInterrupt
        system, user = messages[0]["content"], messages[-1]["content"]
        if "numbered passages" in system:  # the LM grader: the first two of the pool
            return "1, 2"
        passage = user.split("Passage:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        words = [w for w in _re.findall(r"[A-Za-z]{5,}", passage) if w.lower() not in STOPWORDS_EN]
        if "Answer the question" in system:
            return " ".join(passage.split()[:3]) if "shortest exact phrase" in system else passage.split(". ")[0] + "."
        if sum(map(ord, passage[:40])) % fail_every == 0:
            return "Sure! Here is something interesting about it"  # no question: malformed
        if "short fact" in system:
            return f"1. Question: Which {words[2]} is linked to {words[5]} and {words[7]}?"
        if "why" in system:
            return f"Why did {words[1]} {words[3]} lead to {words[6]}?"
        if "does not answer" in system:
            return f"How much did the {words[4]} {words[8]} {words[9]} {words[10]} cost?"
        return f"How are {words[0]} and {words[-1]} related across {words[3]}?"

    return StreamingLM(reply), calls


@pytest.mark.slow
def test_an_lm_writes_typed_questions_with_checked_answers_and_a_killed_run_resumes(tmp_path, folder, minilm,
                                                                                     monkeypatch):
    from declrag.api import load_documents
    from declrag.errors import DeclragError
    from declrag.lm import using_lm
    from declrag.synth import synthesize

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the route is checked up front; the stand-in answers
    route = "openai/smollm2-stand-in"  # a small-model route: the plain-text adapter, as for the local model
    docs = load_documents([folder])[0]
    lm, calls = _scripted()
    with using_lm(lm):
        report = synthesize(docs, tmp_path / "full", 24, model=route, seed=3, progress=False)
    assert report.lm["malformed"] > 0 and report.lm["calls"] == calls["n"]
    assert report.removed.get("malformed model output (no usable question)") == report.lm["malformed"]
    golden = load_golden(str(tmp_path / "full"))
    examples = [e for s in golden.splits.values() for e in s]
    kinds = {e.metadata["kind"] for e in examples}
    assert {"factoid", "explanatory", "unanswerable"} <= kinds
    text = {d.id: d.text for d in golden.documents}
    for e in examples:
        if e.metadata["kind"] == "factoid":  # an exact span of its source document, offset kept
            (a,), (s,) = e.answers, e.answer_starts
            assert text[e.metadata["source_doc"]][s:s + len(a)].lower() == a.lower()
            spans = e.gold_spans()  # the answer's span, and its other places in the gold documents: one credit
            assert GoldSpan(e.metadata["source_doc"], s, s + len(a), 1, a, "answer") in spans or \
                spans == (GoldSpan(e.metadata["source_doc"], s, s + len(a), 1, a),)
            assert all(text[x.doc][x.start:x.end].lower() == a.lower() and x.doc in e.gold for x in spans)
        if e.metadata["kind"] == "unanswerable":
            assert not e.answerable and not e.gold and not e.answers
        if e.metadata["kind"] == "multi":
            assert len(e.gold) >= 2
    assert "with reference answers" in (tmp_path / "full" / "dataset.yaml").read_text()
    # killed after 15 calls, then resumed: the same set as the uninterrupted run, and the done passages not redone
    lm, calls = _scripted(interrupt_after=15)
    with using_lm(lm), pytest.raises(KeyboardInterrupt):
        synthesize(docs, tmp_path / "resumed", 24, model=route, seed=3, progress=False)
    done = len((tmp_path / "resumed.partial" / "generated.jsonl").read_text().splitlines())
    assert done > 0 and not (tmp_path / "resumed").exists()
    with pytest.raises(DeclragError, match="did not finish"):  # a plain rerun does not throw the log away
        synthesize(docs, tmp_path / "resumed", 24, model=route, seed=3, progress=False)
    with pytest.raises(DeclragError, match="seed"):  # another seed's run cannot continue this log
        synthesize(docs, tmp_path / "resumed", 24, model=route, seed=4, progress=False, resume=True)
    lm, calls = _scripted()
    with using_lm(lm):
        again = synthesize(docs, tmp_path / "resumed", 24, model=route, seed=3, progress=False, resume=True)
    assert again.lm["resumed_passages"] == done and calls["n"] < report.lm["calls"]
    for split in golden.splits:
        resumed, full = (tmp_path / d / f"{split}.jsonl" for d in ("resumed", "full"))
        assert resumed.read_text() == full.read_text()
    # a budget stops generation and says so
    lm, calls = _scripted()
    with using_lm(lm):
        capped = synthesize(docs, tmp_path / "capped", 24, model=route, seed=3, progress=False, max_lm_calls=6)
    assert capped.lm["stopped_by"] == "--max-lm-calls 6" and capped.lm["calls"] <= 8
    # an LM grades each question's pool in one call: its picks become gold
    lm, calls = _scripted()
    with using_lm(lm):
        graded = synthesize(docs, tmp_path / "graded", 24, model=route, seed=3, progress=False, grader=route)
    assert route in graded.gold and graded.judged_gold_added > report.judged_gold_added
    judged = [e.metadata["filters"]["judged"] for s in load_golden(str(tmp_path / "graded")).splits.values()
              for e in s if e.answers]
    assert judged and all(j["grader"] == f"LM {route}" for j in judged)


def test_question_cleaning_keeps_questions_and_drops_the_rest():
    from declrag.synth._generate import answer_problem, clean_question

    assert clean_question("1. Question: Who were the Normans?") == "Who were the Normans?"
    assert clean_question('A question for it: "When did the war end?"') == "When did the war end?"
    assert clean_question("Sure! Here is a question about it") is None
    assert clean_question("Why?") is None
    passage = "The Normans were descended from Norse raiders. They settled in Normandy in the 10th century."
    assert answer_problem("factoid", "Norse raiders", passage) == (None, passage.index("Norse raiders"))
    assert answer_problem("factoid", "Vikings from Denmark", passage)[0] == "factoid answer not a span of its passage"
    assert answer_problem("factoid", "It is not mentioned", passage)[0] == "reference answer says the passage lacks it"
    assert answer_problem("factoid", "the Normans", passage, "Who were the Normans?")[0] == \
        "reference answer repeats the question"


@pytest.mark.slow
def test_own_files_to_synth_to_compile_to_serve_with_no_golden_set_given(capsys, tmp_path, folder, minilm):
    """The path of a user with documents only: synth a set from the folder, compile retrieval on it, serve the
    compiled program; its answers cite the user's own files."""
    from fastapi.testclient import TestClient

    import declrag
    from declrag.serve import ServeSettings, create_app
    from declrag.testing import ScriptedLM

    out, runs = tmp_path / "set", tmp_path / "runs"
    assert run(capsys, "synth", str(folder), "--out", str(out), "--n", "40", "--generator", "cloze", "-q")[0] == 0
    code, stdout, err = run(capsys, "compile", "--space", "retrieval", "--dataset", str(out), "--name", "mine",
                            "--runs", str(runs), "--max-trials", "3", "-q")
    assert code == 0, err
    summary = json.loads((runs / "mine" / "summary.json").read_text())
    assert summary["best"]["test"]["objective"] > 0.3, summary["best"]  # nDCG@10 on the synthetic test split
    assert summary["synthetic"]["questions"] == summary["synthetic"]["of"] > 0
    report = (runs / "mine" / "report.md").read_text()
    assert "Synthetic set" in report
    sel = summary["selection"]  # the leading programs re-scored on the set's dev split, which the search never read
    assert sel["applied"] and sel["held_out"] == summary["synthetic"]["questions"] - summary["splits"]["dev"] - \
        summary["splits"]["test"]
    assert f"Shipped in `best/`: the {summary['shipped']} program" in report
    shipped = next((c for c in sel["candidates"] if c["trial"] == sel["chosen"]), None)
    assert (summary["shipped"] == "best") == (shipped is not None)
    if shipped is not None:
        assert shipped["qualifies"] and shipped["lower"] > 0 and summary["best"]["trial"] == sel["chosen"]
    kept = summary["best"]["params"] if summary["shipped"] == "best" else summary["baseline"]["params"]
    alpha = next(v for k, v in kept.items() if "alpha" in k)
    assert declrag.load(runs / "mine").config.retrieve.alpha == pytest.approx(alpha)
    assert "<strong>Shipped in <code>best/</code>" in (runs / "mine" / "report.html").read_text()  # Markdown rendered
    prog = declrag.load(runs / "mine" / "best")
    question = load_golden(str(out)).splits["test"][0]
    app = create_app(prog, "mine", str(runs / "mine"), ServeSettings(),
                     lm_override=lambda: ScriptedLM({}, {"answer": "From the notes [1]."}))
    with TestClient(app) as c:
        for _ in range(300):
            if c.get("/readyz").status_code == 200:
                break
            import time

            time.sleep(0.05)
        r = c.post("/v1/ask", json={"question": question.question})
    assert r.status_code == 200, r.text
    sources = {cite["source"] for cite in r.json()["citations"]}
    # the user's own files, named relative to the folder indexed (a server does not show its disk)
    assert sources and all((folder / s).is_file() and not s.startswith("/") for s in sources), sources


@pytest.mark.slow
def test_a_model_that_never_writes_a_question_is_one_clear_error(tmp_path, folder, minilm, monkeypatch):
    from declrag.api import load_documents
    from declrag.errors import DeclragError
    from declrag.lm import using_lm
    from declrag.synth import synthesize
    from declrag.testing._fakes import StreamingLM

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with using_lm(StreamingLM("Sure, happy to help with that.")), pytest.raises(DeclragError) as e:
        synthesize(load_documents([folder])[0], tmp_path / "never", 10, model="openai/smollm2-stand-in",
                   progress=False)
    assert "malformed model output" in e.value.message and not (tmp_path / "never").exists()


def test_a_question_not_in_its_passages_language_is_caught():
    from declrag.synth._filters import language_problem, script

    de = "Die Normannen waren ein Volk, das im 10. und 11. Jahrhundert der Normandie ihren Namen gab."
    ru = "Норманны дали своё имя Нормандии, региону во Франции, в X и XI веках."
    assert script(ru) == "CYRILLIC" and script("東京は日本の首都です") == "CJK"
    assert language_problem("Who gave their name to Normandy?", ru).startswith("question not in its passage's")
    assert language_problem("Who gave their name to the region of Normandy?", de) == \
        "question in English, its passage is not"
    assert language_problem("Wer gab der Normandie ihren Namen?", de) is None
    assert language_problem("Who gave their name to Normandy?", "The Normans gave their name to Normandy.") is None


def test_duplicates_left_in_a_set_are_measured_below_the_filters_threshold():
    import numpy as np

    from declrag.synth._filters import duplicate_share

    class Fixed:  # three directions: the second question nearly repeats the first (cosine 0.92)
        def embed_queries(self, texts):
            table = {"a": [1.0, 0.0, 0.0], "b": [0.92, 0.392, 0.0], "c": [0.0, 0.0, 1.0]}
            return np.array([table[t.lower().rstrip("?").split()[-1]] for t in texts])

    qs = ["what is a", "What is  A?", "tell me b", "and c"]  # the first two: the same normalized text
    d = duplicate_share(qs, Fixed(), 0.9)
    assert d == {"questions": 4, "exact": 0.25, "near": 0.5, "cosine": 0.9}  # the repeat, and b near a
    assert duplicate_share(qs, Fixed(), 0.95)["near"] == 0.25


@pytest.mark.slow
def test_a_filter_switched_off_removes_nothing_and_the_set_says_so(tmp_path, folder, minilm, monkeypatch):
    from declrag.api import load_documents
    from declrag.errors import DeclragError
    from declrag.synth import _filters as filters, synthesize

    monkeypatch.setattr(filters, "ROUND_TRIP_K", 1)  # on 45 documents the top 20 finds every source
    docs = load_documents([folder])[0]
    on = synthesize(docs, tmp_path / "on", 40, seed=5, progress=False)
    off = synthesize(docs, tmp_path / "off", 40, seed=5, skip=("round_trip",), progress=False)
    assert on.removed and {filters.reason_filter(r) for r in on.removed} == {"round_trip"}
    assert not any(r.startswith("round trip") for r in off.removed) and off.filters_off == ["round_trip"]
    assert off.kept >= on.kept and "switched off: round_trip" in load_golden(str(tmp_path / "off")).description
    with pytest.raises(DeclragError, match="no filter named spelling"):
        synthesize(docs, tmp_path / "bad", 40, skip=("spelling",), progress=False)


@pytest.mark.slow
def test_long_markdown_and_pdf_files_to_synth_to_compile_to_serve_scored_on_passages(capsys, tmp_path):
    """A user's few long files (whole Wikipedia articles as Markdown, one as a PDF) -> synth -> compile -> serve:
    retrieval is scored on the passages covering each question's sentence, not on the (few) documents."""
    from fastapi.testclient import TestClient
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    import declrag
    from declrag.serve import ServeSettings, create_app

    data = json.loads(shared("squad-v1.1", "dev-v1.1.json").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, art in enumerate(data["data"][:3]):
        text = "\n\n".join(p["context"] for p in art["paragraphs"])
        if i < 2:
            (docs / f"{art['title']}.md").write_text(f"# {art['title'].replace('_', ' ')}\n\n{text}\n")
            continue
        c = canvas.Canvas(str(docs / f"{art['title']}.pdf"), pagesize=A4)
        words, lines = text.split(), []
        while words:
            line = []
            while words and len(" ".join([*line, words[0]])) < 95:
                line.append(words.pop(0))
            lines.append(" ".join(line or [words.pop(0)]))
        for start in range(0, len(lines), 50):
            t = c.beginText(40, 800)
            t.setFont("Helvetica", 8)
            for line in lines[start:start + 50]:
                t.textLine(line)
            c.drawText(t)
            c.showPage()
        c.save()
    out, runs = tmp_path / "set", tmp_path / "runs"
    code, _, err = run(capsys, "synth", str(docs), "--out", str(out), "--n", "60", "--model", "none", "-q")
    assert code == 0, err
    golden = load_golden(str(out))
    md = [d for d in golden.documents if d.source.endswith(".md")]
    [pdf] = [d for d in golden.documents if d.source.endswith(".pdf")]  # a PDF is one document of its pages
    assert len(md) == 2 and min(len(d.text) for d in md) > 20_000 and pdf.text.count("\f") >= 2  # long files
    # a few real questions of the user's (answers, no offsets) to check the compile's ranking against
    mine = [{"question": q["question"], "answers": [a["text"] for a in q["answers"]]}
            for art in data["data"][:3] for p in art["paragraphs"] for q in p["qas"]][::7][:20]
    check = tmp_path / "mine.jsonl"
    check.write_text("".join(json.dumps({"id": f"m{i}", **m}) + "\n" for i, m in enumerate(mine)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "question": "What is it?", "answers": [], "gold": {"nowhere": 1}}) + "\n")
    code, _, err = run(capsys, "compile", "--space", "retrieval", "--dataset", str(out), "--name", "bad",
                       "--runs", str(runs), "--max-trials", "2", "--check-questions", str(bad), "-q")
    assert code == 2 and "--check-questions" in err and "not in the corpus" in err and "Traceback" not in err, err
    assert not (runs / "bad" / "compile.json").exists()  # checked before the run is written: the name is still free
    code, _, err = run(capsys, "compile", "--space", "retrieval", "--dataset", str(out), "--name", "bad",
                       "--runs", str(runs), "--check-questions", str(tmp_path / "nope.jsonl"), "-q")
    assert code == 2 and "--check-questions" in err and "no such file" in err, err
    code, stdout, err = run(capsys, "compile", "--space", "retrieval", "--dataset", str(out), "--name", "long",
                            "--runs", str(runs), "--max-trials", "5", "--check-questions", str(check), "-q")
    assert code == 0, err
    summary = json.loads((runs / "long" / "summary.json").read_text())
    agree = summary["check_questions"]
    assert agree["questions"] == 20 and "your 20 questions: " in stdout
    if "verdict" in agree:  # a program other than the baseline was chosen: the user's questions decided
        assert summary["shipped"] == ("best" if agree["verdict"]["ships"] else "baseline")
    if "tau" in agree:  # trials with distinct settings, each scored on the user's questions
        assert agree["trials"] >= 3 and -1 <= agree["tau"] <= 1 and agree["ci95"][0] <= agree["ci95"][1]
        assert all(0 <= t["check_ndcg@10"] <= 1 for t in agree["per_trial"])
        assert "**Your questions**" in (runs / "long" / "report.md").read_text()
    else:
        assert "fewer than 3 distinct" in agree["why"]
    assert summary["retrieval_unit"].get("span", 0) > 0  # cloze questions: scored on passages
    assert set(summary["retrieval_unit"]) <= {"span", "document"}
    assert 0 < summary["best"]["test"]["objective"] <= 1 and summary["splits"]["test"] > 0
    assert "passages covering the gold spans" in (runs / "long" / "report.md").read_text()
    app = create_app(declrag.load(runs / "long"), "long", str(runs / "long"), ServeSettings())
    with TestClient(app) as client:
        for _ in range(300):
            if client.get("/readyz").status_code == 200:
                break
            import time

            time.sleep(0.05)
        r = client.post("/v1/search", json={"query": golden.splits["test"][0].question, "k": 3})
    assert r.status_code == 200, r.text
    assert {h["source"] for h in r.json()["hits"]} <= {p.name for p in docs.iterdir()}  # relative to the folder
