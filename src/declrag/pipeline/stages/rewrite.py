"""The question rewritten before search (`QueryRewriter`: rewrite, multi-query, HyDE, decompose, step-back)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...config import (
    LMConfig,
    RewriteConfig,
)
from ..signatures import SignatureSpec
from .base import PipelineStage


@dataclass
class Queries:
    texts: list[str]  # searched, results fused by reciprocal rank
    vector_text: str | None = None  # HyDE: the text whose embedding replaces the question's
    sub_questions: list[str] = field(default_factory=list)
    vector: np.ndarray | None = None  # a conversation's mixed query vector: replaces the first text's embedding


class QueryRewriter(PipelineStage):

    name = "rewrite"
    SPECS = {"rewrite": "rewrite", "multi-query": "multi_query", "hyde": "hyde", "decompose": "decompose",
             "step-back": "step_back"}

    def __init__(self, cfg: RewriteConfig, lm: LMConfig, specs: dict[str, SignatureSpec]):
        super().__init__()
        self.cfg = cfg
        self.stage = self.stage_for(specs[self.SPECS[cfg.mode]], cfg.variant, lm) if cfg.mode != "off" else None

    def forward(self, question: str) -> Queries:
        c = self.cfg
        if self.stage is None:
            return Queries([question])
        if c.mode == "rewrite":
            q = (self.stage.run(question=question).query or "").strip()
            return Queries([q[:500] or question])
        if c.mode == "multi-query":
            qs = self.stage.run(question=question, n=c.n).queries or []
            return Queries(_unique([question, *qs])[: c.n + 1])
        if c.mode == "hyde":
            return Queries([question], vector_text=(self.stage.run(question=question).passage or "").strip() or None)
        if c.mode == "decompose":
            subs = _unique(self.stage.run(question=question, n=c.n).sub_questions or [])[: c.n]
            return Queries(_unique([question, *subs]), sub_questions=[s for s in subs if s != question])
        general = (self.stage.run(question=question).general_question or "").strip()
        return Queries(_unique([question, general]) if general else [question])


def _unique(texts: list[str]) -> list[str]:
    seen, out = set(), []
    for t in (t.strip() for t in texts if t):
        if t and t.lower() not in seen:
            seen.add(t.lower())
            out.append(t[:500])
    return out
