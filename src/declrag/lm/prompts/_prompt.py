"""`LMPrompt`, the building block of every LM call declrag makes: one prompt (a `dspy.Predict` built from a
signature spec) run under its stage's LM route and adapter, metered under the stage's name. The pipeline's
stages (`declrag.pipeline.stages`), the LM judges, evaluation and synth are made of it."""

from __future__ import annotations

from typing import Any

import dspy
from dspy.utils import exceptions as dspy_errors

from ...config import LMConfig
from .. import lm_error, override_lm, registry, stage
from ._adapters import adapter_for
from ._signatures import SignatureSpec


def get_lm(cfg: LMConfig) -> dspy.LM:
    """One DSPy LM per distinct LM configuration, shared by every stage and program (`declrag.registry`)."""
    return registry.lm(cfg)


class LMPrompt(dspy.Module):
    """One prompt of one stage: a `dspy.Predict` run under the stage's LM and adapter, metered."""

    def __init__(self, name: str, spec: SignatureSpec, variant: str, lm: LMConfig, **params: str):
        super().__init__()
        self.stage_name, self.lm_config, self.spec, self.variant = name, lm, spec, variant
        self.predict = dspy.Predict(spec.build(variant, **params))
        self.predict.demos = [dspy.Example(**d) for d in spec.demos]

    def run(self, metered_as: str | None = None, **inputs: Any) -> dspy.Prediction:
        lm = override_lm() or get_lm(self.lm_config)
        with stage(metered_as or self.stage_name), dspy.context(lm=lm, adapter=adapter_for(self.lm_config)):
            try:
                return self.predict(**inputs)
            except dspy_errors.AdapterParseError:  # a model that ignored the format: no output, not a crash
                return dspy.Prediction(**{k: None for k in self.spec.outputs}, parse_error=True)
            except dspy_errors.LMError as e:
                raise lm_error(e, self.lm_config) from e
