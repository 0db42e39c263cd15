"""Loading a saved program (`load`) and making the default one (`default_program`)."""

from __future__ import annotations

import warnings
from pathlib import Path

from ...config import ProgramConfig, default_config, with_mode, with_model
from ...embed.embedder import Embedder
from ...errors import DeclragError
from ...runtime.about import versions
from ...stores import read_meta
from ...stores.base import Store
from ..saved import read_saved, with_packed_embedder
from ..stage_list import resolved
from ._program import RAGProgram


def load(path: str | Path, store: Store | str | Path | None = None, model: str | None = None,
         embedder: Embedder | None = None, mode: str | None = None) -> RAGProgram:
    """The program saved at ``path``, as the CLI accepts it.

    Warns when library versions differ from the ones it was saved with. The program has the stages it was saved with
    (the artifact's ``stages``; one saved before stages were recorded: today's `STAGES`).

    Args:
        path: a program folder (with program.json) or a run folder that `declrag compile` wrote (``runs/NAME``: its
            ``best`` program).
        store: the store to search; None: the one it was saved with.
        model: reroute every LM call (like ``--model``).
        embedder: the embedding model; None: the one its settings name.
        mode: ``generate.mode`` (like ``--answer-mode``).

    Returns:
        The program, its learned state (prompts, demos, kNN demo pool) loaded.

    Raises:
        DeclragError: no program there, a damaged or newer artifact, a stage whose module is not imported, a store
            built with other ingest settings.
    """
    folder, meta, config, specs = read_saved(path)
    now = versions()
    drift = {k: (v, now.get(k)) for k, v in meta.get("versions", {}).items() if now.get(k) != v and k != "python"}
    if drift:
        warnings.warn(f"{folder} was saved with other library versions: " + ", ".join(
            f"{k} {a} (now {b})" for k, (a, b) in sorted(drift.items())), stacklevel=2)
    if model:
        config = with_model(config, model)
    if mode:
        config = with_mode(config, mode)
    config = with_packed_embedder(config, folder)
    saved = meta.get("store") or {}
    try:
        kinds = resolved(meta.get("stages"))
    except (KeyError, ValueError) as e:
        raise DeclragError(f"{folder}: its stages cannot be made: {str(e).strip(chr(34) + chr(39))}",
                           hint="import the module that defines the stage before loading, or re-create the "
                                "program with declrag compile") from None
    prog = RAGProgram(config, store=store if store is not None else saved.get("uri", saved.get("path")),
                      embedder=embedder, specs=specs, stages=kinds)
    prog.load(str(folder / "dspy_state.json"))
    if meta.get("knn"):
        prog.generate.set_knn_pool(meta["knn"]["pool"], meta["knn"]["k"])
    return prog


def default_program(store: Store | str | Path | None = None, model: str | None = None) -> RAGProgram:
    """The naive baseline: fixed chunks, hybrid alpha 0.5, k 5, no rewrite, no rerank, the plain prompt, self-judge off,
    over the store's own ingest settings; with no model named it answers in `LOCAL_DEFAULT_MODE` (`default_config`).

    Args:
        store: the store to search (an open `Store`, a folder or a URI); None: the default store.
        model: the route every LM call goes to; None: the built-in local model.

    Returns:
        The program.
    """
    meta = read_meta(store) if isinstance(store, (str, Path)) else None
    return RAGProgram(default_config(ProgramConfig(ingest=meta.ingest) if meta else None, model), store=store)

