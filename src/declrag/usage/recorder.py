"""Recording off the request path: `Recorder.record` puts a row on a bounded queue and returns; one thread writes
the queue to the `UsageStore` in batches (every `FLUSH_S` seconds or `BATCH` rows), and applies the retention bound
at start, every `RETAIN_EVERY_S` and when it stops (so a running store holds at most its bound plus a minute of
answers). A full queue, or a store that fails (full disk, read-only, gone, a database down), drops
rows rather than slow an answer: the server goes on answering, says so once in its log, and counts what it dropped
(``dropped``; /metrics shows ``declrag_usage_records{state="dropped"}``). A kill -9 loses at most the rows of the
last `FLUSH_S`.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._store import UsageStore, encode, shown

log = logging.getLogger("declrag.usage")
FLUSH_S = 1.0
BATCH = 200
QUEUE = 10_000  # rows waiting at most (beyond: dropped and counted)
RETAIN_EVERY_S = 60.0


def span_hash(text: str) -> str:
    """The fingerprint of a cited span's text (SHA-256, 16 hex digits): a document changed since the answer no
    longer holds it there (`declrag.optimize._usage`: such gold is stale)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _hashes(citation: dict[str, Any], passages: Sequence[Any]) -> dict[str, Any]:
    """``hash`` of the cited span's text and ``quote_hashes`` of its quotes', from the passage it cites (its number
    ``n`` among ``passages``: the citation names its document as the caller sees it, a path relative to the folder
    served; none when the span is not that passage's)."""
    (a, b), n = citation["span"], citation["n"]
    hit = passages[n - 1] if isinstance(n, int) and 0 < n <= len(passages) else None
    if hit is None or not (hit.start <= a and b <= hit.end):
        return {}
    out: dict[str, Any] = {"hash": span_hash(hit.text[a - hit.start:b - hit.start])}
    if quotes := citation.get("quotes"):
        out["quote_hashes"] = [span_hash(hit.text[q0 - hit.start:q1 - hit.start]) if hit.start <= q0 <= q1 <= hit.end
                               else None for q0, q1 in quotes]
    return out


def row_of(payload: dict[str, Any], passages: Sequence[Any], *, route: str, program: str, version: str,
           question: str, where: dict | None, history: Sequence[Any], searched: bool = False,
           explored: dict[str, Any] | None = None, principal: Any = None) -> dict[str, Any]:
    """The `declrag.usage._store.ANSWERS` row of one response ``payload`` (an answer's, or a search's with
    ``searched``), from the passages (`declrag.types.Hit`) it was made from and the request's turns; ``explored``:
    the rankers an explored answer's passages were multileaved from (`declrag.pipeline.stages.select.Explorer.record`);
    ``principal``: who asked (a `declrag.access.Principal`; None: a server without callers). Each passage and
    citation keeps its document's readers where it has any, so that a golden set made of them knows who may read
    its gold."""
    readers = {h.chunk.id: list(h.chunk.readers) for h in passages if h.chunk.readers}
    return {
        "id": payload["id"], "ts": time.time(), "route": route, "program": program, "version": version,
        "question": question, "filter": where, "history": [{"role": t.role, "content": t.content} for t in history],
        "passages": [{"chunk_id": h.chunk.id, "doc_id": h.chunk.doc_id, "span": [h.start, h.end],
                      "score": round(float(h.score), 6), **({"readers": readers[h.chunk.id]} if h.chunk.readers
                                                            else {})} for h in passages],
        "citations": [{"n": c["n"], "chunk_id": c["chunk_id"], "doc_id": c["doc_id"], "span": list(c["span"]),
                       **({"quotes": [list(q) for q in c["quotes"]]} if c.get("quotes") else {}),
                       **_hashes(c, passages),
                       **({"nearest": True} if c.get("nearest") else {}),
                       **({"readers": readers[c["chunk_id"]]} if c["chunk_id"] in readers else {})}
                      for c in payload.get("citations", [])],
        "principal": principal.name if principal is not None else None,
        "groups": sorted(principal.groups) if principal is not None else None,
        "answer": None if searched else payload["answer"], "abstained": None if searched else payload["abstained"],
        "reason": None if searched else payload.get("reason"),
        "latency_ms": float(payload.get("latency_ms", {}).get("total", 0.0)), "explored": explored}


class RecordSettings(BaseModel):
    """Where `declrag serve` records and how much it keeps (`declrag serve --record`, `--record-rows`,
    `--record-days`, `--no-record`)."""

    model_config = ConfigDict(extra="forbid")
    target: str | None = None  # a SQLite file or a postgresql+psycopg:// URI; None: `declrag.serve.serve` decides
    max_rows: int | None = Field(100_000, ge=1)  # the newest answers kept (None: no bound by count)
    max_days: float | None = Field(90.0, gt=0)  # answers older than this are deleted (None: no bound by age)
    explore: float = Field(0.0, ge=0.0, le=1.0)  # the share of questions explored (`declrag.pipeline.stages.select`)
    explore_seed: int | None = None  # the explorer's draws seeded (a replay explores alike); None: a new draw


def said(s: RecordSettings | None) -> str:
    """`declrag serve`'s start-up line about recording."""
    if s is None or s.target is None:
        return "records: nothing (--no-record); POST /v1/feedback answers 404"
    kept = ", ".join(x for x in (f"the newest {s.max_rows:,} answers" if s.max_rows else "",
                                 f"{s.max_days:g} days" if s.max_days else "") if x) or "everything, unbounded"
    explores = (f"; {s.explore:.0%} of questions explored: answered from the program's and its neighbours' rankings "
                "multileaved" if s.explore else "")
    return (f"records: each question, its passages, answer and rating to {shown(s.target)} (kept: {kept}; they may "
            f"hold personal data: docs/guides/usage.md){explores}; --no-record turns it off")


class Recorder:
    """The writer thread over one store (opened at construction: a bad target is an error at start-up)."""

    def __init__(self, settings: RecordSettings):
        assert settings.target is not None, "declrag.serve.serve sets the default target"
        self.settings = settings
        self.store = UsageStore(settings.target)
        self.dropped = 0
        self.written = 0
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(QUEUE)
        self._failing = False
        self._stop = threading.Event()
        self._wake = threading.Event()  # a flush, a full batch or the stop: write now, not at the next FLUSH_S
        self._thread = threading.Thread(target=self._run, name="declrag-usage", daemon=True)
        self._thread.start()

    @property
    def where(self) -> str:
        return shown(self.settings.target or "")

    def record(self, row: dict[str, Any]) -> None:
        """Queue one answer's row (`declrag.usage._store.ANSWERS`'s fields); never blocks. It waits encoded
        (`declrag.usage._store.encode`): up to a second of rows in the queue, as nested dicts and lists, made every
        garbage collection of the request threads look at them (-6% to -9% requests/s on JSON requests in `declrag
        bench serve --record off,on --rounds 8`, +0.4 ms of CPU a request)."""
        self._put(("answer", encode(row)))

    def feedback(self, answer_id: str, helpful: bool, citation: int | None, correction: str | None,
                 principal: str | None = None) -> str:
        """Rate an answer as ``principal``, on the caller's thread (the rating must know the answer exists): its rows
        still queued are written first. Returns `UsageStore.add_feedback`'s ``rated``, ``missing`` or
        ``forbidden``."""
        self.flush()
        return self.store.add_feedback(answer_id, helpful, citation, correction, principal)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every row queued before this call is written (or dropped)."""
        done = threading.Event()
        if self._put(("flush", done)):
            done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, then stop."""
        self.flush()
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.store.close()

    def _put(self, item: tuple[str, Any]) -> bool:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += item[0] == "answer"
            return False
        if item[0] == "flush" or self._queue.qsize() >= BATCH:  # a full batch is written at once, as before
            self._wake.set()
        return True

    def _run(self) -> None:
        last_retain = 0.0
        while not self._stop.is_set() or not self._queue.empty():
            rows, waiting = self._take()
            self._write(rows)
            for done in waiting:
                done.set()
            if time.monotonic() - last_retain >= RETAIN_EVERY_S:
                last_retain = time.monotonic()
                self._retain()
        self._retain()  # stopped: the store is left within its bound

    def _take(self) -> tuple[list[tuple[Any, ...]], list[threading.Event]]:
        """What is queued (up to `BATCH` rows, and the flushes among them), once `FLUSH_S` has passed or a flush, a
        full batch or the stop asks. The thread sleeps in between: a row queued does not wake it, so under a steady
        load it wakes about once a second, not once a request."""
        if self._queue.empty():  # what the last take left (a full batch, a flush's rows) is taken at once
            self._wake.wait(FLUSH_S)
        self._wake.clear()
        rows: list[tuple[Any, ...]] = []
        waiting: list[threading.Event] = []
        while len(rows) < BATCH:
            try:
                kind, item = self._queue.get_nowait()
            except queue.Empty:
                break
            if kind == "flush":
                waiting.append(item)
                break
            rows.append(item)
        return rows, waiting

    def _retain(self) -> None:
        try:
            self.store.retain(self.settings.max_rows, self.settings.max_days)
        except Exception as e:  # the store as it is stays readable; the next round tries again
            log.warning("usage store %s: cannot apply the retention bound (%s)", self.where, str(e).splitlines()[0])

    def _write(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        try:
            self.store.add_encoded(rows)
        except Exception as e:  # a full disk, a read-only file, a database down: answering goes on
            if not self._failing:
                log.error("usage store %s: cannot write (%s); answering goes on, records are dropped and counted "
                          "(declrag_usage_records{state=\"dropped\"} on /metrics) until it can", self.where,
                          str(e).splitlines()[0])
            self._failing = True
            self.dropped += len(rows)
            return
        if self._failing:
            log.warning("usage store %s: writing again", self.where)
        self._failing = False
        self.written += len(rows)
