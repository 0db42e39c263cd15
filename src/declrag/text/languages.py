"""Which language a text is written in (`identify`), and which languages an embedding model was trained on
(`embedder_languages`), so that `declrag index` can say what it found and what the embedder covers.

Identification is py3langid's (a maintained fork of langid.py, BSD-3-Clause: a naive Bayes model over byte n-grams
shipped inside the package, about 100 languages): ISO 639 codes, two letters where the language has them ("en",
"zh", "hi"), three otherwise ("pcm"); a variety by its macrolanguage ("wuu" is "zh"). On XQuAD's paragraphs it names
1,679 of 1,680 right, at about 1,000 paragraphs a second.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

import regex

MIN_LETTERS = 20  # fewer letters than this: no language named ("")
QUESTION_LETTERS = 8  # a question's language is told from this many letters (a Chinese question has ten or so)
# how sure the identifier must be to say a question is in another language than its passages: on XQuAD's English
# questions, 2 of 1,190 pass it ("malum prohibitum"), against 10 named wrong without it
QUESTION_CONFIDENCE = 0.99
RANKED = 10  # the identifier's leading languages whose probabilities are compared
# the identifier's class for text without words of any language (identifiers, numbers, code): told as "" (not known),
# so that such a corpus is not taken for one in a language the embedding model lacks
NO_LANGUAGE = "zxx"
SAMPLE = 1000  # characters read from the start, the middle and the end of a long text
_LETTER = regex.compile(r"\p{L}")
# varieties named by their ISO 639-3 macrolanguage (the identifier tells Wu from Mandarin on a sentence or two,
# unreliably, and they are written alike): Chinese and Arabic
MACROLANGUAGE = {**dict.fromkeys(("cmn", "wuu", "yue", "gan", "hak", "nan", "hsn", "cjy"), "zh"),
                 **dict.fromkeys(("arz", "ary", "apc", "ajp", "acm", "aeb", "afb", "ars"), "ar")}

# the languages an embedding model was trained on, by the last part of its name; a model not listed is not claimed
MULTILINGUAL = "multilingual"
EMBEDDER_LANGUAGES: dict[str, frozenset[str] | str] = {
    "all-minilm-l6-v2": frozenset({"en"}),
    "all-minilm-l12-v2": frozenset({"en"}),
    "all-mpnet-base-v2": frozenset({"en"}),
    "bge-small-en-v1.5": frozenset({"en"}),
    "bge-base-en-v1.5": frozenset({"en"}),
    "bge-large-en-v1.5": frozenset({"en"}),
    "e5-small-v2": frozenset({"en"}),
    "e5-base-v2": frozenset({"en"}),
    "multilingual-e5-small": MULTILINGUAL,
    "multilingual-e5-base": MULTILINGUAL,
    "multilingual-e5-large": MULTILINGUAL,
    "bge-m3": MULTILINGUAL,
    "paraphrase-multilingual-minilm-l12-v2": MULTILINGUAL,
    "paraphrase-multilingual-mpnet-base-v2": MULTILINGUAL,
    "labse": MULTILINGUAL,
}


def identify(text: str, min_letters: int = MIN_LETTERS, confidence: float = 0.0,
             among: AbstractSet[str] = frozenset()) -> str:
    """The language ``text`` is written in, as an ISO 639 code; "" when it has fewer than ``min_letters`` letters,
    the identifier's probability for it (varieties summed into their macrolanguage) is below ``confidence``, or it is
    in none (`NO_LANGUAGE`: "w12 w7 x3"). A long
    text is judged on `SAMPLE` characters from each of its start, middle and end. ``among``: the languages it may be
    in (the probabilities shared among those alone; empty: any)."""
    if len(_LETTER.findall(text, endpos=4 * SAMPLE)) < min_letters and len(_LETTER.findall(text)) < min_letters:
        return ""
    if len(text) > 3 * SAMPLE:
        mid = len(text) // 2
        text = "\n".join((text[:SAMPLE], text[mid - SAMPLE // 2:mid + SAMPLE // 2], text[-SAMPLE:]))
    import numpy as np
    import py3langid  # its model loads on first use (0.1 s)

    ranked = py3langid.rank(text)  # (language, log-probability), best first
    ranked = [r for r in ranked if MACROLANGUAGE.get(r[0], r[0]) in among][:RANKED] if among else ranked[:RANKED]
    if not ranked:
        return ""
    logp = np.array([s for _, s in ranked])
    p = np.exp(logp - logp.max())
    by: dict[str, float] = {}
    for (lang, _), share in zip(ranked, p / p.sum()):
        by[MACROLANGUAGE.get(lang, lang)] = by.get(MACROLANGUAGE.get(lang, lang), 0.0) + float(share)
    best = max(by, key=by.__getitem__)
    return best if by[best] >= confidence and best != NO_LANGUAGE else ""


def load_identifier() -> None:
    """Load the identifier's model now (a server's warm-up), not on the first question: keyword search and the
    extractive answer tell each question's language (`declrag.text.stopwords.question_language`)."""
    identify("which language is this", 1)


def not_theirs(question: str, languages: Iterable[str]) -> str:
    """A note for an abstention: the question is written in another language than every passage it was given
    (``languages``, theirs; "" not known), e.g. "; the question is in fr, the passages in en". "" when the languages
    agree, are not known, or the question is too short or too mixed to tell (`QUESTION_LETTERS`,
    `QUESTION_CONFIDENCE`)."""
    known = sorted({lang for lang in languages if lang})
    asked = identify(question, QUESTION_LETTERS, QUESTION_CONFIDENCE)
    if not asked or not known or asked in known:
        return ""
    return f"; the question is in {asked}, the passages in {', '.join(known)}"


def embedder_languages(model: str) -> frozenset[str] | str | None:
    """The languages embedding ``model`` (a hub name or a folder) was trained on: a set of codes, `MULTILINGUAL`,
    or None when declrag does not know the model."""
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    return EMBEDDER_LANGUAGES.get(name)


def uncovered(found: dict[str, int], model: str) -> list[str]:
    """The languages in ``found`` (code: documents) that embedding ``model`` was not trained on, most documents
    first; [] when it is multilingual or unknown."""
    covers = embedder_languages(model)
    if not isinstance(covers, frozenset):
        return []
    return [lang for lang, _ in sorted(found.items(), key=lambda kv: -kv[1]) if lang and lang not in covers]
