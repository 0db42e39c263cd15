"""Golden sets from the user's own documents (`declrag synth`): `build` makes one (questions whose gold is the
place they came from, filtered, split and written); `generate`, `queries` and `inpars` write the questions, `filters`
keeps the good ones and `splits` cuts the set (docs/guides/synth.md)."""

from ._build import from_sources, synthesize
from ._filters import normalize
from ._generate import Candidate
from ._queries import GENERATORS, cloze_query
from ._report import SynthReport
from ._splits import MIN_QUESTIONS, SPLITS, split_by_document

__all__ = ["GENERATORS", "MIN_QUESTIONS", "SPLITS", "Candidate", "SynthReport", "cloze_query", "from_sources",
           "normalize", "split_by_document", "synthesize"]
