"""What declrag sends to Weaviate and reads back, apart from the store's logic: a new collection's vector
index, chunk objects as properties, metadata filters (the client library's objects for writes and counts, protobuf
for the search requests declrag sends itself, one and/or folding for both), and which failures are transient."""

from __future__ import annotations

import contextvars
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from ...types import Chunk, read_readers, stored_readers
from ..base import LIST_FIELDS, Cond, DocRecord, Filter, Node
from ..fusion import object_uuid
from ._layout import Layout
from .target import Target, Unreachable, causes, grpc_status

CHUNK_INTS = ("start", "end", "position", "page", "parent_start", "parent_end")
CHUNK_TEXTS = ("chunk_id", "doc_id", "text", "source", "title", "section", "header")
PROP = {"id": "chunk_id"}  # filter field -> property ("id" is reserved in Weaviate)


def index_config(t: Target, distance):
    """The vector index a new collection gets from the store URI (flat unless it says hnsw)."""
    from weaviate.classes.config import Configure

    q = Configure.VectorIndex.Quantizer
    c = t.compression or "none"
    quantizer: Any = q.pq() if c == "pq" else q.bq() if c == "bq" else q.sq() if c == "sq" else None
    if (t.index or "flat") == "flat":
        return Configure.VectorIndex.flat(distance_metric=distance, quantizer=quantizer)
    return Configure.VectorIndex.hnsw(distance_metric=distance, ef=t.ef, ef_construction=t.ef_construction,
                                      max_connections=t.max_connections, quantizer=quantizer)


def chunk_properties(layout: Layout) -> list[str]:
    """The properties a search or a read asks a chunks collection of this `Layout` for (a collection made before a
    property cannot be asked for it)."""
    return [*CHUNK_TEXTS, *(("language",) if layout.language else ()), *(("readers",) if layout.readers else ()),
            *CHUNK_INTS]


def chunk_props(c: Chunk, layout: Layout) -> dict[str, Any]:
    """A chunk's properties in the collection's `Layout`: where BM25 reads ``searched``, also that (from
    `Chunk.searched`), and its language and readers where the collection keeps them."""
    return {"chunk_id": c.id, "doc_id": c.doc_id, "text": c.text, "start": c.start, "end": c.end,
            "position": c.position, "source": c.source, "title": c.title, "page": c.page,
            "parent_start": c.parent_start, "parent_end": c.parent_end, "section": c.section, "header": c.header,
            **({"language": c.language} if layout.language else {}),
            **({"readers": stored_readers(c.readers)} if layout.readers else {}),
            **({"searched": layout.value(c.searched)} if layout.keyword == "searched" else {})}


def chunk_of(o) -> Chunk:
    p = o.properties
    return Chunk(id=p["chunk_id"], doc_id=p["doc_id"], text=p.get("text") or "", start=int(p["start"]),
                 end=int(p["end"]), position=int(p["position"]), source=p.get("source") or "",
                 title=p.get("title") or "", page=_int(p.get("page")), parent_start=_int(p.get("parent_start")),
                 parent_end=_int(p.get("parent_end")), section=p.get("section") or "", header=p.get("header") or "",
                 language=p.get("language") or "", readers=read_readers(p.get("readers")))


def _text(fields, name: str) -> str:
    """A text property of a search reply ('' when the object lacks it: a collection made before it)."""
    v = fields.get(name)
    return v.text_value if v is not None else ""


def _int(v) -> int | None:
    return None if v is None else int(v)


@cache
def transient_errors() -> tuple[type[BaseException], ...]:
    from grpc import RpcError
    from httpx import TransportError
    from weaviate.exceptions import (
        UnexpectedStatusCodeError,
        WeaviateBatchError,
        WeaviateConnectionError,
        WeaviateDeleteManyError,
        WeaviateGRPCUnavailableError,
        WeaviateQueryError,
        WeaviateRetryError,
        WeaviateTimeoutError,
    )

    return (WeaviateConnectionError, WeaviateGRPCUnavailableError, WeaviateQueryError, WeaviateTimeoutError,
            UnexpectedStatusCodeError, RpcError, TransportError, Unreachable, WeaviateRetryError, WeaviateBatchError,
            WeaviateDeleteManyError)


#: set while a handle with several nodes runs a request: the client library then sends each gRPC call once
#: instead of retrying an unavailable node for up to a minute (1, 2, 4 ... 32 s), so that the handle can go
#: on with another node at once; everywhere else the library behaves as it always does
NO_CLIENT_RETRY = contextvars.ContextVar("declrag_no_client_retry", default=False)


@cache
def one_try_when_failing_over() -> None:
    """Teach the client library's gRPC retry helper to step aside while `NO_CLIENT_RETRY` is set (once per
    process; the helper is looked up by name at each call)."""
    try:
        import weaviate.connect.v4 as v4
    except ImportError:  # another layout of the library: its own retries stay, failover is only slower
        return
    base = getattr(v4, "_Retry", None)
    if base is None:
        return

    class _Retry(base):  # type: ignore[misc, valid-type]
        def with_exponential_backoff(self, count, error, f, *args, **kwargs):
            if NO_CLIENT_RETRY.get():
                return f(*args, **kwargs)
            return super().with_exponential_backoff(count, error, f, *args, **kwargs)

    v4._Retry = _Retry  # type: ignore[misc]


_DOWN_TYPES = {"Unreachable", "WeaviateConnectionError", "WeaviateGRPCUnavailableError", "WeaviateTimeoutError",
               "ConnectError", "ConnectTimeout", "ReadTimeout", "ReadError", "RemoteProtocolError", "WriteError"}
_DOWN_TEXT = ("StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED", "onnection refused", "onnection reset",
              "failed to connect", "Socket closed", "Deadline Exceeded")


def node_down(e: BaseException | None) -> bool:
    """Whether a failure says that the node itself did not answer (refused, reset, unavailable, timed out),
    looking through the exceptions it wraps; not an error the node answered with."""
    return any(type(x).__name__ in _DOWN_TYPES or any(s in str(x) for s in _DOWN_TEXT)
               or grpc_status(x) in ("UNAVAILABLE", "DEADLINE_EXCEEDED") for x in causes(e))


def error_detail(e: BaseException) -> str:
    """An error's message; a gRPC error's details (its str() is a multi-line dump)."""
    details = getattr(e, "details", None)
    if callable(details):
        try:
            return str(details() or e)
        except Exception:  # not a call error after all
            pass
    return str(e) or type(e).__name__


def protos():
    """The Weaviate gRPC protocol's messages (the ones the client library ships for this protobuf runtime)."""
    import weaviate.proto.v1 as pb

    return pb


def bm25(query: str, layout: Layout):
    """A BM25 search of the `Layout` for ``query``, in the form its chunks are indexed in."""
    return protos().base_search_pb2.BM25(query=layout.query(query), properties=[layout.keyword])


def hybrid(query: str, layout: Layout, vector, alpha: float, relative: bool):
    """A hybrid search: BM25 of the `Layout` for ``query`` (as `bm25` sends it) and ``vector``, fused relatively
    (``relative``) or by rank. At alpha 0 (keyword only) Weaviate needs no vector. alpha goes in both fields: servers
    before 1.36.6 read ``alpha``, later ones ``alpha_param`` (which can say 0 explicitly)."""
    h = protos().base_search_pb2.Hybrid
    return h(query=layout.query(query), properties=[layout.keyword], alpha=alpha, alpha_param=alpha,
             use_alpha_param=True,
             fusion_type=h.FUSION_TYPE_RELATIVE_SCORE if relative else h.FUSION_TYPE_RANKED,
             vector_bytes=None if alpha == 0.0 or vector is None else vector_bytes(vector))


def vector_bytes(vector) -> bytes:
    v = np.ascontiguousarray(np.asarray(vector, dtype="<f4").reshape(-1))
    return v.tobytes()


_OPS = {"$eq": "EQUAL", "$ne": "NOT_EQUAL", "$gt": "GREATER_THAN", "$gte": "GREATER_THAN_EQUAL",
        "$lt": "LESS_THAN", "$lte": "LESS_THAN_EQUAL", "$in": "CONTAINS_ANY", "$nin": "CONTAINS_NONE"}


def _junction(op: str, parts: list, join: Callable[[str, list], Any]):
    """``and``/``or`` over translated parts, where True (no filter) and False (matches nothing) fold away as
    `Filter.matches` means them; ``join(op, parts)`` builds the node of two or more parts."""
    if op == "and":
        if any(p is False for p in parts):
            return False
        parts = [p for p in parts if p is not True]
        return True if not parts else (parts[0] if len(parts) == 1 else join("and", parts))
    if any(p is True for p in parts):
        return True
    parts = [p for p in parts if p is not False]
    return False if not parts else (parts[0] if len(parts) == 1 else join("or", parts))


def listed(node: Cond) -> tuple[str, Any]:
    """A condition's operator and value as sent: on a list field (`LIST_FIELDS`), ``$eq``/``$ne`` of one value is
    ``$in``/``$nin`` of it (Weaviate's CONTAINS_ANY / CONTAINS_NONE on an array)."""
    if node.field in LIST_FIELDS and node.op in ("$eq", "$ne"):
        return ("$in" if node.op == "$eq" else "$nin"), [node.value]
    return node.op, node.value


def filter_pb(where: Filter | None):
    """``where`` as the gRPC protocol's filter message, with `Filter.matches`'s meaning (the same tree as
    `translate`, which the client library turns into the same message; tested equal); True (no filter) or
    False (matches nothing) where the filter is constant."""
    if where is None:
        return True
    F = protos().base_pb2.Filters

    def op(name: str):
        return getattr(F, f"OPERATOR_{name}")

    def one(node: Node):
        if not isinstance(node, Cond):
            return _junction(node.op, [one(p) for p in node.parts],
                             lambda j, parts: F(operator=op(j.upper()), filters=parts))
        prop, (o, v) = PROP.get(node.field, node.field), listed(node)
        if o in ("$in", "$nin") and not v:
            return o == "$nin"
        target = protos().base_pb2.FilterTarget(property=prop)
        if isinstance(v, list):
            arr = ({"value_int_array": protos().base_pb2.IntArray(values=v)} if isinstance(v[0], int)
                   else {"value_text_array": protos().base_pb2.TextArray(values=v)})
            cond = F(operator=op(_OPS[o]), target=target, **arr)
        elif isinstance(v, int):
            cond = F(operator=op(_OPS[o]), target=target, value_int=v)
        else:
            cond = F(operator=op(_OPS[o]), target=target, value_text=v)
        if node.field == "page" and node.op in ("$ne", "$nin"):  # a chunk without a page matches these
            null = F(operator=op("IS_NULL"), target=protos().base_pb2.FilterTarget(property=prop), value_boolean=True)
            return F(operator=op("OR"), filters=[null, cond])
        return cond

    return one(where.tree)


def translate(where: Filter | None):
    """``where`` as a Weaviate filter with `Filter.matches`'s meaning; True (no filter) or False (matches
    nothing) where the filter is constant, as an empty ``$in``/``$nin`` makes it."""
    from weaviate.classes.query import Filter as W

    def one(node: Node):
        if not isinstance(node, Cond):
            return _junction(node.op, [one(p) for p in node.parts],
                             lambda j, parts: W.all_of(parts) if j == "and" else W.any_of(parts))
        prop, (op, v) = PROP.get(node.field, node.field), listed(node)
        f = W.by_property(prop)
        nullable = node.field == "page"
        if op in ("$in", "$nin") and not v:
            return op == "$nin"
        cond = {"$eq": lambda: f.equal(v), "$ne": lambda: f.not_equal(v), "$gt": lambda: f.greater_than(v),
                "$gte": lambda: f.greater_or_equal(v), "$lt": lambda: f.less_than(v),
                "$lte": lambda: f.less_or_equal(v), "$in": lambda: f.contains_any(v),
                "$nin": lambda: f.contains_none(v)}[op]()
        if nullable and op in ("$ne", "$nin"):  # a chunk without a page matches these
            return W.any_of([W.by_property(prop).is_none(True), cond])
        return cond

    return True if where is None else one(where.tree)


def search_request(collection: str, consistency: str | None, limit: int, filt, props: Sequence[str],
                   score: bool = False, distance: bool = False):
    """A gRPC ``SearchRequest`` for the chunks of ``collection``: their properties ``props`` (`chunk_properties`), the
    score or distance, the consistency level and the filter (``filt``: a `filter_pb` message, or True for none)."""
    pb = protos()
    req = pb.search_get_pb2.SearchRequest(
        uses_123_api=True, uses_125_api=True, uses_127_api=True, collection=collection, limit=limit,
        properties=pb.search_get_pb2.PropertiesRequest(non_ref_properties=list(props)),
        metadata=pb.search_get_pb2.MetadataRequest(score=score, distance=distance))
    if consistency:
        req.consistency_level = getattr(pb.base_pb2, f"CONSISTENCY_LEVEL_{consistency}")
    if filt is not True:
        req.filters.CopyFrom(filt)
    return req


def reply_chunks(reply, key: str) -> list[tuple[Chunk, float]]:
    """The chunks of a ``SearchReply``, in order, each with its ``key`` (``score`` or ``distance``)."""
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
            parent_end=pe.int_value if pe is not None and pe.HasField("int_value") else None,
            section=_text(f, "section"), header=_text(f, "header"), language=_text(f, "language"),
            readers=read_readers(r_.list_value.text_values.values if (r_ := f.get("readers")) is not None else None)),
            float(getattr(r.metadata, key))))
    return out


def search_channel(t: Target, node: int = 0):
    """A gRPC channel to ``t``'s node ``node`` for searches: (channel, Weaviate stub, call metadata with the API
    key when the URI's ``api_key_env`` names a set variable)."""
    import grpc  # loaded with the first search, as the protocol's messages are (`protos`)

    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    host, _, port = t.nodes[node]
    addr = f"{host}:{port}"
    channel = (grpc.secure_channel(addr, grpc.ssl_channel_credentials(), options=opts) if t.secure
               else grpc.insecure_channel(addr, options=opts))
    key = os.environ.get(t.api_key_env) or None
    metadata = (("authorization", f"Bearer {key}"),) if key else ()
    return channel, protos().weaviate_pb2_grpc.WeaviateStub(channel), metadata


def document_objects(documents, chunks, stats: Mapping[str, tuple[int, int]], layout: Layout) -> list:
    """The document records of an upsert (each with its text, chunk count, file stats and, where the store keeps them,
    readers) as objects to write."""
    from weaviate.classes.data import DataObject  # with the client library, loaded by the store's first write

    counts = Counter(c.doc_id for c in chunks)
    return [DataObject(uuid=object_uuid(d.id), properties={
        "doc_id": d.id, "source": d.source, "title": d.title, "page": d.page, "hash": d.hash, "text": d.text,
        "chunks": counts.get(d.id, 0), "mtime_ns": stats.get(d.source, (0, -1))[0],
        "size": stats.get(d.source, (0, -1))[1], **({"readers": stored_readers(d.readers)} if layout.readers else {})})
        for d in documents]


def doc_record(p: Mapping[str, Any]) -> DocRecord:
    """A document record read back (its properties) as the store protocol's `DocRecord`."""
    return DocRecord(id=p["doc_id"], source=p.get("source") or "", title=p.get("title") or "", page=p.get("page"),
                     hash=p["hash"], chunks=int(p.get("chunks") or 0), mtime_ns=int(p.get("mtime_ns") or 0),
                     size=int(p.get("size") or -1), readers=read_readers(p.get("readers")))
