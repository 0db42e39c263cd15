"""The LM-prompt toolkit: one prompt of one stage run under its LM route and adapter, metered (`LMPrompt`); the
prompts' specs read from ``signatures/*.yaml`` (`SignatureSpec`, `spec`, `load_specs`); the adapters that format
them for each kind of model (`adapter_for`, `PlainTextAdapter`)."""

from ._adapters import PlainTextAdapter, adapter_for
from ._prompt import LMPrompt, get_lm
from ._signatures import SignatureSpec, load_specs, spec

__all__ = ["LMPrompt", "PlainTextAdapter", "SignatureSpec", "adapter_for", "get_lm", "load_specs", "spec"]
