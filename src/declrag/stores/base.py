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
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import field_validator, model_validator

from ..config import AnnConfig, Fusion, IngestConfig, Metric, Strict, written_before_context
from ..errors import DeclragError
from ..inputs import lone_surrogate
from ..types import Chunk, Document, Hit, stored_readers
from .backends import backends

# fields a filter may name; all of them are stored on every chunk (page may be null)
FILTER_FIELDS = {"id": str, "doc_id": str, "source": str, "title": str, "page": int, "position": int, "language": str,
                 "readers": str}
#: fields that hold a list of strings (`Chunk.readers`, as `stored_readers` stores it): ``$eq``/``$ne`` ask whether
#: the list holds a value, ``$in``/``$nin`` whether it holds any of the values; they take no order comparison
LIST_FIELDS = {"readers"}
# integers are stored as 32-bit on every backend; a filter value outside that range is refused
INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
MAX_DEPTH = 32  # how deep $and / $or may nest
_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"}


class StoreMeta(Strict):
    """What a store was built with; written once, when the store is created, inside the store itself."""

    # 2: ingest has ``context`` (a store of format 1 was built without headers); 3: chunks leave their running headers
    # and footers out of what is searched (`declrag.ingest._running`; Weaviate then BM25-searches ``searched`` always);
    # 4: what is searched and embedded is the text as a reader sees it (`declrag.text.reading`: hyphenation joined,
    # ligatures folded); a store of format 3 keeps the vectors it was embedded with, embeds its new chunks in the new
    # form, and its keyword index is built in the new form when the store next changes (an embedded store's);
    # 5: keyword search has declrag's tokens in every script (`declrag.text.keywords`): an embedded store of any format
    # builds its keyword index with them (`bm25.TOKENIZATION`); a Weaviate store of format 5 is sent them, whitespace-
    # tokenized (`weaviate.layout.Layout`), one of format 4 or earlier keeps Weaviate's word tokenization;
    # 6: chunks and document records hold their readers (`Chunk.readers`); an embedded store of any format gains the
    # column (its chunks unlabelled) when next written, a Weaviate store of format 5 or earlier cannot hold them
    format: int = 6
    backend: str = "lancedb"  # one of the names in BACKENDS
    metric: Metric = "cosine"
    ingest: IngestConfig = IngestConfig()

    @model_validator(mode="before")
    @classmethod
    def _older(cls, data: Any) -> Any:
        return written_before_context(data, "ingest") if isinstance(data, dict) and data.get("format", 1) < 2 else data

    @field_validator("backend")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in {n for n, _ in backends().values()}:
            raise ValueError(f"unknown backend {name!r}")
        return name


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
    readers: tuple[str, ...] = ()  # the groups that may read it (`Chunk.readers`); () not labelled


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
    parts: tuple[Node, ...]


Node = Cond | Junction


def asks_lists(node: Node) -> bool:
    """Whether a filter node asks about a list field (`LIST_FIELDS`) anywhere in it."""
    return node.field in LIST_FIELDS if isinstance(node, Cond) else any(map(asks_lists, node.parts))


class Filter:
    """A metadata filter: ``{"source": "a.pdf", "page": {"$gte": 2}, "doc_id": {"$in": [...]}}``.

    Keys are chunk fields (id, doc_id, source, title, page, position, language, readers) or ``$and``/``$or`` with a
    list of filters; a bare value means ``$eq``; conditions on several keys all apply. ``readers`` is a list
    (`LIST_FIELDS`): ``{"readers": {"$in": ["hr", "*"]}}`` passes chunks that any of these groups may read.

    Meaning, the same on every backend (`matches` is the reference each backend's translation is tested
    against): ``$in: []`` matches nothing and ``$nin: []`` everything; a chunk without a page matches
    ``$ne`` and ``$nin`` on page (as in MongoDB) and no other condition on it. Integers must lie in the
    32-bit range the stores hold; strings must be valid Unicode without NUL or surrounding whitespace
    (Weaviate trims both sides of what it compares); ``$and``/``$or`` nest at most `MAX_DEPTH` deep.
    """

    def __init__(self, spec: Mapping[str, Any]):
        self.spec = dict(spec) if isinstance(spec, Mapping) else spec
        self.tree: Node = self._parse(self.spec)

    @classmethod
    def of(cls, where: Filter | Mapping[str, Any] | None) -> Filter | None:
        return where if isinstance(where, Filter) or where is None else cls(where)

    def __repr__(self) -> str:
        return f"Filter({json.dumps(self.spec, sort_keys=True)})"

    def _parse(self, spec: Any, depth: int = 0) -> Node:
        if depth > MAX_DEPTH:
            raise DeclragError(f"invalid filter: $and / $or nest more than {MAX_DEPTH} deep",
                               hint="flatten it: conditions on several keys of one mapping all apply")
        if not isinstance(spec, Mapping) or not spec:
            raise DeclragError(f"invalid filter {spec!r}: expected a non-empty mapping",
                               hint='write e.g. {"source": "a.pdf", "page": {"$gte": 2}}')
        parts: list[Node] = []
        for key, cond in spec.items():
            if key in ("$and", "$or"):
                if not isinstance(cond, list) or not cond:
                    raise DeclragError(f"invalid filter: {key} takes a non-empty list of filters")
                parts.append(Junction(key[1:], tuple(self._parse(sub, depth + 1) for sub in cond)))
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
                if key in LIST_FIELDS and op not in ("$eq", "$ne", "$in", "$nin"):
                    raise DeclragError(f"invalid filter: {key!r} is a list of names; {op} does not compare with it",
                                       hint="ask with $eq / $ne (holds a name) or $in / $nin (holds any of them)")
                vals = val if op in ("$in", "$nin") else [val]
                want = FILTER_FIELDS[key]
                if any(not isinstance(v, want) or isinstance(v, bool) for v in vals):
                    raise DeclragError(f"invalid filter: {key!r} compares with {want.__name__} values, got {val!r}")
                if want is int and any(not INT_MIN <= v <= INT_MAX for v in vals):
                    raise DeclragError(f"invalid filter: {key!r} values must lie between {INT_MIN} and {INT_MAX}, "
                                       f"got {val!r}", hint="stores hold 32-bit integers; no value outside matches")
                if want is str and any("\x00" in v for v in vals):
                    raise DeclragError(f"invalid filter: a {key!r} value contains a NUL character")
                if want is str and any(lone_surrogate(v) for v in vals):
                    raise DeclragError(f"invalid filter: a {key!r} value is not valid Unicode (a lone surrogate)",
                                       hint="send UTF-8 text; a surrogate escape must be part of a pair")
                if want is str and any(v != v.strip() for v in vals):  # Weaviate trims both sides; we refuse
                    raise DeclragError(f"invalid filter: a {key!r} value begins or ends with whitespace ({val!r})",
                                       hint="stores compare text fields without surrounding whitespace; strip it")
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
            if node.field in LIST_FIELDS:
                held = set(stored_readers(v or ()))
                asked = node.value if node.op in ("$in", "$nin") else [node.value]
                return bool(held.intersection(asked)) == (node.op in ("$eq", "$in"))
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


def check_upsert(documents: Sequence[Document], chunks: Sequence[Chunk],
                 vectors: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The argument checks every backend's `Store.upsert` makes (a caller's mistake is a ValueError): one vector
    per chunk, unique document and chunk ids, every chunk of one of the documents. Returns the vectors as float32
    and the document ids."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    doc_ids = [d.id for d in documents]
    if len(set(doc_ids)) != len(doc_ids) or len({c.id for c in chunks}) != len(chunks):
        raise ValueError("documents and chunks in one upsert must have unique ids")
    if {c.doc_id for c in chunks} - set(doc_ids):
        raise ValueError("every chunk must belong to one of the documents upserted with it")
    return vectors, doc_ids


@dataclass
class StoreCheck:
    """What `Store.verify` found: the chunks the document records count, and each copy's chunk count."""

    expected: int
    #: each copy of the store (one, or a replicated server's nodes) -> the chunks it holds; None: it did not answer
    copies: dict[str, int | None] = field(default_factory=dict)
    repaired: int = 0  #: chunks written again because a copy had lost them (or their vectors)
    replicated: int = 0  #: chunks a copy lacked that the server's own replication brought while verify waited
    problems: list[str] = field(default_factory=list)  #: what is still wrong, one line each

    @property
    def ok(self) -> bool:
        return not self.problems


@runtime_checkable
class Store(Protocol):
    """A chunk store with keyword, vector and hybrid search: the contract a backend implements.

    Open one with `declrag.stores.open_store` (which creates it, reads its `StoreMeta` and checks ingest
    settings); `declrag.testing.StoreContract` is the test suite every backend passes. To add a backend,
    implement this protocol (subclass it: ``warm_up`` and the context manager come with it), give it a row in
    `BACKENDS` (its URI scheme, name and class), and run the contract suite on it.

    What every backend guarantees:

    - Constructors are light: they connect (or only remember a path); they create nothing.
    - Chunks are returned exactly as written (every `Chunk` field, ``page`` and parent spans possibly
      None), and a hit's span indexes its document's text (`document_texts`).
    - Rankings are deterministic: equal scores are ordered by `declrag.stores.fusion.object_uuid` of the
      chunk id, ascending, on every backend and every run.
    - Filters (``where``: a `Filter`, a mapping in its language, or None for no filter) mean what
      `Filter.matches` says, on every kind of read; an invalid filter raises `DeclragError` before any work.
    - One handle serves many threads at once for reads (serve workers, compile trials); writes come from one
      indexer at a time. A handle is a view of shared data: ``copy.deepcopy`` returns the handle itself
      (DSPy copies programs, and copies of a program share their store).
    - Errors the user can act on (no store, a location holding something else, vectors of another
      dimension, a server that refuses) are `DeclragError` with a hint; a caller's programming error (bad
      argument shapes) is `ValueError`. Backends that talk to a server retry transient failures themselves.
    """

    #: the backend's name, as `StoreMeta.backend` records it (``"lancedb"``, ``"weaviate"``)
    backend: ClassVar[str]
    #: the URI that names this store (a folder path for LanceDB, ``weaviate://...`` for Weaviate); written
    #: into artifacts, so it never holds a secret
    uri: str
    #: what the backend offers beyond the protocol, e.g. ``"leg_scores"`` (hybrid hits carry each leg's raw
    #: score), ``"atomic_upsert"`` (an upsert is one commit) or ``"local_folder"`` (the store is a folder on this
    #: machine: a rebuild can be built beside it and swapped in, and its writers share a file lock); the
    #: contract suite skips what is absent
    capabilities: ClassVar[frozenset[str]]

    # -- naming and finding stores (no store handle needed) --------------------------------------------
    @classmethod
    def from_uri(cls, uri: str) -> Store:
        """A handle on the store named by ``uri`` (a URI of this backend's scheme, as the user wrote it).

        Light: nothing is created, and a store that does not exist yet is no error (`read_meta` then
        returns None). Raises `DeclragError` for a malformed URI, an unreachable server or refused
        credentials."""

    @staticmethod
    def child_uri(base: str, name: str) -> str:
        """The URI of the store called ``name`` under ``base``: a sub-folder of a folder, or a collection on
        the same server named after ``base``'s. Pure (touches nothing) and deterministic; the backend may
        escape characters it cannot hold, so callers keep names distinct after escaping (`corpus_store`'s
        names end in a content digest)."""

    @classmethod
    def list_stores(cls, base: str) -> list[tuple[str, StoreMeta, int]]:
        """Every declrag store directly under ``base`` (a folder, or a server): ``(uri, meta, chunk count)``,
        sorted by name. Anything there that is not a readable declrag store is skipped, not an error. Read
        only."""

    # -- the store itself ------------------------------------------------------------------------------
    def read_meta(self) -> StoreMeta | None:
        """What the store was built with: the `StoreMeta` given to `create`, equal to it from any handle,
        in any process, after any restart. None when nothing is at this location yet (no folder, no
        collection).

        Raises `DeclragError` when the location holds something that is not a declrag store, or the server
        fails. Read only; cheap (`open_store` calls it on every open)."""

    def create(self, meta: StoreMeta) -> None:
        """Make an empty store described by ``meta`` at this handle's location, keeping ``meta`` inside it
        (`read_meta` returns it from then on). Afterwards `count` is 0, `documents` is empty and every search
        returns [].

        Not idempotent: raises `DeclragError` when the location already holds anything, a declrag store
        included (`open_store` calls it only after `read_meta` returned None; two processes racing to create
        one store are kept apart by the caller, e.g. `corpus_store`'s lock)."""

    def drop(self) -> None:
        """Remove the store: its chunks, documents and metadata. Afterwards `read_meta` returns None and
        `create` may be called on the same handle. Idempotent: dropping a store that is not there does
        nothing. Not undoable."""

    # -- writes ----------------------------------------------------------------------------------------
    def upsert(self, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
               file_stats: Mapping[str, tuple[int, int]] | None = None) -> None:
        """Insert or replace ``documents`` with exactly these chunks: afterwards each of them has the chunks
        of ``chunks`` that name it (``chunk.doc_id``) and no other; documents not named are untouched.

        ``vectors`` holds one row per chunk, in order (``len(vectors) == len(chunks)``; float32 is stored).
        The first upsert into a store fixes the dimension: it must carry at least one chunk, and a later one
        with another dimension raises `DeclragError`. A document may have no chunks (it is recorded, with 0
        chunks). ``file_stats`` maps a document's ``source`` to ``(mtime_ns, size)`` for change detection
        (recorded as ``(0, -1)`` when absent). Each document's `DocRecord` gets its ``hash`` and chunk count.

        Call it on a created store (a backend may refuse one that was never created with `DeclragError`, as
        Weaviate does, so that a server's auto-schema never invents the collection). Raises `ValueError` when
        ids repeat within the call, a chunk names a document not in ``documents`` or the vector count
        differs; `DeclragError` when the server refuses the write. An empty ``documents`` is a no-op.

        Idempotent: the same upsert twice leaves the same store. Atomic with the ``atomic_upsert``
        capability (one commit: readers see all of it or none); otherwise searches running meanwhile may see
        a document half-replaced, and a document's record is written last, so after a crash the indexer
        sees that document as changed and writes it again. Visible to every search on return, except where
        `settle` says otherwise."""

    def relabel(self, readers: Mapping[str, Sequence[str]]) -> int:
        """Set the readers of these documents (document id -> groups, as `declrag.types.check_readers` gives them;
        () unlabelled) on their records and every chunk, embedding nothing again; unknown ids are ignored. Returns
        the number of chunks relabelled. Chunks first, records last (as `delete`): searches obey the new readers
        first, and after a crash the indexer, which compares records, relabels again. Idempotent. Raises
        `DeclragError` where the store cannot hold readers (a Weaviate store made before them)."""

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Remove these documents: their chunks, then their records (a crash in between leaves records
        that the next indexing run repairs). Returns the number of chunks removed. Unknown ids are ignored,
        so deleting twice is harmless (the second call returns 0); an empty ``doc_ids`` returns 0."""

    def optimize(self) -> None:
        """Tidy storage after a large write (compaction, old versions dropped). Changes nothing any read
        returns; idempotent; may take a while on a large store. A no-op where the backend does it itself."""

    def settle(self) -> None:
        """Return once every write made through this handle is visible to every kind of search (Weaviate's
        keyword index lags writes by up to a minute); at once where writes are visible on commit, or when
        this handle has written nothing since the last call. Callers settle before they measure."""

    def verify(self) -> StoreCheck:
        """Check that the store holds exactly the chunks its document records count, on every copy where the
        backend keeps several (a replicated server checks each node and writes again what a node lost), before
        a caller measures on it. A copy that does not answer is reported, not failed; what cannot be repaired
        is in ``problems``. Reads every document record: run it after building, not per query."""
        expected = sum(r.chunks for r in self.documents().values())
        have = self.count()
        out = StoreCheck(expected=expected, copies={self.uri: have})
        if have != expected:
            out.problems.append(f"{self.uri} holds {have} chunks; its document records count {expected}")
        return out

    # -- reads -----------------------------------------------------------------------------------------
    def count(self, where: Where = None) -> int:
        """The number of chunks that pass ``where`` (all of them without one); 0 for an empty store."""

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked; unknown ids are left out (no error), an id asked twice comes
        twice."""

    def documents(self) -> dict[str, DocRecord]:
        """Every indexed document's record, by document id ({} for an empty store). Reads them all: for
        incremental indexing, not for every query."""

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Full texts of these documents (each ``Document.text`` as upserted), by id; unknown ids are left
        out. Called on every query that expands context, so it must be cheap per call (the embedded store
        keeps the texts in memory between writes)."""

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]:
        """BM25 as Weaviate scores it (k1 1.2, b 0.75, word tokens split on non-alphanumerics and lower-cased,
        English stopwords dropped from the query only, statistics over the whole store): at most ``limit``
        chunks that pass ``where`` with a positive score, best first. A query of stopwords alone, or an
        empty store, gives []. Scores may differ from the reference by one constant factor."""

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        """The ``limit`` chunks nearest to ``vector`` among those that pass ``where``, best first, scored
        ``1 - distance`` under the store's metric (cosine: the cosine similarity). Exact, unless the store
        was created with an approximate index (Weaviate's ``?index=hnsw``) or ``ann`` asks for one (the
        embedded store; by default from `declrag.stores._ann.ANN_ROWS` chunks up): then which chunks are found
        is approximate, but every chunk found passes ``where`` and its score is exact. ``vector`` is one
        query embedding of the store's dimension; another dimension raises `DeclragError`."""

    def hybrid_search(self, query: str, vector: np.ndarray | None, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        """Weaviate's hybrid search (`declrag.stores.fusion`): each leg (keyword, vector; both filtered by
        ``where``) brings ``max(candidates, limit)`` results, fused with weight ``alpha`` in [0, 1] on the
        vector leg (``relative`` score or ``ranked`` reciprocal-rank fusion); the best ``limit``, best first,
        ties by object UUID. At alpha 0 only the keyword leg runs (``vector`` is not used: None will do), at 1 only the
        vector leg. With the ``leg_scores`` capability, each hit's ``scores`` holds its legs' raw scores. ``ann``: as in
        `vector_search`, for the vector leg."""

    def warm_up(self) -> None:
        """Load now what the first search would load (a search snapshot and its indexes, a connection), so that
        it is not slow. Idempotent; a store with nothing in it yet is no error."""

    def close(self) -> None:
        """Release connections and caches; the stored data is untouched. Closing twice is harmless. Do not
        use the handle afterwards: open the store again (`declrag.stores.connect` / `open_store`). A handle is
        also a context manager: ``with connect(uri) as st: ...`` closes it at the end."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
