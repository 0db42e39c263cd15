"""`declrag eval`: run a program over golden questions, score every answer, write the run folder.

runs/<name>/
  config.json      what was evaluated (program config, dataset, split, sample, metrics, judges)
  records.jsonl    one record per question: answer, citations, passages (ids, scores, text), every metric
                   and what it flagged, stage states, latency, tokens and cost for the program and judges
  bounds.jsonl     closed-book and oracle answers (optional), probes.jsonl (optional)
  summary.json     {"n", "metrics": {name: {"mean", "ci95", "n"}}, "usage", "wall_s", ...}
  report.md, report.html, plots/

Resumable: a record already written is never recomputed (only metrics it lacks are added, from the record
itself). LM calls are cached, so a new run over the same questions costs almost nothing.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextvars import copy_context
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..errors import DeclragError
from ..golden import LABELS, Example, GoldenSet, labels_of
from ..lm import Meter, metering
from ..lm.prompts import LMPrompt, spec
from ..metrics.answer import f1
from ..metrics.base import Case, Metric, Passage, to_case
from ..metrics.catalog import get_metrics
from ..metrics.context import passage_is_gold
from ..metrics.passages import unit_of
from ..metrics.stats import by_label, confusion, mean_ci, paired_difference, percentiles
from ..pipeline.program import RAGProgram
from ..pipeline.stages.generate import is_abstention
from ..runtime import tracing
from ..types import Chunk, GoldSpan, Hit
from .report import write_report

DEFAULT_METRICS = ["em", "f1", "token_match", "rouge1", "rouge2", "rougeL", "rouge1_recall", "semantic_similarity",
                   "faithfulness", "hallucination", "sia", "answer_relevancy", "context_relevance",
                   "context_relevance:max", "context_precision", "context_recall", "triad", "hit@1", "hit@5",
                   "hit@20", "mrr@10", "ndcg@10", "recall@10", "abstained"]
DEFAULT_JUDGE_METRICS = ["correctness_llm", "faithfulness_llm", "hallucination_llm", "sia_llm", "answer_relevancy_llm",
                         "context_relevance_llm", "coherence_llm", "fluency_llm", "triad_llm"]
BOUND_METRICS = ["em", "f1", "token_match", "rougeL", "semantic_similarity", "sia", "faithfulness"]


@dataclass
class EvalSpec:
    dataset: str
    split: str
    limit: int | None = None
    seed: int = 13
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    judges: list[str] = field(default_factory=list)
    threads: int = 1
    closed_book: bool = False
    oracle: bool = False
    probes: bool = False


def sample(examples: list[Example], limit: int | None, seed: int) -> list[Example]:
    """A seeded sample (in the split's order), or every example."""
    if limit is None or limit >= len(examples):
        return list(examples)
    keep = set(random.Random(seed).sample(range(len(examples)), limit))
    return [e for i, e in enumerate(examples) if i in keep]


def _passages(answer) -> list[dict]:
    return [{"n": i, "chunk_id": h.chunk.id, "doc_id": h.doc_id, "score": round(float(h.score), 6),
             "span": [h.start, h.end], "scores": {k: round(float(v), 6) for k, v in h.scores.items()}, "text": h.text}
            for i, h in enumerate(answer["passages"], 1)]


def case_of(rec: dict) -> Case:
    return Case(id=rec["id"], question=rec["question"], answer=rec["answer"], references=rec["references"],
                answerable=rec["answerable"], abstained=rec["abstained"], gold=rec.get("gold", {}),
                answer_starts=rec.get("answer_starts", []),
                spans=[GoldSpan.of(s) for s in rec.get("spans", ())],
                passages=[Passage.of(p) for p in rec["passages"]])


def score_case(case: Case, metrics: list[Metric]) -> tuple[dict, dict, dict]:
    """Metric values and flags, with judge usage metered apart."""
    values, flags, meter = {}, {}, Meter()
    with metering(meter):
        for m in metrics:
            s = m.score(case)
            values[m.name] = None if s.value is None else round(float(s.value), 6)
            if s.details:
                flags[m.name] = s.details
    return values, flags, meter.to_dict()


def correct(case: Case) -> bool:
    if not case.answerable:
        return case.abstained
    return (not case.abstained) and bool(case.references) and f1(case.answer, case.references) >= 0.5


class Evaluation:
    def __init__(self, program: RAGProgram, golden: GoldenSet, spec: EvalSpec, out: Path, progress: bool = True):
        self.program, self.golden, self.spec, self.out, self.progress = program, golden, spec, Path(out), progress
        self.metrics = get_metrics(spec.metrics, spec.judges)
        self.examples = sample([e for e in golden.split(spec.split)], spec.limit, spec.seed)
        if not self.examples:
            raise DeclragError(f"no examples in split {spec.split!r} of {golden.name}", hint="check --split")
        if len({e.id for e in self.examples}) != len(self.examples):
            dup = next(i for i in (e.id for e in self.examples) if [x.id for x in self.examples].count(i) > 1)
            raise DeclragError(f"golden set {golden.name}: duplicate example id {dup!r}",
                               hint="example ids must be unique")
        self._lock = threading.Lock()
        self._labels = dict(zip((e.id for e in self.examples), labels_of(self.examples)))

    # -- records --------------------------------------------------------------------------------------------
    def _records(self, name: str) -> dict[str, dict]:
        f = self.out / name
        if not f.exists():
            return {}
        out = {}
        for line in f.read_text().splitlines():
            try:
                rec = json.loads(line)
                out[rec["id"]] = rec
            except (ValueError, KeyError):
                continue  # a line cut by a crash is recomputed
        return out

    def _append(self, name: str, rec: dict) -> None:
        with self._lock, (self.out / name).open("a") as fh:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()

    def _one(self, ex: Example) -> dict:
        t0 = time.perf_counter()
        ans = self.program(question=ex.question, history=ex.history)
        base = {"id": ex.id, "question": ex.question, "history": [t.to_dict() for t in ex.history],
                "labels": self._labels[ex.id], "references": list(ex.answers), "answerable": ex.answerable,
                "gold": ex.gold, "answer_starts": list(ex.answer_starts),
                "spans": [asdict(s) for s in ex.gold_spans()], "answer": ans.answer,
                "abstained": ans.abstained, "citations": ans.citations, "removed_citations": ans.removed_citations,
                "dropped_sentences": ans.dropped_sentences, "checked": ans.checked,
                "passages": _passages(ans), "judge": ans.judge, "stages": ans.stages, "queries": ans.queries,
                "latency_ms": ans.latency_ms}
        case = case_of(base)
        values, flags, judge_usage = score_case(case, self.metrics)
        gold_flags = passage_is_gold(case) if case.gold else []
        base.update(metrics=values, flags=flags, usage={"program": ans.usage, "judges": judge_usage},
                    unit=unit_of(case.gold_spans(), case.references, case.gold),
                    gold_retrieved=any(ok for _, ok in gold_flags) if case.gold else None, correct=correct(case),
                    wall_ms=round(1000 * (time.perf_counter() - t0), 1))
        return base

    def run(self) -> dict[str, Any]:
        with tracing.span(f"eval {self.golden.name}", {"declrag.examples": len(self.examples)}):
            return self._run()

    def _run(self) -> dict[str, Any]:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.json").write_text(json.dumps({
            "spec": asdict(self.spec), "dataset": self.golden.name,
            "program": self.program.config.model_dump(mode="json"),
            "program_digest": self.program.config.digest(), "examples": len(self.examples)}, indent=2))
        t0 = time.perf_counter()
        done = self._records("records.jsonl")
        todo = [e for e in self.examples if e.id not in done]
        self._fill_missing_metrics(done)
        bar = tqdm(total=len(self.examples), initial=len(self.examples) - len(todo), desc="evaluating", unit="q",
                   disable=not self.progress)
        with ThreadPoolExecutor(max_workers=max(1, self.spec.threads)) as pool:
            futures = {pool.submit(copy_context().run, self._one, ex): ex for ex in todo}
            for fut in as_completed(futures):
                rec = fut.result()
                self._append("records.jsonl", rec)
                done[rec["id"]] = rec
                bar.update(1)
        bar.close()
        records = [done[e.id] for e in self.examples]
        summary = self.summarize(records, time.perf_counter() - t0, len(todo))
        if self.spec.closed_book or self.spec.oracle:
            summary["bounds"] = self._bounds()
        if self.spec.probes:
            summary["probes"] = self._probes()
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))

        write_report(self.out, summary, records)
        return summary

    def _fill_missing_metrics(self, done: dict[str, dict]) -> None:
        """Records written with fewer metrics get the missing ones, computed from the record (no program run)."""
        missing = {rid: [m for m in self.metrics if m.name not in rec.get("metrics", {})] for rid, rec in done.items()}
        if not any(missing.values()):
            return
        for rid, ms in missing.items():
            if ms:
                values, flags, usage = score_case(case_of(done[rid]), ms)
                done[rid]["metrics"].update(values)
                done[rid]["flags"].update(flags)
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values())
        tmp = self.out / "records.jsonl.tmp"
        tmp.write_text(lines)
        tmp.replace(self.out / "records.jsonl")

    # -- summary -------------------------------------------------------------------------------------------
    def summarize(self, records: list[dict], wall_s: float, computed: int) -> dict[str, Any]:
        names = [m.name for m in self.metrics]
        prog = [r["usage"]["program"]["total"] for r in records]
        judges = [r["usage"]["judges"].get("total", {}) for r in records]

        def tot(rows, key):
            return round(sum(float(r.get(key, 0) or 0) for r in rows), 6)

        lat = [r["latency_ms"]["total"] for r in records]
        answerable = [r for r in records if r["answerable"]]
        unanswerable = [r for r in records if not r["answerable"]]
        return {
            "n": len(records), "dataset": self.golden.name, "split": self.spec.split,
            "synthetic": self.golden.synthetic(),
            "program_digest": self.program.config.digest(), "judges": self.spec.judges,
            "metrics": {n: mean_ci([r["metrics"].get(n) for r in records]) for n in names},
            "usage": {part: {k: tot(rows, k)
                             for k in ("calls", "cached", "tokens_in", "tokens_out", "cost_usd", "lm_ms")}
                      for part, rows in (("program", prog), ("judges", judges))},
            "wall_s": round(wall_s, 2), "computed": computed,
            "throughput_qps": round(computed / wall_s, 4) if wall_s and computed else None,
            "latency_ms": percentiles(lat, digits=1),
            "confusion": confusion([(r["gold_retrieved"], r["correct"]) for r in records]),
            # what retrieval was scored on, questions per unit (declrag.metrics.passages): span, answer, document
            "retrieval_unit": dict(Counter(str(r.get("unit")) for r in records if r.get("unit"))),
            "abstention": {"all": _rate(records), "answerable": _rate(answerable), "unanswerable": _rate(unanswerable),
                           "n_answerable": len(answerable), "n_unanswerable": len(unanswerable)},
            "by_label": by_label([self._labels.get(r["id"], {}) for r in records],
                                 {**{n: [r["metrics"].get(n) for r in records] for n in names},
                                  "abstained": [float(r["abstained"]) for r in records]}, LABELS),
        }

    # -- reference bounds and probes --------------------------------------------------------------------------
    def _generate(self, question: str, passages: list[Hit]) -> dict:
        meter = Meter()
        with metering(meter):
            d = self.program.generate(question=question, passages=passages, allow_empty=True)
        return {"answer": d.text, "abstained": d.abstained, "usage": meter.to_dict()["total"]}

    def _closed_book(self, question: str) -> dict:
        if not hasattr(self, "_cb"):
            g = self.program.config.generate
            self._cb = LMPrompt("closed-book", spec("closed_book"), "default", self.program.config.stage_lm("generate"),
                             abstain=g.abstain_phrase)
        meter = Meter()
        with metering(meter):
            raw = (self._cb.run(question=question).answer or "").strip()
        phrase = self.program.config.generate.abstain_phrase
        abst = is_abstention(raw, phrase)
        return {"answer": phrase if abst else raw, "abstained": abst, "usage": meter.to_dict()["total"]}

    def _gold_hits(self, ex: Example) -> list[Hit]:
        hits = []
        for doc_id in ex.gold:
            try:
                d = self.golden.doc(doc_id)
            except DeclragError:
                continue
            c = Chunk(id=f"{d.id}#gold", doc_id=d.id, text=d.text, start=0, end=len(d.text), position=0,
                      source=d.source, title=d.title, page=d.page)
            hits.append(Hit.of(c, 1.0))
        return hits

    def _bounds(self) -> dict[str, Any]:
        metrics = get_metrics([m for m in BOUND_METRICS if m in self.spec.metrics] or ["f1"], self.spec.judges)
        done = self._records("bounds.jsonl")
        out: dict[str, Any] = {}
        kinds = [k for k, on in (("closed_book", self.spec.closed_book), ("oracle", self.spec.oracle)) if on]
        for kind in kinds:
            rows = []
            for ex in tqdm(self.examples, desc=kind, disable=not self.progress):
                key = f"{kind}:{ex.id}"
                if key not in done:
                    passages = self._gold_hits(ex) if kind == "oracle" else []
                    res = (self._closed_book(ex.question) if kind == "closed_book"
                           else self._generate(ex.question, passages))
                    case = to_case(ex, {"answer": res["answer"], "abstained": res["abstained"], "passages": passages})
                    values, _, _ = score_case(case, metrics)
                    done[key] = {"id": key, "example": ex.id, "answer": res["answer"], "abstained": res["abstained"],
                                 "metrics": values, "usage": res["usage"]}
                    self._append("bounds.jsonl", done[key])
                rows.append(done[key])
            out[kind] = {m.name: mean_ci([r["metrics"].get(m.name) for r in rows]) for m in metrics}
            out[kind]["abstention"] = _rate(rows)
        return out

    def _probes(self) -> dict[str, Any]:
        done = self._records("probes.jsonl")
        rng = random.Random(self.spec.seed)
        docs = self.golden.documents
        out = {}
        for kind in ("no_context", "irrelevant_context"):
            rows = []
            for ex in tqdm(self.examples, desc=f"probe {kind}", disable=not self.progress):
                key = f"{kind}:{ex.id}"
                if key not in done:
                    passages = []
                    if kind == "irrelevant_context":
                        other = [d for d in rng.sample(docs, min(8, len(docs))) if d.id not in ex.gold][:1]
                        passages = [Hit.of(Chunk(id=f"{d.id}#probe", doc_id=d.id, text=d.text, start=0, end=len(d.text),
                                                 position=0, title=d.title), 0.0) for d in other]
                    res = self._generate(ex.question, passages)
                    done[key] = {"id": key, "example": ex.id, **res}
                    self._append("probes.jsonl", done[key])
                rows.append(done[key])
            out[f"{kind}_abstention"] = _rate(rows)
        return out


def _rate(rows: list[dict]) -> float | None:
    return round(sum(bool(r["abstained"]) for r in rows) / len(rows), 4) if rows else None


def compare(a: str | Path, b: str | Path) -> dict[str, Any]:
    """Per-metric B - A over the questions both runs answered, with paired bootstrap intervals."""
    runs = []
    for p in (Path(a), Path(b)):
        f = p / "records.jsonl"
        if not f.exists():
            raise DeclragError(f"{p} has no records.jsonl", hint="give two folders written by declrag eval")
        runs.append({r["id"]: r for r in map(json.loads, f.read_text().splitlines())})
    ids = [i for i in runs[0] if i in runs[1]]
    if not ids:
        raise DeclragError(f"{a} and {b} share no questions", hint="compare runs over the same dataset and split")
    names = [n for n in runs[0][ids[0]]["metrics"] if n in runs[1][ids[0]]["metrics"]]
    return {"a": str(a), "b": str(b), "n": len(ids),
            "metrics": {n: {"a": mean_ci([runs[0][i]["metrics"].get(n) for i in ids])["mean"],
                            "b": mean_ci([runs[1][i]["metrics"].get(n) for i in ids])["mean"],
                            **paired_difference([runs[0][i]["metrics"].get(n) for i in ids],
                                                [runs[1][i]["metrics"].get(n) for i in ids])} for n in names}}
