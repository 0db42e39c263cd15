"""Text as a reader sees it: the one form of a passage that is searched, embedded and shown in an answer, while what is
cited stays the file's own characters with exact spans (`declrag.types.searched_text` applies it to every chunk of
every store; `declrag.pipeline.stages.generate.shown` to the extractive answer).

`reading` makes three changes, and only these:

1. **Line-end hyphenation joined.** A word a typesetter broke across lines ("calibra-" / "tion", or a soft hyphen
   before the line end) is one word again ("calibration"); a real hyphen at a line end ("text-" / "embedding-ada")
   keeps its hyphen and loses the line break ("text-embedding-ada"). Which is which (`is_break`): the text's own
   evidence first (the joined word, or the hyphenated one, written elsewhere in it), then how common the joined word
   and its two parts are (wordfreq's frequencies: a joined word that is a word, or parts that are not both words,
   is a break; two common words that make no word together keep their hyphen). A capital or a digit after the hyphen
   ("non-" / "English", "COVID-" / "19") always keeps it.
2. **Unicode compatibility forms folded** (NFKC): ligatures (U+FB01 "ﬁ" is "fi"), full-width and other presentation
   forms, composed and decomposed accents alike, non-breaking spaces as spaces.
3. **Invisible characters that are not words removed**: Unicode's format characters (category Cf: soft hyphen,
   zero-width space and joiners, word joiner, byte order mark, bidirectional marks). A text of only such characters
   and spaces reads as empty (`visible`).

Everything else (case, punctuation, line breaks, spaces) stays, so sentences and lines split as before. Sources:
Unicode Standard Annex #15 (NFKC), Unicode's Cf category; wordfreq (Speer, 2022) for word frequencies.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

# A hyphen (ASCII, U+2010 HYPHEN, or a soft hyphen) at a line end, between word characters: "calibra-\n  tion". The
# left part is the word before it (of a compound, its last part: "the" of "state-of-the-"), the right part the word
# after it, up to a space or a further hyphen (looked at, not taken). A page break between them (a form feed, with the
# blank lines its running headers and footers left) is a line end.
_BREAK = re.compile(r"(?<!\w)(\w+)([-\u2010\u00ad])(?:[ \t]*\r?\n[ \t]*|[^\S\f]*+\f\s*+)(?=(\w+))")
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})
_HYPHENS = "-\u2010\u00ad"
#: Zipf frequency (log10 of uses per billion words, wordfreq's scale) at which a part counts as a common word.
WORD_ZIPF = 3.0


@cache
def _format() -> re.Pattern[str]:
    """Every format character (Cf) of the Unicode version Python ships, as one character class: they live in planes 0
    and 1 and in plane 14's tags (scanning those takes about 0.1 s, once a process)."""
    codes = [*range(0xD800), *range(0xE000, 0x20000), *range(0xE0000, 0xE1000)]
    return re.compile("[" + "".join(re.escape(chr(c)) for c in codes if unicodedata.category(chr(c)) == "Cf") + "]")


@lru_cache(maxsize=65_536)
def _zipf(word: str, lang: str) -> float:
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, lang))


def is_break(left: str, right: str, text: str = "", lang: str = "en") -> bool:
    """Whether ``left`` + hyphen + line end + ``right`` is one word a typesetter broke (join it), rather than a real
    hyphen that fell at a line end (keep it). ``text``: the text both come from, whose own spellings decide first;
    ``lang``: the language whose word frequencies decide next (an ISO 639 code wordfreq knows; English by default)."""
    return _is_break(left, right, _Spellings(text.lower()), lang)


class _Spellings:
    """A text's own words and hyphenated pairs (lower case), read once however many breaks it has."""

    def __init__(self, lower: str):
        self.words = set(_WORD.findall(lower))
        self.pairs = {f"{a}-{b}" for c in _COMPOUND.findall(lower) for a, b in zip(c.split("-"), c.split("-")[1:])}


_WORD = re.compile(r"\w+")
_COMPOUND = re.compile(r"\w+(?:-\w+)+")


def _is_break(left: str, right: str, own: _Spellings, lang: str) -> bool:
    if not right or not left or right[0].isupper() or right[0].isdigit() or left[-1].isdigit():
        return False
    joined = (left + right).lower()
    if f"{left}-{right}".lower() in own.pairs:
        return False
    if joined in own.words:
        return True
    try:
        z_joined, z_left, z_right = _zipf(joined, lang), _zipf(left.lower(), lang), _zipf(right.lower(), lang)
    except (ImportError, LookupError, ValueError):  # no word list for the language: a break, as typesetting goes
        return True
    if z_joined > 0 and z_joined >= min(z_left, z_right) - 1.0:
        return True  # "in-" / "formation": "information" is as common as its rarer part
    return not (z_left >= WORD_ZIPF and z_right >= WORD_ZIPF)  # "text-" / "embedding": two words, kept


def _joined(text: str, lang: str) -> str:
    if ("\n" not in text and "\f" not in text) or not any(h in text for h in _HYPHENS):
        return text
    own: _Spellings | None = None

    def one(m: re.Match[str]) -> str:
        nonlocal own
        left, hyphen, right = m.group(1), m.group(2), m.group(3)
        if hyphen == "\u00ad":
            return left
        if own is None:  # the text's own spellings, once
            own = _Spellings(_BREAK.sub(r"\1\n", text).lower())  # its broken words left out of them
        return left if _is_break(left, right, own, lang) else f"{left}-"

    return _BREAK.sub(one, text)


def reading(text: str, lang: str = "en") -> str:
    """``text`` as a reader sees it (the module's three changes): what is searched, embedded and shown. Lengths and
    offsets change; cite the original text's spans, never this one's."""
    if text.isascii():  # no compatibility forms nor format characters: only hyphenation can change
        return _joined(text, lang)
    return unicodedata.normalize("NFKC", _format().sub("", _joined(text, lang)))


def shown(text: str, lang: str = "en") -> str:
    """``text`` as an answer shows it: hyphenation joined, ligatures as letters, invisible characters out, composed
    (NFC); unlike `reading`, the other compatibility forms stay ("m²", "H₂O", "10⁻³" keep their meaning)."""
    return unicodedata.normalize("NFC", _format().sub("", _joined(text, lang)).translate(_LIGATURES))


def visible(text: str) -> bool:
    """Whether ``text`` holds anything but spaces and invisible format characters (a file of zero-width spaces is
    empty)."""
    return bool(_format().sub("", text).strip())
