"""Approximate nearest neighbours for the embedded store's vector leg: a FAISS inverted-file index with 8-bit
scalar-quantized vectors (IVF-SQ8), whose candidates are rescored exactly in float32.

Why this index (measured on the 1M-chunk corpus of `declrag bench scale`, see the README):
- on that corpus it built in 46 s on 2 cores (k-means on a sample, then one assignment pass) and found 0.956 of
  the exact top 10 at nprobe 384 (0.938 at 256); FAISS's HNSW-SQ8 (M 16, efConstruction 64) took 152 s and found 0.83
  at efSearch 256;
- it filters exactly: a metadata filter becomes a bitmap that FAISS applies *inside* the search
  (``IDSelectorBitmap``), so a filtered query searches only the rows that pass, with no over-fetch;
- its codes take a quarter of the float32 vectors' memory (384 MB at 1M x 384), and the exact rescoring of
  ``refine x k`` candidates against the snapshot's float32 matrix makes every returned score exact; only which
  rows are found is approximate. ``nprobe`` (lists searched) and ``refine`` trade recall for latency, per query,
  from the retrieve config (`declrag.config.AnnConfig`), so compile can search them.

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
