"""The RAG program's stages, one to a file, each a `PipelineStage`: the history's search question (`history`),
rewrite, retrieve, rerank, generate with citations, and the self-judge."""

from .base import PipelineStage, embedding_time, timing_embeddings
from .generate import Draft, Generator
from .history import HistoryQuery, SearchQuestion
from .judge import SelfJudge
from .rerank import Reranker
from .retrieve import Retriever, pool_size
from .rewrite import Queries, QueryRewriter

__all__ = ["Draft", "Generator", "HistoryQuery", "PipelineStage", "Queries", "QueryRewriter", "Reranker", "Retriever",
           "SearchQuestion", "SelfJudge", "embedding_time", "pool_size", "timing_embeddings"]
