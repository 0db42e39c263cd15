"""The study's sampler, declared in the space (``sampler: {name: tpe, options: {n_startup_trials: 5}}``) and built
here, in one place; optimizers/README.md lists the names. ``options`` are the Optuna class's keyword arguments,
checked by name and type. TPE defaults to ``constant_liar: true``: trials still running (other workers' among
them) count as bad results while sampling, so parallel workers do not all propose the same region.

The seed is not an option: every sampler is seeded with ``split.seed``, and a worker that joins a study (or a
later sitting of it) with a seed of its own, so that two workers do not propose the same programs.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Literal

import optuna
from pydantic import BaseModel, ConfigDict

Name = Literal["auto", "tpe", "nsga2", "cmaes", "gp", "random", "qmc", "grid"]
CLASSES: dict[str, str] = {"tpe": "TPESampler", "nsga2": "NSGAIISampler", "cmaes": "CmaEsSampler",
                           "gp": "GPSampler", "random": "RandomSampler", "qmc": "QMCSampler",
                           "grid": "BruteForceSampler"}
DEFAULTS: dict[str, dict[str, Any]] = {"tpe": {"multivariate": True, "constant_liar": True}}
SINGLE_OBJECTIVE = ("cmaes",)


class SamplerSpec(BaseModel):
    """``sampler:`` in a space file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    name: Name = "auto"
    options: dict[str, Any] = {}

    def resolved(self, objectives: int) -> str:
        """The sampler's name, ``auto`` decided by the number of objectives."""
        if self.name != "auto":
            return self.name
        return "tpe" if objectives == 1 else "nsga2"

    def problem(self, objectives: int, float_params_without_step: list[str]) -> str | None:
        """Why this sampler cannot run the space (None: it can), naming the key to change."""
        name = self.resolved(objectives)
        if self.name == "auto" and self.options:
            return "sampler.options: name the sampler they belong to (sampler.name), not auto"
        if name in SINGLE_OBJECTIVE and objectives > 1:
            return f"sampler.name: {name} optimizes one objective; objective.also asks for {objectives}"
        if name == "grid" and float_params_without_step:
            return (f"params.{float_params_without_step[0]}: the grid sampler needs a `step` for float parameters "
                    "(or choose another sampler.name)")
        params = inspect.signature(_class(name)).parameters
        accepted = set(params) - {"seed"}
        for key, value in self.options.items():
            if key == "seed":
                return "sampler.options.seed: the sampler is seeded with split.seed"
            if key not in accepted:
                return f"sampler.options.{key}: not an option of {name}; it takes: {', '.join(sorted(accepted))}"
            if (wrong := _type_problem(_class(name), params[key].annotation, value)) is not None:
                return f"sampler.options.{key}: {name} refused {value!r}: {wrong}"
        try:
            self.build(objectives, seed=0)
        except (TypeError, ValueError) as e:
            return f"sampler.options: {name} refused them: {e}"
        return None

    def build(self, objectives: int, seed: int) -> optuna.samplers.BaseSampler:
        """The Optuna sampler, seeded."""
        name = self.resolved(objectives)
        options = {**DEFAULTS.get(name, {}), **self.options}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _class(name)(seed=seed, **options)


def _type_problem(cls: type, annotation: Any, value: Any) -> str | None:
    """Whether ``value`` fits the constructor's annotation (Optuna's constructors do not check their arguments):
    None when it does, or when the annotation names types only a type checker sees."""
    import collections.abc
    import sys
    import typing

    from pydantic import ConfigDict, TypeAdapter, ValidationError

    if isinstance(annotation, str):
        names = {**vars(typing), **vars(collections.abc), **vars(sys.modules[cls.__module__]),
                 "FrozenTrial": optuna.trial.FrozenTrial, "Study": optuna.Study}
        try:
            annotation = eval(annotation, names)  # noqa: S307 (Optuna's own annotation text)
        except Exception:  # noqa: BLE001 (a name only imported for type checkers: leave the value to Optuna)
            return None
    try:
        TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True)).validate_python(value, strict=True)
    except ValidationError as e:
        return e.errors()[0]["msg"]
    except Exception:  # noqa: BLE001 (an annotation pydantic cannot check)
        return None
    return None


def _class(name: str) -> Any:  # a sampler class; each takes ``seed``
    return getattr(optuna.samplers, CLASSES[name])
