"""The embedder: real model, normalised vectors, an on-disk cache that prevents re-embedding, and
model resolution that falls back to the offline package when the hub cannot be reached."""

from __future__ import annotations

import numpy as np
import pytest

from declrag.config import EmbedderConfig
from declrag.runtime.device import gpu_possible
from declrag.embed.embedder import Embedder, EmbeddingCache, canonical_model_name, resolve_model
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


# ------------------------------------------------------------------------------------- ONNX backends
TEXTS = ["Normandy is a region of France.", "What is the boiling point of water at sea level?",
         "Amoxicillin shortened otitis media by 1.6 days in 412 children. " * 8, "ok"]


def test_onnx_is_the_default_and_torchs_index_only_int8_is_another():
    from declrag.config import IngestConfig

    assert EmbedderConfig().backend == "onnx"
    keys = {b: Embedder(EmbedderConfig(backend=b)).key for b in ("torch", "onnx", "onnx-int8")}
    digests = {b: IngestConfig(embedder=EmbedderConfig(backend=b)).digest() for b in ("torch", "onnx", "onnx-int8")}
    # torch and float32 ONNX: the same vectors to float32 rounding, so one cache entry and one index, the identity
    # of indexes built before backends existed; int8 weights change the vectors, so another cache and index
    assert keys["torch"] == keys["onnx"] != keys["onnx-int8"] and digests["torch"] == digests["onnx"] != \
        digests["onnx-int8"]
    assert "backend" not in EmbedderConfig().identity() and "backend" not in keys["torch"]
    assert EmbedderConfig(backend="onnx-int8").identity()["backend"] == "onnx-int8"
    with pytest.raises(ValueError):
        EmbedderConfig(backend="tensorrt")


@pytest.mark.parametrize("backend,floor", [("onnx", 0.9999), ("onnx-int8", 0.95)])
def test_onnx_backends_embed_like_torch_and_export_once(tmp_path, backend, floor):
    ref = Embedder(EmbedderConfig(backend="torch")).model.encode(TEXTS, normalize_embeddings=True)
    e = Embedder(EmbedderConfig(backend=backend), EmbeddingCache(tmp_path / "c.sqlite3"))
    got = e.embed_documents(TEXTS)
    assert got.shape == (len(TEXTS), 384) and e.dim == 384
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert (got * ref).sum(axis=1).min() >= floor
    path, stamp = e.model.path, e.model.path.stat().st_mtime_ns
    again = Embedder(EmbedderConfig(backend=backend), EmbeddingCache(tmp_path / "d.sqlite3"))
    assert np.allclose(again.embed_documents(TEXTS), got, atol=1e-6)
    assert again.model.path == path and path.stat().st_mtime_ns == stamp  # the export is reused, not redone
    # retrieval still works: each text is its own nearest neighbour among the others
    q = e.embed_queries(["Which region of France?", "boiling point of water"])
    assert (q @ got.T).argmax(axis=1).tolist() == [0, 1]


def test_a_model_onnx_cannot_run_is_a_clear_error_naming_the_setting(tmp_path, minilm):
    import json
    import shutil

    folder = tmp_path / "with-dense"
    shutil.copytree(minilm.folder, folder)
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    e = Embedder(EmbedderConfig(model=str(folder), backend="onnx-int8"), EmbeddingCache(tmp_path / "c.sqlite3"))
    with pytest.raises(DeclragError) as err:
        e.embed_documents(["x"])
    assert "backend 'onnx-int8'" in str(err.value) and "Dense" in str(err.value)
    assert "backend: torch" in err.value.hint


def test_the_default_runs_a_model_onnx_cannot_on_torch_and_says_so(tmp_path, minilm, caplog):
    import json
    import shutil

    folder = tmp_path / "weighted"
    shutil.copytree(minilm.folder, folder)
    pooling = folder / "1_Pooling" / "config.json"
    conf = json.loads(pooling.read_text())
    conf.update(pooling_mode_mean_tokens=False, pooling_mode_weightedmean_tokens=True)  # a pooling ONNX here lacks
    pooling.write_text(json.dumps(conf))
    with caplog.at_level("WARNING"):
        got = Embedder(EmbedderConfig(model=str(folder)), EmbeddingCache(tmp_path / "c.sqlite3")).embed_documents(["x"])
    assert "running it on torch instead" in caplog.text
    ref = Embedder(EmbedderConfig(model=str(folder), backend="torch"), EmbeddingCache(tmp_path / "d.sqlite3"))
    assert np.allclose(got, ref.embed_documents(["x"]), atol=1e-6)
    with pytest.raises(DeclragError) as err:
        Embedder(EmbedderConfig(backend="onnx-int8", device="cuda")).embed_query("x")
    assert "CPU only" in str(err.value)


def test_onnx_and_torch_agree_on_the_shared_sets_within_the_stated_tolerance(tmp_path):
    """The equivalence that lets onnx read torch's indexes: on 200 SQuAD v2.0 paragraphs and 100 SciFact abstracts,
    every vector within cosine 0.9999 of torch's (the export's own check uses the same floor)."""
    import json

    from tests.conftest import shared

    squad = json.loads(shared("squad-v2.0", "dev-v2.0.json").read_text())["data"]
    texts = [p["context"] for a in squad for p in a["paragraphs"]][:200]
    with shared("scifact", "corpus.jsonl").open() as f:
        texts += [" ".join(json.loads(line)["text"].split()[:300]) for _, line in zip(range(100), f)]
    vectors = {b: Embedder(EmbedderConfig(backend=b), EmbeddingCache(tmp_path / f"{b}.sqlite3")).embed_documents(texts)
               for b in ("torch", "onnx")}
    cosine = (vectors["torch"] * vectors["onnx"]).sum(axis=1)
    assert len(texts) == 300 and cosine.min() >= 0.9999, cosine.min()


def test_without_onnxruntime_the_default_runs_on_torch_and_says_so(monkeypatch, caplog):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    e = Embedder(EmbedderConfig())
    with caplog.at_level("WARNING"):
        assert e._onnx_here() is False
    assert "onnxruntime is not installed" in caplog.text


@pytest.mark.skipif(gpu_possible(), reason="a GPU may be here, and the default embedder then runs torch on it")
def test_a_process_on_the_onnx_embedder_never_imports_torch(tmp_path):
    """The export runs in a child process and the tokenizer is the `tokenizers` one, so a process that embeds on
    ``onnx`` (a server, above all: N of them with ``--processes N``) holds no torch: about 250 MB instead of 700 MB
    here. A fresh cache folder: the export happens too, in its child."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys\nfrom declrag.embed.embedder import Embedder\n"
            "v = Embedder().embed_queries(['Which region of France?', 'x'])\n"
            "print(json.dumps({'torch': 'torch' in sys.modules, 'transformers': 'transformers' in sys.modules,"
            " 'shape': list(v.shape)}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "DECLRAG_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got == {"torch": False, "transformers": False, "shape": [2, 384]}
    assert list((tmp_path / "cache" / "onnx").glob("*/model.onnx"))  # exported, by the child, into this cache
