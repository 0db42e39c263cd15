"""declrag serve: the command and its API key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import DeclragError
from ..inputs import api_key_problem
from .app import app
from .common import (
    EmbeddingRowsOpt,
    LmCacheDiskOpt,
    LmCacheEntriesOpt,
    LmHistoryOpt,
    ModelOpt,
    ProgramFileOpt,
    StoreOpt,
    TargetArg,
    apply_cache_limits,
    config_from,
    out,
)


@app.command()
def serve(
    target: TargetArg = None,
    config: ProgramFileOpt = None,
    store: StoreOpt = None,
    model: ModelOpt = None,
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
    max_search_k: Annotated[int, typer.Option(
        help="the most passages one /v1/search request may ask for (k; 422 beyond; at most 100)")] = 50,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin",
        help="let browser pages from this origin call the API; repeatable (default: CORS off)")] = None,
    lm_cache_entries: LmCacheEntriesOpt = None,
    lm_cache_disk_mb: LmCacheDiskOpt = None,
    lm_history: LmHistoryOpt = None,
    embedding_rows: EmbeddingRowsOpt = None,
):
    """Serve a program over HTTP: /v1/ask, /v1/search, OpenAI-compatible /v1/chat/completions, a web page,
    /metrics."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..serve import ServeSettings
    from ..serve import serve as serve_program

    limits = apply_cache_limits(lm_cache_entries, lm_cache_disk_mb, lm_history, embedding_rows)
    settings = config_from(ServeSettings, cache_limits=limits, host=host, port=port, api_key=_api_key(api_key_file),
                       max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, request_timeout_s=timeout,
                       max_in_flight=max_in_flight, workers=workers, cache_threshold=cache_threshold,
                       cache_size=cache_size, cors_origins=cors_origin or [], max_search_k=max_search_k)
    serve_program(target, config=config, store=store, model=model, settings=settings,
                  say=lambda m: out.print(m, markup=False, highlight=False))


def _api_key(path: Path | None) -> str | None:
    """The API key: from --api-key-file, else $DECLRAG_API_KEY, else none (no auth). A key that no HTTP client
    could send (not visible ASCII) is refused here, naming where it came from."""
    import os

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

