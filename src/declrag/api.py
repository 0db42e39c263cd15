"""The Python API behind the CLI: index sources into a store, search it. (The content-addressed indexes that
evaluation, compile and the benchmarks share are `declrag.ingest.corpus`.)"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
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

    ``ingest`` defaults to the store's own settings (or the defaults for a new store). ``rebuild`` builds
    the store anew from these sources: a folder is built beside the old one and swapped in only when
    complete; a Weaviate collection (which cannot be renamed) is emptied and refilled. ``ray``: read, chunk and
    embed over the Ray cluster at this address (``auto``: ``$RAY_ADDRESS``, else this machine's) with
    ``ray_actors`` embedders (`declrag.ingest.distributed`); the result is the index one process builds. ``ocr``:
    read PDF pages without a text layer by OCR (None: where Tesseract is installed; `declrag.ingest.ocr`);
    ``pdf_reader``: the library that reads PDFs' text (`declrag.ingest.loaders.PDF_READERS`). ``readers``: who may
    read the documents (`declrag.ingest.readers`; None: each keeps what the store holds, a new one is unlabelled; a
    rebuild keeps the readers of the store it replaces).
    A rebuild that could index nothing leaves the store as it was (`IndexReport.nothing`).
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
        tmp = folder.with_name(folder.name + ".rebuild")
        shutil.rmtree(tmp, ignore_errors=True)
        report = index(paths, datasets, tmp, ingest or old_meta.ingest, metric, prune, False, progress, embedder,
                       ray, ray_actors, ocr, pdf_reader, readers)
        if report.nothing:  # every source skipped: the store is kept, not replaced by an empty one
            shutil.rmtree(tmp, ignore_errors=True)
            return report
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
    """The documents `index` would index from these files, folders and golden-set corpora, under the same ids,
    and the files skipped (with reasons)."""
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
    """Search an existing store with its own embedding model."""
    query = user_text(query, "query")
    st, meta = open_store(store or default_store(), create=False)
    if st.count() == 0:
        raise DeclragError(f"store {store or default_store()} is empty",
                           hint="index something first: declrag index PATH")
    p = params or SearchParams()
    emb = embedder if embedder is not None or (p.mode == "keyword") else Embedder(meta.ingest.embedder)
    return _search(st, emb, query, p)
