"""The bounds of every process-wide cache declrag keeps or configures (`CacheLimits`), and the limits in force.

A process that runs for weeks (`declrag serve`) sees mostly distinct questions, and every cache keyed by the
question grows with them; each is bounded here, in entries or bytes:

- DSPy's response cache, in memory (``lm_cache_entries``, an LRU of responses) and on disk (``lm_cache_disk_mb``,
  a diskcache folder, ``<cache>/dspy``, culled by diskcache beyond its size; 0: no disk cache);
- the LM call history DSPy keeps on every LM, on every module that called it and in its global list
  (``lm_history``: the most recent calls kept in each; 0: none kept). declrag's usage metering reads each call as
  it happens and needs none of it;
- the embedding cache, one SQLite file (``<cache>/embeddings.sqlite3``) of document and query vectors
  (``embedding_rows``; beyond it the oldest rows are deleted, checked every few writes, and SQLite reuses their
  pages, so the file stops growing; its write-ahead log is truncated to ``WAL_BYTES`` after each checkpoint).

The semantic answer cache of `declrag serve` has its own bound (``--cache-size``, an LRU of answers).

The limits are the process's: the `declrag` command sets them at start-up (`declrag.lm.use_cache_limits`), and
``serve``, ``compile`` and ``eval`` take flags for each. A library import sets none: DSPy's cache and history are
as the caller configured them and the embedding cache is unbounded, unless the caller calls
`declrag.lm.use_cache_limits` itself.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

WAL_BYTES = 64 * 2**20  # the embedding cache's write-ahead log is truncated to this after a checkpoint


class CacheLimits(BaseModel):
    """The bound of each process-wide cache (see the module docstring). Defaults fit a 2-core / 24 GB machine
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
