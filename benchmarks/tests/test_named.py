"""The named-document question set (benchmarks/data/named): questions that name their document by its author,
institution, organisation, product or year, never by its title's words. Its files stay what its README says, without
fetching the documents."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "named"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import named  # noqa: E402  (a script beside the data, not a package)


def test_the_set_is_what_its_readme_says():
    rows = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines() if line.strip()]
    src = json.loads((DATA / "sources.json").read_text())
    sources = {s["id"]: s for s in src["documents"]}
    assert len({r["id"] for r in rows}) == len(rows)
    answered = [r for r in rows if r["answer"] is not None]
    unheld = [r for r in rows if r["answer"] is None]
    assert len(answered) >= 60 and len(unheld) >= 5 and len(sources) >= 5
    per_doc = Counter(r["spans"][0]["doc"] for r in answered)
    assert set(per_doc) == set(sources) and min(per_doc.values()) >= 10
    assert {r["named_by"] for r in answered} >= {"author", "institution", "organisation", "product", "year"}
    for r in answered:
        (span,) = r["spans"]
        assert span["answer"] == r["answer"] and span["end"] - span["start"] == len(r["answer"])
        assert 0 <= span["start"] < span["end"] <= sources[span["doc"]]["chars"]
        assert r["file"] == sources[span["doc"]]["file"]
        assert not named.uses_title_word(r["question"], named.title_words(sources[span["doc"]]["title"])), r["id"]
    for r in unheld:
        assert r["spans"] == [] and r["file"] is None


def test_golden_writes_a_set_the_benches_load_with_every_span_on_its_answer(tmp_path):
    from declrag.golden import load_golden

    (tmp_path / "files").mkdir()
    text = "Intro.\n\nThe default width of lines is 0.5 points.\n"
    (tmp_path / "files" / "r1.txt").write_text(text, encoding="utf-8")
    start = (tmp_path / "files" / "r1.txt").read_text(encoding="utf-8").index("0.5")
    rows = [{"id": "r1-01", "file": "r1.txt", "question": "What is the default width in the report?", "answer": "0.5",
             "named_by": "organisation", "spans": [{"doc": "r1", "start": start, "end": start + 3, "answer": "0.5"}]},
            {"id": "x-01", "file": None, "question": "What does the Oslo report say?", "answer": None,
             "named_by": "organisation", "spans": []}]
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gs = load_golden(named.golden(tmp_path))
    (ex,) = gs.split("all")  # the refusal (no span) is left out
    assert [d.id for d in gs.documents] == ["r1"] and ex.id == "r1-01"
    assert gs.documents[0].text[ex.spans[0].start:ex.spans[0].end] == "0.5"
