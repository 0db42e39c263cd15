"""Test helpers shipped with declrag: a deterministic embedder and the store contract suite."""

from ._fakes import HashEmbedder, ScriptedLM, StreamingLM

__all__ = ["HashEmbedder", "ScriptedLM", "StreamingLM"]
