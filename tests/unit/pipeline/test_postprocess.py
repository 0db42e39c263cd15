"""Citations, abstentions, attribution and the grounding check, against hand-worked examples."""

import numpy as np
import pytest

from declrag.pipeline.stages.generate._postprocess import attribute, grounding, is_abstention, resolve_citations, support
from declrag.pipeline.stages.retrieve._ranking import autocut, lost_in_the_middle, mmr, rrf
from declrag.types import Chunk, Hit


def test_citations_keep_valid_markers_and_count_the_others():
    c = resolve_citations("Paris is the capital [1]. It has the Louvre [7][2]. See [0] and [2, 9].", 3)
    assert c.used == [1, 2] and c.removed == 3
    assert c.text == "Paris is the capital [1]. It has the Louvre [2]. See and [2]."


def test_abstentions_are_recognised_but_not_answers_that_mention_knowing():
    phrase = "I don't know."
    for a in ["I don't know.", "i do not know the answer", "The passages do not say.", "", "Unanswerable.",
              "There is not enough information in the passages."]:
        assert is_abstention(a, phrase), a
    for a in ["Paris [1].", "He did not know his father, who died in 1066 [2]."]:
        assert not is_abstention(a, phrase), a


def test_support_and_grounding():
    p = "William the Conqueror won the Battle of Hastings in 1066."
    assert support("The battle of Hastings was in 1066.", p) == 1.0
    assert support("It was fought in 1215 near London.", p) < 0.5
    ok, share, bad = grounding("Hastings was in 1066 [1]. Napoleon lost at Waterloo.", [p], threshold=0.5)
    assert ok and share == 0.5 and bad == ["Napoleon lost at Waterloo."]
    assert not grounding("Napoleon lost at Waterloo.", [p], 0.5)[0]


def test_attribution_picks_the_most_similar_passage():
    passages = ["Cats purr when content.", "The Battle of Hastings was in 1066."]
    assert attribute("Hastings happened in 1066. Cats purr. Something else entirely.", passages) == [
        ("Hastings happened in 1066.", 2), ("Cats purr.", 1), ("Something else entirely.", None)]


def _hit(cid: str, score: float) -> Hit:
    return Hit.of(Chunk(id=cid, doc_id=cid, text=cid, start=0, end=len(cid), position=0), score)


def test_rrf_fuses_query_results():
    a = [_hit("x", 9), _hit("y", 8)]
    b = [_hit("y", 5), _hit("z", 4)]
    fused = rrf([a, b])
    assert [h.chunk.id for h in fused] == ["y", "x", "z"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 60)
    assert rrf([a]) == a


def test_autocut_follows_weaviate():
    assert autocut([1.0, 0.99, 0.98, 0.5, 0.49, 0.48], 1) == 3  # cut at the first jump
    assert autocut([1.0, 0.99, 0.98, 0.5, 0.49, 0.1, 0.09], 2) == 5
    assert autocut([0.5, 0.5, 0.5], 1) == 3 and autocut([1.0], 1) == 1 and autocut([1.0, 0.2], 0) == 2


def test_lost_in_the_middle_puts_the_best_at_both_ends():
    hits = [_hit(str(i), 10 - i) for i in range(1, 7)]
    assert [h.chunk.id for h in lost_in_the_middle(hits)] == ["1", "3", "5", "6", "4", "2"]


def test_mmr_trades_relevance_for_diversity():
    q = np.array([1.0, 0.0])
    vecs = np.array([[1.0, 0.0], [0.99, 0.141], [0.6, 0.8]])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    hits = [_hit(c, 1.0) for c in "abc"]
    assert [h.chunk.id for h in mmr(hits, vecs, q, 2, lam=1.0)] == ["a", "b"]
    assert [h.chunk.id for h in mmr(hits, vecs, q, 2, lam=0.3)] == ["a", "c"]
