"""The one check of the text a user sends: every entry point passes it (`RAGProgram.forward`, `declrag.search`,
the HTTP routes and the CLI before they do any work), so a question means the same, and fails the same,
wherever it comes from.

`user_text` returns the text as the program sees it, or raises `InputError` (a `DeclragError` naming the field; the
server answers it 422). A lone surrogate is refused (JSON's ``\\u`` escapes and undecodable command-line bytes
produce one; no tokenizer, LM provider or UTF-8 encoder takes it). Control characters other than whitespace are
removed, the text is NFC-normalized and stripped of whitespace and invisible format characters at both ends; it must
then hold a visible character (a letter, digit, punctuation mark or symbol) and be at most ``limit`` characters.
`turns` checks a conversation's earlier turns the same way.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import DeclragError

# C0/C1 control characters that are not whitespace (tab, newlines, form feed and the separators are kept)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# letters and symbols that render as nothing (Hangul fillers, the blank Braille pattern)
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


class InputError(DeclragError):
    """A `DeclragError` about one input field (``field``: "question", "query", "messages", ...)."""

    def __init__(self, message: str, field: str, hint: str | None = None):
        super().__init__(message, hint)
        self.field = field


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate in ``text`` as ``U+XXXX``, or None when the text is valid Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"U+{ord(text[e.start]):04X}"
    return None


def visible(ch: str) -> bool:
    """Whether a character shows: a letter, digit, punctuation mark or symbol that is not a filler."""
    return unicodedata.category(ch)[0] in "LNPS" and ch not in _FILLERS


def _edge(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def user_text(text: Any, field: str = "question", limit: int | None = None, hint: str | None = None) -> str:
    """``text`` checked and normalized (see the module docstring); ``limit``: the longest allowed, in characters
    (``hint`` says how to raise it)."""
    if not isinstance(text, str):
        raise InputError(f"{field} must be a string, not {type(text).__name__}", field)
    if (bad := lone_surrogate(text)) is not None:
        raise InputError(f"{field} is not valid Unicode: it contains a lone surrogate ({bad})", field,
                         hint="send UTF-8 text; a surrogate escape must be part of a pair")
    text = unicodedata.normalize("NFC", _CONTROL.sub("", text))
    start, end = 0, len(text)
    while start < end and _edge(text[start]):
        start += 1
    while end > start and _edge(text[end - 1]):
        end -= 1
    text = text[start:end]
    if not any(visible(ch) for ch in text):
        raise InputError(f"{field} is empty", field, hint=f"the {field} holds no visible character")
    if limit is not None and len(text) > limit:
        raise InputError(f"{field} is {len(text)} characters long; the limit is {limit}", field, hint=hint)
    return text


def api_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an API key (to follow "the API key ..."), or None. Clients send it in an HTTP
    header, which carries ASCII (any other byte arrives re-decoded as Latin-1 and could never match): visible
    ASCII characters only."""
    if not key:
        return "is empty"
    if bad := [ch for ch in key if not "!" <= ch <= "~"]:
        ch = bad[0]
        what = ("a space" if ch == " " else f"the byte 0x{ord(ch) - 0xDC00:02X}, which is not UTF-8"
                if 0xDC80 <= ord(ch) <= 0xDCFF else f"U+{ord(ch):04X}")
        return (f"holds {what}; a key travels in an HTTP header, so it must be visible ASCII characters only "
                "(letters, digits, punctuation)")
    return None


__all__ = ["InputError", "api_key_problem", "lone_surrogate", "user_text", "visible"]


ROLES = ("user", "assistant", "system")


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def turns(history: Any, *, max_turns: int, max_chars: int, field: str = "history") -> tuple[Turn, ...]:
    """``history`` checked: None or a list of ``{role, content}`` mappings (or `Turn`s, or a `dspy.History` of
    them), at most ``max_turns`` turns and ``max_chars`` characters in all, each turn's content non-empty text
    (normalised as `user_text` does). Raises `InputError` naming the field, e.g. ``history[2].role``."""
    if history is None:
        return ()
    messages = getattr(history, "messages", history)  # dspy.History
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InputError(f"{field} must be a list of turns ({{role, content}}), not {type(history).__name__}", field,
                         hint='e.g. [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]')
    if len(messages) > max_turns:
        raise InputError(f"{field} has {len(messages)} turns; the limit is {max_turns}", field,
                         hint="send only the most recent turns, or raise history.max_turns in the program config")
    out, total = [], 0
    for i, m in enumerate(messages):
        where = f"{field}[{i}]"
        if isinstance(m, Turn):
            m = m.to_dict()
        if not isinstance(m, dict):
            raise InputError(f"{where} must be an object with role and content, not {type(m).__name__}", where)
        if extra := sorted(set(m) - {"role", "content"}):
            raise InputError(f"{where} has unknown field(s) {', '.join(map(repr, extra))}", where,
                             hint="a turn has exactly two fields: role and content")
        role = m.get("role")
        if role not in ROLES:
            raise InputError(f"{where}.role must be one of {', '.join(ROLES)}, not {role!r}", f"{where}.role")
        text = user_text(m.get("content"), f"{where}.content", max_chars,
                         hint="shorten it, or raise history.max_chars in the program config")
        total += len(text)
        if total > max_chars:
            raise InputError(f"{field} holds {total}+ characters; the limit is {max_chars}", field,
                             hint="send only the most recent turns, or raise history.max_chars in the program config")
        out.append(Turn(role, text))
    return tuple(out)
