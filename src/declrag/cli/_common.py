"""What every `declrag` command module shares: the consoles, option parsing and the options several commands
take (one alias each). `declrag.cli` builds the command tree from the command modules; they import only this and
`declrag.cli._app`, so no module imports back."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..errors import DeclragError
from ..inputs import api_key_problem

if TYPE_CHECKING:  # the loaders are not imported when `declrag` starts
    from ..ingest.loaders import Skipped

LOG_WIDTH = 1000  # columns a table may take when printed to a pipe or a file (a log keeps every number whole)


def _console(stderr: bool = False) -> Console:
    """A console for the terminal's width; printed to a pipe or a file (no terminal, no $COLUMNS), tables are laid
    out whole instead of cut to Rich's 80 columns ("Follow-…")."""
    c = Console(stderr=stderr, soft_wrap=True)
    if not c.is_terminal and not os.environ.get("COLUMNS"):
        c.width = LOG_WIDTH
    return c


out = _console()
err = _console(stderr=True)


def config_from(cls, **fields):
    """Build a pydantic config from CLI options (None: not given), turning validation errors into
    DeclragErrors."""
    from pydantic import ValidationError

    try:
        return cls(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"]))
        msg = first["msg"].removeprefix("Value error, ")  # a check across options says it all itself
        raise DeclragError(f"invalid option {where}: {msg}" if where else f"invalid options: {msg}",
                           hint="see --help for allowed values") from e


StoreOpt = Annotated[str | None, typer.Option("--store", help="store: a folder or weaviate://host:port/Collection "
                                                                  "(default: $DECLRAG_STORE or .declrag/store)")]

HomeOpt = Annotated[str | None, typer.Option("--store", help="a folder or weaviate://host:port/ "
                                                           "(default: the cache folder's indexes)")]
ProgramOpt = Annotated[Path | None, typer.Option(
    help="a saved program: a run folder (runs/NAME) or a program folder (runs/NAME/best)")]
ConfigOpt = Annotated[Path | None, typer.Option(help="a program config file (YAML or JSON)")]
ModelOpt = Annotated[str | None, typer.Option(
    help="route every LM call here, e.g. openai/gpt-4o-mini (default: $DECLRAG_MODEL); a model named writes the "
         "answers")]


class AnswerMode(StrEnum):
    auto = "auto"
    lm = "lm"
    extractive = "extractive"
    verified = "verified"


AnswerModeOpt = Annotated[AnswerMode | None, typer.Option(
    help="how answers are written: extractive (the passages' own sentences, no LM), lm (the LM writes), verified "
         "(the LM writes, each sentence checked), auto (lm when a model is named, else extractive) (default: the "
         "program's own)")]


def json_option(value: str | None, name: str):
    if not value:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise DeclragError(f"{name} is not valid JSON: {e}",
                           hint=f"write e.g. {name} '{{\"source\": \"a.pdf\"}}'") from e


# the bounds of the process-wide caches (declrag.runtime.cache_limits.CacheLimits), on serve, compile and eval
LmCacheEntriesOpt = Annotated[int | None, typer.Option(
    help="LM responses DSPy's in-memory cache keeps (LRU) (default: 2000)")]
LmCacheDiskOpt = Annotated[int | None, typer.Option(
    "--lm-cache-disk-mb", help="MiB DSPy's disk cache may take, culled beyond; 0: no disk cache (default: 1024)")]
LmHistoryOpt = Annotated[int | None, typer.Option(
    help="LM calls kept in each of DSPy's history lists; 0: none (default: 100)")]
EmbeddingRowsOpt = Annotated[int | None, typer.Option(
    help="vectors the embedding cache file keeps, oldest deleted beyond (default: 1000000, about 5 GB at 384-d)")]


def apply_cache_limits(lm_cache_entries: int | None, lm_cache_disk_mb: int | None, lm_history: int | None,
                       embedding_rows: int | None):
    """Bound this process's caches by the flags given (the others at their defaults); returns the limits."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..lm import use_cache_limits
    from ..runtime.cache_limits import CacheLimits

    return use_cache_limits(config_from(CacheLimits, lm_cache_entries=lm_cache_entries,
                                        lm_cache_disk_mb=lm_cache_disk_mb, lm_history=lm_history,
                                        embedding_rows=embedding_rows))


TargetArg = Annotated[Path | None, typer.Argument(
    help="a run folder (runs/NAME serves runs/NAME/best), a program folder (with program.json) or a program in "
         "MLflow (runs:/RUN_ID/program, with $MLFLOW_TRACKING_URI) (default: the default program over --store)")]
ProgramFileOpt = Annotated[Path | None, typer.Option(
    "--config", help="a program config file (YAML or JSON) instead of a saved program")]


ApiKeyFileOpt = Annotated[Path | None, typer.Option(
    help="file holding the key clients must send as 'Authorization: Bearer <key>' "
         "(default: $DECLRAG_API_KEY; none: no auth)")]
TimeoutOpt = Annotated[float, typer.Option(help="seconds a request may take (504 beyond)")]
MaxInFlightOpt = Annotated[int, typer.Option(help="questions answered at once; more get 503 with Retry-After at once")]


def api_key_from(path: Path | None) -> str | None:
    """The API key of `declrag serve` and `declrag mcp`: from --api-key-file, else $DECLRAG_API_KEY, else none (no
    auth). A key that no HTTP client could send (not visible ASCII) is refused here, naming where it came from."""
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


RecordOpt = Annotated[str | None, typer.Option(
    help="where to record each question, its passages, answer and rating: a SQLite file or a "
         "postgresql+psycopg:// URI (default: usage.sqlite3 in the run folder, else STORE.usage.sqlite3 beside "
         "the local store)")]
NoRecordOpt = Annotated[bool, typer.Option("--no-record", help="record nothing (POST /v1/feedback answers 404)")]
RecordRowsOpt = Annotated[int, typer.Option(min=1, help="the newest answers the usage store keeps")]
RecordDaysOpt = Annotated[float, typer.Option(min=0.001, help="days an answer is kept in the usage store")]
ExploreOpt = Annotated[float, typer.Option(
    min=0.0, max=1.0, help="the share of questions answered from the program's and its neighbours' rankings "
                           "multileaved, so that ratings can tell which retrieval settings serve your users best "
                           "(compile --usage reads them; e.g. 0.2; default: 0, none)")]
ExploreSeedOpt = Annotated[int | None, typer.Option(
    help="seed which questions are explored and how their rankings are multileaved, so that a replay of the same "
         "questions in the same order explores alike (benchmarks; default: a new draw each start)")]


def record_settings(record: str | None, no_record: bool, rows: int, days: float, explore: float = 0.0,
                    explore_seed: int | None = None):
    """`declrag serve`'s and `declrag mcp`'s recording options as `declrag.usage.RecordSettings` (None: off)."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..usage import RecordSettings

    if no_record and record:
        raise DeclragError("--record and --no-record: choose one", hint="drop --no-record to record to that store")
    if no_record and explore:
        raise DeclragError("--explore and --no-record: exploring is for the ratings a usage store records",
                           hint="drop --no-record, or --explore")
    return None if no_record else RecordSettings(target=record, max_rows=rows, max_days=days, explore=explore,
                                                 explore_seed=explore_seed)


SourceBaseOpt = Annotated[str | None, typer.Option(
    help="name a cited file by this public URL plus its path in the indexed folder, e.g. https://docs.example.com/ "
         "(default: the path relative to the indexed folder; never the server's own path)")]


SKIPPED_SHOWN = 3  # of the files skipped for one reason, how many are named before "... and N more" (--verbose: all)
EveryOpt = Annotated[bool, typer.Option("--verbose", "-v", help="name every file and part skipped, one line each "
                                        f"(default: the first {SKIPPED_SHOWN} of each reason, then their count)")]


def say_skipped(skipped: Sequence[Skipped], every: bool = False) -> None:
    """Each file or part skipped (`declrag.ingest.loaders.Skipped`) as ``skipped WHERE: REASON`` on stderr; unless
    ``every``, a reason shared by more than `SKIPPED_SHOWN` + 1 of them names the first `SKIPPED_SHOWN`, then says how
    many more (a folder of 5,000 images is four lines, and a corrupt file among them is not lost in them)."""
    by_reason: dict[str, list[Skipped]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s)
    for reason, group in by_reason.items():
        shown = group if every or len(group) <= SKIPPED_SHOWN + 1 else group[:SKIPPED_SHOWN]
        for s in shown:
            err.print(f"skipped {s.where}: {reason}", markup=False, highlight=False)
        if len(shown) < len(group):
            err.print(f"... and {len(group) - len(shown):,} more skipped: {reason} (--verbose names each)",
                      markup=False, highlight=False)
