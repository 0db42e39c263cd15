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


def test_a_folder_of_files_and_questions_about_documents_it_does_not_hold(tmp_path):
    (tmp_path / "r1.txt").write_text("The port is 8080.\n")
    qs = tmp_path / "q.jsonl"
    qs.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "file": "r1.txt", "question": "Which port in Berger's report?", "answer": "8080"},
        {"id": "none", "file": None, "question": "Which port in the TU Graz report?", "answer": None}]) + "\n")
    asked = files.questions(qs, tmp_path)
    assert [q["id"] for q in asked] == ["a", "none"]  # the unheld one is asked: it should be refused
    rows = {"headers": [{"abstained": 1.0, "contains": 0.0, "retrieved": 1.0}, {"abstained": 0.0}],
            "default": [{"abstained": 0.0, "contains": 1.0, "retrieved": 1.0}, {"abstained": 1.0}]}
    got = files._scored(rows, "headers", [False, True])
    assert got["questions"] == 1 and got["unheld"] == 1
    assert got["arms"]["default"]["contains"] == 1.0 and got["arms"]["default"]["refused"] == 1.0
    assert got["arms"]["headers"]["refused"] == 0.0 and got["arms"]["headers"]["abstained"] == 1.0
