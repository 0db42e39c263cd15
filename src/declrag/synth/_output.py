"""What `declrag synth` writes: the golden-set folder (``corpus.jsonl``, a JSONL file per split, ``dataset.yaml``
declaring it and ``report.json``), written in the work folder and moved into place when complete."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from ..types import Document, GoldSpan
from ._generate import Candidate
from ._report import SynthReport


def gold_spans(c: Candidate, texts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Where a question's answer is, for passage-level scoring: an extractive answer's span, and (given the
    documents' ``texts``) every other place it occurs in the question's gold documents (the pooled, graded ones
    too), all one credit; else the sentence or window a no-model question was made from, or the passage an LM
    question was written from. None for title questions and questions on two documents (scored on documents) and
    for unanswerable ones."""
    if not c.answerable or c.kind in ("title", "multi"):
        return []
    if c.answer_starts:
        (a, s), seed = next(zip(c.answers, c.answer_starts)), c.doc_id
        found = GoldSpan.occurrences([a], {d: texts[d] for d, g in c.gold.items() if g > 0 and d in texts}) \
            if texts else ()
        if not any(x.doc == seed and x.start <= s < x.end for x in found):  # the seed's own span is always gold
            return [{"doc": seed, "start": s, "end": s + len(a), "answer": a}]
        return [{"doc": x.doc, "start": x.start, "end": x.end, "answer": x.answer, "credit": "answer"} for x in found]
    return [{"doc": c.doc_id, "start": c.span[0], "end": c.span[1]}]


def write_set(work: Path, out: Path, docs: Sequence[Document], splits: dict[str, list[Candidate]],
              report: SynthReport) -> None:
    """The set in ``work``, then moved to ``out`` (an existing ``out`` is replaced only once ``work`` is complete)."""
    texts = {d.id: d.text for d in docs}
    with (work / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:  # the title stays in metadata: the jsonl reader would put it before the text
            f.write(json.dumps({"_id": d.id, "title": "", "text": d.text,
                                "metadata": {**d.metadata, "source": d.source, "title": d.title,
                                             **({"page": d.page} if d.page is not None else {})}},
                               ensure_ascii=False) + "\n")
    for name, cands in splits.items():
        with (work / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for i, c in enumerate(cands):
                f.write(json.dumps({
                    "id": f"synth-{name}-{i}", "question": c.question,
                    "answers": [{"text": a, "answer_start": s} for a, s in zip(c.answers, c.answer_starts)]
                    if c.answer_starts else list(c.answers),
                    "gold": c.gold, "answerable": c.answerable,
                    **({"spans": sp} if (sp := gold_spans(c, texts)) else {}),
                    "metadata": {"synthetic": True, "generator": report.generator, "seed": report.seed,
                                 "kind": c.kind, "source_doc": c.doc_id, "span": list(c.span), "filters": c.scores},
                }, ensure_ascii=False) + "\n")
    kinds = ", ".join(f"{k} {v}" for k, v in report.by_kind.items())
    filtered = ", ".join(f"{r} removed {k}" for r, k in report.removed.items()) or "none removed"
    decl = {"name": out.name, "format": "jsonl", "path": ".", "corpus": "corpus.jsonl",
            "splits": {k: f"{k}.jsonl" for k in splits},
            "description": f"Synthetic, made by declrag synth from {report.documents} documents: {report.kept} "
                           f"questions ({kinds}) by {report.generator}, seed {report.seed}; gold: {report.gold}; "
                           + ("with reference answers. " if report.lm else "retrieval only (no reference answers). ")
                           + f"Split {report.split}. Filters: {filtered}"
                           + (f"; switched off: {', '.join(report.filters_off)}." if report.filters_off else ".")}
    (work / "dataset.yaml").write_text(yaml.safe_dump(decl, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (work / "report.json").write_text(json.dumps(asdict(report), indent=2, ensure_ascii=False), encoding="utf-8")
    (work / "run.json").unlink(missing_ok=True)
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.replace(old)
        work.replace(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        work.replace(out)
