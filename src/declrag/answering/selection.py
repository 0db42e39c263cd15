"""Which program runs: the one decision `declrag ask`, `eval`, `serve` and `mcp` share (`select_program`), and
the route every LM call goes to (`model_route`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..config import ProgramConfig, answer_mode, with_mode
from ..errors import DeclragError
from ..ingest.corpus import corpus_store
from ..lm import is_small_local
from ..pipeline.program import RAGProgram, default_config, load, read_config, saved_config, with_model
from ..runtime.folders import default_store
from ..stores import read_meta
from ..stores.base import Store

DEFAULT_NAME = "declrag-default"
MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")  # a program logged by `declrag compile --mlflow`


def model_route(model: str | None) -> str | None:
    """The route every LM call goes to: ``model`` (``--model``), else $DECLRAG_MODEL, else None (the
    config's own routes). The one place that reads $DECLRAG_MODEL."""
    return model or os.environ.get("DECLRAG_MODEL") or None


MODES = ("auto", "lm", "extractive", "verified")


class ProgramChoice(NamedTuple):
    """Which program runs: its served ``name``, the ``run`` folder it came from (or None), a description
    (``what``) for messages, ``load()``, which builds it, and ``answers``: how it answers, and how to change
    that, in one line (`answers_line`)."""

    name: str
    run: str | None
    what: str
    load: Callable[[], RAGProgram]
    answers: str = ""


def answers_line(config: ProgramConfig) -> str:
    """How a program with ``config`` answers, and how to change it, in one line for a server's start."""
    mode, route = answer_mode(config), config.stage_lm("generate").route
    if mode == "extractive":
        named = "" if config.generate.mode == "auto" else "--answer-mode lm "  # a mode set stays when a model is named
        return (f"answers: extractive (the passages' own sentences, cited; no LM call); {named}--model ROUTE has an "
                "LM write them")
    how = "written by" if mode == "lm" else "written and checked sentence by sentence (verified) by"
    line = f"answers: {how} {route}; an echo of the prompt or a copy of the passages is replaced " \
           f"({config.generate.caught})"
    if is_small_local(route):  # a program saved to write with the small local model, e.g. before `auto`
        line += (f". Note: {route} is a small model that often repeats its prompt; --answer-mode extractive answers "
                 "in the passages' own sentences, --model ROUTE names a capable LM")
    else:
        line += "; --answer-mode extractive answers without it"
    return line


def select_program(program: str | Path | None = None, config: str | Path | None = None,
                   store: Store | str | Path | None = None, model: str | None = None,
                   corpus: Any = None, progress: bool = False, answer_mode: str | None = None) -> ProgramChoice:
    """The one decision of which program `declrag ask`, `eval` and `serve` run. Everything cheap is checked
    now (paths, config syntax, the store's presence), so mistakes fail before any model loads.

    ``program``: a run folder (``runs/NAME``: its ``best`` program, named NAME) or a program folder (with
    ``program.json``). Else ``config`` (named after the file). Else the default program (`default_program`).
    ``model`` (else $DECLRAG_MODEL, see `model_route`) routes every LM call; ``answer_mode`` sets how the answer is
    written (``generate.mode``: auto, lm, extractive, verified). The store: ``store``, else the config's, else
    ``corpus``'s documents (a `GoldenSet`, indexed once into a cached store, as eval does), else the default
    store."""
    route, mode = model_route(model), answer_mode
    if mode is not None and mode not in MODES:
        raise DeclragError(f"--answer-mode {mode!r} is not a mode", hint=f"use one of {', '.join(MODES)}")

    def moded(config: ProgramConfig) -> ProgramConfig:
        return with_mode(config, mode) if mode else config
    if program is not None and config is not None:
        raise DeclragError("give a program folder or a config, not both", hint="a saved program already has its config")
    if program is not None and str(program).startswith(MLFLOW_SCHEMES):  # a typer Path keeps the text as given
        program = mlflow_program(str(program))
    if program is not None:
        folder = Path(program)
        if (folder / "program.json").is_file():
            name = folder.resolve().parent.name if folder.resolve().name == "best" else folder.resolve().name
        elif (folder / "best" / "program.json").is_file():
            name, folder = folder.resolve().name, folder / "best"
        else:
            raise DeclragError(f"{program} is neither a run folder (with best/program.json) nor a program folder "
                               "(with program.json)",
                               hint="point at runs/NAME or runs/NAME/best, as declrag compile writes them")
        saved = saved_config(folder)
        shown = moded(with_model(saved, route) if route else saved)
        return ProgramChoice(name, str(folder), f"program {folder}",
                             lambda: load(folder, store=store, model=route, mode=mode), answers_line(shown))
    cfg = read_config(config) if config is not None else None
    name, what = ((Path(config).stem, f"config {config}") if config is not None
                  else (DEFAULT_NAME, "the default program"))
    if store is None and (cfg is None or cfg.store is None) and corpus is not None:
        c = moded(default_config(cfg, route))

        def over_corpus() -> RAGProgram:
            st, _ = corpus_store(corpus.documents, c.ingest, corpus.name, progress=progress)
            return RAGProgram(c, store=st)

        return ProgramChoice(name, None, f"{what} over the documents of {corpus.name}", over_corpus, answers_line(c))
    if cfg is not None:
        cfg = moded(default_config(cfg, route))
        return ProgramChoice(name, None, what, lambda: RAGProgram(cfg, store=store), answers_line(cfg))
    if store is None or not isinstance(store, Store):
        where = str(store or default_store())
        if (meta := read_meta(where)) is None:
            raise DeclragError(f"no declrag store at {where}", hint="index documents first (declrag index PATH "
                               "--store ...), or pass --store, a program folder or a config")
        store, shown = where, moded(default_config(ProgramConfig(ingest=meta.ingest), route))
    else:
        shown = moded(default_config(None, route))
    # the default program (`default_program`): the store's own ingest settings, the default config
    return ProgramChoice(name, None, f"{what} over {store if isinstance(store, str) else store.uri}",
                         lambda: RAGProgram(shown, store=store), answers_line(shown))


__all__ = ["DEFAULT_NAME", "MODES", "ProgramChoice", "answers_line", "model_route", "select_program"]


def mlflow_program(reference: str) -> Path:
    """The program folder an MLflow artifact URI names (``runs:/RUN_ID/program``, as `declrag compile --mlflow`
    prints it), downloaded from the tracking server in ``MLFLOW_TRACKING_URI`` into a new temporary folder."""
    try:
        import mlflow.artifacts
    except ImportError as e:
        raise DeclragError(f"{reference} is a program in MLflow, and MLflow's client is not installed",
                           hint="pip install 'declrag[mlflow]'") from e
    where = tempfile.mkdtemp(prefix="declrag-mlflow-")
    try:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=reference, dst_path=where))
    except Exception as e:  # MLflow's own errors: an unreachable server, an unknown run
        raise DeclragError(f"could not download {reference} from MLflow: {str(e).splitlines()[0][:300]}",
                           hint="set MLFLOW_TRACKING_URI to the server the compile logged to, and check the run id "
                                "(declrag compile --mlflow prints it)") from None
