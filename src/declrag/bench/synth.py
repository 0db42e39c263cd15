"""`declrag bench synth`: does a synthetic set rank retrieval configurations as the real golden set does, and
can it stand in for the real set in compile and fine-tuning?

On a set that has real questions, a synthetic set is made from its corpus only (`declrag.synth`), then:

- **ranking**: 18 retrieval configurations (keyword, vector, hybrid at alpha 0.25 / 0.5 / 0.75 with both fusions,
  and hybrid 0.5 with BM25 rerank of the top 50 chunks, each at chunk sizes 256 and 512) are scored by nDCG@10
  on the synthetic questions and on the real ones, over the same indexes (both sets' gold ids are the corpus's
  own). Kendall tau between the two orderings is reported with a bootstrap interval (queries of both sets
  resampled), for the synthetic set's judged gold and for seed-only gold (only the document a question was
  written from counts), as published evidence says the difference matters (tau 0.157 seed-only vs 0.82-0.86
  judged, Rahmani et al., SIGIR 2024); then again with each filter switched off in turn (a round-trip filter
  keeps only what retrieval already finds, which can flatten the ranking). The grader that judges the synthetic
  set's pools is run on the real questions too and compared with their real judgements; the duplicates left
  after filtering are measured below the filter's own threshold.
- **compile**: `optimizers/retrieval.yaml` is compiled on the synthetic set and on the real set (same trial
  budget); both chosen programs are scored on the real held-out test split, with a paired interval.
- **fine-tune**: `optimizers/retrieval-finetune.yaml` is compiled on the synthetic set alone (its train split
  trains the embedder: no real label is read), and the tuned and base embedders are scored on the real test
  split with a paired interval, whatever the compile's own dev check decided.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import kendalltau
from tqdm.auto import tqdm

from ..api import corpus_store
from ..config import ChunkerConfig, IngestConfig, ProgramConfig, RerankConfig
from ..embed import Embedder, cache_dir
from ..golden import Example, GoldenSet, load_golden
from ..metrics.retrieval import doc_ranking, ndcg_at_k
from ..metrics.stats import paired_difference
from ..modules import Reranker
from ..synth.filters import FILTERS, QueryVectors, duplicate_share, grader_agreement, reason_filter

CHUNK_SIZES = (256, 512)
LEGS: tuple[tuple[str, float | None, str, bool], ...] = (
    ("keyword", None, "", False), ("vector", None, "", False),
    *(("hybrid", a, f, False) for a in (0.25, 0.5, 0.75) for f in ("relative", "ranked")),
    ("hybrid", 0.5, "relative", True))
DEPTH = 100  # chunks retrieved per query (documents ranked by their best chunk)
RERANK_TOP = 50  # chunks the BM25 reranker reorders
BM25_RERANK = Reranker(RerankConfig(mode="bm25"))
BOOTSTRAP = 1000
ARMS = ("ablations", "compile", "finetune")  # besides the ranking, which always runs
DUPLICATE_COSINE = 0.9  # duplicates left after filtering are counted below the filter's own threshold


def configs() -> list[dict[str, Any]]:
    return [{"chunk_size": cs, "mode": m, "alpha": a, "fusion": f, "rerank": r}
            for cs in CHUNK_SIZES for m, a, f, r in LEGS]


def label(c: dict[str, Any]) -> str:
    leg = c["mode"] if c["mode"] != "hybrid" else f"hybrid a={c['alpha']} {c['fusion']}"
    return f"{leg}{' + bm25 rerank' if c.get('rerank') else ''} @{c['chunk_size']}"


def _scores(store, vecs: np.ndarray, examples: list[Example], golds: list[dict[str, int]],
            cfgs: list[dict[str, Any]], progress: bool, what: str) -> np.ndarray:
    """nDCG@10 per (configuration, query); ``vecs``: the questions' embeddings."""
    out = np.zeros((len(cfgs), len(examples)))
    for j, (e, v) in enumerate(tqdm(list(zip(examples, vecs)), desc=what, unit="q", disable=not progress)):
        for i, c in enumerate(cfgs):
            if c["mode"] == "keyword":
                hits = store.keyword_search(e.question, DEPTH)
            elif c["mode"] == "vector":
                hits = store.vector_search(v, DEPTH)
            else:
                hits = store.hybrid_search(e.question, v, DEPTH, c["alpha"], c["fusion"])
            if c.get("rerank"):  # the program's own BM25 reranker over the top candidates
                hits = BM25_RERANK(question=e.question, hits=hits[:RERANK_TOP]) + hits[RERANK_TOP:]
            out[i, j] = ndcg_at_k(doc_ranking(h.doc_id for h in hits), golds[j], 10)
    return out


def tau_with_interval(a: np.ndarray, b: np.ndarray, seed: int = 13, rounds: int = BOOTSTRAP) -> dict[str, Any]:
    """Kendall tau between the configurations' mean scores on two query sets (rows: configurations, columns:
    queries), and its 95% bootstrap interval (each set's queries resampled with replacement)."""
    tau = float(kendalltau(a.mean(axis=1), b.mean(axis=1)).statistic)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(rounds):
        ia, ib = rng.integers(0, a.shape[1], a.shape[1]), rng.integers(0, b.shape[1], b.shape[1])
        t = kendalltau(a[:, ia].mean(axis=1), b[:, ib].mean(axis=1)).statistic
        if not np.isnan(t):
            taus.append(float(t))
    lo, hi = np.percentile(taus, [2.5, 97.5]) if taus else (float("nan"), float("nan"))
    return {"tau": round(tau, 3), "ci95": [round(float(lo), 3), round(float(hi), 3)]}


def _examples(folder: Path) -> list[Example]:
    syn = load_golden(str(folder))
    return [e for s in syn.splits.values() for e in s if e.gold]  # every split: no tuning happens here


def run(dataset: str, model: str | None = None, n: int = 300, seed: int = 13, real_split: str | None = None,
        real_limit: int = 1000, out: Path | None = None, progress: bool = True, arms: Collection[str] = ARMS,
        trials: int = 30, space: str = "retrieval", finetune_space: str = "retrieval-finetune") -> dict[str, Any]:
    """The measurements above; ``arms`` picks the optional ones, ``trials`` is each compile's trial budget."""
    from ..synth import synthesize

    t0 = time.perf_counter()
    gs = load_golden(dataset)
    split = real_split or ("test" if "test" in gs.splits else next(iter(gs.splits)))
    real = [e for e in gs.split(split) if e.gold]
    if len(real) > real_limit:  # a seeded sample: every configuration scores the same questions
        real = [real[i] for i in sorted(random.Random(seed).sample(range(len(real)), real_limit))]
    folder = out or cache_dir() / "bench-synth" / f"{gs.name}-{(model or 'none').replace('/', '_')}-{n}-{seed}"
    embedder = Embedder()  # one model for generation, the filters and the scoring
    report = synthesize(gs.documents, folder, n, model=model, seed=seed, force=True, embedder=embedder,
                        progress=progress)
    synthetic = _examples(folder)
    cfgs = configs()
    vectors = QueryVectors(embedder)  # each question embedded once: the chunk size does not change it
    stores = {cs: corpus_store(gs.documents, IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=cs,
                                                                                overlap=cs // 8)),
                               gs.name, embedder=embedder, progress=progress)[0] for cs in CHUNK_SIZES}

    def score_set(examples: list[Example], golds: list[dict[str, int]], what: str) -> np.ndarray:
        vecs = vectors.embed_queries([e.question for e in examples])
        scores = np.zeros((len(cfgs), len(examples)))
        for cs, store in stores.items():
            rows = [i for i, c in enumerate(cfgs) if c["chunk_size"] == cs]
            scores[rows] = _scores(store, vecs, examples, golds, [cfgs[i] for i in rows], progress, f"{what} @{cs}")
        return scores

    real_scores = score_set(real, [e.gold for e in real], "real")
    syn_scores = score_set(synthetic, [e.gold for e in synthetic], "synthetic")
    seed_scores = score_set(synthetic, [{e.metadata["source_doc"]: 1} for e in synthetic], "seed-only")
    with_answers = [e for e in real if e.answers]
    by_id = {d.id: d.text for d in gs.documents}
    agreement = grader_agreement([e.question for e in with_answers], [e.answers for e in with_answers],
                                 [e.gold for e in with_answers], stores[CHUNK_SIZES[-1]], vectors,
                                 by_id.__getitem__) if with_answers else None
    result: dict[str, Any] = {
        "dataset": gs.name, "real_split": split, "real_questions": len(real), "synthetic_questions": len(synthetic),
        "generator": report.generator, "seed": seed, "n": n,
        "synth": {"removed": report.removed, "kept": report.kept, "judged_gold_added": report.judged_gold_added,
                  "lm": report.lm, "wall_s": report.wall_s},
        "duplicates_after_filtering": duplicate_share([e.question for e in synthetic], vectors, DUPLICATE_COSINE),
        "configs": [{"config": label(c), "real": round(float(r.mean()), 4), "synthetic": round(float(s.mean()), 4),
                     "synthetic_seed_only": round(float(o.mean()), 4)}
                    for c, r, s, o in zip(cfgs, real_scores, syn_scores, seed_scores)],
        "grader_vs_qrels": agreement,
        "kendall_tau": {"judged_gold": tau_with_interval(syn_scores, real_scores, seed),
                        "seed_only_gold": tau_with_interval(seed_scores, real_scores, seed)},
    }
    if "ablations" in arms:  # the same generation, each filter switched off in turn
        result["filters_off"] = {}
        for f in FILTERS:
            off = folder.with_name(f"{folder.name}-no-{f}")
            r = synthesize(gs.documents, off, n, model=model, seed=seed, force=True, skip=(f,), embedder=embedder,
                           progress=progress)
            exs = _examples(off)
            result["filters_off"][f] = {"questions": len(exs), "removed": r.removed,
                                        "kendall_tau": tau_with_interval(
                                            score_set(exs, [e.gold for e in exs], f"no {f}"), real_scores, seed)}
    if {"compile", "finetune"} & set(arms):
        runs = folder.with_name(f"{folder.name}-runs")
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir(parents=True)
        if "compile" in arms:
            result["compile"] = compile_arm(gs, dataset, folder, runs, _capped(space, runs, real_limit), trials,
                                            progress)
        if "finetune" in arms:
            result["finetune"] = finetune_arm(gs, folder, runs,
                                              _capped(finetune_space, runs, real_limit), trials, progress)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    return result


def _capped(space: str, runs: Path, max_dev: int) -> str:
    """The space with its dev set capped at ``max_dev`` questions (a seeded sample, as `split.max_dev` does), so
    that a large real set (SQuAD: 7,399 dev questions) costs each trial what the synthetic set's does."""
    import yaml

    from ..optimize.space import read_space

    sp = read_space(space)
    if sp.split.max_dev is not None and sp.split.max_dev <= max_dev:
        return space
    capped = sp.model_copy(update={"split": sp.split.model_copy(update={"max_dev": max_dev})})
    path = runs / f"{sp.name}.yaml"
    path.write_text(yaml.safe_dump(capped.model_dump(mode="json", exclude_none=True), sort_keys=False))
    return str(path)


def _real_test(golden: GoldenSet, space: str, runs: Path, progress: bool):
    """A compiler over the real set, for scoring programs on its held-out test split (the split its own compile
    holds out: the same seeded cut)."""
    from ..optimize.compile import Budget, Compiler
    from ..optimize.space import read_space

    comp = Compiler(read_space(space), golden, runs / "scoring", Budget(), progress=progress)
    return comp, comp.splits["test"]


def compile_arm(golden: GoldenSet, dataset: str, synthetic: Path, runs: Path, space: str, trials: int,
                progress: bool) -> dict[str, Any]:
    """``space`` compiled on the synthetic set and on the real one (``golden``, named ``dataset``); the chosen
    programs scored on real test."""
    from ..optimize.compile import Budget
    from ..optimize.run import compile_run, score

    out: dict[str, Any] = {"space": Path(space).stem, "trials": trials}
    chosen = {}
    for name, data in (("synthetic", str(synthetic)), ("real", dataset)):
        summary = compile_run(space, data, f"compile-{name}", runs=runs, budget=Budget(max_trials=trials),
                              progress=progress)
        chosen[name] = ProgramConfig.model_validate(summary["best"]["config"])
        out[name] = {"params": summary["best"]["params"], "dev": summary["best"]["dev"].get("objective")}
    comp, test = _real_test(golden, space, runs, progress)
    per_q = {}
    for name, cfg in chosen.items():
        means, per_q[name] = score(comp, comp.program_for(cfg), test, f"real test, compiled on {name}")
        out[name]["real_test"] = round(means["objective"], 4)
    out["real_test_questions"] = len(test)
    out["synthetic_minus_real"] = paired_difference(per_q["real"], per_q["synthetic"])
    return out


def finetune_arm(golden: GoldenSet, synthetic: Path, runs: Path, space: str, trials: int,
                 progress: bool) -> dict[str, Any]:
    """``space`` (with its fine-tune stage) compiled on the synthetic set alone; the base and the tuned embedder
    scored on the real test split."""
    from ..optimize.compile import Budget
    from ..optimize.run import compile_run, score

    summary = compile_run(space, str(synthetic), "finetune-synthetic", runs=runs, budget=Budget(max_trials=trials),
                          progress=progress)
    info = summary["finetune"]
    out: dict[str, Any] = {"space": Path(space).stem, "trials": trials, "params": summary["best"]["params"],
                           "pairs": info.get("pairs"), "training": info.get("training"),
                           "kept_by_synthetic_dev": info.get("kept"), "synthetic_dev": info.get("dev")}
    if "skipped" in info or "training" not in info:
        out["skipped"] = info.get("skipped", "no fine-tune ran")
        return out
    cfg = ProgramConfig.model_validate(summary["best"]["config"])
    e = cfg.ingest.embedder
    base_emb = e.model_copy(update={"model": info["base_model"], "weights": None})
    tuned_emb = e.model_copy(update={"model": str((runs / "finetune-synthetic" / "finetune" / "embedder").resolve()),
                                     "weights": info["training"]["sha256"]})
    comp, test = _real_test(golden, space, runs, progress)
    per_q, means = {}, {}
    for name, emb in (("base", base_emb), ("tuned", tuned_emb)):
        c = cfg.model_copy(update={"ingest": cfg.ingest.model_copy(update={"embedder": emb})})
        m, per_q[name] = score(comp, comp.program_for(c), test, f"real test, {name} embedder")
        means[name] = {k: round(v, 4) for k, v in m.items() if isinstance(v, float)}
    out.update(real_test=means, real_test_questions=len(test), gain=paired_difference(per_q["base"], per_q["tuned"]))
    return out


def _ci(d: dict[str, Any]) -> str:
    return f"{d['diff']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]" if d.get("diff") is not None else "n/a"


def print_report(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"{r['dataset']}: nDCG@10 of {len(r['configs'])} retrieval configurations on "
                    f"{r['real_questions']} real ({r['real_split']}) and {r['synthetic_questions']} synthetic "
                    f"questions ({r['generator']})")
    for col in ("configuration", "real", "synthetic", "synthetic, seed-only gold"):
        t.add_column(col, justify="left" if col == "configuration" else "right")
    for c in r["configs"]:
        t.add_row(c["config"], f"{c['real']:.4f}", f"{c['synthetic']:.4f}", f"{c['synthetic_seed_only']:.4f}")
    console.print(t)
    taus = Table(title="Kendall tau between the synthetic and the real ordering, 95% bootstrap interval")
    for col in ("synthetic set", "questions", "the filter removed", "tau", "interval"):
        taus.add_column(col, justify="left" if col == "synthetic set" else "right")
    for k, v in r["kendall_tau"].items():
        taus.add_row(f"all filters, {k.replace('_', ' ')}", str(r["synthetic_questions"]), "",
                     f"{v['tau']:+.3f}", f"[{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]")
    for f, v in r.get("filters_off", {}).items():
        k = v["kendall_tau"]
        removed = sum(c for reason, c in r["synth"]["removed"].items() if reason_filter(reason) == f)
        taus.add_row(f"{f} filter off, judged gold", str(v["questions"]), str(removed), f"{k['tau']:+.3f}",
                     f"[{k['ci95'][0]:+.3f}, {k['ci95'][1]:+.3f}]")
    console.print(taus)
    if g := r.get("grader_vs_qrels"):
        console.print(f"the answer-in-document grader against the real qrels, on the pools of {g['questions']} real "
                      f"questions: precision {g['precision']}, recall {g['recall']}")
    d = r["duplicates_after_filtering"]
    console.print(f"duplicates left after filtering: {d['exact']:.1%} exact, {d['near']:.1%} at cosine >= "
                  f"{d['cosine']} (of {d['questions']})")
    if c := r.get("compile"):
        console.print(f"compile {c['space']} ({c['trials']} trials each), scored on {c['real_test_questions']} real "
                      f"test questions: compiled on the synthetic set {c['synthetic']['real_test']:.4f}, on the real "
                      f"set {c['real']['real_test']:.4f}; synthetic - real {_ci(c['synthetic_minus_real'])}")
    if f := r.get("finetune"):
        if "skipped" in f:
            console.print(f"fine-tune on the synthetic set: skipped ({f['skipped']})")
        else:
            console.print(f"fine-tune on the synthetic train split ({f['training'].get('steps')} steps), scored on "
                          f"{f['real_test_questions']} real test questions: nDCG@10 base "
                          f"{f['real_test']['base']['objective']:.4f}, tuned {f['real_test']['tuned']['objective']:.4f}"
                          f"; tuned - base {_ci(f['gain'])}")
    console.print(f"{r['wall_s']} s")
