"""How the answering service admits and answers questions, whichever front end asks: `ServiceSettings`
(`declrag serve` and `declrag mcp` set each from a flag; `declrag.serve.ServeSettings` adds the HTTP server's)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..usage import RecordSettings


class ServiceSettings(BaseModel):
    """The service's limits, caches and recording. Per process: under `declrag serve --processes` each has these."""
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    max_question_chars: int | None = Field(None, ge=1)  # None: the program's config.max_question_chars
    request_timeout_s: float = Field(120.0, gt=0)  # beyond: 504 (a tool error over MCP); the call keeps its slot
    max_in_flight: int = Field(8, ge=1)  # admitted calls at once; one more: 503 + Retry-After, no queue
    # threads that run program calls (None: max_in_flight). Calls that wait on a remote LM want one thread each;
    # CPU-bound calls (retrieval only, an in-process model) run faster on a few threads than on many sharing the GIL
    workers: int | None = Field(None, ge=1)
    retry_after_s: int = Field(1, ge=1)
    cache_threshold: float | None = Field(None, gt=0, le=1)  # None: the semantic answer cache is off
    cache_size: int = Field(1024, ge=1)  # answers the semantic cache keeps (LRU)
    max_search_k: int = Field(50, ge=1, le=100)  # the most passages one search may ask for (422 beyond)
    # a citation's source as a URL under this base instead of its path relative to the indexed folder (PublicPaths)
    source_base: str | None = Field(None, pattern=r"^https?://")
    # where each question and answer is recorded, and how much is kept (`declrag.usage`); None: nothing is
    record: RecordSettings | None = None

    @property
    def worker_threads(self) -> int:
        return min(self.workers or self.max_in_flight, self.max_in_flight)
