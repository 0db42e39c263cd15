"""`declrag bench files`: its question sets stay true to the guides they ask about."""

from __future__ import annotations

import json

import pytest
from declrag_bench import files

from declrag.errors import DeclragError


def test_the_shipped_sets_name_their_guide_and_their_answers_are_in_it():
    for path in files.SETS:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        kept = files.questions(path)
        assert len(rows) >= 24 and len(kept) >= 0.9 * len(rows)  # the guides change: most answers must still be there
        assert len({r["id"] for r in rows}) == len(rows)
    asked = {json.loads(line)["file"] for p in files.SETS for line in p.read_text().splitlines() if line.strip()}
    main = {json.loads(line)["file"] for line in files.SETS[0].read_text().splitlines() if line.strip()}
    assert len(main) >= 8 and len(asked - main) >= 4  # the held-out set asks about other guides


def test_a_question_whose_answer_left_its_guide_is_not_asked(tmp_path, monkeypatch):
    (tmp_path / "guide.md").write_text("# Guide\n\nThe port is 8080.\n")
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "a", "file": "guide.md", "question": "Which port?", "answer": "8080"}) + "\n"
                  + json.dumps({"id": "b", "file": "guide.md", "question": "Which host?", "answer": "example.org"})
                  + "\n")
    monkeypatch.setattr(files, "ROOT", tmp_path)
    assert [q["id"] for q in files.questions(qs)] == ["a"]
    with pytest.raises(DeclragError, match="no question set"):
        files.questions(tmp_path / "missing.jsonl")
