"""declrag: declarative, self-optimizing RAG.

The public API: configuration types, the values that flow through (documents, chunks, hits, answers),
stores, indexing, search, and the RAG program with its artifact (`RAGProgram`, `load`).
"""

from .api import corpus_store, default_store, index, search
from .config import (ChunkerConfig, EmbedderConfig, GenerateConfig, IngestConfig, JudgeConfig, LMConfig, ProgramConfig,
                     RerankConfig, RetrieveConfig, RewriteConfig, SearchParams)
from .embed import Embedder, EmbeddingCache
from .errors import DeclragError
from .golden import Example, GoldenSet, load_golden
from .indexer import IndexReport, Indexer
from .program import Answer, RAGProgram, default_program, load, read_config
from .stores import Filter, Store, open_store
from .types import Chunk, Document, Hit

__version__ = "0.1.0"

__all__ = [
    "Answer", "GenerateConfig", "JudgeConfig", "LMConfig", "ProgramConfig", "RAGProgram", "RerankConfig",
    "RetrieveConfig", "RewriteConfig", "default_program", "load", "read_config",
    "Chunk", "ChunkerConfig", "DeclragError", "Document", "EmbedderConfig", "Embedder", "EmbeddingCache",
    "Example", "Filter", "GoldenSet", "Hit", "IndexReport", "Indexer", "IngestConfig", "SearchParams", "Store",
    "corpus_store", "default_store", "index", "load_golden", "open_store", "search",
]
