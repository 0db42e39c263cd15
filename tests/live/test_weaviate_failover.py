"""Client-side failover: a store URI naming several Weaviate nodes, and a handle that goes on with another node
when the one it talks to is lost (a real three-node cluster, its nodes SIGKILLed by scripts/weaviate.sh)."""

from __future__ import annotations

import logging
import subprocess
import time

import numpy as np
import pytest

from declrag.config import IngestConfig
from declrag.errors import DeclragError
from declrag.stores import child_uri, open_store
from declrag.stores.weaviate.target import Target
from declrag.types import Chunk, Document

from tests.conftest import WEAVIATE_SCRIPT, start_weaviate, stop_weaviate


# -- the URI, without a server -----------------------------------------------------------------------------
def test_a_uri_names_several_nodes_and_their_grpc_ports():
    t = Target.parse("weaviate://10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080/Docs?grpc=50051&replicas=3")
    assert t.nodes == (("10.0.0.1", 8080, 50051), ("10.0.0.2", 8080, 50051), ("10.0.0.3", 8080, 50051))
    assert (t.host, t.port, t.grpc) == ("10.0.0.1", 8080, 50051)
    assert Target.parse(t.uri()) == t and t.uri().startswith("weaviate://10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080/")
    # one gRPC port: the others keep their distance from their REST port (scripts/weaviate.sh's numbering)
    local = Target.parse("weaviate://127.0.0.1:18080,127.0.0.1:18081,127.0.0.1:18082/?grpc=18180")
    assert [g for _, _, g in local.nodes] == [18180, 18181, 18182]
    assert Target.parse(local.uri()) == local and "grpc=18180" in local.uri()
    # one per node, in order; and the nodes= option adds nodes after the address's
    assert Target.parse("weaviate://a:1,b:2/?grpc=7,9").nodes == (("a", 1, 7), ("b", 2, 9))
    assert Target.parse("weaviate://a:1/?grpc=7&nodes=b:2,c:3").nodes == (("a", 1, 7), ("b", 2, 8), ("c", 3, 9))
    assert Target.parse("weaviate://a:1/?grpc=7,8&nodes=b:2").uri() == "weaviate://a:1,b:2/Declrag?grpc=7"
    assert child_uri("weaviate://a:1,b:2/?grpc=7", "x") == "weaviate://a:1,b:2/Declrag_x?grpc=7"
    assert Target.parse("weaviate://h:1/?grpc=2").nodes == (("h", 1, 2),)


@pytest.mark.parametrize("uri, message", [
    ("weaviate://a:1,b:x/", "'b:x' is not a host:port"),
    ("weaviate://a:1,b:2/?grpc=5,6,7", "2 node(s) and 3 gRPC port(s)"),
    ("weaviate://a:1,b:2/?grpc=5,z", "grpc ports are integers"),
    ("weaviate://a:1/?nodes=b:99999", "port out of range"),
])
def test_bad_node_lists_are_named(uri, message):
    with pytest.raises(DeclragError) as e:
        Target.parse(uri)
    assert message in e.value.message and uri in e.value.message


def test_no_node_answering_is_one_clear_error():
    with pytest.raises(DeclragError) as e:
        open_store("weaviate://127.0.0.1:9,127.0.0.1:11/Docs?grpc=10,12")
    assert "cannot reach any of the 2 Weaviate nodes of weaviate://127.0.0.1:9,127.0.0.1:11" in e.value.message
    assert "\n" not in e.value.message and "scripts/weaviate.sh start" in e.value.hint


# -- a real three-node cluster -----------------------------------------------------------------------------
def _script(*args: str) -> None:
    r = subprocess.run(["bash", str(WEAVIATE_SCRIPT), *args], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]


def _corpus(n: int = 30, dim: int = 16):
    docs = [Document(id=f"d{i}", text=f"solar panel {i} turns light into power, report {i % 7}", source=f"s{i}",
                     title=f"t{i}") for i in range(n)]
    chunks = [Chunk(id=f"d{i}#0", doc_id=d.id, text=d.text, start=0, end=len(d.text), position=0, source=d.source,
                    title=d.title) for i, d in enumerate(docs)]
    return docs, chunks, np.random.default_rng(7).normal(size=(n, dim)).astype("float32")


@pytest.mark.weaviate
def test_losing_the_connected_node_fails_over_with_the_same_results(tmp_path, monkeypatch, caplog):
    # this cluster flushes its memtables after 2 s (60 by default): settle() then waits 3 s, not 65, for keyword
    # search on every node to see a write (the nodes answer alike only once it has)
    monkeypatch.setenv("PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS", "2")
    folder = tmp_path / "cluster"
    base = start_weaviate(folder, nodes=3)
    try:
        t = Target.parse(base)
        assert len(t.nodes) == 3, base  # weaviate.sh names every node of a cluster
        uri = child_uri(base + "&replicas=3&consistency=QUORUM&timeout=20&settle=3", "failover")
        docs, chunks, vecs = _corpus()
        store, _ = open_store(uri, IngestConfig())
        store.upsert(docs, chunks, vecs)
        store.settle()
        first = f"{t.nodes[0][0]}:{t.nodes[0][1]}"
        assert store.node == first
        queries = [(f"solar panel {i}", vecs[i]) for i in range(0, 30, 3)]

        def results(st):
            return [[(h.chunk.id, round(h.score, 5)) for h in st.hybrid_search(q, v, 5, 0.5)] for q, v in queries]

        before = results(store)
        _script("kill-node", "0", "--dir", str(folder))
        t0 = time.monotonic()
        assert results(store) == before  # the request that meets the dead node is sent to another one
        window = time.monotonic() - t0
        assert store.node != first and window < 5, (store.node, window)
        assert store.count() == 30 and len(store.documents()) == 30
        store.upsert(docs[:10], chunks[:10], vecs[:10])  # writes go on too (QUORUM: two replicas up); same ids
        assert store.count() == 30  # written again, not duplicated
        more, more_chunks, more_vecs = _corpus(35)  # and five new ones, which node 0 will lack when it is back
        store.upsert(more[30:], more_chunks[30:], more_vecs[30:])
        store.settle()
        before = results(store)  # the results with them, from a node that was never down
        other, _ = open_store(uri, create=False)  # a handle opened while node 0 is down starts on another node
        assert other.node != first and other.count() == 35
        _script("start-node", "0", "--dir", str(folder))
        assert results(store) == before and results(other) == before
        other.close()
        # node 0 back: killed right after a write, it can come back with every object but some vectors lost (its
        # vector index's log unflushed; nothing on the server repairs that), and it lacks the objects written
        # while it was down. verify finds both on node 0's own copy: the lost vectors it writes again, the
        # missing objects it leaves to async replication (which writes them to node 0 alone); then node 0
        # answers as before (once its keyword index has taken what was written again: settle)
        back, _ = open_store(uri.replace("consistency=QUORUM", "consistency=ALL"), create=False)
        assert back.node == first
        with caplog.at_level(logging.WARNING, logger="declrag.stores.weaviate._replicas"):
            check = back.verify()
        assert check.ok and check.expected == 35 and check.copies == {f"{h}:{p}": 35 for h, p, _ in t.nodes}, check
        # the new five came by replication (before verify looked, or while it waited: check.replicated), and
        # nothing node 0 lacked was written again to every replica
        rewrites = [r.getMessage() for r in caplog.records if "written again" in r.getMessage()]
        assert all("(0 missing on a node" in m for m in rewrites), (rewrites, check)
        assert back.verify().repaired == 0  # nothing left to repair
        back.settle()
        assert results(back) == before
        back.close()
        store.drop()
        store.close()
    finally:
        stop_weaviate(folder)


def test_only_a_node_that_does_not_answer_counts_as_down():
    import grpc

    from declrag.stores.weaviate.target import Unreachable
    from declrag.stores.weaviate._wire import node_down

    class Rpc(grpc.RpcError):
        def __init__(self, code):
            self._code = code

        def code(self):
            return self._code

    assert node_down(Rpc(grpc.StatusCode.UNAVAILABLE)) and node_down(Rpc(grpc.StatusCode.DEADLINE_EXCEEDED))
    assert node_down(Unreachable("cannot reach a Weaviate server at weaviate://h:1"))
    wrapped = RuntimeError("batch failed")
    wrapped.__cause__ = ConnectionRefusedError("[Errno 111] Connection refused")
    assert node_down(wrapped)
    assert not node_down(Rpc(grpc.StatusCode.INVALID_ARGUMENT))
    assert not node_down(ValueError("vector lengths don't match"))


@pytest.mark.weaviate
def test_a_node_killed_right_after_a_write_is_checked_and_repaired(tmp_path):
    """Weaviate 1.33 killed within a second of a write comes back with every object but (usually) without their
    vectors, and answers hybrid searches from the keyword leg alone; verify finds that on the node's own copy
    and writes the objects again, after which the results are those from before the kill."""
    folder = tmp_path / "one"
    base = start_weaviate(folder)
    try:
        uri = child_uri(base + "&settle=0", "crash")
        docs, chunks, vecs = _corpus()
        store, _ = open_store(uri, IngestConfig())
        store.upsert(docs, chunks, vecs)
        q = [(f"solar panel {i}", vecs[i]) for i in range(0, 30, 5)]
        before = [[h.chunk.id for h in store.hybrid_search(s, v, 5, 0.5)] for s, v in q]
        store.close()
        _script("kill-node", "0", "--dir", str(folder))
        _script("start-node", "0", "--dir", str(folder))
        back, _ = open_store(uri, create=False)
        check = back.verify()
        assert check.ok and check.copies == {back.node: 30}, check
        assert [[h.chunk.id for h in back.hybrid_search(s, v, 5, 0.5)] for s, v in q] == before, check.repaired
        assert len(back.vector_search(vecs[0], 100)) == 30  # every vector is in the index again
        back.close()
    finally:
        stop_weaviate(folder)
