"""Exploration: a share of a served program's answers made from a pool of rankings, so that its users' ratings are
fair evidence between the program and its neighbours (docs/guides/usage.md, "Exploration").

A helpful rating names the passage that answered. When the served program alone chose the passages, that passage is
one it found: on such a question another program can at best find it too, and the questions it would have answered
where the served program did not never get a rating (presentation bias; Joachims et al., 2017). For a share of
questions (``declrag serve --explore SHARE``), the passages come instead from **team-draft multileaving** (Schuth
et al., 2014) of the served program's ranking and its **neighbours'**: each a single change of one retrieval setting
that uses the same index (`neighbours`). Round after round, the rankers in a random order each add their best passage
not yet taken, up to the served program's ``retrieve.k``; the passages are then ordered and merged as the program
orders and merges its own. No ranker is favoured, so a passage a user rated helpful on such an answer is gold that
every ranker had the same chance to find: `declrag compile --usage` scores the rankers on those questions
(`declrag.optimize._select.by_usage`).

What it costs: an explored question runs one retrieval per ranker (milliseconds each; no LM call more), and its
users read a mix of the rankers' passages instead of the served program's own.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from ....types import Hit

ALPHA_STEP = 0.25  # alpha's neighbours: this much lower and higher (within 0..1)


def settings(config) -> dict[str, Any]:
    """The settings a ranker is told apart by (and a compile maps onto its space's parameters by path): every
    scalar of ``retrieve``, ``rerank``'s mode and candidates, and the chunker's (the same for every ranker: they
    share the index)."""
    dump = config.model_dump(mode="json")
    out = {f"retrieve.{k}": v for k, v in dump["retrieve"].items() if not isinstance(v, (dict, list)) and v is not None}
    out.update({"rerank.mode": dump["rerank"]["mode"], "rerank.candidates": dump["rerank"]["candidates"]})
    out.update({f"ingest.chunker.{k}": v for k, v in dump["ingest"]["chunker"].items()
                if not isinstance(v, (dict, list))})
    return out


def neighbours(config) -> list[dict[str, Any]]:
    """The single changes from ``config`` that need no other index: alpha a step either way, the other fusion,
    100 or 200 candidates, a window of 0 or 1, a BM25 rerank on or off, the document-level signal on or off, the
    named search on or off. Each as ``{path: value}``."""
    r, mode = config.retrieve, config.rerank.mode
    out: list[dict[str, Any]] = []
    for a in sorted({round(min(1.0, max(0.0, r.alpha + d)), 4) for d in (-ALPHA_STEP, ALPHA_STEP)} - {r.alpha}):
        out.append({"retrieve.alpha": a})
    out.append({"retrieve.fusion": "ranked" if r.fusion == "relative" else "relative"})
    out.append({"retrieve.candidates": 200 if r.candidates < 200 else 100})
    out.append({"retrieve.window": 0 if r.window else 1})
    if mode in ("none", "bm25"):
        out.append({"rerank.mode": "bm25" if mode == "none" else "none"})
    out.append({"retrieve.documents": 0.3 if r.documents == 0 else 0.0})
    out.append({"retrieve.named": not r.named})
    return out


def multileave(rankings: list[list[Hit]], k: int, rng: random.Random) -> tuple[list[Hit], list[int]]:
    """Team-draft multileaving: up to ``k`` hits, each ranker in turn (a random order each round) adding its best hit
    whose chunk is not yet taken. Returns the hits in the order taken and, for each, the ranker that took it."""
    taken: set[str] = set()
    out: list[Hit] = []
    teams: list[int] = []
    at = [0] * len(rankings)
    while len(out) < k:
        moved = False
        for i in rng.sample(range(len(rankings)), len(rankings)):
            ranking = rankings[i]
            while at[i] < len(ranking) and ranking[at[i]].chunk.id in taken:
                at[i] += 1
            if at[i] == len(ranking):
                continue
            hit = ranking[at[i]]
            taken.add(hit.chunk.id)
            out.append(hit)
            teams.append(i)
            moved = True
            if len(out) == k:
                break
        if not moved:
            break
    return out, teams


class Explorer:
    """The served program's rankers (itself first, then its `neighbours`: shallow copies sharing its store, embedder
    and LMs) and the share of questions explored. Thread-safe."""

    def __init__(self, program, share: float, seed: int | None = None):
        self.program, self.share = program, share
        self.changes = neighbours(program.config)
        self.rankers = [program, *(program.with_settings(c) for c in self.changes)]
        self.documents = next((r.retrieve.documents for r in self.rankers if r.retrieve.documents is not None), None)
        for r in self.rankers:  # one index over whole documents for every ranker that reads one
            r.retrieve.documents = self.documents if r.retrieve.documents is not None else None
        self.record = {"served": settings(program.config), "changes": self.changes}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, program, share: float, seed: int | None = None) -> Explorer:
        """``program``'s explorer, set on it (``program.explorer``: ``forward(..., explore=True)`` reads it) and warmed
        up (the neighbours' indexes over whole documents)."""
        program.explorer = explorer = cls(program, share, seed)
        if explorer.documents is not None:
            explorer.documents.warm_up()
        return explorer

    def draw(self) -> bool:
        """Whether the next question is explored."""
        with self._lock:
            return self.share > 0 and self._rng.random() < self.share

    def passages(self, state: Any, served: list[Hit]) -> list[Hit]:
        """The multileaved passages for one question (``state``: its `declrag.pipeline.stages.State`, queries made;
        ``served``: the served program's own ranking), handed over and ordered as the served program's are. Each
        neighbour ranks through its public `RAGProgram.rank`."""
        rankings = [served, *(r.rank(state) for r in self.rankers[1:])]
        with self._lock:
            seed = self._rng.random()
        hits, _ = multileave(rankings, self.program.config.retrieve.k, random.Random(seed))
        return self.program.select.hand_over(hits)
