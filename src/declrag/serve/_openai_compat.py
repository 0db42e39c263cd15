"""The OpenAI-compatible face of `declrag serve`: request models for ``/v1/chat/completions`` and the
response, stream-chunk and model-list shapes (docs/guides/serve.md describes the route).

The last message is the question and must be the user's; the earlier ones are the history, checked as ``/v1/ask``'s
``history`` is. A ``system`` message (or ``developer``, OpenAI's newer name) is kept as a ``system`` turn that only
the generate stage reads, after the program's own instructions: chat clients such as Open WebUI send one by
default, so refusing it would break them. Other roles are refused (declrag calls no tools). OpenAI's sampling
parameters are accepted and ignored. The citations travel as an extra top-level ``citations`` field; a stream's
final chunk also carries the final ``answer`` and ``replaced`` (post-processing replaced the streamed words).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from ..answering import ApiError

# the roles a message may have, and the turn's role each becomes
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class ChatMessage(BaseModel):
    """One message. As in OpenAI's API, ``content`` is a string or a list of parts, each an object with a
    ``type``; a ``text`` part's ``text`` is a string (nothing is turned into one). Parts of other types
    (images, audio, files) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    # any string is read, and a role declrag does not take is refused naming the message (`conversation`)
    role: Annotated[StrictStr, WithJsonSchema({"type": "string", "enum": list(ROLES)})]
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


def text(m: ChatMessage) -> str:
    """A message's text: the content, or its text parts joined with newlines."""
    if isinstance(m.content, list):
        return "\n".join(p["text"] for p in m.content if p["type"] == "text")
    return m.content or ""


def conversation(messages: list[ChatMessage], field: str = "messages") -> tuple[str, list[dict[str, str]]]:
    """The question (the last message, the user's) and the history (the messages before it, as ``{role,
    content}`` turns, at the same indexes; ``developer`` is ``system``). Raises `ApiError` 422 for a role declrag
    does not take (naming ``messages[i].role``) and when the last message is not the user's (naming ``field``)."""
    for i, m in enumerate(messages):
        if m.role not in ROLES:
            raise ApiError(422, f"{field}[{i}].role {m.role!r} is not supported: use user, assistant, system or "
                                "developer (declrag calls no tools)", f"{field}[{i}].role")
    if messages[-1].role != "user":
        raise ApiError(422, f"{field}: the last message must be the user's (it is the question), not "
                            f"{messages[-1].role!r}", field)
    return text(messages[-1]), [{"role": ROLES[m.role], "content": text(m)} for m in messages[:-1]]


def usage(payload: dict[str, Any]) -> dict[str, int]:
    total = (payload.get("usage") or {}).get("total") or {}
    p, c = int(total.get("tokens_in") or 0), int(total.get("tokens_out") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _ids(answer_id: str) -> tuple[str, int]:
    """The completion's id: ``chatcmpl-`` and the answer's id, which ``POST /v1/feedback`` takes as it is."""
    return f"chatcmpl-{answer_id}", int(time.time())


def content(payload: dict[str, Any]) -> str:
    """What a chat client shows: the answer, and an abstention's reason after it ("I don't know. The passages
    never mention TU Wien."), so that a person who sees why can ask again another way."""
    why = payload.get("reason") if payload.get("abstained") else None
    return f"{payload['answer']} {why[0].upper()}{why[1:]}." if why else payload["answer"]


def completion(payload: dict[str, Any], model: str) -> dict[str, Any]:
    cid, created = _ids(payload["id"])
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content(payload)},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage(payload), "citations": payload["citations"]}


async def stream(events: AsyncIterator[tuple[str, Any]], model: str, answer_id: str) -> AsyncIterator[str]:
    """Server-sent events from the server's answer events (``("delta", text)`` as the LM generates it,
    ``("done", (payload, replaced))``, or ``("error", ApiError)``): a role chunk, a content chunk per delta, a
    final chunk with ``finish_reason``, ``usage``, ``citations`` and the final ``answer`` with ``replaced``,
    then ``data: [DONE]``; an abstention's reason follows its text (`content`). An error once chunks have begun is a
    last ``data: {"error": {...}}``, as OpenAI's."""
    cid, created = _ids(answer_id)

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
            shown = content(payload)
            if not replaced and shown != payload["answer"]:  # an abstention's reason, after what was streamed
                yield chunk({"content": shown[len(payload["answer"]):]})
            yield chunk({}, "stop", usage=usage(payload), citations=payload["citations"], answer=shown,
                        replaced=replaced)
            yield "data: [DONE]\n\n"
        else:
            err = {"message": value.message, "type": value.kind, "code": value.status}
            yield f"data: {json.dumps({'error': err})}\n\n"


def models(name: str, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": "declrag"}]}
