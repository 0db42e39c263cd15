"""`WeaviateStore`: the `Store` protocol on a Weaviate collection (the package docstring says what is stored
and what it guarantees)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

from ...config import AnnConfig, Fusion, Metric
from ...errors import DeclragError
from ...text.stopwords import query_terms
from ...types import Chunk, Document, Hit
from ..base import DocRecord, Filter, Store, StoreCheck, StoreMeta, Where, check_upsert
from ..fusion import object_uuid
from . import _labels, _replicas, _schema, _wire
from ._layout import Layout
from .target import DEFAULT_COLLECTION, DOCS_SUFFIX, Target, auth_error, connect, connect_any, http_status

log = logging.getLogger(__name__)
T = TypeVar("T")

BATCH = 1000  # objects per insert request
PAGE = 5000  # objects per read request


class WeaviateStore(Store):
    """The `Store` protocol on a Weaviate collection (see the module docstring)."""

    backend = "weaviate"
    capabilities = frozenset[str]()

    def __init__(self, uri: str, metric: Metric | None = None):
        self.target = Target.parse(uri)
        self.uri = self.target.uri()
        self.name, self.docs_name = self.target.collection, self.target.collection + DOCS_SUFFIX
        if len(self.target.nodes) > 1:
            _wire.one_try_when_failing_over()
        self._client_, self._node = connect_any(self.target)  # the first node of the URI's that answers
        self._gen = 0  # how many times this handle has failed over (see _call)
        self._retired: list[Any] = []  # clients and channels of nodes left behind, closed by close()
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}
        self.metric: Metric = metric or "cosine"
        self._layout: Layout | None = None  # from the store's metadata
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
                    self._client_ = connect(self.target, self._node)
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

    def collection(self, name: str, consistency: str | None = None):
        level = consistency or self.target.consistency
        key = f"{name}@{level}"
        if key not in self._handles:
            from weaviate.classes.config import ConsistencyLevel

            c = self._client.collections.get(name)
            if level:
                c = c.with_consistency_level(getattr(ConsistencyLevel, level))
            self._handles[key] = c
        return self._handles[key]

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one request, retrying transient failures (a node down, a timeout) with backoff. With several
        nodes in the URI, a failure of the node itself (refused, reset, unavailable, timed out) moves the
        handle to the next node, and the request is sent there at once while its timeout lasts."""
        transient, nodes = _wire.transient_errors(), len(self.target.nodes)
        deadline = time.monotonic() + self.target.timeout
        attempt = switched = 0
        while True:
            gen = self._gen
            token = _wire.NO_CLIENT_RETRY.set(True) if nodes > 1 else None
            try:
                return fn()
            except transient as e:
                status = http_status(e)
                if status in (401, 403):
                    raise auth_error(self.target, e) from e
                detail = _wire.error_detail(e)
                if "vector lengths don't match" in detail or "dimension" in detail:  # no retry can help
                    raise DeclragError(f"Weaviate {what} on {self.uri} failed: {detail.splitlines()[0][:300]}",
                                       hint="search with a vector of the store's embedding model") from e
                if nodes > 1 and _wire.node_down(e):
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
                    _wire.NO_CLIENT_RETRY.reset(token)

    # -- the store itself -----------------------------------------------------------------------------
    def read_meta(self) -> StoreMeta | None:
        if not self.call("schema read", lambda: self._client.collections.exists(self.name)):
            return None
        desc = self.call("schema read", lambda: self._client.collections.get(self.name).config.get()).description
        try:
            meta = StoreMeta.model_validate_json(desc or "")
        except ValueError as e:
            raise DeclragError(f"collection {self.name} at {self.target.base} exists and is not a declrag store",
                               hint="name another collection in the store URI") from e
        self.metric = meta.metric
        self._layout = Layout.of(meta)
        return meta

    @property
    def layout(self) -> Layout:
        """The chunks collection's properties: the one BM25 searches and what it holds, whether it keeps languages
        (`Layout`), read from its metadata once."""
        if self._layout is None:
            self._layout = Layout.of(self.read_meta())
        return self._layout

    def create(self, meta: StoreMeta) -> None:
        if self.call("schema read", lambda: self._client.collections.exists(self.name)):
            raise DeclragError(f"collection {self.name} at {self.target.base} exists and is not a declrag store",
                               hint="name another collection in the store URI")
        if not self.call("schema read", lambda: self._client.collections.exists(self.docs_name)):
            self.call("collection create", lambda: self._client.collections.create(
                **_schema.documents_collection(self.target, self.docs_name, self.name)))
        self.call("collection create", lambda: self._client.collections.create(
            **_schema.chunks_collection(self.target, self.name, meta)))
        self.metric, self._created = meta.metric, True
        self._layout = Layout.of(meta)
        self._checked = True

    def index_settings(self) -> dict[str, Any]:
        """The vector index settings of the collection, as the server reports them (`_schema.index_settings`)."""
        cfg = self.call("schema read", lambda: self._client.collections.get(self.name).config.get())
        return _schema.index_settings(cfg)

    def _check_index(self) -> None:
        """Once per handle, before its first search or write: the vector index settings the store URI names
        must be those the collection was built with (they are fixed at creation), else a `DeclragError`
        naming the setting. Settings the URI leaves out are not checked."""
        if self._checked:
            return
        t = self.target
        asked = {k: getattr(t, k) for k in ("index", "ef", "ef_construction", "max_connections", "compression")
                 if getattr(t, k) is not None}
        if asked and self.call("schema read", lambda: self._client.collections.exists(self.name)):
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
            self.call("collection delete", partial(self._client.collections.delete, name))
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
            for name, cfg in sorted(probe.call("schema read", lambda: probe._client.collections.list_all()).items()):
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
            if not self.call("schema read", lambda: self._client.collections.exists(self.name)):
                raise DeclragError(f"no store at {self.uri}", hint="create it first: declrag index PATH --store URI "
                                                                   "(or open_store in Python)")
            self._created = True
        self._check_index()
        objs = [DataObject(properties=_wire.chunk_props(c, self.layout), uuid=object_uuid(c.id), vector=v.tolist())
                for c, v in zip(chunks, vectors)]
        for i in range(0, len(objs), BATCH):
            self.insert(self.name, objs[i:i + BATCH])
        # the chunks of documents indexed before that are not among the new ones go (a document never seen
        # before has none: no delete is sent, which also spares a replicated cluster a filter-delete racing
        # the write it follows)
        recorded = self._recorded(doc_ids)
        known = [d for d in doc_ids if d in recorded]
        if known:
            stale = W.by_property("doc_id").contains_any(known)
            if chunks:
                stale = stale & W.by_id().contains_none([object_uuid(c.id) for c in chunks])
            self._delete_all(self.name, stale)
        recs = _wire.document_objects(documents, chunks, file_stats or {}, self.layout)
        for i in range(0, len(recs), BATCH):
            self.insert(self.docs_name, recs[i:i + BATCH])

    def _recorded(self, doc_ids: Sequence[str]) -> set[str]:
        """Which of these documents have a record (were indexed before)."""
        return {o.properties["doc_id"] for o in self._by_keys(self.docs_name, doc_ids, ["doc_id"])}

    def _by_keys(self, name: str, keys: Sequence[str], props: list[str] | None) -> list:
        """The objects of collection ``name`` whose UUIDs are those of ``keys`` (chunk or document ids), read
        a page at a time."""
        from weaviate.classes.query import Filter as W

        uniq, out = list(dict.fromkeys(keys)), []
        for i in range(0, len(uniq), PAGE):
            part = [object_uuid(k) for k in uniq[i:i + PAGE]]
            res = self.call("read", lambda: self.collection(name).query.fetch_objects(  # called at once, in this pass
                filters=W.by_id().contains_any(part), limit=len(part), return_properties=props))  # noqa: B023
            out.extend(res.objects)
        return out

    def insert(self, name: str, objs: list, consistency: str | None = None) -> None:
        """Write ``objs``; ``consistency`` overrides the URI's for this write (``ALL``: every replica has them)."""
        self._written_at = time.monotonic()
        res = self.call("insert", lambda: self.collection(name, consistency).data.insert_many(objs))
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
            res = self.call("delete", lambda: self.collection(name, consistency).data.delete_many(where=where))
            n += res.successful
            if res.failed:
                raise DeclragError(f"Weaviate could not delete {res.failed} objects in {self.uri}",
                                   hint="check the server's log; re-running the command redoes what failed")
            if res.matches == 0 or res.successful == 0:
                return n

    def relabel(self, readers: Mapping[str, Sequence[str]]) -> int:
        return _labels.relabel(self, readers, PAGE)

    def delete(self, doc_ids: Sequence[str]) -> int:
        from weaviate.classes.query import Filter as W

        if not doc_ids:
            return 0
        n = self._delete_all(self.name, W.by_property("doc_id").contains_any(list(doc_ids)))
        self._delete_all(self.docs_name, W.by_id().contains_any([object_uuid(d) for d in doc_ids]))  # records last
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
        """Every node's copy checked, and what a node lost written again (see `replicas`)."""
        return _replicas.verify(self, type(self))

    # -- reads ----------------------------------------------------------------------------------------
    def count(self, where: Where = None) -> int:
        _labels.check_filter(self, where := Filter.of(where))
        filt = _wire.translate(where)
        if filt is False:
            return 0
        res = self.call("count", lambda: self.collection(self.name).aggregate.over_all(
            total_count=True, filters=None if filt is True else filt))
        return int(res.total_count or 0)

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        props = _wire.chunk_properties(self.layout)
        found = {c.id: c for c in map(_wire.chunk_of, self._by_keys(self.name, ids, props))}
        return [found[i] for i in ids if i in found]

    def documents(self) -> dict[str, DocRecord]:
        if not self.call("schema read", lambda: self._client.collections.exists(self.docs_name)):
            return {}
        props = ["doc_id", "source", "title", "page", "hash", "chunks", "mtime_ns", "size",
                 *(["readers"] if self.layout.readers else [])]

        def read_all():
            docs = self.collection(self.docs_name)
            return [o.properties for o in docs.iterator(return_properties=props, cache_size=PAGE)]

        return {p["doc_id"]: _wire.doc_record(p) for p in self.call("read", read_all)}

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        return {o.properties["doc_id"]: o.properties.get("text") or ""
                for o in self._by_keys(self.docs_name, doc_ids, ["doc_id", "text"])}

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]:
        req = self._request(where, limit, score=True)
        if req is None or not query_terms(query):
            return []
        req.bm25_search.CopyFrom(_wire.bm25(query, self.layout))
        return [Hit.of(c, s, keyword=s) for c, s in self._search("keyword search", req, "score") if s > 0]

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:  # ann: Weaviate's index is set in the store URI
        req = self._request(where, limit, distance=True)
        if req is None:
            return []
        req.near_vector.CopyFrom(_wire.protos().base_search_pb2.NearVector(vector_bytes=_wire.vector_bytes(vector)))
        return [Hit.of(c, 1.0 - d, vector=1.0 - d) for c, d in self._search("vector search", req, "distance")]

    def hybrid_search(self, query: str, vector: np.ndarray | None, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        req = self._request(where, max(limit, candidates), score=True)
        if req is None:
            return []
        req.hybrid_search.CopyFrom(_wire.hybrid(query, self.layout, vector, alpha, fusion == "relative"))
        return [Hit.of(c, s) for c, s in self._search("hybrid search", req, "score")[:limit]]

    # -- the query path: one gRPC Search per query, on a channel of this handle ------------------------------
    # Searches build the request message themselves and read the reply's fields directly, without the
    # client library's generic query layer (its request validation and per-property decoding cost more than
    # the server's own query time on a small collection; see `declrag bench retrieval --store weaviate://`).
    def _request(self, where: Where, limit: int, score: bool = False, distance: bool = False):
        """A Search request for the chunks that pass ``where``; None when the filter matches nothing."""
        _labels.check_filter(self, where := Filter.of(where))
        filt = _wire.filter_pb(where)
        return None if filt is False else _wire.search_request(
            self.name, self.target.consistency, limit, filt, _wire.chunk_properties(self.layout), score, distance)

    def search_stub(self):
        """The gRPC stub searches go through: on a channel of this handle to its current node, opened on first use."""
        g = self._grpc
        if g is None:
            with self._lock:
                if self._grpc is None:
                    channel, stub, self._grpc_md = _wire.search_channel(self.target, self._node)
                    self._grpc = (channel, stub)
                g = self._grpc
        return g[1]

    def _search(self, what: str, req, key: str) -> list[tuple[Chunk, float]]:
        """Run one Search request: the chunks of the reply, in order, with their score or distance."""
        self._check_index()
        end = time.monotonic() + self.target.timeout

        def call():  # on the node current at each attempt, within what is left of the request's timeout
            return self.search_stub().Search(req, metadata=self._grpc_md, timeout=max(end - time.monotonic(), 0.5))

        return _wire.reply_chunks(self.call(what, call), key)

    def warm_up(self) -> None:
        """The search channel opened and the URI's index settings checked against the collection's now."""
        self._check_index()
        self.search_stub()

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


__all__ = ["WeaviateStore"]
