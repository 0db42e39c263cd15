"""`declrag.ingest.distributed`'s read stage, run here without a cluster: it passes on only the documents that
changed, and a file it cannot load is skipped with its reason (the cluster end to end: tests/live/test_ray_index.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from declrag.errors import DeclragError
from declrag.ingest.distributed import _probe, _read, resolve_address, sizes
from declrag.ingest.loaders import load_file
from tests.conftest import shared


def test_the_read_stage_passes_on_what_changed_and_skips_what_it_cannot_load(tmp_path):
    new, same, bad = tmp_path / "new.md", tmp_path / "same.md", tmp_path / "bad.pdf"
    new.write_text("# New\n\nA new page about Ray.\n")
    same.write_text("# Same\n\nAn unchanged page.\n")
    bad.write_bytes(b"%PDF-1.4 not really a pdf")
    held = {d.id: (d.hash, ()) for d in load_file(same)}  # each document the store holds: (hash, readers)
    batch = {"path": np.array([str(new), str(same), str(bad)], dtype=object),
             "stamp": np.array([[1, 10], [2, 20], [3, 30]]),
             "known": np.array([pickle.dumps({}), pickle.dumps(held), pickle.dumps({})], dtype=object)}
    items = [pickle.loads(b) for b in _read(batch)["item"]]
    assert [(it["path"], len(it["docs"]), it["unchanged"]) for it in items] == [
        (str(new), 1, 0), (str(same), 0, 1), (str(bad), 0, 0)]
    assert items[0]["docs"][0][1] is True and items[0]["stamp"] == (1, 10)  # new to the store
    assert items[1]["found"] == list(held) and items[2]["skipped"]


def test_the_read_stage_reads_as_asked_and_passes_on_the_parts_it_skipped(tmp_path):
    """The Ray path reads with the run's --pdf-reader and --ocr, and brings back the records and pages it skipped."""
    case = shared("..", "cases", "reading")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "text": "The rink opens at noon."}\n{"id": "b", "text": null}\n')
    paths = [str(case / "ligatures.pdf"), str(case / "image-page.pdf"), str(rows)]
    batch = {"path": np.array(paths, dtype=object), "stamp": np.array([[1, 10], [2, 20], [3, 30]]),
             "known": np.array([pickle.dumps({})] * 3, dtype=object)}
    items = [pickle.loads(b) for b in _read(batch, ocr=False, pdf_reader="pypdf")["item"]]
    assert "ﬁ" in items[0]["docs"][0][0].text  # pypdf keeps the ligatures that PDFium writes as letters
    assert [(s.page, s.reason.split(";")[0]) for s in items[1]["parts"]] == [(2, "no text layer (a scan?)")]
    assert [(s.line, s.reason.split(";")[0]) for s in items[2]["parts"]] == [(2, '"text" is null')]


def test_auto_reads_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert resolve_address("auto") == "10.0.0.5:6379" and resolve_address("10.0.0.9:1") == "10.0.0.9:1"
    monkeypatch.delenv("RAY_ADDRESS")
    assert resolve_address("auto") == "auto"
    with pytest.raises(DeclragError):
        resolve_address(" ")


def test_actors_are_as_large_as_the_smallest_node_or_one_per_gpu():
    assert sizes([{"CPU": 1}, {"CPU": 1}]) == (2, 1, 0.0)  # two 1-CPU nodes: two single-threaded embedders
    assert sizes([{"CPU": 2}]) == (1, 2, 0.0)  # one 2-CPU node: one embedder on 2 threads, as one process
    assert sizes([{"CPU": 16}, {"CPU": 16}, {"CPU": 8}]) == (5, 8, 0.0)
    assert sizes([{"CPU": 8, "GPU": 1}, {"CPU": 8, "GPU": 2}]) == (3, 1, 1.0)
    assert sizes([{"CPU": 16}, {"CPU": 16}], actors=8) == (8, 4, 0.0)  # the CPUs shared among those asked for
    assert sizes([{"CPU": 2}], actors=4) == (4, 1, 0.0)


def test_a_node_says_which_paths_it_cannot_read_and_whether_it_reaches_the_store(tmp_path):
    """What each node of the cluster runs before any work (`check_nodes` turns it into one line naming the fix)."""
    got = _probe([str(tmp_path), str(tmp_path / "on-another-machine")], ("127.0.0.1", 1))
    assert got["unreadable"] == [str(tmp_path / "on-another-machine")] and got["store"] is False
    assert got["version"] and _probe([], None)["store"] is True
