"""Weaviate's vector index settings in the store URI (index, ef, ef_construction, max_connections,
compression): parsed and range-checked without a server, applied at creation and read back from a real
server, and an existing collection built with other settings than the URI asks refused by name. Also the
query path's own gRPC filter messages, which must equal what the client library builds."""

from __future__ import annotations

import random
import uuid

import numpy as np
import pytest

from declrag.errors import DeclragError
from declrag.stores import Filter, child_uri, open_store
from declrag.stores.weaviate import WeaviateStore
from declrag.stores.weaviate._wire import filter_pb, translate
from declrag.stores.weaviate.target import Target
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus


# -- without a server --------------------------------------------------------------------------------------
def test_index_settings_round_trip_through_the_uri():
    t = Target.parse("weaviate://h:1/Docs?grpc=2&index=hnsw&ef=64&ef_construction=256&max_connections=16"
                     "&compression=PQ")
    assert (t.index, t.ef, t.ef_construction, t.max_connections, t.compression) == ("hnsw", 64, 256, 16, "pq")
    assert Target.parse(t.uri()) == t
    plain = Target.parse("weaviate://h:1/Docs?grpc=2")
    assert (plain.index, plain.ef, plain.compression) == (None, None, None)
    assert plain.uri() == "weaviate://h:1/Docs?grpc=2"  # nothing asked, nothing written
    assert Target.parse("weaviate://h:1/Docs?index=hnsw&ef=-1").ef == -1  # dynamic ef, the server's default
    assert Target.parse("weaviate://h:1/Docs?compression=bq").compression == "bq"  # the flat index takes bq


@pytest.mark.parametrize("query, message", [
    ("index=ivf", "index must be flat or hnsw"),
    ("ef=64", "ef is a setting of the hnsw index"),
    ("index=flat&max_connections=16", "max_connections is a setting of the hnsw index"),
    ("index=hnsw&ef=0", r"ef must be between 1 and 100000 \(or -1, dynamic\), not 0"),
    ("index=hnsw&ef=-2", "ef must be between"),
    ("index=hnsw&ef=1e9", "ef must be an integer, not '1e9'"),
    ("index=hnsw&ef_construction=3", "ef_construction must be between 4 and 100000, not 3"),
    ("index=hnsw&max_connections=2048", "max_connections must be between 4 and 2047, not 2048"),
    ("index=hnsw&max_connections=many", "max_connections must be an integer"),
    ("index=hnsw&compression=zstd", "compression on the hnsw index must be one of none, pq, bq, sq, not 'zstd'"),
    ("compression=pq", "compression on the flat index must be one of none, bq, not 'pq'"),
    ("metrics=9", "unknown option .metrics."),  # the retrieval bench reads the server's Prometheus port, not the store
])
def test_bad_index_settings_are_one_clear_error(query, message):
    with pytest.raises(DeclragError, match=message):
        open_store(f"weaviate://127.0.0.1:9/Docs?grpc=10&{query}")  # refused before any connection


FILTERS = [
    {"doc_id": "a"}, {"page": {"$ne": 3}}, {"page": {"$nin": [1, 2]}}, {"page": {"$in": [1, 2]}},
    {"position": {"$gte": 2, "$lt": 9}}, {"id": {"$in": ["x", "y"]}}, {"source": {"$nin": ["s"]}},
    {"$or": [{"doc_id": "a"}, {"title": {"$gt": "m"}}]}, {"$and": [{"doc_id": {"$in": []}}, {"page": 1}]},
    {"$or": [{"doc_id": {"$nin": []}}, {"page": 1}]}, {"doc_id": {"$in": []}},
    {"$and": [{"$or": [{"page": {"$lte": 4}}, {"title": {"$ne": "t"}}]}, {"position": {"$in": [0, 5]}}]},
]


def _random_filter(rng: random.Random, depth: int = 0) -> dict:
    if depth < 2 and rng.random() < 0.3:
        return {rng.choice(["$and", "$or"]): [_random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    field = rng.choice(["id", "doc_id", "source", "title", "page", "position"])
    op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"])
    value = (lambda: rng.randint(-3, 9)) if field in ("page", "position") else (lambda: rng.choice("abc"))
    return {field: {op: [value() for _ in range(rng.randint(0, 3))] if op in ("$in", "$nin") else value()}}


def test_query_filters_are_the_messages_the_client_library_builds():
    """The search path writes its own gRPC filter messages; count and delete still go through the client
    library. Both must say the same thing to the server."""
    from weaviate.collections.filters import _FilterToGRPC

    rng = random.Random(7)
    for spec in FILTERS + [_random_filter(rng) for _ in range(300)]:
        where = Filter(spec)
        ours, theirs = filter_pb(where), translate(where)
        if isinstance(theirs, bool):
            assert ours is theirs, spec
        else:
            assert ours == _FilterToGRPC.convert(theirs), spec
    assert filter_pb(None) is True


# -- with a server -----------------------------------------------------------------------------------------
def _fresh(base: str, query: str = "") -> str:
    uri = child_uri(base, f"ix{uuid.uuid4().hex[:12]}")
    return uri + (("&" if "?" in uri else "?") + query if query else "")


@pytest.mark.weaviate
@pytest.mark.parametrize("query, expected", [
    ("index=hnsw&ef=64&ef_construction=96&max_connections=12&compression=bq",
     {"index": "hnsw", "ef": 64, "ef_construction": 96, "max_connections": 12, "compression": "bq"}),
    ("index=hnsw&compression=pq", {"index": "hnsw", "ef": -1, "ef_construction": 128, "max_connections": 32,
                                   "compression": "pq"}),
    ("index=hnsw&compression=sq", {"index": "hnsw", "compression": "sq"}),
    ("compression=bq", {"index": "flat", "compression": "bq"}),
    ("", {"index": "flat", "compression": "none"}),
])
def test_settings_reach_the_server(weaviate_url, query, expected):
    store, _ = open_store(_fresh(weaviate_url, query))
    try:
        built = store.index_settings()  # read back from the server's collection config
        assert {k: built[k] for k in expected} == expected
        store.upsert(*corpus(HashEmbedder()))
        hits = store.vector_search(HashEmbedder().embed_queries(["solar"])[0], 3)
        assert len(hits) == 3
    finally:
        store.drop()
        store.close()


@pytest.mark.weaviate
def test_a_collection_built_with_other_settings_is_refused_by_name(weaviate_url):
    uri = _fresh(weaviate_url, "index=hnsw&ef=64&max_connections=12")
    store, _ = open_store(uri)
    try:
        store.upsert(*corpus(HashEmbedder()))
        q = HashEmbedder().embed_queries(["solar"])[0]
        base = uri.split("&index=")[0]
        for other, message in [("&index=hnsw&ef=128", "was built with ef=64; the store URI asks ef=128"),
                               ("&index=hnsw&max_connections=16", "built with max_connections=12; the store URI "
                                                                  "asks max_connections=16"),
                               ("&index=flat", "was built with index=hnsw; the store URI asks index=flat"),
                               ("&index=hnsw&compression=bq", "built with compression=none; the store URI asks "
                                                              "compression=bq")]:
            again, _ = open_store(base + other)
            try:
                with pytest.raises(DeclragError, match=message) as e:
                    again.vector_search(q, 3)
                assert "--rebuild" in e.value.hint
                with pytest.raises(DeclragError, match=message):
                    again.upsert(*corpus(HashEmbedder()))
            finally:
                again.close()
        for same in (base, base + "&index=hnsw", base + "&index=hnsw&ef=64&max_connections=12"):
            again, _ = open_store(same)  # what the URI leaves out is not checked
            try:
                assert len(again.vector_search(q, 3)) == 3
            finally:
                again.close()
    finally:
        store.drop()
        store.close()
