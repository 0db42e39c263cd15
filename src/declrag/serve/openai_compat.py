"""The OpenAI-compatible face of `declrag serve`: request models for ``/v1/chat/completions`` and the
response, stream-chunk and model-list shapes.

The last user message is the question (earlier turns are ignored: the program answers one question from
the documents). OpenAI sampling parameters (temperature, max_tokens, n, ...) are accepted and ignored; the
program's own settings apply. The answer text carries the ``[n]`` citation markers, and the citations
travel as an extra top-level field ``citations`` (on the response, and on the final stream chunk):
``[{n, chunk_id, source, span, snippet, score, attributed, ...}]``. ``usage`` is in OpenAI's shape, from
the program's LM usage (every stage, every call).

``stream: true`` streams the generate stage's tokens as the LM produces them (retrieval and the other
stages run first). The content chunks are the answer as post-processed (markers that point at no passage
dropped, spacing normalised), so they concatenate to the final answer, except when post-processing replaced
the words: an abstention recognised in the answer, markers attributed to the sentences of an answer that
cited nothing, or the self-judge abstaining or regenerating. The final chunk therefore also carries the
final text as ``answer`` and ``replaced`` (true in those cases). A cached answer arrives as one chunk.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator
from pydantic_core import PydanticCustomError


class ChatMessage(BaseModel):
    """One message. As in OpenAI's API, ``content`` is a string or a list of parts, each an object with a
    ``type``; a ``text`` part's ``text`` is a string (nothing is turned into one). Parts of other types
    (images, audio, files) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    role: StrictStr
    content: StrictStr | list[dict[str, Any]] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, content: Any) -> Any:
        if content is None or isinstance(content, str):
            return content
        if not isinstance(content, list):
            raise PydanticCustomError("content", "content must be a string or a list of content parts")
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise PydanticCustomError("content_part", "each content part is an object with a string type")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise PydanticCustomError("content_part", "a text part's text must be a string")
        return content


class ChatRequest(BaseModel):
    """OpenAI's chat request; fields declrag does not use are accepted (clients send many) and ignored. The
    fields it reads are as strict as OpenAI's: ``stream`` is a JSON boolean (or null), ``model`` a string."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool | None = False


def last_user_text(req: ChatRequest) -> str | None:
    """The text of the last user message (text parts joined), or None when there is no user message."""
    for m in reversed(req.messages):
        if m.role == "user":
            if isinstance(m.content, list):
                return "\n".join(p["text"] for p in m.content if p["type"] == "text")
            return m.content or ""
    return None


def usage(payload: dict[str, Any]) -> dict[str, int]:
    total = (payload.get("usage") or {}).get("total") or {}
    p, c = int(total.get("tokens_in") or 0), int(total.get("tokens_out") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _ids() -> tuple[str, int]:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())


def completion(payload: dict[str, Any], model: str) -> dict[str, Any]:
    cid, created = _ids()
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": payload["answer"]},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage(payload), "citations": payload["citations"]}


async def stream(events: AsyncIterator[tuple[str, Any]], model: str) -> AsyncIterator[str]:
    """Server-sent events from the server's answer events (``("delta", text)`` as the LM generates it,
    ``("done", (payload, replaced))``, or ``("error", ApiError)``): a role chunk, a content chunk per delta, a
    final chunk with ``finish_reason``, ``usage``, ``citations`` and the final ``answer`` with ``replaced``,
    then ``data: [DONE]``. An error once chunks have begun is a last ``data: {"error": {...}}``, as OpenAI's."""
    cid, created = _ids()

    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> str:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    async for kind, value in events:
        if kind == "delta":
            yield chunk({"content": value})
        elif kind == "done":
            payload, replaced = value
            yield chunk({}, "stop", usage=usage(payload), citations=payload["citations"], answer=payload["answer"],
                        replaced=replaced)
            yield "data: [DONE]\n\n"
        else:
            err = {"message": value.message, "type": value.kind, "code": value.status}
            yield f"data: {json.dumps({'error': err})}\n\n"


def models(name: str, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": "declrag"}]}
