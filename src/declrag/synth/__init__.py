"""Golden sets from the user's own documents (`declrag synth`): questions whose gold is the place they came from,
filtered and counted, written as a golden set that `--dataset DIR` loads everywhere (docs/guides/synth.md says
what each generator and filter does, and what the output folder holds).

Work goes to ``OUT.partial/`` and is moved into place when complete: nothing is ever half written. With an LM,
every passage done is appended to ``OUT.partial/generated.jsonl`` as it is done, so a killed run resumes there
(``resume``) and loses at most the passage in flight; each passage draws from its own seeded generator, so a
resumed run makes the same set as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from .. import tracing
from ..api import load_documents
from ..config import ChunkerConfig, IngestConfig
from ..embed import Embedder
from ..errors import DeclragError
from ..ingest.chunkers import Chunker
from ..ingest.corpus import corpus_store
from ..lm import Meter, metering
from ..types import Chunk, Document, GoldSpan, content_hash
from . import filters, queries
from .filters import normalize
from .generate import Candidate, LMWriter, answer_problem, lm_kind, off_passage
from .inpars import InParsWriter
from .queries import DEFAULT_OFFLINE, DEFAULT_WITH_MODEL, GENERATORS, cloze_query

__all__ = ["GENERATORS", "Candidate", "SynthReport", "cloze_query", "from_sources", "normalize", "split_by_document",
           "synthesize"]

SPLITS = {"train": 0.6, "dev": 0.2, "test": 0.2}
MIN_PASSAGE_WORDS = 30
OVERSAMPLE = 1.5  # candidates generated per question wanted (the filters drop some)
GIVE_UP = 50  # passages without a single usable question after which a model is given up on
MALFORMED = "malformed model output (no usable question)"
SYNTH_CHUNKER = ChunkerConfig(name="sentence", chunk_size=192, overlap=0)  # the passages questions come from


@dataclass
class SynthReport:
    """What a synth run did: candidates generated, how many each filter removed (with examples), kept by split."""

    generator: str
    seed: int
    documents: int
    passages: int
    generated: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    removed_examples: dict[str, list[str]] = field(default_factory=dict)
    kept: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    splits: dict[str, int] = field(default_factory=dict)
    found_by: dict[str, int] = field(default_factory=dict)
    judged_gold_added: int = 0
    gold: str = "seed document only"
    filters_off: list[str] = field(default_factory=list)
    lm: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    out: str = ""

    def drop(self, reason: str, c: Candidate) -> None:
        self.removed[reason] = self.removed.get(reason, 0) + 1
        shown = self.removed_examples.setdefault(reason, [])
        if len(shown) < 5:
            shown.append(c.question)

    def summary(self) -> str:
        removed = ", ".join(f"{n} {r}" for r, n in self.removed.items()) or "none"
        return (f"{self.kept} questions kept of {self.generated} generated from {self.passages} passages of "
                f"{self.documents} documents ({', '.join(f'{k} {v}' for k, v in self.splits.items())}); "
                f"removed: {removed}; {self.wall_s} s")


def from_sources(paths: Sequence[str | Path] = (), datasets: Sequence[str] = (), out: str | Path = "synth",
                 n: int = 300, **options: Any) -> tuple[SynthReport, list]:
    """`synthesize` on the documents `declrag index` would index from these files, folders and golden-set
    corpora (same ids); returns the report and the files skipped."""
    if not paths and not datasets:
        raise DeclragError("nothing to draw questions from", hint="give file or folder paths, or --dataset NAME")
    docs, skipped = load_documents(paths, datasets)
    with tracing.span("synth", {"declrag.documents": len(docs), "declrag.n": n}):
        return synthesize(docs, out, n, **options), skipped


def synthesize(documents: Sequence[Document], out: str | Path, n: int, *, model: str | None = None, seed: int = 13,
               generator: str | None = None, ingest: IngestConfig | None = None, force: bool = False,
               resume: bool = False, max_lm_calls: int | None = None, grader: str | None = None,
               embedder: Embedder | None = None, skip: Collection[str] = (), progress: bool = True,
               say: Callable[[str], None] = lambda _: None) -> SynthReport:
    """Write a golden set of at most ``n`` questions drawn from ``documents`` to the folder ``out``.

    ``generator``: one of `GENERATORS` (default: ``lm`` with a model, else `DEFAULT_OFFLINE`). ``model``: the LM
    route of an LM generator (``lm`` writes questions and reference answers, ``inpars`` queries); the others take
    none and make a retrieval-only set. ``ingest``: the index the filters search (default: declrag's defaults).
    ``max_lm_calls`` stops generating at that many uncached LM calls (what was made so far is kept and filtered).
    ``grader``: an LM route that grades each question's pooled documents (one call per question); None grades
    deterministically (a pooled document containing the reference answer is relevant). ``skip``: filters switched
    off (names in `filters.FILTERS`; `declrag bench synth` measures each one's effect this way).
    """
    started = time.perf_counter()
    out = Path(out)
    work = out.with_name(out.name + ".partial")
    if n < 1:
        raise DeclragError(f"--n must be at least 1, got {n}", hint="e.g. --n 300")
    if unknown := set(skip) - set(filters.FILTERS):
        raise DeclragError(f"no filter named {', '.join(sorted(unknown))}", hint=f"one of {', '.join(filters.FILTERS)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise DeclragError(f"{out} exists and is not empty", hint="choose another --out, or pass --force to replace it")
    if resume and not (work / "generated.jsonl").is_file():
        raise DeclragError(f"nothing to resume: {work / 'generated.jsonl'} does not exist",
                           hint="run without --resume (only a run with --model writes what --resume continues)")
    generator = generator or (DEFAULT_WITH_MODEL if model is not None else DEFAULT_OFFLINE)
    if generator not in GENERATORS:
        raise DeclragError(f"no generator named {generator!r}", hint=f"one of {', '.join(GENERATORS)}")
    if GENERATORS[generator].model != (model is not None):
        raise DeclragError(f"--generator {generator} " + ("needs an LM: give --model ROUTE"
                                                          if GENERATORS[generator].model else "writes without a model"),
                           hint="e.g. --generator inpars --model local/gemma3-270m" if GENERATORS[generator].model
                           else "use --model none with it, or --generator lm / inpars with a model")
    writer = (None if model is None else LMWriter(model) if generator == "lm"  # checks the route before any work
              else InParsWriter(model))
    lm_grader = filters.LMGrader(grader) if grader and GENERATORS[generator].answers else None
    docs = [d for d in documents if d.text.strip()]
    if not docs:
        raise DeclragError("no documents with text to draw questions from", hint="check the sources")
    if len({d.id for d in docs}) != len(docs):
        raise DeclragError("two documents share an id", hint="document ids must be unique")
    ingest = ingest or IngestConfig()
    emb = embedder or Embedder(ingest.embedder)
    chunker = Chunker(SYNTH_CHUNKER, emb.tokens)
    passages = [(d, c) for d in docs for c in chunker(d) if len(c.text.split()) >= MIN_PASSAGE_WORDS]
    if not passages:
        raise DeclragError(f"no passage of at least {MIN_PASSAGE_WORDS} words in {len(docs)} documents",
                           hint="synth needs documents with running text")
    report = SynthReport(generator=f"{generator} on {model}" if model else f"{generator} (no model)",
                         seed=seed, documents=len(docs), passages=len(passages), filters_off=sorted(skip))
    want = math.ceil(OVERSAMPLE * n)
    cands: list[Candidate] = []
    if writer is None:  # made before the index: the inverse cloze removes its sentences from the set's corpus
        cands, docs = _pseudo_queries(generator, docs, passages, want, seed)

    store, _ = corpus_store(docs, ingest, label="synth", embedder=emb, progress=progress)
    run_args = {"model": model, "generator": generator, "seed": seed,
                "documents": content_hash(*sorted(d.hash for d in docs)), "chunker": SYNTH_CHUNKER.model_dump()}
    if resume:  # the log's rows are only valid for the run that wrote them
        before = json.loads((work / "run.json").read_text()) if (work / "run.json").is_file() else None
        if before != run_args:
            changed = [k for k in run_args if not before or before.get(k) != run_args[k]]
            raise DeclragError(f"--resume with other arguments than the run in {work} ({', '.join(changed)} differ)",
                               hint="resume with the same sources, --model and --seed, or start over without --resume")
    else:
        log = work / "generated.jsonl"
        if log.is_file() and log.stat().st_size and not force:  # a killed run's work is not thrown away unasked
            raise DeclragError(f"{work} holds the work of a run that did not finish",
                               hint="--resume continues it (same sources, --model, --seed); --force starts over")
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "run.json").write_text(json.dumps(run_args))
    if writer is not None:
        cands = _lm_questions(writer, passages, want, seed, store, emb, work / "generated.jsonl", report,
                              max_lm_calls, progress, say)
    report.generated = len(cands)
    by_id = {d.id: d for d in docs}
    vectors = filters.QueryVectors(emb)
    kept = filters.wording_and_duplicates(cands, vectors, report.drop,
                                          lambda c: by_id[c.doc_id].text[c.span[0]:c.span[1]], skip)
    if "round_trip" not in skip:
        kept = filters.round_trip(kept, store, vectors, report.drop, report.found_by)
    kept = _sample(kept, n, random.Random(seed))
    if GENERATORS[generator].answers:
        report.judged_gold_added = filters.grade(kept, store, vectors, lambda i: by_id[i].text, lm_grader)
        report.gold = ("seed document, plus the pooled documents (keyword, vector and hybrid top "
                       f"{filters.POOL_K}) " + (f"that {grader} graded relevant" if lm_grader
                                                else "that contain the reference answer"))
    splits = split_by_document(kept, seed)
    report.kept = len(kept)
    report.splits = {k: len(v) for k, v in splits.items()}
    for c in kept:
        report.by_kind[c.kind] = report.by_kind.get(c.kind, 0) + 1
    report.wall_s = round(time.perf_counter() - started, 1)
    report.out = str(out)
    if not kept:
        raise DeclragError(f"none of the {report.generated} generated questions passed the filters "
                           f"({', '.join(f'{v} {k}' for k, v in report.removed.items()) or 'none generated'})",
                           hint="give more documents, or documents with more running text; see the counts above")
    if report.kept < n:
        say(f"synth: {report.kept} questions, fewer than the {n} asked: the filters kept {report.kept} of "
            f"{report.generated} generated from {len(passages)} passages" + (f" ({report.lm['stopped_by']})"
                                                                            if report.lm.get("stopped_by") else ""))
    _write(work, out, docs, splits, report)
    say(report.summary())
    return report


# --------------------------------------------------------------------------------------------- generation
def _pseudo_queries(generator: str, docs: Sequence[Document], passages: list[tuple[Document, Chunk]], want: int,
                    seed: int) -> tuple[list[Candidate], list[Document]]:
    """Up to ``want`` questions of a no-model generator (see `queries`) from passages drawn uniformly (documents
    in proportion to their length), and the documents the set is scored against (the inverse cloze's have its
    sentences removed)."""
    order = _order(len(passages), seed)
    salience = queries.Salience([c.text for _, c in passages]) if generator in ("keywords", "mixed") else None
    if generator == "ict":
        return queries.ict_queries(docs, passages, order, want, seed)
    if generator == "mixed" and salience is not None:
        return queries.mixed_queries(docs, passages, order, want, seed, salience)
    out = queries.title_queries(docs, want // 5, seed, normalize) if generator == "cloze" else []
    for i in order:
        if len(out) >= want:
            break
        doc, chunk = passages[i]
        rng = random.Random(f"{seed}:{i}")
        made = (queries.keyword_query(doc, chunk, salience, rng) if salience is not None
                else cloze_query(chunk.text, chunk.start, rng))
        if made is not None:
            out.append(Candidate(question=made[0], kind=generator, doc_id=doc.id, span=made[1]))
    return out, list(docs)


def _order(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def _lm_questions(writer: LMWriter | InParsWriter, passages: list[tuple[Document, Chunk]], want: int, seed: int,
                  store, emb, log: Path, report: SynthReport, max_lm_calls: int | None, progress: bool,
                  say: Callable[[str], None]) -> list[Candidate]:
    """One question per passage drawn (an InPars query, or a question of a type drawn in `LM_KINDS`' shares with
    its checked reference answer); every passage done is appended to ``log`` (a candidate, or why it gave none)."""
    model = writer.route
    done: dict[int, dict] = {}
    for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else []:
        try:
            row = json.loads(line)
            done[int(row["passage"])] = row
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill: that passage is done again
    order = _order(len(passages), seed)
    _estimate(model, passages, order, want, len(done), writer.calls_per_passage, say)
    meter = Meter()
    cands: list[Candidate] = []
    bar = tqdm(total=want, desc="questions", unit="q", disable=not progress)
    with log.open("a", encoding="utf-8") as f, metering(meter):
        for seen, i in enumerate(order):
            if len(cands) >= want:
                break
            if seen == GIVE_UP and not cands:
                reasons = ", ".join(f"{v} {k}" for k, v in sorted(report.removed.items(), key=lambda x: -x[1]))
                raise DeclragError(f"{model} gave no usable question for the first {GIVE_UP} passages ({reasons})",
                                   hint=f"see {log} for every reply's outcome; try another --model, or --model none")
            if i in done:
                row = done[i]
            else:
                if max_lm_calls is not None and meter.total().calls - meter.total().cached >= max_lm_calls:
                    report.lm["stopped_by"] = f"--max-lm-calls {max_lm_calls}"
                    break
                row = _one(writer, i, passages, store, emb, random.Random(f"{seed}:{i}"))
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                f.flush()
            if "dropped" in row:
                report.drop(row["dropped"], Candidate(question=row.get("question", ""), kind=row["kind"],
                                                      doc_id=row["doc_id"], span=(0, 0)))
                continue
            cands.append(Candidate(**{**row["candidate"], "span": tuple(row["candidate"]["span"]),
                                      "answers": tuple(row["candidate"]["answers"]),
                                      "answer_starts": tuple(row["candidate"]["answer_starts"])}))
            bar.update(1)
    bar.close()
    total = meter.total()
    report.lm.update({"route": model, "calls": total.calls, "cached": total.cached, "tokens_in": total.tokens_in,
                      "tokens_out": total.tokens_out, "cost_usd": round(total.cost_usd, 6),
                      "resumed_passages": len(done), "malformed": report.removed.get(MALFORMED, 0)})
    return cands


def _one(writer: LMWriter | InParsWriter, i: int, passages: list[tuple[Document, Chunk]], store, emb,
         rng: random.Random) -> dict:
    """The log row of passage ``i``: its candidate, or why it gave none."""
    doc, chunk = passages[i]
    if isinstance(writer, InParsWriter):
        q, why = writer.query(chunk.text)
        if q is None:
            return {"passage": i, "kind": "inpars", "doc_id": doc.id, "dropped": why}
        cand = Candidate(question=q, kind="inpars", doc_id=doc.id, span=(chunk.start, chunk.end))
        return {"passage": i, "kind": "inpars", "doc_id": doc.id, "candidate": asdict(cand)}
    kind = lm_kind(rng)
    text, gold = chunk.text, {doc.id: 1}
    if kind == "multi":  # a related passage of another document, found with the store's own hybrid search
        hits = store.hybrid_search(chunk.text, emb.embed_queries([chunk.text])[0], 10)
        other = next((h for h in hits if h.doc_id != doc.id), None)
        if other is None:
            kind = "factoid"
        else:
            text, gold = f"Excerpt 1:\n{chunk.text}\n\nExcerpt 2:\n{other.text}", {doc.id: 1, other.doc_id: 1}
    base = {"passage": i, "kind": kind, "doc_id": doc.id}
    question = writer.question(kind, text)
    if question is None:
        return {**base, "dropped": MALFORMED}
    if off_passage(question, text, writer.demo_text[kind]):
        return {**base, "dropped": "question off its passage (no word of it, or more of the demo's)",
                "question": question}
    if kind == "unanswerable":
        cand = Candidate(question=question, kind=kind, doc_id=doc.id, span=(chunk.start, chunk.end), answerable=False)
        return {**base, "candidate": asdict(cand)}
    answer = writer.answer(kind if kind in writer.answers else "explanatory", text, question)
    problem, at = answer_problem(kind, answer, text, question)
    if problem:
        return {**base, "dropped": problem, "question": question}
    starts = (chunk.start + at,) if at is not None else ()
    cand = Candidate(question=question, kind=kind, doc_id=doc.id, span=(chunk.start, chunk.end), answers=(answer,),
                     answer_starts=starts, gold=gold)
    return {**base, "candidate": asdict(cand)}


def _estimate(model: str, passages: list[tuple[Document, Chunk]], order: list[int], want: int, done: int,
              per_passage: float, say: Callable[[str], None]) -> None:
    """Say, before any call, how many LM calls and tokens the run will take, and the price where LiteLLM knows it."""
    import litellm

    todo = [passages[i][1] for i in order[done: done + want]]
    calls = round(len(todo) * per_passage)
    tokens_in = round(sum(len(c.text.split()) * 1.3 + 80 for c in todo) * per_passage)
    tokens_out = calls * 40
    try:
        cost_in, cost_out = litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out)
        price = f"about ${cost_in + cost_out:.2f}"
    except Exception:  # noqa: BLE001 - LiteLLM does not know the route's price
        price = "free" if model.startswith("local/") else "price unknown to LiteLLM"
    say(f"synth: about {calls} LM calls on {model} ({tokens_in:,} tokens in, {tokens_out:,} out at most; {price}); "
        "--max-lm-calls caps them")


def _sample(kept: list[Candidate], n: int, rng: random.Random) -> list[Candidate]:
    if len(kept) <= n:
        return kept
    return [kept[i] for i in sorted(rng.sample(range(len(kept)), n))]


def split_by_document(cands: list[Candidate], seed: int) -> dict[str, list[Candidate]]:
    """train/dev/test in the proportions of ``SPLITS``, whole documents at a time (seeded): no document's
    questions are in two splits. Test and dev are filled first, so small sets still have both."""
    by_doc: dict[str, list[Candidate]] = {}
    for c in cands:
        by_doc.setdefault(c.doc_id, []).append(c)
    ids = sorted(by_doc)
    random.Random(seed).shuffle(ids)
    total, out = len(cands), {k: list[Candidate]() for k in SPLITS}
    for did in ids:
        for name in ("test", "dev", "train"):
            if name == "train" or len(out[name]) < SPLITS[name] * total:
                out[name].extend(by_doc[did])
                break
    return {k: v for k, v in out.items() if v}


# --------------------------------------------------------------------------------------------- output
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


def _write(work: Path, out: Path, docs: Sequence[Document], splits: dict[str, list[Candidate]],
           report: SynthReport) -> None:
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
                           + f"Filters: {filtered}"
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
