"""The RAG program's stages, each a `PipelineStage` over one `State` (a module, or a package when its code is more
than one file): the history's search question (`history`), rewrite, retrieve, rerank, select, generate with
citations, and the self-judge. Their order is `declrag.pipeline.stage_list.STAGES`."""

from ._base import (
    PHASES,
    Building,
    Phase,
    PipelineStage,
    embedding_time,
    since_ms,
    stage_class,
    timed,
    timing_embeddings,
)
from ._judge import SelfJudge
from ._rerank import Reranker
from ._rewrite import QueryRewriter
from ._state import Draft, Queries, SearchQuestion, State
from .generate import Generator
from .history import HistoryQuery
from .retrieve import Retriever, pool_size
from .select import Selector

__all__ = ["PHASES", "Building", "Draft", "Generator", "HistoryQuery", "Phase", "PipelineStage", "Queries",
           "QueryRewriter", "Reranker", "Retriever", "SearchQuestion", "Selector", "SelfJudge", "State",
           "embedding_time", "pool_size", "since_ms", "stage_class", "timed", "timing_embeddings"]
