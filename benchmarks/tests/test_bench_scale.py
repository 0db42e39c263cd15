"""`declrag bench scale`: the distractor corpus."""

from __future__ import annotations

import numpy as np
from tests.unit.stores.test_ann import clustered


def test_scale_distractors_are_real_sentences_with_mean_vectors_and_the_same_at_every_size():
    from declrag_bench.scale import DISTRACTOR_SENTENCES, distractors

    sentences = [f"Sentence number {i} about topic {i % 7}." for i in range(200)]
    vecs = clustered(200, 1)
    docs, chunks, v = distractors(sentences, vecs, 0, 50)
    again = distractors(sentences, vecs, 40, 10)  # a later batch draws distractors 40..49 again, identically
    assert [c.text for c in chunks[40:]] == [c.text for c in again[1]] and np.allclose(v[40:], again[2])
    assert len({c.id for c in chunks}) == 50 and all(c.doc_id == d.id for c, d in zip(chunks, docs))
    for c, vec in zip(chunks, v):
        parts = [p + "." for p in c.text.split(". ") if p]
        parts[-1] = parts[-1].removesuffix("..").rstrip(".") + "."
        picked = [sentences.index(p) for p in parts]
        assert DISTRACTOR_SENTENCES[0] <= len(picked) <= DISTRACTOR_SENTENCES[1]
        mean = vecs[picked].mean(axis=0)
        assert np.allclose(vec, mean / np.linalg.norm(mean), atol=1e-6)
