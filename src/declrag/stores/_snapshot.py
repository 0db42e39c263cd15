"""The embedded store's search state: one committed version of the chunks table in memory, ready to search.

Vectors as one float32 matrix (exact below `EXACT_ROWS` rows; above, a float16 pre-selection rescored in float32,
or the approximate IVF index of `declrag.stores._ann` from its size up), a BM25 index with Weaviate's settings
(`declrag.stores.bm25`), both saved beside the data per version, and metadata filters as row masks.
"""

from __future__ import annotations

import logging
import math
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import AnnConfig
from ..types import UNLABELLED, Chunk, Hit, read_readers, searched_text
from ._ann import ANN_ROWS, IvfIndex, nlist_for
from .base import LIST_FIELDS, Cond, Filter, Node, asks_lists
from .bm25 import TOKENIZATION, KeywordIndex, top_k
from .fusion import object_uuid

log = logging.getLogger(__name__)

EXACT_ROWS = 20_000  # above this many rows, vector search pre-selects in float16 (see _Snapshot.nearest)
NO_ROWS = np.empty(0, dtype=np.int64)
MASKS_KEPT = 16  # readers masks a snapshot keeps (LRU; one byte a row each: 16 MB at 1M chunks)
RESCORE_MARGIN = 128
CHUNK_FIELDS = ["id", "doc_id", "text", "start", "end", "position", "source", "title", "page",
                "parent_start", "parent_end", "section", "header", "running", "language", "readers"]
ADDED_FIELDS = ("section", "header", "running", "language")  # text columns a store made before them lacks (read as '')


def filter_arrow(where: Filter | Node):
    """``where`` (a filter, or a node of one without list fields) as a pyarrow compute expression over chunk columns,
    with `Filter.matches`'s meaning."""
    import pyarrow.compute as pc

    def one(node: Node):
        if not isinstance(node, Cond):
            subs = [one(p) for p in node.parts]
            e = subs[0]
            for s in subs[1:]:
                e = (e & s) if node.op == "and" else (e | s)
            return e
        f, op, v = pc.field(node.field), node.op, node.value
        if op in ("$in", "$nin"):
            if not v:
                return pc.scalar(op == "$nin")
            found = pc.is_in(f, value_set=pa.array(v, type=pa.int32() if isinstance(v[0], int) else pa.string()))
            return (f.is_null() | ~found) if op == "$nin" else found
        if op == "$ne":
            return f.is_null() | (f != v)
        # null compared is null, which a filter drops: a chunk without a page matches no other condition
        return {"$eq": f == v, "$gt": f > v, "$gte": f >= v, "$lt": f < v, "$lte": f <= v}[op]

    return one(where.tree if isinstance(where, Filter) else where)


def top_k_with_ties(scores: np.ndarray, k: int, positive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`top_k`, plus every row tied with the k-th best: rank them with `_Snapshot.ranked` and keep ``k``, so
    a tie at the cut is decided by object UUID (as in Weaviate), not by row order."""
    rows, vals = top_k(scores, k, positive)
    if len(rows) < k or k == 0:
        return rows, vals
    extra = np.setdiff1d(np.flatnonzero(scores == vals[-1]), rows)
    return (rows, vals) if not len(extra) else (np.concatenate([rows, extra]), np.concatenate([vals, scores[extra]]))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class Snapshot:
    """One committed version of the chunks table, ready to search."""

    def __init__(self, table: pa.Table, version: int, stamp: int, folder: Path):
        self.version, self.stamp, self.n, self.folder = version, stamp, table.num_rows, folder
        vec = table.column("vector").combine_chunks()
        dim = vec.type.list_size
        flat = vec.flatten().to_numpy(zero_copy_only=False)
        self.vectors = np.ascontiguousarray(flat, dtype=np.float32).reshape(self.n, dim)
        meta = table.drop_columns(["vector"]).combine_chunks()
        for name in ADDED_FIELDS:
            if name not in meta.column_names:
                meta = meta.append_column(name, pa.array([""] * self.n, type=pa.string()))
        if "readers" not in meta.column_names:  # a store made before readers: every chunk unlabelled
            meta = meta.append_column("readers", pa.array([[UNLABELLED]] * self.n, type=pa.list_(pa.string())))
        self.table = meta.append_column("_row", pa.array(np.arange(self.n, dtype=np.int64)))
        self.ids: list[str] = meta.column("id").to_pylist()
        self.row = {cid: i for i, cid in enumerate(self.ids)}
        self._masks: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()  # readers masks (`_list_mask`)
        self._masks_lock = threading.Lock()

    @cached_property
    def keyword(self) -> KeywordIndex:
        """The BM25 index of this version (building takes ~10 s per 100k chunks; loading a fraction of a second)."""
        return self._saved(self.folder / f"bm25-t{TOKENIZATION}-v{self.version}", KeywordIndex.load,
                           lambda: KeywordIndex(self.searched()), "keyword")

    def searched(self) -> list[str]:
        """Each row's `Chunk.searched` text: its header (if any), then its text without its running lines."""
        return [searched_text(h, t, r or "") for h, t, r in zip(self.table.column("header").to_pylist(),
                                                               self.table.column("text").to_pylist(),
                                                               self.table.column("running").to_pylist())]

    @cached_property
    def ivf(self) -> IvfIndex:
        """The approximate vector index of this version (`declrag.stores._ann`)."""
        return self._saved(self.folder / f"ann-v{self.version}-ivf{nlist_for(self.n)}-sq8.faiss", IvfIndex.load,
                           lambda: IvfIndex.build(self.vectors), "vector")

    def _saved(self, saved: Path, load: Callable[[Path], Any], build: Callable[[], Any], what: str) -> Any:
        """The index saved at ``saved`` when it is there and fits this version, else ``build()``, saved there (and
        the files of older versions removed). A store that cannot be written still searches."""
        if saved.exists():
            try:
                index = load(saved)
                if index.n == self.n:
                    return index
            except Exception as e:  # unreadable: rebuild it
                log.warning("rebuilding the %s index %s: %s", what, saved, e)
            _remove(saved)
        index = build()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            index.save(saved)
            for old in self.folder.glob(saved.name.split("-", 1)[0] + "-*"):  # older versions and tokenizations
                if old != saved:
                    _remove(old)
        except OSError as e:
            log.warning("could not save the %s index to %s: %s", what, saved, e)
        return index

    def approximate(self, ann: AnnConfig, allowed: int) -> bool:
        """Whether a search under ``ann`` over ``allowed`` rows (those a filter lets through) goes through the
        approximate index: ``ivf`` always; ``auto`` in a table of `ANN_ROWS` rows or more, unless the filter
        leaves so few rows (`EXACT_ROWS`) that scoring them all is cheaper."""
        if ann.mode == "auto":
            return self.n >= ANN_ROWS and allowed > EXACT_ROWS
        return ann.mode == "ivf" and allowed > 0

    @cached_property
    def half(self):
        """The vectors in float16 (torch, whose float16 matrix-vector product is ~2.5x faster than
        NumPy's float32 one here), used to pre-select candidates in large stores."""
        import torch

        return torch.tensor(self.vectors, dtype=torch.float16)

    def nearest(self, q: np.ndarray, k: int, mask: np.ndarray | None,
                ann: AnnConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the ``k`` most similar vectors and their cosine similarities (exact float32), best first.

        With the approximate index (see `approximate`), ``ann.refine x k`` candidates come from it, among the rows
        ``mask`` allows, rescored here; should it find fewer than ``k``, the exact path answers. Above `EXACT_ROWS`
        rows a float16 pass picks ``k + RESCORE_MARGIN`` candidates to rescore: its error on a cosine of unit
        vectors (~1e-3) is far below the score gap that margin leaves, so the result is the exact top k in
        practice, at half the memory traffic."""
        n_ok = self.n if mask is None else int(mask.sum())
        if ann is not None and self.approximate(ann, n_ok):
            # under a filter, more lists: by the square root of the share it leaves out (all of it held recall at
            # 1.000 / .964 for 10% / 50% of 1M chunks but took 3.2x / 1.8x the time; `declrag bench scale --readers`)
            nprobe = ann.nprobe if n_ok >= self.n else math.ceil(ann.nprobe * math.sqrt(self.n / max(n_ok, 1)))
            cand = self.ivf.candidates(q, k * ann.refine, nprobe, mask)
            if len(cand) >= min(k, n_ok):
                r, sims = top_k_with_ties(self.vectors[cand] @ q, k)
                return cand[r], sims
            log.info("the approximate index found %d of %d rows under the filter: searching exactly", len(cand), k)
        if mask is not None and self.n <= EXACT_ROWS:  # a small table: every row scored, those the mask hides out
            scores = self.vectors @ q
            scores[~mask] = -np.inf
            return top_k_with_ties(scores, min(k, n_ok))
        if mask is not None:
            allowed = np.flatnonzero(mask)
            if len(allowed) <= EXACT_ROWS:
                r, sims = top_k_with_ties(self.vectors[allowed] @ q, k)
                return allowed[r], sims
        elif self.n <= EXACT_ROWS:
            return top_k_with_ties(self.vectors @ q, k)
        import torch

        scores = (self.half @ torch.from_numpy(q).to(torch.float16)).float()
        if mask is not None:
            scores[torch.from_numpy(~mask)] = float("-inf")
        cand = torch.topk(scores, min(k + RESCORE_MARGIN, n_ok)).indices.numpy()
        r, sims = top_k_with_ties(self.vectors[cand] @ q, k)
        return cand[r], sims

    def keyword_leg(self, query: str, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        """The ``k`` best BM25 rows (positive scores only), ranked."""
        s = self.keyword.scores(query)
        if mask is not None:  # a product, not np.where: no branch per row (np.where's cost grew with a mixed mask,
            s = s * mask      # 3.9 ms at 1M rows half readable against 0.5 ms)
        return self.ranked(*top_k_with_ties(s, k, positive=True))[:k]

    def mask(self, where: Filter | None) -> np.ndarray | None:
        """The rows ``where`` passes (None: no filter), with `Filter.matches`'s meaning: one Arrow filter, or, where it
        asks about a list field, its conditions' masks combined."""
        return None if where is None else self._mask(where.tree)

    def _mask(self, node: Node) -> np.ndarray:
        if isinstance(node, Cond) and node.field in LIST_FIELDS:
            return self._list_mask(node)
        if not isinstance(node, Cond) and asks_lists(node):  # which an Arrow expression cannot
            parts = [self._mask(p) for p in node.parts]
            return (np.logical_and if node.op == "and" else np.logical_or).reduce(parts)
        rows = self.table.filter(filter_arrow(node)).column("_row").to_numpy()
        mask = np.zeros(self.n, dtype=bool)
        mask[rows] = True
        return mask

    @cached_property
    def _readers(self) -> dict[str, np.ndarray]:
        """The rows each reader (a group, `EVERYONE`, `UNLABELLED`) may read, as sorted row numbers: an inverted
        index over the readers column, built once per version (its size: one row number per (row, reader) pair)."""
        import pyarrow.compute as pc

        col = self.table.column("readers").combine_chunks()
        codes = pc.dictionary_encode(pc.list_flatten(col))
        parents = pc.list_parent_indices(col).to_numpy(zero_copy_only=False)
        idx = codes.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(idx, kind="stable")
        bounds = np.searchsorted(idx[order], np.arange(len(codes.dictionary) + 1))
        return {name: parents[order[bounds[i]:bounds[i + 1]]] for i, name in enumerate(codes.dictionary.to_pylist())}

    def _list_mask(self, cond: Cond) -> np.ndarray:
        """The rows whose list holds ``cond``'s value (``$eq``) or any of its values (``$in``), or not (``$ne``,
        ``$nin``); the last `MASKS_KEPT` masks asked for are kept (a server's callers ask for the same few scopes)."""
        asked = tuple(sorted(set(cond.value if cond.op in ("$in", "$nin") else [cond.value])))
        with self._masks_lock:
            mask = self._masks.get(asked)
            if mask is not None:
                self._masks.move_to_end(asked)
        if mask is None:
            mask = np.zeros(self.n, dtype=bool)
            for name in asked:
                mask[self._readers.get(name, NO_ROWS)] = True
            mask.setflags(write=False)  # shared by every search that asks for this scope
            with self._masks_lock:
                self._masks[asked] = mask
                while len(self._masks) > MASKS_KEPT:
                    self._masks.popitem(last=False)
        return mask if cond.op in ("$eq", "$in") else ~mask

    def ranked(self, rows: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
        """(row, score) best first, equal scores in object-UUID order (as on every backend, see fusion)."""
        return sorted(zip(map(int, rows), map(float, scores)), key=lambda rs: (-rs[1], object_uuid(self.ids[rs[0]])))

    def hits(self, ranked: list[tuple[int, float]], leg: str) -> list[Hit]:
        return [Hit.of(c, s, **{leg: s}) for c, (_, s) in zip(self.chunks([r for r, _ in ranked]), ranked)]

    def chunks(self, rows: Sequence[int]) -> list[Chunk]:
        recs = self.table.take(pa.array(rows, type=pa.int64())).select(CHUNK_FIELDS).to_pylist()
        return [Chunk(**{**r, **{f: r[f] or "" for f in ADDED_FIELDS}, "readers": read_readers(r["readers"])})
                for r in recs]

