"""JSONL: one document per JSON object line; a line that is no such record is skipped alone, with its number and
why (`load_jsonl`)."""

from __future__ import annotations

import json
from typing import Any

from ..text.reading import visible
from ..types import Document, check_readers
from ._files import LoadError, Read, Skipped, decode

_TEXT_KEYS = ("text", "content", "body", "contents", "passage")
_ID_KEYS = ("_id", "id", "doc_id")


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


_FIX_RECORD = "fix the record or remove the line"


def load_jsonl(data: bytes, source: str) -> Read:
    """One document per JSON object line. A line that is no such record (not JSON, no text, a duplicate id) is
    skipped, with its line number and why; the file's other records are read. `LoadError` when none is usable."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    lines_of: dict[str, int] = {}
    for n, line in enumerate(decode(data).split("\n"), 1):
        if not line.strip():
            continue
        try:
            doc = _record(line, n, source, lines_of)
        except LoadError as e:
            skipped.append(Skipped(source, f"{e.reason}; {_FIX_RECORD}", line=n))
            continue
        lines_of[doc.id] = n
        docs.append(doc)
    if not docs:
        if skipped:
            raise LoadError(f"no usable record ({len(skipped)} skipped; line {skipped[0].line}: {skipped[0].reason})")
        raise LoadError("empty file")
    return Read(docs, skipped)


def _record(line: str, n: int, source: str, lines_of: dict[str, int]) -> Document:
    """The document of line ``n``; `LoadError` with why it is none."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise LoadError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(row, dict):
        raise LoadError(f"expected a JSON object, got {type(row).__name__}")
    text_key = next((k for k in _TEXT_KEYS if k in row), None)
    if text_key is None:
        raise LoadError(f'no "text" field (expected one of {", ".join(_TEXT_KEYS)})')
    text = row[text_key]
    if text is None:
        raise LoadError(f'"{text_key}" is null')
    if not isinstance(text, str):
        raise LoadError(f'"{text_key}" must be a string, got {type(text).__name__}')
    if not visible(text):
        raise LoadError(f'"{text_key}" is empty')
    id_key = next((k for k in _ID_KEYS if row.get(k) not in (None, "")), None)
    if id_key is None:
        doc_id = f"{source}#L{n}"
    elif isinstance(row[id_key], (str, int)) and not isinstance(row[id_key], bool):
        doc_id = str(row[id_key])
    else:
        raise LoadError(f'"{id_key}" must be a string or integer')
    if doc_id in lines_of:
        raise LoadError(f"duplicate id {doc_id!r} (first on line {lines_of[doc_id]})")
    title = row.get("title")
    title = title.strip() if isinstance(title, str) else ""
    metadata = {
        k: v
        for k, v in row.items()
        if k not in (text_key, id_key, "title", "readers")
        and (_scalar(v) or isinstance(v, list) and all(_scalar(x) for x in v))
    }
    body = f"{title}\n\n{text}" if title else text
    return Document(doc_id, body, source, title, metadata=metadata, readers=_readers(row.get("readers")))


def _readers(value: Any) -> tuple[str, ...]:
    """A record's ``readers`` field (a list of group names, or one comma-separated string) as its document's readers;
    `LoadError` for anything else, so that a mistyped field never leaves a document readable by more callers."""
    if value is None or value == [] or value == "":
        return ()
    if not isinstance(value, (str, list)):
        raise LoadError(f'"readers" must be a list of group names or a comma-separated string, got '
                        f"{type(value).__name__}")
    try:
        return check_readers(value, '"readers"')
    except ValueError as e:
        raise LoadError(str(e)) from None
