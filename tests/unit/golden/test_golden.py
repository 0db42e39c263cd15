"""Golden-set loading: the real shared datasets (counts, encodings, offsets) and synthetic edge cases."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from declrag.golden import _loading as golden
from declrag.errors import DeclragError
from declrag.golden import find_spec, known_datasets, load_golden

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared datasets not found at {DATA}")


@pytest.fixture(autouse=True)
def _isolated_registry(monkeypatch, tmp_path_factory):
    # a ./datasets in some other working directory must not leak into these tests
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.delenv("DECLRAG_DATASETS", raising=False)


# ------------------------------------------------------------------------------------ real data

@needs_data
def test_squad_v11_counts_and_offsets():
    g = load_golden(str(DATA / "squad-v1.1" / "dev-v1.1.json"))
    dev = g.split("dev")
    assert len(g.documents) == 2067 and len(dev) == 10570
    assert all(ex.answerable and ex.answers for ex in dev)
    for ex in dev:
        (doc_id,) = ex.gold
        text = g.doc(doc_id).text
        assert len(ex.answer_starts) == len(ex.answers)
        for answer, start in zip(ex.answers, ex.answer_starts):
            assert text[start:start + len(answer)] == answer
        assert len(set(ex.answers)) == len(ex.answers)
    first = g.documents[0]
    assert first.id == "Super_Bowl_50#0" and first.title == "Super Bowl 50"


@needs_data
def test_squad_v20_counts_and_unanswerable():
    g = load_golden(str(DATA / "squad-v2.0" / "dev-v2.0.json"))
    dev = g.split("dev")
    assert len(g.documents) == 1204 and len(dev) == 11873
    impossible = [ex for ex in dev if not ex.answerable]
    assert len(impossible) == 5945
    assert all(ex.answers == () and ex.answer_starts == () for ex in impossible)
    with_plausible = [ex for ex in impossible if ex.metadata.get("plausible_answers")]
    assert with_plausible
    ex = with_plausible[0]
    start, text = ex.metadata["plausible_answer_starts"][0], ex.metadata["plausible_answers"][0]
    assert g.doc(next(iter(ex.gold))).text[start:start + len(text)] == text


@needs_data
def test_scifact_counts_and_registry_matches_path():
    g = load_golden(str(DATA / "scifact"))
    assert len(g.documents) == 5183
    assert len(g.split("test")) == 300 and len(g.split("train")) == 809
    assert all(ex.gold and all(v > 0 for v in ex.gold.values()) and ex.answers == () for ex in g.split("test"))
    doc = g.doc("4983")
    assert doc.text.startswith(doc.title + "\n\n") and doc.title.startswith("Microstructural development")
    registered = load_golden("scifact")
    assert registered == g
    assert registered.documents is not g.documents  # callers get their own lists, not the cache's


@needs_data
@pytest.mark.parametrize("rel", ["scifact", "squad-v1.1/dev-v1.1.json", "squad-v2.0/dev-v2.0.json"])
def test_cold_load_is_fast(rel):
    golden._parse_local.cache_clear()
    t = time.perf_counter()
    load_golden(str(DATA / rel))
    assert time.perf_counter() - t < 2.0


@needs_data
def test_split_limits_examples_but_keeps_corpus():
    g = load_golden("scifact", split="test")
    assert list(g.splits) == ["test"] and len(g.documents) == 5183
    with pytest.raises(DeclragError, match="available: train, test"):
        load_golden("scifact", split="validation")
    with pytest.raises(DeclragError, match="available"):
        g.split("train")


@needs_data
def test_cmu_qa_real():
    g = load_golden(str(DATA / "cmu-qa"))
    examples = g.split("all")
    assert len(examples) > 1000 and len(g.documents) > 100
    assert any(not ex.answerable for ex in examples)
    assert all(ex.answers == () for ex in examples if not ex.answerable)
    assert not any("\ufffd" in d.text for d in g.documents)
    assert not any("\ufffd" in ex.question or any("\ufffd" in a for a in ex.answers) for ex in examples)
    # a Latin-1 article decodes to real accented letters
    assert "Mémoire sur les masses relatives" in g.doc("S08/data/set4/a8").text
    # a question asked several times is one example with all its answers (deduplicated case-insensitively)
    question = "Was Abraham Lincoln the sixteenth President of the United States?"
    lincoln = [ex for ex in examples if ex.question == question and ex.gold == {"S08/data/set3/a4": 1}]
    assert len(lincoln) == 1 and len(lincoln[0].answers) >= 2
    assert len({ex.id for ex in examples}) == len(examples)
    assert g.doc("S08/data/set3/a4").title == "Abraham Lincoln"
    assert load_golden("cmu-qa") == g


@needs_data
def test_declarations_point_at_the_shared_data():
    known = known_datasets()
    assert {"scifact", "squad-v1.1", "squad-v2.0", "cmu-qa"} <= set(known)
    for name in ("scifact", "squad-v1.1", "squad-v2.0", "cmu-qa"):
        spec = find_spec(name)
        assert spec.local_path().exists(), name
        assert spec.hf is not None and spec.description and spec.license
    assert find_spec("scifact").reference["bm25_ndcg@10"] == pytest.approx(0.665)


# ------------------------------------------------------------------------------------ synthetic

def test_unknown_name_lists_known_names():
    with pytest.raises(DeclragError) as err:
        load_golden("no-such-dataset")
    assert "scifact" in str(err.value) and err.value.hint
    with pytest.raises(DeclragError, match="known: .*squad-v1.1"):
        find_spec("no-such-dataset")


def test_malformed_yaml_names_file_and_field(tmp_path, monkeypatch):
    (tmp_path / "broken.yaml").write_text("name: broken\nformat: csv\npath: x\n")
    monkeypatch.setenv("DECLRAG_DATASETS", str(tmp_path))
    with pytest.raises(DeclragError) as err:
        find_spec("broken")
    assert "broken.yaml" in str(err.value) and "format" in str(err.value)
    (tmp_path / "broken.yaml").write_text("name: broken\nformat: beir\npaht: x\n")
    with pytest.raises(DeclragError, match="paht"):
        load_golden("broken")


def _beir(root: Path, qrels: str) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "alpha"}\n{"_id": "d2", "text": "beta"}\n')
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "what alpha?"}\n{"_id": "q2", "text": "beta?"}\n')
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def test_beir_folder_synthetic(tmp_path):
    g = load_golden(str(_beir(tmp_path / "mini", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td2\t1\n")))
    assert [d.text for d in g.documents] == ["T\n\nalpha", "beta"]
    assert [(ex.id, ex.gold) for ex in g.split("test")] == [("q1", {"d1": 2}), ("q2", {"d2": 1})]


def test_beir_malformed_qrels_names_file_and_line(tmp_path):
    root = _beir(tmp_path / "bad", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\n")
    with pytest.raises(DeclragError) as err:
        load_golden(str(root))
    assert "test.tsv:3" in str(err.value) and err.value.hint


def test_squad_without_data_is_an_error(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"version": "1.1"}')
    with pytest.raises(DeclragError, match=r'x\.json.*"data"'):
        load_golden(str(f))


def test_cmu_synthetic_encodings_nulls_and_missing_articles(tmp_path):
    season = tmp_path / "cmu" / "S01"
    (season / "data" / "set1").mkdir(parents=True)
    (season / "data" / "set1" / "a1.txt.clean").write_bytes("Caf\xe9 culture in Par\xeds.".encode("latin-1"))
    rows = [
        "ArticleTitle\tQuestion\tAnswer\tDifficultyFromQuestioner\tDifficultyFromAnswerer\tArticleFile",
        "Caf\u00e9\tWhere is the caf\u00e9?\tParis\teasy\teasy\tdata/set1/a1",
        "Caf\u00e9\tWhere is the caf\u00e9?\tparis\teasy\tmedium\tdata/set1/a1",
        "Caf\u00e9\tWhere is the caf\u00e9?\tIn Paris.\tNULL\thard\tdata/set1/a1",
        "Caf\u00e9\tWho owns it?\tNULL\tNULL\tNULL\tdata/set1/a1",
        "Gone\tIs this here?\tno\teasy\teasy\tdata/set1/a9",
    ]
    body = b"\n".join(r.encode("utf-8") for r in rows[:2]) + b"\n" + "\n".join(rows[2:]).encode("latin-1")
    (season / "question_answer_pairs.txt").write_bytes(body + b"\n")
    g = load_golden(str(tmp_path / "cmu"))
    assert [d.id for d in g.documents] == ["S01/data/set1/a1"]
    assert g.documents[0].text == "Café culture in París." and g.documents[0].title == "Café"
    ex1, ex2 = g.split("all")
    assert ex1.question == "Where is the café?" and ex1.answers == ("Paris", "In Paris.") and ex1.answerable
    assert ex1.metadata["difficulty_answerer"] == ["easy", "medium", "hard"]
    assert ex2.answers == () and not ex2.answerable
    assert ex1.id != ex2.id and ex1.id == load_golden(str(tmp_path / "cmu")).split("all")[0].id


def test_jsonl_golden_with_sibling_corpus(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "a", "text": "apples"}\n')
    (tmp_path / "qa.jsonl").write_text(
        '{"question": "fruit?", "answers": "apples", "gold": ["a"]}\n'
        '{"id": "x", "question": "none?", "answerable": false, "gold": {"a": 2, "b": 0}}\n')
    g = load_golden(str(tmp_path / "qa.jsonl"))
    assert [d.id for d in g.documents] == ["a"]
    a, b = g.split("all")
    assert a.answers == ("apples",) and a.gold == {"a": 1}
    assert b.id == "x" and not b.answerable and b.gold == {"a": 2}
    (tmp_path / "qa.jsonl").write_text('{"answers": ["x"]}\n')
    with pytest.raises(DeclragError, match=r"qa\.jsonl:1"):
        load_golden(str(tmp_path / "qa.jsonl"))


def test_spec_path_expands_variables(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "qa.jsonl").write_text('{"question": "q?"}\n')
    decl = tmp_path / "decl"
    decl.mkdir()
    (decl / "mine.yaml").write_text("name: mine\nformat: jsonl\npath: ${MY_GOLDEN}/qa.jsonl\n")
    monkeypatch.setenv("MY_GOLDEN", str(tmp_path / "data"))
    monkeypatch.setenv("DECLRAG_DATASETS", str(decl))
    assert "mine" in known_datasets()
    g = load_golden("mine")
    assert g.name == "mine" and [ex.question for ex in g.split("all")] == ["q?"]


SQUAD_ROWS = {
    "id": ["q1", "q2", "q3"],
    "title": ["Art_A", "Art_A", "Art_B"],
    "context": ["Paris is in France.", "Paris is in France.", "Nothing here."],
    "question": ["Where is Paris?", "What is Paris?", "Who?"],
    "answers": [{"text": ["France", "France"], "answer_start": [12, 12]},
                {"text": ["a city"], "answer_start": [0]},
                {"text": [], "answer_start": []}],
}


def test_hf_saved_dataset_loads(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict(SQUAD_ROWS).save_to_disk(str(tmp_path / "single"))
    g = load_golden(str(tmp_path / "single"))
    assert [(d.id, d.title) for d in g.documents] == [("Art_A#0", "Art A"), ("Art_B#0", "Art B")]
    q1, q2, q3 = g.split("all")
    assert q1.answers == ("France",) and q1.answer_starts == (12,) and q1.gold == {"Art_A#0": 1}
    assert q2.gold == q1.gold and not q3.answerable and q3.answers == ()
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict(SQUAD_ROWS)}).save_to_disk(str(tmp_path / "dd"))
    assert list(load_golden(str(tmp_path / "dd")).splits) == ["validation"]


def test_hf_fallback_used_when_local_path_missing(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load_dataset(path, name=None, split=None, **kw):
        calls.append((path, name, split))
        if path == "org/offline":
            raise ConnectionError("no network in tests")
        ds = datasets.Dataset.from_dict(SQUAD_ROWS)
        return ds if split else datasets.DatasetDict({"validation": ds})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    (tmp_path / "fb.yaml").write_text(
        "name: fb\nformat: squad\npath: missing/dev.json\nsplits: {dev: dev.json}\n"
        "hf: {id: org/squadish, splits: {dev: validation}}\n")
    (tmp_path / "off.yaml").write_text("name: offline-set\nformat: squad\npath: nowhere.json\nhf: {id: org/offline}\n")
    monkeypatch.setenv("DECLRAG_DATASETS", str(tmp_path))
    g = load_golden("fb")
    assert calls == [("org/squadish", None, "validation")]
    assert len(g.split("dev")) == 3 and len(g.documents) == 2
    with pytest.raises(DeclragError) as err:
        load_golden("offline-set")
    assert "nowhere.json" in str(err.value) and "org/offline" in str(err.value) and err.value.hint
    g = load_golden("hf:org/any")
    assert calls[-1] == ("org/any", None, None) and list(g.splits) == ["validation"] and g.name == "org/any"


def test_cache_sees_file_changes(tmp_path):
    f = tmp_path / "qa.jsonl"
    f.write_text('{"question": "first?"}\n')
    assert [ex.question for ex in load_golden(str(f)).split("all")] == ["first?"]
    f.write_text('{"question": "second?"}\n{"question": "third?"}\n')
    assert [ex.question for ex in load_golden(str(f)).split("all")] == ["second?", "third?"]
