"""The two collections of a store as declrag creates them (their properties, vector index, BM25 settings and
replication), and the vector index settings read back from a collection's config."""

from __future__ import annotations

import warnings
from typing import Any

from weaviate.classes.config import Configure, DataType, Property, StopwordsPreset, Tokenization, VectorDistances

from ..base import StoreMeta
from ..bm25 import K1, B
from ._layout import Layout
from ._wire import index_config
from .target import Target

DISTANCES = {"cosine": VectorDistances.COSINE, "dot": VectorDistances.DOT, "l2": VectorDistances.L2_SQUARED}


def _field(name: str, dtype=DataType.TEXT, searchable: bool = False, filterable: bool = True,
           tokens: bool = False) -> Property:
    text = dtype in (DataType.TEXT, DataType.TEXT_ARRAY)  # an array of names (readers) is compared whole: FIELD
    searched_as = Tokenization.WHITESPACE if tokens else Tokenization.WORD
    return Property(name=name, data_type=dtype, index_searchable=searchable if text else None,
                    index_filterable=filterable, tokenization=(searched_as if searchable else
                                                               Tokenization.FIELD) if text else None)


def _common(t: Target) -> dict[str, Any]:
    with warnings.catch_warnings():  # async_enabled: deprecated by the client for servers >= 1.38, which
        warnings.simplefilter("ignore")  # replicate asynchronously by default; on older ones it is needed
        # with more than one replica, a node that was down catches up with the writes it missed by itself
        # (async replication) instead of only object by object as reads repair them
        replication = Configure.replication(factor=t.replicas, async_enabled=True if t.replicas > 1 else None)
    return dict(replication_config=replication, sharding_config=Configure.sharding(desired_count=t.shards))


def documents_collection(t: Target, name: str, chunks_name: str) -> dict[str, Any]:
    """The arguments of ``collections.create`` for the document records (and texts) of store ``chunks_name``."""
    return dict(
        name=name, description=f"declrag documents of {chunks_name}",
        properties=[_field("doc_id"), _field("source", filterable=False), _field("title", filterable=False),
                    _field("page", DataType.INT, filterable=False), _field("hash", filterable=False),
                    _field("text", filterable=False), _field("chunks", DataType.INT, filterable=False),
                    _field("mtime_ns", DataType.INT, filterable=False),
                    _field("size", DataType.INT, filterable=False), _field("readers", DataType.TEXT_ARRAY)],
        vector_config=Configure.Vectors.self_provided(vector_index_config=Configure.VectorIndex.flat()),
        **_common(t))


def chunks_collection(t: Target, name: str, meta: StoreMeta) -> dict[str, Any]:
    """The arguments of ``collections.create`` for the chunks: BM25 k1/b as the embedded store's, the `Layout`'s
    keyword property alone searchable (whitespace-tokenized tokens, stop words taken out of queries by declrag; before
    format 5, word-tokenized with Weaviate's English stop words), the `StoreMeta` as JSON in the description."""
    kw = Layout.of(meta)
    searched = kw.keyword == "searched"
    return dict(
        name=name, description=meta.model_dump_json(),
        properties=[_field("chunk_id"), _field("doc_id"), _field("text", searchable=not searched, filterable=False),
                    *([_field("searched", searchable=True, filterable=False, tokens=kw.tokens)] if searched else []),
                    _field("source"), _field("title"), _field("section"), _field("header", filterable=False),
                    *([_field("language")] if kw.language else []),
                    *([_field("readers", DataType.TEXT_ARRAY)] if kw.readers else []),
                    _field("page", DataType.INT),
                    _field("position", DataType.INT), _field("start", DataType.INT, filterable=False),
                    _field("end", DataType.INT, filterable=False),
                    _field("parent_start", DataType.INT, filterable=False),
                    _field("parent_end", DataType.INT, filterable=False)],
        vector_config=Configure.Vectors.self_provided(vector_index_config=index_config(t, DISTANCES[meta.metric])),
        inverted_index_config=Configure.inverted_index(bm25_k1=K1, bm25_b=B, index_null_state=True,
                                                       stopwords_preset=StopwordsPreset.NONE if kw.tokens
                                                       else StopwordsPreset.EN),
        **_common(t))


def index_settings(cfg) -> dict[str, Any]:
    """The vector index settings of a collection config, as the server reports them (its own record of how the
    index was built): ``index`` (flat / hnsw), ``ef``, ``ef_construction``, ``max_connections`` (hnsw only) and
    ``compression`` (none, pq, bq, sq, rq)."""
    vc = (cfg.vector_config or {}).get("default")
    vic = vc.vector_index_config if vc is not None else cfg.vector_index_config
    quant = getattr(vic, "quantizer", None)
    out: dict[str, Any] = {
        "index": "hnsw" if hasattr(vic, "max_connections") else "flat",
        "compression": "none" if quant is None else type(quant).__name__.strip("_").lower().removesuffix("config")}
    if out["index"] == "hnsw":
        out.update(ef=vic.ef, ef_construction=vic.ef_construction, max_connections=vic.max_connections)
    return out
