"""Routes: an `LMConfig` made into a DSPy LM on LiteLLM (`make_lm`), checked up front (route known, key in the
environment), and failed calls made into clear errors (`lm_error`)."""

from __future__ import annotations

import os
from typing import Any

import litellm

from ..config import LMConfig
from ..errors import DeclragError
from ..runtime.gguf import crash_in
from ._local import setup
from .metering import RoutedLM


def provider_of(route: str) -> str:
    setup()
    if route.startswith("local/"):
        return "local"
    try:
        return litellm.get_llm_provider(route)[1]
    except Exception:
        raise DeclragError(f"unknown model route {route!r}",
                           hint="write provider/model, e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-20241022, "
                                "gemini/gemini-1.5-flash, ollama/llama3, openai/<name> with api_base, "
                                "local/smollm2") from None


def is_small_local(route: str) -> bool:
    """Models that cannot follow DSPy's field markers get the plain-text adapter."""
    r = route.lower()
    return r.startswith("local/") or any(s in r for s in ("smollm", "tinyllama", "qwen2.5-0.5b", "135m", "360m"))


def _api_key(cfg: LMConfig, route: str) -> str | None:
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise DeclragError(f"environment variable {cfg.api_key_env} (the API key for {route}) is not set",
                               hint=f"export {cfg.api_key_env}=... ; keys are read from the environment, "
                                    "never from configs")
        return key
    if cfg.api_base:
        return None
    missing = [k for k in litellm.validate_environment(route).get("missing_keys", []) if k.endswith("_KEY")]
    if missing and not route.startswith("local/"):
        raise DeclragError(f"no API key for {route}: {', '.join(missing)} is not set",
                           hint=f"export {missing[0]}=... , or set api_key_env in the program's lm settings")
    return None


def check_lm(cfg: LMConfig) -> str | None:
    """Fail fast: every route of ``cfg`` is known and its key is in the environment. Returns the key."""
    for route in (cfg.route, *cfg.fallbacks):
        provider_of(route)
    return _api_key(cfg, cfg.route)


def make_lm(cfg: LMConfig) -> RoutedLM:
    """A DSPy LM for this route, checked up front (route known, key present)."""
    setup()
    key = check_lm(cfg)
    kwargs: dict[str, Any] = dict(temperature=cfg.temperature, max_tokens=cfg.max_tokens, num_retries=cfg.num_retries,
                                  timeout=cfg.timeout_s, cache=True,
                                  drop_params=True)  # a setting a provider does not take (e.g. seed) is dropped
    if cfg.seed is not None:
        kwargs["seed"] = cfg.seed
    if cfg.api_base:
        kwargs["api_base"] = cfg.api_base
        kwargs["api_key"] = key or "no-key"  # OpenAI-compatible servers often take any key
        kwargs["metadata"] = {"api_base": cfg.api_base}  # LiteLLM keeps metadata to itself; DSPy's cache key sees it
    elif key:
        kwargs["api_key"] = key
    if cfg.fallbacks:
        kwargs["fallbacks"] = list(cfg.fallbacks)
    return RoutedLM(cfg.route, engine="litellm", **kwargs)


def lm_error(e: Exception, cfg: LMConfig) -> DeclragError:
    """A clear message for a failed LM call, naming the route (and server) and the likely fix."""
    from dspy.utils import exceptions as ex

    if (crash := crash_in(e)) is not None:  # the local model cannot run on this CPU: its own message and fix
        return crash
    where = cfg.route + (f" at {cfg.api_base}" if cfg.api_base else "")
    first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
    if isinstance(e, ex.LMAuthError):
        return DeclragError(f"{where} refused the API key: {first}", hint="check the key in the environment")
    if isinstance(e, ex.LMTimeoutError):
        return DeclragError(f"{where} timed out after {cfg.timeout_s}s", hint="raise lm.timeout_s or check the server")
    if isinstance(e, (ex.LMTransportError, ex.LMServerError)):
        return DeclragError(f"cannot reach {where}: {first}",
                            hint="start the server or fix api_base; add fallbacks to the lm settings to fail over")
    if isinstance(e, ex.LMRateLimitError):
        return DeclragError(f"{where} is rate-limiting: {first}", hint="lower --threads or add fallbacks")
    return DeclragError(f"LM call to {where} failed: {first}", hint="check the route, the server and the key")
