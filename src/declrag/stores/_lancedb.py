"""The embedded default store: LanceDB on disk, searched in memory.

LanceDB holds the truth: two tables, ``chunks`` (text, span, vector, metadata) and ``documents`` (text,
content hash, file stamp), in a directory. Every write is one LanceDB commit, so a crash or Ctrl-C
leaves the previous version intact and readable; nothing half-written is ever visible.

Searches run on a snapshot of the latest committed version (`declrag.stores._snapshot`), loaded on first use
and reloaded when the table changes, with the same rankings as LanceDB's own search at a fraction of its
cost per query (measured in docs/guides/search.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from ..config import AnnConfig, Fusion, Metric
from ..errors import DeclragError
from ..runtime import tracing
from ..types import UNLABELLED, Chunk, Document, Hit, read_readers, stored_readers
from ._snapshot import ADDED_FIELDS, CHUNK_FIELDS, Snapshot
from .base import DocRecord, Filter, Store, StoreMeta, Where, check_upsert
from .fusion import fuse, leg_size

log = logging.getLogger(__name__)

META_FILE = "store.json"
DOC_SCHEMA = pa.schema([
    ("id", pa.string()), ("source", pa.string()), ("title", pa.string()), ("page", pa.int32()),
    ("hash", pa.string()), ("text", pa.string()), ("chunks", pa.int32()), ("mtime_ns", pa.int64()),
    ("size", pa.int64()), ("readers", pa.list_(pa.string())),
])
READERS_SQL = f"make_array('{UNLABELLED}')"  # the readers column a table made before them gains: every row unlabelled


def chunk_schema(dim: int) -> pa.Schema:
    i32 = pa.int32()
    return pa.schema([
        ("id", pa.string()), ("doc_id", pa.string()), ("text", pa.string()), ("start", i32), ("end", i32),
        ("position", i32), ("source", pa.string()), ("title", pa.string()), ("page", i32),
        ("parent_start", i32), ("parent_end", i32), ("section", pa.string()), ("header", pa.string()),
        ("running", pa.string()), ("language", pa.string()), ("readers", pa.list_(pa.string())),
        ("vector", pa.list_(pa.float32(), dim)),
    ])


def vector_scores(sims: np.ndarray, metric: Metric) -> np.ndarray:
    """Weaviate's vector score, ``1 - distance``, from cosine similarities of normalised vectors."""
    if metric == "cosine":  # distance 1 - cos
        return sims
    if metric == "dot":  # distance -dot
        return 1.0 + sims
    return 2.0 * sims - 1.0  # l2-squared: distance 2 - 2 cos


def in_sql(column: str, values: Sequence[str]) -> str:
    """A SQL predicate (LanceDB / DataFusion dialect): ``column`` is one of ``values`` (a non-empty list of ids)."""
    quoted = ("'" + v.replace("'", "''") + "'" for v in values)
    return f"`{column}` IN ({', '.join(quoted)})"


class LanceStore(Store):
    """The `Store` protocol on LanceDB (see the module docstring)."""

    backend = "lancedb"
    capabilities = frozenset({"leg_scores", "atomic_upsert", "local_folder"})

    def __init__(self, path: str | Path, metric: Metric | None = None):
        self.path = Path(path)
        self.uri = str(path)
        self._db_handle = None
        self._lock = threading.RLock()
        self._snap: Snapshot | None = None
        self._texts: tuple[int, dict[str, str]] | None = None
        meta = self.read_meta() if metric is None else None
        self.metric: Metric = metric or (meta.metric if meta else "cosine")

    @classmethod
    def from_uri(cls, uri: str) -> LanceStore:
        return cls(uri[len("file://"):] if uri.lower().startswith("file://") else uri)

    # -- the store itself -----------------------------------------------------------------------------
    def read_meta(self) -> StoreMeta | None:
        f = self.path / META_FILE
        if not f.exists():
            return None
        try:
            return StoreMeta.model_validate_json(f.read_text())
        except (ValidationError, ValueError) as e:
            raise DeclragError(f"{f} is not a declrag store description: {str(e).splitlines()[0]}",
                               hint="point --store at a folder made by `declrag index`, or at a new folder") from e

    def create(self, meta: StoreMeta) -> None:
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise DeclragError(f"{self.path} exists and is not a declrag store",
                               hint="choose an empty or new folder for --store")
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / (META_FILE + ".tmp")
        tmp.write_text(meta.model_dump_json(indent=2))
        os.replace(tmp, self.path / META_FILE)
        self.metric = meta.metric

    def drop(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)

    @staticmethod
    def child_uri(base: str, name: str) -> str:
        return str(Path(base) / name)

    @classmethod
    def list_stores(cls, base: str) -> list[tuple[str, StoreMeta, int]]:
        out = []
        folder = Path(base)
        for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
            if (sub / META_FILE).is_file():
                st = cls(sub)
                try:
                    if (meta := st.read_meta()) is not None:
                        out.append((str(sub), meta, st.count()))
                except DeclragError:
                    continue
        return out

    @property
    def _db(self):
        if self._db_handle is None:
            import lancedb

            self.path.mkdir(parents=True, exist_ok=True)
            self._db_handle = lancedb.connect(str(self.path / "lance"))
        return self._db_handle

    # -- tables ---------------------------------------------------------------------------------------
    def _table(self, name: str):
        if not (self.path / "lance").is_dir():
            return None
        try:
            return self._db.open_table(name)
        except (FileNotFoundError, ValueError):
            return None

    def _stamp(self) -> int:
        """Changes whenever a commit lands on the chunks table (cheap: one stat call)."""
        try:
            return os.stat(self.path / "lance" / "chunks.lance" / "_versions").st_mtime_ns
        except FileNotFoundError:
            return 0

    def _snapshot(self) -> Snapshot | None:
        stamp = self._stamp()
        with self._lock:
            if self._snap is not None and self._snap.stamp == stamp:
                return self._snap
            table = self._table("chunks")
            if table is None:
                return None
            self._snap = Snapshot(table.to_arrow(), table.version, stamp, self.path / "search")
            return self._snap

    # -- writes ---------------------------------------------------------------------------------------
    def upsert(self, documents: Sequence[Document], chunks: Sequence[Chunk], vectors: np.ndarray,
               file_stats: Mapping[str, tuple[int, int]] | None = None) -> None:
        if not documents:
            return
        vectors, doc_ids = check_upsert(documents, chunks, vectors)
        chunks_table = self._table("chunks")
        held = chunks_table.schema.field("vector").type.list_size if chunks_table is not None else 0
        dim = vectors.shape[1] if len(vectors) else held
        if chunks_table is not None and held != dim:
            raise DeclragError(f"vectors of dimension {dim} cannot go into store {self.path}, which holds "
                               f"{held}-dimensional vectors",
                               hint="index with the store's embedding model, or use a new --store folder")
        rows = {f: [getattr(c, f) for c in chunks] for f in CHUNK_FIELDS}
        rows["readers"] = [stored_readers(c.readers) for c in chunks]
        schema = chunk_schema(dim)
        flat = pa.array(vectors.reshape(-1), type=pa.float32())
        data = pa.Table.from_arrays(
            [pa.array(rows[f], type=schema.field(f).type) for f in CHUNK_FIELDS]
            + [pa.FixedSizeListArray.from_arrays(flat, dim)], schema=schema)
        mine = in_sql("doc_id", doc_ids)
        with self._lock:
            if chunks_table is not None and (gone := [f for f in ADDED_FIELDS if f not in chunks_table.schema.names]):
                chunks_table.add_columns({f: "CAST('' AS STRING)" for f in gone})  # a store made before them
            self._add_readers(chunks_table)
            if chunks_table is None:
                if dim == 0:
                    raise ValueError("the first upsert into a store must carry at least one chunk")
                self._db.create_table("chunks", data)
            elif len(chunks):  # one commit: insert and update these chunks, delete the documents' old ones
                (chunks_table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
                 .when_not_matched_by_source_delete(mine).execute(data))
            else:
                chunks_table.delete(mine)
            counts = Counter(c.doc_id for c in chunks)
            stats = file_stats or {}
            docs = pa.Table.from_pylist([
                {"id": d.id, "source": d.source, "title": d.title, "page": d.page, "hash": d.hash,
                 "text": d.text, "chunks": counts.get(d.id, 0),
                 "mtime_ns": stats.get(d.source, (0, -1))[0], "size": stats.get(d.source, (0, -1))[1],
                 "readers": stored_readers(d.readers)}
                for d in documents], schema=DOC_SCHEMA)
            docs_table = self._table("documents")
            self._add_readers(docs_table)
            if docs_table is None:
                self._db.create_table("documents", docs)
            else:
                docs_table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(docs)

    @staticmethod
    def _add_readers(table) -> None:
        """A table made before readers gains their column, every row unlabelled (one commit, no data rewritten)."""
        if table is not None and "readers" not in table.schema.names:
            table.add_columns({"readers": READERS_SQL})

    def relabel(self, readers: Mapping[str, Sequence[str]]) -> int:
        by: dict[tuple[str, ...], list[str]] = {}
        for doc, groups in readers.items():
            by.setdefault(tuple(groups), []).append(doc)
        n = 0
        with self._lock:
            chunks_table, docs_table = self._table("chunks"), self._table("documents")
            if chunks_table is None or docs_table is None:
                return 0
            self._add_readers(chunks_table)
            self._add_readers(docs_table)
            for groups, docs in by.items():  # one commit per table and set of readers
                mine, value = in_sql("doc_id", docs), {"readers": stored_readers(groups)}
                if (k := chunks_table.count_rows(mine)):
                    chunks_table.update(where=mine, values=value)
                    n += k
                docs_table.update(where=in_sql("id", docs), values=value)  # records last, as in delete
        return n

    def delete(self, doc_ids: Sequence[str]) -> int:
        if not doc_ids:
            return 0
        with self._lock:
            chunks_table, docs_table = self._table("chunks"), self._table("documents")
            n = chunks_table.count_rows(in_sql("doc_id", doc_ids)) if chunks_table is not None else 0
            if n:
                chunks_table.delete(in_sql("doc_id", doc_ids))
            if docs_table is not None:  # documents last: a crash in between is repaired by re-indexing
                docs_table.delete(in_sql("id", doc_ids))
        return n

    def optimize(self) -> None:
        """Compact files and drop old versions (after a large indexing run)."""
        with self._lock:
            for name in ("chunks", "documents"):
                if (t := self._table(name)) is not None:
                    t.optimize()

    def settle(self) -> None:  # a commit is visible to every search at once
        return None

    # -- reads ----------------------------------------------------------------------------------------
    def count(self, where: Where = None) -> int:
        snap = self._snapshot()
        if snap is None:
            return 0
        mask = snap.mask(Filter.of(where))
        return snap.n if mask is None else int(mask.sum())

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        snap = self._snapshot()
        if snap is None:
            return []
        return snap.chunks([snap.row[i] for i in ids if i in snap.row])

    def documents(self) -> dict[str, DocRecord]:
        table = self._table("documents")
        if table is None:
            return {}
        cols = ["id", "source", "title", "page", "hash", "chunks", "mtime_ns", "size"]
        cols += ["readers"] if "readers" in table.schema.names else []
        recs = table.search().select(cols).limit(None).to_arrow().to_pylist()
        return {r["id"]: DocRecord(**{**r, "readers": read_readers(r.get("readers"))}) for r in recs}

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Texts of documents, from an in-memory copy of the documents table (loaded on first use and
        again after a write), so context expansion costs no database round trip."""
        if not doc_ids:
            return {}
        stamp = self._stamp()
        with self._lock:
            if self._texts is None or self._texts[0] != stamp:
                table = self._table("documents")
                rows = table.search().select(["id", "text"]).limit(None).to_arrow() if table is not None else None
                self._texts = (stamp, dict(zip(rows.column("id").to_pylist(), rows.column("text").to_pylist()))
                               if rows is not None else {})
            texts = self._texts[1]
        return {d: texts[d] for d in doc_ids if d in texts}

    def keyword_search(self, query: str, limit: int = 10, where: Where = None) -> list[Hit]:
        snap = self._snapshot()
        if snap is None:
            return []
        return snap.hits(snap.keyword_leg(query, limit, snap.mask(Filter.of(where))), "keyword")

    def _vector_leg(self, snap: Snapshot, vector: np.ndarray | None, k: int, mask: np.ndarray | None,
                    ann: AnnConfig | None = None):
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != snap.vectors.shape[1]:
            raise DeclragError(f"query vector has dimension {q.shape[0]}, the store {self.path} holds "
                               f"{snap.vectors.shape[1]}", hint="embed queries with the store's embedding model")
        rows, sims = snap.nearest(q, k, mask, AnnConfig() if ann is None else ann)
        return rows, vector_scores(sims, self.metric)

    def vector_search(self, vector: np.ndarray, limit: int = 10, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        snap = self._snapshot()
        if snap is None:
            return []
        rows, scores = self._vector_leg(snap, vector, limit, snap.mask(Filter.of(where)), ann)
        return snap.hits(snap.ranked(rows, scores)[:limit], "vector")

    def hybrid_search(self, query: str, vector: np.ndarray | None, limit: int = 10, alpha: float = 0.5,
                      fusion: Fusion = "relative", candidates: int = 100, where: Where = None,
                      ann: AnnConfig | None = None) -> list[Hit]:
        snap = self._snapshot()
        if snap is None:
            return []
        mask, k = snap.mask(Filter.of(where)), leg_size(limit, candidates)
        kw, vec = [], []
        if alpha < 1.0:
            with tracing.span("keyword leg", {"declrag.leg.size": k}):
                kw = snap.keyword_leg(query, k, mask)
        if alpha > 0.0:
            with tracing.span("vector leg", {"declrag.leg.size": k}):
                vec = snap.ranked(*self._vector_leg(snap, vector, k, mask, ann))[:k]
        ids = snap.ids  # fuse by chunk id, so ties break by its object UUID as on every backend
        legs = {"keyword": {ids[r]: s for r, s in kw}, "vector": {ids[r]: s for r, s in vec}}
        fused = fuse(list(legs["keyword"].items()), list(legs["vector"].items()), alpha, fusion, limit)
        chunks = snap.chunks([snap.row[cid] for cid, _ in fused])
        return [Hit.of(c, s, **{leg: legs[leg][cid] for leg in legs if cid in legs[leg]})
                for c, (cid, s) in zip(chunks, fused)]

    def warm_up(self) -> None:
        """The latest version's snapshot, its BM25 index and, where searches go through it, its vector index:
        loaded (or built and saved, the first time) now."""
        snap = self._snapshot()
        if snap is not None:
            snap.keyword  # noqa: B018 (a cached property: loading it is the point)
            if snap.approximate(AnnConfig(), snap.n):
                snap.ivf  # noqa: B018

    def close(self) -> None:
        self._snap = self._texts = None

    def __deepcopy__(self, memo):  # a handle on shared data: copies of a program share their store
        return self
