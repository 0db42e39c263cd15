"""`declrag bench files`: the default answer on a user's own files, asked the way users ask, naming the document.

The files are a folder (``--files``; a set's ``file`` is then the file's path under it, and ``answer`` null marks a
question about a document the folder does not hold, which should be refused), by default the project's own guides
(``docs/guides``, every file indexed into one store, as `declrag index docs/guides` does). The questions are
hand-written (`benchmarks/data/docs-questions*.jsonl`): each names the guide it is about ("in the Weaviate guide,
...") and has an exact short answer from it. ``docs-questions.jsonl`` (48 questions over 8 guides) is the set the
settings were looked at on; ``docs-questions-heldout.jsonl`` (24 over 4 other guides) was written at the same time and
only read to check them.

Arms, as in `declrag bench answers` (`declrag_bench.answers.ARMS`): the extractive answer as it was before document
headers and typed answers (``extractive``), with typed answers (``typed``), with both (``headers``), the default
program as it is now (``default``: whatever the defaults say), the default with a search within the documents a
question names (``named``: `declrag.config.RetrieveConfig.named`), and the default with the document-level retrieval
signal (``documents``: `declrag.config.RetrieveConfig.documents` at `DOCUMENTS`). Scores per question: the answer
contains the reference (normalised as SQuAD does), it abstains, and a top-5 passage contains the reference
(retrieval's share); each arm against the first, paired, with a 95% interval.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from declrag.config import ExtractConfig, IngestConfig, ProgramConfig, default_config
from declrag.embed.embedder import Embedder
from declrag.errors import DeclragError
from declrag.ingest.indexer import Indexer
from declrag.metrics.stats import mean_of, paired_difference
from declrag.pipeline.program import RAGProgram
from declrag.runtime.folders import cache_dir
from declrag.stores._lancedb import LanceStore
from declrag.stores.base import StoreMeta
from declrag.text.normalize import squad_normalize, strip_citations

from .answers import ARMS

ROOT = Path(__file__).resolve().parents[3]  # the checkout (this distribution is installed from one)
DATA = ROOT / "benchmarks" / "data"
SETS = (DATA / "docs-questions.jsonl", DATA / "docs-questions-heldout.jsonl")
FILES = ROOT / "docs" / "guides"
ORDER = ("extractive", "typed", "headers", "default", "documents", "named")
DOCUMENTS = 0.3  # the documents arm's weight of the document-level signal (`declrag.pipeline.stages.retrieve`)
RETRIEVAL_ARMS: dict[str, dict[str, Any]] = {  # the default program, these retrieve settings over its own
    "default": {}, "documents": {"documents": DOCUMENTS}, "named": {"named": True}}
SCORES = ("contains", "abstained", "retrieved")


def questions(path: Path, base: Path | None = None) -> list[dict[str, Any]]:
    """The set's questions whose answer still occurs in its file (``file``, under ``base``, by default the checkout;
    the guides change, the others are counted), and those with no answer (``answer``: null; a document the files do
    not hold)."""
    if not path.is_file():
        raise DeclragError(f"no question set {path}", hint="give a JSONL of {id, file, question, answer} lines")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    base = base or ROOT
    return [r for r in rows if r["answer"] is None
            or (base / r["file"]).is_file() and r["answer"] in (base / r["file"]).read_text()]


def _store(files: Path, ingest: IngestConfig, embedder: Embedder, progress: bool) -> LanceStore:
    """The folder ``files`` indexed with ``ingest`` (kept under the cache and brought up to date incrementally)."""
    store = LanceStore(cache_dir() / "bench-files" / f"{files.name}-{ingest.digest()}")
    if store.read_meta() is None:
        store.create(StoreMeta(ingest=ingest))
    Indexer(store, ingest, embedder, progress=progress).index_paths([files], prune=True)
    return store


def _arm(arm: str, files: Path, embedder: Embedder, progress: bool) -> RAGProgram:
    if arm in RETRIEVAL_ARMS:
        ingest = IngestConfig()
        cfg = default_config(ProgramConfig(ingest=ingest))
        cfg = cfg.model_copy(update={"retrieve": cfg.retrieve.model_copy(update=RETRIEVAL_ARMS[arm])})
        return RAGProgram(cfg, store=_store(files, ingest, embedder, progress), embedder=embedder)
    _, extract, context, retrieve = ARMS[arm]
    ingest = IngestConfig(context=context)
    cfg = ProgramConfig(ingest=ingest, retrieve=retrieve,
                        generate={"mode": "extractive", "extract": ExtractConfig(**extract)})
    return RAGProgram(cfg, store=_store(files, ingest, embedder, progress), embedder=embedder)


def _row(prog: RAGProgram, q: dict[str, Any]) -> dict[str, Any]:
    a = prog(question=q["question"])
    if q["answer"] is None:
        return {"id": q["id"], "answer": a.answer, "abstained": float(a.abstained), "reason": a.reason}
    ref = squad_normalize(q["answer"])
    return {"id": q["id"], "answer": a.answer, "abstained": float(a.abstained), "reason": a.reason,
            "contains": float(not a.abstained and ref in squad_normalize(strip_citations(a.answer))),
            "retrieved": float(any(ref in squad_normalize(p.text) for p in a.passages[:5]))}


def run(sets: list[Path] | None = None, progress: bool = True, files: Path | None = None,
        arms: list[str] | None = None) -> dict[str, Any]:
    """Each set's questions asked of each arm (``arms``, default `ORDER`) over the folder ``files`` (default the
    guides; a set's ``file`` is then under the checkout, else under ``files``)."""
    t0 = time.perf_counter()
    folder = files or FILES
    asked = {path.name: questions(path, files and folder) for path in sets or list(SETS)}
    embedder = Embedder(IngestConfig().embedder)
    order = [a for a in ORDER if a in (arms or ORDER)]
    progs = {arm: _arm(arm, folder, embedder, progress) for arm in order}
    out: dict[str, Any] = {"files": str(folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder),
                           "sets": {}}
    for name, qs in asked.items():
        rows = {arm: [_row(prog, q) for q in qs] for arm, prog in progs.items()}
        out["sets"][name] = _scored(rows, order[0], [q["answer"] is None for q in qs])
    out["targets"] = {"contains_min": 0.60, "abstained_max": 0.15}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _scored(rows: dict[str, list[dict[str, Any]]], lead: str, unheld: list[bool]) -> dict[str, Any]:
    """Each arm's means over the answerable questions, paired against ``lead``'s, and the share of the questions
    about a document the files do not hold that it refused (``refused``)."""
    held = {arm: [r for r, u in zip(rs, unheld) if not u] for arm, rs in rows.items()}
    out: dict[str, Any] = {"questions": len(held[lead]), "unheld": sum(unheld), "arms": {}, "rows": rows}
    for arm, rs in held.items():
        out["arms"][arm] = {
            **{s: mean_of([r[s] for r in rs]) for s in SCORES},
            "vs_first": {s: paired_difference([r[s] for r in held[lead]], [r[s] for r in rs]) for s in SCORES},
            "refused": mean_of([r["abstained"] for r, u in zip(rows[arm], unheld) if u]) if any(unheld) else None}
    return out


def _vs(d: dict[str, Any], first: bool) -> str:
    return "" if first or d["diff"] is None else f"\n{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def print_report(r: dict[str, Any], console: Console) -> None:
    for name, s in r["sets"].items():
        lead = next(iter(s["arms"]))
        unheld = s.get("unheld", 0)
        t = Table(title=f"the default answer on the files of {r['files']}, {s['questions']} questions of {name} "
                        f"naming their document; each arm against {lead}, paired, 95% interval"
                        + (f"; refused: of {unheld} questions naming a document the files do not hold" if unheld
                           else ""))
        for col in ("arm", *SCORES, *(["refused"] if unheld else [])):
            t.add_column(col)
        for arm, a in s["arms"].items():
            t.add_row(arm, *(f"{a[k]:.3f}" + _vs(a["vs_first"][k], arm == lead) for k in SCORES),
                      *([f"{a['refused']:.3f}"] if unheld else []))
        console.print(t)
    console.print(f"targets: contains >= {r['targets']['contains_min']}, abstains <= {r['targets']['abstained_max']}; "
                  f"{r['wall_s']} s in all")
