"""The scenario question set (benchmarks/data/scenarios): questions as people with a situation ask them, over long
documents that are not Wikipedia. Its files stay what its README says, without fetching the documents."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"


def test_the_set_is_what_its_readme_says():
    rows = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines() if line.strip()]
    sources = {s["id"]: s for s in json.loads((DATA / "sources.json").read_text())["documents"]}
    assert len(rows) >= 80 and len({r["id"] for r in rows}) == len(rows)
    per_doc = Counter(r["spans"][0]["doc"] for r in rows)
    assert set(per_doc) == set(sources) and len(sources) >= 5 and min(per_doc.values()) >= 10
    for r in rows:
        words = len(r["question"].split())
        sentences = len(re.findall(r"[.!?](?:\s|$)", r["question"]))
        assert 45 <= words <= 95 and 3 <= sentences <= 6, (r["id"], words, sentences)  # a situation, then the ask
        (span,) = r["spans"]
        assert span["answer"] == r["answers"][0] and span["end"] - span["start"] == len(span["answer"])
        assert 0 <= span["start"] < span["end"] <= sources[span["doc"]]["chars"]
