"""The words keyword search (BM25) indexes and looks up, in every script: `keyword_tokens`.

A word is a run of letters and digits with the combining marks that belong to them (Devanagari's vowel signs and
viramas, Thai's vowels and tone marks), lowercased; accents a query seldom writes (Russian stress marks, Arabic
harakat) are left out. Scripts written without spaces between words
(Chinese, Japanese, Korean's Hangul, Thai, Lao, Khmer, Myanmar) are cut into overlapping character bigrams, as
Lucene's CJK analyzer does (``CJKBigramFilter``; Thai, Lao, Khmer and Myanmar the same way, by grapheme cluster): a
run of one character is itself a token. Bigrams need no dictionary, work alike for every such script and match a word
of the query wherever the document has it, at the cost of some bigrams that straddle two words (BM25's IDF gives
those little weight).

Both stores index exactly these tokens: the embedded one through `declrag.stores.bm25`, Weaviate (stores of format 5
and later) by receiving them joined by spaces in a whitespace-tokenized property, so the two rank alike in every
script.
"""

from __future__ import annotations

import regex

# a word: a letter or digit, then letters, digits and combining marks (\p{M}: "हिन्दी" is one word, not "ह", "न", "द")
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{N}\p{M}]*")
# the scripts written without spaces between words, as the inside of a character class
SPACELESS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}ー々〆"
# a run of a spaceless script inside a word (with its combining marks), and everything else
_SPLIT = regex.compile(rf"((?:[{SPACELESS}]\p{{M}}*)+)")
_SPACELESS = regex.compile(rf"[{SPACELESS}]")
_GRAPHEME = regex.compile(r"\X")
# marks that are accents, not letters: those left after composition (NFKC: "é" is one letter) such as Russian stress
# marks (мо́сква) and Arabic harakat and Hebrew points, which a query seldom writes: out of the tokens
_ACCENTS = regex.compile(r"[\u0300-\u036f\u0591-\u05c7\u064b-\u065f\u0670]")


def keyword_tokens(text: str) -> list[str]:
    """The keyword tokens of ``text`` (already in its searched form, `declrag.text.reading`), in order: words,
    lowercased; spaceless-script runs as overlapping bigrams of grapheme clusters (a lone character as itself).

    >>> keyword_tokens("Die Büchereien öffnen um 8 Uhr")
    ['die', 'büchereien', 'öffnen', 'um', '8', 'uhr']
    >>> keyword_tokens("图书馆每天8点开门")
    ['图书', '书馆', '馆每', '每天', '8', '点开', '开门']
    """
    out: list[str] = []
    for word in _WORD.findall(_ACCENTS.sub("", text.lower())):
        if not _SPACELESS.search(word):
            out.append(word)
            continue
        for k, part in enumerate(_SPLIT.split(word)):
            if not part:
                continue
            if k % 2 == 0:  # between spaceless runs: letters or digits of another script
                out.append(part)
                continue
            units = _GRAPHEME.findall(part)
            out += units if len(units) == 1 else [a + b for a, b in zip(units, units[1:])]
    return out


def spaceless(text: str) -> bool:
    """Whether ``text`` has any character of a script written without spaces between words."""
    return _SPACELESS.search(text) is not None


# Weaviate's "en" stopword preset
STOPWORDS_EN = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)


def tokenize(text: str) -> list[str]:
    """The keyword tokens of ``text`` (`keyword_tokens`): what both stores index."""
    return keyword_tokens(text)
