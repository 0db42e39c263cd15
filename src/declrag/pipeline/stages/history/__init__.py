"""The history stage (`HistoryQuery`): the search question of a conversation's last turn, and the conversation's
turns as each stage reads them (`window`, `transcript`)."""

from ._conversation import transcript, window
from ._stage import HistoryQuery

__all__ = ["HistoryQuery", "transcript", "window"]
