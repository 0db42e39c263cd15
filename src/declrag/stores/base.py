"""The `Store` protocol every backend implements, and the metadata filter language they share.

A store holds chunks (text, exact span, vector) and the documents they came from, and remembers what it
was built with (`StoreMeta`). Every search returns `Hit`s best first. Hybrid search has Weaviate's
semantics (see `declrag.stores.fusion`), so a tuned ``alpha`` means the same on every backend.

A store is named by a URI (`declrag.stores.open_store`): a plain path is the embedded LanceDB store,
``weaviate://host:port/Collection`` a Weaviate collection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, Union, runtime_checkable

import numpy as np

from ..config import Fusion, IngestConfig, Metric, Strict
from ..errors import DeclragError
from ..types import Chunk, Document, Hit

# fields a filter may name; all of them are stored on every chunk (page may be null)
FILTER_FIELDS = {"id": str, "doc_id": str, "source": str, "title": str, "page": int, "position": int}
NULLABLE = {"page"}
# integers are stored as 32-bit on every backend; a filter value outside that range is refused
INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"}


class StoreMeta(Strict):
    """What a store was built with; written once, when the store is created, inside the store itself."""

    format: int = 1
    backend: Literal["lancedb", "weaviate"] = "lancedb"
    metric: Metric = "cosine"
    ingest: IngestConfig = IngestConfig()


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


@dataclass(frozen=True, slots=True)
class Cond:
    """One comparison of a filter: ``field op value`` (``value`` is a list for $in / $nin)."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class Junction:
    """``$and`` / ``$or`` of sub-filters."""

    op: Literal["and", "or"]
    parts: tuple["Node", ...]


Node = Union[Cond, Junction]


class Filter:
    """A metadata filter: ``{"source": "a.pdf", "page": {"$gte": 2}, "doc_id": {"$in": [...]}}``.

    Keys are chunk fields (id, doc_id, source, title, page, position) or ``$and``/``$or`` with a list of
    filters; a bare value means ``$eq``; conditions on several keys all apply.

    Meaning, the same on every backend (`matches` is the reference each backend's translation is tested
    against): ``$in: []`` matches nothing and ``$nin: []`` everything; a chunk without a page matches
    ``$ne`` and ``$nin`` on page (as in MongoDB) and no other condition on it. Integers must lie in the
    32-bit range the stores hold.
    """

    def __init__(self, spec: Mapping[str, Any]):
        self.spec = dict(spec) if isinstance(spec, Mapping) else spec
        self.tree: Node = self._parse(self.spec)

    @classmethod
    def of(cls, where: "Filter | Mapping[str, Any] | None") -> "Filter | None":
        return where if isinstance(where, Filter) or where is None else cls(where)

    def __repr__(self) -> str:
        return f"Filter({json.dumps(self.spec, sort_keys=True)})"

    def _parse(self, spec: Any) -> Node:
        if not isinstance(spec, Mapping) or not spec:
            raise DeclragError(f"invalid filter {spec!r}: expected a non-empty mapping",
                               hint='write e.g. {"source": "a.pdf", "page": {"$gte": 2}}')
        parts: list[Node] = []
        for key, cond in spec.items():
            if key in ("$and", "$or"):
                if not isinstance(cond, list) or not cond:
                    raise DeclragError(f"invalid filter: {key} takes a non-empty list of filters")
                parts.append(Junction(key[1:], tuple(self._parse(sub) for sub in cond)))
                continue
            if key not in FILTER_FIELDS:
                raise DeclragError(f"invalid filter: unknown field {key!r}",
                                   hint=f"filterable fields: {', '.join(sorted(FILTER_FIELDS))}")
            for op, val in self._conds(cond):
                if op not in _OPS:
                    raise DeclragError(f"invalid filter: unknown operator {op!r} on {key!r}",
                                       hint=f"operators: {', '.join(sorted(_OPS))}")
                if op in ("$in", "$nin") and not isinstance(val, list):
                    raise DeclragError(f"invalid filter: {op} on {key!r} takes a list")
                vals = val if op in ("$in", "$nin") else [val]
                want = FILTER_FIELDS[key]
                if any(not isinstance(v, want) or isinstance(v, bool) for v in vals):
                    raise DeclragError(f"invalid filter: {key!r} compares with {want.__name__} values, got {val!r}")
                if want is int and any(not INT_MIN <= v <= INT_MAX for v in vals):
                    raise DeclragError(f"invalid filter: {key!r} values must lie between {INT_MIN} and {INT_MAX}, "
                                       f"got {val!r}", hint="stores hold 32-bit integers; no value outside matches")
                if want is str and any("\x00" in v for v in vals):
                    raise DeclragError(f"invalid filter: a {key!r} value contains a NUL character")
                parts.append(Cond(key, op, list(val) if op in ("$in", "$nin") else val))
        return parts[0] if len(parts) == 1 else Junction("and", tuple(parts))

    @staticmethod
    def _conds(cond: Any) -> list[tuple[str, Any]]:
        if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
            return list(cond.items())
        return [("$eq", cond)]

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether a chunk (as a mapping of its fields) passes: the reference meaning of the filter."""

        def ok(node: Node) -> bool:
            if isinstance(node, Junction):
                return (all if node.op == "and" else any)(ok(p) for p in node.parts)
            v = record.get(node.field)
            if node.op == "$nin":
                return v is None or v not in node.value
            if node.op == "$ne":
                return v is None or v != node.value
            if v is None:
                return False
            if node.op == "$in":
                return v in node.value
            return {"$eq": v == node.value, "$gt": v > node.value, "$gte": v >= node.value,
                    "$lt": v < node.value, "$lte": v <= node.value}[node.op]

        return ok(self.tree)


Where = Filter | Mapping[str, Any] | None


@runtime_checkable
class Store(Protocol):
    """A chunk store with keyword, vector and hybrid search: the contract a backend implements.

    Open one with `declrag.stores.open_store` (which creates it, reads its `StoreMeta` and checks ingest
    settings); `declrag.testing.StoreContract` is the test suite every backend passes. Constructors are
    light: they connect, they do not create anything.
    """

    #: the URI that names this store (a folder path for LanceDB, ``weaviate://...`` for Weaviate); written
    #: into artifacts, so it never holds a secret
    uri: str
    #: what the backend offers beyond the protocol, e.g. ``"leg_scores"`` (hybrid hits carry each leg's raw
    #: score) or ``"atomic_upsert"`` (an upsert is one commit); the contract suite skips what is absent
    capabilities: ClassVar[frozenset[str]]

    def read_meta(self) -> StoreMeta | None:
        """What the store was built with, or None when nothing is there yet."""

    def create(self, meta: StoreMeta) -> None:
        """Make an empty store described by ``meta``; refuses a location that holds something else."""

    def drop(self) -> None:
        """Remove the store: its chunks, documents and metadata."""

    def upsert(self, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
               file_stats: Mapping[str, tuple[int, int]] | None = None) -> None:
        """Insert or replace ``documents`` with exactly these chunks (old chunks of them are removed).
        ``file_stats`` maps a source path to (mtime_ns, size) for change detection. A document's record
        is written last, so after a crash the indexer sees it as not indexed and does it again."""

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Remove documents and their chunks; returns the number of chunks removed."""

    def optimize(self) -> None:
        """Tidy storage after a large write (compaction); a no-op where the backend does it itself."""

    def settle(self) -> None:
        """Return once every write made through this handle is visible to every kind of search (Weaviate's
        keyword index lags writes by up to a minute); at once where writes are visible on commit."""

    def count(self, where: Where = None) -> int:
        """Chunks that pass ``where`` (all without one)."""

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked; unknown ids are left out."""

    def documents(self) -> dict[str, DocRecord]:
        """Every indexed document's record, by document id."""

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Full texts of these documents (for context-window expansion); unknown ids are left out."""

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]:
        """BM25 (k1 1.2, b 0.75, word tokens, English stopwords dropped from the query): chunks with a
        positive score, best first."""

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None) -> list[Hit]:
        """Nearest chunks to ``vector``, exact, scored ``1 - distance``, best first."""

    def hybrid_search(self, query: str, vector: np.ndarray, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None) -> list[Hit]:
        """Weaviate's hybrid search (`declrag.stores.fusion`): each leg brings ``max(candidates, limit)``
        results, fused with weight ``alpha`` on the vector leg."""

    def close(self) -> None:
        """Release connections and caches; the store can be opened again."""
