"""The semantic answer cache of `declrag serve` (``--cache-threshold``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np


class SemanticCache:
    """Answers by question embedding: a question whose cosine similarity with an answered one under the same
    ``key`` is >= ``threshold`` gets that answer. The server's key is the request's filter and whole history, so
    a question is only answered from the cache within the same conversation. Bounded LRU; safe across threads.
    ``get``'s ``calibrate`` maps the embedding model's cosines onto the default model's scale, on which
    ``threshold`` is read (`declrag.embed._calibration`)."""

    def __init__(self, threshold: float, size: int):
        self.threshold, self.size = threshold, size
        self.entries: OrderedDict[int, tuple[str, np.ndarray, dict]] = OrderedDict()
        self.serial = 0
        self.lock = threading.Lock()

    def get(self, key: str, vec: np.ndarray, calibrate=None) -> tuple[dict, float] | None:
        with self.lock:
            ids = [i for i, e in self.entries.items() if e[0] == key]
            if not ids:
                return None
            sims = np.stack([self.entries[i][1] for i in ids]) @ (vec / (np.linalg.norm(vec) or 1.0))
            sims = calibrate(sims) if calibrate is not None else sims
            if sims[best := int(np.argmax(sims))] < self.threshold:
                return None
            self.entries.move_to_end(ids[best])
            return self.entries[ids[best]][2], float(sims[best])

    def put(self, key: str, vec: np.ndarray, payload: dict) -> None:
        with self.lock:
            self.serial += 1
            self.entries[self.serial] = (key, vec / (np.linalg.norm(vec) or 1.0), payload)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
