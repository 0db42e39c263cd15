"""`declrag bench ray`: indexing over a Ray cluster against one process, on this machine, on the same corpus.

Arms, each `declrag index --dataset NAME` in a fresh process with an empty embedding cache (every chunk is embedded):

- ``one process``: the default indexer (ONNX on every core);
- ``ray``: the same command with ``--ray``, over a cluster scripts/ray.sh starts on loopback (a head and ``workers``
  worker nodes of ``cpus`` CPUs each; actors as `declrag.ingest.distributed.sizes` makes them), stopped afterwards.

Measured per arm: wall seconds, chunks/s, CPU seconds and CPU ms per chunk. CPU is the whole machine's, from the
command's start to its end (run it on an otherwise idle machine): the indexing process, and for ``ray`` every
process of the cluster too (its GCS, raylets, the workers it starts and ends), idle parts included. The ratio of the
two is Ray's overhead per chunk. Each arm runs again into a new store with its embedding cache full (``cached``):
what is left is reading, chunking, writing and, over Ray, the cluster's own cost, without the model. With
``--store`` (a Weaviate URI), the other bound: that server's import rate, the one-process index's chunks and vectors
written to a fresh collection in the store's batches (removed afterwards).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.errors import DeclragError

from .servers import run_script


def _machine_cpu() -> float:
    """CPU seconds this machine has spent, all processes (idle and I/O wait aside): every process of a cluster,
    the workers Ray starts and ends included, which no process tree keeps count of."""
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal"))


def _index(dataset: str, store: str, cache: Path, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "DECLRAG_CACHE": str(cache)}
    cpu0, t0 = _machine_cpu(), time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "declrag.cli", "index", "--dataset", dataset, "--store", store, "-q",
                        *extra], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, _machine_cpu() - cpu0
    if r.returncode != 0:
        raise DeclragError(f"declrag index {dataset} failed: {r.stderr.strip()[-800:]}",
                           hint="check that `declrag index --dataset NAME` works here first")
    summary = r.stdout.strip().splitlines()[-1]
    chunks = int(summary.split(" chunks,")[0].rsplit(" ", 1)[1])
    embedded = int(summary.split(" texts embedded")[0].rsplit(" ", 1)[1])
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "chunks": chunks, "embedded": embedded,
            "summary": summary}


def _import_rate(one: str, uri: str) -> dict[str, Any]:
    """Chunks/s of writing the one-process index (texts and vectors) into a fresh collection at ``uri``."""
    import numpy as np

    from declrag.stores import child_uri, connect, open_store
    from declrag.types import Chunk, Document

    src = connect(one)
    rows = src._table("chunks").to_arrow().to_pylist()  # type: ignore[attr-defined]
    meta = src.read_meta()
    assert meta is not None
    target = child_uri(uri, f"benchray{uuid.uuid4().hex[:8]}")
    dst, _ = open_store(target, meta.ingest)
    fields = {f for f in Chunk.__dataclass_fields__}
    chunks = [Chunk(**{k: v for k, v in r.items() if k in fields}) for r in rows]
    docs = {c.doc_id: Document(id=c.doc_id, text="", source=c.source, title=c.title) for c in chunks}
    vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc_id, []).append(i)
    t0 = time.perf_counter()
    ids = list(by_doc)
    try:
        for k in range(0, len(ids), 200):  # 200 documents an upsert, as an indexer batch
            part = [i for d in ids[k:k + 200] for i in by_doc[d]]
            dst.upsert([docs[d] for d in ids[k:k + 200]], [chunks[i] for i in part], vectors[part])
        wall = time.perf_counter() - t0
    finally:
        dst.drop()
        dst.close()
    return {"chunks": len(chunks), "wall_s": round(wall, 2), "chunks_per_s": round(len(chunks) / wall, 1)}


def run(dataset: str = "squad-v1.1", workers: int = 1, cpus: int = 1, store: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"dataset": dataset, "workers": workers, "cpus_per_node": cpus, "machine_cpus":
                           os.cpu_count(), "arms": {}}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        t = Path(tmp)
        out["arms"]["one process"] = _index(dataset, str(t / "one"), t / "cache-one")
        out["arms"]["one process, cached"] = _index(dataset, str(t / "one-again"), t / "cache-one")
        folder = t / "cluster"
        os.environ["DECLRAG_CACHE"], old = str(t / "cache-ray"), os.environ.get("DECLRAG_CACHE")
        try:
            address = run_script("ray.sh", "start", "--dir", str(folder), "--workers", str(workers), "--cpus",
                                 str(cpus), timeout=600, hint="see the node logs in the cluster folder")
        finally:
            if old is None:
                os.environ.pop("DECLRAG_CACHE")
            else:
                os.environ["DECLRAG_CACHE"] = old
        try:
            out["arms"]["ray"] = _index(dataset, str(t / "ray"), t / "cache-driver", "--ray", address)
            out["arms"]["ray, cached"] = _index(dataset, str(t / "ray-again"), t / "cache-driver", "--ray", address)
        finally:
            run_script("ray.sh", "stop", "--dir", str(folder), "--clean", timeout=120)
        if store:
            out["import"] = _import_rate(str(t / "one"), store)
    for arm in out["arms"].values():
        arm["chunks_per_s"] = round(arm["chunks"] / arm["wall_s"], 1)
        arm["cpu_ms_per_chunk"] = round(1000 * arm["cpu_s"] / max(arm["chunks"], 1), 2)
    one, ray = out["arms"]["one process"], out["arms"]["ray"]
    out["cpu_per_chunk_ratio"] = round(ray["cpu_ms_per_chunk"] / one["cpu_ms_per_chunk"], 3)
    # Ray's own CPU per chunk: the cached runs' difference (no model in either)
    out["ray_own_cpu_ms_per_chunk"] = round(out["arms"]["ray, cached"]["cpu_ms_per_chunk"]
                                            - out["arms"]["one process, cached"]["cpu_ms_per_chunk"], 2)
    out["per_core_chunks_per_s"] = round(ray["chunks"] / ray["cpu_s"], 2)  # chunks per CPU-second over Ray
    return out


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"indexing {r['dataset']} in one process and over Ray ({1 + r['workers']} nodes of "
                    f"{r['cpus_per_node']} CPU on this {r['machine_cpus']}-CPU machine), every chunk embedded")
    for col in ("arm", "chunks", "embedded", "wall s", "chunks/s", "CPU s", "CPU ms / chunk", "vs one process"):
        t.add_column(col)
    for name, a in r["arms"].items():
        one = r["arms"]["one process" + (", cached" if name.endswith("cached") else "")]
        t.add_row(name, str(a["chunks"]), str(a["embedded"]), f"{a['wall_s']:.1f}", f"{a['chunks_per_s']:.1f}",
                  f"{a['cpu_s']:.1f}",
                  f"{a['cpu_ms_per_chunk']:.1f}", f"{a['cpu_ms_per_chunk'] / one['cpu_ms_per_chunk']:.2f}x")
    console.print(t)
    console.print(f"over Ray: {r['per_core_chunks_per_s']} chunks per CPU-second; CPU per chunk "
                  f"{r['cpu_per_chunk_ratio']:.2f}x one process', of which Ray's own (the cached runs' difference) "
                  f"{r['ray_own_cpu_ms_per_chunk']} ms")
    if imp := r.get("import"):
        console.print(f"the store's import rate (the other bound): {imp['chunks_per_s']} chunks/s "
                      f"({imp['chunks']} chunks in {imp['wall_s']} s)")
