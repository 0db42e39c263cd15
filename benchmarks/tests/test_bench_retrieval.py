"""`declrag bench retrieval` on Weaviate: the client library's query API arm, and the gRPC call timer."""

from __future__ import annotations

import numpy as np
import pytest
from tests.live.test_weaviate_index_settings import _fresh

from declrag.errors import DeclragError
from declrag.stores import open_store
from declrag.stores.weaviate import WeaviateStore
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus


@pytest.mark.weaviate
def test_query_path_equals_the_client_library_and_reports_its_grpc_time(weaviate_url):
    """The store's own gRPC requests return what the client library's query API returns, hit for hit; the
    retrieval bench's wrapper times each of them (the store itself carries no timer)."""
    from declrag_bench.retrieval import _client_search, _time_searches

    store, _ = open_store(_fresh(weaviate_url, "settle=0"))
    calls: list[float] = []
    try:
        emb = HashEmbedder()
        store.upsert(*corpus(emb))
        assert isinstance(store, WeaviateStore)
        _time_searches(store, calls)
        for q in ("solar panels electricity", "the wind", "photovoltaic cells"):
            v = emb.embed_queries([q])[0]
            for mode, alpha, fusion in (("keyword", 0.5, "relative"), ("vector", 0.5, "relative"),
                                        ("hybrid", 0.5, "relative"), ("hybrid", 0.3, "ranked")):
                ours = {"keyword": lambda: store.keyword_search(q, 7),  # noqa: B023
                        "vector": lambda: store.vector_search(v, 7),  # noqa: B023
                        "hybrid": lambda: store.hybrid_search(q, v, 7, alpha, fusion)}[mode]  # noqa: B023
                assert ours() == _client_search(store, mode, q, v, 7, alpha, fusion)
        assert len(calls) == 12 and all(0 < t < 10 for t in calls)
        with pytest.raises(DeclragError, match="vector search .* failed"):
            store.vector_search(np.ones(3, dtype=np.float32), 3)  # another dimension: at once, no retries
    finally:
        store.__dict__.pop("search_stub", None)
        store.drop()
        store.close()
