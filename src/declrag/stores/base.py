"""The `Store` protocol every backend implements, and the metadata filter language they share.

A store holds chunks (text, exact span, vector) and the documents they came from. Every search returns
`Hit`s best first. Hybrid search has Weaviate's semantics (see `declrag.stores.fusion`), so a tuned
``alpha`` means the same on every backend.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import Fusion
from ..errors import DeclragError
from ..types import Chunk, Document, Hit

# fields a filter may name; all of them are stored on every chunk
FILTER_FIELDS = {"id": str, "doc_id": str, "source": str, "title": str, "page": int, "position": int}
_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"}


@dataclass(frozen=True, slots=True)
class DocRecord:
    """What a store remembers of an indexed document, for incremental re-indexing."""

    id: str
    source: str
    title: str
    page: int | None
    hash: str
    chunks: int
    mtime_ns: int = 0
    size: int = -1


class Filter:
    """A metadata filter: ``{"source": "a.pdf", "page": {"$gte": 2}, "doc_id": {"$in": [...]}}``.

    Keys are chunk fields (id, doc_id, source, title, page, position) or ``$and``/``$or`` with a list of
    filters; a bare value means ``$eq``; conditions on several keys all apply. Backends translate it
    (`to_arrow`, `to_sql`, and the Weaviate backend's own) so a filter means the same everywhere.
    """

    def __init__(self, spec: Mapping[str, Any]):
        self.spec = dict(spec)
        self._check(self.spec)

    @classmethod
    def of(cls, where: "Filter | Mapping[str, Any] | None") -> "Filter | None":
        return where if isinstance(where, Filter) or where is None else cls(where)

    def __repr__(self) -> str:
        return f"Filter({json.dumps(self.spec, sort_keys=True)})"

    def _check(self, spec: Mapping[str, Any]) -> None:
        if not isinstance(spec, Mapping) or not spec:
            raise DeclragError(f"invalid filter {spec!r}: expected a non-empty mapping",
                               hint='write e.g. {"source": "a.pdf", "page": {"$gte": 2}}')
        for key, cond in spec.items():
            if key in ("$and", "$or"):
                if not isinstance(cond, list) or not cond:
                    raise DeclragError(f"invalid filter: {key} takes a non-empty list of filters")
                for sub in cond:
                    self._check(sub)
                continue
            if key not in FILTER_FIELDS:
                raise DeclragError(f"invalid filter: unknown field {key!r}",
                                   hint=f"filterable fields: {', '.join(sorted(FILTER_FIELDS))}")
            for op, val in self._conds(cond):
                if op not in _OPS:
                    raise DeclragError(f"invalid filter: unknown operator {op!r} on {key!r}",
                                       hint=f"operators: {', '.join(sorted(_OPS))}")
                vals = val if op in ("$in", "$nin") else [val]
                if op in ("$in", "$nin") and not isinstance(val, list):
                    raise DeclragError(f"invalid filter: {op} on {key!r} takes a list")
                want = FILTER_FIELDS[key]
                if any(not isinstance(v, want) or isinstance(v, bool) for v in vals):
                    raise DeclragError(f"invalid filter: {key!r} compares with {want.__name__} values, got {val!r}")

    @staticmethod
    def _conds(cond: Any) -> list[tuple[str, Any]]:
        if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
            return list(cond.items())
        return [("$eq", cond)]

    def to_sql(self) -> str:
        """A SQL predicate (LanceDB / DataFusion dialect)."""

        def lit(v: Any) -> str:
            return str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"

        def one(spec: Mapping[str, Any]) -> str:
            parts = []
            for key, cond in spec.items():
                if key in ("$and", "$or"):
                    parts.append("(" + f" {key[1:].upper()} ".join(one(s) for s in cond) + ")")
                    continue
                col = f"`{key}`"
                for op, v in self._conds(cond):
                    if op in ("$in", "$nin"):
                        inner = ", ".join(lit(x) for x in v) or "NULL"
                        parts.append(f"{col} {'NOT ' if op == '$nin' else ''}IN ({inner})")
                    else:
                        sym = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                        parts.append(f"{col} {sym} {lit(v)}")
            return "(" + " AND ".join(parts) + ")"

        return one(self.spec)

    def to_arrow(self):
        """A pyarrow compute expression over chunk columns."""
        import pyarrow.compute as pc

        def one(spec: Mapping[str, Any]):
            expr = None
            for key, cond in spec.items():
                if key in ("$and", "$or"):
                    subs = [one(s) for s in cond]
                    e = subs[0]
                    for s in subs[1:]:
                        e = (e & s) if key == "$and" else (e | s)
                else:
                    f, e = pc.field(key), None
                    for op, v in self._conds(cond):
                        c = {
                            "$eq": lambda: f == v, "$ne": lambda: f != v, "$gt": lambda: f > v,
                            "$gte": lambda: f >= v, "$lt": lambda: f < v, "$lte": lambda: f <= v,
                            "$in": lambda: f.isin(v), "$nin": lambda: ~f.isin(v),
                        }[op]()
                        e = c if e is None else e & c
                expr = e if expr is None else expr & e
            return expr

        return one(self.spec)


Where = Filter | Mapping[str, Any] | None


@runtime_checkable
class Store(Protocol):
    """A chunk store with keyword, vector and hybrid search. See `declrag.testing.StoreContract`."""

    def upsert(self, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
               file_stats: Mapping[str, tuple[int, int]] | None = None) -> None:
        """Insert or replace ``documents`` with exactly these chunks (old chunks of them are removed) in
        one atomic step. ``file_stats`` maps a source path to (mtime_ns, size) for change detection."""

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Remove documents and their chunks; returns the number of chunks removed."""

    def count(self, where: Where = None) -> int: ...

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked; unknown ids are left out."""

    def documents(self) -> dict[str, DocRecord]: ...

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]: ...

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]: ...

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None) -> list[Hit]: ...

    def hybrid_search(self, query: str, vector: np.ndarray, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None) -> list[Hit]: ...

    def close(self) -> None: ...
