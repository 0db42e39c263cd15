"""Golden sets from the user's own documents (`declrag synth`): `build` makes one (questions whose gold is the
place they came from, filtered, split and written); `generate`, `queries` and `inpars` write the questions, `filters`
keeps the good ones and `splits` cuts the set (docs/guides/synth.md)."""

from .build import from_sources, synthesize
from .filters import normalize
from .generate import Candidate
from .queries import GENERATORS, cloze_query
from .report import SynthReport
from .splits import MIN_QUESTIONS, SPLITS, split_by_document

__all__ = ["GENERATORS", "MIN_QUESTIONS", "SPLITS", "Candidate", "SynthReport", "cloze_query", "from_sources",
           "normalize", "split_by_document", "synthesize"]
