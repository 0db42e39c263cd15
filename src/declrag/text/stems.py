"""Word stems per language (`stems`), so that the extractive answer's word overlap counts "Варшаве" in a question as
"Варшава" in a sentence, and "financiaba" as "financiar".

Stems are the Snowball stemmers' (the snowballstemmer package, BSD-3-Clause, pure Python: 30-odd languages,
Russian, Arabic, Hindi, German and Spanish among them), applied to keyword tokens (`declrag.text.keywords`).
English is not stemmed: its rules were calibrated on whole words; nor are languages Snowball lacks (Chinese's bigrams
need no stemming).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import cache, lru_cache

# ISO 639-1 code -> the Snowball algorithm's name (English left out on purpose: see the module docstring)
SNOWBALL = {"ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish",
            "nl": "dutch", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french", "de": "german",
            "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian",
            "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian", "fa": "persian", "pl": "polish",
            "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish",
            "ta": "tamil", "tr": "turkish", "yi": "yiddish"}
WORDS_KEPT = 65_536  # (language, word) -> stem pairs kept (an LRU: a server sees the same words again and again)
_local = threading.local()  # a Snowball stemmer keeps state while it works: one per thread


def _stemmer(language: str):  # noqa: ANN202 - the package's stemmer class
    import snowballstemmer  # read on first need

    made = _local.__dict__.setdefault("stemmers", {})
    if language not in made:
        made[language] = snowballstemmer.stemmer(SNOWBALL[language])
    return made[language]


@lru_cache(maxsize=WORDS_KEPT)
def _stem(language: str, word: str) -> str:
    return _stemmer(language).stemWord(word)


@cache  # one entry per language asked for
def stemmer(language: str) -> Callable[[str], str] | None:
    """The stem of one keyword token in ``language`` (an ISO 639-1 code), or None where words are compared whole:
    English, "" (not known) and the languages Snowball lacks. A token with a digit is its own stem.

    >>> stemmer("ru")("варшаве") == stemmer("ru")("варшава")
    True
    """
    if language not in SNOWBALL:
        return None

    def stem(word: str) -> str:
        return word if any(c.isdigit() for c in word) else _stem(language, word)

    return stem


@cache  # one entry per language asked for
def stems(language: str) -> Callable[[Iterable[str]], set[str]] | None:
    """The function from keyword tokens to the set of their stems in ``language`` (`stemmer`), or None where words
    are compared whole.

    >>> sorted(stems("ru")(["варшаве", "варшава", "1944"]))
    ['1944', 'варшав']
    """
    stem = stemmer(language)
    if stem is None:
        return None

    def fold(words: Iterable[str]) -> set[str]:
        return {stem(w) for w in words}

    return fold
