"""declrag serve: the command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import DeclragError
from .app import app
from .common import (
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
    keys: Annotated[Path | None, typer.Option(
        help="callers' keys file (`declrag keys add`): each caller sees only the documents their groups may read "
             "(docs/guides/access.md)")] = None,
    jwks: Annotated[str | None, typer.Option(
        help="callers' bearer JWTs, checked against this JWKS (a file, or the identity provider's https URL)")] = None,
    jwt_secret_file: Annotated[Path | None, typer.Option(
        help="callers' bearer JWTs, checked with the shared secret (HS256) in this file")] = None,
    jwt_issuer: Annotated[str | None, typer.Option(help="with JWTs: the issuer (iss) they must name")] = None,
    jwt_audience: Annotated[str | None, typer.Option(help="with JWTs: the audience (aud) they must name")] = None,
    groups_claim: Annotated[str, typer.Option(
        help="with JWTs: the claim holding the caller's groups (a dotted path for a nested one)")] = "groups",
    unlabelled: Annotated[str, typer.Option(
        help="with callers: who reads documents indexed without readers: everyone | nobody")] = "everyone",
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
    callers = _access(keys, jwks, jwt_secret_file, jwt_issuer, jwt_audience, groups_claim, unlabelled)
    settings = config_from(ServeSettings, cache_limits=limits, host=host, port=port, api_key=api_key_from(api_key_file),
                       max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, request_timeout_s=timeout,
                       max_in_flight=max_in_flight, workers=workers, cache_threshold=cache_threshold,
                       cache_size=cache_size, cors_origins=cors_origin or [], max_search_k=max_search_k,
                       source_base=source_base, processes=processes,
                       record=recording, access=callers)
    serve_program(target, config=config, store=store, model=model, answer_mode=answer_mode and answer_mode.value,
                  settings=settings,
                  say=lambda m: out.print(m, markup=False, highlight=False))


def _access(keys: Path | None, jwks: str | None, secret_file: Path | None, issuer: str | None, audience: str | None,
            groups_claim: str, unlabelled: str):
    """`serve`'s callers (`declrag.access.AccessSettings`) from its flags; None when none names any."""
    from ..access import AccessSettings  # here, not at the top: start-up time

    if keys is None and jwks is None and secret_file is None:
        if issuer or audience or groups_claim != "groups" or unlabelled != "everyone":
            raise DeclragError("--jwt-issuer, --jwt-audience, --groups-claim and --unlabelled go with callers",
                               hint="give --keys FILE, --jwks FILE|URL or --jwt-secret-file FILE")
        return None
    secret = None
    if secret_file is not None:
        try:
            secret = secret_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise DeclragError(f"cannot read --jwt-secret-file {secret_file}: {e.strerror or e}",
                               hint="give the file holding the identity provider's shared secret") from None
    return config_from(AccessSettings, keys_file=keys, jwks=jwks, jwt_secret=secret, jwt_issuer=issuer,
                       jwt_audience=audience, groups_claim=groups_claim, unlabelled=unlabelled)
