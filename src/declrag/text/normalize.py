"""Text normalisation shared by the metrics: SQuAD's answer normalisation, numbers written in different
ways, and the specific details (numbers, dates, names, quoted strings) that SIA checks."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—", "…", "«", "»"}
_CITE = re.compile(r"\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]")


def strip_citations(text: str) -> str:
    return re.sub(r"\s{2,}", " ", _CITE.sub("", text)).strip()


def squad_normalize(text: str) -> str:
    """SQuAD's official normalisation: lower case, no punctuation, no articles, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_tokens(text: str) -> list[str]:
    return squad_normalize(text).split()


def token_f1(prediction: str, reference: str) -> float:
    p, r = squad_tokens(prediction), squad_tokens(reference)
    if not p or not r:
        return float(p == r)
    common = Counter(p) & Counter(r)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(r)
    return 2 * precision * recall / (precision + recall)


def token_recall(prediction: str, reference: str) -> float:
    """Share of the reference's (normalised) tokens found in the prediction."""
    p, r = squad_tokens(prediction), squad_tokens(reference)
    if not r:
        return float(not p)
    return sum((Counter(p) & Counter(r)).values()) / len(r)


# ------------------------------------------------------------------------------------------------ numbers
_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                       "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
         if w != "_"}
_ORDINALS = {w: i for i, w in enumerate("zeroth first second third fourth fifth sixth seventh eighth ninth tenth "
                                          "eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth "
                                          "eighteenth nineteenth twentieth".split())}
_ORDINAL_RE = re.compile(r"\b(" + "|".join(_ORDINALS) + r")\b", re.I)
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORD = "|".join(sorted([*_UNITS, *_TENS, *_SCALES], key=len, reverse=True))
_WORDS_RE = re.compile(rf"\b(?:{_NUMBER_WORD})(?:[\s-]+(?:and\s+)?(?:{_NUMBER_WORD}))*\b", re.I)
_DIGITS_RE = re.compile(r"(?<![\w.])[-−]?\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?(?=\D|$)"  # grouped: 7,000
                        r"|(?<![\w.])[-−]?\d+(?:\.\d+)?")
_SCALE_AFTER = re.compile(r"^\s*(hundred|thousand|million|billion)\b", re.I)


def _words_value(words: str) -> float | None:
    total, current = 0, 0
    for w in re.split(r"[\s-]+", words.lower()):
        if w == "and":
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
    return float(total + current)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def numbers(text: str, ambiguous_ordinals: bool = True) -> list[str]:
    """Every number in ``text``, canonical: "1,000" / "1000" / "one thousand" / "1 thousand" -> "1000";
    "2.50" -> "2.5"; "5%" and "five percent" -> "5"; "fifth" and "5th" -> "5". ``ambiguous_ordinals=False``
    skips "first" and "second", which are often not numbers ("at first", "a second look")."""
    out: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for m in _DIGITS_RE.finditer(text):
        raw = re.sub(r"[,\u202f\u00a0 ]", "", m.group()).replace("−", "-")
        value = float(raw)
        if sm := _SCALE_AFTER.match(text[m.end():]):
            value *= _SCALES[sm.group(1).lower()]
        out.append((m.start(), _fmt(value)))
        taken.append(m.span())
    for m in _WORDS_RE.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        v = _words_value(m.group())
        if v is not None and m.group().lower() not in _SCALES:
            out.append((m.start(), _fmt(v)))
    for m in _ORDINAL_RE.finditer(text):
        if ambiguous_ordinals or m.group(1).lower() not in ("first", "second"):
            out.append((m.start(), str(_ORDINALS[m.group(1).lower()])))
    return [v for _, v in sorted(out)]


# ------------------------------------------------------------------------------------------------ details
MONTHS = "january february march april may june july august september october november december".split()
# capitalised words that start sentences or clauses without naming anything
_NOT_NAMES = set("""a an the this that these those it its it's he she they we i you his her their our my your there
here yes no not however therefore thus also although though because since while when where what which who whom whose
why how according in on at by for from to of with as after before during under over between among about into
some many most several both each every all any none one other another such according answer passage passages
context question source sources based overall finally first second third then so but and or if unknown i'm
more less over about approximately nearly around only just roughly almost some is are was were be been do does did
can could should would will shall might must has have had let please tell give list name describe explain
per""".split())
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_CAPWORD = r"(?:[A-ZÀ-ÖØ-ÞΑ-ΩЀ-Я][\w'’.-]*|[A-ZΑ-ΩЀ-Я]{2,})"
_JOIN = r"(?:of|de|da|del|der|van|von|the|la|le|and|al|bin|ibn)"
_NAME = re.compile(rf"(?<![\w'’.-]){_CAPWORD}(?:\s+(?:{_JOIN}\s+)?{_CAPWORD})*")  # a whole word starts it (not nDCG)


@dataclass(frozen=True)
class Detail:
    kind: str  # number | name | quote
    text: str  # as written in the answer
    key: str  # normalised, for matching


def norm_phrase(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = re.sub(r"['’]s\b", "", text)
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def details(answer: str) -> list[Detail]:
    """The specific details of an answer: numbers (incl. years and quantities), names (runs of capitalised
    words, e.g. "William the Conqueror", "Battle of Hastings"; sentence-initial function words and month
    names are not names), and quoted strings."""
    text = strip_citations(answer)
    found: list[Detail] = [Detail("number", n, n) for n in numbers(text, ambiguous_ordinals=False)]
    for m in _QUOTED.finditer(text):
        found.append(Detail("quote", m.group(1), norm_phrase(m.group(1))))
    for m in _NAME.finditer(text):
        words = m.group().split()
        while words and (words[0].lower().strip(".'’") in _NOT_NAMES or words[0].lower() in MONTHS):
            words = words[1:]
        while words and words[-1].lower() in ("of", "de", "the", "and", "van", "von", "la", "le"):
            words = words[:-1]
        if not words or all(w.lower() in MONTHS for w in words):
            continue
        phrase = " ".join(words).rstrip(".")
        key = norm_phrase(phrase)
        if key and not key.isdigit():
            found.append(Detail("name", phrase, key))
    unique: dict[tuple[str, str], Detail] = {}
    for d in found:
        unique.setdefault((d.kind, d.key), d)
    return list(unique.values())


def detail_supported(d: Detail, context: str, context_numbers: AbstractSet[str], context_norm: str) -> bool:
    """A detail occurs in the context: numbers by value; names and quotes as a normalised phrase, or (for a
    multi-word name) every one of its words present; a leading "the" is optional."""
    if d.kind == "number":
        return d.key in context_numbers
    padded = f" {context_norm} "
    key = d.key[4:] if d.key.startswith("the ") else d.key
    if f" {key} " in padded:
        return True
    words = key.split()
    return len(words) > 1 and all(f" {w} " in padded for w in words if w not in ("of", "the", "and", "de"))
