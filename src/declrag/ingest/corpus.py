"""The content-addressed indexes evaluation, compile and the benchmarks share: `corpus_store` builds the store for
exactly a corpus under an ingest configuration once (a file lock between processes), verifies every copy before
anyone measures on it (`checked`: a replicated store's lost chunks written again), and reuses it after."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from ..config import IngestConfig
from ..embed.embedder import Embedder
from ..errors import DeclragError
from ..runtime.folders import cache_dir
from ..stores import Store, StoreCheck, child_uri, local_folder, open_store
from ..types import Document, content_hash
from .indexer import Indexer, IndexReport

log = logging.getLogger(__name__)


def index_home() -> str:
    """Where `corpus_store` keeps its content-addressed indexes by default: the cache folder's ``indexes``."""
    return str(cache_dir() / "indexes")


def corpus_store(documents: Sequence[Document], ingest: IngestConfig, label: str = "corpus",
                 embedder: Embedder | None = None, progress: bool = True,
                 home: str | Path | None = None) -> tuple[Store, IndexReport]:
    """The store for exactly these documents under these ingest settings, built once and reused.

    Stores are content-addressed (by every document's hash and the ingest digest) under ``home``: a
    folder (default: the cache folder's ``indexes``, one sub-folder per store) or a Weaviate server (one
    collection per store). Every benchmark, evaluation and compile trial with the same corpus and settings
    shares one index, and an interrupted build resumes where it stopped. `declrag indexes` lists and
    removes them. Every copy is verified before it is returned (`checked`); a store this call wrote that a copy
    lost chunks of meanwhile is built again from scratch, so that it scores as a clean build does.
    """
    digest = content_hash(ingest.digest(), *sorted(d.hash for d in documents))
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in label)
    uri = child_uri(home or index_home(), f"{safe}-{digest[:16]}")
    embedder = embedder or Embedder(ingest.embedder)
    with _building(uri):  # two processes on one machine (compile workers): one builds, the other then finds it built
        st, report = _build(uri, documents, ingest, embedder, progress)
        try:
            report.check = checked(st)
            lost = report.check.repaired > 0
        except DeclragError:  # a copy that could not be repaired: one this call wrote is built again below
            if not report.indexed:
                raise
            lost = True
        if lost and report.indexed:
            # a copy lost chunks while this call wrote them (a replicated server's node killed mid-write): written
            # again, they move Weaviate's keyword statistics a little, so a score on this index would differ from
            # one on a clean build (and what could not be written again is lost). Nobody reads it yet: it is
            # built again from scratch (its embeddings cached)
            log.warning("store %s: built again from its documents, so that every copy is a clean build", st.uri)
            st.drop()
            st.close()
            st, report = _build(uri, documents, ingest, embedder, progress)
            report.rebuilt = True
            report.check = checked(st)
    return st, report


def _build(uri: str, documents: Sequence[Document], ingest: IngestConfig, embedder: Embedder,
           progress: bool) -> tuple[Store, IndexReport]:
    st, meta = open_store(uri, ingest)
    report = Indexer(st, meta.ingest, embedder, progress=progress).index_documents(documents)
    if report.indexed:
        st.optimize()
        st.settle()  # callers measure on it next
    return st, report


def checked(st: Store) -> StoreCheck:
    """`Store.verify` before a caller measures on ``st``: a copy missing chunks (or their vectors) that could not
    be written again stops here with a message naming it, rather than scoring against an incomplete index; a
    copy that did not answer is logged (a replicated store is checked again by the next call)."""
    check = st.verify()
    if check.repaired:
        log.warning("store %s: %d chunks a copy had lost were written again", st.uri, check.repaired)
        st.settle()  # keyword search sees what was written again before anyone measures
    if down := [k for k, v in check.copies.items() if v is None]:
        log.warning("store %s: %s did not answer; checked when it is back", st.uri, ", ".join(down))
    if not check.ok:
        raise DeclragError(f"store {st.uri} is incomplete: {'; '.join(check.problems)}",
                           hint="check the server's nodes (their logs), or remove the index (declrag indexes rm) "
                                "and run again")
    return check


def _building(uri: str):
    """An inter-process lock for building the folder store ``uri`` (a sibling ``.lock`` file); none for a
    server, where writes are idempotent (fixed object ids) and two builders only repeat work."""
    if (folder := local_folder(uri)) is None:
        return contextlib.nullcontext()
    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder.parent / f".{folder.name}.lock"))
