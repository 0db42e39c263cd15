"""Cosines of any embedding model on one scale: the default model's (all-MiniLM-L6-v2), on which every fixed cosine
threshold of declrag was calibrated (the extractive answer's ``min_score``, the verified check's `SEMANTIC`,
``retrieve.abstain_below``, the semantic answer cache's ``--cache-threshold``).

Models differ in scale, not only in quality: all-MiniLM-L6-v2 gives a question and an unrelated sentence a cosine of
about .03 and the sentence that answers it about .78; multilingual-e5-small gives .73 and .90, so under the default's
thresholds nothing is ever far enough from a question to be left out (on SQuAD v2.0's unanswerable questions the
extractive answer abstained on 4%, against about half with the default model). `Calibration` maps a model's cosine
linearly onto the default's scale by two anchors, measured on the same twelve English question / answering sentence
pairs (`ANCHORS`, varied topics): the mean cosine of a question to its own sentence (``related``) and to the other
eleven (``unrelated``). The default model's own cosines are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REFERENCE = "sentence-transformers/all-MiniLM-L6-v2"
# (related, unrelated) of `REFERENCE` on `ANCHORS`, its ONNX backend; tests/unit/test_calibration.py measures them
REFERENCE_ANCHORS = (0.78, 0.0305)
ANCHORS: tuple[tuple[str, str], ...] = (
    ("When did the Normans conquer England?",
     "The Norman conquest of England began in 1066 with the Battle of Hastings."),
    ("What is the boiling point of water at sea level?", "At sea level, water boils at 100 degrees Celsius."),
    ("Who wrote the novel Pride and Prejudice?", "Pride and Prejudice is an 1813 novel written by Jane Austen."),
    ("How many legs does a spider have?", "Spiders are arachnids and have eight legs."),
    ("What does the enzyme amylase break down?", "Amylase is an enzyme that breaks starch down into sugars."),
    ("Which command restarts the web server?", "To restart the web server, run systemctl restart nginx."),
    ("What is the capital city of Australia?", "Canberra is the capital city of Australia."),
    ("Why did the bridge close last winter?", "The bridge was closed last winter because ice damaged its supports."),
    ("How long is the warranty on the laptop?", "The laptop comes with a two-year limited warranty."),
    ("What causes the seasons on Earth?", "Seasons are caused by the tilt of Earth's axis relative to its orbit."),
    ("Who may request a refund for a cancelled flight?",
     "Passengers whose flight is cancelled may request a full refund."),
    ("What language is spoken in Brazil?", "The official language of Brazil is Portuguese."),
)


def measure(embed_queries: Callable[[list[str]], np.ndarray],
            embed_documents: Callable[[list[str]], np.ndarray]) -> tuple[float, float]:
    """A model's (related, unrelated) mean cosines on `ANCHORS` (its query and document embeddings, L2-normalised)."""
    sims = embed_queries([q for q, _ in ANCHORS]) @ embed_documents([s for _, s in ANCHORS]).T
    n = len(ANCHORS)
    return float(np.trace(sims)) / n, float(sims.sum() - np.trace(sims)) / (n * n - n)


@dataclass(frozen=True)
class Calibration:
    """``related`` and ``unrelated``: a model's anchors (`measure`). Calling it maps that model's cosines (a number
    or an array) onto `REFERENCE`'s scale, clipped to [-1, 1]."""

    related: float
    unrelated: float

    def __call__(self, cosine):
        ref_related, ref_unrelated = REFERENCE_ANCHORS
        slope = (ref_related - ref_unrelated) / max(self.related - self.unrelated, 1e-3)
        return np.clip(ref_unrelated + (np.asarray(cosine, dtype=np.float32) - self.unrelated) * slope, -1.0, 1.0)


def identity(cosine):
    """The reference model's cosines (and a model that needs no mapping) as they are."""
    return cosine
