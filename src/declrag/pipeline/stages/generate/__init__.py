"""The generate stage (`Generator`): the answer written from numbered passages with [n] citations, by the LM,
extracted from the passages (extraction, the names a question asks for, answer kinds), or the LM's checked against
them; an echo of the prompt caught; the answer streamed as it is written (`astream`)."""

from ._extract import Finding, check, unsupported
from ._postprocess import grounding, is_abstention
from ._stage import Generator
from ._streaming import Done, astream

__all__ = ["Done", "Finding", "Generator", "astream", "check", "grounding", "is_abstention", "unsupported"]
