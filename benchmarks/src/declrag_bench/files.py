"""`declrag bench files`: the default answer on a user's own files, asked the way users ask, naming the document.

The files are the project's own guides (``docs/guides``, every file indexed into one store, as `declrag index
docs/guides` does). The questions are hand-written (`benchmarks/data/docs-questions*.jsonl`): each names the guide it
is about ("in the Weaviate guide, ...") and has an exact short answer from it. ``docs-questions.jsonl`` (48 questions
over 8 guides) is the set the settings were looked at on; ``docs-questions-heldout.jsonl`` (24 over 4 other guides)
was written at the same time and only read to check them.

Arms, as in `declrag bench answers` (`declrag_bench.answers.ARMS`): the extractive answer as it was before document
headers and typed answers (``extractive``), with typed answers (``typed``), with both (``headers``), and the default
program as it is now (``default``: whatever the defaults say). Scores per question: the answer contains the reference
(normalised as SQuAD does), it abstains, and a top-5 passage contains the reference (retrieval's share); each arm
against the first, paired, with a 95% interval.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import ExtractConfig, IngestConfig, ProgramConfig, default_config
from declrag.embed import Embedder, cache_dir
from declrag.errors import DeclragError
from declrag.ingest.indexer import Indexer
from declrag.metrics.stats import mean_of, paired_difference
from declrag.pipeline.program import RAGProgram
from declrag.stores.base import StoreMeta
from declrag.stores.lancedb import LanceStore
from declrag.text import squad_normalize, strip_citations

from .answers import ARMS

ROOT = Path(__file__).resolve().parents[3]  # the checkout (this distribution is installed from one)
DATA = ROOT / "benchmarks" / "data"
SETS = (DATA / "docs-questions.jsonl", DATA / "docs-questions-heldout.jsonl")
FILES = ROOT / "docs" / "guides"
ORDER = ("extractive", "typed", "headers", "default")
SCORES = ("contains", "abstained", "retrieved")


def questions(path: Path) -> list[dict[str, Any]]:
    """The set's questions whose answer still occurs in its file (the guides change; the others are counted)."""
    if not path.is_file():
        raise DeclragError(f"no question set {path}", hint="give a JSONL of {id, file, question, answer} lines")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if (ROOT / r["file"]).is_file() and r["answer"] in (ROOT / r["file"]).read_text()]


def _store(ingest: IngestConfig, embedder: Embedder, progress: bool) -> LanceStore:
    """The guides indexed with ``ingest`` (kept under the cache and brought up to date incrementally)."""
    store = LanceStore(cache_dir() / "bench-files" / ingest.digest())
    if store.read_meta() is None:
        store.create(StoreMeta(ingest=ingest))
    Indexer(store, ingest, embedder, progress=progress).index_paths([FILES], prune=True)
    return store


def _arm(arm: str, embedder: Embedder, progress: bool) -> RAGProgram:
    if arm == "default":
        ingest = IngestConfig()
        return RAGProgram(default_config(ProgramConfig(ingest=ingest)), store=_store(ingest, embedder, progress),
                          embedder=embedder)
    _, extract, context = ARMS[arm]
    ingest = IngestConfig(context=context)
    cfg = ProgramConfig(ingest=ingest, generate={"mode": "extractive", "extract": ExtractConfig(**extract)})
    return RAGProgram(cfg, store=_store(ingest, embedder, progress), embedder=embedder)


def _row(prog: RAGProgram, q: dict[str, Any]) -> dict[str, Any]:
    a = prog(question=q["question"])
    ref = squad_normalize(q["answer"])
    return {"id": q["id"], "answer": a.answer, "abstained": float(a.abstained),
            "contains": float(not a.abstained and ref in squad_normalize(strip_citations(a.answer))),
            "retrieved": float(any(ref in squad_normalize(p.text) for p in a.passages[:5]))}


def run(sets: list[Path] | None = None, progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    asked = {path.name: questions(path) for path in sets or list(SETS)}  # a missing set fails before any work
    embedder = Embedder(IngestConfig().embedder)
    progs = {arm: _arm(arm, embedder, progress) for arm in ORDER}
    out: dict[str, Any] = {"files": str(FILES.relative_to(ROOT)), "sets": {}}
    for name, qs in asked.items():
        rows = {arm: [_row(prog, q) for q in qs] for arm, prog in progs.items()}
        first = rows[ORDER[0]]
        out["sets"][name] = {
            "questions": len(qs), "arms": {arm: {
                **{s: mean_of([r[s] for r in rs]) for s in SCORES},
                "vs_first": {s: paired_difference([r[s] for r in first], [r[s] for r in rs]) for s in SCORES}}
                for arm, rs in rows.items()},
            "rows": rows}
    out["targets"] = {"contains_min": 0.60, "abstained_max": 0.15}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _vs(d: dict[str, Any], first: bool) -> str:
    return "" if first or d["diff"] is None else f"\n{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def print_report(r: dict[str, Any], console: Console) -> None:
    for name, s in r["sets"].items():
        t = Table(title=f"the default answer on declrag's own guides ({r['files']}), {s['questions']} questions "
                        f"of {name} naming their guide; each arm against {ORDER[0]}, paired, 95% interval")
        for col in ("arm", *SCORES):
            t.add_column(col)
        for arm, a in s["arms"].items():
            t.add_row(arm, *(f"{a[k]:.3f}" + _vs(a["vs_first"][k], arm == ORDER[0]) for k in SCORES))
        console.print(t)
    console.print(f"targets: contains >= {r['targets']['contains_min']}, abstains <= {r['targets']['abstained_max']}; "
                  f"{r['wall_s']} s in all")
