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
