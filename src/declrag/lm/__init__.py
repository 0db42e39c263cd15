"""Every LM call goes through LiteLLM, including local models.

- `make_lm` (`routing`) turns an `LMConfig` into a DSPy LM on LiteLLM: timeouts, retries with backoff (DSPy's), an
  ordered fallback list of routes (LiteLLM's), keys from the environment only.
- ``local/<name-or-path>`` is a LiteLLM provider registered here that runs a GGUF model in-process (`local`).
- Every call is metered into the `Meter` active in the caller's context, by stage (`metering`).
- DSPy's response cache is on for every declrag LM; its key holds the model, the messages, every setting and here
  the api_base too. Where it lives is the process's choice (`registry.use_lm_cache`, for the `declrag` command);
  as a library, declrag uses whatever DSPy cache the caller configured.
- Nothing here changes LiteLLM's or DSPy's global settings on import: settings a provider does not take (e.g. seed)
  are dropped per call (``drop_params``). The one thing added to LiteLLM, when the first declrag LM is made, is the
  ``local`` provider. `registry` holds what this process has loaded.
"""

from ..runtime.gguf import LOCAL_MODELS, LocalModelCrash, resolve_local
from ._local import LocalModels, LocalProvider, _cut_at_stop, local_backend, setup
from ._routing import check_lm, is_small_local, lm_error, make_lm, provider_of
from .metering import Meter, RoutedLM, StageUsage, meter_call, metering, override_lm, stage, using_lm
from .registry import Registry, cache_sizes, registry, use_cache_limits, use_lm_cache

__all__ = ["LOCAL_MODELS", "LocalModelCrash", "LocalModels", "LocalProvider", "Meter", "Registry", "RoutedLM",
           "StageUsage", "_cut_at_stop", "cache_sizes", "check_lm", "is_small_local", "local_backend", "lm_error",
           "make_lm", "meter_call", "metering", "override_lm", "provider_of", "registry", "resolve_local", "setup",
           "stage", "use_cache_limits", "use_lm_cache", "using_lm"]
