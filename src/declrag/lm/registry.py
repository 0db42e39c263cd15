"""`registry`: what this process holds loaded (LMs by configuration, local models, the metrics' shared
models), the ``local`` provider's registration with LiteLLM, and where DSPy's response cache lives."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import dspy

from ..config import LMConfig
from ..runtime.cache_limits import CacheLimits, current, set_current
from ..runtime.folders import cache_dir
from ._local import local_models
from ._routing import make_lm
from .metering import RoutedLM

log = logging.getLogger(__name__)

T = TypeVar("T")


class Registry:
    """What this process holds loaded, in one place (``declrag.registry``): one DSPy LM per distinct `LMConfig`,
    shared by every stage and program (one history, one connection pool), the in-process local models, and any
    other object the whole process shares (the metrics' embedding model, the LLM judges by route). A program's own
    embedder and cross-encoder are not here: they belong to the program (or indexer) that uses them."""

    def __init__(self) -> None:
        self.local_models = local_models  # the models the ``local`` provider runs (`declrag.lm._local`)
        self._lms: dict[str, RoutedLM] = {}
        self._shared: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def lm(self, cfg: LMConfig) -> RoutedLM:
        key = cfg.digest()
        with self._lock:
            if key not in self._lms:
                self._lms[key] = make_lm(cfg)
            return self._lms[key]

    def shared(self, kind: str, key: str, make: Callable[[], T]) -> T:
        """The process's one ``kind`` object for ``key`` (e.g. ``("judge", route)``), made by ``make()`` on first
        use (under the registry's lock, so once)."""
        with self._lock:
            if (kind, key) not in self._shared:
                self._shared[kind, key] = make()
            return self._shared[kind, key]

    def warm_up(self, cfg: LMConfig) -> None:
        """Load what calls on ``cfg`` need in this process: the local models of its routes (remote routes
        need nothing loaded; their keys were checked when the LM was made)."""
        self.lm(cfg)
        for route in (cfg.route, *cfg.fallbacks):
            if route.startswith("local/"):
                self.local_models.get(route[len("local/"):])

    def loaded(self) -> dict[str, list[str]]:
        with self._lock:
            lms = sorted({lm.model for lm in self._lms.values()})
            shared = sorted(f"{kind}:{key}" for kind, key in self._shared)
        return {"lms": lms, "local_models": self.local_models.loaded(), "shared": shared}

    def clear(self) -> None:
        with self._lock:
            self._lms.clear()
            self._shared.clear()
        self.local_models.clear()


registry = Registry()
_CACHE_LOCK = threading.Lock()
LM_DISK_PAGE_CACHE = 32  # pages (4 KiB each) of SQLite page cache per connection to DSPy's disk cache


def use_lm_cache(folder: Path | None = None) -> None:
    """Point DSPy's response cache at ``folder`` (default: declrag's cache folder, ``<cache>/dspy``), memory
    cache emptied, bounded by the process's `CacheLimits` (DSPy's defaults when none are set). This changes
    DSPy's cache for the whole process, so only a process's owner calls it: the `declrag` command at start-up,
    benchmarks that need a cold cache; never a library import."""
    limits = current()
    bounds: dict[str, Any] = {} if limits is None else {
        "memory_max_entries": limits.lm_cache_entries, "enable_disk_cache": limits.lm_cache_disk_mb > 0,
        "disk_size_limit_bytes": limits.lm_cache_disk_mb * 2**20}
    where = folder or cache_dir() / "dspy"
    kw: dict[str, Any] = {"enable_disk_cache": True, "enable_memory_cache": True, "disk_cache_dir": str(where),
                          **bounds}
    with _CACHE_LOCK:
        try:
            dspy.configure_cache(**kw)
            disk: Any = getattr(dspy.cache, "disk_cache", None)
            if limits is not None and hasattr(disk, "reset"):
                # diskcache opens one SQLite connection per shard per thread, each with a 32 MiB page cache and a
                # 64 MiB memory map by default: with a server's threads that grows with the cached pages, so each
                # connection gets a small page cache and no map (settings kept in the folder, read by new ones)
                disk.reset("sqlite_cache_size", LM_DISK_PAGE_CACHE)
                disk.reset("sqlite_mmap_size", 0)
        except (OSError, sqlite3.Error) as e:  # a folder read-only, full or corrupt: memory only, said once
            lm_disk_failed(where, "open", e)
            dspy.configure_cache(**{**kw, "enable_disk_cache": False})
            return
        if disk is not None:
            dspy.cache.disk_cache = _GuardedDisk(disk, where)


#: why DSPy's disk cache was turned off in this process (empty: it was not); /metrics reports it
LM_DISK_FAULT: list[str] = []


def lm_disk_failed(where: Path, doing: str, e: BaseException) -> None:
    if not LM_DISK_FAULT:
        log.warning("DSPy's response cache in %s: %s failed (%s); going on with the memory cache only (free "
                    "space, make the folder writable, or remove it; $DECLRAG_CACHE moves it)", where, doing, e)
    LM_DISK_FAULT[:] = [f"{doing} failed: {e}"]


class _GuardedDisk:
    """DSPy's disk cache, whose reads cannot fail a call: a file locked, corrupt or gone is a miss, and the
    disk cache is turned off for the process (DSPy itself already ignores failed writes)."""

    def __init__(self, disk: Any, where: Path):
        self._disk, self._where = disk, where

    def get(self, key: Any, *args: Any, **kw: Any) -> Any:
        try:
            return self._disk.get(key, *args, **kw)
        except (OSError, sqlite3.Error) as e:
            lm_disk_failed(self._where, "a read", e)
            dspy.cache.enable_disk_cache = False
            return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._disk, name)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._disk[key] = value

    def __contains__(self, key: Any) -> bool:
        return key in self._disk


def use_cache_limits(limits: CacheLimits | None = None, folder: Path | None = None) -> CacheLimits:
    """Bound every process-wide cache by ``limits`` (default: `CacheLimits()`'s defaults), DSPy's response cache
    (re-made, under ``folder``) included: the caches are listed in `declrag.runtime.cache_limits`. For a process's
    owner only
    (the `declrag` command; a library user who wants declrag's bounds); returns the limits in force."""
    set_current(limits := limits or CacheLimits())
    use_lm_cache(folder)
    return limits


def cache_sizes() -> dict[str, dict[str, float]]:
    """DSPy's response cache now: ``{"lm_memory": {"entries": n}, "lm_disk": {"bytes": n}}`` (absent parts left
    out), and the LM histories' lengths (``lm_history_global``, and the longest of the loaded LMs')."""
    from dspy.clients import base_lm

    out: dict[str, dict[str, float]] = {}
    cache = dspy.cache
    if getattr(cache, "enable_memory_cache", False):
        out["lm_memory"] = {"entries": len(cache.memory_cache)}
    if getattr(cache, "enable_disk_cache", False):
        try:
            out["lm_disk"] = {"bytes": float(cache.disk_cache.volume())}
        except Exception:  # a cache folder gone or locked: the gauge is left out, the server keeps answering
            pass
    out["lm_history_global"] = {"entries": len(base_lm.GLOBAL_HISTORY)}
    with registry._lock:
        lms = list(registry._lms.values())
    out["lm_history"] = {"entries": max((len(lm.history) for lm in lms), default=0)}
    return out
