"""Conversations: the pieces the search query of a conversation's last turn is made from.

A history is a list of turns ``{role, content}`` (``role``: ``user``, ``assistant`` or ``system``), oldest first,
the same shape at every entry point (a `dspy.History` of such turns too); `declrag.inputs.turns` checks it.
`declrag.pipeline.stages.history.HistoryQuery` makes the search query by ``history.query`` (``off``, ``joined``,
``deterministic``, ``condense``: see `declrag.config.HistoryConfig` and docs/guides/conversation.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....inputs import ROLES, Turn
from ....text.keywords import tokenize

# words that carry no subject in a follow-up: Weaviate's stop words, pronouns, question and filler words
CHAT_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both
but by can could did do does doing done down during each else even ever every few for from further get gets
give go got had has have having he her here hers herself him himself his how i if in into is it its itself
just know let like ll me more most much my myself need no nor not now of off on once one only or other our
ours ourselves out over own please re s same say she should so some such t tell than thank thanks that the
their theirs them themselves then there these they this those through to too under until up us ve very want
was we well were what when where which while who whom why will with would yes yet you your yours yourself
ok okay sure great good really mean means meant thing things something anything way ways much many
""".split())


def window(history: Sequence[Turn], n_turns: int, n_chars: int, roles: Sequence[str] = ROLES) -> list[Turn]:
    """The most recent turns of ``roles`` that fit: at most ``n_turns`` of them and ``n_chars`` characters (a
    turn that does not fit whole is cut from its start, keeping its end, which is nearest the question)."""
    out: list[Turn] = []
    left = n_chars
    for t in reversed(history):
        if len(out) >= n_turns or left <= 0:
            break
        if t.role in roles:
            text = t.content if len(t.content) <= left else "…" + t.content[-left:]
            out.append(Turn(t.role, text))
            left -= len(text)
    return out[::-1]


def transcript(history: Sequence[Turn]) -> str:
    """The turns as the LM reads them: ``User: ...`` / ``Assistant: ...`` / ``System: ...``, a line each."""
    return "\n".join(f"{t.role.capitalize()}: {' '.join(t.content.split())}" for t in history)


def salient_terms(text: str) -> list[str]:
    """The words of ``text`` that can carry a subject, in order, once each: no stop words, no single letters."""
    seen: dict[str, None] = {}
    for w in tokenize(text):
        if len(w) > 1 and w not in CHAT_STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


def expanded_query(question: str, earlier_user: Sequence[str], max_terms: int) -> str:
    """The keyword leg's query: ``question`` and then, newest turn first, up to ``max_terms`` salient terms of
    the earlier user turns that the question does not already hold."""
    have = set(tokenize(question))
    extra: list[str] = []
    for text in reversed(earlier_user):
        for w in salient_terms(text):
            if w not in have and len(extra) < max_terms:
                have.add(w)
                extra.append(w)
    return question if not extra else f"{question} {' '.join(extra)}"


def mixed_vector(vectors: np.ndarray, weight: float) -> np.ndarray:
    """The vector leg's query: ``vectors[0]`` (the question's) plus ``weight**i`` times ``vectors[i]`` (the
    earlier user turns, newest first), normalised."""
    w = np.asarray([weight ** i for i in range(len(vectors))], dtype=np.float32)
    v = (np.asarray(vectors, dtype=np.float32) * w[:, None]).sum(axis=0)
    n = float(np.linalg.norm(v))
    return v / n if n else np.asarray(vectors[0], dtype=np.float32)


def joined(question: str, earlier_user: Sequence[str]) -> str:
    """The user turns and the question joined, oldest first (the ``joined`` mode and the naive baseline)."""
    return " ".join([*earlier_user, question])


__all__ = ["CHAT_STOPWORDS", "expanded_query", "joined", "mixed_vector", "salient_terms", "transcript", "window"]
