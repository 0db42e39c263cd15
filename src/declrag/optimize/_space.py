"""The declared search space of `declrag compile`: `optimizers/*.yaml`, validated, and the one function
that turns an Optuna trial into a `ProgramConfig`.

    name: default
    objective: {metrics: {token_match: 0.4, faithfulness: 0.3, sia: 0.3}, also: [cost_usd]}
    split: {source: dev, fractions: {train: 0.2, dev: 0.4, test: 0.4}, seed: 13}
    fidelity: {slices: [0.25, 0.5, 1.0]}
    base: {generate: {abstain_phrase: "I don't know."}}
    params:
      chunk_size: {path: ingest.chunker.chunk_size, type: int, low: 128, high: 512, step: 128}
      overlap:    {path: ingest.chunker.overlap, type: int, low: 0, high: 64, step: 32, lt: chunk_size}
      rerank_candidates: {path: rerank.candidates, type: int, low: 10, high: 30, step: 10, ge: k,
                          when: "rerank != none"}

Each parameter writes one field of the program config (``path``). Conditions: ``when`` activates a
parameter only when another has a given value (``==``, ``!=``, ``in``); ``lt``/``le``/``gt``/``ge`` bound a
number by another parameter's value. Parameters are sampled in the order written.
``sampler`` chooses Optuna's sampler and its options (`declrag.optimize._samplers`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config import ProgramConfig, answer_mode, with_model
from ..errors import DeclragError
from ..lm.prompts import load_specs
from ..metrics.retrieval import is_retrieval
from ..pipeline.stage_list import variant_specs
from ..runtime.resources import find
from ._samplers import SamplerSpec

_WHEN = re.compile(r"^\s*(\w+)\s*(==|!=|in)\s*(.+?)\s*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Param(Strict):
    path: str
    type: Literal["int", "float", "categorical"]
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: list[Any] | None = None
    when: str | None = None
    lt: str | None = None
    le: str | None = None
    gt: str | None = None
    ge: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Param:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical parameter needs `choices`")
        elif self.low is None or self.high is None or self.low > self.high:
            raise ValueError("a numeric parameter needs `low` <= `high`")
        if self.log and (self.low or 0) <= 0:
            raise ValueError("`log` needs low > 0")
        if self.when:
            _parse_when(self.when)  # raises ValueError unless it reads '<param> == <value>' etc.
        return self


class Objective(Strict):
    metrics: dict[str, float] = Field(default_factory=lambda: {"token_match": 0.4, "faithfulness": 0.3, "sia": 0.3})
    also: list[Literal["cost_usd", "p95_latency_ms"]] = []  # extra objectives (minimised): a Pareto front
    judges: list[str] = []  # LLM-judge routes, when an objective metric needs them
    # characters handed over that ``kind@budget`` metrics score within (`declrag.optimize._context`); None: what the
    # baseline hands over on the dev questions
    context_budget: int | None = Field(None, ge=1)

    @property
    def retrieval_only(self) -> bool:
        return all(is_retrieval(m) for m in self.metrics)

    @model_validator(mode="after")
    def _check(self) -> Objective:
        if not self.metrics or any(w < 0 for w in self.metrics.values()):
            raise ValueError("`metrics` needs at least one metric with a weight >= 0")
        if self.also and self.retrieval_only:
            raise ValueError("`also` (cost, latency) needs an objective that runs the LM")
        return self


def _fractions() -> dict[Literal["train", "dev", "test"], float]:
    return {"train": 0.2, "dev": 0.4, "test": 0.4}


class Split(Strict):
    source: str | None = None  # the golden split cut into train/dev(/test); default: the set's first split
    test_split: str | None = None  # a golden split used as test as it is (e.g. BEIR's test qrels)
    fractions: dict[Literal["train", "dev", "test"], float] = Field(default_factory=_fractions)
    sample: int | None = None  # first draw a seeded sample of this many questions from the source split
    max_dev: int | None = None  # cap the dev set (a seeded sample)
    max_test: int | None = None
    seed: int = 13


class Fidelity(Strict):
    slices: list[float] = Field(default_factory=lambda: [0.25, 0.5, 1.0])
    retrieval_first: bool = True  # score retrieval on dev before any LM call, and prune on it
    startup_trials: int = 3  # no pruning at a step until this many finished trials have scored that step


class PromptOptimizer(Strict):
    name: Literal["none", "bootstrap", "knn", "mipro", "gepa"] = "none"
    max_demos: int = 4
    max_examples: int = 40  # train examples the optimizer may use
    trials: int = 6  # mipro / gepa: candidate programs to try
    # gepa: the text its reflection model reads with each answer. findings: what the grounding tier found wrong
    # (invented names and numbers, unsupported sentences, wrong citations, a wrong abstention; see
    # `declrag.metrics.feedback`) with the objective and the reference; score: the objective and the reference only
    feedback: Literal["findings", "score"] = "findings"


class Finetune(Strict):
    """Compile's last retrieval stage: fine-tune the best program's embedding model on the train split
    (`declrag.optimize._finetune`), re-embed the corpus, and keep the tuned model only if dev improves beyond
    the bootstrap noise."""

    enabled: bool = False
    epochs: float = Field(1.0, gt=0)
    learning_rate: float = Field(2e-5, gt=0)
    batch_size: int = Field(32, ge=2)  # questions per step: each one's in-batch negatives are the others' passages
    # texts per forward pass: the loss still sees the whole batch (CachedMultipleNegativesRankingLoss), but the
    # activations held for the backward pass are those of this many texts, so memory does not grow with batch_size
    mini_batch_size: int = Field(4, ge=1)
    hard_negatives: int = Field(1, ge=0, le=16)  # per question, from the store's own candidates
    max_steps: int | None = Field(None, ge=1)  # a step budget (None: the epochs decide)
    max_minutes: float | None = Field(None, gt=0)  # a time budget for training, checked between steps
    seed: int = 13


class Space(Strict):
    name: str
    description: str = ""
    objective: Objective = Objective()
    split: Split = Split()
    fidelity: Fidelity = Fidelity()
    base: dict[str, Any] = {}
    params: dict[str, Param]
    prompt_optimizer: PromptOptimizer = PromptOptimizer()
    finetune: Finetune = Finetune()
    sampler: SamplerSpec = SamplerSpec()  # Optuna's sampler and its options (`declrag.optimize._samplers`)
    # the parameters in which a program chosen on synthetic questions alone may differ from the baseline (None: any;
    # `declrag.optimize._select`); real questions (a real set, --usage) choose among every parameter
    synthetic_ships: list[str] | None = None

    @property
    def objectives(self) -> int:
        return 1 + len(self.objective.also)

    @model_validator(mode="after")
    def _check(self) -> Space:
        names = list(self.params)
        for n, p in self.params.items():
            for ref in [p.lt, p.le, p.gt, p.ge] + ([_parse_when(p.when)[0]] if p.when else []):
                if ref is not None and (ref not in self.params or names.index(ref) > names.index(n)):
                    raise ValueError(f"params.{n}: refers to {ref!r}, which must be a parameter declared before it")
        if unknown := [n for n in self.synthetic_ships or [] if n not in self.params]:
            raise ValueError(f"synthetic_ships: {unknown[0]!r} is not a parameter of this space")
        return self

    def baseline(self) -> ProgramConfig:
        return ProgramConfig.model_validate(self.base)

    def baseline_values(self, model: str | None = None) -> dict[str, Any]:
        """The naive baseline (`base` over the program defaults) as values of the active parameters; its answer mode
        as it runs (``auto`` resolved, `declrag.config.answer_mode`: ``lm`` with ``model``, compile's --model)."""
        base = self.baseline()
        cfg = base.model_dump(mode="json")
        cfg["generate"]["mode"] = answer_mode(with_model(base, model) if model else base)
        values: dict[str, Any] = {}
        for name, p in self.params.items():
            if p.when and not _holds(p.when, values):
                continue
            top = p.path.split(".")[0]
            if top not in cfg and (section := base.section(top)) is not None:  # a registered stage's, unset
                cfg[top] = section.model_dump(mode="json")
            node: Any = cfg
            for k in p.path.split("."):
                node = node.get(k) if isinstance(node, dict) else None
            values[name] = node
        return values


def read_space(path: str | Path) -> Space:
    """A search space from YAML: a path, or a name (``retrieval``) found by ``declrag.runtime.resources.find`` in
    $DECLRAG_OPTIMIZERS, ./optimizers, then the packaged defaults; a path that does not exist resolves as its
    file name's stem would (``optimizers/retrieval.yaml`` works from any folder). Errors name the file, the key
    and what is allowed."""
    p = find("optimizers", path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise DeclragError(f"cannot read search space {p}: {e.strerror}", hint="pass optimizers/NAME.yaml") from e
    except yaml.YAMLError as e:
        raise DeclragError(f"{p}: not valid YAML: {e}", hint="fix the syntax") from e
    try:
        space = Space.model_validate(data or {})
    except ValidationError as e:
        err = e.errors()[0]
        raise DeclragError(f"{p}: {'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg']}",
                           hint="see optimizers/default.yaml for the keys and their allowed values") from e
    for name, param in space.params.items():  # every path must be a field, every value one it accepts
        values = param.choices or [param.low, param.high]
        for v in values:
            try:
                apply(space.base, {name: _cast(param, v)}, {name: param})
            except DeclragError as e:
                raise DeclragError(f"{p}: params.{name}: {e.message}", hint=e.hint) from None
    _check_variants(p, space)
    try:
        space.baseline()
    except ValidationError as e:
        err = e.errors()[0]
        raise DeclragError(f"{p}: base.{'.'.join(map(str, err['loc']))}: {err['msg']}",
                           hint="`base` holds program settings fixed for every trial") from e
    # trial 0 is the naive baseline; a number outside its range is fine (Optuna records it as given), but a
    # categorical value must be one of the choices
    for name, v in space.baseline_values().items():
        param = space.params[name]
        if param.choices is not None and v not in param.choices:
            raise DeclragError(f"{p}: params.{name}: the naive baseline's {param.path} = {v!r} is not in "
                               f"{param.choices}",
                               hint=f"add it to the choices, or set {param.path} in `base` (the baseline is trial 0)")
    stepless = [n for n, param in space.params.items() if param.type == "float" and param.step is None]
    if problem := space.sampler.problem(space.objectives, stepless):
        raise DeclragError(f"{p}: {problem}", hint="samplers: auto, tpe, nsga2, cmaes, gp, random, qmc, grid "
                                                   "(see optimizers/README.md)")
    if space.sampler.resolved(space.objectives) == "grid":  # trial 0 must be a program of the grid: Optuna's
        base = space.baseline_values()                      # grid sampler refuses a trial off its grid
        if not any(all(c.get(k) == v for k, v in base.items()) and len(c) == len(base) for c in grid(space)):
            shown = ", ".join(f"{k}={v}" for k, v in base.items())
            raise DeclragError(f"{p}: sampler: grid: the naive baseline (trial 0: {shown}) is not a program of "
                               "the grid",
                               hint="set `base` so that each parameter's baseline value is on its grid, or widen it")
    return space


def _check_variants(path: Path, space: Space) -> None:
    """Prompt-variant parameters may only name variants declared in signatures/ (which paths name one: the stages'
    own declarations, `declrag.pipeline.stage_list.variant_specs`)."""
    specs, named = load_specs(), variant_specs()
    for name, p in space.params.items():
        if p.path in named and p.choices:
            known = {"default"} | {v for s in named[p.path] if s in specs for v in specs[s].variants}
            if bad := [c for c in p.choices if c not in known]:
                raise DeclragError(f"{path}: params.{name}: unknown prompt variant {bad[0]!r}",
                                   hint=f"variants in signatures/: {', '.join(sorted(known))}")


def tidy(v: Any) -> Any:
    """Optuna's stepped floats as written: 0.6000000000000001 -> 0.6, 0.35000000000000003 -> 0.35."""
    return round(v, 10) if isinstance(v, float) else v


def tidy_params(params: dict[str, Any]) -> dict[str, Any]:
    """A trial's parameters with tidy floats, for reports and summaries."""
    return {k: tidy(v) for k, v in params.items()}


def _cast(param: Param, v: Any) -> Any:
    if param.type == "int":
        return int(v)
    if param.type == "float":
        return float(v)
    return v


def apply(base: dict[str, Any], values: dict[str, Any], params: dict[str, Param]) -> ProgramConfig:
    """The program config for these parameter values on top of ``base``."""
    import copy

    data = copy.deepcopy(base)
    for name, value in values.items():
        value = tidy(value)
        node = data
        keys = params[name].path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise DeclragError(f"path {params[name].path!r} goes through a value, not a section")
        node[keys[-1]] = value
    try:
        return ProgramConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(map(str, err["loc"]))
        raise DeclragError(f"{where}: {err['msg']} (values {values})",
                           hint="check the parameter's path and its domain against the program config") from e


def _parse_when(when: str) -> tuple[str, str, str]:
    """A ``when`` condition as (parameter, operator, raw value); ``Param`` has checked that it parses."""
    m = _WHEN.match(when)
    if m is None:
        raise ValueError(f"`when` must read '<param> == <value>', '<param> != <value>' or '<param> in [..]', "
                         f"got {when!r}")
    name, op, raw = m.groups()
    return name, op, raw


def _holds(when: str, values: dict[str, Any]) -> bool:
    """Values compare as text (``off`` stays "off"; YAML would read it as false)."""
    name, op, raw = _parse_when(when)
    have = str(values.get(name))
    if op == "in":
        options = [x.strip().strip("'\"") for x in raw.strip().strip("[]").split(",")]
        return have in options
    return (have == raw.strip().strip("'\"")) == (op == "==")


def sample(trial, space: Space) -> dict[str, Any]:
    """Sample the active parameters of ``space`` on an Optuna trial (define-by-run)."""
    values: dict[str, Any] = {}
    for name, p in space.params.items():
        if p.when and not _holds(p.when, values):
            continue
        if p.type == "categorical":
            values[name] = trial.suggest_categorical(name, p.choices)
            continue
        assert p.low is not None and p.high is not None  # a numeric parameter: Param's validator checked both
        low, high = p.low, p.high
        step = p.step if p.type == "float" else int(p.step or 1)
        unit = step or (1 if p.type == "int" else 0)
        if p.lt is not None and p.lt in values:
            high = min(high, values[p.lt] - (unit or 1e-9))
        if p.le is not None and p.le in values:
            high = min(high, values[p.le])
        if p.gt is not None and p.gt in values:
            low = max(low, values[p.gt] + (unit or 1e-9))
        if p.ge is not None and p.ge in values:
            low = max(low, values[p.ge])
        if step:  # keep the bounds on the grid
            low = p.low + math.ceil((low - p.low) / step - 1e-9) * step
            high = p.low + math.floor((high - p.low) / step + 1e-9) * step
        if low > high:
            low = high = max(low, high) if p.ge or p.gt else min(low, high)
        if p.type == "int":
            values[name] = trial.suggest_int(name, int(low), int(high), step=int(step or 1), log=p.log)
        else:
            values[name] = tidy(trial.suggest_float(name, float(low), float(high), step=step, log=p.log))
    return values


def grid(space: Space) -> list[dict[str, Any]]:
    """Every combination of the space (numeric parameters need a step): the exhaustive baseline of
    `declrag bench compile`. Conditions are honoured."""
    combos: list[dict[str, Any]] = [{}]
    for name, p in space.params.items():
        out = []
        for c in combos:
            if p.when and not _holds(p.when, c):
                out.append(c)
                continue
            if p.type == "categorical":
                opts = list(p.choices or [])
            else:
                assert p.low is not None and p.high is not None  # a numeric parameter: Param's validator checked both
                step = p.step or (1 if p.type == "int" else None)
                if not step:
                    raise DeclragError(f"params.{name}: a grid needs a `step` for float parameters")
                n = int(round((p.high - p.low) / step)) + 1
                opts = [_cast(p, p.low + i * step) for i in range(n)]
                opts = [v for v in opts if _within(p, v, c)]
            out += [{**c, name: v} for v in opts]
        combos = out
    return combos


def _within(p: Param, v: Any, c: dict[str, Any]) -> bool:
    return not ((p.lt in c and not v < c[p.lt]) or (p.le in c and not v <= c[p.le])
                or (p.gt in c and not v > c[p.gt]) or (p.ge in c and not v >= c[p.ge]))
