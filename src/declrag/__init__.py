"""declrag: declarative, self-optimizing RAG.

The public API: configuration types, the values that flow through (documents, chunks, hits, answers),
stores, indexing, search, and the RAG program with its artifact (`RAGProgram`, `load`).

Importing declrag changes nothing outside it: no environment variable, no LiteLLM or DSPy setting (see
`declrag.lm`), and loads nothing heavy: each name below is imported on first use. What the process holds loaded
is in `registry`.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import os as _os
import sys as _sys
from typing import TYPE_CHECKING


class _LiteLLMOffline:
    """LiteLLM fetches its price table from the network when it is first imported, unless
    LITELLM_LOCAL_MODEL_COST_MAP is set. Whoever imports it first through declrag (DSPy does, and declrag.lm), it
    is imported with that variable set for the import only (the table LiteLLM ships is used, no network wait) and
    the environment is put back as it was. This finder does that once, then leaves `sys.meta_path`; a process
    that imported LiteLLM before declrag keeps what it got."""

    name, variable = "litellm", "LITELLM_LOCAL_MODEL_COST_MAP"

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != cls.name:
            return None
        if cls in _sys.meta_path:
            _sys.meta_path.remove(cls)
        spec = _importlib_util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            before = _os.environ.get(cls.variable)
            _os.environ[cls.variable] = "True"
            try:
                run(module)
            finally:
                if before is None:
                    _os.environ.pop(cls.variable, None)
                else:
                    _os.environ[cls.variable] = before

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "litellm" not in _sys.modules and _LiteLLMOffline not in _sys.meta_path:
    _sys.meta_path.insert(0, _LiteLLMOffline)  # type: ignore[arg-type]

# name -> the module that defines it: imported on first use (PEP 562), so that `import declrag` and the `declrag`
# command start at once and only what is used loads (DSPy, LiteLLM, torch and LanceDB take seconds to import)
_LAZY = {
    **dict.fromkeys(("default_store", "index", "search"), "api"),
    "corpus_store": "ingest.corpus",
    **dict.fromkeys(("ChunkerConfig", "EmbedderConfig", "GenerateConfig", "IngestConfig", "JudgeConfig", "LMConfig",
                     "ProgramConfig", "RerankConfig", "RetrieveConfig", "RewriteConfig", "SearchParams"), "config"),
    **dict.fromkeys(("Embedder", "EmbeddingCache"), "embed.embedder"),
    "DeclragError": "errors",
    **dict.fromkeys(("Example", "GoldenSet", "load_golden"), "golden"),
    **dict.fromkeys(("Indexer", "IndexReport"), "ingest.indexer"),
    "registry": "lm",
    **dict.fromkeys(("Answer", "RAGProgram", "default_program", "load", "read_config"), "pipeline.program"),
    **dict.fromkeys(("Filter", "Store", "open_store"), "stores"),
    **dict.fromkeys(("Chunk", "Document", "Hit"), "types"),
}

if TYPE_CHECKING:
    from .api import default_store, index, search
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
    from .embed.embedder import Embedder, EmbeddingCache
    from .errors import DeclragError
    from .golden import Example, GoldenSet, load_golden
    from .ingest.corpus import corpus_store
    from .ingest.indexer import Indexer, IndexReport
    from .lm import registry
    from .pipeline.program import Answer, RAGProgram, default_program, load, read_config
    from .stores import Filter, Store, open_store
    from .types import Chunk, Document, Hit


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'declrag' has no attribute {name!r}")
    value = globals()[name] = getattr(_importlib.import_module(f".{module}", __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "Answer", "GenerateConfig", "JudgeConfig", "LMConfig", "ProgramConfig", "RAGProgram", "RerankConfig",
    "RetrieveConfig", "RewriteConfig", "default_program", "load", "read_config",
    "Chunk", "ChunkerConfig", "DeclragError", "Document", "EmbedderConfig", "Embedder", "EmbeddingCache",
    "Example", "Filter", "GoldenSet", "Hit", "IndexReport", "Indexer", "IngestConfig", "SearchParams", "Store",
    "corpus_store", "default_store", "index", "load_golden", "open_store", "registry", "search",
]
