"""Stores: where chunks live and how they are searched. `open_store` is the one way in.

A store is named by a URI, and the scheme picks the backend (`declrag.stores.backends.BACKENDS`): a plain path (or
``file://``) is the embedded LanceDB store in that folder, ``weaviate://host:port/Collection`` a Weaviate
collection. Each backend keeps its `StoreMeta` (ingest settings, metric) inside the store, so every backend checks
ingest settings the same way, here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..config import IngestConfig, Metric
from ..errors import DeclragError
from .backends import BACKENDS, backends
from .base import Store, StoreMeta


def store_uri(where: str | Path) -> str:
    """The URI naming a store: paths as given, URIs as written."""
    if not isinstance(where, (str, Path)):
        raise TypeError(f"a store is named by a path or a URI, not {type(where).__name__}")
    return str(where)


def _scheme(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def _backend(uri: str) -> type[Store]:
    """The class of the backend ``uri``'s scheme names (`declrag.stores.base.backends`: declrag's own, and those of
    installed distributions)."""
    scheme, known = _scheme(uri), backends()
    if scheme not in known:
        raise DeclragError(f"unknown store {uri!r}: no backend for {scheme}://",
                           hint="name a folder (the embedded store) or weaviate://host:port/Collection"
                                + (f"; installed: {', '.join(s + '://' for s in known if s)}" if known else ""))
    module, cls = known[scheme][1].split(":")
    try:
        return getattr(importlib.import_module(f"{__package__}.{module}" if scheme in BACKENDS else module), cls)
    except (ImportError, AttributeError) as e:
        raise DeclragError(f"the store backend for {scheme}:// ({known[scheme][1]}) cannot be loaded: {e}",
                           hint="reinstall the package that provides it, or name another store") from None


def local_folder(where: str | Path) -> Path | None:
    """The folder of a store that lives in one on this machine (the ``local_folder`` capability: a path or
    file://...); None for a server."""
    uri = store_uri(where)
    scheme = _scheme(uri)
    if scheme not in backends() or "local_folder" not in _backend(uri).capabilities:
        return None
    return Path(uri.split("://", 1)[1] if scheme else uri)


def connect(where: str | Path) -> Store:
    """The store named by ``where``, connected but not created or checked (see `open_store`).

    Args:
        where: a folder (the embedded store) or a URI whose scheme names a backend (`declrag.stores.backends.backends`).

    Returns:
        The store handle (close it, or use it as a context manager).

    Raises:
        DeclragError: no backend for the URI's scheme, or one that cannot be loaded.
    """
    uri = store_uri(where)
    return _backend(uri).from_uri(uri)


def read_meta(where: str | Path) -> StoreMeta | None:
    """What the store at ``where`` was built with.

    Args:
        where: a folder or a URI, as `connect` takes it.

    Returns:
        Its settings (ingest, metric, backend, format); None when there is no store there.

    Raises:
        DeclragError: no backend for the URI, or a server that cannot be reached.
    """
    with connect(where) as store:
        return store.read_meta()


def open_store(where: str | Path, ingest: IngestConfig | None = None, metric: Metric | None = None,
               create: bool = True) -> tuple[Store, StoreMeta]:
    """Open the store named by ``where``, checking that it was built with ``ingest``.

    Args:
        where: a folder or a URI, as `connect` takes it.
        ingest: the ingest settings the caller searches with; None: whatever the store was built with.
        metric: the vector metric; None: the store's (a new store: cosine).
        create: make the store when there is none (with ``ingest`` and ``metric``).

    Returns:
        The store and its settings.

    Raises:
        DeclragError: no store there (and ``create`` false), a store built with other ingest settings or another metric,
            a server that cannot be reached.
    """
    uri = store_uri(where)
    store = connect(uri)
    try:
        meta = store.read_meta()
        if meta is None:
            if not create:
                raise DeclragError(f"no store at {uri}", hint=f"build one first: declrag index PATH --store {uri}")
            meta = StoreMeta(backend=store.backend, ingest=ingest or IngestConfig(), metric=metric or "cosine")
            store.create(meta)
        else:
            if ingest is not None:
                check_ingest(uri, meta.ingest, ingest)
            if metric is not None and metric != meta.metric:
                raise DeclragError(f"store {uri} uses the {meta.metric} metric, not {metric}",
                                   hint="metrics are fixed when a store is created; use a new store")
    except BaseException:
        store.close()
        raise
    return store, meta


def check_ingest(uri: str, built: IngestConfig, wanted: IngestConfig) -> None:
    """The one ingest-settings check: a store answers only for the settings it was built with."""
    if built.digest() != wanted.digest():
        raise DeclragError(
            f"store {uri} was built with other ingest settings ({_describe(built, wanted)}) than asked "
            f"({_describe(wanted, built)})",
            hint="point at a store built with these settings, use a new store, or rebuild this one "
                 "(declrag index ... --rebuild with --chunker/--chunk-size/--overlap/--model/--backend)")


def child_uri(base: str | Path, name: str) -> str:
    """The URI of the store called ``name`` under ``base``: a sub-folder of a folder, or a collection on the
    same Weaviate server (named after ``base``'s collection, if it has one)."""
    uri = store_uri(base)
    return _backend(uri).child_uri(uri, name)


def list_stores(base: str | Path) -> list[tuple[str, StoreMeta, int]]:
    """Every declrag store under ``base`` (a folder, or a Weaviate server): (uri, meta, chunk count)."""
    uri = store_uri(base)
    return _backend(uri).list_stores(uri)


def _describe(ingest: IngestConfig, other: IngestConfig) -> str:
    """The usual settings, and any other setting in which ``ingest`` differs from ``other``."""
    c, e = ingest.chunker, ingest.embedder
    more = [f"{f}={getattr(c, f)}" for f in ("parent_size", "semantic_percentile")
            if getattr(c, f) != getattr(other.chunker, f)]
    more += [f"{f}={getattr(e, f)}" for f in ("backend", "max_seq_length", "query_prefix", "document_prefix", "weights")
             if getattr(e, f) != getattr(other.embedder, f)]
    return " ".join([f"chunker={c.name} size={c.chunk_size} overlap={c.overlap} model={e.model}", *more])
