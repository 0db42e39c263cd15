"""How `declrag synth` cuts its questions into train / dev / test (docs/guides/synth.md, "Splits").

Many documents (SQuAD's paragraphs, SciFact's abstracts): whole documents at a time, seeded, so no document's
questions are in two splits. Few documents, or one holding much of the set (a user's five long reports): whole
documents would make a split of one file's questions, so each document's questions are cut into contiguous regions
of its text instead, and each document's regions dealt to train, dev and test in the proportions of `SPLITS`: every
file with enough questions is in every split. Questions of different splits never come from the same or
neighbouring text: a question within `GAP` characters of another split's question in its document is dropped, and
counted (`REGION_DROP`).
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from itertools import accumulate

from ._generate import Candidate

SPLITS = {"train": 0.6, "dev": 0.2, "test": 0.2}
MIN_QUESTIONS = 30  # the smallest set `declrag synth` writes: a train of about 18, a dev and a test of about 6
# split by regions when fewer documents than this hold questions (whole documents would make splits of a handful
# of files), or when one document holds more than this share of them (half a dev or test split by itself)
MIN_DOCUMENTS = 20
MAX_DOCUMENT_SHARE = 0.1
REGION_QUESTIONS = 10  # questions of a region, about: several regions per split in a long document
MIN_CUT_QUESTIONS = 10  # a document with fewer questions is not cut (its dev and test would hold one each)
GAP = 1000  # characters (about a passage) between questions of different splits in one document
REGION_DROP = f"within {GAP} characters of another split's question (region split)"

Drop = Callable[[str, Candidate], None]


def split(cands: list[Candidate], n: int, seed: int, drop: Drop) -> tuple[list[Candidate], dict[str, list[Candidate]],
                                                                          str]:
    """At most ``n`` of ``cands`` (a seeded sample), their splits, and how they were split (for the report).

    By document (`split_by_document`, on the sample) unless `by_regions` says the set needs regions; then the regions
    are cut over all of ``cands`` (the questions dropped between splits come out of what the sample leaves over)."""
    if not by_regions(cands):
        kept = sample(cands, n, random.Random(seed))
        return kept, split_by_document(kept, seed), "by document"
    parts, regions = split_by_regions(cands, seed, drop)
    placed = {id(c) for part in parts.values() for c in part}
    kept = sample([c for c in cands if id(c) in placed], n, random.Random(seed))
    chosen = {id(c) for c in kept}
    parts = {k: kept_part for k, v in parts.items() if (kept_part := [c for c in v if id(c) in chosen])}
    return kept, parts, f"by regions of each document: {regions} regions"


def by_regions(cands: list[Candidate]) -> bool:
    """Whether whole documents are too coarse a unit to split ``cands`` by: fewer than `MIN_DOCUMENTS` documents, or
    one with more than `MAX_DOCUMENT_SHARE` of the questions."""
    per_doc = Counter(c.doc_id for c in cands)
    return bool(per_doc) and (len(per_doc) < MIN_DOCUMENTS or max(per_doc.values()) > MAX_DOCUMENT_SHARE * len(cands))


def sample(cands: list[Candidate], n: int, rng: random.Random) -> list[Candidate]:
    if len(cands) <= n:
        return cands
    return [cands[i] for i in sorted(rng.sample(range(len(cands)), n))]


def split_by_document(cands: list[Candidate], seed: int) -> dict[str, list[Candidate]]:
    """train/dev/test in the proportions of ``SPLITS``, whole documents at a time (seeded): no document's
    questions are in two splits. Test and dev are filled first, so small sets still have both."""
    by_doc: dict[str, list[Candidate]] = {}
    for c in cands:
        by_doc.setdefault(c.doc_id, []).append(c)
    ids = sorted(by_doc)
    random.Random(seed).shuffle(ids)
    total, out = len(cands), {k: list[Candidate]() for k in SPLITS}
    for did in ids:
        for name in ("test", "dev", "train"):
            if name == "train" or len(out[name]) < SPLITS[name] * total:
                out[name].extend(by_doc[did])
                break
    return {k: v for k, v in out.items() if v}


def region_count(questions: int) -> int:
    """The regions a document with this many questions is cut into: five (3 train, 1 dev, 1 test) or a multiple
    of five, of about `REGION_QUESTIONS` each; three (one per split, sized 3:1:1) for a small document; one (not
    cut) below `MIN_CUT_QUESTIONS`."""
    if questions < MIN_CUT_QUESTIONS:
        return 1
    if questions < 5 * REGION_QUESTIONS / 2:
        return 3
    return 5 * max(1, round(questions / (5 * REGION_QUESTIONS)))


def split_by_regions(cands: list[Candidate], seed: int, drop: Drop) -> tuple[dict[str, list[Candidate]], int]:
    """train/dev/test by contiguous regions of each document (its questions in the order of their seed span), and the
    number of regions. A document's regions are dealt to the splits in the proportions of `SPLITS` (seeded by the
    document: the same set for a seed), each region sized by its split's share (so three regions are 3:1:1); the
    documents too small to cut are dealt whole, as `split_by_document` does.
    A question whose gold is its whole document (a title question) cannot be kept apart from the other splits of a
    cut document, and a question within `GAP` characters of a question of another split is dropped (`REGION_DROP`):
    the train question where train meets dev or test (dev's where dev meets test), so that a small document's dev
    and test regions are kept.
    A question with two gold documents goes with its seed passage's region. Each split keeps ``cands``' order."""
    by_doc: dict[str, list[Candidate]] = {}
    for c in cands:
        by_doc.setdefault(c.doc_id, []).append(c)
    where: dict[int, str] = {}
    whole: list[Candidate] = []
    regions = 0
    for did in sorted(by_doc):
        qs = sorted(by_doc[did], key=lambda c: (c.span[0], c.span[1], c.question))
        k = region_count(len(qs))
        if k == 1:
            whole += qs
            continue
        regions += k
        labels = _labels(k, random.Random(f"{seed}:{did}"))
        cut = [c for c in qs if c.kind != "title"]
        for c in qs:
            if c.kind == "title":
                drop(REGION_DROP, c)
        bounds = list(accumulate(SPLITS[name] / labels.count(name) for name in labels))  # regions sized by share
        placed: dict[str, list[Candidate]] = {}
        for i, c in enumerate(cut):
            placed.setdefault(labels[min(bisect_right(bounds, (i + 0.5) / len(cut)), k - 1)], []).append(c)
        taken: list[tuple[int, int]] = []  # the spans of the splits kept so far: the smaller splits first, whole
        for name in sorted(placed, key=lambda s: (SPLITS[s], s)):
            mine = []
            for c in placed[name]:
                if any(a - GAP < c.span[1] and c.span[0] < b + GAP for a, b in taken):
                    drop(REGION_DROP, c)
                    continue
                where[id(c)] = name
                mine.append(c.span)
            taken += mine
    for name, part in split_by_document(whole, seed).items():
        regions += len({c.doc_id for c in part})
        where.update((id(c), name) for c in part)
    return {name: [c for c in cands if where.get(id(c)) == name] for name in SPLITS}, regions


def _labels(k: int, rng: random.Random) -> list[str]:
    """The splits of ``k`` regions in the proportions of `SPLITS` (each at least one), in a seeded order."""
    small = {name: max(1, round(k * share)) for name, share in SPLITS.items() if name != "train"}
    labels = [name for name, m in small.items() for _ in range(m)]
    labels += ["train"] * (k - len(labels))
    rng.shuffle(labels)
    return labels
