"""Peak resident memory (RSS) per stage of a long run (`MemoryTracker`, docs/guides/compile.md), so that a user
sees what a stage needs before a larger corpus runs out of memory; and the allocator's hand-back of freed memory.

How the peak is measured (``method``): ``vmhwm``, Linux's own high-water mark (``VmHWM``), reset at the start of
every stage by writing ``5`` to ``/proc/self/clear_refs`` (exact, free while the stage runs, every thread of the
process but no child); ``sampled`` where that reset is refused: a thread reads the RSS every ``interval_s`` (a
shorter peak can be missed); ``none`` where the RSS cannot be read (stages carry their times only).

A reset clears the high-water mark of the whole process, so an inner stage's reset would hide the outer stage's
earlier peak: every reading is credited to all the stages open at that moment (stages nest), and a stage's peak
is the largest reading taken while it was open.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
MB = 1024 * 1024


def _status_kb(key: str) -> int | None:
    try:
        m = re.search(rf"^{key}:\s+(\d+)\s+kB", STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def rss_bytes() -> int | None:
    """The process's resident memory now (``VmRSS``), or None where it cannot be read."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb * 1024


def hwm_bytes() -> int | None:
    """The process's resident high-water mark since start or the last `reset_hwm` (``VmHWM``); elsewhere
    the lifetime peak from ``getrusage`` (not resettable), or None."""
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb * 1024
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # bytes on macOS, kB on Linux


def reset_hwm() -> bool:
    """Reset the process's high-water mark to its current RSS (Linux >= 4.0). False where refused."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


@functools.cache
def _glibc():
    """glibc's C library, or None (another OS, or musl: no malloc_trim, no mallopt arenas)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def release_memory(collect: bool = True) -> None:
    """Hand freed memory back to the OS: collect garbage (``collect``), then ask glibc to return the free parts
    of its heaps (``malloc_trim``); elsewhere only the collection."""
    if collect:
        gc.collect()
    if (libc := _glibc()) is not None:
        libc.malloc_trim(0)


M_ARENA_MAX = -8  # glibc's mallopt parameter


def bound_allocator(arenas: int = 2) -> bool:
    """Let glibc's malloc keep at most ``arenas`` heaps (its default is 8 per core: a server's dozens of
    threads each get one, and memory freed in one cannot serve another, so RSS creeps up with the traffic).
    Call it before the threads start. False where not glibc."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas))


def trim_periodically(every_s: float, stop: threading.Event) -> threading.Thread:
    """A daemon thread that calls `release_memory` (without a collection) every ``every_s`` seconds until
    ``stop`` is set: the free parts of the heaps go back to the OS instead of staying resident."""
    def loop() -> None:
        while not stop.wait(every_s):
            release_memory(collect=False)

    th = threading.Thread(target=loop, name="declrag-trim", daemon=True)
    th.start()
    return th


@dataclass
class _Open:
    name: str
    t0: float
    start: int | None
    peak: int = 0


@dataclass
class MemoryTracker:
    """Peak RSS per named stage; see the module's docstring. ``release``: call `release_memory` at the end
    of every stage, so the next one starts from what is really still in use."""

    interval_s: float = 0.05
    release: bool = True
    method: str = field(init=False)
    stages: dict[str, dict[str, Any]] = field(init=False, default_factory=dict)
    _open: list[_Open] = field(init=False, default_factory=list)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _sampled: int = field(init=False, default=0)
    _thread: threading.Thread | None = field(init=False, default=None)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)

    def __post_init__(self) -> None:
        if rss_bytes() is None:
            self.method = "none"
        elif _status_kb("VmHWM") is not None and reset_hwm():
            self.method = "vmhwm"
        else:
            self.method = "sampled"

    # -- readings ---------------------------------------------------------------------------------------------
    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = rss_bytes() or 0
            with self._lock:
                self._sampled = max(self._sampled, now)

    def _peak_since_reset(self) -> int:
        if self.method == "vmhwm":
            return max(hwm_bytes() or 0, rss_bytes() or 0)
        with self._lock:
            return max(self._sampled, rss_bytes() or 0)

    def _reset(self) -> None:
        if self.method == "vmhwm":
            reset_hwm()
        else:
            with self._lock:
                self._sampled = rss_bytes() or 0

    def _credit(self) -> None:
        """The peak since the last reset goes to every open stage; then a new window starts."""
        peak = self._peak_since_reset()
        for s in self._open:
            s.peak = max(s.peak, peak)
        self._reset()

    # -- stages -----------------------------------------------------------------------------------------------
    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        """Measure ``name`` while the block runs. Yields the stage's record (filled in when it ends)."""
        record: dict[str, Any] = {}
        if self.method == "none":
            t0 = time.perf_counter()
            try:
                yield record
            finally:
                record.update(seconds=round(time.perf_counter() - t0, 1))
                self.stages[name] = record
            return
        if self.method == "sampled" and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, name="declrag-rss", daemon=True)
            self._thread.start()
        self._credit()  # what came before this stage belongs to the stages already open, not to this one
        s = _Open(name, time.perf_counter(), rss_bytes())
        s.peak = s.start or 0
        self._open.append(s)
        try:
            yield record
        finally:
            self._credit()
            self._open.remove(s)
            end = rss_bytes()
            if self.release:
                release_memory()
            after = rss_bytes()
            record.update(peak_mb=_mb(s.peak), start_mb=_mb(s.start), end_mb=_mb(end),
                          released_mb=_mb(after), seconds=round(time.perf_counter() - s.t0, 1))
            self.stages[name] = record
            if not self._open and self._thread is not None:
                self._stop.set()
                self._thread.join()
                self._thread = None

    def peak_mb(self) -> float | None:
        """The largest peak of any stage measured so far."""
        peaks = [r["peak_mb"] for r in self.stages.values() if r.get("peak_mb") is not None]
        return max(peaks) if peaks else None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "peak_mb": self.peak_mb(), "stages": dict(self.stages)}


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / MB, 1)


def describe(memory: dict[str, Any]) -> str:
    """One line: each top-level stage's peak RSS, e.g. ``peak RSS: search 1.2 GB, finetune 2.7 GB``."""
    parts = [f"{name} {_gb(r['peak_mb'])}" for name, r in memory.get("stages", {}).items()
             if "." not in name and r.get("peak_mb") is not None]
    return "peak RSS: " + (", ".join(parts) if parts else "not measured here") + \
        (f" ({memory['method']})" if parts else "")


def _gb(mb: float) -> str:
    return f"{mb / 1024:.2f} GB" if mb >= 1024 else f"{mb:.0f} MB"
