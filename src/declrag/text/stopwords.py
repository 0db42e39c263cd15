"""Function words ("the", "der", "и", "का") of each language, as the keyword tokens that write them
(`declrag.text.keywords`), for the rules that weigh a question's content words (`declrag.pipeline.extract`).

The lists are the stop-words package's (python-stop-words, BSD-3-Clause: 33 languages, from the Snowball, Ranks NL
and stopwords-iso collections); a language it lacks has none. English keeps declrag's own list
(`declrag.stores.bm25.STOPWORDS_EN`, Weaviate's), which the English rules were calibrated with.
"""

from __future__ import annotations

from functools import cache, lru_cache

from .keywords import keyword_tokens
from .languages import QUESTION_CONFIDENCE, QUESTION_LETTERS, identify

# languages that write every noun with a capital letter: a capitalised word there is no sign of a name
NOUNS_CAPITALISED = frozenset({"de", "lb"})
QUESTIONS_KNOWN = 1024  # questions whose language is kept (an LRU: a server asks for one question several times)


@cache  # one entry per language the package has (33 at most)
def stopwords(language: str) -> frozenset[str]:
    """The function words of ``language`` (an ISO 639-1 code) as keyword tokens; empty for English (see the module
    docstring) and for a language the package does not have."""
    if language in ("", "en"):
        return frozenset()
    from stop_words import LANGUAGE_MAPPING, get_stop_words  # its lists are read on first need

    if language not in LANGUAGE_MAPPING:
        return frozenset()
    return frozenset(t for w in get_stop_words(language) for t in keyword_tokens(w))


@lru_cache(maxsize=QUESTIONS_KNOWN)
def question_language(question: str) -> str:
    """The language ``question`` is written in, where the identifier is sure of it (`QUESTION_CONFIDENCE`), else ""
    (`declrag.text.languages.identify`)."""
    return identify(question, QUESTION_LETTERS, QUESTION_CONFIDENCE)
