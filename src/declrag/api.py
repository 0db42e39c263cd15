"""The Python API behind the CLI: index sources into a store, search it. (The content-addressed indexes that
evaluation, compile and the benchmarks share are `declrag.ingest.corpus`.)"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from .config import IngestConfig, Metric, SearchParams
from .embed.embedder import Embedder
from .errors import DeclragError
from .golden import load_golden
from .ingest.indexer import Indexer, IndexReport
from .ingest.loaders import PDF_READERS, load_paths
from .ingest.readers import Readers
from .inputs import user_text
from .pipeline.stages.retrieve import search as _search
from .runtime.folders import default_store
from .stores import connect, local_folder, open_store, read_meta
from .types import Document, Hit


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
    ray: str | None = None,
    ray_actors: int | None = None,
    ocr: bool | None = None,
    pdf_reader: str = "pdfium",
    readers: Readers | None = None,
) -> IndexReport:
    """Index files/folders and golden-set corpora (by name or path) into ``store``.

    Args:
        paths: files and folders (read recursively); a missing one stops the run before anything is written.
        datasets: golden sets whose corpora are indexed too, by name (``scifact``) or path.
        store: a folder (the embedded store) or a URI (``weaviate://host:port/Collection``); None: the default store.
        ingest: how documents become chunks and vectors; None: the store's own, or the defaults for a new store.
        metric: the vector metric of a new store (``cosine``, ``dot``, ``l2``); None: cosine.
        prune: remove from the store the documents of these sources that are gone.
        rebuild: build the store anew from these sources: a folder is built beside the old one and swapped in only
            when complete; a Weaviate collection (which cannot be renamed) is emptied and refilled. A rebuild that
            could index nothing leaves the store as it was (`IndexReport.nothing`).
        progress: show progress bars on stderr.
        embedder: the embedding model to use; None: the one ``ingest`` names.
        ray: read, chunk and embed over the Ray cluster at this address (``auto``: ``$RAY_ADDRESS``, else this
            machine's; `declrag.ingest.distributed`); the result is the index one process builds.
        ray_actors: the embedders on the cluster, sharing its CPUs; None: one per GPU, else one per node-sized share
            of the CPUs (`declrag.ingest.distributed.sizes`).
        ocr: read PDF pages without a text layer by OCR; None: where Tesseract is installed (`declrag.ingest.ocr`).
        pdf_reader: the library that reads PDFs' text (`declrag.ingest.loaders.PDF_READERS`).
        readers: who may read the documents (`declrag.ingest.readers`); None: each keeps what the store holds, a new
            one is unlabelled; a rebuild keeps the readers of the store it replaces.

    Returns:
        What was indexed, kept, relabelled, skipped (each file with its reason) and removed, with the times.

    Raises:
        DeclragError: nothing to index, a path that does not exist, an unknown PDF reader, a store built with other
            ingest settings, an unreachable store or cluster (each one line, with the fix).
    """
    if not paths and not datasets:
        raise DeclragError("nothing to index", hint="give file or folder paths, or --dataset NAME")
    if pdf_reader not in PDF_READERS:
        raise DeclragError(f"unknown PDF reader {pdf_reader!r}", hint=f"use one of {', '.join(PDF_READERS)}")
    _check_paths(paths)  # before the store is opened, so a typo creates nothing
    target = str(store or default_store())
    cluster = _cluster(ray, ray_actors, paths, target) if ray is not None else None
    old_meta = read_meta(target) if rebuild else None
    readers = readers or Readers()
    if old_meta is not None:  # what a document was labelled with outlives the store rebuilt without it
        with connect(target) as st:
            readers = replace(readers, kept={**{d: r.readers for d, r in st.documents().items() if r.readers},
                                             **readers.kept})
    if old_meta is not None and (folder := local_folder(target)) is not None:  # built beside it, then swapped in
        return _swapped_in(folder, lambda tmp: index(paths, datasets, tmp, ingest or old_meta.ingest, metric, prune,
                                                     False, progress, embedder, ray, ray_actors, ocr, pdf_reader,
                                                     readers))
    if old_meta is not None:  # a server's collection cannot be renamed: emptied and refilled
        with connect(target) as st:
            st.drop()
        ingest = ingest or old_meta.ingest
    st, meta = open_store(target, ingest, metric)  # checks ``ingest`` against the store's; None: the store's own
    with st:
        indexer = Indexer(st, meta.ingest, embedder or Embedder(meta.ingest.embedder), progress=progress,
                          cluster=cluster, ocr=ocr, pdf_reader=pdf_reader, readers=readers)
        report = IndexReport(embedder=meta.ingest.embedder.model)
        if paths:
            report.add(indexer.index_paths(paths, prune=prune))
        if datasets:
            for name in datasets:
                report.add(indexer.index_documents(load_golden(name).documents))
        if report.indexed or report.deleted:
            st.optimize()
    return report


def _swapped_in(folder: Path, build: Callable[[Path], IndexReport]) -> IndexReport:
    """A store rebuilt beside ``folder`` (``build`` indexes into the folder it is given), then swapped in; when every
    source was skipped the store is kept, not replaced by an empty one."""
    tmp = folder.with_name(folder.name + ".rebuild")
    shutil.rmtree(tmp, ignore_errors=True)
    report = build(tmp)
    if report.nothing:
        shutil.rmtree(tmp, ignore_errors=True)
        return report
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)
    return report


def _cluster(address: str | None, actors: int | None, paths: Sequence[str | Path], target: str):
    """The Ray cluster to index over, joined and checked (every node runs this declrag, reads ``paths``, reaches
    the store when its actors write it: a server store) before anything is written."""
    # the Ray path's modules (and Weaviate's URI parser): loaded by --ray only
    from .ingest import distributed
    from .stores.weaviate.target import Target

    where = distributed.preflight(address, actors)
    distributed.start(where)
    server = local_folder(target) is None
    t = Target.parse(target) if server else None
    distributed.check_nodes([str(Path(p).resolve()) for p in paths], (t.host, t.port) if t else None)
    return distributed.Cluster(where, actors, target if server else None)


def load_documents(paths: Sequence[str | Path] = (), datasets: Sequence[str] = ()) -> tuple[list[Document], list]:
    """The documents `index` would index, without indexing them.

    Args:
        paths: files and folders, as `index` takes them.
        datasets: golden sets whose corpora are read too, by name or path.

    Returns:
        The documents (as `index` would store them, under the same ids) and the files skipped, each with its reason.

    Raises:
        DeclragError: a path that does not exist, or a golden set that cannot be found.
    """
    _check_paths(paths)
    docs, skipped = load_paths(paths)
    if datasets:
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


def search(query: str, store: str | Path | None = None, params: SearchParams | None = None,
           embedder: Embedder | None = None) -> list[Hit]:
    """Search an existing store with its own embedding model.

    Args:
        query: the text searched (a non-empty string).
        store: a folder or a URI, as `index` takes it; None: the default store.
        params: how to search (`SearchParams`: mode, limit, alpha, fusion, filter, window, hand-over); None: the
            defaults (hybrid, 10 passages).
        embedder: the embedding model; None: the store's own (no model is loaded for a keyword search).

    Returns:
        Up to ``params.limit`` passages, best first, each with its chunk, score, text and span in its document.

    Raises:
        DeclragError: an empty or invalid query, a store that does not exist or is empty, an invalid filter.
    """
    query = user_text(query, "query")
    st, meta = open_store(store or default_store(), create=False)
    if st.count() == 0:
        raise DeclragError(f"store {store or default_store()} is empty",
                           hint="index something first: declrag index PATH")
    p = params or SearchParams()
    emb = embedder if embedder is not None or (p.mode == "keyword") else Embedder(meta.ingest.embedder)
    return _search(st, emb, query, p)
