"""`declrag` on the command line: a thin layer over the Python API.

Every `DeclragError` becomes a two-line message (what is wrong, how to fix it) and exit status 2;
Ctrl-C exits with 130 after the store's last commit, which is always complete.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any, cast, get_args

import typer
from rich.table import Table

from .cli_bench import bench_app
from .cli_common import config_from, err, out
from .config import ChunkerConfig, EmbedderConfig, IngestConfig, Metric, SearchParams
from .errors import DeclragError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="declrag: declarative, self-optimizing RAG.")
app.add_typer(bench_app, name="bench")


def _version_option(value: bool) -> None:
    if value:
        _print_about(json_out=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version_option,
        help="print declrag's version and the versions a bug report needs, then exit")] = False,
) -> None:
    pass


@app.command()
def version(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False):
    """Print declrag's version and what a bug report needs: Python, the libraries, the local model's hash."""
    _print_about(json_out=as_json)


def _print_about(json_out: bool) -> None:
    from .about import report

    r = report()
    if json_out:
        out.print_json(data=r)
        return
    v, py, pf, lm = r["versions"], r["python"], r["platform"], r["local_model"]
    lines = [f"declrag {v['declrag']} (Python {py['version']} {py['implementation']}, {pf['system']} {pf['machine']})"]
    lines += [f"  {name} {ver}" for name, ver in v.items() if name not in ("python", "declrag")]
    lines.append(f"  CLI parser: {r['typer_click']}")
    if lm["file"]:
        lines.append(f"  local model {lm['route']}: {lm['file']} ({lm['bytes'] / 1e6:.1f} MB, sha256 {lm['sha256']})")
    else:
        lines.append(f"  local model {lm['route']}: {lm['problem']} (fix: {lm['fix']})")
    out.print("\n".join(lines), markup=False, highlight=False)


StoreOpt = Annotated[str | None, typer.Option("--store", help="store: a folder or weaviate://host:port/Collection "
                                                                  "(default: $DECLRAG_STORE or .declrag/store)")]


@app.command()
def index(
    paths: Annotated[list[Path] | None, typer.Argument(help="files and folders (recursive)")] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="a golden-set corpus by name (see `declrag datasets`) or path; repeatable")] = None,
    store: StoreOpt = None,
    chunker: Annotated[str | None, typer.Option(help="fixed | recursive | sentence | semantic | parent-child")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="tokens per chunk")] = None,
    overlap: Annotated[int | None, typer.Option(help="tokens shared by consecutive chunks")] = None,
    parent_size: Annotated[int | None, typer.Option(help="parent-child: tokens per parent")] = None,
    model: Annotated[str | None, typer.Option(help="embedding model: hub name or folder")] = None,
    backend: Annotated[str | None, typer.Option(
        help="how the embedding model runs: torch | onnx | onnx-int8 (see README, Embeddings)")] = None,
    metric: Annotated[str | None, typer.Option(help="cosine | dot | l2 (new stores only)")] = None,
    prune: Annotated[bool, typer.Option(help="remove documents whose files are gone from these folders")] = False,
    rebuild: Annotated[bool, typer.Option(help="rebuild the store from these sources with these settings")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
):
    """Index files, folders and golden-set corpora into a store (incrementally)."""
    from . import api
    from .stores import read_meta

    target = store or api.default_store()
    meta = read_meta(target)
    base = meta.ingest if meta else IngestConfig()
    ingest = None
    if any(v is not None for v in (chunker, chunk_size, overlap, parent_size, model, backend)) or meta is None:
        ck = config_from(ChunkerConfig, **{**base.chunker.model_dump(), **{k: v for k, v in dict(
            name=chunker, chunk_size=chunk_size, overlap=overlap, parent_size=parent_size).items() if v is not None}})
        em = config_from(EmbedderConfig, **{**base.embedder.model_dump(), **({"model": model} if model else {}),
                                            **({"backend": backend} if backend else {})})
        ingest = IngestConfig(chunker=ck, embedder=em)
    if metric is not None and metric not in get_args(Metric):
        raise DeclragError(f"unknown metric {metric!r}", hint="use cosine, dot or l2")
    report = api.index(paths or [], dataset or [], target, ingest, cast("Metric | None", metric), prune, rebuild,
                       progress=not quiet)
    for s in report.skipped:
        err.print(f"skipped {s.path}: {s.reason}", markup=False, highlight=False)
    out.print(f"{target}: {report.summary()}", markup=False, highlight=False)


@app.command()
def synth(
    paths: Annotated[list[Path] | None, typer.Argument(help="files and folders (recursive) to draw questions from")
                     ] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="a golden-set corpus by name or path (its documents only); repeatable")] = None,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="the folder to write the golden set to (use it as --dataset OUT)")] = Path("synth"),
    n: Annotated[int, typer.Option("--n", help="questions to keep")] = 300,
    model: Annotated[str | None, typer.Option(
        help="the LM route that writes questions and answers (default: $DECLRAG_MODEL, else local/smollm2); "
             "none: pseudo-queries without a model (a retrieval-only set)")] = None,
    seed: Annotated[int, typer.Option(help="seed of sampling, question types and splits (same seed, same set)")] = 13,
    max_lm_calls: Annotated[int | None, typer.Option(
        help="stop generating after this many (uncached) LM calls")] = None,
    grader: Annotated[str, typer.Option(
        help="who grades the pooled documents of each question for extra gold: answer (a document containing the "
             "reference answer is relevant) or an LM route (one call per question)")] = "answer",
    resume: Annotated[bool, typer.Option("--resume", help="continue a killed run with the same arguments")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
):
    """Make a golden set from your own documents: questions, reference answers, gold documents, train/dev/test."""
    from .config import DEFAULT_ROUTE
    from .program import model_route
    from .synth import from_sources

    route = model_route(model) or DEFAULT_ROUTE
    report, skipped = from_sources(paths or [], dataset or [], out_dir, n, model=None if route == "none" else route,
                                   seed=seed, force=force, resume=resume, max_lm_calls=max_lm_calls,
                                   grader=None if grader == "answer" else grader,
                                   progress=not quiet, say=lambda m: err.print(m, markup=False, highlight=False))
    for s in skipped:
        err.print(f"skipped {s.path}: {s.reason}", markup=False, highlight=False)
    t = Table(title=f"synth: {report.kept} questions from {report.documents} documents -> {report.out}")
    for col in ("step", "questions"):
        t.add_column(col, justify="left" if col == "step" else "right")
    t.add_row("generated", str(report.generated))
    for reason, k in report.removed.items():
        t.add_row(f"removed: {reason}", f"-{k}")
    t.add_row("kept (after sampling to --n)", str(report.kept))
    for name, k in report.splits.items():
        t.add_row(f"  {name}", str(k))
    for kind, k in report.by_kind.items():
        t.add_row(f"  {kind} questions", str(k))
    if report.judged_gold_added:
        t.add_row("gold documents added by grading", str(report.judged_gold_added))
    out.print(t)
    if lm := report.lm:
        out.print(f"{lm['calls']} LM calls ({lm['cached']} cached) on {lm['route']}, {lm['tokens_in']} tokens in, "
                  f"{lm['tokens_out']} out, "
                  f"${lm['cost_usd']:.4f}; {lm['malformed']} passages without a usable question"
                  + (f"; stopped by {lm['stopped_by']}" if lm.get("stopped_by") else ""), markup=False, highlight=False)
    out.print(f"use it: --dataset {report.out} (eval, compile); report: {report.out}/report.json",
              markup=False, highlight=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    store: StoreOpt = None,
    k: Annotated[int, typer.Option("--k", "-k", help="results to return")] = 10,
    alpha: Annotated[float, typer.Option(help="hybrid weight of the vector leg (1 = vector only)")] = 0.5,
    fusion: Annotated[str, typer.Option(help="relative | ranked")] = "relative",
    mode: Annotated[str, typer.Option(help="hybrid | keyword | vector")] = "hybrid",
    window: Annotated[int, typer.Option(help="context-window expansion: neighbouring chunks on each side")] = 0,
    where: Annotated[str | None, typer.Option(help='metadata filter as JSON, e.g. \'{"page": {"$gte": 2}}\'')] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """Search a store: ranked chunks with source, span and score."""
    from . import api

    filt = _json_option(where, "--where")
    params = config_from(SearchParams, limit=k, alpha=alpha, fusion=fusion, mode=mode, window=window, where=filt)
    hits = api.search(query, store, params)
    if as_json:
        out.print_json(data=[{
            "rank": i + 1, "score": h.score, "chunk_id": h.chunk.id, "doc_id": h.doc_id, "source": h.chunk.source,
            "title": h.chunk.title, "page": h.chunk.page, "span": [h.start, h.end], "text": h.text, "scores": h.scores,
        } for i, h in enumerate(hits)])
        return
    t = Table(title=f"{len(hits)} results for {query!r} ({mode}, alpha={alpha}, {fusion})", show_lines=True)
    for col in ("#", "score", "document", "span", "text"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(hits, 1):
        name = Path(h.chunk.source).name
        src = h.chunk.title if h.chunk.title and h.chunk.title != Path(name).stem else (name or h.doc_id)
        src += f" p.{h.chunk.page}" if h.chunk.page else ""
        snippet = " ".join(h.text.split())
        t.add_row(str(i), f"{h.score:.3f}", src, f"{h.start}-{h.end}",
                  snippet[:300] + ("…" if len(snippet) > 300 else ""))
    out.print(t)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    program: Annotated[Path | None, typer.Option(
        help="a saved program: a run folder (runs/NAME) or a program folder (runs/NAME/best)")] = None,
    config: Annotated[Path | None, typer.Option(help="a program config file (YAML or JSON)")] = None,
    store: StoreOpt = None,
    model: Annotated[str | None, typer.Option(
        help="route every LM call here, e.g. openai/gpt-4o-mini (default: $DECLRAG_MODEL)")] = None,
    where: Annotated[str | None, typer.Option(help="metadata filter as JSON")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
):
    """Answer a question with citations (the default program, a saved one, or a config)."""
    from .inputs import user_text
    from .program import select_program

    question = user_text(question, "question")  # fails before any model loads; the program checks it again
    filt = _json_option(where, "--where")
    prog = select_program(program, config, store, model).load().warm_up()
    answer = prog(question=question, where=filt)
    if as_json:
        out.print_json(data=answer.to_dict())
        return
    out.print(answer.answer, markup=False, highlight=False)
    for c in answer.citations:
        where_ = (c["title"] or Path(c["source"]).name) + (f" p.{c['page']}" if c["page"] else "")
        tag = " (attributed)" if c["attributed"] else ""
        out.print(f"  [{c['n']}] {where_} {c['span'][0]}-{c['span'][1]}{tag}: {c['snippet'][:160]}",
                  markup=False, highlight=False)
    u, ms = answer.usage["total"], answer.latency_ms
    judge = answer.judge.get("mode", "off")
    if judge != "off":
        out.print(f"judge ({judge}): supported={answer.judge.get('supported')} action={answer.judge.get('action')}")
    out.print(f"{u['calls']} LM calls ({u['cached']} cached), {u['tokens_in']} tokens in, {u['tokens_out']} out, "
              f"${u['cost_usd']:.4f}; {ms['total']:.0f} ms", style="dim")


def _json_option(value: str | None, name: str):
    if not value:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise DeclragError(f"{name} is not valid JSON: {e}",
                           hint=f"write e.g. {name} '{{\"source\": \"a.pdf\"}}'") from e


@app.command()
def serve(
    target: Annotated[Path | None, typer.Argument(
        help="a run folder (runs/NAME serves runs/NAME/best) or a program folder (with program.json) "
             "(default: the default program over --store)")] = None,
    config: Annotated[Path | None, typer.Option(
        help="a program config file (YAML or JSON) instead of a saved program")] = None,
    store: StoreOpt = None,
    model: Annotated[str | None, typer.Option(
        help="route every LM call here, e.g. openai/gpt-4o-mini (default: $DECLRAG_MODEL)")] = None,
    host: Annotated[str, typer.Option(help="address to listen on (0.0.0.0: every interface)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    api_key_file: Annotated[Path | None, typer.Option(
        help="file holding the key clients must send as 'Authorization: Bearer <key>' "
             "(default: $DECLRAG_API_KEY; none: no auth)")] = None,
    max_body_bytes: Annotated[int, typer.Option(help="largest request body (413 beyond)")] = 64 * 1024,
    max_question_chars: Annotated[int | None, typer.Option(
        help="longest question (422 beyond) (default: the program's max_question_chars)")] = None,
    timeout: Annotated[float, typer.Option(help="seconds a request may take (504 beyond)")] = 120.0,
    max_in_flight: Annotated[int, typer.Option(
        help="questions answered at once; more get 503 with Retry-After at once")] = 8,
    workers: Annotated[int | None, typer.Option(
        help="threads that run program calls; admitted questions beyond wait for one (default: --max-in-flight; "
             "fewer is faster when calls are CPU-bound, e.g. retrieval with an instant or in-process model)")] = None,
    cache_threshold: Annotated[float | None, typer.Option(
        help="semantic answer cache: reuse the answer to a question at least this similar (cosine, e.g. 0.95) "
             "(default: off)")] = None,
    cache_size: Annotated[int, typer.Option(help="answers the semantic cache keeps (LRU)")] = 1024,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin",
        help="let browser pages from this origin call the API; repeatable (default: CORS off)")] = None,
):
    """Serve a program over HTTP: /v1/ask, OpenAI-compatible /v1/chat/completions, a web page, /metrics."""
    from .serve import ServeSettings
    from .serve import serve as serve_program

    settings = config_from(ServeSettings, host=host, port=port, api_key=_api_key(api_key_file),
                       max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, request_timeout_s=timeout,
                       max_in_flight=max_in_flight, workers=workers, cache_threshold=cache_threshold,
                       cache_size=cache_size, cors_origins=cors_origin or [])
    serve_program(target, config=config, store=store, model=model, settings=settings,
                  say=lambda m: out.print(m, markup=False, highlight=False))


def _api_key(path: Path | None) -> str | None:
    """The API key: from --api-key-file, else $DECLRAG_API_KEY, else none (no auth). A key that no HTTP client
    could send (not visible ASCII) is refused here, naming where it came from."""
    import os

    from .inputs import api_key_problem

    if path is None:
        key, origin = os.environ.get("DECLRAG_API_KEY") or None, "in $DECLRAG_API_KEY"
        if key is None:
            return None
    else:
        origin = f"in {path}"
        try:
            key = path.read_text(encoding="utf-8", errors="surrogateescape").strip()
        except OSError as e:
            raise DeclragError(f"cannot read the API key file {path}: {e.strerror}",
                               hint="check the path and its permissions") from e
        if not key:
            raise DeclragError(f"the API key file {path} is empty", hint="write the key in it (one line)")
    if problem := api_key_problem(key):
        raise DeclragError(f"the API key {origin} {problem}",
                           hint="choose a key of ASCII letters, digits and punctuation, "
                                "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return key


@app.command("eval")
def eval_(
    dataset: Annotated[str | None, typer.Option(help="golden set: a name (see `declrag datasets`) or a path")] = None,
    program: Annotated[Path | None, typer.Option(
        help="a saved program: a run folder (runs/NAME) or a program folder (runs/NAME/best)")] = None,
    config: Annotated[Path | None, typer.Option(help="a program config file (YAML or JSON)")] = None,
    store: StoreOpt = None,
    split: Annotated[str | None, typer.Option(
        help="split to evaluate (default: dev, else test, else the first)")] = None,
    limit: Annotated[int | None, typer.Option(help="a seeded sample of N questions")] = None,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 13,
    metrics: Annotated[str | None, typer.Option(
        help="comma-separated metric names "
             "(default: every deterministic one, plus the judge metrics with --judge)")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="LLM judge route; repeat to average several")] = None,
    threads: Annotated[int, typer.Option(help="questions evaluated in parallel")] = 1,
    name: Annotated[str | None, typer.Option(
        help="run folder name under --runs (default: derived from the inputs)")] = None,
    runs: Annotated[Path, typer.Option(help="where run folders go")] = Path("runs"),
    closed_book: Annotated[bool, typer.Option(
        "--closed-book", help="also answer with no retrieval (lower bound)")] = False,
    oracle: Annotated[bool, typer.Option(
        "--oracle", help="also answer from the gold passage only (upper bound)")] = False,
    probes: Annotated[bool, typer.Option("--probes", help="robustness probes: no context, irrelevant context")] = False,
    model: Annotated[str | None, typer.Option(
        help="route every program LM call here (default: $DECLRAG_MODEL)")] = None,
    compare: Annotated[tuple[Path, Path] | None, typer.Option(
        help="compare two eval runs: --compare RUN_A RUN_B")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
):
    """Evaluate a program on a golden set: per-question records, a summary with 95% CIs, a report."""
    from .evaluate import DEFAULT_JUDGE_METRICS, DEFAULT_METRICS, EvalSpec, Evaluation
    from .evaluate import compare as compare_runs

    if compare:
        _print_compare(compare_runs(*compare))
        return
    if not dataset:
        raise DeclragError("--dataset is required", hint="e.g. declrag eval --dataset squad-v2.0 --limit 50")
    from .golden import load_golden
    from .program import select_program

    golden = load_golden(dataset)
    split = split or next((s for s in ("dev", "test") if s in golden.splits), next(iter(golden.splits)))
    golden.split(split)
    if limit is not None and limit < 1:
        raise DeclragError(f"--limit must be at least 1, got {limit}")
    names = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else \
        DEFAULT_METRICS + (DEFAULT_JUDGE_METRICS if judge else [])
    prog = select_program(program, config, store, model, corpus=golden, progress=not quiet).load().warm_up()
    spec = EvalSpec(dataset=golden.name, split=split, limit=limit, seed=seed, metrics=names, judges=judge or [],
                    threads=threads, closed_book=closed_book, oracle=oracle, probes=probes)
    run_name = name or f"eval-{golden.name}-{split}-{limit or 'all'}-{prog.config.digest()[:8]}"
    summary = Evaluation(prog, golden, spec, runs / run_name, progress=not quiet).run()
    t = Table(title=f"{run_name}: {summary['n']} questions, {summary['wall_s']} s")
    for col in ("metric", "mean", "95% CI", "n"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for n, v in summary["metrics"].items():
        if v["mean"] is not None:
            t.add_row(n, f"{v['mean']:.4f}", f"[{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]", str(v["n"]))
    out.print(t)
    u = summary["usage"]
    out.print(f"program: {int(u['program']['calls'])} LM calls ({int(u['program']['cached'])} cached), "
              f"${u['program']['cost_usd']:.4f}; judges: {int(u['judges']['calls'])} calls "
              f"({int(u['judges']['cached'])} cached), ${u['judges']['cost_usd']:.4f}")
    out.print(f"report: {runs / run_name / 'report.html'}")


def _print_compare(r: dict) -> None:
    t = Table(title=f"B - A over {r['n']} shared questions (A = {r['a']}, B = {r['b']}); paired bootstrap 95% CI")
    for col in ("metric", "A", "B", "B - A", "95% CI", "real?"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for n, v in r["metrics"].items():
        if v["diff"] is None:
            continue
        t.add_row(n, f"{v['a']:.4f}", f"{v['b']:.4f}", f"{v['diff']:+.4f}",
                  f"[{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}]", "yes" if v["significant"] else "noise")
    out.print(t)


@app.command()
def datasets():
    """List the named datasets (declared in YAML: $DECLRAG_DATASETS, ./datasets, then the packaged defaults)."""
    from .golden import find_spec, known_datasets

    t = Table(title="datasets (use a name wherever a dataset path is accepted)")
    for col in ("name", "format", "local copy", "hugging face fallback", "license"):
        t.add_column(col, overflow="fold")
    for name in sorted(known_datasets()):
        s = find_spec(name)
        local = s.local_path()
        where = f"{local.resolve()} ({'found' if local.exists() else 'missing'})" if local else "-"
        t.add_row(name, s.format, where, s.hf.id if s.hf else "-", s.license)
    out.print(t)


@app.command()
def init(
    folder: Annotated[Path, typer.Argument(help="the project folder (created if missing)")] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="overwrite files that exist")] = False,
):
    """Copy the packaged defaults (signatures/, optimizers/, datasets/) into a project folder for editing."""
    from .resources import ENV
    from .resources import init as copy_defaults

    written, skipped = copy_defaults(folder, force=force)
    for f in written:
        out.print(f"wrote {f}", markup=False, highlight=False)
    for f in skipped:
        out.print(f"skipped {f} (exists; --force overwrites)", markup=False, highlight=False)
    out.print(f"{len(written)} files written, {len(skipped)} skipped. Run declrag in {folder}: its signatures/, "
              "optimizers/ and datasets/ now win over the packaged defaults (folders named by "
              f"{', '.join('$' + v for v in ENV.values())} come first). A path in datasets/*.yaml is relative to "
              "the YAML file: point it at your copy of the data (else the Hugging Face fallback is downloaded).",
              markup=False, highlight=False)


indexes_app = typer.Typer(no_args_is_help=True,
                          help="The content-addressed indexes compile, eval and the benchmarks build.")
app.add_typer(indexes_app, name="indexes")
HomeOpt = Annotated[str | None, typer.Option("--store", help="a folder or weaviate://host:port/ "
                                                           "(default: the cache folder's indexes)")]


@indexes_app.command("list")
def indexes_list(
    home: HomeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """List the indexes (one per corpus and ingest setting) with their size and settings."""
    from .api import index_home
    from .stores import list_stores

    rows = list_stores(home or index_home())
    if as_json:
        out.print_json(data=[{"store": uri, "chunks": n, "ingest": meta.ingest.model_dump(mode="json")}
                             for uri, meta, n in rows])
        return
    t = Table(title=f"{len(rows)} indexes at {home or index_home()}")
    for col in ("store", "chunks", "chunker", "size/overlap", "embedding model"):
        t.add_column(col, overflow="fold")
    for uri, meta, n in rows:
        c = meta.ingest.chunker
        t.add_row(uri, str(n), c.name, f"{c.chunk_size}/{c.overlap}", meta.ingest.embedder.model)
    out.print(t)


@indexes_app.command("rm")
def indexes_rm(
    names: Annotated[list[str] | None, typer.Argument(
        help="stores to remove, as `declrag indexes list` shows them")] = None,
    home: HomeOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="remove every index at --store")] = False,
):
    """Remove indexes (they are rebuilt when next needed)."""
    from .api import index_home
    from .stores import connect, list_stores

    listed = [uri for uri, _, _ in list_stores(home or index_home())]
    if not names and not all_:
        raise DeclragError("name the indexes to remove, or pass --all", hint="see declrag indexes list")
    targets = listed if all_ else list(names or [])
    if unknown := [n for n in targets if n not in listed]:
        raise DeclragError(f"no index {unknown[0]} at {home or index_home()}", hint="see declrag indexes list")
    for uri in targets:
        with connect(uri) as st:
            st.drop()
        out.print(f"removed {uri}", markup=False, highlight=False)


@app.command("compile")
def compile_(
    space: Annotated[Path | None, typer.Option(
        help="search space: a YAML path, or a name found in $DECLRAG_OPTIMIZERS, ./optimizers or the packaged "
             "defaults (e.g. retrieval)")] = None,
    dataset: Annotated[str | None, typer.Option(help="golden set: a name or a path")] = None,
    name: Annotated[str | None, typer.Option(help="run folder name under --runs")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the compile in this run folder")] = None,
    runs: Annotated[Path, typer.Option(help="where run folders go")] = Path("runs"),
    max_trials: Annotated[int | None, typer.Option(
        help="stop after this many trials in all (incl. earlier ones)")] = None,
    timeout: Annotated[float | None, typer.Option(help="stop the search after this many seconds")] = None,
    max_cost_usd: Annotated[float | None, typer.Option(help="stop when LM spending reaches this")] = None,
    max_lm_calls: Annotated[int | None, typer.Option(help="stop after this many (uncached) LM calls")] = None,
    jobs: Annotated[int, typer.Option(help="trials run in parallel")] = 1,
    store: Annotated[str | None, typer.Option(
        "--store", help="where the trials' indexes live: a folder (one sub-folder per ingest setting) or "
                        "weaviate://host:port/ (one collection per ingest setting) "
                        "(default: the cache folder)")] = None,
    model: Annotated[str | None, typer.Option(
        help="route every LM call of every trial here (default: $DECLRAG_MODEL)")] = None,
    storage: Annotated[str | None, typer.Option(
        help="the study's database, shared by workers on many machines: any SQLAlchemy URL Optuna accepts, e.g. "
             "postgresql+psycopg://user@host/db (password from $PGPASSWORD or ~/.pgpass) "
             "(default: the run folder's journal)")] = None,
    join: Annotated[str | None, typer.Option(
        help="add a worker to the study NAME in --storage (space, dataset, model and budgets are the study's)")] = None,
    finalize: Annotated[bool, typer.Option(
        "--finalize", help="with --join: also write the artifact and report here when the search ends "
                           "(if the creating machine is gone)")] = False,
    heartbeat: Annotated[int, typer.Option(
        help="with --storage: seconds between a running trial's heartbeats; "
             "a trial silent for 3x this is retried by another worker")] = 10,
    patience: Annotated[float, typer.Option(
        help="with --storage: seconds a worker retries a lost database (with backoff) before it stops")] = 120.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
):
    """Search the declared space for the best program on a golden set; write runs/NAME/best. With --storage,
    workers on other machines join the same study with --join NAME."""
    from .memory import describe
    from .optimize.compile import Budget
    from .optimize.run import compile_run
    from .program import model_route

    budget = Budget(max_trials=max_trials, timeout_s=timeout, max_cost_usd=max_cost_usd, max_lm_calls=max_lm_calls)
    if heartbeat < 1 or patience < 0:
        raise DeclragError("--heartbeat is a whole number of seconds >= 1 and --patience >= 0",
                           hint="e.g. --heartbeat 10 --patience 120")
    s = compile_run(space, dataset, name, runs, budget, jobs, resume, model if join else model_route(model),
                    progress=not quiet, store=store, storage=storage, join=join, finalize=finalize,
                    heartbeat_s=heartbeat, patience_s=patience)
    if s.get("role") == "worker":
        out.print(f"worker done: the study {s['study']!r} in {s['storage']} has {s['complete']} finished and "
                  f"{s['pruned']} pruned trials ({s['mine']} of them run here, in {s['wall_s']} s); the process that "
                  "created it writes the artifact and the report", markup=False, highlight=False)
        return
    g = s["gain_test"]
    t = Table(title=f"compile: {s['trials']} trials ({s['pruned']} pruned, {s['stopped_by_budget']} stopped by a "
                    f"budget), {s['lm_calls']} LM calls, ${s['cost_usd']:.4f}, {s['wall_s']} s")
    for col in ("", f"baseline (trial {s['baseline']['trial']})", f"best (trial {s['best']['trial']})"):
        t.add_column(col, justify="right")
    t.add_row("dev objective", f"{s['baseline']['dev'].get('objective', 0):.4f}",
              f"{s['best']['dev'].get('objective', 0):.4f}")
    t.add_row("test objective", f"{s['baseline']['test'].get('objective', 0):.4f}",
              f"{s['best']['test'].get('objective', 0):.4f}")
    out.print(t)
    out.print(f"test gain {g['diff']:+.4f} [{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}] "
              f"({'holds' if g['significant'] else 'not distinguishable from noise'}); "
              f"best params: {json.dumps(s['best']['params'])}")
    out.print(describe(s["memory"]), markup=False, highlight=False)
    folder = resume or runs / cast(str, join or name)  # compile_run has refused a new run without --name
    out.print(f"program: {folder / 'best'}   report: {folder / 'report.html'}")


def _own_process() -> None:
    """The settings the `declrag` command makes for its whole process (a library import makes none): DSPy's
    response cache under declrag's cache folder, and LiteLLM's feedback banner off (errors are ours to word)."""
    import litellm

    from .lm import use_lm_cache

    litellm.suppress_debug_info = True
    use_lm_cache()


INTERRUPTED = 130  # Ctrl-C: typer >= 0.2x turns KeyboardInterrupt into Exit(130) itself, older ones into Abort


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _own_process()
    click_error, no_args = _click_errors()
    try:
        code = app(args=argv, standalone_mode=False)  # returns ctx.exit()'s code, else the command's value
        code = code if isinstance(code, int) else 0
    except DeclragError as e:
        err.print(f"error: {e.message}", markup=False, highlight=False)
        if e.hint:
            err.print(f"  fix: {e.hint}", markup=False, highlight=False)
        return 2
    except (KeyboardInterrupt, typer.Abort):
        code = INTERRUPTED
    except typer.Exit as e:
        code = e.exit_code
    except click_error as e:
        if no_args is not None and isinstance(e, no_args):  # `declrag`, `declrag bench`: the help, as click shows it
            err.print(e.format_message(), markup=False, highlight=False)
        else:
            err.print(usage_line(e, sys.argv[1:] if argv is None else argv), markup=False, highlight=False)
        return e.exit_code
    if code == INTERRUPTED:
        err.print("interrupted: everything committed before this point is kept; rerun to continue "
                  "(declrag synth: with --resume)")
    return code


def _click_errors() -> tuple[Any, Any]:  # (ClickException, NoArgsIsHelpError or None): classes typer picks
    """The usage-error classes of the click that typer parses with: typer >= 0.2x carries its own copy
    (``typer._click``), older typers raise the click package's; `typer.BadParameter` is one of them either way."""
    exceptions = sys.modules[typer.BadParameter.__module__]
    return exceptions.ClickException, getattr(exceptions, "NoArgsIsHelpError", None)


def usage_line(e: Exception, argv: list[str]) -> str:
    """A click usage error as one line: what is wrong, and the help to read (that of the command being parsed)."""
    message = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(e, "ctx", None)
    return f"error: {message} (see: {ctx.command_path if ctx is not None else _command_path(argv)} --help)"


def _command_path(argv: list[str]) -> str:
    """The command that ``argv`` names (``declrag eval`` for ``eval --threads``), for errors that come without it."""
    cmd, path = typer.main.get_command(app), ["declrag"]
    for arg in argv:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            break
        cmd, path = sub, [*path, arg]
    return " ".join(path)


if __name__ == "__main__":
    sys.exit(main())
