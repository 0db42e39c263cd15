"""The embedder: real model, normalised vectors, an on-disk cache that prevents re-embedding, and
model resolution that falls back to the offline package when the hub cannot be reached."""

from __future__ import annotations

import numpy as np
import pytest

from declrag.config import EmbedderConfig
from declrag.embed import Embedder, EmbeddingCache, canonical_model_name, resolve_model
from declrag.errors import DeclragError


def test_vectors_are_normalised_and_semantic(minilm):
    v = minilm.embed_documents(["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell today."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_cache_prevents_re_embedding(tmp_path, minilm):
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    e = Embedder(EmbedderConfig(), cache=cache)
    e.__dict__["model"] = minilm.model  # share the loaded weights; the cache under test is new
    first = e.embed_documents(["alpha text", "beta text", "alpha text"])
    assert e.calls == 2 and cache.count(e.key) == 2  # duplicates are embedded once
    again = e.embed_documents(["beta text", "alpha text", "gamma text"])
    assert e.calls == 3  # only gamma is new
    assert np.array_equal(again[1], first[0]) and np.array_equal(again[0], first[1])
    # a new process (new Embedder, same cache file) does not load the model for cached texts
    fresh = Embedder(EmbedderConfig(), cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    assert np.array_equal(fresh.embed_documents(["alpha text"])[0], first[0])
    assert fresh.calls == 0 and "model" not in fresh.__dict__


def test_cache_key_separates_models_and_settings():
    a = Embedder(EmbedderConfig(model="all-MiniLM-L6-v2"))
    b = Embedder(EmbedderConfig(model="sentence-transformers/all-MiniLM-L6-v2", max_seq_length=128))
    assert a.name == "sentence-transformers/all-MiniLM-L6-v2" == b.name
    assert a.key != b.key


def test_hub_name_resolves_to_the_offline_package(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    assert (folder / "modules.json").exists()
    assert canonical_model_name("all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"


def test_a_local_folder_is_used_as_is(minilm):
    assert resolve_model(str(minilm.folder)) == minilm.folder.resolve()


def test_unknown_model_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DeclragError) as e:
        resolve_model("nobody/no-such-model")
    assert "nobody/no-such-model" in str(e.value) and e.value.hint
