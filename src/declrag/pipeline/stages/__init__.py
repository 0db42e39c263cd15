"""The RAG program's stages, one to a file, each a `PipelineStage` over one `State`: the history's search question
(`history`), rewrite, retrieve, rerank, select, generate with citations, and the self-judge. Their order is
`declrag.pipeline.stage_list.STAGES`."""

from .base import PHASES, Building, Phase, PipelineStage, embedding_time, stage_class, timing_embeddings
from .generate import Generator
from .history import HistoryQuery
from .judge import SelfJudge
from .rerank import Reranker
from .retrieve import Retriever, pool_size
from .rewrite import QueryRewriter
from .select import Selector
from .state import Draft, Queries, SearchQuestion, State

__all__ = ["PHASES", "Building", "Draft", "Generator", "HistoryQuery", "Phase", "PipelineStage", "Queries",
           "QueryRewriter", "Reranker", "Retriever", "SearchQuestion", "Selector", "SelfJudge", "State",
           "embedding_time", "pool_size", "stage_class", "timing_embeddings"]
