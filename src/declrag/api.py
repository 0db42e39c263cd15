"""The Python API behind the CLI: index sources into a store, search it."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from .config import IngestConfig, Metric, SearchParams
from .embed import Embedder, cache_dir
from .errors import DeclragError
from .folders import default_store
from .indexer import Indexer, IndexReport
from .inputs import user_text
from .searching import search as _search
from .stores import Store, StoreCheck, child_uri, connect, local_folder, open_store, read_meta
from .types import Document, Hit, content_hash

log = logging.getLogger(__name__)


def index_home() -> str:
    """Where `corpus_store` keeps its content-addressed indexes by default: the cache folder's ``indexes``."""
    return str(cache_dir() / "indexes")


def index(
    paths: Sequence[str | Path] = (),
    datasets: Sequence[str] = (),
    store: str | Path | None = None,
    ingest: IngestConfig | None = None,
    metric: Metric | None = None,
    prune: bool = False,
    rebuild: bool = False,
    progress: bool = True,
    embedder: Embedder | None = None,
) -> IndexReport:
    """Index files/folders and golden-set corpora (by name or path) into ``store``.

    ``ingest`` defaults to the store's own settings (or the defaults for a new store). ``rebuild`` builds
    the store anew from these sources: a folder is built beside the old one and swapped in only when
    complete; a Weaviate collection (which cannot be renamed) is emptied and refilled.
    """
    if not paths and not datasets:
        raise DeclragError("nothing to index", hint="give file or folder paths, or --dataset NAME")
    _check_paths(paths)  # before the store is opened, so a typo creates nothing
    target = str(store or default_store())
    old_meta = read_meta(target) if rebuild else None
    if old_meta is not None and (folder := local_folder(target)) is not None:  # built beside it, then swapped in
        tmp = folder.with_name(folder.name + ".rebuild")
        shutil.rmtree(tmp, ignore_errors=True)
        report = index(paths, datasets, tmp, ingest or old_meta.ingest, metric, prune, False, progress, embedder)
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
        return report
    if old_meta is not None:  # a server's collection cannot be renamed: emptied and refilled
        with connect(target) as st:
            st.drop()
        ingest = ingest or old_meta.ingest
    st, meta = open_store(target, ingest, metric)  # checks ``ingest`` against the store's; None: the store's own
    with st:
        indexer = Indexer(st, meta.ingest, embedder or Embedder(meta.ingest.embedder), progress=progress)
        report = IndexReport()
        if paths:
            _merge(report, indexer.index_paths(paths, prune=prune))
        if datasets:
            from .golden import load_golden

            for name in datasets:
                _merge(report, indexer.index_documents(load_golden(name).documents))
        if report.indexed or report.deleted:
            st.optimize()
    return report


def load_documents(paths: Sequence[str | Path] = (), datasets: Sequence[str] = ()) -> tuple[list[Document], list]:
    """The documents `index` would index from these files, folders and golden-set corpora, under the same ids,
    and the files skipped (with reasons)."""
    from .ingest.loaders import load_paths

    _check_paths(paths)
    docs, skipped = load_paths(paths)
    if datasets:
        from .golden import load_golden

        for name in datasets:
            docs += [d.original() for d in load_golden(name).documents]  # a scoring copy's text put back
    return docs, skipped


def _check_paths(paths: Sequence[str | Path]) -> None:
    """Refuse paths that do not exist: a typo the user must hear about. (A file that exists but cannot be
    loaded, being binary, empty or corrupt, is skipped with a reason by the indexer, and the run goes on.)"""
    missing = []
    for p in paths:
        try:
            os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            missing.append(str(p))
        except ValueError:  # a NUL in the name
            raise DeclragError(f"{str(p)!r} is not a valid path", hint="check the path") from None
        except OSError:  # exists but cannot be read (permissions, ...): skipped with the reason
            continue
    if missing:
        raise DeclragError(f"no such file or folder: {', '.join(missing)}" if len(missing) < 4 else
                           f"{len(missing)} paths do not exist: {', '.join(missing[:3])}, ...",
                           hint="check the path (nothing was read, and nothing was created or changed)")


def _merge(into: IndexReport, r: IndexReport) -> None:
    for f in ("added", "updated", "unchanged", "deleted", "chunks", "embedded"):
        setattr(into, f, getattr(into, f) + getattr(r, f))
    into.skipped += r.skipped
    for k, v in r.seconds.items():
        into.seconds[k] = into.seconds.get(k, 0.0) + v


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
    import contextlib

    from .stores import local_folder

    if (folder := local_folder(uri)) is None:
        return contextlib.nullcontext()
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder.parent / f".{folder.name}.lock"))


def search(query: str, store: str | Path | None = None, params: SearchParams | None = None,
           embedder: Embedder | None = None) -> list[Hit]:
    """Search an existing store with its own embedding model."""
    query = user_text(query, "query")
    st, meta = open_store(store or default_store(), create=False)
    if st.count() == 0:
        raise DeclragError(f"store {store or default_store()} is empty",
                           hint="index something first: declrag index PATH")
    p = params or SearchParams()
    emb = embedder if embedder is not None or (p.mode == "keyword") else Embedder(meta.ingest.embedder)
    return _search(st, emb, query, p)
