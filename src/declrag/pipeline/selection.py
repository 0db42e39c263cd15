"""Which program runs: the one decision `declrag ask`, `eval`, `serve` and `mcp` share (`select_program`), and
the route every LM call goes to (`model_route`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..config import ProgramConfig
from ..errors import DeclragError
from ..folders import default_store
from ..ingest.corpus import corpus_store
from ..stores import read_meta
from ..stores.base import Store
from .program import RAGProgram, default_config, default_program, load, read_config, with_model

DEFAULT_NAME = "declrag-default"
MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")  # a program logged by `declrag compile --mlflow`


def model_route(model: str | None) -> str | None:
    """The route every LM call goes to: ``model`` (``--model``), else $DECLRAG_MODEL, else None (the
    config's own routes). The one place that reads $DECLRAG_MODEL."""
    return model or os.environ.get("DECLRAG_MODEL") or None


class ProgramChoice(NamedTuple):
    """Which program runs: its served ``name``, the ``run`` folder it came from (or None), a description
    (``what``) for messages, and ``load()``, which builds it."""

    name: str
    run: str | None
    what: str
    load: Callable[[], RAGProgram]


def select_program(program: str | Path | None = None, config: str | Path | None = None,
                   store: Store | str | Path | None = None, model: str | None = None,
                   corpus: Any = None, progress: bool = False) -> ProgramChoice:
    """The one decision of which program `declrag ask`, `eval` and `serve` run. Everything cheap is checked
    now (paths, config syntax, the store's presence), so mistakes fail before any model loads.

    ``program``: a run folder (``runs/NAME``: its ``best`` program, named NAME) or a program folder (with
    ``program.json``). Else ``config`` (named after the file). Else the default program (`default_program`).
    ``model`` (else $DECLRAG_MODEL, see `model_route`) routes every LM call. The store: ``store``, else the
    config's, else ``corpus``'s documents (a `GoldenSet`, indexed once into a cached store, as eval does),
    else the default store."""
    route = model_route(model)
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
        return ProgramChoice(name, str(folder), f"program {folder}", lambda: load(folder, store=store, model=route))
    cfg = read_config(config) if config is not None else None
    name, what = ((Path(config).stem, f"config {config}") if config is not None
                  else (DEFAULT_NAME, "the default program"))
    if store is None and (cfg is None or cfg.store is None) and corpus is not None:
        def over_corpus() -> RAGProgram:
            c = cfg or ProgramConfig()
            st, _ = corpus_store(corpus.documents, c.ingest, corpus.name, progress=progress)
            if cfg is None:
                return RAGProgram(default_config(c, route), store=st)
            return RAGProgram(with_model(c, route) if route else c, store=st)

        return ProgramChoice(name, None, f"{what} over the documents of {corpus.name}", over_corpus)
    if cfg is not None:
        cfg = with_model(cfg, route) if route else cfg
        return ProgramChoice(name, None, what, lambda: RAGProgram(cfg, store=store))
    if store is None or not isinstance(store, Store):
        where = str(store or default_store())
        if read_meta(where) is None:
            raise DeclragError(f"no declrag store at {where}", hint="index documents first (declrag index PATH "
                               "--store ...), or pass --store, a program folder or a config")
        store = where
    return ProgramChoice(name, None, f"{what} over {store if isinstance(store, str) else store.uri}",
                         lambda: default_program(store, model=route))


__all__ = ["DEFAULT_NAME", "ProgramChoice", "model_route", "select_program"]


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
