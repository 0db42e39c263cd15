"""Every node's copy of a replicated Weaviate collection checked against what was written, and what a crash lost
written again (`WeaviateStore.verify`).

Why: a node killed (SIGKILL, power loss) within seconds of a write can come back with every object but without
some of their vectors. Weaviate 1.33's vector index keeps its own log, flushed apart from the objects', and
nothing reconciles the two on start, nor does async replication (it compares objects, which are equal). That
node then answers hybrid searches from the keyword leg alone, with no error, for as long as it runs; writing
the same object again does not help (an unchanged vector is not indexed again). A node back from a crash
can also lack objects written while it was down, until async replication brings them.

How: each node that answers is asked, on a handle of its own at consistency ONE (a search is served by the
node's own replica), for its chunk count and, a page of object ids at a time, which of those ids its vector
index finds (a vector search restricted to the page's ids). Objects a node lacks are written again through
the store's own handle (an unchanged object written again reaches every replica); objects whose vectors a
node lost are written with the vector nudged, then as it was (see `_write_again`), read back with their vector
from the objects store first. A node that does not answer is reported, not failed, and checked on the next
call.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DeclragError
from .base import StoreCheck

# a WeaviateStore (not imported: it imports this module); open_node opens a handle on one node's URI
WeaviateStore = Any

log = logging.getLogger(__name__)

PAGE = 1000  # object ids per vector-coverage request


def verify(store: WeaviateStore, open_node: Callable[[str], WeaviateStore], rounds: int = 6) -> StoreCheck:
    expected = sum(r.chunks for r in store.documents().values())
    out = StoreCheck(expected=expected)
    for attempt in range(rounds):
        copies = _copies(store, open_node)
        lacking: set[str] = set()  # object UUIDs some node does not hold
        no_vector: set[str] = set()  # object UUIDs some node holds without their vector
        every = set().union(*(c[0] for c in copies.values() if c is not None))
        for copy in copies.values():
            if copy is not None:
                held, indexed = copy
                lacking |= every - held
                no_vector |= held - indexed
        if not (lacking or no_vector) or attempt == rounds - 1:
            break
        # written again at consistency ALL when every node answered (each replica has them when the write
        # returns); then checked again, after a pause for a node still applying writes or replicating
        everyone = all(c is not None for c in copies.values())
        out.repaired += _write_again(store, lacking, no_vector - lacking, "ALL" if everyone else None)
        time.sleep(min(2.0 * (attempt + 1), 8.0))
    if len(every) != expected:
        out.problems.append(f"{store.uri}: the nodes hold {len(every)} distinct chunks; the document records "
                            f"count {expected}")
    for node, copy in copies.items():
        out.copies[node] = None if copy is None else len(copy[0])
        if copy is None:
            continue
        held, indexed = copy
        if len(held) != expected or held - indexed:
            out.problems.append(f"node {node} holds {len(held)} of {expected} chunks, "
                                f"{len(held - indexed)} of them without their vector")
    return out


def _copies(store: WeaviateStore, open_node: Callable[[str], WeaviateStore]
            ) -> dict[str, tuple[set[str], set[str]] | None]:
    """Each node -> (the object UUIDs it holds, those its vector index finds); None: the node did not answer."""
    t = store.target
    out: dict[str, tuple[set[str], set[str]] | None] = {}
    for i, (h, p, g) in enumerate(t.nodes or ((t.host, t.port, t.grpc),)):
        one = dataclasses.replace(t, host=h, port=p, grpc=g, nodes=((h, p, g),), consistency="ONE", retries=0)
        try:
            node = open_node(one.uri())
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


def _copy(node: WeaviateStore) -> tuple[set[str], set[str]]:
    from weaviate.classes.query import Filter as W

    coll = node._coll(node.name)
    held = node._call("read", lambda: {str(o.uuid) for o in coll.iterator(return_properties=[], cache_size=5000)})
    indexed: set[str] = set()
    ids = sorted(held)
    probe: list[float] | None = None
    for i in range(0, len(ids), PAGE):
        part = ids[i:i + PAGE]
        if probe is None:  # any vector of the collection's dimension: every id of the page passes the filter
            first = node._call("read", lambda: coll.query.fetch_object_by_id(part[0], include_vector=True))  # noqa: B023
            v = (first.vector or {}).get("default") if first is not None else None
            if v is None:
                continue
            probe = list(np.ones(len(v), np.float32) / np.sqrt(len(v)))
        res = node._call("vector check", lambda: coll.query.near_vector(  # noqa: B023
            probe, filters=W.by_id().contains_any(part), limit=len(part), return_properties=[]))  # noqa: B023
        indexed |= {str(o.uuid) for o in res.objects}
    return held, indexed


def _write_again(store: WeaviateStore, lacking: set[str], no_vector: set[str], consistency: str | None) -> int:
    """Write again, through the store's handle, the objects some node lacks or holds without their vector.

    An object a node lacks is written as it is. An object whose vector a node lost is written twice: with its
    vector nudged by one float step, then as it was (Weaviate indexes a vector again only when it changed).
    Deleting and inserting would restore the vector too, but searches running meanwhile would miss the chunk.
    Either way Weaviate 1.33 moves BM25 scores slightly for objects written again, until it compacts."""
    from weaviate.classes.data import DataObject
    from weaviate.classes.query import Filter as W

    coll, n = store._coll(store.name), 0
    for ids, nudge in ((sorted(lacking), False), (sorted(no_vector), True)):
        for i in range(0, len(ids), PAGE):
            part = ids[i:i + PAGE]
            res = store._call("read", lambda: coll.query.fetch_objects(  # noqa: B023
                filters=W.by_id().contains_any(part), limit=len(part), include_vector=True))  # noqa: B023
            found = [(o, o.vector.get("default")) for o in res.objects if o.vector.get("default") is not None]
            if nudge and found:
                store._insert(store.name, [DataObject(uuid=o.uuid, properties=o.properties, vector=_nudged(v))
                                           for o, v in found], consistency)
            if found:
                store._insert(store.name, [DataObject(uuid=o.uuid, properties=o.properties, vector=v)
                                           for o, v in found], consistency)
            n += len(found)
    if n:
        log.warning("Weaviate %s: %d chunks written again (%d missing on a node, %d without their vector on one)",
                    store.uri, n, len(lacking), len(no_vector))
    return n


def _nudged(v: list[float]) -> list[float]:
    """``v`` with its first component one float32 step away (a vector Weaviate sees as changed)."""
    out = np.asarray(v, np.float32).copy()
    out[0] = np.nextafter(out[0], np.float32(np.inf))
    return out.tolist()
