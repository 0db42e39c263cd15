"""Weaviate for real, end to end: the CLI on a collection, a saved program that reopens its collection, an
API-key-protected server, and a three-node cluster losing and regaining a node under load."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.stores import child_uri, open_store

from tests.conftest import WEAVIATE_SCRIPT, free_port_block, start_weaviate, stop_weaviate
from tests.unit.cli.test_cli import docs, run  # noqa: F401  (the docs fixture)

pytestmark = pytest.mark.weaviate
GOLD = Path(__file__).parents[1] / "data" / "tiny" / "gold.jsonl"


def test_cli_indexes_searches_and_removes_on_weaviate(capsys, weaviate_url, docs):  # noqa: F811
    base = weaviate_url
    uri = child_uri(base, f"cli{uuid.uuid4().hex[:8]}")
    code, out, err = run(capsys, "index", str(docs), "--store", uri, "--chunk-size", "64", "--overlap", "8", "-q")
    assert code == 0, err
    assert "3 documents indexed" in out and "1 skipped" in out
    code, out, _ = run(capsys, "search", "how do solar panels make electricity", "--store", uri, "--json", "-k", "2")
    hits = json.loads(out)
    assert code == 0 and hits[0]["source"].endswith("solar.md")
    a, b = hits[0]["span"]
    assert (docs / "solar.md").read_text()[a:b] == hits[0]["text"]
    code, out, _ = run(capsys, "index", str(docs), "--store", uri, "-q")
    assert "0 documents indexed" in out and "3 unchanged" in out
    code, _, err = run(capsys, "index", str(docs), "--store", uri, "--chunker", "sentence", "-q")
    assert code == 2 and "other ingest settings" in err
    code, out, err = run(capsys, "index", str(docs), "--store", uri, "--chunker", "sentence", "--rebuild", "-q")
    assert code == 0 and "3 documents indexed" in out, err
    code, out, _ = run(capsys, "indexes", "list", "--store", base, "--json")
    listed = {r["store"]: r for r in json.loads(out)}
    assert code == 0 and listed[uri]["ingest"]["chunker"]["name"] == "sentence" and listed[uri]["chunks"] > 0
    code, out, _ = run(capsys, "indexes", "rm", uri, "--store", base)
    assert code == 0 and "removed" in out
    code, _, err = run(capsys, "search", "solar", "--store", uri)
    assert code == 2 and "no store at" in err


def test_a_saved_program_reopens_its_collection(tmp_path, weaviate_url, minilm):
    from declrag.pipeline.program import RAGProgram
    from declrag.serve import resolve
    from declrag.testing.store_contract import corpus

    uri = child_uri(weaviate_url, f"prog{uuid.uuid4().hex[:8]}")
    store, meta = open_store(uri, ProgramConfig().ingest)
    try:
        store.upsert(*corpus(minilm))
        prog = RAGProgram(ProgramConfig(), store=uri)
        prog.save(tmp_path / "p")
        saved = json.loads((tmp_path / "p" / "program.json").read_text())
        assert saved["store"]["uri"] == store.uri and "API" not in saved["store"]["uri"]
        name, _, what, loader, _ = resolve(tmp_path / "p")
        again = loader()
        assert again.store.uri == store.uri and again.store.count() == 10
        assert [h.chunk.id for h in again.retrieve_only("Colosseum amphitheatre")][:1] == ["rome#1"]
    finally:
        store.drop()


def test_api_key_server_refuses_wrong_credentials(tmp_path, monkeypatch):
    folder = tmp_path / "wv"
    base = start_weaviate(folder, api_key="s3cret-key")
    try:
        uri = child_uri(base, "Keyed")
        monkeypatch.delenv("WEAVIATE_API_KEY", raising=False)
        with pytest.raises(DeclragError, match=r"refused the credentials \(\$WEAVIATE_API_KEY is not set\)"):
            open_store(uri)
        monkeypatch.setenv("WEAVIATE_API_KEY", "wrong")
        with pytest.raises(DeclragError, match="refused the credentials"):
            open_store(uri)
        monkeypatch.setenv("MY_KEY", "s3cret-key")
        store, _ = open_store(uri + ("&" if "?" in uri else "?") + "api_key_env=MY_KEY")
        assert store.count() == 0 and "s3cret" not in store.uri
        store.drop()
    finally:
        stop_weaviate(folder)


def test_running_lines_are_left_out_of_the_keyword_index_on_both_backends(tmp_path, weaviate_url):
    from declrag.config import IngestConfig
    from declrag.ingest.indexer import Indexer
    from declrag.testing import HashEmbedder

    pages = [f"Header of the report\nThe {w} section is about retrieval.\nBibliothek der TU Wien\n{n}"
             for n, w in enumerate(["alpha", "beta", "gamma", "delta"], 1)]
    report = tmp_path / "report.txt"
    report.write_text("\f".join(pages))  # pages, as pdftotext writes them
    for uri in (str(tmp_path / "lance"), child_uri(weaviate_url, f"run{uuid.uuid4().hex[:8]}")):
        store, meta = open_store(uri, IngestConfig())  # no header: Weaviate searches `searched` all the same
        try:
            Indexer(store, meta.ingest, HashEmbedder(), progress=False).index_paths([report])
            store.settle()
            assert store.keyword_search("Bibliothek") == [], uri
            hits = store.keyword_search("gamma")
            assert hits and "Bibliothek der TU Wien" in hits[0].chunk.text, uri  # its text stays whole
        finally:
            if uri.startswith("weaviate"):
                store.drop()
