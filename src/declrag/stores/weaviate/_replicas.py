"""Every node's copy of a replicated Weaviate collection checked against what was written, and what a crash lost
written again (`WeaviateStore.verify`; the measurements behind it: docs/benchmarks/weaviate.md).

Why: a node killed within seconds of a write can come back with every object but without some of their vectors
(Weaviate 1.33's vector index keeps its own log, and nothing reconciles the two on start, nor does async
replication); it then answers hybrid searches from the keyword leg alone, with no error. A node back from a crash
can also lack objects written while it was down, until async replication brings them.

How: each node that answers is asked, on a handle of its own at consistency ONE, for its chunk count and, a page of
ids at a time, which of them its vector index finds. Objects a node lacks are left to async replication for up to
`REPLICATION_WAIT_S`, then written again through the store's handle; objects whose vectors a node lost are written
again at once (`_write_again`). A node that does not answer is reported, not failed, and checked on the next call.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np

from ...errors import DeclragError
from ..base import DocRecord, StoreCheck
from .target import Target

T = TypeVar("T")


class Handle(Protocol):
    """What checking and repairing copies needs of a store handle (`store.WeaviateStore` is one; the store
    imports this module, so it is described here rather than imported)."""

    target: Target
    name: str
    uri: str

    def call(self, what: str, fn: Callable[[], T]) -> T: ...
    def collection(self, name: str, consistency: str | None = None) -> Any: ...
    def insert(self, name: str, objs: list, consistency: str | None = None) -> None: ...
    def documents(self) -> dict[str, DocRecord]: ...
    def close(self) -> None: ...


log = logging.getLogger(__name__)

PAGE = 1000  # object ids per vector-coverage request
REPLICATION_WAIT_S = 180.0  # how long objects a node lacks are left to async replication before they are written
REPLICATION_POLL_S = 5.0  # how often a copy waiting for async replication is checked again


@dataclasses.dataclass
class _Copy:
    """One node's copy: the object UUIDs it holds, those its vector index finds, and its document records."""

    held: set[str]
    indexed: set[str]
    records: dict[str, DocRecord]


def verify(store: Handle, open_node: Callable[[str], Handle], rounds: int = 6,
           replication_wait_s: float = REPLICATION_WAIT_S) -> StoreCheck:
    left_to_replication = time.monotonic() + replication_wait_s
    repaired = 0
    writes = 0
    missed: set[str] = set()  # every object a node was seen to lack
    written: set[str] = set()  # those of them written again
    told = False
    while True:
        copies = _copies(store, open_node)
        up = [c for c in copies.values() if c is not None]
        lacking: set[str] = set()  # object UUIDs some node does not hold
        no_vector: set[str] = set()  # object UUIDs some node holds without their vector
        every = set().union(*(c.held for c in up))
        for c in up:
            lacking |= every - c.held
            no_vector |= c.held - c.indexed
        # document records a node lacks (written while it was down): replication brings those too
        records = {k: v for c in up for k, v in c.records.items()}
        stale = any(c.records.keys() != records.keys() for c in up)
        missed |= lacking
        waiting = time.monotonic() < left_to_replication
        if not (lacking or no_vector or (stale and waiting)) or writes == rounds:
            break
        # objects a node lacks are async replication's to bring for a while: it writes them to that node alone,
        # where writing them again through the handle reaches every replica (and moves their BM25 scores). Lost
        # vectors are written again at once: nothing else restores them
        if no_vector - lacking or (lacking and not waiting):
            # at consistency ALL when every node answered (each replica has them when the write returns); then
            # checked again, after a pause for a node still applying writes or replicating
            again = set() if waiting else lacking
            repaired += _write_again(store, open_node, copies, again, no_vector - lacking,
                                     "ALL" if len(up) == len(copies) else None)
            written |= again
            writes += 1
            time.sleep(min(2.0 * writes, 8.0))
        else:
            if not told:
                log.warning("Weaviate %s: %d chunks (or document records) missing on a node; waiting up to %.0f s "
                            "for async replication to bring them", store.uri, len(lacking), replication_wait_s)
                told = True
            time.sleep(REPLICATION_POLL_S)
    out = _report(store.uri, copies, records or store.documents(), every)
    out.repaired, out.replicated = repaired, len(missed - written - lacking)
    return out


def _report(uri: str, copies: dict[str, _Copy | None], records: dict[str, DocRecord], every: set[str]
            ) -> StoreCheck:
    expected = sum(r.chunks for r in records.values())
    out = StoreCheck(expected=expected)
    if len(every) != expected:
        out.problems.append(f"{uri}: the nodes hold {len(every)} distinct chunks; the document records "
                            f"count {expected}")
    for node, c in copies.items():
        out.copies[node] = None if c is None else len(c.held)
        if c is None:
            continue
        if len(c.held) != expected or c.held - c.indexed:
            out.problems.append(f"node {node} holds {len(c.held)} of {expected} chunks, "
                                f"{len(c.held - c.indexed)} of them without their vector")
        if c.records.keys() != records.keys():
            out.problems.append(f"node {node} holds {len(c.records)} of {len(records)} document records")
    return out


def _copies(store: Handle, open_node: Callable[[str], Handle]) -> dict[str, _Copy | None]:
    """Each node -> its copy; None: the node did not answer."""
    t = store.target
    out: dict[str, _Copy | None] = {}
    for i, (h, p, _) in enumerate(t.nodes or ((t.host, t.port, t.grpc),)):
        try:
            node = open_node(_node_uri(t, f"{h}:{p}"))
        except DeclragError:
            out[f"{h}:{p}"] = None
            continue
        try:
            out[f"{h}:{p}"] = _copy(node)
        except DeclragError as e:
            log.warning("Weaviate node %s could not be checked: %s", t.node(i), e.message)
            out[f"{h}:{p}"] = None
        finally:
            node.close()
    return out


def _node_uri(t: Target, node: str) -> str:
    """A URI for one node (``host:port``) of ``t`` alone, at consistency ONE: a read there is served by its copy."""
    h, p, g = next(n for n in (t.nodes or ((t.host, t.port, t.grpc),)) if f"{n[0]}:{n[1]}" == node)
    return dataclasses.replace(t, host=h, port=p, grpc=g, nodes=((h, p, g),), consistency="ONE", retries=0).uri()


def _copy(node: Handle) -> _Copy:
    from weaviate.classes.query import Filter as W

    coll = node.collection(node.name)
    held = node.call("read", lambda: {str(o.uuid) for o in coll.iterator(return_properties=[], cache_size=5000)})
    indexed: set[str] = set()
    ids = sorted(held)
    probe: list[float] | None = None
    for i in range(0, len(ids), PAGE):
        part = ids[i:i + PAGE]
        if probe is None:  # any vector of the collection's dimension: every id of the page passes the filter
            first = node.call("read", lambda: coll.query.fetch_object_by_id(part[0], include_vector=True))  # noqa: B023
            v = (first.vector or {}).get("default") if first is not None else None
            if v is None:
                continue
            probe = list(np.ones(len(v), np.float32) / np.sqrt(len(v)))
        res = node.call("vector check", lambda: coll.query.near_vector(  # noqa: B023
            probe, filters=W.by_id().contains_any(part), limit=len(part), return_properties=[]))  # noqa: B023
        indexed |= {str(o.uuid) for o in res.objects}
    return _Copy(held, indexed, node.documents())


def _write_again(store: Handle, open_node: Callable[[str], Handle], copies: dict[str, _Copy | None],
                 lacking: set[str], no_vector: set[str], consistency: str | None) -> int:
    """Write again, through the store's handle, the objects some node lacks or holds without their vector, each
    read with its vector from a node whose vector index has it, else from any node whose object still carries it
    (a node may hold an object without its vector in its object store too, measured on 1.33.18, and a read through
    the handle may be served by that node). An object whose vector a node lost is written twice, its vector nudged
    by one float step, then as it was: Weaviate indexes a vector again only when it changed (a delete and an insert
    would drop the chunk from searches running meanwhile). Either way Weaviate 1.33 moves BM25 scores slightly for
    objects written again, until it compacts."""
    from weaviate.classes.data import DataObject
    from weaviate.classes.query import Filter as W

    todo, n = lacking | no_vector, 0
    # every copy's vector index can lack a chunk whose object still carries its vector (a batch whose coordinator died)
    for where in ("indexed", "held"):
        for name, c in copies.items():
            if c is None or not (ids := sorted(todo & getattr(c, where))):
                continue
            try:
                src = open_node(_node_uri(store.target, name))
            except DeclragError:  # gone since it was checked: the next node, or the next round
                continue
            try:
                coll = src.collection(src.name)
                for i in range(0, len(ids), PAGE):
                    part = ids[i:i + PAGE]
                    res = src.call("read", lambda: coll.query.fetch_objects(  # noqa: B023
                        filters=W.by_id().contains_any(part), limit=len(part), include_vector=True))  # noqa: B023
                    found = [(o, v) for o in res.objects if (v := o.vector.get("default")) is not None]
                    nudge = [DataObject(uuid=o.uuid, properties=o.properties, vector=_nudged(v))
                             for o, v in found if str(o.uuid) in no_vector]
                    if nudge:
                        store.insert(store.name, nudge, consistency)
                    if found:
                        store.insert(store.name, [DataObject(uuid=o.uuid, properties=o.properties, vector=v)
                                                   for o, v in found], consistency)
                    n += len(found)
                    todo -= {str(o.uuid) for o, _ in found}
            finally:
                src.close()
    if n:
        log.warning("Weaviate %s: %d chunks written again (%d missing on a node, %d without their vector on one)",
                    store.uri, n, len(lacking), len(no_vector))
    return n


def _nudged(v: list[float]) -> list[float]:
    """``v`` with its first component one float32 step away (a vector Weaviate sees as changed)."""
    out = np.asarray(v, np.float32).copy()
    out[0] = np.nextafter(out[0], np.float32(np.inf))
    return out.tolist()
