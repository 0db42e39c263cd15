"""Who may read each document, set at index time: rules, the run's groups, JSONL fields; relabelling embeds nothing,
and nothing a run does not say widens who may read a document."""

from __future__ import annotations

import json

import pytest

from declrag import api
from declrag.config import IngestConfig
from declrag.errors import DeclragError
from declrag.ingest.indexer import Indexer
from declrag.ingest.readers import Readers
from declrag.stores import open_store
from declrag.testing import HashEmbedder


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    (d / "hr").mkdir(parents=True)
    (d / "eng").mkdir()
    (d / "hr" / "pay.md").write_text("Salary bands for 2026: the senior band is capped at 180,000 euros.")
    (d / "eng" / "deploy.md").write_text("The deploy pipeline runs canary releases on Tuesdays.")
    (d / "handbook.md").write_text("The office opens at 8 am and closes at 6 pm.")
    (d / "records.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"id": "memo-1", "text": "The board meets in March.", "readers": ["board"]},
        {"id": "memo-2", "text": "The canteen serves lunch at noon."},
        {"id": "memo-3", "text": "A record whose readers are mistyped.", "readers": {"group": "x"}},
        {"id": "memo-4", "text": "A record with a bad group name.", "readers": "board, all staff"}]))
    return d


def rules(tmp_path, text: str):
    f = tmp_path / "rules.yaml"
    f.write_text(text)
    return Readers.load(f)


def indexer(tmp_path, labels: Readers | None = None):
    store, meta = open_store(tmp_path / "store", IngestConfig())
    return store, Indexer(store, meta.ingest, HashEmbedder(), progress=False, readers=labels)


def readers(store) -> dict[str, tuple[str, ...]]:
    """Each document's readers by its file name (or record id), as its record and every chunk hold them."""
    out = {}
    for d, rec in store.documents().items():
        chunks = {c.readers for c in store.get([f"{d}#{i}" for i in range(rec.chunks)])}
        assert chunks == {rec.readers}, (d, chunks, rec.readers)
        out[d if "#" not in d and not d.startswith("/") else rec.source.rsplit("/", 1)[-1]] = rec.readers
    return out


def test_rules_the_runs_groups_and_a_records_own_field_label_documents(tmp_path, folder):
    labels = rules(tmp_path, '"docs/hr/*": hr\n"docs/eng/*": [eng, ops]\n"docs/handbook.md": "*"\n')
    store, ix = indexer(tmp_path, Readers(labels.rules, ("staff",), labels.base, labels.origin))
    report = ix.index_paths([folder])
    got = readers(store)
    assert got["pay.md"] == ("hr",) and got["deploy.md"] == ("eng", "ops") and got["handbook.md"] == ("*",)
    assert got["memo-1"] == ("board",)  # the record's own field first
    assert got["memo-2"] == ("staff",)  # no rule for the JSONL file: the run's groups
    bad = {s.line: s.reason for s in report.skipped if s.line}
    assert "must be a list of group names" in bad[3] and "'all staff' is not a group name" in bad[4]
    assert store.count({"readers": "hr"}) == 1 and store.count({"readers": {"$in": ["eng", "board"]}}) == 2


def test_new_readers_relabel_and_embed_nothing_and_silence_keeps_them(tmp_path, folder):
    store, ix = indexer(tmp_path, rules(tmp_path, '"docs/hr/*": hr\n'))
    ix.index_paths([folder])
    assert readers(store)["deploy.md"] == () and readers(store)["pay.md"] == ("hr",)
    store2, ix = indexer(tmp_path, rules(tmp_path, '"docs/hr/*": [exec, hr]\n"docs/eng/*": eng\n'))
    report = ix.index_paths([folder])
    assert (report.relabelled, report.embedded, report.indexed) == (2, 0, 0)
    assert "2 of them relabelled" in report.summary()
    assert readers(store2)["pay.md"] == ("exec", "hr") and readers(store2)["deploy.md"] == ("eng",)
    # a changed file indexed by a run that says nothing of readers keeps its own: never widened by silence
    (folder / "hr" / "pay.md").write_text("Salary bands changed: the senior band is capped at 190,000 euros.")
    store3, ix = indexer(tmp_path)
    report = ix.index_paths([folder])
    assert report.updated == 1 and report.relabelled == 0 and readers(store3)["pay.md"] == ("exec", "hr")


def test_a_rebuild_keeps_the_readers_of_the_store_it_replaces(tmp_path, folder):
    (folder / "records.jsonl").unlink()
    api.index([folder], store=tmp_path / "store", progress=False, embedder=HashEmbedder(),
              readers=Readers(default=("hr",)))
    api.index([folder], store=tmp_path / "store", progress=False, embedder=HashEmbedder(), rebuild=True)
    store, _ = open_store(tmp_path / "store")
    assert set(readers(store).values()) == {("hr",)}


@pytest.mark.parametrize("text, message", [
    ('"finance/*": fin\n', "readers rule 'finance/\\*' in .* matches no file"),
    ("- hr\n", "holds no rules"),
    ('"docs/hr/*": [hr, "two words"]\n', "'two words' is not a group name"),
    ('"docs/hr/*": []\n', "names no groups"),
    ('"docs/hr/*": "*x"\n', "'\\*x' is not a group name"),
    ("a: [b\n", "not valid YAML"),
])
def test_bad_rules_are_one_clear_line_before_anything_is_written(tmp_path, folder, text, message):
    with pytest.raises(DeclragError, match=message) as e:
        _, ix = indexer(tmp_path, rules(tmp_path, text))
        ix.index_paths([folder])
    assert "docs/guides/access.md" in e.value.hint or "pattern" in e.value.hint
    if (tmp_path / "store").exists():
        store, _ = open_store(tmp_path / "store")
        assert store.count() == 0


def test_the_clusters_readers_label_documents_as_the_driver_does(tmp_path, folder):
    """`declrag index --ray`'s read tasks (`declrag.ingest.distributed._read`, a plain function, run here) label each
    document as the local path does: the run's groups first, else what the store holds; an unchanged document whose
    readers change is sent back to be relabelled, not embedded again."""
    import pickle

    import numpy as np

    from declrag.ingest.distributed import _read

    files = sorted(str(p) for p in folder.rglob("*.md"))

    def read(known: dict, readers: Readers) -> list[dict]:
        batch = {"path": np.array(files, dtype=object), "stamp": np.array([[1, 1]] * len(files)),
                 "known": np.array([pickle.dumps(known)] * len(files), dtype=object)}
        return [pickle.loads(b) for b in _read(batch, readers=readers)["item"]]

    first = read({}, Readers(default=("hr",)))
    docs = [d for row in first for d, new in row["docs"] if new]
    assert len(docs) == 3 and all(d.readers == ("hr",) for d in docs)
    held = {d.id: (d.hash, d.readers) for d in docs}
    again = read(held, Readers(default=("eng", "hr")))  # the text unchanged, the readers not
    assert not any(row["docs"] for row in again) and sum(row["unchanged"] for row in again) == 3
    assert {k: v for row in again for k, v in row["relabel"].items()} == {d.id: ("eng", "hr") for d in docs}
    quiet = read(held, Readers())  # a run that says nothing of readers keeps the store's
    assert not any(row["relabel"] or row["docs"] for row in quiet)


