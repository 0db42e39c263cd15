"""The Weaviate backend: a store is a collection on a Weaviate server, searched inside the server.

``weaviate://host:port/Collection?grpc=50051`` (``weaviates://`` for TLS on both ports). Query options:
``grpc`` (gRPC port, default 50051), ``api_key_env`` (the environment variable holding the API key, default
``WEAVIATE_API_KEY``; unset means no auth), ``index`` (``flat``, exact, the default, or ``hnsw``), the HNSW
settings ``ef`` (-1, dynamic, or 1-100000), ``ef_construction`` (4-100000) and ``max_connections`` (4-2047),
``compression`` (``pq``, ``bq``, ``sq`` on hnsw, ``bq`` on flat, ``none``), ``replicas`` (replication
factor, default 1), ``shards`` (default 1: BM25 statistics are per shard, so one shard gives the same
scores as the embedded store), ``consistency`` (``ONE``, ``QUORUM``, ``ALL``; the
server's default when absent), ``retries`` (a failed request is retried this many times with backoff,
default 3), ``timeout`` (seconds per request, default 60), ``settle`` (seconds `settle` waits after the last
write, default 65; see below).
A cluster's nodes go in the address, comma-separated (``weaviate://h1:8080,h2:8080,h3:8080/Docs``; ``nodes=``
adds more), ``grpc`` then one port for the first node (the others at the same distance from their REST port)
or one per node; a handle talks to one node and, when it stops answering, goes on with the next (`_call`).
Creation-time options apply when the store is created. The vector index settings are kept by the server in
the collection's config; those the URI names are compared with it before a handle's first search or write,
and a collection built otherwise is refused by name (`WeaviateStore.index_settings` reads them back).

Searches send one gRPC ``Search`` request each, built here from the protocol's messages, and read the
reply's fields directly; writes, counts and schema calls go through the client library.

What is stored: collection ``Collection`` holds the chunks (own vectors, cosine distance unless the store's
metric says otherwise, BM25 k1 1.2 / b 0.75 on the word-tokenized ``text`` property alone, the English
stopword preset) and the `StoreMeta` as JSON in its description; ``Collection_docs`` holds the document
records and texts. Objects have fixed UUIDs (UUID5 of the chunk or document id), so writing one twice
replaces it.

Guarantees (unlike LanceDB, Weaviate has no multi-object transactions): every object write is atomic and
idempotent. An upsert writes the new chunks, then deletes the stale chunks of documents that were indexed
before (those not among the new ones), then the document records, last. A crash part-way leaves some
documents with new chunks (and possibly their old, stale ones) but their old record, so the next indexing
run sees them as changed and redoes them; no chunk is ever duplicated. One exception: a document first
written by a crashed run and edited before the next one keeps the crashed run's chunks that the new
version does not overwrite (it has no record, so nothing is deleted for it); `declrag index --rebuild`
clears that. Searches running during an upsert may see a document half-replaced.

Hybrid search is Weaviate's own (``alpha`` and ``relative``/``ranked`` fusion passed through). Each leg
brings ``max(QUERY_HYBRID_MAXIMUM_RESULTS, limit)`` candidates (100 on a default server); ``candidates``
above that is honoured by asking for that many results and keeping the best ``limit``; below it, the
server's count applies (the embedded store takes ``candidates`` as given). Per-leg scores are not reported.

Keyword search is eventually consistent: until the server flushes its memtables (after 60 s of a dirty
memtable by default, PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS), BM25 can miss recently written
objects (measured on SQuAD: right after indexing, 67 of 200 queries had another keyword top 10; after
30 s, 1; after 60 s, none). `settle` waits that long after this handle's last write; compile, eval and the
benchmarks call it before they measure anything.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

from ..config import AnnConfig, Fusion, Metric
from ..errors import DeclragError
from ..types import Chunk, Document, Hit
from .base import DocRecord, Filter, Store, StoreCheck, StoreMeta, Where, check_upsert
from .bm25 import K1, B, query_terms
from .fusion import object_uuid
from .weaviate_target import DEFAULT_COLLECTION, DOCS_SUFFIX, Target, _auth, _connect, _connect_any, _status
from .weaviate_wire import (
    CHUNK_INTS,
    CHUNK_TEXTS,
    NO_CLIENT_RETRY,
    _chunk,
    _chunk_props,
    _detail,
    _filter_pb,
    _index_config,
    _node_down,
    _one_try_when_failing_over,
    _pb,
    _transient,
    _translate,
    _vector_bytes,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

BATCH = 1000  # objects per insert request
PAGE = 5000  # objects per read request


def _uuid(key: str) -> str:
    return object_uuid(key)


class WeaviateStore(Store):
    """The `Store` protocol on a Weaviate collection (see the module docstring)."""

    backend = "weaviate"
    capabilities = frozenset[str]()

    def __init__(self, uri: str, metric: Metric | None = None):
        self.target = Target.parse(uri)
        self.uri = self.target.uri()
        self.name, self.docs_name = self.target.collection, self.target.collection + DOCS_SUFFIX
        if len(self.target.nodes) > 1:
            _one_try_when_failing_over()
        self._client_, self._node = _connect_any(self.target)  # the first node of the URI's that answers
        self._gen = 0  # how many times this handle has failed over (see _call)
        self._retired: list[Any] = []  # clients and channels of nodes left behind, closed by close()
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}
        self.metric: Metric = metric or "cosine"
        self._created = False
        self._checked = False  # the URI's index settings were compared with the collection's (_check_index)
        self._written_at: float | None = None
        self._grpc: tuple[Any, Any] | None = None  # (channel, stub) of the query path, opened on first use
        self._grpc_md: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_uri(cls, uri: str) -> WeaviateStore:
        return cls(uri)

    # -- plumbing -------------------------------------------------------------------------------------
    @property
    def node(self) -> str:
        """The node this handle talks to now (``host:port``)."""
        h, p, _ = self.target.nodes[self._node]
        return f"{h}:{p}"

    @property
    def _client(self):
        c = self._client_
        if c is None:  # failed over: connect to the node now current (Unreachable if it does not answer)
            with self._lock:
                if self._client_ is None:
                    self._client_ = _connect(self.target, self._node)
                c = self._client_
        return c

    def _failover(self, gen: int, why: str) -> None:
        """The node this handle talks to stopped answering: move to the next node of the URI (once per
        failure, however many threads saw it: ``gen`` is the failover count they saw before their call)."""
        with self._lock:
            if gen != self._gen or len(self.target.nodes) < 2:
                return
            old, self._node = self._node, (self._node + 1) % len(self.target.nodes)
            self._gen += 1
            # other threads may still be using these: they are closed with the handle, not now
            self._retired += [x for x in (self._client_, self._grpc[0] if self._grpc else None) if x is not None]
            self._client_, self._grpc, self._handles = None, None, {}
        log.warning("Weaviate node %s stopped answering (%s); going on with %s", self.target.node(old), why,
                    self.target.node(self._node))

    def _coll(self, name: str, consistency: str | None = None):
        level = consistency or self.target.consistency
        key = f"{name}@{level}"
        if key not in self._handles:
            from weaviate.classes.config import ConsistencyLevel

            c = self._client.collections.get(name)
            if level:
                c = c.with_consistency_level(getattr(ConsistencyLevel, level))
            self._handles[key] = c
        return self._handles[key]

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one request, retrying transient failures (a node down, a timeout) with backoff. With several
        nodes in the URI, a failure of the node itself (refused, reset, unavailable, timed out) moves the
        handle to the next node, and the request is sent there at once while its timeout lasts."""
        transient, nodes = _transient(), len(self.target.nodes)
        deadline = time.monotonic() + self.target.timeout
        attempt = switched = 0
        while True:
            gen = self._gen
            token = NO_CLIENT_RETRY.set(True) if nodes > 1 else None
            try:
                return fn()
            except transient as e:
                status = _status(e)
                if status in (401, 403):
                    raise _auth(self.target, e) from e
                detail = _detail(e)
                if "vector lengths don't match" in detail or "dimension" in detail:  # no retry can help
                    raise DeclragError(f"Weaviate {what} on {self.uri} failed: {detail.splitlines()[0][:300]}",
                                       hint="search with a vector of the store's embedding model") from e
                if nodes > 1 and _node_down(e):
                    self._failover(gen, type(e).__name__)
                    if switched < nodes - 1 and time.monotonic() < deadline:
                        switched += 1  # every other node once, without waiting
                        continue
                if (status is not None and status < 500) or attempt >= self.target.retries:
                    raise DeclragError(f"Weaviate {what} on {self.uri} failed: {detail.splitlines()[0][:300]}",
                                       hint="check the server (its log, /v1/nodes); everything committed before "
                                            "is kept, and re-running the command continues") from e
                log.warning("Weaviate %s failed (%s); retrying", what, type(e).__name__)
                time.sleep(min(0.25 * 2 ** attempt, 2.0))
                attempt += 1
            finally:
                if token is not None:
                    NO_CLIENT_RETRY.reset(token)

    # -- the store itself -----------------------------------------------------------------------------
    def read_meta(self) -> StoreMeta | None:
        if not self._call("schema read", lambda: self._client.collections.exists(self.name)):
            return None
        desc = self._call("schema read", lambda: self._client.collections.get(self.name).config.get()).description
        try:
            meta = StoreMeta.model_validate_json(desc or "")
        except ValueError as e:
            raise DeclragError(f"collection {self.name} at {self.target.base} exists and is not a declrag store",
                               hint="name another collection in the store URI") from e
        self.metric = meta.metric
        return meta

    def create(self, meta: StoreMeta) -> None:
        from weaviate.classes.config import (
            Configure,
            DataType,
            Property,
            StopwordsPreset,
            Tokenization,
            VectorDistances,
        )

        if self._call("schema read", lambda: self._client.collections.exists(self.name)):
            raise DeclragError(f"collection {self.name} at {self.target.base} exists and is not a declrag store",
                               hint="name another collection in the store URI")
        t = self.target

        def field(name: str, dtype=DataType.TEXT, searchable: bool = False, filterable: bool = True) -> Property:
            text = dtype == DataType.TEXT
            return Property(name=name, data_type=dtype, index_searchable=searchable if text else None,
                            index_filterable=filterable, tokenization=(Tokenization.WORD if searchable else
                                                                       Tokenization.FIELD) if text else None)

        with warnings.catch_warnings():  # async_enabled: deprecated by the client for servers >= 1.38, which
            warnings.simplefilter("ignore")  # replicate asynchronously by default; on older ones it is needed
            # with more than one replica, a node that was down catches up with the writes it missed by itself
            # (async replication) instead of only object by object as reads repair them
            replication = Configure.replication(factor=t.replicas, async_enabled=True if t.replicas > 1 else None)
        common = dict(replication_config=replication, sharding_config=Configure.sharding(desired_count=t.shards))
        if not self._call("schema read", lambda: self._client.collections.exists(self.docs_name)):
            self._call("collection create", lambda: self._client.collections.create(
                self.docs_name, description=f"declrag documents of {self.name}",
                properties=[field("doc_id"), field("source", filterable=False), field("title", filterable=False),
                            field("page", DataType.INT, filterable=False), field("hash", filterable=False),
                            field("text", filterable=False), field("chunks", DataType.INT, filterable=False),
                            field("mtime_ns", DataType.INT, filterable=False),
                            field("size", DataType.INT, filterable=False)],
                vector_config=Configure.Vectors.self_provided(vector_index_config=Configure.VectorIndex.flat()),
                **common))
        distance = {"cosine": VectorDistances.COSINE, "dot": VectorDistances.DOT, "l2": VectorDistances.L2_SQUARED}
        self._call("collection create", lambda: self._client.collections.create(
            self.name, description=meta.model_dump_json(),
            properties=[field("chunk_id"), field("doc_id"), field("text", searchable=True, filterable=False),
                        field("source"), field("title"), field("page", DataType.INT),
                        field("position", DataType.INT), field("start", DataType.INT, filterable=False),
                        field("end", DataType.INT, filterable=False),
                        field("parent_start", DataType.INT, filterable=False),
                        field("parent_end", DataType.INT, filterable=False)],
            vector_config=Configure.Vectors.self_provided(
                vector_index_config=_index_config(t, distance[meta.metric])),
            inverted_index_config=Configure.inverted_index(bm25_k1=K1, bm25_b=B, index_null_state=True,
                                                           stopwords_preset=StopwordsPreset.EN),
            **common))
        self.metric, self._created = meta.metric, True
        self._checked = True

    def index_settings(self) -> dict[str, Any]:
        """The vector index settings of the collection, as the server reports them (its own record of how
        the index was built): ``index`` (flat / hnsw), ``ef``, ``ef_construction``, ``max_connections``
        (hnsw only) and ``compression`` (none, pq, bq, sq, rq)."""
        cfg = self._call("schema read", lambda: self._client.collections.get(self.name).config.get())
        vc = (cfg.vector_config or {}).get("default")
        vic = vc.vector_index_config if vc is not None else cfg.vector_index_config
        quant = getattr(vic, "quantizer", None)
        out: dict[str, Any] = {
            "index": "hnsw" if hasattr(vic, "max_connections") else "flat",
            "compression": "none" if quant is None else type(quant).__name__.strip("_").lower().removesuffix("config")}
        if out["index"] == "hnsw":
            out.update(ef=vic.ef, ef_construction=vic.ef_construction, max_connections=vic.max_connections)
        return out

    def _check_index(self) -> None:
        """Once per handle, before its first search or write: the vector index settings the store URI names
        must be those the collection was built with (they are fixed at creation), else a `DeclragError`
        naming the setting. Settings the URI leaves out are not checked."""
        if self._checked:
            return
        t = self.target
        asked = {k: getattr(t, k) for k in ("index", "ef", "ef_construction", "max_connections", "compression")
                 if getattr(t, k) is not None}
        if asked and self._call("schema read", lambda: self._client.collections.exists(self.name)):
            built = self.index_settings()
            for k, v in asked.items():
                if built.get(k) != v:
                    have = f"{k}={built[k]}" if k in built else f"index={built['index']} (which has no {k})"
                    raise DeclragError(
                        f"collection {self.name} at {t.base} was built with {have}; the store URI asks {k}={v}",
                        hint="these settings are fixed when a collection is created: drop the option from the URI, "
                             "name another collection, or rebuild this one (declrag index ... --rebuild)")
        self._checked = True

    def drop(self) -> None:
        for name in (self.name, self.docs_name):
            self._call("collection delete", partial(self._client.collections.delete, name))
        self._handles.clear()
        self._created = self._checked = False

    @staticmethod
    def child_uri(base: str, name: str) -> str:
        t = Target.parse(base)
        stem = t.collection if urlsplit(base).path.strip("/") else DEFAULT_COLLECTION
        safe = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_")
        return t.uri(f"{stem}_{safe}")

    @classmethod
    def list_stores(cls, base: str) -> list[tuple[str, StoreMeta, int]]:
        t = Target.parse(base)
        probe = cls(t.uri())
        try:
            out = []
            for name, cfg in sorted(probe._call("schema read", lambda: probe._client.collections.list_all()).items()):
                try:
                    meta = StoreMeta.model_validate_json(cfg.description or "")
                except ValueError:
                    continue
                st = cls(t.uri(name))
                try:
                    out.append((st.uri, meta, st.count()))
                finally:
                    st.close()
            return out
        finally:
            probe.close()

    # -- writes ---------------------------------------------------------------------------------------
    def upsert(self, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
               file_stats: Mapping[str, tuple[int, int]] | None = None) -> None:
        from weaviate.classes.data import DataObject
        from weaviate.classes.query import Filter as W

        if not documents:
            return
        vectors, doc_ids = check_upsert(documents, chunks, vectors)
        if not self._created:  # never let a server's auto-schema invent the collection
            if not self._call("schema read", lambda: self._client.collections.exists(self.name)):
                raise DeclragError(f"no store at {self.uri}", hint="create it first: declrag index PATH --store URI "
                                                                   "(or open_store in Python)")
            self._created = True
        self._check_index()
        objs = [DataObject(properties=_chunk_props(c), uuid=_uuid(c.id), vector=v.tolist())
                for c, v in zip(chunks, vectors)]
        for i in range(0, len(objs), BATCH):
            self._insert(self.name, objs[i:i + BATCH])
        # the chunks of documents indexed before that are not among the new ones go (a document never seen
        # before has none: no delete is sent, which also spares a replicated cluster a filter-delete racing
        # the write it follows)
        recorded = self._recorded(doc_ids)
        known = [d for d in doc_ids if d in recorded]
        if known:
            stale = W.by_property("doc_id").contains_any(known)
            if chunks:
                stale = stale & W.by_id().contains_none([_uuid(c.id) for c in chunks])
            self._delete_all(self.name, stale)
        counts: dict[str, int] = {}
        for c in chunks:
            counts[c.doc_id] = counts.get(c.doc_id, 0) + 1
        stats = file_stats or {}
        recs = [DataObject(uuid=_uuid(d.id), properties={
            "doc_id": d.id, "source": d.source, "title": d.title, "page": d.page, "hash": d.hash, "text": d.text,
            "chunks": counts.get(d.id, 0), "mtime_ns": stats.get(d.source, (0, -1))[0],
            "size": stats.get(d.source, (0, -1))[1]}) for d in documents]
        for i in range(0, len(recs), BATCH):
            self._insert(self.docs_name, recs[i:i + BATCH])

    def _recorded(self, doc_ids: Sequence[str]) -> set[str]:
        """Which of these documents have a record (were indexed before)."""
        return {o.properties["doc_id"] for o in self._by_keys(self.docs_name, doc_ids, ["doc_id"])}

    def _by_keys(self, name: str, keys: Sequence[str], props: list[str]) -> list:
        """The objects of collection ``name`` whose UUIDs are those of ``keys`` (chunk or document ids), read
        a page at a time."""
        from weaviate.classes.query import Filter as W

        uniq, out = list(dict.fromkeys(keys)), []
        for i in range(0, len(uniq), PAGE):
            part = [_uuid(k) for k in uniq[i:i + PAGE]]
            res = self._call("read", lambda: self._coll(name).query.fetch_objects(  # called at once, in this pass
                filters=W.by_id().contains_any(part), limit=len(part), return_properties=props))  # noqa: B023
            out.extend(res.objects)
        return out

    def _insert(self, name: str, objs: list, consistency: str | None = None) -> None:
        """Write ``objs``; ``consistency`` overrides the URI's for this write (``ALL``: every replica has them)."""
        self._written_at = time.monotonic()
        res = self._call("insert", lambda: self._coll(name, consistency).data.insert_many(objs))
        if res.has_errors:
            first = next(iter(res.errors.values()))
            msg = getattr(first, "message", str(first))
            if "vector lengths don't match" in msg or "dimension" in msg.lower():
                raise DeclragError(f"vectors of dimension {len(objs[0].vector or [])} cannot go into store {self.uri}: "
                                   f"{msg}", hint="index with the store's embedding model, or use a new store")
            raise DeclragError(f"Weaviate refused {len(res.errors)} of {len(objs)} objects in {self.uri}: {msg}",
                               hint="check the server's log; re-running the command redoes what failed")

    def _delete_all(self, name: str, where, consistency: str | None = None) -> int:
        self._written_at, n = time.monotonic(), 0
        while True:  # the server deletes at most QUERY_MAXIMUM_RESULTS objects per request
            res = self._call("delete", lambda: self._coll(name, consistency).data.delete_many(where=where))
            n += res.successful
            if res.failed:
                raise DeclragError(f"Weaviate could not delete {res.failed} objects in {self.uri}",
                                   hint="check the server's log; re-running the command redoes what failed")
            if res.matches == 0 or res.successful == 0:
                return n

    def delete(self, doc_ids: Sequence[str]) -> int:
        from weaviate.classes.query import Filter as W

        if not doc_ids:
            return 0
        n = self._delete_all(self.name, W.by_property("doc_id").contains_any(list(doc_ids)))
        self._delete_all(self.docs_name, W.by_id().contains_any([_uuid(d) for d in doc_ids]))  # records last
        return n

    def optimize(self) -> None:  # Weaviate compacts its own segments in the background
        return None

    def settle(self) -> None:
        """Wait until keyword search sees this handle's last write (see the module docstring)."""
        if self._written_at is None:
            return
        left = self._written_at + self.target.settle - time.monotonic()
        if left > 0:
            log.warning("waiting %.0f s for Weaviate's keyword index to take the last writes (?settle= in the URI)",
                        left)
            time.sleep(left)
        self._written_at = None

    def verify(self) -> StoreCheck:
        """Every node's copy checked, and what a node lost written again (see `weaviate_replicas`)."""
        from .weaviate_replicas import verify

        return verify(self, type(self))

    # -- reads ----------------------------------------------------------------------------------------
    def count(self, where: Where = None) -> int:
        filt = _translate(Filter.of(where))
        if filt is False:
            return 0
        res = self._call("count", lambda: self._coll(self.name).aggregate.over_all(
            total_count=True, filters=None if filt is True else filt))
        return int(res.total_count or 0)

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        found = {c.id: c for c in map(_chunk, self._by_keys(self.name, ids, list(CHUNK_TEXTS + CHUNK_INTS)))}
        return [found[i] for i in ids if i in found]

    def documents(self) -> dict[str, DocRecord]:
        if not self._call("schema read", lambda: self._client.collections.exists(self.docs_name)):
            return {}
        props = ["doc_id", "source", "title", "page", "hash", "chunks", "mtime_ns", "size"]

        def read_all():
            return [o.properties for o in self._coll(self.docs_name).iterator(return_properties=props, cache_size=PAGE)]

        out = {}
        for p in self._call("read", read_all):
            out[p["doc_id"]] = DocRecord(id=p["doc_id"], source=p.get("source") or "", title=p.get("title") or "",
                                         page=p.get("page"), hash=p["hash"], chunks=int(p.get("chunks") or 0),
                                         mtime_ns=int(p.get("mtime_ns") or 0), size=int(p.get("size") or -1))
        return out

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        return {o.properties["doc_id"]: o.properties.get("text") or ""
                for o in self._by_keys(self.docs_name, doc_ids, ["doc_id", "text"])}

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]:
        filt = _filter_pb(Filter.of(where))
        if filt is False or not query_terms(query):
            return []
        pb = _pb()
        req = self._request(limit, filt, score=True)
        req.bm25_search.CopyFrom(pb.base_search_pb2.BM25(query=query, properties=["text"]))
        return [Hit.of(c, s, keyword=s) for c, s in self._search("keyword search", req, "score") if s > 0]

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:  # ann: Weaviate's index is set in the store URI
        filt = _filter_pb(Filter.of(where))
        if filt is False:
            return []
        pb = _pb()
        req = self._request(limit, filt, distance=True)
        req.near_vector.CopyFrom(pb.base_search_pb2.NearVector(vector_bytes=_vector_bytes(vector)))
        return [Hit.of(c, 1.0 - d, vector=1.0 - d) for c, d in self._search("vector search", req, "distance")]

    def hybrid_search(self, query: str, vector: np.ndarray | None, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        filt = _filter_pb(Filter.of(where))
        if filt is False:
            return []
        pb = _pb()
        h = pb.base_search_pb2.Hybrid
        # at alpha 0 (keyword only) Weaviate needs no vector. alpha goes in both fields: servers before 1.36.6
        # read ``alpha``, later ones ``alpha_param`` (which can say 0 explicitly)
        req = self._request(max(limit, candidates), filt, score=True)
        req.hybrid_search.CopyFrom(h(
            query=query, properties=["text"], alpha=alpha, alpha_param=alpha, use_alpha_param=True,
            fusion_type=h.FUSION_TYPE_RELATIVE_SCORE if fusion == "relative" else h.FUSION_TYPE_RANKED,
            vector_bytes=None if alpha == 0.0 or vector is None else _vector_bytes(vector)))
        return [Hit.of(c, s) for c, s in self._search("hybrid search", req, "score")[:limit]]

    # -- the query path: one gRPC Search per query, on a channel of this handle ------------------------------
    # Searches build the request message themselves and read the reply's fields directly, without the
    # client library's generic query layer (its request validation and per-property decoding cost more than
    # the server's own query time on a small collection; see `declrag bench retrieval --store weaviate://`).
    def _request(self, limit: int, filt, score: bool = False, distance: bool = False):
        pb = _pb()
        req = pb.search_get_pb2.SearchRequest(
            uses_123_api=True, uses_125_api=True, uses_127_api=True, collection=self.name, limit=limit,
            properties=pb.search_get_pb2.PropertiesRequest(non_ref_properties=list(CHUNK_TEXTS + CHUNK_INTS)),
            metadata=pb.search_get_pb2.MetadataRequest(score=score, distance=distance))
        if self.target.consistency:
            req.consistency_level = getattr(pb.base_pb2, f"CONSISTENCY_LEVEL_{self.target.consistency}")
        if filt is not True:
            req.filters.CopyFrom(filt)
        return req

    def _stub(self):
        g = self._grpc
        if g is None:
            with self._lock:
                if self._grpc is None:
                    import grpc

                    t = self.target
                    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
                    host, _, port = t.nodes[self._node]
                    addr = f"{host}:{port}"
                    channel = (grpc.secure_channel(addr, grpc.ssl_channel_credentials(), options=opts) if t.secure
                               else grpc.insecure_channel(addr, options=opts))
                    key = os.environ.get(t.api_key_env) or None
                    self._grpc_md = (("authorization", f"Bearer {key}"),) if key else ()
                    self._grpc = (channel, _pb().weaviate_pb2_grpc.WeaviateStub(channel))
                g = self._grpc
        return g[1]

    def _search(self, what: str, req, key: str) -> list[tuple[Chunk, float]]:
        """Run one Search request: the chunks of the reply, in order, with their score or distance."""
        if not self._checked:
            self._check_index()
        end = time.monotonic() + self.target.timeout

        def call():  # on the node current at each attempt, within what is left of the request's timeout
            return self._stub().Search(req, metadata=self._grpc_md, timeout=max(end - time.monotonic(), 0.5))

        reply = self._call(what, call)
        out = []
        for r in reply.results:
            f = r.properties.non_ref_props.fields
            page, ps, pe = f.get("page"), f.get("parent_start"), f.get("parent_end")
            out.append((Chunk(
                id=f["chunk_id"].text_value, doc_id=f["doc_id"].text_value, text=f["text"].text_value,
                start=f["start"].int_value, end=f["end"].int_value, position=f["position"].int_value,
                source=f["source"].text_value, title=f["title"].text_value,
                page=page.int_value if page is not None and page.HasField("int_value") else None,
                parent_start=ps.int_value if ps is not None and ps.HasField("int_value") else None,
                parent_end=pe.int_value if pe is not None and pe.HasField("int_value") else None),
                float(getattr(r.metadata, key))))
        return out

    def warm_up(self) -> None:
        """The search channel opened and the URI's index settings checked against the collection's now."""
        self._check_index()
        self._stub()

    def close(self) -> None:
        self._handles = {}
        if self._grpc is not None:
            self._grpc[0].close()
            self._grpc = None
        for x in self._retired + [self._client_]:
            if x is not None:
                try:
                    x.close()
                except Exception:  # a node that is gone: nothing to close there
                    pass
        self._retired, self._client_ = [], None

    def __deepcopy__(self, memo):  # a handle on shared data: copies of a program share their store
        return self


__all__ = ["Target", "WeaviateStore", "_filter_pb", "_translate"]
