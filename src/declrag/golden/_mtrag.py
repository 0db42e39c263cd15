"""The MTRAG / MTRAG-UN task format (IBM's mt-rag-benchmark, ``generation_tasks/*.jsonl``; docs/guides/
conversation.md): one task a line, the conversation so far as ``input`` (the last turn the user's question), its
reference passages as ``contexts``, the reference answer as ``targets`` and its labels.

The corpus is the tasks' reference passages, ids kept (the benchmark's full corpora are separate downloads).
UNDERSPECIFIED tasks are answerable by a clarifying question, which is their reference answer; reports show them
apart (label ``answerability``), since neither an abstention nor a confident answer is right there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..inputs import Turn
from ..types import Document
from ._formats import Parsed, read_jsonl
from ._sets import Example

NEEDED = ("task_id", "input", "contexts")
SPEAKERS = {"user": "user", "agent": "assistant", "assistant": "assistant", "system": "system"}


def looks_like(first_row: dict[str, Any]) -> bool:
    """Whether a JSONL file's first row is an MTRAG task."""
    return all(k in first_row for k in NEEDED)


def _label(value: Any) -> str | None:
    if isinstance(value, list):
        return "+".join(str(v) for v in value) or None
    return None if value is None else str(value)


def _turns(f: Path, n: int, raw: Any) -> list[Turn]:
    if not isinstance(raw, list) or not raw:
        raise DeclragError(f"{f}:{n}: `input` must be a non-empty list of turns", hint="MTRAG's task format: "
                           "input = [{speaker: user|agent, text}, ...], the last one the user's question")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or t.get("speaker") not in SPEAKERS or not isinstance(t.get("text"), str):
            raise DeclragError(f"{f}:{n}: input[{i}] needs `speaker` (user or agent) and `text`",
                               hint="MTRAG's task format: input = [{speaker: user|agent, text}, ...]")
        if t["text"].strip():
            out.append(Turn(SPEAKERS[t["speaker"]], t["text"].strip()))
    if not out or out[-1].role != "user":
        raise DeclragError(f"{f}:{n}: the last turn of `input` is not the user's", hint="the task's question is the "
                           "last user turn")
    return out


def read(files: dict[str, Path]) -> Parsed:
    docs: dict[str, Document] = {}
    out: dict[str, tuple[Example, ...]] = {}
    for name, f in files.items():
        exs, seen = [], set()
        for n, r in read_jsonl(f):
            if missing := [k for k in NEEDED if k not in r]:
                raise DeclragError(f"{f}:{n}: missing field(s) {', '.join(missing)}",
                                   hint="an MTRAG task has task_id, input, contexts, targets and its labels")
            turns = _turns(f, n, r["input"])
            if not isinstance(r["contexts"], list):
                raise DeclragError(f"{f}:{n}: `contexts` must be a list", hint="[{document_id, text, title?}, ...]")
            gold = {}
            for i, c in enumerate(r["contexts"]):
                if not isinstance(c, dict) or not isinstance(c.get("document_id"), str) or \
                        not isinstance(c.get("text"), str):
                    raise DeclragError(f"{f}:{n}: contexts[{i}] needs `document_id` and `text`",
                                       hint="[{document_id, text, title?}, ...]")
                did = c["document_id"]
                docs.setdefault(did, Document(id=did, text=c["text"].strip(), source=str(f),
                                              title=str(c.get("title") or "")))
                gold[did] = 1
            targets = r.get("targets") or []
            answers = tuple(t["text"].strip() for t in targets if isinstance(t, dict) and isinstance(t.get("text"), str)
                            and t["text"].strip())
            answerability = _label(r.get("answerability")) or "ANSWERABLE"
            tid = str(r["task_id"])
            if tid in seen:
                raise DeclragError(f"{f}:{n}: duplicate task_id {tid!r}", hint="task ids must be unique")
            seen.add(tid)
            meta = {"answerability": answerability, "multi_turn": _label(r.get("Multi-Turn")) or "N/A",
                    "question_type": _label(r.get("Question Type")), "conversation_id": r.get("conversation_id"),
                    "turn": r.get("turn"), "collection": r.get("Collection")}
            exs.append(Example(id=tid, question=turns[-1].content, history=tuple(turns[:-1]), answers=answers,
                               gold=gold, answerable=answerability != "UNANSWERABLE",
                               metadata={k: v for k, v in meta.items() if v is not None}))
        out[name] = tuple(exs)
    return tuple(docs.values()), out
