"""`declrag bench answers`: how each way of answering does, on real golden sets.

The arms (`ARMS`): the generate modes (`declrag.config.GenerateConfig.mode`) ``lm`` (the LM writes, here the local
model), ``extractive`` (the passages' own sentences, no LM call, as it was before answers were typed: no type weight,
no headers, two sentences at most)
and ``verified`` (the LM writes; each sentence is checked against its passages and an unsupported one is
dropped or replaced); and two extractive arms that add one thing each: ``typed`` (sentences holding what the question
asks for score more: `declrag.pipeline.stages.generate.answer_kind`) and ``headers`` (typed, over an index whose chunks
carry
their document's title and section: ingest ``context: title+section``, `declrag.ingest.headers`); these three as they
were before answers read their documents' names (`BEFORE_NAMES`); ``names``, the default now: ``headers`` with
the detail rule reading each passage's whole document and quotes widened to whole sentences
(`declrag.config.ExtractConfig.document_names`, ``whole_sentences``); these four without a search within the
documents that a question names (`BEFORE_NAMED`, as the default); and ``named``: ``names`` with that search
(`declrag.config.RetrieveConfig.named`, off by default). Each runs the default program otherwise (k 5, hybrid, no
rerank), on the same seeded questions:

- SQuAD v2.0 dev: half answerable, half unanswerable questions, over the whole dev corpus;
- MTRAG-UN (the shared half): each task's last turn with its history, every answerability;
- the CMU Wikipedia QA set; nq-long (real search queries over 20 whole Wikipedia pages).

Scores: faithfulness and SIA (`declrag.metrics.grounding`), the reference answer contained in the answer
(``token_match``: 80% of a reference's tokens) and token F1, abstention precision and recall (an unanswerable
question is the positive), the abstention rate on answerable questions (MTRAG-UN's underspecified ones apart, as
``on_underspecified``: their reference is a clarifying question, so neither an answer nor an abstention is right
there), and latency: to the first token of the
answer after retrieval, and to the end. Each question runs through the serving path's stream
(`declrag.pipeline.stages.generate.astream`). Every arm is compared with the first one run on the same questions (paired
bootstrap 95% intervals).

The ``verified`` arm runs after ``lm`` and its LM call is answered by DSPy's cache with the very same completion,
so that the two arms differ only by the check; its latency is the ``lm`` arm's time to the end plus the check's own
time, for its first piece too (it streams only its checked answer, whole).
"""

from __future__ import annotations

import random
import time
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from declrag.config import EmbedderConfig, ExtractConfig, IngestConfig, LMConfig, ProgramConfig
from declrag.embed.embedder import Embedder
from declrag.golden import Example, load_golden
from declrag.ingest.corpus import corpus_store
from declrag.metrics.base import to_case
from declrag.metrics.catalog import get_metrics
from declrag.metrics.stats import mean_of, paired_difference, percentiles
from declrag.pipeline.program import RAGProgram
from declrag.pipeline.stages.generate._streaming import Done, astream

SETS = ("squad-v2.0", "mtrag-un", "cmu-qa", "nq-long")
TYPE_WEIGHT = ExtractConfig().type_weight or 0.2  # the typed arms' weight: the default's, or this were it off
# arm -> (generate mode, extract settings over the default's, ingest context, retrieve settings over the default's)
BEFORE_NAMES = {"document_names": False, "whole_sentences": False}  # the extractive arms as they were measured
BEFORE_NAMED = {"named": False}  # ... and their retrieval: without a search within the documents a question names
ARMS: dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]] = {
    "lm": ("lm", {}, "none", {}),
    "extractive": ("extractive", {"type_weight": 0.0, "max_sentences": 2, **BEFORE_NAMES}, "none", BEFORE_NAMED),
    "typed": ("extractive", {"type_weight": TYPE_WEIGHT, **BEFORE_NAMES}, "none", BEFORE_NAMED),
    "headers": ("extractive", {"type_weight": TYPE_WEIGHT, **BEFORE_NAMES}, "title+section", BEFORE_NAMED),
    "names": ("extractive", {"type_weight": TYPE_WEIGHT}, "title+section", BEFORE_NAMED),
    "named": ("extractive", {"type_weight": TYPE_WEIGHT}, "title+section", {"named": True}),
    "verified": ("verified", {}, "none", {}),
}
MODES = tuple(ARMS)
METRICS = ("faithfulness", "sia", "token_match", "f1")
RETRIEVAL_STAGES = ("history", "rewrite", "retrieve", "rerank", "select")


def _questions(name: str, n: int, seed: int) -> tuple[Any, list[Example]]:
    """The set and a seeded sample of ``n`` of its questions (SQuAD v2.0: half of them unanswerable)."""
    gs = load_golden(name)
    pool = gs.examples()
    rng = random.Random(seed)
    if name.startswith("squad-v2"):
        yes = [e for e in pool if e.answerable]
        no = [e for e in pool if not e.answerable]
        picked = rng.sample(yes, min(n - n // 2, len(yes))) + rng.sample(no, min(n // 2, len(no)))
    else:
        picked = rng.sample(pool, min(n, len(pool)))
    return gs, picked


async def _streamed(prog: RAGProgram, e: Example) -> tuple[Any, float, float]:
    """(answer, seconds to its first piece, seconds to the end), through the serving path's stream."""
    t0 = time.perf_counter()
    first = None
    async for item in astream(prog, lambda: prog(question=e.question, history=e.history or None)):
        if isinstance(item, Done):
            end = time.perf_counter() - t0
            return item.result, end if first is None else first, end
        if first is None and item:
            first = time.perf_counter() - t0
    raise RuntimeError("the stream ended without a result")


def _row(e: Example, a: Any, first_s: float, end_s: float, metrics: list) -> dict[str, Any]:
    ms = a.latency_ms
    retrieval_ms = sum(float(ms.get(k, 0.0)) for k in RETRIEVAL_STAGES)
    case = to_case(e, a)
    lm_ms = float(a.usage.get("generate", {}).get("lm_ms", 0.0) or 0.0)
    return {"id": e.id, "answerable": e.answerable, "abstained": bool(a.abstained), "answer": a.answer,
            "underspecified": (e.metadata or {}).get("answerability") == "UNDERSPECIFIED",
            **{m.name: m.score(case).value for m in metrics},
            "first_ms": round(1000 * first_s - retrieval_ms, 2), "end_ms": round(1000 * end_s, 2),
            "retrieval_ms": round(retrieval_ms, 2), "check_ms": round(float(ms.get("generate", 0.0)) - lm_ms, 2),
            "dropped": int(a.dropped_sentences), "lm_calls": int(a.usage["total"]["calls"]),
            "caught": (a.caught or {}).get("kind"), "replaced_by": (a.caught or {}).get("replaced_by"),
            "raw": a.raw_answer[:500] if a.caught else None}


def run_set(name: str, n: int, route: str, modes: list[str], seed: int = 0, progress: bool = True,
            embedding: EmbedderConfig | None = None) -> dict[str, Any]:
    gs, picked = _questions(name, n, seed)
    embedder = Embedder(embedding or IngestConfig().embedder)
    metrics = get_metrics(list(METRICS))
    order = [m for m in MODES if m in modes]  # lm before verified: verified reads lm's completions from the cache
    rows: dict[str, list[dict[str, Any]]] = {}
    for mode in order:
        gen, extract, context, retrieve = ARMS[mode]
        ingest = IngestConfig(context=context, embedder=embedder.config)
        store, _ = corpus_store(gs.documents, ingest, gs.name, embedder=embedder, progress=progress)
        cfg = ProgramConfig(ingest=ingest, lm=LMConfig(route=route), retrieve=retrieve,
                            generate={"mode": gen, "extract": ExtractConfig(**extract)})
        prog = RAGProgram(cfg, store=store, embedder=embedder).warm_up()
        rows[mode] = []
        for i, e in enumerate(picked):
            a, first_s, end_s = anyio.run(_streamed, prog, e)
            rows[mode].append(_row(e, a, first_s, end_s, metrics))
            if progress and (i + 1) % 10 == 0:
                print(f"  {name} {mode}: {i + 1}/{len(picked)}", flush=True)
    if "verified" in rows and "lm" in rows:  # its LM call was a cache hit: its time is lm's plus the check, and it
        for v, lm in zip(rows["verified"], rows["lm"]):  # sends its checked answer whole, so its first piece is its end
            if v["lm_calls"]:  # an abstention before the LM made no call: its times are its own
                v["first_ms"] = v["end_ms"] = round(lm["end_ms"] + max(v["check_ms"], 0.0), 2)
    return {"dataset": gs.name, "documents": len(gs.documents), "n": len(picked), "seed": seed, "route": route,
            "answerable": sum(e.answerable for e in picked), "against": order[0],
            "modes": {m: summary(rows[m], rows[order[0]]) for m in order},
            "rows": rows}


def summary(rows: list[dict[str, Any]], first: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Means, abstention precision and recall, latencies; and the paired difference from the first arm, per metric."""
    yes = [r for r in rows if r["answerable"] and not r.get("underspecified")]
    no = [r for r in rows if not r["answerable"]]
    vague = [r for r in rows if r.get("underspecified")]
    abstained = [r for r in rows if r["abstained"]]
    out: dict[str, Any] = {m: mean_of([r[m] for r in rows]) for m in METRICS}
    out["token_match_answerable"] = mean_of([r["token_match"] for r in rows if r["answerable"]])
    out["abstention"] = {
        "recall": round(sum(r["abstained"] for r in no) / len(no), 4) if no else None,
        "precision": round(sum(not r["answerable"] for r in abstained) / len(abstained), 4) if abstained else None,
        "on_answerable": round(sum(r["abstained"] for r in yes) / len(yes), 4) if yes else None,
        "n_unanswerable": len(no),
        "on_underspecified": round(sum(r["abstained"] for r in vague) / len(vague), 4) if vague else None}
    out["first_ms"] = percentiles([r["first_ms"] for r in rows], digits=1)
    out["end_ms"] = percentiles([r["end_ms"] for r in rows], digits=1)
    out["dropped_per_answer"] = mean_of([float(r["dropped"]) for r in rows])
    out["lm_calls_per_answer"] = mean_of([float(r["lm_calls"]) for r in rows])
    # the LM's raw outputs caught as an echo of the prompt or a copy of the passages, and what replaced them
    # (`declrag.pipeline.stages.generate`): none of them reached the answer
    out["caught"] = {"share": mean_of([float(r.get("caught") is not None) for r in rows]),
                     **{k: sum(r.get("caught") == k for r in rows) for k in ("echo", "copy", "empty")},
                     "replaced_by": {k: sum(r.get("replaced_by") == k for r in rows)
                                     for k in ("extractive", "retry", "abstention")}}
    if first is not None and first is not rows:
        out["vs_first"] = {m: paired_difference([r[m] for r in first], [r[m] for r in rows]) for m in METRICS}
    return out


def run(sets: list[str] | None = None, n: int = 40, route: str = "local/smollm2", modes: list[str] | None = None,
        seed: int = 0, progress: bool = True, embedding: EmbedderConfig | None = None) -> dict[str, Any]:
    """Each of ``sets`` (`SETS`): ``n`` questions answered by each of ``modes`` (`MODES`), the LM ones on ``route``;
    the corpus embedded with ``embedding`` (the default's)."""
    t0 = time.perf_counter()
    out = {"route": route, "n": n, "seed": seed,
           "embedder": (embedding or IngestConfig().embedder).model_dump(include={"model", "backend"}),
           "sets": {s: run_set(s, n, route, modes or list(MODES), seed, progress, embedding) for s in sets or SETS},
           "targets": {"extractive": {"faithfulness": 0.95, "sia": 0.90, "squad_v2_abstention_recall": 0.5,
                                      "squad_v2_abstention_on_answerable_max": 0.15, "first_ms_p50_max": 100.0},
                       "verified": {"sia": 0.85}}}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _f(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(d: dict[str, Any] | None) -> str:
    return "" if not d or d.get("diff") is None else f"\n{d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def _caught(c: dict[str, Any] | None) -> str:
    if not c or not (c["echo"] or c["copy"] or c.get("empty")):
        return "0"
    by = ", ".join(f"{k} {v}" for k, v in c["replaced_by"].items() if v)
    return f"{c['echo']} / {c['copy']} / {c.get('empty', 0)}\n({by})"


def print_report(r: dict[str, Any], console: Console) -> None:
    for s in r["sets"].values():
        t = Table(title=f"answers on {s['dataset']}: {s['n']} questions ({s['answerable']} answerable), LM "
                        f"{s['route']}, embedder {r.get('embedder', {}).get('model', 'the default')}; mean, and the "
                        f"paired difference from {s['against']} with its 95% interval")
        for col in ("mode", *METRICS, "abstention recall / precision / on answerable", "first token ms p50 / p95",
                    "end ms p50 / p95", "dropped", "LM calls", "caught: echo / copy / empty (replaced by)"):
            t.add_column(col)
        for mode, m in s["modes"].items():
            a = m["abstention"]
            t.add_row(mode, *[_f(m[k]) + _ci(m.get("vs_first", {}).get(k)) for k in METRICS],
                      f"{_f(a['recall'], 2)} / {_f(a['precision'], 2)} / {_f(a['on_answerable'], 2)}"
                      + (f"\nunderspecified {_f(u, 2)}" if (u := a.get("on_underspecified")) is not None else ""),
                      f"{_f(m['first_ms']['p50'], 1)} / {_f(m['first_ms']['p95'], 1)}",
                      f"{_f(m['end_ms']['p50'], 1)} / {_f(m['end_ms']['p95'], 1)}",
                      _f(m["dropped_per_answer"], 2), _f(m["lm_calls_per_answer"], 2), _caught(m.get("caught")))
        console.print(t)
    console.print(f"{r['wall_s']} s in all")
