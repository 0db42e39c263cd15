"""Embeddings: sentence-transformers models with an on-disk cache (`embedder`) and their ONNX Runtime backends
(`onnx_backend`)."""

from .embedder import Embedder, EmbeddingCache, resolve_model

__all__ = ["Embedder", "EmbeddingCache", "resolve_model"]
