"""The question rewritten before search (`QueryRewriter`: rewrite, multi-query, HyDE, decompose, step-back)."""

from __future__ import annotations

from typing import Any, ClassVar

from ...config import LMConfig, ProgramConfig, RewriteConfig
from ...lm.prompts import SignatureSpec
from ._base import Building, PipelineStage
from ._state import Queries, State


class QueryRewriter(PipelineStage):
    """The search's queries from the search question (``rewrite.mode``): the question alone (off), rewritten,
    several variants (multi-query), a hypothetical passage for the vector leg (HyDE), sub-questions (decompose) or a
    more general question beside it (step-back)."""

    SPECS = {"rewrite": "rewrite", "multi-query": "multi_query", "hyde": "hyde", "decompose": "decompose",
             "step-back": "step_back"}
    name, phase, section = "rewrite", "queries", "rewrite"
    prompts: ClassVar[tuple[str, ...]] = tuple(SPECS.values())
    variants: ClassVar[dict[str, tuple[str, ...]]] = {"rewrite.variant": tuple(SPECS.values())}

    @classmethod
    def build(cls, program: Building) -> QueryRewriter:
        return cls(program.config.rewrite, program.config.stage_lm("rewrite"), program.specs)

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        return ["rewrite"] if config.rewrite.mode != "off" else []

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.rewrite.mode": self.cfg.mode}

    def run(self, state: State, span: Any) -> None:
        sq = state.search
        queries = self(question=state.search_text)
        span.set_attribute("declrag.rewrite.queries", len(queries.texts))
        if sq is not None and sq.vector is not None and queries.vector_text is None and queries.texts[0] == sq.text:
            queries.vector = sq.vector  # a conversation's mixed vector searches for the question it was made for
        state.queries = queries

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
