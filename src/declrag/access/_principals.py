"""A caller (`Principal`) and the part of a search's filter their groups make (`scope_filter`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..types import EVERYONE, UNLABELLED

#: who reads a document indexed without readers: ``everyone`` (every caller) or ``nobody`` (no caller; an
#: administrator's unscoped `declrag ask` still does)
Unlabelled = Literal["everyone", "nobody"]


@dataclass(frozen=True, slots=True)
class Principal:
    """One caller: a name (a key's, or a token's subject) and the groups they belong to."""

    name: str
    groups: frozenset[str] = frozenset()

    def readable(self, unlabelled: Unlabelled) -> list[str]:
        """The readers values whose documents this caller may read, sorted: their groups, `EVERYONE`, and
        `UNLABELLED` under the ``everyone`` policy."""
        return sorted({*self.groups, EVERYONE, *([UNLABELLED] if unlabelled == "everyone" else [])})


def scope_filter(where: Mapping[str, Any] | None, principal: Principal, unlabelled: Unlabelled) -> dict[str, Any]:
    """``where`` (a filter in `declrag.stores.base.Filter`'s language, or None) narrowed to what ``principal`` may
    read: ``{"$and": [where, {"readers": {"$in": [...]}}]}``. The scope is a top-level conjunct, so nothing inside
    ``where`` (an ``$or``, a ``doc_id`` or ``source`` of another group's document) can widen it."""
    mine = {"readers": {"$in": principal.readable(unlabelled)}}
    return {"$and": [dict(where), mine]} if where else mine
