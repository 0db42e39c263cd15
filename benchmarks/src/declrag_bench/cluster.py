"""`declrag bench cluster`: a three-node Weaviate cluster on loopback (replication factor 3) under concurrent
searches while one node is killed with SIGKILL and later restarted.

Three phases of a third of the duration each: before (all nodes up), during (a node killed; meanwhile new
documents are indexed at QUORUM, and the node stays down until that indexing has ended, which can stretch
this phase), after (the node restarted and rejoined). Every search is a hybrid query of a SciFact question
through `WeaviateStore` (consistency QUORUM, client retries) on a store URI naming all three nodes; the
clients start on node 0. ``kill="connected"`` (the default) kills node 0, the node the clients (and the
writer) talk to, so that they fail over to another; ``kill="other"`` kills node 2, a replica they do not
talk to. Reported: requests and failures per phase, latency p50/p95/p99 per phase, the failover window
(from the kill to the first successful search through another node, and until every client has had
one) with the failures outside it, and whether every object is there after the restart (counted at
consistency ALL, and read back by id).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from declrag.config import ChunkerConfig, IngestConfig
from declrag.embed.embedder import Embedder
from declrag.errors import DeclragError
from declrag.golden import load_golden
from declrag.ingest.indexer import Indexer
from declrag.metrics.stats import percentiles
from declrag.stores import child_uri, open_store
from declrag.stores.weaviate.target import Target
from declrag.types import Document

from .servers import run_script

PHASES = ("before", "during", "after")


def _script(*args: str, timeout: float = 1800) -> str:
    return run_script("weaviate.sh", *args, timeout=timeout, hint="see the node logs in the cluster folder")


KILLS = {"connected": 0, "other": 2}  # which node is killed: the one the clients talk to, or a replica


def run(duration_s: float = 60.0, clients: int = 16, dataset: str = "scifact", folder: str | Path | None = None,
        port: int = 28080, progress: bool = True, kill: str = "connected") -> dict[str, Any]:
    """Start the cluster (in ``folder``, a temporary one by default), run the scenario, stop the cluster."""
    if duration_s <= 0 or clients < 1:
        raise DeclragError("--duration must be positive and --clients at least 1")
    if kill not in KILLS:
        raise DeclragError(f"--kill must be one of {', '.join(KILLS)}, not {kill!r}",
                           hint="connected: the node the clients talk to; other: a replica they do not")
    own = folder is None
    folder = Path(folder or tempfile.mkdtemp(prefix="declrag-cluster-"))
    t0 = time.perf_counter()
    base = _script("start", "--nodes", "3", "--dir", str(folder), "--port", str(port))
    started_s = time.perf_counter() - t0
    try:
        return {**_scenario(base, folder, duration_s, clients, dataset, progress, KILLS[kill]),
                "cluster_start_s": round(started_s, 1)}
    finally:
        _script("stop", "--dir", str(folder), *(["--clean"] if own else []), timeout=300)


def _prepared(uri: str, dataset: str, progress: bool) -> dict[str, Any]:
    """``dataset``'s documents indexed into ``uri`` (settled: the load starts on a cluster whose memtables are
    flushed, as a serving one's would be), 500 of its questions with their vectors, and 50 extra documents to write
    while a node is down (their vectors computed now, into the embedding cache, so that what runs then is the
    writes)."""
    gs = load_golden(dataset)
    ingest = IngestConfig(chunker=ChunkerConfig(chunk_size=512, overlap=64))
    embedder = Embedder(ingest.embedder)
    store, meta = open_store(uri, ingest)
    t = time.perf_counter()
    written = Indexer(store, meta.ingest, embedder, progress=progress).index_documents(gs.documents).chunks
    index_s = time.perf_counter() - t
    counted = store.count()
    store.settle()
    questions = [e.question for split in gs.splits.values() for e in split][:500]
    extra = [Document(id=f"cluster-extra-{i}", text=f"Extra document {i} written while a node was down. " * 8,
                      source="cluster-bench", title=f"extra {i}") for i in range(50)]
    extra_indexer = Indexer(store, meta.ingest, embedder, progress=False)
    embedder.embed_documents([c.text for d in extra for c in extra_indexer.chunker(d)])
    return {"gs": gs, "store": store, "written": written, "index_s": index_s,
            "counted": counted, "questions": questions, "vecs": embedder.embed_queries(questions), "extra": extra,
            "extra_indexer": extra_indexer}


def _index_extra(indexer: Indexer, extra: list[Document], events: dict[str, Any], t_start: float) -> None:
    """Index ``extra`` while a node is down (at QUORUM: two of three replicas up), and say how it went in
    ``events["index_while_down"]``; a failure is reported, then indexed again once the node is back."""
    t = time.perf_counter()
    try:
        rep = indexer.index_documents(extra)
        events["index_while_down"] = {"ok": True, "documents": rep.indexed, "chunks": rep.chunks,
                                      "seconds": round(time.perf_counter() - t, 2),
                                      "write_s": round(rep.seconds["write"], 2),
                                      "finished_at_s": round(time.perf_counter() - t_start, 2)}
    except Exception as e:  # reported, then indexed again once the node is back
        events["index_while_down"] = {"ok": False,
                                      "error": getattr(e, "message", None) or f"{type(e).__name__}: {e}"}


class _Load:
    """``clients`` threads searching ``uri`` with ``questions`` in turn until `stop`; each search's (start offset,
    seconds, ok, error, client, node) in ``records``."""

    def __init__(self, uri: str, questions: list[str], vecs: Any, clients: int):
        self.uri, self.questions, self.vecs, self.clients = uri, questions, vecs, clients
        self.records: list[tuple[float, float, bool, str, int, str]] = []
        self.lock, self.stopping = threading.Lock(), threading.Event()
        self.t_start = time.perf_counter()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]
        for th in self.threads:
            th.start()

    def _client(self, i: int) -> None:
        st = open_store(self.uri, create=False)[0]
        j, n = i, len(self.questions)
        try:
            while not self.stopping.is_set():
                q, v = self.questions[j % n], self.vecs[j % n]
                j += self.clients
                t = time.perf_counter()
                try:
                    st.hybrid_search(q, v, 10, 0.5, "relative")
                    ok, err = True, ""
                except Exception as e:  # counted, not raised: the scenario measures failures
                    ok, err = False, f"{type(e).__name__}: {str(e)[:200]}"
                with self.lock:
                    self.records.append((t - self.t_start, time.perf_counter() - t, ok, err, i,
                                         getattr(st, "node", "")))
        finally:
            st.close()

    def stop(self) -> None:
        self.stopping.set()
        for th in self.threads:
            th.join(timeout=120)


def _count_back(uri: str, expected: int, docs_expected: int, vec: Any) -> tuple[int, Any, float, int]:
    """Read the store back at consistency ALL, on node 0 (the first of the URI, which may be the one back): the
    restarted node catches up by async replication, so wait for it (up to 180 s), its document records too (node 0,
    back from its crash, lacks those written while it was down until replication brings them; a CI run read 6 of
    56 there). Returns (chunks counted, documents, seconds waited, chunk ids a vector search reads back)."""
    check = open_store(uri.replace("consistency=QUORUM", "consistency=ALL"), create=False)[0]
    t = time.perf_counter()
    while True:
        counted_all, docs_all = check.count(), check.documents()
        if (counted_all == expected and len(docs_all) == docs_expected) or time.perf_counter() - t >= 180:
            break
        time.sleep(1.0)
    waited = round(time.perf_counter() - t, 1)
    ids_back = len({h.chunk.id for h in check.vector_search(vec, 10000)})
    check.close()
    return counted_all, docs_all, waited, ids_back


def _phases(records: list, events: dict[str, Any]) -> dict[str, Any]:
    """Requests, failures and latency before the kill, while the node was down, and after it came back."""
    phases = {}
    for name, lo, hi in (("before", 0, events["killed_at_s"]),
                         ("during", events["killed_at_s"], events["restarted_at_s"]),
                         ("after", events["restarted_at_s"], float("inf"))):
        rows = [r for r in records if lo <= r[0] < hi]
        lat = [r[1] * 1000 for r in rows if r[2]]
        phases[name] = {"requests": len(rows), "failed": sum(not r[2] for r in rows),
                        **percentiles(lat, (50, 95, 99), suffix="_ms"),
                        "errors": sorted({r[3] for r in rows if not r[2]})[:5]}
    return phases


def _scenario(base: str, folder: Path, duration_s: float, clients: int, dataset: str, progress: bool,
              victim: int) -> dict[str, Any]:
    sep = "&" if "?" in base else "?"
    uri = child_uri(base + f"{sep}replicas=3&consistency=QUORUM&retries=5", "cluster-bench")
    c = _prepared(uri, dataset, progress)
    gs, store, questions, vecs = c["gs"], c["store"], c["questions"], c["vecs"]
    extra, extra_indexer = c["extra"], c["extra_indexer"]
    written = written0 = c["written"]

    load = _Load(uri, questions, vecs, clients)
    records, t_start = load.records, load.t_start
    third = duration_s / 3
    events: dict[str, Any] = {}
    bar = tqdm(total=round(duration_s), desc="cluster under load", unit="s", disable=not progress)

    def wait_until(offset: float) -> None:
        while (now := time.perf_counter() - t_start) < offset:
            time.sleep(min(0.5, offset - now))
            bar.n = min(round(now), bar.total)
            bar.refresh()

    wait_until(third)
    victim_addr = Target.parse(uri).nodes[victim]
    victim_node = f"{victim_addr[0]}:{victim_addr[1]}"
    kill_at = time.perf_counter() - t_start  # just before the SIGKILL: the window is measured from here
    _script("kill-node", str(victim), "--dir", str(folder))
    events["killed_node"] = victim
    events["killed_at_s"] = round(kill_at, 2)
    # indexing while the node is down: new documents at QUORUM (two of three replicas up), in the background so
    # that the phases keep their length whatever the writes cost (their vectors are computed before the load
    # starts, so what runs while the node is down is the writes)

    writer = threading.Thread(target=_index_extra, args=(extra_indexer, extra, events, t_start), daemon=True)
    writer.start()
    wait_until(2 * third)
    writer.join()  # the node comes back only once the indexing that started without it has ended
    t = time.perf_counter()
    _script("start-node", str(victim), "--dir", str(folder))
    events["restarted_at_s"] = round(time.perf_counter() - t_start, 2)
    events["restart_s"] = round(time.perf_counter() - t, 1)
    bar.total = round(events["restarted_at_s"] + third)
    wait_until(events["restarted_at_s"] + third)
    load.stop()
    events["stopped_at_s"] = round(time.perf_counter() - t_start, 2)
    writer.join()
    bar.close()

    if not events["index_while_down"]["ok"]:  # the documented way out: index again once the node is back
        written += extra_indexer.index_documents(extra).chunks
    else:
        written += events["index_while_down"]["chunks"]
    expected = written
    docs_expected = len(gs.documents) + len(extra)
    counted_all, docs_all, events["caught_up_s"], ids_back = _count_back(uri, expected, docs_expected, vecs[0])
    store.drop()
    store.close()

    return {
        "failover": _failover(records, kill_at, victim_node, clients, victim),
        "store": uri, "clients": clients, "duration_s": duration_s, "dataset": gs.name, "chunks_written": written0,
        "chunks_counted": c["counted"], "index_s": round(c["index_s"], 1), "phases": _phases(records, events),
        "events": events,
        "objects": {"expected": expected, "counted_at_all": counted_all, "read_back_by_vector": ids_back,
                    "documents_at_all": len(docs_all), "documents_expected": docs_expected,
                    "lost": expected - counted_all},
    }


def _failover(records: list, kill_at: float, victim: str, clients: int, victim_index: int) -> dict[str, Any]:
    """The failover window: from the kill to the first successful search through another node than the
    killed one (``first_s``) and until every client has had one (``window_s``); failed searches (by the
    time they ended) inside and outside it."""
    firsts: dict[int, float] = {}
    for start, secs, ok, _, client, node in sorted(records, key=lambda r: r[0] + r[1]):
        if ok and node != victim and start + secs >= kill_at and client not in firsts:
            firsts[client] = start + secs - kill_at
    connected = victim_index == 0  # the clients start on node 0
    window = max(firsts.values()) if connected and len(firsts) == clients else None
    end = kill_at + (window or 0.0)
    failed = [r[0] + r[1] for r in records if not r[2]]
    return {"killed": victim, "connected_node_killed": connected,
            "first_s": round(min(firsts.values()), 3) if connected and firsts else None,
            "window_s": None if window is None else round(window, 3),
            "failed_in_window": sum(kill_at <= t <= end for t in failed) if connected else 0,
            "failed_outside_window": sum(not kill_at <= t <= end for t in failed) if connected else len(failed),
            "clients_moved": len(firsts) if connected else 0}


def print_report(r: dict[str, Any], console: Console) -> None:
    e = r["events"]
    t = Table(title=f"3-node Weaviate, replication 3, {r['clients']} clients for {e['stopped_at_s']:g} s: "
                    f"node {e['killed_node']} SIGKILLed at {e['killed_at_s']} s, restarted at {e['restarted_at_s']} s")
    for col in ("phase", "requests", "failed", "p50 ms", "p95 ms", "p99 ms"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for name in PHASES:
        p = r["phases"][name]
        t.add_row(name, str(p["requests"]), str(p["failed"]), str(p["p50_ms"]), str(p["p95_ms"]), str(p["p99_ms"]))
    console.print(t)
    w = r["events"]["index_while_down"]
    f = r["failover"]
    if f["connected_node_killed"]:
        console.print(f"failover: the clients' node {f['killed']} was killed; first search through another node "
                      f"{f['first_s']} s after the kill, every client moved after {f['window_s']} s "
                      f"({f['clients_moved']} of {r['clients']}); failed searches in the window "
                      f"{f['failed_in_window']}, outside it {f['failed_outside_window']}")
    console.print(f"indexing while node {e['killed_node']} was down: " + (
        f"{w['documents']} documents ({w['chunks']} chunks) written at QUORUM in {w['seconds']} s "
        f"({w['write_s']} s of writes; done {w['finished_at_s']} s into the run, node {e['killed_node']} restarted at "
        f"{r['events']['restarted_at_s']} s)" if w["ok"]
        else f"refused ({w['error']}); indexed again after the restart"))
    o = r["objects"]
    console.print(f"after the restart (node 0's count complete {e.get('caught_up_s')} s after the load stopped), at "
                  f"consistency ALL: {o['counted_at_all']} of {o['expected']} chunks, "
                  f"{o['documents_at_all']} of {o['documents_expected']} documents, {o['read_back_by_vector']} read "
                  f"back; lost: {o['lost']}")
    for name in PHASES:
        for e in r["phases"][name]["errors"]:
            console.print(f"  {name}: {e}", markup=False)
