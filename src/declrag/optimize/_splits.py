"""How compile cuts a golden set into train / dev / test: seeded and disjoint, from the space's `split`."""

from __future__ import annotations

import random
from typing import Any

from ..errors import DeclragError
from ..golden import Example, GoldenSet
from ._space import Space

FALLBACK_TEST = 0.3  # the test share when the declared source split is missing and the splits are cut


def split_examples(golden: GoldenSet, space: Space) -> dict[str, list[Example]]:
    """Seeded train / dev / test. With ``test_split`` the test set is that golden split as it is and the
    source split is cut into train and dev only. Test is never read by the search. When the declared source
    split is missing, every split is pooled and cut instead (test: `FALLBACK_TEST`), as `split_note` says."""
    s = space.split
    source = s.source or next(iter(golden.splits))
    fr = dict(s.fractions)
    test_split = s.test_split
    if source in golden.splits:
        pool = list(golden.split(source))
    else:
        pool = golden.examples()
        if test_split or "test" not in fr:
            kept = {k: v for k, v in fr.items() if k != "test"}
            total = sum(kept.values()) or 1.0
            fr = {**{k: v / total * (1 - FALLBACK_TEST) for k, v in kept.items()}, "test": FALLBACK_TEST}
        test_split = None
    if s.sample and s.sample < len(pool):
        keep = set(random.Random(s.seed - 1).sample(range(len(pool)), s.sample))
        pool = [e for i, e in enumerate(pool) if i in keep]
    rng = random.Random(s.seed)
    units = _conversations(pool)
    rng.shuffle(units)
    if test_split:
        fr.pop("test", None)
    total = sum(fr.values())
    cuts: dict[str, list[int]] = {}
    out: dict[str, list[Example]] = {}
    at = 0
    for part in ("train", "dev", "test"):
        if part in fr:
            n, cuts[part] = int(round(len(pool) * fr[part] / total)), []
            while len(cuts[part]) < n and at < len(units):  # whole conversations: no turn leaks across splits
                cuts[part] += units[at]
                at += 1
    for part, idx in cuts.items():
        out[part] = [pool[i] for i in sorted(idx)]
    if test_split:
        out["test"] = list(golden.split(test_split))
    for part, cap in (("dev", s.max_dev), ("test", s.max_test)):
        if cap and len(out.get(part, [])) > cap:
            keep = set(random.Random(s.seed + 1).sample(range(len(out[part])), cap))
            out[part] = [e for i, e in enumerate(out[part]) if i in keep]
    if not out.get("dev") or not out.get("test"):
        raise DeclragError(f"the split leaves no dev or no test questions ({ {k: len(v) for k, v in out.items()} })",
                           hint="use a larger golden set or other split fractions")
    return out


def _conversations(pool: list[Example]) -> list[list[int]]:
    """The units that are cut: the examples of one conversation (``metadata.conversation_id``) together, every
    other example alone (so a set without conversations is cut exactly as before)."""
    units: dict[Any, list[int]] = {}
    for i, e in enumerate(pool):
        cid = e.metadata.get("conversation_id")
        units.setdefault(i if cid is None else ("conversation", cid), []).append(i)
    return list(units.values())


def split_note(golden: GoldenSet, space: Space, splits: dict[str, list[Example]]) -> str | None:
    """What `split_examples` did when the declared source split is missing, for the user to read."""
    source = space.split.source or next(iter(golden.splits))
    if source in golden.splits:
        return None
    sizes = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
    return (f"{golden.name} has no split {source!r} (it has {', '.join(golden.splits)}): cut them instead, seeded "
            f"({space.split.seed}) and disjoint: {sizes} questions")

