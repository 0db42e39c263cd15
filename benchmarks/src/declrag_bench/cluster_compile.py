"""`declrag bench cluster --scenario compile`: a retrieval compile on a three-node Weaviate cluster (replication
3) that loses a node while a trial writes a new index, against the same compile with no fault.

Both compiles run the same space, dataset, seed and trial budget on the same cluster, each on collections of
its own (``Nofault_*`` and ``Fault_*``), so that the faulted one builds every index afresh. While it runs, a
watcher polls the cluster: once a ``Fault_`` collection holds some but not all of its chunks (a trial is
writing a new index), the victim node is SIGKILLed (``connected``: node 0, the one the compile's handles talk
to, which then fail over; ``other``: node 2, a replica they do not talk to), and started again ``down_s``
seconds later while the compile goes on. Reported: whether the compile finished, each trial's score in
both runs (they must be equal), the trials that failed, and every ``Fault_`` collection checked node by node
after the restart (`Store.verify`: chunks per node against the document records, so a duplicated or missing
object shows, and how many chunks a node had lost and were written again).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.errors import DeclragError
from declrag.golden import load_golden
from declrag.stores import open_store
from declrag.stores.weaviate import WeaviateStore
from declrag.stores.weaviate.target import Target

from .servers import run_script

KILLS = {"connected": 0, "other": 2}


def _script(*args: str) -> str:
    return run_script("weaviate.sh", *args, timeout=1800, hint="see the node logs in the cluster folder")


def run(dataset: str = "squad-v1.1", space: str = "optimizers/retrieval.yaml", trials: int = 8, port: int = 28080,
        kill: str = "connected", down_s: float = 30.0, folder: str | Path | None = None, max_dev: int = 300,
        progress: bool = True) -> dict[str, Any]:
    if kill not in KILLS:
        raise DeclragError(f"--kill must be one of {', '.join(KILLS)}, not {kill!r}",
                           hint="connected: the node the compile talks to; other: a replica it does not")
    if trials < 1 or down_s < 0:
        raise DeclragError("--trials must be at least 1 and --down at least 0")
    own = folder is None
    folder = Path(folder or tempfile.mkdtemp(prefix="declrag-cluster-compile-"))
    space = str(_capped(space, max_dev, folder))
    # memtables flushed after 2 s (60 by default), so that a store settles in seconds (settle=4 below)
    os.environ.setdefault("PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS", "2")
    base = _script("start", "--nodes", "3", "--dir", str(folder / "cluster"), "--port", str(port))
    try:
        return _scenario(Target.parse(base), folder, dataset, space, trials, KILLS[kill], down_s, progress)
    finally:
        _script("stop", "--dir", str(folder / "cluster"), *(["--clean"] if own else []))


def _capped(space: str, max_dev: int, folder: Path) -> Path:
    """The space with its dev set capped at ``max_dev`` questions (a seeded sample; each trial scores them all
    through the cluster), written beside the runs."""
    import yaml

    from declrag.optimize._space import read_space

    sp = read_space(space).model_dump(mode="json", exclude_none=True)
    sp["split"]["max_dev"] = min(max_dev, sp["split"].get("max_dev") or max_dev)
    out = folder / "space.yaml"
    out.write_text(yaml.safe_dump(sp, sort_keys=False))
    return out


def _uri(t: Target, stem: str) -> str:
    return dataclasses.replace(t, replicas=3, consistency="QUORUM", settle=4.0, timeout=30.0).uri(stem)


def _scenario(t: Target, folder: Path, dataset: str, space: str, trials: int, victim: int, down_s: float,
              progress: bool) -> dict[str, Any]:
    from declrag.optimize import Budget, CompileOptions, compile

    runs = folder / "runs"
    t0 = time.perf_counter()
    clean = compile(CompileOptions(space, dataset, "nofault", runs, Budget(max_trials=trials),
                                   store=_uri(t, "Nofault"), progress=progress)).summary
    clean_s = time.perf_counter() - t0
    events: dict[str, Any] = {}
    n_docs = len(load_golden(dataset).documents)
    watcher = threading.Thread(target=_kill_while_writing, args=(t, folder, victim, down_s, n_docs, events),
                               daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    repairs = _Repairs()  # what verify and corpus_store did during the compile: stores built again, chunks written
    logging.getLogger("declrag").addHandler(repairs)
    try:
        faulted: dict[str, Any] | None = compile(CompileOptions(space, dataset, "fault", runs, Budget(
            max_trials=trials), store=_uri(t, "Fault"), progress=progress)).summary
        error = None
    except DeclragError as e:
        faulted, error = None, e.message
    finally:
        logging.getLogger("declrag").removeHandler(repairs)
    fault_s = time.perf_counter() - t0
    events["during_compile"] = repairs.lines
    events["stop"] = True
    watcher.join(timeout=down_s + 600)
    a, b = _trials(runs / "nofault"), _trials(runs / "fault")
    done_b = [r for r in b if r["state"] != "fail"]  # a failed trial is retried as a new one
    pairs = [{"number": x["number"], "params": x["params"], "no_fault": x["metrics"].get("objective"),
              "fault": y["metrics"].get("objective") if y["params"] == x["params"] else None}
             for x, y in zip(a, done_b + [{"params": None, "metrics": {}}] * (len(a) - len(done_b)))]
    checks = _check_collections(t)
    return {
        "dataset": dataset, "space": space, "trials": trials, "killed_node": victim, "down_s": down_s,
        "events": {k: v for k, v in events.items() if k != "stop"},
        "finished": faulted is not None, "error": error,
        "same_best": faulted is not None
        and faulted.get("best", {}).get("params") == clean.get("best", {}).get("params"),
        "no_fault_s": round(clean_s, 1), "fault_s": round(fault_s, 1),
        "trial_scores": pairs,
        "scores_equal": bool(pairs) and all(p["fault"] is not None and p["no_fault"] is not None
                                            and abs(p["fault"] - p["no_fault"]) < 1e-9 for p in pairs),
        # a failed trial is not in trials.jsonl: its number is the gap
        "failed_trials": len(b) - len(done_b) + (max((r["number"] for r in b), default=-1) + 1 - len(b)),
        "collections": checks,
        "duplicated_or_missing": sum(abs(c - x["expected"]) for x in checks for c in x["copies"].values()
                                     if c is not None),
        "repaired_chunks": sum(x["repaired"] for x in checks),
    }


class _Repairs(logging.Handler):
    """Keeps what the store checks said: `declrag.ingest.corpus.checked` and `corpus_store` (nodes that did not answer,
    chunks written again, stores built again) and `verify` (repairs, waits for replication)."""

    SOURCES = ("declrag.ingest.corpus", "declrag.stores.weaviate._replicas")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name in self.SOURCES:
            self.lines.append(f"{time.strftime('%H:%M:%S', time.localtime(record.created))} {record.getMessage()}")


def _kill_while_writing(t: Target, folder: Path, victim: int, down_s: float, n_docs: int,
                        events: dict[str, Any]) -> None:
    """Once a ``Fault_`` collection holds some chunks but not yet the records of all ``n_docs`` documents (a
    trial is writing it), kill the victim; start it again ``down_s`` seconds later."""
    cluster = str(folder / "cluster")
    while not events.get("stop"):
        seen = _writing(t, n_docs)
        if seen is not None:
            events["killed_during"] = seen
            events["killed_at"] = time.time()
            _script("kill-node", str(victim), "--dir", cluster)
            deadline = time.monotonic() + down_s
            while time.monotonic() < deadline:
                time.sleep(0.5)
            _script("start-node", str(victim), "--dir", cluster)
            events["restarted_at"] = time.time()
            return
        time.sleep(0.2)


def _fault_stores(t: Target) -> list[tuple[str, int]]:
    """The faulted compile's stores on the cluster (their URIs and chunk counts), by `WeaviateStore.list_stores`."""
    return [(uri, n) for uri, _, n in WeaviateStore.list_stores(_uri(t, "Fault"))
            if Target.parse(uri).collection.startswith("Fault_")]


def _writing(t: Target, n_docs: int) -> dict[str, Any] | None:
    """A ``Fault_`` collection being written now (chunks in, not every document's record yet), if any."""
    try:
        for uri, n in _fault_stores(t):
            if n > 0:
                st = WeaviateStore(uri)
                try:
                    if (docs := len(st.documents())) < n_docs:
                        return {"collection": st.name, "chunks_in": n, "documents_in": docs, "documents": n_docs}
                finally:
                    st.close()
    except DeclragError:  # a node going down under the probe: try again at the next poll
        return None
    return None


def _trials(run: Path) -> list[dict[str, Any]]:
    """The run's trial records in the order they finished."""
    f = run / "trials.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def _check_collections(t: Target) -> list[dict[str, Any]]:
    out = []
    for uri, _ in _fault_stores(t):
        st, _ = open_store(uri, create=False)
        try:
            c = st.verify()
            out.append({"collection": Target.parse(uri).collection, "expected": c.expected, "copies": c.copies,
                        "repaired": c.repaired, "problems": c.problems})
        finally:
            st.close()
    return out


def print_report(r: dict[str, Any], console: Console) -> None:
    ev = r["events"]
    console.print(f"node {r['killed_node']} killed while {ev.get('killed_during', {}).get('collection', '?')} was "
                  f"being written ({ev.get('killed_during', {}).get('chunks_in', '?')} chunks in), started again "
                  f"{r['down_s']:.0f} s later")
    console.print(f"compile with the fault: {'finished' if r['finished'] else 'stopped: ' + str(r['error'])}; "
                  f"{r['failed_trials']} trials failed; {r['fault_s']} s (no fault: {r['no_fault_s']} s)")
    tab = Table(title="trial scores, no fault against fault")
    for col in ("trial", "params", "no fault", "fault"):
        tab.add_column(col)
    for p in r["trial_scores"]:
        tab.add_row(str(p["number"]), json.dumps(p["params"])[:70], f"{p['no_fault']}", f"{p['fault']}")
    console.print(tab)
    for line in ev.get("during_compile", []):
        console.print(f"  {line}", markup=False)
    console.print(f"every score equal: {r['scores_equal']}; chunks duplicated or missing on any node: "
                  f"{r['duplicated_or_missing']}; chunks a node had lost, written again: {r['repaired_chunks']}")
    for c in r["collections"]:
        console.print(f"  {c['collection']}: {c['expected']} chunks expected, per node {c['copies']}"
                      + (f"; {'; '.join(c['problems'])}" if c["problems"] else ""))
