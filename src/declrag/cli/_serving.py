"""declrag serve: the command."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import DeclragError
from ._access import (
    CallersKeysOpt,
    GroupsClaimOpt,
    JwksOpt,
    JwtAudienceOpt,
    JwtIssuerOpt,
    JwtSecretFileOpt,
    UnlabelledOpt,
    access_settings,
)
from ._app import app
from ._common import (
    AnswerModeOpt,
    ApiKeyFileOpt,
    EmbeddingRowsOpt,
    ExploreOpt,
    ExploreSeedOpt,
    LmCacheDiskOpt,
    LmCacheEntriesOpt,
    LmHistoryOpt,
    MaxInFlightOpt,
    ModelOpt,
    NoRecordOpt,
    ProgramFileOpt,
    RecordDaysOpt,
    RecordOpt,
    RecordRowsOpt,
    SourceBaseOpt,
    StoreOpt,
    TargetArg,
    TimeoutOpt,
    api_key_from,
    apply_cache_limits,
    config_from,
    out,
    record_settings,
)


@app.command()
def serve(
    target: TargetArg = None,
    config: ProgramFileOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
    answer_mode: AnswerModeOpt = None,
    host: Annotated[str, typer.Option(help="address to listen on (0.0.0.0: every interface)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    api_key_file: ApiKeyFileOpt = None,
    max_body_bytes: Annotated[int, typer.Option(help="largest request body (413 beyond)")] = 64 * 1024,
    max_question_chars: Annotated[int | None, typer.Option(
        help="longest question (422 beyond) (default: the program's max_question_chars)")] = None,
    timeout: TimeoutOpt = 120.0,
    max_in_flight: MaxInFlightOpt = 8,
    processes: Annotated[int, typer.Option(
        min=1, max=64, help="server processes, each with the program loaded once (past one interpreter lock: "
                            "throughput on several cores); --max-in-flight, --workers and the caches are per process"
    )] = 1,
    workers: Annotated[int | None, typer.Option(
        help="threads that run program calls; admitted questions beyond wait for one (default: --max-in-flight; "
             "fewer is faster when calls are CPU-bound, e.g. retrieval with an instant or in-process model)")] = None,
    cache_threshold: Annotated[float | None, typer.Option(
        help="semantic answer cache: reuse the answer to a question at least this similar (cosine, e.g. 0.95) "
             "(default: off)")] = None,
    cache_size: Annotated[int, typer.Option(help="answers the semantic cache keeps (LRU)")] = 1024,
    max_search_k: Annotated[int, typer.Option(
        help="the most passages one /v1/search request may ask for (k; 422 beyond; at most 100)")] = 50,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin",
        help="let browser pages from this origin call the API; repeatable (default: CORS off)")] = None,
    source_base: SourceBaseOpt = None,
    otlp_endpoint: Annotated[str | None, typer.Option(
        help="send OpenTelemetry traces (OTLP/HTTP) to this receiver, e.g. http://127.0.0.1:4318 "
             "(default: $OTEL_EXPORTER_OTLP_ENDPOINT; none: no traces)")] = None,
    otlp_content: Annotated[bool, typer.Option(
        "--otlp-content",
        help="let spans carry questions, passages, prompts and answers (they may hold private data)")] = False,
    lm_cache_entries: LmCacheEntriesOpt = None,
    lm_cache_disk_mb: LmCacheDiskOpt = None,
    lm_history: LmHistoryOpt = None,
    embedding_rows: EmbeddingRowsOpt = None,
    record: RecordOpt = None,
    no_record: NoRecordOpt = False,
    record_rows: RecordRowsOpt = 100_000,
    record_days: RecordDaysOpt = 90.0,
    explore: ExploreOpt = 0.0,
    explore_seed: ExploreSeedOpt = None,
    keys: CallersKeysOpt = None,
    jwks: JwksOpt = None,
    jwt_secret_file: JwtSecretFileOpt = None,
    jwt_issuer: JwtIssuerOpt = None,
    jwt_audience: JwtAudienceOpt = None,
    groups_claim: GroupsClaimOpt = "groups",
    unlabelled: UnlabelledOpt = "everyone",
):
    """Serve a program over HTTP: /v1/ask, /v1/search, OpenAI-compatible /v1/chat/completions, a web page,
    /metrics."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..runtime import tracing
    from ..serve import ServeSettings
    from ..serve import serve as serve_program

    recording = record_settings(record, no_record, record_rows, record_days, explore, explore_seed)
    if (otlp_endpoint or otlp_content) and not tracing.configure(otlp_endpoint, content=otlp_content or None):
        raise DeclragError("--otlp-content: no trace receiver to send the spans to",
                           hint="give --otlp-endpoint URL, or set OTEL_EXPORTER_OTLP_ENDPOINT")
    limits = apply_cache_limits(lm_cache_entries, lm_cache_disk_mb, lm_history, embedding_rows)
    callers = access_settings(keys, jwks, jwt_secret_file, jwt_issuer, jwt_audience, groups_claim, unlabelled)
    settings = config_from(ServeSettings, cache_limits=limits, host=host, port=port, api_key=api_key_from(api_key_file),
                       max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, request_timeout_s=timeout,
                       max_in_flight=max_in_flight, workers=workers, cache_threshold=cache_threshold,
                       cache_size=cache_size, cors_origins=cors_origin or [], max_search_k=max_search_k,
                       source_base=source_base, processes=processes,
                       record=recording, access=callers)
    serve_program(target, config=config, store=store, model=model, answer_mode=answer_mode and answer_mode.value,
                  settings=settings,
                  say=lambda m: out.print(m, markup=False, highlight=False))

