"""The select stage (`Selector`): the passages handed over from the candidate pool; and exploration, the rankings of
a served program and its neighbours multileaved (`Explorer`)."""

from ._explore import Explorer, settings
from ._stage import Selector

__all__ = ["Explorer", "Selector", "settings"]
