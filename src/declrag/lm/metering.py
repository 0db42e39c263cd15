"""Usage metering: every LM call counted into the `Meter` active in the caller's context (tokens in/out, latency,
cost from LiteLLM's price table; local calls cost 0), by stage, cache hits apart; and `using_lm`, the LM that
stands in for every route in a context."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

import dspy

from ..runtime.cache_limits import current
from ..runtime.tracing import lm_result, lm_span


@dataclass
class StageUsage:
    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    lm_ms: float = 0.0


@dataclass
class Meter:
    """LM usage of one unit of work (a question), by stage."""

    stages: dict[str, StageUsage] = field(default_factory=dict)

    def add(self, stage: str, entry: dict | None, ms: float) -> None:
        u = self.stages.setdefault(stage, StageUsage())
        u.calls += 1
        u.lm_ms += ms
        usage = (entry or {}).get("usage") or {}
        if entry is not None and not usage:  # DSPy records a cache hit with empty usage
            u.cached += 1
            return
        u.tokens_in += int(usage.get("prompt_tokens") or 0)
        u.tokens_out += int(usage.get("completion_tokens") or 0)
        u.cost_usd += float((entry or {}).get("cost") or 0.0)

    def total(self) -> StageUsage:
        t = StageUsage()
        for u in self.stages.values():
            for k, v in asdict(u).items():
                setattr(t, k, getattr(t, k) + v)
        return t

    def to_dict(self) -> dict[str, Any]:
        out = {k: asdict(v) for k, v in self.stages.items()}
        out["total"] = asdict(self.total())
        return out


_METER: ContextVar[tuple[Meter, ...]] = ContextVar("declrag_meter", default=())  # innermost last
_STAGE: ContextVar[str] = ContextVar("declrag_stage", default="other")
_ENTRY: ContextVar[dict | None] = ContextVar("declrag_lm_entry", default=None)
_OVERRIDE: ContextVar[Any] = ContextVar("declrag_lm_override", default=None)


@contextmanager
def _scoped(var: ContextVar, value: Any) -> Iterator[Any]:
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def using_lm(lm: Any):
    """Run every stage on ``lm`` instead of its configured route (for tests, e.g. DSPy's DummyLM)."""
    return _scoped(_OVERRIDE, lm)


def override_lm() -> Any:
    return _OVERRIDE.get()


def metering(meter: Meter):
    """Meter every LM call made in this context (this thread, or tasks copied from it) into ``meter``, and
    into the meters of enclosing contexts too (a prompt optimizer's meter sees the calls of the programs it
    runs, though each program meters its own)."""
    return _scoped(_METER, (*_METER.get(), meter))


def stage(name: str):
    """Name the stage that LM calls in this context are metered under."""
    return _scoped(_STAGE, name)


def meter_call(entry: dict | None, ms: float) -> None:
    """Count one LM call (its history ``entry``: usage and cost; empty usage is a cache hit) into every meter
    of this context, under the current stage."""
    for m in _METER.get():
        m.add(_STAGE.get(), entry, ms)


class RoutedLM(dspy.LM):
    """A DSPy LM on LiteLLM that meters each call into the caller's `Meter`, and traces it
    (`declrag.runtime.tracing`)."""

    @contextmanager
    def _metered(self, messages: Any) -> Iterator[None]:
        """Meter the call made inside (`update_history` hands over its history entry) into the caller's meters,
        under its span."""
        token = _ENTRY.set(None)
        t0 = time.perf_counter()
        with lm_span(self.model, _STAGE.get(), self.kwargs, messages) as span:
            try:
                yield
            finally:
                entry = _ENTRY.get()
                meter_call(entry, 1000 * (time.perf_counter() - t0))
                lm_result(span, entry)
                _ENTRY.reset(token)

    def __call__(self, prompt=None, *, messages=None, **kwargs):
        with self._metered(messages or prompt):
            return super().__call__(prompt, messages=messages, **kwargs)

    async def acall(self, prompt=None, *, messages=None, **kwargs):
        with self._metered(messages or prompt):
            return await super().acall(prompt, messages=messages, **kwargs)

    def update_history(self, entry):
        """Meter the call (``entry``), and keep it in DSPy's histories (this LM's, its calling modules', the
        global one) up to the process's ``CacheLimits.lm_history`` (DSPy's own bounds when none are set)."""
        _ENTRY.set(entry)
        limits = current()
        if limits is None:
            super().update_history(entry)
            return
        if limits.lm_history == 0:
            return
        super().update_history(entry)
        from dspy.clients import base_lm

        for owner in (self, *(dspy.settings.caller_modules or [])):
            if len(history := getattr(owner, "history", [])) > limits.lm_history:
                del history[:-limits.lm_history]
        if len(base_lm.GLOBAL_HISTORY) > limits.lm_history:
            del base_lm.GLOBAL_HISTORY[:-limits.lm_history]


