"""The retrieve stage (`Retriever`): hybrid search for every query, fused, with the named-document search, the
documents' signal, autocut and context expansion; and search as a user asks for it (`search`, `hand_over`)."""

from ._ranking import mmr, order
from ._searching import hand_over, search
from ._stage import Retriever, pool_size

__all__ = ["Retriever", "hand_over", "mmr", "order", "pool_size", "search"]
