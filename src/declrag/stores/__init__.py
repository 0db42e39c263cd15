"""Stores: where chunks live and how they are searched. `open_store` is the one way in."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ..config import IngestConfig, Metric, Strict
from ..errors import DeclragError
from .base import DocRecord, Filter, Store

__all__ = ["DocRecord", "Filter", "Store", "StoreMeta", "open_store", "read_meta"]

META_FILE = "store.json"


class StoreMeta(Strict):
    """What a store was built with; written once, when the store is created."""

    format: int = 1
    backend: Literal["lancedb"] = "lancedb"
    metric: Metric = "cosine"
    ingest: IngestConfig = IngestConfig()


def read_meta(path: str | Path) -> StoreMeta | None:
    f = Path(path) / META_FILE
    if not f.exists():
        return None
    try:
        return StoreMeta.model_validate_json(f.read_text())
    except (ValidationError, ValueError) as e:
        raise DeclragError(f"{f} is not a declrag store description: {str(e).splitlines()[0]}",
                           hint="point --store at a folder made by `declrag index`, or at a new folder") from e


def open_store(path: str | Path, ingest: IngestConfig | None = None, metric: Metric | None = None,
               create: bool = True) -> tuple[Store, StoreMeta]:
    """Open the store at ``path`` (creating it when ``create``), checking that ``ingest`` matches what
    it was built with. Returns the store and its metadata."""
    path = Path(path)
    meta = read_meta(path)
    if meta is None:
        if not create:
            raise DeclragError(f"no store at {path}", hint="build one first: declrag index PATH --store " + str(path))
        if path.exists() and any(path.iterdir()):
            raise DeclragError(f"{path} exists and is not a declrag store",
                               hint="choose an empty or new folder for --store")
        meta = StoreMeta(ingest=ingest or IngestConfig(), metric=metric or "cosine")
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta.model_dump(mode="json"), indent=2))
        os.replace(tmp, path / META_FILE)
    else:
        if ingest is not None and ingest.digest() != meta.ingest.digest():
            raise DeclragError(
                f"store {path} was built with different ingest settings "
                f"({_describe(meta.ingest)}) than asked ({_describe(ingest)})",
                hint="use a new --store folder for these settings, or pass --rebuild to re-chunk everything")
        if metric is not None and metric != meta.metric:
            raise DeclragError(f"store {path} uses the {meta.metric} metric, not {metric}",
                               hint="metrics are fixed when a store is created; use a new --store folder")
    from .lancedb import LanceStore

    return LanceStore(path, metric=meta.metric), meta


def _describe(ingest: IngestConfig) -> str:
    c = ingest.chunker
    return f"chunker={c.name} size={c.chunk_size} overlap={c.overlap} model={ingest.embedder.model}"
