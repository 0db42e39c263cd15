"""declrag's own folders (light: nothing here imports more than the standard library)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """declrag's cache folder: $DECLRAG_CACHE, else ~/.cache/declrag."""
    return Path(os.environ.get("DECLRAG_CACHE") or Path.home() / ".cache" / "declrag").expanduser()


def default_store() -> str:
    """$DECLRAG_STORE, else .declrag/store in the current folder (a store URI: a folder or weaviate://...)."""
    return os.environ.get("DECLRAG_STORE") or ".declrag/store"
