"""The GPU check (`bash scripts/gpu-check.sh`): SciFact indexed and all-MiniLM-L6-v2 fine-tuned on one device, against
the 2-core CPU figures of the benchmark pages.

    .venv/bin/python benchmarks/scripts/gpu_check.py [--device cuda|cuda:N|cpu] [--limit N] [--steps N] [--json PATH]

1. Indexing: the SciFact corpus (``--limit N``: its first N documents) into a temporary store, with a fresh,
   temporary embedding cache (every chunk reaches the model), on the device: chunks/s and documents/s. The CPU figure
   (``declrag bench speed``) used declrag's default chunking, fixed 256/32 tokens, so this does too.
2. Vectors: a seeded sample of the same chunks (``--sample``, 256) embedded on the device and on the CPU; the
   tolerance is a minimum cosine of 0.999. The index address: the ingest digest of a device config and of a CPU
   config are equal, and ``corpus_store`` with the CPU config finds the index the device built, embedding nothing.
3. Fine-tuning: ``declrag.optimize._finetune.finetune_model`` on SciFact's train qrels (question -> the gold
   passage, one hard negative from the store's own candidates, as compile's fine-tune stage mines them; the CPU
   figure's setting), 40 steps of 32 at learning rate 5e-5, mini-batches of 4, seed 13, on the device: its time.

Prints a Markdown table (this device against the CPU figures) and, with ``--json``, writes every number with the
torch and CUDA versions and the GPU's name. Exit status: 0 the checks passed; 1 a vector or address check failed;
2 bad arguments; 3 the device asked for is not available here (one line says so).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NO_DEVICE, FAILED = 3, 1
TOLERANCE = 0.999  # the least cosine between a chunk's vector on the device and on the CPU
SEED = 13
# The CPU figures, 2 cores, and the settings they were measured with (the speed-up is given only for the same ones)
CPU_INDEXING: dict[str, Any] = {"chunks_per_s": 13.06, "documents_per_s": 7.21, "chunk_size": 256, "overlap": 32,
                "source": "docs/benchmarks/retrieval.md: declrag bench speed, the first 500 SciFact documents "
                          "(906 chunks), cold embedding cache, fixed 256/32 chunks, all-MiniLM-L6-v2"}
CPU_FINETUNE: dict[str, Any] = {"seconds": 619.0, "steps": 40, "batch_size": 32, "mini_batch_size": 4, "negatives": 1,
                "source": "docs/benchmarks/compile.md: compile's fine-tune stage on SciFact, training 619 s for 40 "
                          "steps of 32 (lr 5e-5, CachedMultipleNegativesRankingLoss mini-batch 4, one hard negative)"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Exit status: 0 passed, 1 a vector or address check failed, 2 bad arguments, "
                                        "3 the device is not available here.")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (to exercise the script)")
    ap.add_argument("--dataset", default="scifact", help="a BEIR golden set with a train split (default: scifact)")
    ap.add_argument("--limit", type=int, default=None, help="index only the first N documents")
    ap.add_argument("--chunk-size", type=int, default=CPU_INDEXING["chunk_size"], help="tokens (default 256)")
    ap.add_argument("--overlap", type=int, default=CPU_INDEXING["overlap"], help="tokens (default 32)")
    ap.add_argument("--embed-batch", type=int, default=64, help="texts per forward pass when indexing (64, the "
                    "default of declrag and of the CPU figure)")
    ap.add_argument("--sample", type=int, default=256, help="chunks embedded on the device and on the CPU (256)")
    ap.add_argument("--steps", type=int, default=CPU_FINETUNE["steps"], help="fine-tuning steps (default 40)")
    ap.add_argument("--batch-size", type=int, default=CPU_FINETUNE["batch_size"], help="rows per step (32)")
    ap.add_argument("--mini-batch-size", type=int, default=CPU_FINETUNE["mini_batch_size"],
                    help="texts per forward pass of the cached loss (4)")
    ap.add_argument("--negatives", type=int, default=CPU_FINETUNE["negatives"],
                    help="hard negatives per question, mined from the store (1; 0: question -> passage pairs only)")
    ap.add_argument("--questions", type=int, default=None, help="use only the first N train questions")
    ap.add_argument("--json", type=Path, default=None, help="write every number here")
    args = ap.parse_args(argv)
    for name in ("limit", "embed_batch", "sample", "steps", "batch_size", "mini_batch_size", "questions"):
        if (v := getattr(args, name)) is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.negatives < 0:
        ap.error("--negatives must be 0 or more")
    return args


def say(message: str) -> None:
    print(f"gpu-check: {message}", file=sys.stderr, flush=True)


def device_or_exit(asked: str) -> str:
    """The torch device for ``asked`` (`declrag.runtime.device.resolve`), or one line and exit status 3."""
    from declrag.errors import DeclragError
    from declrag.runtime.device import resolve

    try:
        return resolve(asked)
    except DeclragError as e:
        print(f"gpu-check: {e.message} (--device cpu runs the check on the CPU)", file=sys.stderr, flush=True)
        sys.exit(NO_DEVICE)


def environment(device: str) -> dict[str, Any]:
    import sentence_transformers
    import torch

    import declrag

    cuda = device.startswith("cuda")
    return {"device": device, "gpu": torch.cuda.get_device_name(torch.device(device)) if cuda else None,
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "bf16": torch.cuda.is_bf16_supported() if cuda else None,
            "sentence_transformers": sentence_transformers.__version__, "declrag": declrag.__version__,
            "python": platform.python_version(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}


def index(docs: list, ingest, home: Path) -> tuple[Any, Any, dict[str, Any]]:
    """The documents into a new store under ``home`` on the embedder's device, timed. The model is loaded first
    and timed apart (the CPU figure's timed run included the load, about a second of its 69 s on the CPU)."""
    from declrag.embed.embedder import Embedder
    from declrag.ingest.corpus import corpus_store

    emb = Embedder(ingest.embedder)  # the cache is the run's fresh temporary one (DECLRAG_CACHE)
    t0 = time.perf_counter()
    emb.model  # noqa: B018 (loads the model onto the device)
    emb.tokens  # noqa: B018
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    st, report = corpus_store(docs, ingest, "gpu-check", embedder=emb, progress=True, home=home)
    wall = time.perf_counter() - t0
    secs = sum(report.seconds.values())  # read, chunk, embed, write: what the CPU figure's wall timed
    return st, emb, {
        "documents": len(docs), "chunks": report.chunks, "embedded": report.embedded,
        "chunk_size": ingest.chunker.chunk_size, "overlap": ingest.chunker.overlap, "batch_size": emb.config.batch_size,
        "model_load_s": round(load_s, 2), "index_s": round(secs, 2), "corpus_store_s": round(wall, 2),
        "stage_s": {k: round(v, 2) for k, v in report.seconds.items()},
        "chunks_per_s": round(report.chunks / secs, 2) if secs else None,
        "documents_per_s": round(len(docs) / secs, 2) if secs else None}


def vectors(docs: list, emb, chunking, n: int, tmp: Path) -> dict[str, Any]:
    """A seeded sample of the indexed chunks embedded on the embedder's device and on the CPU, each from an empty
    cache (the cache does not tell devices apart): the min and mean cosine of the pairs. The times (``device_s``,
    ``cpu_s``) include each model's load."""
    import numpy as np

    from declrag.embed.embedder import Embedder, EmbeddingCache
    from declrag.ingest.chunkers import Chunker

    chunker = Chunker(chunking, emb.tokens)  # the indexer's cut: the texts the store embedded
    chunks = [c.text for d in docs for c in chunker(d)]
    sample = random.Random(SEED).sample(chunks, min(n, len(chunks)))
    got, took = {}, {}
    for where, device in (("device", emb.config.device), ("cpu", "cpu")):
        e = Embedder(emb.config.model_copy(update={"device": device}), cache=EmbeddingCache(tmp / f"{where}.sqlite3"))
        t0 = time.perf_counter()
        got[where] = e.embed_documents(sample)
        took[where] = round(time.perf_counter() - t0, 2)
    cos = np.sum(got["device"] * got["cpu"], axis=1) / (
        np.linalg.norm(got["device"], axis=1) * np.linalg.norm(got["cpu"], axis=1))
    return {"chunks": len(sample), "min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
            "max_abs_diff": float(np.abs(got["device"] - got["cpu"]).max()), "tolerance": TOLERANCE,
            "ok": bool(cos.min() >= TOLERANCE), "device_s": took["device"], "cpu_s": took["cpu"]}


def address(docs: list, ingest, home: Path, built_uri: str) -> dict[str, Any]:
    """The index address does not hold the device: the digests of a CUDA and a CPU config are equal, and
    ``corpus_store`` with the CPU config finds the store the device built and embeds nothing."""
    from declrag.ingest.corpus import corpus_store
    from declrag.stores import read_meta

    on = {d: ingest.model_copy(update={"embedder": ingest.embedder.model_copy(update={"device": d})})
          for d in ("cuda", "cpu")}
    digests = {d: c.digest() for d, c in on.items()}
    st, report = corpus_store(docs, on["cpu"], "gpu-check", progress=False, home=home)
    meta = read_meta(built_uri)
    same = (digests["cuda"] == digests["cpu"] and st.uri == built_uri and report.indexed == 0
            and report.embedded == 0 and meta is not None and meta.ingest.digest() == digests["cpu"])
    st.close()
    return {"digest_cuda": digests["cuda"], "digest_cpu": digests["cpu"], "store": built_uri,
            "cpu_config_store": st.uri,
            "cpu_config_reindexed": report.indexed, "cpu_config_embedded": report.embedded,
            "store_meta_digest": meta.ingest.digest() if meta else None, "same": bool(same)}


def finetune(gs, store, emb, ingest, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Rows from the train qrels (`declrag.optimize._finetune.training_rows` over a program on the device's store),
    then `finetune_model` on the device, timed by it."""
    from declrag.config import ProgramConfig
    from declrag.optimize._finetune import finetune_model, training_rows
    from declrag.pipeline.program import RAGProgram

    train = [e for e in gs.split("train") if e.gold][: args.questions]
    prog = RAGProgram(ProgramConfig(ingest=ingest), store=store, embedder=emb)
    t0 = time.perf_counter()
    rows, counts = training_rows(prog, gs, train, args.negatives, SEED, progress=True)
    mining_s = time.perf_counter() - t0
    say(f"fine-tuning {emb.config.model} on {len(rows)} rows: {args.steps} steps of {args.batch_size} "
        f"on {emb.config.device}")
    trained = finetune_model(emb.folder, rows, out, epochs=3.0, learning_rate=5e-5, batch_size=args.batch_size,
                             max_steps=args.steps, max_seconds=None, seed=SEED, mini_batch_size=args.mini_batch_size,
                             progress=True, device=emb.config.device)
    return {**trained, "rows": counts, "negatives": args.negatives, "learning_rate": 5e-5,
            "mining_s": round(mining_s, 2), "seconds_per_step": round(trained["seconds"] / max(1, trained["steps"]), 3)}


def _ratio(here: float | None, cpu: float | None, faster_is_larger: bool = True) -> str:
    if not here or not cpu:
        return "-"
    return f"{(here / cpu if faster_is_larger else cpu / here):.1f}x"


def table(r: dict[str, Any]) -> str:
    """measure | this device | CPU figure (2 cores) | speed-up, in Markdown. A CPU figure measured with other
    settings (chunking; batch, mini-batch, negatives) is shown as '-'."""
    ix, ft, v, a = r["indexing"], r["finetune"], r["vectors"], r["address"]
    same_chunks = (ix["chunk_size"], ix["overlap"]) == (CPU_INDEXING["chunk_size"], CPU_INDEXING["overlap"])
    same_ft = (ft["batch_size"], ft["mini_batch_size"], ft["negatives"]) == tuple(
        CPU_FINETUNE[k] for k in ("batch_size", "mini_batch_size", "negatives"))
    cps = CPU_INDEXING["chunks_per_s"] if same_chunks else None
    dps = CPU_INDEXING["documents_per_s"] if same_chunks else None
    cpu_step = CPU_FINETUNE["seconds"] / CPU_FINETUNE["steps"] if same_ft else None
    cpu_total = CPU_FINETUNE["seconds"] if same_ft and ft["steps"] == CPU_FINETUNE["steps"] else None
    where = r["environment"]["gpu"] or r["environment"]["device"]
    rows = [
        ("measure", f"this device ({where})", "CPU figure (2 cores)", "speed-up"),
        ("---", "---", "---", "---"),
        (f"indexing, chunks/s ({ix['chunks']} chunks, {ix['chunk_size']}/{ix['overlap']})", f"{ix['chunks_per_s']}",
         f"{cps or '-'}", _ratio(ix["chunks_per_s"], cps)),
        (f"indexing, documents/s ({ix['documents']} documents)", f"{ix['documents_per_s']}", f"{dps or '-'}",
         _ratio(ix["documents_per_s"], dps)),
        (f"fine-tune, {ft['steps']} steps of {ft['batch_size']}, s", f"{ft['seconds']}", f"{cpu_total or '-'}",
         _ratio(ft["seconds"], cpu_total, faster_is_larger=False)),
        ("fine-tune, s per step", f"{ft['seconds_per_step']}", f"{round(cpu_step, 2) if cpu_step else '-'}",
         _ratio(ft["seconds_per_step"], cpu_step, faster_is_larger=False)),
        (f"vectors against the CPU, min / mean cosine ({v['chunks']} chunks)",
         f"{v['min_cosine']:.6f} / {v['mean_cosine']:.6f}", f">= {TOLERANCE} (tolerance)",
         "pass" if v["ok"] else "FAIL"),
        ("index address, device config = CPU config", "same" if a["same"] else "DIFFERENT", "same",
         "pass" if a["same"] else "FAIL"),
    ]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from declrag.config import ChunkerConfig, EmbedderConfig, IngestConfig
    from declrag.golden import load_golden

    device = device_or_exit(args.device)
    result: dict[str, Any] = {"environment": environment(device), "cpu_figures": {"indexing": CPU_INDEXING,
                                                                                  "finetune": CPU_FINETUNE}}
    t_start = time.perf_counter()
    say(f"loading {args.dataset}")
    gs = load_golden(args.dataset)
    docs = gs.documents[: args.limit]
    ingest = IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=args.chunk_size, overlap=args.overlap),
                          embedder=EmbedderConfig(device=device, batch_size=args.embed_batch))
    home = tmp / "indexes"
    say(f"indexing {len(docs)} documents on {device} (cold embedding cache)")
    st, emb, result["indexing"] = index(docs, ingest, home)
    say(f"indexed {result['indexing']['chunks']} chunks in {result['indexing']['index_s']} s: "
        f"{result['indexing']['chunks_per_s']} chunks/s")
    say(f"embedding {min(args.sample, result['indexing']['chunks'])} chunks on {device} and on the CPU")
    result["vectors"] = vectors(docs, emb, ingest.chunker, args.sample, tmp)
    say("checking the index address with a CPU config")
    result["address"] = address(docs, ingest, home, st.uri)
    result["finetune"] = finetune(gs, st, emb, ingest, args, tmp / "tuned")
    st.close()
    result["wall_s"] = round(time.perf_counter() - t_start, 1)
    result["ok"] = result["vectors"]["ok"] and result["address"]["same"]
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="declrag-gpu-check-") as tmp_dir:
        tmp = Path(tmp_dir)
        # a fresh cache before declrag is imported (as tests/conftest.py does): every chunk reaches the model,
        # and nothing of this run stays behind
        for var, sub in (("DECLRAG_CACHE", "cache"), ("DECLRAG_STORE", "store"), ("DSPY_CACHEDIR", "dspy")):
            os.environ[var] = str(tmp / sub)
        result = run(args, tmp)
    print(table(result))
    print(f"\nwall {result['wall_s']} s; " + ("checks passed" if result["ok"] else "a check FAILED"))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        say(f"wrote {args.json}")
    return 0 if result["ok"] else FAILED


if __name__ == "__main__":
    sys.exit(main())
