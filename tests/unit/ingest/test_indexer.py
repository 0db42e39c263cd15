"""Incremental indexing: unchanged files cost nothing, changed files replace their chunks, deleted
files can be pruned, bad files are skipped with a reason, and search expansion returns exact spans."""

from __future__ import annotations

import os

import pytest

from declrag.config import ChunkerConfig, IngestConfig, SearchParams
from declrag.ingest.indexer import Indexer
from declrag.pipeline.stages.retrieve._searching import search
from declrag.stores import open_store
from declrag.testing import HashEmbedder

INGEST = IngestConfig(chunker=ChunkerConfig(chunk_size=16, overlap=4))


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("Apples grow on trees in orchards. " * 6)
    (d / "b.md").write_text("# Bananas\n\nBananas are yellow and grow in bunches. " * 3)
    (d / "sub" / "c.html").write_text("<html><title>Cherries</title><body><p>Cherries are red stone fruit.</p>"
                                       "<script>var hidden = 1;</script></body></html>")
    (d / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (d / "empty.txt").write_text("   ")
    (d / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    return d


def make(tmp_path, emb=None):
    store, meta = open_store(tmp_path / "store", INGEST)
    return store, Indexer(store, meta.ingest, emb or HashEmbedder(), progress=False)


def test_index_skips_bad_files_with_reasons_and_continues(tmp_path, folder):
    store, ix = make(tmp_path)
    r = ix.index_paths([folder])
    assert r.added == 3 and r.indexed == 3 and r.chunks == store.count() > 3
    reasons = {os.path.basename(s.path): s.reason for s in r.skipped}
    assert set(reasons) == {"broken.pdf", "empty.txt", "image.png"}
    assert "corrupt PDF" in reasons["broken.pdf"] and reasons["empty.txt"] == "empty file"
    assert "3 documents indexed" in r.summary() and "3 skipped" in r.summary()
    titles = {d.title for d in store.documents().values()}
    assert titles == {"", "Bananas", "Cherries"}  # "a.txt" names nothing, and its first line is a sentence
    assert not store.keyword_search("hidden")  # script text is not indexed


def test_unchanged_files_cost_nothing_and_changed_files_replace_their_chunks(tmp_path, folder):
    emb = HashEmbedder()
    store, ix = make(tmp_path, emb)
    ix.index_paths([folder])
    calls = emb.calls
    r = ix.index_paths([folder])
    assert r.indexed == 0 and r.unchanged == 3 and emb.calls == calls
    (folder / "a.txt").write_text("Avocados are green. " * 2)
    r = ix.index_paths([folder])
    assert r.updated == 1 and r.unchanged == 2
    assert not store.keyword_search("orchards") and store.keyword_search("avocados")
    a_id = str((folder / "a.txt").resolve())
    assert store.count({"doc_id": a_id}) == store.documents()[a_id].chunks


def test_touched_but_identical_files_are_not_re_embedded(tmp_path, folder):
    emb = HashEmbedder()
    store, ix = make(tmp_path, emb)
    ix.index_paths([folder])
    calls = emb.calls
    os.utime(folder / "a.txt", ns=(1, 1))
    r = ix.index_paths([folder])
    assert r.indexed == 0 and emb.calls == calls


def test_prune_removes_deleted_files_only_when_asked(tmp_path, folder):
    store, ix = make(tmp_path)
    ix.index_paths([folder])
    (folder / "b.md").unlink()
    assert ix.index_paths([folder]).deleted == 0 and len(store.documents()) == 3
    r = ix.index_paths([folder], prune=True)
    assert r.deleted == 1 and len(store.documents()) == 2 and not store.keyword_search("bananas")


def test_window_and_parent_expansion_return_exact_document_spans(tmp_path):
    text = " ".join(f"Sentence number {i} talks about topic{i}." for i in range(40))
    d = tmp_path / "d"
    d.mkdir()
    (d / "long.txt").write_text(text)
    emb = HashEmbedder()
    for chunker in (ChunkerConfig(chunk_size=16, overlap=0),
                    ChunkerConfig(name="parent-child", chunk_size=16, overlap=0, parent_size=64)):
        store, meta = open_store(tmp_path / chunker.name, IngestConfig(chunker=chunker))
        Indexer(store, meta.ingest, emb, progress=False).index_paths([d])
        plain = search(store, emb, "topic20", SearchParams(mode="keyword", limit=1))[0]
        window = 0 if chunker.name == "parent-child" else 1
        hit = search(store, emb, "topic20", SearchParams(mode="keyword", limit=1, window=window))[0]
        assert hit.chunk == plain.chunk and "topic20" in hit.text
        assert text[hit.start:hit.end] == hit.text and len(hit.text) > len(hit.chunk.text)
        if chunker.name == "parent-child":
            assert (hit.start, hit.end) == (plain.chunk.parent_start, plain.chunk.parent_end)
        else:
            before, after = store.get([f"{plain.doc_id}#{plain.chunk.position + o}" for o in (-1, 1)])
            assert (hit.start, hit.end) == (before.start, after.end)


def test_no_search_result_or_context_holds_a_documents_characters_twice(tmp_path):
    """Chunks cut with overlap, widened by a window of neighbours: what `search` returns and what a program hands
    to its answer hold each character of a document once (`hand_over`): best-first (the default) trims a lower
    passage to what no higher one holds, and still hands over k; merged, overlapping passages become one."""
    from declrag.config import ProgramConfig
    from declrag.pipeline.program import RAGProgram

    text = " ".join(f"Sentence number {i} talks about topic{i % 7} and item{i}." for i in range(60))
    d = tmp_path / "d"
    d.mkdir()
    (d / "long.txt").write_text(text)
    emb = HashEmbedder()
    ingest = IngestConfig(chunker=ChunkerConfig(chunk_size=16, overlap=4))
    store, meta = open_store(tmp_path / "s", ingest)
    Indexer(store, meta.ingest, emb, progress=False).index_paths([d])

    def disjoint(hits, meeting_too=True):
        spans = sorted((h.doc_id, h.start, h.end) for h in hits)
        assert all(a[0] != b[0] or a[2] < b[1] or (not meeting_too and a[2] <= b[1])
                   for a, b in zip(spans, spans[1:])), spans  # apart (merged: not even meeting)
        assert all(text[h.start:h.end] == h.text for h in hits)  # each one exact span of its document

    for window in (0, 1, 2):
        for how in ("best-first", "merge"):
            hits = search(store, emb, "topic3 item21 item22",
                          SearchParams(mode="keyword", limit=8, window=window, handover=how))
            disjoint(hits, meeting_too=how == "merge")
            assert how == "merge" or len(hits) == 8  # best-first: k passages, the store has them
    for how in ("best-first", "merge"):
        cfg = ProgramConfig.model_validate({"ingest": ingest.model_dump(),
                                            "retrieve": {"k": 6, "window": 1, "handover": how}})
        prog = RAGProgram(cfg, store=store, embedder=emb)
        passages = prog.search("topic3 item21 item22")
        disjoint(passages, meeting_too=how == "merge")
        # six windows of neighbouring chunks overlap: merged, fewer and longer passages; best-first, six
        assert len(passages) < 6 if how == "merge" else len(passages) == 6
        answer = prog(question="Which sentence talks about item21?")
        disjoint(answer.passages, meeting_too=how == "merge")


BUILD = """
import sys
from declrag.ingest.corpus import corpus_store
from declrag.config import ChunkerConfig, IngestConfig
from declrag.golden import load_golden
from declrag.testing import HashEmbedder

docs = load_golden(sys.argv[1]).documents
st, report = corpus_store(docs, IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=16, overlap=4)), "tiny",
                          embedder=HashEmbedder(), progress=False, home=sys.argv[2])
print(report.indexed, st.count())
"""


def test_two_processes_building_one_cached_index_do_not_corrupt_it(tmp_path):
    """Compile workers on one machine share the index cache: one builds, the other waits and finds it built."""
    import subprocess
    import sys
    from pathlib import Path

    gold = Path(__file__).parents[2] / "data" / "tiny" / "gold.jsonl"
    script = tmp_path / "build.py"
    script.write_text(BUILD)
    procs = [subprocess.Popen([sys.executable, str(script), str(gold), str(tmp_path / "indexes")], stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    indexed, counts = sorted(int(o[0]) for o in outs), {int(o[1]) for o in outs}
    assert indexed[0] == 0 and indexed[1] > 0  # one process built it, the other found it built
    ref = subprocess.run([sys.executable, str(script), str(gold), str(tmp_path / "alone")], capture_output=True, text=True,
                         check=True).stdout.split()
    assert counts == {int(ref[1])}  # both see exactly the chunks of a build made alone: none twice, none missing
