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

from pydantic import BaseModel, ConfigDict, Field


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """OpenAI's chat request; fields declrag does not use are accepted (clients send many) and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False


def last_user_text(req: ChatRequest) -> str | None:
    """The text of the last user message (text parts joined), or None when there is no user message."""
    for m in reversed(req.messages):
        if m.role == "user":
            if isinstance(m.content, list):
                return "\n".join(str(p.get("text", "")) for p in m.content if p.get("type", "text") == "text")
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
