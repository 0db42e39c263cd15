"""`declrag bench cluster`, shortened, on a real three-node Weaviate cluster."""

from __future__ import annotations

import shutil

import pytest
from tests.conftest import WEAVIATE_SCRIPT, free_port_block, start_weaviate, stop_weaviate
from tests.live.test_weaviate_end_to_end import GOLD


@pytest.mark.slow
def test_cluster_loses_and_regains_a_node_without_failed_requests(tmp_path):
    """The `declrag bench cluster` scenario, shortened: 3 nodes, replication 3, 4 clients, node 0 (the one they
    talk to) killed with SIGKILL and restarted; every client fails over, no failed request, no object lost,
    indexing at QUORUM works while it is down."""
    if shutil.which("go") is None and not WEAVIATE_SCRIPT.exists():
        pytest.skip("needs Go to build Weaviate (https://go.dev/dl)")
    from declrag_bench.cluster import run as cluster

    start_weaviate(tmp_path / "probe")  # builds the server (or skips here with the reason) before the cluster
    stop_weaviate(tmp_path / "probe")
    r = cluster(duration_s=18, clients=4, dataset=str(GOLD), folder=tmp_path / "cluster", port=free_port_block(),
                progress=False)
    assert all(r["phases"][p]["requests"] > 0 for p in ("before", "during", "after"))
    assert [r["phases"][p]["failed"] for p in ("before", "during", "after")] == [0, 0, 0], r["phases"]
    assert r["events"]["index_while_down"]["ok"]
    f = r["failover"]  # node 0, the one the clients talk to, was killed: they all went on with another node
    assert f["connected_node_killed"] and f["clients_moved"] == 4 and f["window_s"] is not None, f
    assert f["failed_outside_window"] == 0, f
    o = r["objects"]
    assert o["lost"] == 0 and o["counted_at_all"] == o["expected"] == o["read_back_by_vector"]
    assert o["documents_at_all"] == o["documents_expected"]
