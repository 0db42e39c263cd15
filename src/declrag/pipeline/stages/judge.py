"""The answer checked against the passages it cites (`SelfJudge`): an LLM judge or the deterministic grounding check."""

from __future__ import annotations

from typing import Any

from ...config import JudgeConfig, LMConfig
from ...types import Hit
from ..postprocess import grounding
from ..signatures import SignatureSpec
from .base import PipelineStage
from .generate import Draft


class SelfJudge(PipelineStage):
    """Checks a draft against the passages it cites: an LLM judge or the deterministic grounding check."""

    name = "judge"

    def __init__(self, cfg: JudgeConfig, lm: LMConfig, specs: dict[str, SignatureSpec]):
        super().__init__()
        self.cfg = cfg
        self.stage = self.stage_for(specs["judge"], cfg.variant, lm) if cfg.mode == "llm" else None

    def forward(self, question: str, passages: list[Hit], draft: Draft, context: str) -> dict[str, Any]:
        if self.cfg.mode == "off":
            return {"mode": "off"}
        if draft.abstained:
            return {"mode": self.cfg.mode, "supported": None, "reason": "abstained"}
        cited = [passages[n - 1].text for n in (draft.used or draft.attributed)] or [h.text for h in passages]
        if self.stage is not None:
            supported = bool(self.stage.run(question=question, context=context, answer=draft.text).supported)
            return {"mode": "llm", "supported": supported}
        ok, share, bad = grounding(draft.text, cited, self.cfg.threshold)
        return {"mode": "grounding", "supported": ok, "score": round(share, 3), "unsupported": bad[:5]}
