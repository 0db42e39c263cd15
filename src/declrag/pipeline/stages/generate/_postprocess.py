"""What happens to a draft answer: citations resolved to passages, abstentions recognised, and the
deterministic grounding check (the cheap counterpart of the LLM self-judge)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ....text.keywords import STOPWORDS_EN, spaceless, tokenize
from ....text.sentences import sentence_spans

_CITE = re.compile(r"\[(\s*\d+(?:\s*[,;]\s*\d+)*\s*)\]")
_ABSTAIN = re.compile(
    r"\b(i\s+(do\s*n[o']?t|cannot|can't|am\s+(not\s+able|unable)\s+to|'m\s+(not\s+able|unable)\s+to)\s+"
    r"(know|answer|say|find|tell|determine)|i(\s+am|'m|’m)\s+(not\s+able|unable)\s+to\s+(find|answer|say|determine)|"
    r"unanswerable|(no|not\s+enough|insufficient)\s+information|(is|are)\s+not\s+(mentioned|provided|stated|given)|"
    r"(does|do)(\s+not|n['’]t)\s+(say|mention|state|contain|specify)|cannot\s+be\s+(answered|determined))", re.I)
# words that carry no content when checking support
_FUNCTION_WORDS = STOPWORDS_EN | set(
    "i you he she we it its his her their our my your was were been being has have had do does did can could "
    "would should may might must shall also than very so just about which who whom whose what when where why "
    "how all any each some one two from up out over under".split())


@dataclass(frozen=True)
class Cited:
    text: str  # the answer with invalid markers removed
    used: list[int]  # passage numbers cited, in order of first use
    removed: int  # markers that pointed at no passage


def resolve_citations(answer: str, n_passages: int) -> Cited:
    """Keep ``[n]`` markers with 1 <= n <= n_passages; drop the others (counted); ``[1, 3]`` is two."""
    used: list[int] = []
    removed = 0

    def fix(m: re.Match) -> str:
        nonlocal removed
        good = []
        for part in re.split(r"[,;]", m.group(1)):
            n = int(part)
            if 1 <= n <= n_passages:
                good.append(n)
                if n not in used:
                    used.append(n)
            else:
                removed += 1
        return "".join(f"[{n}]" for n in good)

    text = _CITE.sub(fix, answer)
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()
    return Cited(text, used, removed)


def is_abstention(answer: str, phrase: str) -> bool:
    """The model said it cannot answer: the configured phrase, or a common way of saying so, near the start."""
    a = answer.strip().lower()
    if not a:
        return True
    if phrase.strip().lower().rstrip(".") in a:
        return True
    m = _ABSTAIN.search(a)
    return bool(m and m.start() < 40)


def content_words(text: str) -> set[str]:
    """The keyword tokens of ``text`` that carry content: not function words, and longer than two letters unless a
    number or a bigram of a script without spaces (`declrag.text.keywords`: "泳帽" is a word)."""
    return {t for t in tokenize(text) if t not in _FUNCTION_WORDS and (len(t) > 2 or t.isdigit() or spaceless(t))}


def support(sentence: str, passage: str) -> float:
    """Share of the sentence's content words found in the passage (1.0 for a sentence with none)."""
    words = content_words(sentence)
    return len(words & content_words(passage)) / len(words) if words else 1.0


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)] if text.strip() else []


def attribute(answer: str, passages: list[str], min_support: float = 0.2) -> list[tuple[str, int | None]]:
    """Each answer sentence with the passage (1-based) that supports it best, or None below ``min_support``."""
    out = []
    for s in sentences(answer):
        scores = [support(s, p) for p in passages]
        best = max(range(len(scores)), key=scores.__getitem__) if scores else None
        out.append((s, best + 1 if best is not None and scores[best] >= min_support else None))
    return out


def grounding(answer: str, passages: list[str], threshold: float) -> tuple[bool, float, list[str]]:
    """Deterministic support check: a sentence is supported when at least half of its content words occur
    in one passage; the answer is supported when the share of supported sentences reaches ``threshold``.
    Returns (supported, share, unsupported sentences)."""
    sents = [re.sub(_CITE, "", s).strip() for s in sentences(answer)]
    sents = [s for s in sents if s]
    if not sents:
        return False, 0.0, []
    bad = [s for s in sents if max((support(s, p) for p in passages), default=0.0) < 0.5]
    share = 1 - len(bad) / len(sents)
    return share >= threshold, share, bad
