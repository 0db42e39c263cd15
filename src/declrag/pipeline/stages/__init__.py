"""The RAG program's stages, one to a file, each a `PipelineStage` over one `State`: the history's search question
(`history`), rewrite, retrieve, rerank, select, generate with citations, and the self-judge. Their order is
`declrag.pipeline.stage_list.STAGES`."""

from .base import PHASES, Phase, PipelineStage, State, embedding_time, stage_class, timing_embeddings
from .generate import Draft, Generator
from .history import HistoryQuery, SearchQuestion
from .judge import SelfJudge
from .rerank import Reranker
from .retrieve import Retriever, pool_size
from .rewrite import Queries, QueryRewriter
from .select import Selector

__all__ = ["PHASES", "Draft", "Generator", "HistoryQuery", "Phase", "PipelineStage", "Queries", "QueryRewriter",
           "Reranker", "Retriever", "SearchQuestion", "Selector", "SelfJudge", "State", "embedding_time", "pool_size",
           "stage_class", "timing_embeddings"]
