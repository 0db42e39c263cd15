"""`declrag bench synth`: which question writer makes synthetic sets that rank retrieval configurations as the
real golden set does, and can a compile on such a set stand in for one on real labels?

On a set that has real questions, a synthetic set is made from its corpus only (`declrag.synth`) by each generator
asked for (``ict``, ``cloze``, ``keywords``, and ``inpars`` / ``lm`` on an LM route), then:

- **ranking**: 18 retrieval configurations (keyword, vector, hybrid at alpha 0.25 / 0.5 / 0.75 with both fusions,
  and hybrid 0.5 with BM25 rerank of the top 50 chunks, each at chunk sizes 256 and 512) are scored by nDCG@10
  on the synthetic questions and on the real ones, each question in its unit (`declrag.metrics.passages`: over
  passages where it has gold spans or short answers, else over documents), so that chunk sizes are scored on one
  truth. A set made by the inverse cloze is scored over its own copy of the corpus (its sentences removed); the
  others over the corpus itself. Kendall tau between the two orderings is reported with a bootstrap interval
  (queries of both sets resampled), for judged gold and seed-only gold (only the document a question was written
  from counts; they differ for LM questions on whole documents), as published evidence says the difference
  matters (tau 0.157 seed-only vs 0.82-0.86 judged, Rahmani et al., SIGIR 2024); with the ``ablations`` arm, again
  with each filter switched off in turn. Per generator: questions kept, LM calls, usable questions per call,
  seconds per question.
- **compile**: `optimizers/retrieval.yaml` is compiled on each synthetic set (`declrag.optimize._select` decides
  what ships) and once on the real set (same trial budget); the shipped programs and the default program
  are scored on the real held-out test split, with paired intervals.
- **fine-tune**: `optimizers/retrieval-finetune.yaml` is compiled on the first generator's set alone (its train
  split trains the embedder: no real label is read), and the tuned and base embedders are scored on the real test
  split with a paired interval, whatever the compile's own dev check decided.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from declrag.config import ChunkerConfig, IngestConfig, ProgramConfig, RerankConfig
from declrag.embed.embedder import Embedder
from declrag.errors import DeclragError
from declrag.golden import Example, GoldenSet, load_golden
from declrag.ingest.corpus import corpus_store
from declrag.metrics.passages import passage_scores, unit_of
from declrag.metrics.stats import paired_difference, tau_with_interval
from declrag.pipeline.stages import Reranker
from declrag.runtime.folders import cache_dir
from declrag.synth import synthesize
from declrag.synth._filters import FILTERS, QueryVectors, duplicate_share, grader_agreement, reason_filter
from declrag.types import content_hash

CHUNK_SIZES = (256, 512)
LEGS: tuple[tuple[str, float | None, str, bool], ...] = (
    ("keyword", None, "", False), ("vector", None, "", False),
    *(("hybrid", a, f, False) for a in (0.25, 0.5, 0.75) for f in ("relative", "ranked")),
    ("hybrid", 0.5, "relative", True))
DEPTH = 100  # chunks retrieved per query (documents ranked by their best chunk)
RERANK_TOP = 50  # chunks the BM25 reranker reorders
BM25_RERANK = Reranker(RerankConfig(mode="bm25"))
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
    """nDCG@10 per (configuration, query), each query in its unit (passages or documents); ``vecs``: the
    questions' embeddings; ``golds``: the gold documents to score against (judged or seed-only)."""
    out = np.zeros((len(cfgs), len(examples)))
    for j, (e, v) in enumerate(tqdm(list(zip(examples, vecs)), desc=what, unit="q", disable=not progress)):
        spans = list(e.gold_spans())
        for i, c in enumerate(cfgs):
            if c["mode"] == "keyword":
                hits = store.keyword_search(e.question, DEPTH)
            elif c["mode"] == "vector":
                hits = store.vector_search(v, DEPTH)
            else:
                hits = store.hybrid_search(e.question, v, DEPTH, c["alpha"], c["fusion"])
            if c.get("rerank"):  # the program's own BM25 reranker over the top candidates
                hits = BM25_RERANK(question=e.question, hits=hits[:RERANK_TOP]) + hits[RERANK_TOP:]
            scored = passage_scores(hits, spans, e.answers, golds[j], ["ndcg@10"])
            out[i, j] = scored[0]["ndcg@10"] if scored else 0.0
    return out


def _examples(folder: Path) -> tuple[list[Example], GoldenSet]:
    syn = load_golden(str(folder))
    return [e for s in syn.splits.values() for e in s if e.gold], syn  # every split: no tuning happens here


class _Scorer:
    """Scores question sets under every configuration, over indexes of a corpus (built once per corpus)."""

    def __init__(self, name: str, embedder: Embedder, progress: bool):
        self.name, self.embedder, self.progress = name, embedder, progress
        self.vectors = QueryVectors(embedder)  # each question embedded once: the chunk size does not change it
        self.cfgs = configs()
        self._stores: dict[str, dict[int, Any]] = {}

    def stores(self, docs: list) -> dict[int, Any]:
        key = content_hash(*sorted(d.hash for d in docs))
        if key not in self._stores:
            self._stores[key] = {cs: corpus_store(docs, IngestConfig(chunker=ChunkerConfig(
                name="fixed", chunk_size=cs, overlap=cs // 8)), self.name, embedder=self.embedder,
                progress=self.progress)[0] for cs in CHUNK_SIZES}
        return self._stores[key]

    def __call__(self, docs: list, examples: list[Example], golds: list[dict[str, int]], what: str) -> np.ndarray:
        vecs = self.vectors.embed_queries([e.question for e in examples])
        scores = np.zeros((len(self.cfgs), len(examples)))
        for cs, store in self.stores(docs).items():
            rows = [i for i, c in enumerate(self.cfgs) if c["chunk_size"] == cs]
            scores[rows] = _scores(store, vecs, examples, golds, [self.cfgs[i] for i in rows], self.progress,
                                   f"{what} @{cs}")
        return scores


def parse_generator(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME:ROUTE`` (``inpars:local/gemma3-270m``) -> (name, route or None)."""
    from declrag.synth import GENERATORS

    name, _, route = text.partition(":")
    if name not in GENERATORS:
        raise DeclragError(f"--generator {text!r}: no generator named {name!r}", hint=f"one of {', '.join(GENERATORS)}")
    if GENERATORS[name].model and not route:
        raise DeclragError(f"--generator {name} needs an LM route", hint=f"e.g. --generator {name}:local/smollm2")
    if route and not GENERATORS[name].model:
        raise DeclragError(f"--generator {text!r}: {name} takes no model", hint=f"--generator {name}")
    return name, route or None


def _units(examples: list[Example]) -> dict[str, int]:
    return dict(Counter(str(unit_of(list(e.gold_spans()), e.answers, e.gold)) for e in examples))


def run(dataset: str, generators: Sequence[str] = ("mixed", "ict", "cloze", "keywords"), n: int = 300, seed: int = 13,
        real_split: str | None = None, real_limit: int = 1000, progress: bool = True,
        arms: Collection[str] = ARMS, trials: int = 30, space: str = "retrieval",
        finetune_space: str = "retrieval-finetune") -> dict[str, Any]:
    """The measurements above, per generator (``NAME`` or ``NAME:ROUTE``); ``arms`` picks the optional ones,
    ``trials`` is each compile's trial budget."""
    t0 = time.perf_counter()
    parsed = [parse_generator(g) for g in generators]
    gs = load_golden(dataset)
    split = real_split or ("test" if "test" in gs.splits else next(iter(gs.splits)))
    real = [e for e in gs.split(split) if e.gold or e.gold_spans()]
    if len(real) > real_limit:  # a seeded sample: every configuration scores the same questions
        real = [real[i] for i in sorted(random.Random(seed).sample(range(len(real)), real_limit))]
    embedder = Embedder()  # one model for generation, the filters and the scoring
    scorer = _Scorer(gs.name, embedder, progress)
    real_scores = scorer(gs.documents, real, [e.gold for e in real], "real")
    with_answers = [e for e in real if e.answers]
    by_id = {d.id: d.text for d in gs.documents}
    agreement = grader_agreement([e.question for e in with_answers], [e.answers for e in with_answers],
                                 [e.gold for e in with_answers], scorer.stores(gs.documents)[CHUNK_SIZES[-1]],
                                 scorer.vectors, by_id.__getitem__) if with_answers else None
    result: dict[str, Any] = {"grader_vs_qrels": agreement,
        "dataset": gs.name, "real_split": split, "real_questions": len(real), "real_units": _units(real),
        "seed": seed, "n": n, "configs": [{"config": label(c), "real": round(float(r.mean()), 4)}
                                          for c, r in zip(scorer.cfgs, real_scores)], "generators": {}}
    runs = cache_dir() / "bench-synth" / f"{gs.name}-{n}-{seed}-runs"
    if {"compile", "finetune"} & set(arms):
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir(parents=True)
    real_compile: dict[str, Any] = {}
    for k, (name, route) in enumerate(parsed):
        tag = name + (f"-{route.replace('/', '_')}" if route else "")
        folder = cache_dir() / "bench-synth" / f"{gs.name}-{tag}-{n}-{seed}"
        report = synthesize(gs.documents, folder, n, model=route, generator=name, seed=seed, force=True,
                            embedder=embedder, progress=progress)
        synthetic, syn = _examples(folder)
        syn_scores = scorer(syn.documents, synthetic, [e.gold for e in synthetic], tag)
        seed_only = [{e.metadata["source_doc"]: 1} for e in synthetic]
        seed_scores = (scorer(syn.documents, synthetic, seed_only, f"{tag} seed-only")
                       if any(g != e.gold for g, e in zip(seed_only, synthetic)) else syn_scores)
        calls = report.lm.get("calls") or 0
        out: dict[str, Any] = {
            "generator": report.generator, "questions": len(synthetic), "units": _units(synthetic),
            "removed": report.removed, "judged_gold_added": report.judged_gold_added, "lm": report.lm,
            "lm_calls": calls, "usable_per_call": round(report.kept / calls, 3) if calls else None,
            "s_per_question": round(report.wall_s / max(report.kept, 1), 3), "wall_s": report.wall_s,
            "duplicates_after_filtering": duplicate_share([e.question for e in synthetic], scorer.vectors,
                                                          DUPLICATE_COSINE),
            "kendall_tau": {"judged_gold": tau_with_interval(syn_scores, real_scores, seed),
                            "seed_only_gold": tau_with_interval(seed_scores, real_scores, seed)},
            "best_synthetic": label(scorer.cfgs[int(syn_scores.mean(axis=1).argmax())])}
        for row, sc in zip(result["configs"], syn_scores):
            row[tag] = round(float(sc.mean()), 4)
        if "ablations" in arms:  # the same generation, each filter switched off in turn
            out["filters_off"] = {}
            for f in FILTERS:
                off = folder.with_name(f"{folder.name}-no-{f}")
                r = synthesize(gs.documents, off, n, model=route, generator=name, seed=seed, force=True, skip=(f,),
                               embedder=embedder, progress=progress)
                exs, off_set = _examples(off)
                out["filters_off"][f] = {"questions": len(exs), "removed": r.removed,
                                         "kendall_tau": tau_with_interval(scorer(off_set.documents, exs,
                                                                                 [e.gold for e in exs], f"no {f}"),
                                                                          real_scores, seed)}
        if "compile" in arms:
            out["compile"] = compile_arm(gs, dataset, folder, runs, _capped(space, runs, real_limit), trials,
                                         progress, tag, real_compile)
        if "finetune" in arms and k == 0:
            result["finetune"] = finetune_arm(gs, folder, runs, _capped(finetune_space, runs, real_limit), trials,
                                              progress)
        result["generators"][tag] = out
    if real_compile:
        result["real_compile"] = {k: v for k, v in real_compile.items() if k not in ("per_q", "base_q")}
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    return result


def _capped(space: str, runs: Path, max_dev: int) -> str:
    """The space with its dev set capped at ``max_dev`` questions (a seeded sample, as `split.max_dev` does), so
    that a large real set (SQuAD: 7,399 dev questions) costs each trial what the synthetic set's does."""
    import yaml

    from declrag.optimize._space import read_space

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
    from declrag.optimize._objective import Objective
    from declrag.optimize._space import read_space

    comp = Objective(read_space(space), golden, runs / "scoring", progress=progress)
    return comp, comp.splits["test"]


def compile_arm(golden: GoldenSet, dataset: str, synthetic: Path, runs: Path, space: str, trials: int,
                progress: bool, tag: str, real: dict[str, Any]) -> dict[str, Any]:
    """``space`` compiled on the synthetic set; what it ships scored on real test beside the default program and
    a compile on the real set (``golden``, named ``dataset``: compiled once, kept in ``real`` for the next
    generator)."""
    from declrag.optimize import Budget, CompileOptions, compile, score

    comp, test = _real_test(golden, space, runs, progress)
    if not real:
        summary = compile(CompileOptions(space, dataset, "compile-real", runs=runs, budget=Budget(max_trials=trials),
                                         progress=progress)).summary
        cfg = ProgramConfig.model_validate(summary["best"]["config"])
        means, real["per_q"] = score(comp, comp.program_for(cfg), test, "real test, compiled on real")
        base, real["base_q"] = score(comp, comp.program_for(ProgramConfig.model_validate(
            summary["baseline"]["config"])), test, "real test, default program")
        real.update(params=summary["best"]["params"], real_test=round(means["objective"], 4),
                    default_real_test=round(base["objective"], 4), real_test_questions=len(test))
    summary = compile(CompileOptions(space, str(synthetic), f"compile-{tag}", runs=runs,
                                     budget=Budget(max_trials=trials), progress=progress)).summary
    shipped = summary[summary["shipped"]]
    means, per_q = score(comp, comp.program_for(ProgramConfig.model_validate(shipped["config"])), test,
                         f"real test, compiled on {tag}")
    return {"space": Path(space).stem, "trials": trials, "shipped": summary["shipped"],
            "selection": summary["selection"],
            "params": shipped["params"], "dev": shipped["dev"].get("objective"),
            "real_test": round(means["objective"], 4),
            "real_test_questions": len(test), "minus_real": paired_difference(real["per_q"], per_q),
            "minus_default": paired_difference(real["base_q"], per_q)}


def finetune_arm(golden: GoldenSet, synthetic: Path, runs: Path, space: str, trials: int,
                 progress: bool) -> dict[str, Any]:
    """``space`` (with its fine-tune stage) compiled on the synthetic set alone; the base and the tuned embedder
    scored on the real test split."""
    from declrag.optimize import Budget, CompileOptions, compile, score

    summary = compile(CompileOptions(space, str(synthetic), "finetune-synthetic", runs=runs,
                                     budget=Budget(max_trials=trials), progress=progress)).summary
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


def _tau(v: dict[str, Any]) -> str:
    return f"{v['tau']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]" if v["tau"] is not None else "n/a"


def print_report(r: dict[str, Any], console: Console) -> None:
    gens = r["generators"]
    units = ", ".join(f"{k} {v}" for k, v in r["real_units"].items())
    t = Table(title=f"{r['dataset']}: nDCG@10 of {len(r['configs'])} retrieval configurations on "
                    f"{r['real_questions']} real ({r['real_split']}; units: {units}) and synthetic questions")
    for col in ("configuration", "real", *gens):
        t.add_column(col, justify="left" if col == "configuration" else "right")
    for c in r["configs"]:
        t.add_row(c["config"], f"{c['real']:.4f}", *(f"{c[g]:.4f}" for g in gens))
    console.print(t)
    g_table = Table(title="per generator: Kendall tau between the synthetic and the real ordering (95% bootstrap "
                          "interval), cost, and compile on the synthetic set scored on real test")
    for col in ("generator", "questions", "tau, judged gold", "tau, seed-only gold", "LM calls", "usable / call",
                "s / question", "compile ships", "real test", "- real compile", "- default"):
        g_table.add_column(col, justify="left" if col == "generator" else "right")
    for name, g in gens.items():
        c = g.get("compile", {})
        g_table.add_row(name, str(g["questions"]), _tau(g["kendall_tau"]["judged_gold"]),
                        _tau(g["kendall_tau"]["seed_only_gold"]), str(g["lm_calls"] or "-"),
                        f"{g['usable_per_call']:.2f}" if g["usable_per_call"] else "-", f"{g['s_per_question']:.3f}",
                        c.get("shipped", "-"), f"{c['real_test']:.4f}" if c else "-",
                        _ci(c["minus_real"]) if c else "-", _ci(c["minus_default"]) if c else "-")
    console.print(g_table)
    if rc := r.get("real_compile"):
        console.print(f"compile {next(iter(gens.values()))['compile']['space']} on the real set, scored on "
                      f"{rc['real_test_questions']} real test questions: {rc['real_test']:.4f}; the default program "
                      f"{rc['default_real_test']:.4f}")
    for name, g in gens.items():
        for f, v in g.get("filters_off", {}).items():
            removed = sum(c for reason, c in g["removed"].items() if reason_filter(reason) == f)
            console.print(f"{name}, {f} filter off: {v['questions']} questions (the filter removed {removed}), tau "
                          f"{_tau(v['kendall_tau'])}")
        d = g["duplicates_after_filtering"]
        console.print(f"{name}: duplicates left after filtering {d['exact']:.1%} exact, {d['near']:.1%} at cosine >= "
                      f"{d['cosine']}; best configuration on it: {g['best_synthetic']}", markup=False, highlight=False)
        if sel := g.get("compile", {}).get("selection"):
            console.print(f"{name}: what ships: {sel['why']}", markup=False, highlight=False)
    if g := r.get("grader_vs_qrels"):
        console.print(f"the answer-in-document grader against the real qrels, on the pools of {g['questions']} real "
                      f"questions: precision {g['precision']}, recall {g['recall']}")
    if f := r.get("finetune"):
        if "skipped" in f:
            console.print(f"fine-tune on the synthetic set: skipped ({f['skipped']})")
        else:
            console.print(f"fine-tune on the synthetic train split ({f['training'].get('steps')} steps), scored on "
                          f"{f['real_test_questions']} real test questions: nDCG@10 base "
                          f"{f['real_test']['base']['objective']:.4f}, tuned {f['real_test']['tuned']['objective']:.4f}"
                          f"; tuned - base {_ci(f['gain'])}")
    console.print(f"{r['wall_s']} s")
