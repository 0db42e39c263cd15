"""Configuration objects. One pydantic model per concern; unknown keys are errors.

A store is built with one `IngestConfig` (how documents become chunks and vectors) and searched with
`SearchParams`. Later stages (the program, compile, serve) extend these rather than repeat them.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .types import content_hash

DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
# bump when the chunkers' output changes for the same settings: stores built before are then rebuilt
CHUNKING_VERSION = 2

ChunkerName = Literal["fixed", "recursive", "sentence", "semantic", "parent-child"]
Fusion = Literal["relative", "ranked"]
Metric = Literal["cosine", "dot", "l2"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def digest(self) -> str:
        """A stable hash of the settings (for content-addressed caches and compatibility checks)."""
        return content_hash(json.dumps(self.model_dump(mode="json"), sort_keys=True))


class ChunkerConfig(Strict):
    """How a document is cut into chunks. Sizes are in tokens of the embedding model's tokenizer."""

    name: ChunkerName = "fixed"
    chunk_size: int = Field(256, ge=8, le=8192)
    overlap: int = Field(32, ge=0)
    # parent-child: children of `chunk_size` are searched, parents of `parent_size` are returned
    parent_size: int = Field(1024, ge=16, le=32768)
    # semantic: split where the cosine distance between consecutive sentences exceeds this percentile
    semantic_percentile: float = Field(90.0, gt=0, lt=100)

    @model_validator(mode="after")
    def _check(self) -> "ChunkerConfig":
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        if self.name == "parent-child" and self.parent_size <= self.chunk_size:
            raise ValueError(f"parent_size ({self.parent_size}) must be larger than chunk_size ({self.chunk_size})")
        return self


class EmbedderConfig(Strict):
    """A sentence-transformers model by hub name or local path. Vectors are always L2-normalised."""

    model: str = DEFAULT_EMBEDDER
    batch_size: int = Field(64, ge=1, le=4096)
    max_seq_length: int | None = Field(None, ge=8)
    query_prefix: str = ""
    document_prefix: str = ""
    device: str = "cpu"


class IngestConfig(Strict):
    """Everything that decides what is in an index: chunking and embedding."""

    chunker: ChunkerConfig = ChunkerConfig()
    embedder: EmbedderConfig = EmbedderConfig()

    def digest(self) -> str:  # batch_size and device do not change the index
        e = self.embedder.model_dump(exclude={"batch_size", "device"})
        return content_hash(json.dumps({"chunker": self.chunker.model_dump(), "embedder": e,
                                        "chunking_version": CHUNKING_VERSION}, sort_keys=True))


class SearchParams(Strict):
    """One search, with Weaviate's hybrid semantics (see declrag.stores.fusion)."""

    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    limit: int = Field(10, ge=1, le=1000)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the vector leg; 1 = vector only
    fusion: Fusion = "relative"
    candidates: int = Field(100, ge=1, le=10000)  # per leg: max(candidates, limit)
    window: int = Field(0, ge=0, le=20)  # context-window expansion: neighbours on each side
    where: dict[str, Any] | None = None  # metadata filter, see declrag.stores.base.Filter
