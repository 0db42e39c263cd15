"""The deterministic faithfulness and SIA tiers on 85 hand-labelled SQuAD v2.0 cases (tests/data/
grounding_cases.jsonl: supported, paraphrased, unsupported details, partially supported, unsupported claims,
number formats, abstentions right and wrong, answers to unanswerable questions).

The thresholds in declrag.metrics.grounding were calibrated on this set, so these figures are fit, not
held-out: they say the deterministic tier agrees with a careful reader on these kinds of cases, and they
guard against regressions. What the lexical tier cannot see (a relation inverted with the same words, a
vague extra claim) is what the LLM tier is for."""

from __future__ import annotations

import json
from pathlib import Path

from declrag.metrics.base import Case, Passage
from declrag.metrics.grounding import faithfulness, sia
from declrag.pipeline.stages.generate._postprocess import is_abstention

CASES = [json.loads(line) for line in (Path(__file__).parents[2] / "data" / "grounding_cases.jsonl").read_text().splitlines()]


def _case(r: dict) -> Case:
    return Case(question=r["question"], answer=r["answer"], references=r["references"], answerable=r["answerable"],
                abstained=is_abstention(r["answer"], "I don't know."),
                passages=[Passage(f"{r['doc_id']}:{i}", r["doc_id"], t) for i, t in enumerate(r["context"])])


def _accuracy(metric, label: str) -> tuple[float, dict[str, float]]:
    by_kind: dict[str, list[bool]] = {}
    for r in CASES:
        ok = (metric(_case(r)).value == 1.0) == r[label]
        by_kind.setdefault(r["kind"], []).append(ok)
    flat = [x for v in by_kind.values() for x in v]
    return sum(flat) / len(flat), {k: sum(v) / len(v) for k, v in by_kind.items()}


def test_the_labelled_set_is_as_described():
    kinds = {r["kind"] for r in CASES}
    assert len(CASES) >= 60 and len({r["id"] for r in CASES}) == len(CASES)
    assert {"supported", "unsupported-detail", "partially-supported", "abstain-right-unanswerable",
            "abstain-wrong-answerable", "answered-unanswerable", "number-format"} <= kinds


def test_sia_deterministic_tier_agrees_with_the_labels():
    acc, by_kind = _accuracy(sia, "sia")
    print(f"\nSIA deterministic accuracy {acc:.3f} on {len(CASES)} cases; by kind: {by_kind}")
    assert acc >= 0.95
    assert by_kind["unsupported-detail"] == 1.0 and by_kind["answered-unanswerable"] == 1.0


def test_faithfulness_deterministic_tier_agrees_with_the_labels():
    acc, by_kind = _accuracy(faithfulness, "faithful")
    print(f"\nfaithfulness deterministic accuracy {acc:.3f} on {len(CASES)} cases; by kind: {by_kind}")
    assert acc >= 0.88
    assert by_kind["unsupported-detail"] == 1.0 and by_kind["number-format"] == 1.0
