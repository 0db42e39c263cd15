"""A saved program's folder as `declrag.pipeline.program.load` reads it: ``program.json`` (the config in the
artifact's format, its signature specs, the versions it was saved with) and a fine-tuned embedder packed beside it.
Artifacts of earlier formats read as they answered then (`ARTIFACT_FORMAT`)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...config import ProgramConfig, written_before_auto, written_before_handover, written_before_typed
from ...embed.embedder import folder_sha256
from ...errors import DeclragError
from ...lm.prompts import SignatureSpec
from ...runtime.about import versions

# 2: ingest ``context`` and extract ``type_weight`` (format 1: before them, read as none and 0); 3: ``generate.mode``
# ``auto`` (format 2 and earlier: a config without a mode wrote with its LM, read as ``lm``); 4: ``retrieve.handover``
# (format 3 and earlier handed its passages over merged, read as ``merge``)
ARTIFACT_FORMAT = 4


def saved_config(path: str | Path) -> ProgramConfig:
    """The config of the program saved at ``path`` (as `load` reads it), without loading the program."""
    return read_saved(path)[2]


def read_saved(path: str | Path) -> tuple[Path, dict[str, Any], ProgramConfig, dict[str, SignatureSpec]]:
    """(program folder, program.json, config, signature specs) of the program saved at ``path``."""
    folder = Path(path)
    if not (folder / "program.json").exists() and (folder / "best" / "program.json").is_file():
        folder = folder / "best"
    f = folder / "program.json"
    if not f.exists():
        raise DeclragError(f"{folder} is not a declrag program (no program.json)",
                           hint="point at a folder written by RAGProgram.save, or at a run of declrag compile "
                                "(runs/<name> or runs/<name>/best)")
    try:
        meta = json.loads(f.read_text())
        raw = meta["config"] if meta.get("format", 0) >= 2 else written_before_typed(meta["config"])
        raw = raw if meta.get("format", 0) >= 3 else written_before_auto(raw)
        raw = raw if meta.get("format", 0) >= 4 else written_before_handover(raw)
        config = ProgramConfig.model_validate(raw)
        specs = {k: SignatureSpec.model_validate(v) for k, v in meta["signatures"].items()}
    except (ValueError, KeyError, ValidationError) as e:
        raise DeclragError(f"{f} is damaged or from an incompatible declrag: {str(e).splitlines()[0]}",
                           hint="re-create it with declrag compile") from e
    if meta.get("format", 0) > ARTIFACT_FORMAT:
        raise DeclragError(f"{folder} was written by a newer declrag (format {meta['format']})", hint="upgrade declrag")
    return folder, meta, config, specs


def with_packed_embedder(config: ProgramConfig, folder: Path) -> ProgramConfig:
    """A fine-tuned embedder saved in the artifact (``embedder/``, named relative to it) as an absolute path,
    after checking that its files are the ones the config's ``weights`` hash names."""
    emb = config.ingest.embedder
    if not emb.weights or Path(emb.model).is_absolute():
        return config
    where = folder / emb.model
    if not where.is_dir():
        raise DeclragError(f"{folder}: the fine-tuned embedding model {where} is missing",
                           hint="copy the whole artifact folder, embedder/ included")
    if folder_sha256(where) != emb.weights:
        raise DeclragError(f"{where}: the embedding model's files do not match the hash in program.json",
                           hint="the folder was changed after compile; restore it or re-run declrag compile")
    ingest = config.ingest.model_copy(update={"embedder": emb.model_copy(update={"model": str(where.resolve())})})
    return config.model_copy(update={"ingest": ingest})


__all__ = ["ARTIFACT_FORMAT", "read_saved", "saved_config", "with_packed_embedder"]


def write_artifact(folder: Path, config: ProgramConfig, embedder: dict[str, Any] | None, store_uri: str | None,
                   specs: dict[str, SignatureSpec], knn: dict[str, Any] | None,
                   save_state: Callable[[str], Any], stages: list[str] | None = None) -> Path:
    """Write a program's artifact into ``folder``: ``program.json`` (config, signature specs, versions, store
    reference, the ``stages`` by name in order; written last, so a folder holding it is complete) and
    ``dspy_state.json`` (``save_state``, DSPy's own save). A fine-tuned embedding model travels with the artifact, as
    ``embedder/``."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = config.ingest.digest()
    emb = config.ingest.embedder
    if emb.weights:
        target = folder / "embedder"
        if Path(emb.model).resolve() != target.resolve():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(emb.model, target)
        ingest = config.ingest.model_copy(update={"embedder": emb.model_copy(update={"model": "embedder"})})
        config = config.model_copy(update={"ingest": ingest})
    meta = {
        "format": ARTIFACT_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(), "config": config.model_dump(mode="json"), "embedder": embedder,
        "store": {"uri": store_uri, "ingest_digest": digest},
        "signatures": {k: v.model_dump(mode="json") for k, v in specs.items()}, "knn": knn,
        "stages": stages,
    }
    tmp = folder / "program.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    save_state(str(folder / "dspy_state.json"))
    os.replace(tmp, folder / "program.json")
    return folder
