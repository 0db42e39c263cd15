"""How `declrag synth` splits its questions (`declrag.synth._splits`): a few long files by regions of each file, so
every file is in train, dev and test and no two splits share or neighbour text; many documents by document, as
before; a set too small to split, or a one-file corpus too small, is one clear error and writes nothing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from declrag.cli import main
from declrag.synth import Candidate, split_by_document
from declrag.synth._splits import GAP, MIN_QUESTIONS, REGION_DROP, by_regions, region_count, split, split_by_regions

from tests.conftest import shared


def _files(sizes: dict[str, int], seed: int = 0) -> list[Candidate]:
    """Questions about a few long files, as densely as synth draws them: about one a passage (a question's seed
    span, a sentence or a window of 100-500 characters, every 700-1300 characters of its file)."""
    rng = random.Random(seed)
    out = []
    for doc, n in sizes.items():
        at = 0
        for i in range(n):
            at += rng.randrange(700, 1300)
            out.append(Candidate(question=f"{doc} q{i}", kind=rng.choice(["ict", "keywords"]), doc_id=doc,
                                 span=(at, at + rng.randrange(100, 500))))
    rng.shuffle(out)
    return out


def _distance(a: Candidate, b: Candidate) -> int:
    return max(0, b.span[0] - a.span[1], a.span[0] - b.span[1])


def _dropped() -> tuple[dict[str, list[Candidate]], Callable[[str, Candidate], None]]:
    seen: dict[str, list[Candidate]] = {}
    return seen, lambda reason, c: seen.setdefault(reason, []).append(c)


def test_a_few_long_files_are_split_by_regions_each_file_in_every_split_and_neighbours_apart():
    cands = _files({"report-a": 240, "report-b": 71, "report-c": 150, "report-d": 30, "report-e": 12})
    dropped, drop = _dropped()
    kept, parts, how = split(cands, 1000, seed=13, drop=drop)
    assert how.startswith("by regions of each document:") and set(parts) == {"train", "dev", "test"}
    for name, part in parts.items():  # every file in every split
        assert {c.doc_id for c in part} == {"report-a", "report-b", "report-c", "report-d", "report-e"}, name
    total = sum(len(p) for p in parts.values())
    assert total == len(kept) == len(cands) - len(dropped[REGION_DROP])
    assert 0.5 <= len(parts["train"]) / total <= 0.7 and all(0.12 <= len(parts[s]) / total <= 0.28
                                                              for s in ("dev", "test"))
    assert 0 < len(dropped[REGION_DROP]) < 0.2 * len(cands)  # only around the regions' boundaries
    where = {id(c): name for name, part in parts.items() for c in part}
    for a in kept:  # no two questions of different splits within GAP characters of each other in one file
        for b in kept:
            if a.doc_id == b.doc_id and where[id(a)] != where[id(b)]:
                assert _distance(a, b) >= GAP, (a, b)
    # a file's questions per split are contiguous regions: several of them for a long file
    a = sorted((c for c in kept if c.doc_id == "report-a"), key=lambda c: c.span)
    runs = 1 + sum(where[id(x)] != where[id(y)] for x, y in zip(a, a[1:]))
    assert runs >= 6
    # the same seed, the same splits; another seed, others
    again = split(list(cands), 1000, seed=13, drop=lambda r, c: None)[1]
    assert {k: [c.question for c in v] for k, v in again.items()} == \
        {k: [c.question for c in v] for k, v in parts.items()}
    other = split(list(cands), 1000, seed=14, drop=lambda r, c: None)[1]
    assert [c.question for c in other["test"]] != [c.question for c in parts["test"]]


def test_region_splits_keep_a_questions_gold_with_it():
    """A title question (its gold: the whole file) cannot be kept apart from a cut file's other splits: dropped and
    counted; a question on two files goes with its seed passage's region; a small file goes whole to one split."""
    cands = _files({"long": 100, "tiny": 4})
    cands.append(Candidate(question="Long", kind="title", doc_id="long", span=(0, 10**6)))
    multi = Candidate(question="how do long and other relate?", kind="multi", doc_id="long", span=(5000, 5800),
                      gold={"long": 1, "other": 1})
    cands.append(multi)
    dropped, drop = _dropped()
    parts, regions = split_by_regions(cands, 3, drop)
    assert [c.question for c in dropped[REGION_DROP] if c.kind == "title"] == ["Long"]
    assert regions == region_count(101) + 1  # the tiny file is one region
    tiny = {name for name, part in parts.items() for c in part if c.doc_id == "tiny"}
    assert len(tiny) == 1
    placed = [name for name, part in parts.items() for c in part if c is multi]
    assert len(placed) <= 1 and (placed or multi in dropped[REGION_DROP])


def test_region_counts_give_several_regions_per_split_and_fewer_for_small_files():
    assert [region_count(q) for q in (1, 9, 10, 24, 25, 71, 75, 240)] == [1, 1, 3, 3, 5, 5, 10, 25]
    # three regions are sized by their splits' shares: a small document's 20 questions 12:4:4
    small = [Candidate(question=f"q{i}", kind="ict", doc_id="small", span=(i * 3000, i * 3000 + 500)) for i in range(20)]
    parts, regions = split_by_regions(small, 5, lambda r, c: pytest.fail("no two questions are near"))
    assert regions == 3 and {k: len(v) for k, v in parts.items()} == {"train": 12, "dev": 4, "test": 4}


def test_many_documents_are_still_split_by_document():
    rng = random.Random(1)
    cands = [Candidate(question=f"q{i}", kind="cloze", doc_id=f"d{rng.randrange(60)}", span=(0, 1)) for i in range(300)]
    assert not by_regions(cands)
    kept, parts, how = split(cands, 200, seed=5, drop=lambda r, c: pytest.fail("nothing is dropped"))
    assert how == "by document" and len(kept) == 200
    assert parts == split_by_document(kept, seed=5)
    # few documents, or one holding more than a tenth of the questions: regions
    assert by_regions([c for c in cands if int(c.doc_id[1:]) < 19])
    big = cands + [Candidate(question=f"b{i}", kind="cloze", doc_id="big", span=(i * 2000, i * 2000 + 500))
                   for i in range(40)]
    assert by_regions(big)


# --------------------------------------------------------------------------------------------- the command
def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_a_set_asked_too_small_to_split_is_one_error_before_any_work(tmp_path):
    """As a user meets it: the installed script, one error line and a fix, exit status 2, nothing written."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Wind turbines turn the kinetic energy of moving air into electricity. "
                                             * 9)
    script = Path(sys.executable).parent / "declrag"
    p = subprocess.run([str(script), "synth", str(tmp_path / "docs"), "--n", "10", "--model", "none",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines[0] == f"error: --n must be at least {MIN_QUESTIONS}, got 10 (a train, dev and test split of " \
                       "several questions each)", p.stderr
    assert lines[1:] == ["  fix: e.g. --n 1000"], p.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


def _article(data: dict, i: int, paragraphs: int | None = None) -> str:
    art = data["data"][i]
    return f"# {art['title'].replace('_', ' ')}\n\n" + "\n\n".join(p["context"] for p in art["paragraphs"][:paragraphs])


@pytest.mark.slow
def test_a_corpus_of_one_file_is_split_by_regions_or_is_too_small_to_split(capsys, tmp_path, minilm):
    from declrag.golden import load_golden

    data = json.loads(shared("squad-v1.1", "dev-v1.1.json").read_text())
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "article.md").write_text(_article(data, 0))
    out = tmp_path / "set"
    code, _, err = _run(capsys, "synth", str(tmp_path / "one"), "--out", str(out), "--n", "60", "--model", "none",
                        "-q")
    assert code == 0, err
    golden = load_golden(str(out))
    assert set(golden.splits) == {"train", "dev", "test"} and all(len(s) >= 5 for s in golden.splits.values())
    assert "Split by regions of each document" in golden.description
    report = json.loads((out / "report.json").read_text())
    assert report["split"].startswith("by regions of each document: ")
    spans = {name: [e.metadata["span"] for e in s] for name, s in golden.splits.items()}
    for name, mine in spans.items():
        for other, theirs in spans.items():
            if other != name:
                assert all(max(0, b[0] - a[1], a[0] - b[1]) >= GAP for a in mine for b in theirs)
    # a file of four paragraphs: too few questions for three splits; it says how many it needs and how to get more
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "note.md").write_text(_article(data, 1, 4))
    code, _, err = _run(capsys, "synth", str(tmp_path / "small"), "--out", str(tmp_path / "small-set"), "--model",
                        "none", "-q")
    assert code == 2 and "Traceback" not in err, err
    assert "too few questions to split" in err and f"needs at least {MIN_QUESTIONS}" in err
    assert "fix: give more documents" in err
    assert not (tmp_path / "small-set").exists()
