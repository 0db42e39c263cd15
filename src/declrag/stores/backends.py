"""The store backends, by URI scheme: declrag's own (`BACKENDS`) and those other distributions register
(`ENTRY_POINTS`), read by `backends`."""

from __future__ import annotations

import importlib.metadata
from functools import cache

#: One row per URI scheme: the backend's name (as `StoreMeta.backend` records it) and its class, as
#: ``module:Class`` under ``declrag.stores`` (imported when a store of that scheme is first opened). Adding a
#: backend is one row here and a class that implements `Store` and passes `declrag.testing.StoreContract`; a backend
#: that lives outside declrag registers an entry point instead (`ENTRY_POINTS`, read by `backends`).
BACKENDS: dict[str, tuple[str, str]] = {
    "": ("lancedb", "_lancedb:LanceStore"),  # a plain path
    "file": ("lancedb", "_lancedb:LanceStore"),
    "weaviate": ("weaviate", "weaviate:WeaviateStore"),
    "weaviates": ("weaviate", "weaviate:WeaviateStore"),  # TLS
}
#: The entry-point group of store backends other distributions provide: ``scheme = "package.module:Class"`` (in a
#: pyproject.toml: ``[project.entry-points."declrag.stores"]``), the class a `Store` with ``from_uri(uri)``.
ENTRY_POINTS = "declrag.stores"


@cache
def backends() -> dict[str, tuple[str, str]]:
    """Every backend, by URI scheme: `BACKENDS` (``module:Class`` under ``declrag.stores``) and those registered
    under `ENTRY_POINTS` by installed distributions (``package.module:Class``, their backend named by the scheme; a
    built-in scheme is never taken over). Read once per process (``backends.cache_clear()`` reads them again)."""
    out = dict(BACKENDS)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
        out.setdefault(ep.name.lower(), (ep.name.lower(), ep.value))
    return out
