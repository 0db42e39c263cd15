"""What the answering service counts, which `declrag serve` reports on ``GET /metrics`` (Prometheus): one registry
per service, so several can live in one process; under `declrag serve --processes`, the processes' metrics summed
(`declrag.serve._processes`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.multiprocess import MultiProcessCollector

from ..embed.embedder import EmbeddingCache
from ..lm import cache_sizes
from ..lm.registry import LM_DISK_FAULT
from ..runtime.cache_limits import current
from ..usage import Recorder
from ._semantic_cache import SemanticCache


class Metrics:
    """The server's Prometheus metrics, in a registry of their own."""

    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("declrag_requests", "HTTP requests by route and status", ["route", "status"],
                                registry=r)
        self.latency = Histogram("declrag_request_seconds", "HTTP request latency by route", ["route"], registry=r,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.program = Histogram("declrag_program_seconds", "time inside the program per answered question",
                                 registry=r, buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.in_flight = Gauge("declrag_in_flight", "program calls running now", registry=r,
                               multiprocess_mode="livesum")
        self.tokens = Counter("declrag_lm_tokens", "LM tokens by direction (in, out)", ["direction"], registry=r)
        self.cost = Counter("declrag_lm_cost_usd", "LM cost in USD (LiteLLM's price table)", registry=r)
        self.abstentions = Counter("declrag_abstentions", "answers that abstained", registry=r)
        self.dropped_sentences = Counter("declrag_dropped_sentences", "sentences of LM answers left out by the "
                                         "verified generate mode: their passages did not support them", registry=r)
        self.caught = Counter("declrag_lm_answers_caught", "LM outputs not passed on as answers: they echoed the "
                              "prompt (kind echo), copied the passages (copy) or had no words (empty); "
                              "replaced_by: extractive, retry or abstention (declrag.pipeline.stages.generate)",
                              ["kind", "replaced_by"], registry=r)
        self.errors = Counter("declrag_errors", "error responses by route and kind", ["route", "kind"], registry=r)
        self.cache_hits = Counter("declrag_cache_hits", "answers served from the semantic cache", registry=r)
        self.history_turns = Histogram("declrag_history_turns", "earlier turns (the history) sent with a request, "
                                       "by route", ["route"], registry=r, buckets=(0, 1, 2, 4, 8, 16, 32, 64, 128))
        self.history_query = Histogram("declrag_history_query_seconds", "time making the search query from the "
                                       "history, per answered question that had one (condense: its LM call)",
                                       registry=r, buckets=(.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.stage_calls = Counter("declrag_stage_lm_calls", "LM calls by program stage (condense, rewrite, "
                                   "generate, ...)", ["stage"], registry=r)
        self.stage_lm = Histogram("declrag_stage_lm_seconds", "time in a stage's LM calls, per request that "
                                  "called it, by stage", ["stage"], registry=r,
                                  buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120))
        self.cache_entries = Gauge("declrag_cache_entries", "entries each process-wide cache holds, at the last "
                                   "scrape (lm_memory: DSPy's response LRU; lm_history, lm_history_global: DSPy's "
                                   "call histories; embeddings: vectors in the embedding file; answers: the "
                                   "semantic answer cache)", ["cache"], registry=r, multiprocess_mode="liveall")
        self.cache_bytes = Gauge("declrag_cache_bytes", "bytes each on-disk cache takes, at the last scrape "
                                 "(lm_disk: DSPy's disk cache; embeddings: the embedding file and its WAL)", ["cache"],
                                 registry=r, multiprocess_mode="liveall")
        self.cache_fault = Gauge("declrag_cache_fault", "1 when a cache's file failed (disk full, read-only, locked "
                                 "or corrupt) and the cache went on without writing to it or without it (the log "
                                 "says which, once); 0 otherwise", ["cache"], registry=r, multiprocess_mode="liveall")
        self.cache_limit = Gauge("declrag_cache_limit", "the bound of each cache, in its unit (entries, or bytes "
                                 "for lm_disk)", ["cache"], registry=r, multiprocess_mode="max")
        self.usage_records = Gauge("declrag_usage_records", "answers the usage store wrote, or dropped (its queue "
                                   "full, or the store failing), since start (declrag serve --record)", ["state"],
                                   registry=r, multiprocess_mode="livesum")
        self.search = Histogram("declrag_search_seconds", "time inside the program per /v1/search request",
                                registry=r, buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))

    def exposition(self) -> CollectorRegistry:
        """What ``GET /metrics`` reports: this app's registry, or, under `declrag serve --processes`
        (``PROMETHEUS_MULTIPROC_DIR``), every server process's metrics together."""
        if folder := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=folder)
            return merged
        return self.registry

    def measure(self, embeddings: EmbeddingCache | None, answers: SemanticCache | None,
                recorder: Recorder | None) -> None:
        """Set the cache gauges: DSPy's response cache and histories, the program's ``embeddings`` cache, the
        semantic ``answers`` cache, with their bounds (`declrag.runtime.cache_limits.current`); and the usage
        ``recorder``'s counts."""
        sizes = cache_sizes()
        self.cache_fault.labels(cache="lm_disk").set(1 if LM_DISK_FAULT else 0)
        if embeddings is not None:
            emb = embeddings
            sizes["embeddings"] = {"entries": emb.rows if emb.rows is not None else emb.count(),
                                   "bytes": emb.disk_bytes()}
            self.cache_fault.labels(cache="embeddings").set(1 if emb.fault else 0)
        if answers is not None:
            sizes["answers"] = {"entries": len(answers.entries)}
        c = current()
        limits = {} if c is None else {"lm_memory": c.lm_cache_entries, "lm_disk": c.lm_cache_disk_mb * 2**20,
                                       "lm_history": c.lm_history, "lm_history_global": c.lm_history,
                                       "embeddings": c.embedding_rows}
        if answers is not None:
            limits["answers"] = answers.size
        self.caches(sizes, limits)
        if recorder is not None:
            self.usage_records.labels("written").set(recorder.written)
            self.usage_records.labels("dropped").set(recorder.dropped)

    def caches(self, sizes: Mapping[str, Mapping[str, float]], limits: Mapping[str, float]) -> None:
        """Set the cache gauges: ``sizes`` by cache (``{"entries": n}`` and/or ``{"bytes": n}``), their bounds."""
        for name, size in sizes.items():
            if "entries" in size:
                self.cache_entries.labels(name).set(size["entries"])
            if "bytes" in size:
                self.cache_bytes.labels(name).set(size["bytes"])
        for name, bound in limits.items():
            self.cache_limit.labels(name).set(bound)

    def usage(self, usage: dict[str, Any]) -> None:
        """Count a request's LM usage (the program's ``usage``: by stage, and ``total``)."""
        total = usage["total"]
        self.tokens.labels("in").inc(total["tokens_in"])
        self.tokens.labels("out").inc(total["tokens_out"])
        self.cost.inc(total["cost_usd"])
        for name, u in usage.items():
            if name != "total" and u["calls"]:
                self.stage_calls.labels(name).inc(u["calls"])
                self.stage_lm.labels(name).observe(u["lm_ms"] / 1000)
