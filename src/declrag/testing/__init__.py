"""Test helpers shipped with declrag: a deterministic embedder and the store contract suite."""

from .fakes import HashEmbedder, ScriptedLM

__all__ = ["HashEmbedder", "ScriptedLM"]
