"""The keyword leg: BM25 with Weaviate's settings, on the bm25s library.

Weaviate's BM25: k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)) (Lucene's), the English stopword
preset removed from queries only (and the function words of the query's language: `query_terms`); bm25s's "lucene"
method computes the same scores. The tokens are declrag's own in every script (`declrag.text.keywords`: words with
their combining marks, bigrams where a script has no spaces), which a Weaviate store of format 5 or later is sent as
they are.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..text.keywords import tokenize
from ..text.stopwords import query_terms

K1, B = 1.2, 0.75



# what the tokens are: a keyword index saved by another version of `tokenize` is built again (`snapshot`)
TOKENIZATION = 2  # 1: Weaviate's ``word`` tokenisation; 2: `declrag.text.keywords`


class KeywordIndex:
    """BM25 over a fixed list of texts; rows are positions in that list."""

    def __init__(self, texts: Sequence[str] = (), *, _bm25=None, _n: int = 0):
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG

        if _bm25 is not None:  # from load()
            self.n, self._bm25 = _n, _bm25
        else:
            self.n = len(texts)
            self._bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
            if self.n:
                # Token ids, not token strings: a list of strings per text held ~18 GB while 1M chunks were
                # indexed, ids a fraction of it (the same index: bm25s builds it from ids and this vocabulary).
                # bm25s needs at least one token per text; an all-punctuation text is simply never matched.
                vocab: dict[str, int] = {}
                ids = [[vocab.setdefault(w, len(vocab)) for w in (tokenize(t) or [""])] for t in texts]
                self._bm25.index((ids, vocab), show_progress=False)
        self._vocab = self._bm25.vocab_dict if self.n else {}

    def save(self, folder: Path) -> None:
        """Write the index to ``folder`` atomically (built in a sibling folder, then renamed)."""
        tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        self._bm25.save(str(tmp))
        (tmp / "rows.json").write_text(json.dumps({"n": self.n}))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process saved it first
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> KeywordIndex:
        import bm25s

        n = json.loads((folder / "rows.json").read_text())["n"]
        return cls(_bm25=bm25s.BM25.load(str(folder)), _n=n)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every row (0 where no query term occurs)."""
        ids = [self._vocab[t] for t in query_terms(query) if t in self._vocab]
        if not ids or not self.n:
            return np.zeros(self.n, dtype=np.float32)
        return self._bm25.get_scores(ids)


SAMPLED_TOP_K_ROWS = 50_000  # from this many scores, `top_k` narrows the candidates with a sampled threshold
_STRIDE = 64


def top_k(scores: np.ndarray, k: int, positive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores, best first (ties: lower index first); only positive
    scores when ``positive``.

    Exact at every size. In a long array (a BM25 leg over 1M chunks) a partial sort of every candidate costs
    milliseconds, so a threshold comes first: the value that about ``2k`` of the scores exceed, read off every
    64th score. Every score at or above it is a candidate; when there are at least ``k`` of them, the top ``k`` are
    among them (and only they are sorted); otherwise every score is (rare: a sample that overshot)."""
    n = len(scores)
    if n >= SAMPLED_TOP_K_ROWS and 0 < k <= n // (4 * _STRIDE):
        sample = scores[::_STRIDE]
        r = min(len(sample), 2 * k // _STRIDE + 2)  # about r * 64 ~ 2k scores lie above the sample's r-th largest
        threshold = np.partition(sample, len(sample) - r)[len(sample) - r]
        if positive and threshold <= 0:
            threshold = np.finfo(scores.dtype).tiny if scores.dtype.kind == "f" else 1
        idx = np.flatnonzero(scores >= threshold)
        if len(idx) >= k:
            return _best(idx, scores[idx], k)
    if positive:
        idx = np.flatnonzero(scores > 0)
        return _best(idx, scores[idx], k)
    return _best(None, scores, k)


def _best(idx: np.ndarray | None, vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest of ``vals`` (positions ``idx``, or their own), best first, ties by lower position."""
    if k < len(vals):
        part = np.argpartition(-vals, k - 1)[:k]
    else:
        part = np.arange(len(vals))
    rows = part if idx is None else idx[part]
    order = np.lexsort((rows, -vals[part]))  # by score, then position (as the whole array would be ordered)
    return rows[order], vals[part][order]
