"""Approximate nearest neighbours for the embedded store's vector leg: a FAISS inverted-file index with 8-bit
scalar-quantized vectors (IVF-SQ8), whose ``refine x k`` candidates are rescored exactly in float32, so every
returned score is exact and only which rows are found is approximate. A metadata filter becomes a bitmap that
FAISS applies inside the search (``IDSelectorBitmap``). Why this index rather than a graph index, measured on the
1M-chunk corpus of `declrag bench scale`: docs/guides/search.md.

The index belongs to one committed version of the chunks table and is saved beside its BM25 index
(``search/ann-v<version>-<nlist>.faiss``): rebuilt when the table changes, loaded otherwise.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

import numpy as np

from ..errors import DeclragError

log = logging.getLogger(__name__)

ANN_ROWS = 200_000  # `auto`: stores of at least this many chunks search the vector leg approximately
TRAIN_PER_LIST = 32  # k-means sample: this many vectors per inverted list (FAISS asks for at least 39 to be quiet)
KMEANS_ITERATIONS = 10


def nlist_for(n: int) -> int:
    """Inverted lists for ``n`` vectors: about 4 sqrt(n) (FAISS's guideline), and never so many that a list
    would hold fewer than ~40 vectors (small tables in tests)."""
    return max(1, min(int(round(4 * math.sqrt(n))), n // 40))


def _faiss():
    try:
        import faiss
    except ImportError as e:  # a dependency of declrag; only a broken install lacks it
        raise DeclragError("approximate vector search needs faiss-cpu, which is not installed",
                           hint="pip install faiss-cpu, or set `retrieve.ann.mode: exact`") from e
    return faiss


class IvfIndex:
    """IVF-SQ8 over the rows of one snapshot (row i of the snapshot is id i in FAISS)."""

    def __init__(self, index, n: int):
        self.index, self.n = index, n
        # one query's inverted lists are shared among FAISS's threads (one per core): at 1M chunks and nprobe 384,
        # 2.5 -> 1.5 ms on 2 cores, the same candidates (FAISS's default splits the queries of a batch instead)
        index.parallel_mode = 1

    @classmethod
    def build(cls, vectors: np.ndarray, seed: int = 13) -> IvfIndex:
        faiss = _faiss()
        n, dim = vectors.shape
        nlist = nlist_for(n)
        t = time.perf_counter()
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)
        index.cp.niter, index.cp.seed = KMEANS_ITERATIONS, seed
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(n, min(n, nlist * TRAIN_PER_LIST), replace=False))]
        index.train(np.ascontiguousarray(sample))
        for i in range(0, n, 100_000):
            index.add(vectors[i : i + 100_000])
        log.info("built an IVF-SQ8 index of %d vectors in %d lists in %.1f s", n, nlist, time.perf_counter() - t)
        return cls(index, n)

    @classmethod
    def load(cls, path: Path) -> IvfIndex:
        index = _faiss().read_index(str(path))
        return cls(index, index.ntotal)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        _faiss().write_index(self.index, str(tmp))
        os.replace(tmp, path)

    def candidates(self, q: np.ndarray, k: int, nprobe: int, mask: np.ndarray | None = None) -> np.ndarray:
        """Rows of up to ``k`` approximate nearest neighbours of ``q`` (among the rows ``mask`` allows)."""
        faiss = _faiss()
        params = faiss.SearchParametersIVF(nprobe=min(nprobe, int(self.index.nlist)))
        if mask is not None:
            bits = np.packbits(mask.astype(np.uint8), bitorder="little")
            params.sel = faiss.IDSelectorBitmap(self.n, faiss.swig_ptr(bits))  # `bits` lives until we return
        _, ids = self.index.search(q.reshape(1, -1), min(k, self.n), params=params)
        rows = ids[0]
        return rows[rows >= 0]
