"""Golden sets from the user's own documents (`declrag synth`): questions whose gold is the place they came from,
filtered and counted, split (`splits`) and written as a golden set that `--dataset DIR` loads everywhere
(docs/guides/synth.md says what each generator and filter does, and what the output folder holds).

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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..api import load_documents
from ..config import ChunkerConfig, IngestConfig
from ..embed.embedder import Embedder
from ..errors import DeclragError
from ..ingest.chunkers import Chunker
from ..ingest.corpus import corpus_store
from ..lm import Meter, metering
from ..runtime import tracing
from ..types import Chunk, Document, content_hash
from . import _filters as filters
from . import _queries as queries
from . import _splits as splits
from ._filters import normalize
from ._generate import Candidate, LMWriter, answer_problem, lm_kind, off_passage
from ._inpars import InParsWriter
from ._output import write_set
from ._queries import DEFAULT_OFFLINE, DEFAULT_WITH_MODEL, GENERATORS, cloze_query
from ._report import SynthReport
from ._splits import MIN_QUESTIONS, SPLITS

DEFAULT_N = 1000  # questions `declrag synth` keeps by default: a compile's search (train) and its re-scoring (dev)
MIN_PASSAGE_WORDS = 30
OVERSAMPLE = 1.5  # candidates generated per question wanted (the filters drop some)
GIVE_UP = 50  # passages without a single usable question after which a model is given up on
MALFORMED = "malformed model output (no usable question)"
SYNTH_CHUNKER = ChunkerConfig(name="sentence", chunk_size=192, overlap=0)  # the passages questions come from


def from_sources(paths: Sequence[str | Path] = (), datasets: Sequence[str] = (), out: str | Path = "synth",
                 n: int = DEFAULT_N, **options: Any) -> tuple[SynthReport, list]:
    """`synthesize` on the documents `declrag index` would index from these files, folders and golden-set
    corpora (same ids), a set of at least `MIN_QUESTIONS` (unless ``min_questions`` says otherwise); returns the
    report and the files skipped."""
    if not paths and not datasets:
        raise DeclragError("nothing to draw questions from", hint="give file or folder paths, or --dataset NAME")
    options.setdefault("min_questions", MIN_QUESTIONS)
    docs, skipped = load_documents(paths, datasets)
    with tracing.span("synth", {"declrag.documents": len(docs), "declrag.n": n}):
        return synthesize(docs, out, n, **options), skipped


def synthesize(documents: Sequence[Document], out: str | Path, n: int, *, model: str | None = None, seed: int = 13,
               generator: str | None = None, ingest: IngestConfig | None = None, force: bool = False,
               resume: bool = False, max_lm_calls: int | None = None, grader: str | None = None,
               embedder: Embedder | None = None, skip: Collection[str] = (), progress: bool = True,
               min_questions: int = 1, say: Callable[[str], None] = lambda _: None) -> SynthReport:
    """Write a golden set of at most ``n`` questions drawn from ``documents`` to the folder ``out``.

    ``generator``: one of `GENERATORS` (default: ``lm`` with a model, else `DEFAULT_OFFLINE`). ``model``: the LM
    route of an LM generator (``lm`` writes questions and reference answers, ``inpars`` queries); the others take
    none and make a retrieval-only set. ``ingest``: the index the filters search (default: declrag's defaults).
    ``max_lm_calls`` stops generating at that many uncached LM calls (what was made so far is kept and filtered).
    ``grader``: an LM route that grades each question's pooled documents (one call per question); None grades
    deterministically (a pooled document containing the reference answer is relevant). ``skip``: filters switched
    off (names in `filters.FILTERS`; `declrag bench synth` measures each one's effect this way).
    ``min_questions``: fewer kept, or a split left empty, is an error and writes nothing (`declrag synth`,
    `from_sources`: `MIN_QUESTIONS`; 1 here, for callers that pool the splits, as `declrag bench synth` does).
    """
    started = time.perf_counter()
    out = Path(out)
    work = out.with_name(out.name + ".partial")
    generator = _check_arguments(n, min_questions, skip, out, work, model, generator, force, resume)
    writer = (None if model is None else LMWriter(model) if generator == "lm"  # checks the route before any work
              else InParsWriter(model))
    lm_grader = filters.LMGrader(grader) if grader and GENERATORS[generator].answers else None
    ingest = ingest or IngestConfig()
    emb = embedder or Embedder(ingest.embedder)
    docs, passages = _passages(documents, Chunker(SYNTH_CHUNKER, emb.tokens, covers=emb.covers))
    report = SynthReport(generator=f"{generator} on {model}" if model else f"{generator} (no model)",
                         seed=seed, documents=len(docs), passages=len(passages), filters_off=sorted(skip))
    want = math.ceil(OVERSAMPLE * n)
    cands: list[Candidate] = []
    if writer is None:  # made before the index: the inverse cloze removes its sentences from the set's corpus
        cands, docs = _pseudo_queries(generator, docs, passages, want, seed)

    store, _ = corpus_store(docs, ingest, label="synth", embedder=emb, progress=progress)
    _work_folder(work, {"model": model, "generator": generator, "seed": seed,
                        "documents": content_hash(*sorted(d.hash for d in docs)),
                        "chunker": SYNTH_CHUNKER.model_dump()}, resume, force)
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
    kept, parts, report.split = splits.split(kept, n, seed, report.drop)
    if GENERATORS[generator].answers:
        report.judged_gold_added = filters.grade(kept, store, vectors, lambda i: by_id[i].text, lm_grader)
        report.gold = ("seed document, plus the pooled documents (keyword, vector and hybrid top "
                       f"{filters.POOL_K}) " + (f"that {grader} graded relevant" if lm_grader
                                                else "that contain the reference answer"))
    _tally(report, kept, parts, started, out)
    _check_size(report, n, min_questions, want, say)
    write_set(work, out, docs, parts, report)
    say(report.summary())
    return report


def _check_arguments(n: int, min_questions: int, skip: Collection[str], out: Path, work: Path, model: str | None,
                     generator: str | None, force: bool, resume: bool) -> str:
    """What is wrong with the arguments, before any work (one `DeclragError`); else the generator to use."""
    if n < max(1, min_questions):
        raise DeclragError(f"--n must be at least {max(1, min_questions)}, got {n}" + (
            " (a train, dev and test split of several questions each)" if min_questions > 1 else ""),
            hint=f"e.g. --n {DEFAULT_N}")
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
    return generator


def _passages(documents: Sequence[Document], chunker: Chunker) -> tuple[list[Document],
                                                                        list[tuple[Document, Chunk]]]:
    """The documents with text, and their passages that questions are drawn from (of `MIN_PASSAGE_WORDS` or more)."""
    docs = [d for d in documents if d.text.strip()]
    if not docs:
        raise DeclragError("no documents with text to draw questions from", hint="check the sources")
    if len({d.id for d in docs}) != len(docs):
        raise DeclragError("two documents share an id", hint="document ids must be unique")
    passages = [(d, c) for d in docs for c in chunker(d) if len(c.text.split()) >= MIN_PASSAGE_WORDS]
    if not passages:
        raise DeclragError(f"no passage of at least {MIN_PASSAGE_WORDS} words in {len(docs)} documents",
                           hint="synth needs documents with running text")
    return docs, passages


def _work_folder(work: Path, run_args: dict[str, Any], resume: bool, force: bool) -> None:
    """The work folder, its log kept for ``resume`` (which refuses another run's log), else started afresh (a killed
    run's log is not thrown away without ``force``); ``run.json`` records whose log it is."""
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


def _tally(report: SynthReport, kept: list[Candidate], parts: dict[str, list[Candidate]], started: float,
           out: Path) -> None:
    report.kept = len(kept)
    report.splits = {k: len(v) for k, v in parts.items()}
    for c in kept:
        report.by_kind[c.kind] = report.by_kind.get(c.kind, 0) + 1
    report.wall_s = round(time.perf_counter() - started, 1)
    report.out = str(out)


def _check_size(report: SynthReport, n: int, min_questions: int, want: int, say: Callable[[str], None]) -> None:
    """A set with no question, or too small to split (`MIN_QUESTIONS`), is an error saying how to get more; one
    smaller than asked is said."""
    counts = ", ".join(f"{v} {k}" for k, v in report.removed.items()) or "none generated"
    if not report.kept:
        raise DeclragError(f"none of the {report.generated} generated questions passed the filters ({counts})",
                           hint="give more documents, or documents with more running text; see the counts above")
    if report.kept < min_questions or (min_questions > 1 and len(report.splits) < len(SPLITS)):
        more = (f"a larger --n (it drew {want} candidates for --n {n})" if report.generated >= want else
                f"more documents, or longer ones ({report.passages} passages of {report.documents} documents gave "
                f"{report.generated} candidates)")
        raise DeclragError(f"too few questions to split: {report.kept} kept ("
                           + ", ".join(f"{k} {v}" for k, v in report.splits.items()) + f"; split {report.split}; "
                           f"removed: {counts}); a train, dev and test split needs at least {min_questions}",
                           hint=f"give {more}")
    if report.kept < n:
        say(f"synth: {report.kept} questions, fewer than the {n} asked: the filters kept {report.kept} of "
            f"{report.generated} generated from {report.passages} passages" + (
                f" ({report.lm['stopped_by']})" if report.lm.get("stopped_by") else ""))


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
