"""What a front end hands the answering service (`Request`, the request fields its checks name) and what it gets
back when a request fails (`ApiError`: an HTTP status, which the other front ends turn into their own errors)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import dspy.utils.exceptions

from ..access import Principal
from ..errors import DeclragError
from ..inputs import InputError
from ..payloads import PublicPaths, plain
from ..pipeline.program import Answer
from ..runtime.gguf import crash_in

log = logging.getLogger("declrag.serve")


class ApiError(Exception):
    """A failed request, as the client sees it: HTTP status, message, the request field at fault, a kind for
    the error metrics, headers (e.g. Retry-After) and the fix, where one is known. MCP answers it as a tool error,
    the CLI as one line (`line`)."""

    def __init__(self, status: int, message: str, field: str | None = None, kind: str = "invalid",
                 headers: dict[str, str] | None = None, hint: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.kind, self.headers = status, message, field, kind, headers
        self.hint = hint

    def named(self) -> str:
        """The message, after its field where it does not start with it."""
        return f"{self.field}: {self.message}" if self.field and not self.message.startswith(self.field) \
            else self.message

    def line(self) -> str:
        """The error on one line: `named`, and the fix."""
        return f"{self.named()} (fix: {self.hint})" if self.hint else self.named()


def failure(e: BaseException, question: str) -> ApiError:
    """The error response for a failed program call (an unexpected one is logged, with ``question``'s start)."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, InputError):
        return ApiError(422, e.message, e.field, hint=e.hint)
    if (crash := crash_in(e)) is not None:  # the local model cannot run on this CPU: the server stays up
        return ApiError(503, str(crash), kind="local_model")
    if isinstance(e, DeclragError):
        upstream = isinstance(e.__cause__, dspy.utils.exceptions.LMError)  # the model's server failed
        return ApiError(502 if upstream else 400, e.message, kind="upstream" if upstream else "bad_request")
    log.error("the program failed on %r", question[:200], exc_info=e)
    return ApiError(500, "internal error", kind="internal")


def timed_out(seconds: float) -> ApiError:
    """A request that outlived its timeout (``seconds``)."""
    return ApiError(504, f"no answer within {seconds:g} s", kind="timeout")


def answer_payload(a: Answer, paths: PublicPaths, program: dict[str, Any]) -> dict[str, Any]:
    """What every route answers (``/v1/ask``, the MCP ``ask`` tool, ``declrag ask --json``): the answer, whether it
    abstained and why, its citations (files named as clients see them: ``paths``), the self-judge's verdict, what the
    deterministic modes did (``checked``, ``dropped_sentences``, ``removed_citations``, ``caught``), the search
    queries, each stage's mode, LM usage and latency by stage, the ``program`` served; JSON-safe."""
    return plain({"answer": a.answer, "abstained": bool(a.abstained),
                  "citations": [paths.rewrite(c) for c in a.citations], "reason": a.reason,
                  "dropped_sentences": a.dropped_sentences, "removed_citations": a.removed_citations,
                  "checked": a.checked, "caught": a.caught, "judge": a.judge, "queries": a.queries,
                  "stages": a.stages, "history_turns": a.history_turns, "usage": a.usage,
                  "latency_ms": a.latency_ms, "program": dict(program), "cache": {"hit": False}})


NO_USAGE = {"total": {"calls": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "lm_ms": 0.0}}
Events = AsyncIterator[tuple[str, Any]]


@dataclass(frozen=True, slots=True)
class Fields:
    """The request fields a route's checks name: the question's, the filter's and the history's."""

    question: str = "question"
    where: str = "options.where"
    history: str = "history"


CHAT_FIELDS = Fields("messages", "options.where", "messages")  # the history is the earlier messages, same indexes
SEARCH_FIELDS = Fields("query", "where", "history")
TOOL_FIELDS = Fields("question", "where", "history")  # MCP's ask tool (its search tool: SEARCH_FIELDS)
CLI_FIELDS = Fields("question", "--where", "--history")  # declrag ask


@dataclass(frozen=True, slots=True)
class Request:
    """One question for the program: its text, filter and history (``[{role, content}]`` as sent; once
    `AnswerService.admit` has checked them, the text normalized and the history a tuple of `Turn`s), the route
    it came on (for the metrics and the usage store) and the fields the checks name."""

    question: Any
    where: dict | None = None
    history: Any = None
    route: str = "/v1/ask"
    fields: Fields = Fields()
    id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the answer's id (feedback names it)
    principal: Principal | None = None  # who asks (`declrag.access`); None: no callers are configured
