"""The request and response models of `declrag serve`'s own routes (``/v1/ask``, ``/v1/search``), as the
OpenAPI schema shows them. The OpenAI-compatible ones are in `declrag.serve._openai_compat`.

A history is validated as a list here and checked turn by turn at admission (`declrag.inputs.turns`), so
that a 422 names the turn at fault (``history[2].role``), which a model of the turn could not say; the schema
still shows a turn's shape."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, WithJsonSchema

from ..answering import SEARCH_FIELDS, ApiError, Fields, Request
from ..inputs import ROLES
from ..payloads import SearchHit
from ._openai_compat import ChatMessage, conversation

TURN = {"type": "object", "title": "Turn", "additionalProperties": False, "required": ["role", "content"],
        "properties": {"role": {"type": "string", "enum": list(ROLES)}, "content": {"type": "string"}}}
History = Annotated[list[Any] | None, WithJsonSchema({
    "anyOf": [{"type": "array", "items": TURN}, {"type": "null"}], "title": "History",
    "description": "the conversation before the question, oldest turn first: [{role, content}], role user, "
                   "assistant or system; at most the program's history.max_turns turns and history.max_chars "
                   "characters"})]
Where = Annotated[dict[str, Any] | None, Field(description="a metadata filter, as `declrag search --where`")]


class AskOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    where: Where = None


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    history: History = None
    options: AskOptions | None = None
    stream: StrictBool = False  # server-sent events: the answer's tokens as generated, then the whole response


class FeedbackRequest(BaseModel):
    """A rating of one answer (`POST /v1/feedback`)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64, description="the answer's id, or the chat completion's id")
    helpful: StrictBool = Field(description="true: the answer helped; false: it did not")
    citation: int | None = Field(None, ge=1, le=1000, description="the [n] of the citation that answered")
    correction: str | None = Field(None, min_length=1, max_length=4000,
                                   description="the right answer, in the user's words")

    def answer_id(self) -> str:
        return self.id.removeprefix("chatcmpl-")


class SearchRequest(BaseModel):
    """``query`` (with an optional ``history``), or ``messages`` as ``/v1/chat/completions`` takes them (the
    last, the user's, is the query; the earlier ones the history)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "oneOf": [{"required": ["query"]}, {"required": ["messages"]}], "not": {"required": ["messages", "history"]}})
    query: StrictStr | None = None
    history: History = None
    messages: list[ChatMessage] | None = Field(None, min_length=1)
    where: Where = None
    k: StrictInt | None = Field(None, ge=1, description="passages to return (default: the program's retrieve.k; "
                                                        "at most the server's max_search_k, 50 by default)")
    alpha: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False,
                                description="the vector leg's weight in the hybrid fusion, 0 (keyword only) to 1 "
                                            "(vector only) (default: the program's retrieve.alpha)")

    def request(self) -> Request:
        """The question, filter and history to search with; `ApiError` 422 unless exactly one of ``query`` and
        ``messages`` is given (and ``history`` only with ``query``)."""
        if (self.query is None) == (self.messages is None):
            raise ApiError(422, "send query or messages (one of them)", "query")
        if self.messages is None:
            return Request(self.query, self.where, self.history, "/v1/search", SEARCH_FIELDS)
        if self.history is not None:
            raise ApiError(422, "history goes with query; with messages, the earlier messages are the history",
                           "history")
        question, history = conversation(self.messages)
        return Request(question, self.where, history, "/v1/search", Fields("messages", "where", "messages"))


class SearchResponse(BaseModel):
    hits: list[SearchHit]
    query: str
    k: int
    alpha: float
    latency_ms: dict[str, float] = Field(description="total: milliseconds in the program")


__all__ = ["AskOptions", "AskRequest", "History", "SearchHit", "SearchRequest", "SearchResponse"]
