"""The bounds of every process-wide cache declrag keeps or configures (`CacheLimits`), and the limits in force.

A process that runs for weeks (`declrag serve`) sees mostly distinct questions, and every cache keyed by the
question grows with them; each is bounded here, in entries or bytes (the table in docs/guides/serve.md, "Caches
and their bounds", says what each holds). The `declrag` command sets the limits for its process at start-up
(`declrag.lm.use_cache_limits`); a library import sets none unless the caller calls that itself.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

WAL_BYTES = 64 * 2**20  # the embedding cache's write-ahead log is truncated to this after a checkpoint


class CacheLimits(BaseModel):
    """The bound of each process-wide cache (docs/guides/serve.md). Defaults fit a 2-core / 24 GB machine
    serving for weeks: whatever the questions, about 6 GB of disk at most (1 GiB of DSPy's disk cache, about 5 GB of
    embeddings: a 384-d vector takes about 5 kB on disk, its row overflowing a 4 KiB page)."""

    model_config = ConfigDict(extra="forbid")
    lm_cache_entries: int = Field(2000, ge=1)  # DSPy's in-memory response cache (LRU), responses
    lm_cache_disk_mb: int = Field(1024, ge=0)  # DSPy's disk cache, MiB (0: off)
    lm_history: int = Field(100, ge=0)  # LM calls kept in each DSPy history list (0: none)
    embedding_rows: int = Field(1_000_000, ge=1)  # vectors in the embedding file (about 5 kB each at 384-d)


_CURRENT: list[CacheLimits | None] = [None]  # None: a library process; declrag bounds nothing of DSPy's


def current() -> CacheLimits | None:
    """The limits this process runs under (None: none set, as in a library import)."""
    return _CURRENT[0]


def set_current(limits: CacheLimits | None) -> None:
    _CURRENT[0] = limits
