"""declrag: declarative, self-optimizing RAG.

The public API: configuration types, the values that flow through (documents, chunks, hits, answers),
stores, indexing, search, and the RAG program with its artifact (`RAGProgram`, `load`).

Importing declrag changes nothing outside it: no environment variable, no LiteLLM or DSPy setting (see
`declrag.lm`). What the process holds loaded is in `registry`.
"""

import os as _os
import sys as _sys


def _import_litellm_offline() -> None:
    """LiteLLM fetches its price table from the network when it is first imported, unless
    LITELLM_LOCAL_MODEL_COST_MAP is set; declrag imports it with that variable set for the import only (the
    table LiteLLM ships is used, no network wait) and puts the environment back as it was. A process that
    imported LiteLLM before declrag keeps what it got."""
    if "litellm" in _sys.modules:
        return
    name, before = "LITELLM_LOCAL_MODEL_COST_MAP", _os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    _os.environ[name] = "True"
    try:
        import litellm  # noqa: F401
    finally:
        if before is None:
            _os.environ.pop(name, None)
        else:
            _os.environ[name] = before


_import_litellm_offline()

from .api import corpus_store, default_store, index, search
from .config import (
    ChunkerConfig,
    EmbedderConfig,
    GenerateConfig,
    IngestConfig,
    JudgeConfig,
    LMConfig,
    ProgramConfig,
    RerankConfig,
    RetrieveConfig,
    RewriteConfig,
    SearchParams,
)
from .embed import Embedder, EmbeddingCache
from .errors import DeclragError
from .golden import Example, GoldenSet, load_golden
from .indexer import Indexer, IndexReport
from .lm import registry
from .program import Answer, RAGProgram, default_program, load, read_config
from .stores import Filter, Store, open_store
from .types import Chunk, Document, Hit

__version__ = "0.1.0"

__all__ = [
    "Answer", "GenerateConfig", "JudgeConfig", "LMConfig", "ProgramConfig", "RAGProgram", "RerankConfig",
    "RetrieveConfig", "RewriteConfig", "default_program", "load", "read_config",
    "Chunk", "ChunkerConfig", "DeclragError", "Document", "EmbedderConfig", "Embedder", "EmbeddingCache",
    "Example", "Filter", "GoldenSet", "Hit", "IndexReport", "Indexer", "IngestConfig", "SearchParams", "Store",
    "corpus_store", "default_store", "index", "load_golden", "open_store", "registry", "search",
]
