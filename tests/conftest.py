"""Shared fixtures. Tests never write outside their temporary folders: the embedding cache and the
default store are redirected per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("declrag-cache")
    old = {k: os.environ.get(k) for k in ("DECLRAG_CACHE", "DECLRAG_STORE")}
    os.environ["DECLRAG_CACHE"] = str(cache)
    os.environ["DECLRAG_STORE"] = str(cache / "default-store")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def shared(*parts: str) -> Path:
    """A file of the shared golden sets; skips the test when the folder is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared dataset not found: {p}")
    return p


@pytest.fixture(scope="session")
def minilm():
    """The real default embedder (all-MiniLM-L6-v2, from the hub or its offline package)."""
    from declrag.embed import Embedder

    e = Embedder()
    e.model  # load once per session
    return e
