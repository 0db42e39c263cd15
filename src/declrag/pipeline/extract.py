"""Answers that claim nothing the passages do not say, with no LM call.

- `extract`: the ``extractive`` generate mode. The answer is the retrieved passages' own best sentences (or parts of
  a sentence longer than ``max_piece_chars``), each cited with its exact span; a sentence that holds what the
  question asks for (a date for "when", a number for "how many", a name for "who", "where", "which X": see
  `answer_kind`) and the question does not already hold scores ``type_weight`` more. It is the abstention when none
  clears ``min_score``, or when the question names a detail (a name or a number) that neither the passage of the
  best sentence, nor its document's identity (title, section, file name), nor its whole document mentions (the
  question is then about something else, a frequent way of being unanswerable). A name the document holds anywhere
  counts: its title page, author line, running headers and footers (people name a report by its author,
  institution or year, which the answering chunk seldom repeats). When the best sentence's document lacks a name
  that another passage's document holds, the answer comes from the passages that hold everything the question
  names.
- `check`: the ``verified`` mode's check of an LM's answer, sentence by sentence, and the grounding metrics' rule: a
  sentence is supported when most of its content words occur in one passage, or when it is close in meaning to one
  passage sentence and shares a good part of its words with it; and never when it holds a name, number or date
  that its passages lack.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from rapidfuzz.distance import Levenshtein

from ..stores.bm25 import KeywordIndex
from ..text.normalize import MONTHS, Detail, detail_supported, details, norm_phrase, numbers
from ..text.reading import reading
from ..text.sentences import sentence_spans
from ..text.stopwords import NOUNS_CAPITALISED, question_language, stopwords
from .names import known
from .pieces import CITE, Piece, candidates, shown, spans
from .postprocess import content_words, support

# Calibrated on tests/data/grounding_cases.jsonl (85 hand-labelled SQuAD v2.0 cases; see its test)
LEXICAL = 0.6  # share of a sentence's content words that must occur in one passage
SEMANTIC = 0.75  # or: cosine to a passage sentence ...
SEMANTIC_LEXICAL = 0.55  # ... with at least this share of words in common

Embed = Callable[[list[str]], np.ndarray]  # texts -> L2-normalised rows


@dataclass
class Extract:
    """What `extract` chose: ``pieces`` in answer order (empty: abstain), and why it abstained, if it did."""

    pieces: list[Piece]
    reason: str = ""
    best: float | None = None  # the best candidate's score

    def text(self) -> str:
        """The answer: each piece as the reader sees it (one line; the passage's own ``[n]`` footnote marks left
        out, so that every marker is a citation), then its passage's citation."""
        return " ".join(f"{shown(p.text)} [{p.n}]" for p in self.pieces)


def _overlap(question: set[str], piece: str, identity: set[str] | frozenset[str] = frozenset()) -> float:
    """The share of the question's content words that the piece holds, or its document's identity (its content
    words): the words by which a question names its document (the Weaviate guide, the Milan thesis) are there."""
    return len(question & (content_words(piece) | identity)) / len(question) if question else 0.0


def missing_details(question: str, context: str, document: str = "") -> list[str]:
    """The names and numbers of ``question`` that ``context`` never mentions, nor ``document`` (the passage's whole
    document, when given: a name on its title page or in a running header counts). Not counted: its first word; a
    count it spells out ("the other three concepts": a passage lists them without saying how many); a name each of
    whose words ``context`` (or ``document``) has, or nearly (`_near`: Milan / Milano, Japanese / Japan,
    San Franciscio / San Francisco); a capitalised word in a language that capitalises every noun
    (`NOUNS_CAPITALISED`: German), where only numbers and quotes are details, or a function word of the question's
    language (`declrag.text.stopwords`)."""
    first = [w.lstrip("¿¡«\"'“‘(") for w in question.strip().split()[:1]]  # Spanish opens a question with ¿
    gone = unsupported(question, context)
    if gone and (lang := question_language(question)):  # a German noun; a function word ("Cuántas") is no name
        gone = [d for d in gone if d.kind != "name" or lang not in NOUNS_CAPITALISED
                and not set(d.key.split()) <= stopwords(lang)]
    whole = known(document) if gone and document.strip() else None
    if whole is not None:
        gone = [d for d in gone if not whole.has(d)]
    words = set(norm_phrase(context).split()) if any(d.kind == "name" for d in gone) else set()
    return [d.text for d in gone
            if not (d.kind == "name" and (first and d.text == first[0] or _near(d.key, words)
                                          or (whole is not None and _near(d.key, whole.words))))
            and not (d.kind == "number" and _spelled(d.key, question))]


_SMALL = {str(i) for i in range(1, 11)}


def _spelled(value: str, question: str) -> bool:
    """A number from one to ten that ``question`` writes only as a word."""
    return value in _SMALL and not re.search(rf"(?<![\w.,]){value}(?![\w]|[.,]\d)", question)


def _near(key: str, words: AbstractSet[str]) -> bool:
    """Every word of a name (normalised; its of, the, and, de aside) is in ``words``, or is a word of 5 letters or
    more that one of ``words`` nearly is: the same but for its ending (its first 5 letters or more shared, all but
    the last of the shorter word's: Milan / Milano, Japan / Japanese, Buddhism / Buddhist), or a misspelling of it
    (one letter off, two in a word of 9 or more)."""
    def near(w: str) -> bool:
        if w in words:
            return True
        if len(w) < 5:
            return False
        cut = 2 if len(w) >= 9 else 1
        for x in words:
            common = next((i for i, (a, b) in enumerate(zip(w, x)) if a != b), min(len(w), len(x)))
            if common >= max(5, min(len(w), len(x)) - 1) or Levenshtein.distance(w, x, score_cutoff=cut) <= cut:
                return True
        return False

    return all(near(w) for w in key.split() if w not in ("of", "the", "and", "de"))


_KIND_OF = [  # (pattern on the question's start, lower case, after any leading clause) -> what the answer holds
    (re.compile(r"^(?:in |from |to |of |for |by |with )?(?:what|which) (?:[a-z0-9-]+ ){0,2}commands?\b|"
                r"^how (?:do|can|should) (?:i|you|we) (?:run|start|stop|install|reset|restart|launch|invoke)\b"),
     "command"),
    (re.compile(r"^(?:in |from |to |of |for |by |with )?(?:what|which) (?:[a-z0-9-]+ ){0,2}(?:options?|"
                r"packages?|environments?|environment variables?|settings?|parameters?|macros?|flags?|keywords?|"
                r"document class(?:es)?|switch(?:es)?)\b"), "code"),
    (re.compile(r"^(?:in |from |to |of |for |by )?(?:what|which) (?:country|countries|nation|nations)\b"), "country"),
    (re.compile(r"^(?:in |by |since |until )?(?:when|what year|which year|what date|what day|what month|"
                r"what century|what decade|what time period)\b"), "date"),
    (re.compile(r"^(?:how (?:many|much|long|old|far|big|large|tall|high|deep|wide|often|fast)|"
                r"what (?:is |was |are |were )?the (?:number|amount|percentage|population|size|cost|price|value)|"
                r"what (?:percentage|number|amount|proportion|fraction))\b"), "number"),
    (re.compile(r"^(?:who|whom|whose|where|what (?:is|was|are|were) the (?:name|capital|title|author|authors|"
                r"founder|leader|president|head|owner|largest|biggest|oldest|first|last|main)\b|"
                r"(?:in |at |from |to |on |by |of |for )?(?:which|what) (?!is\b|are\b|was\b|"
                r"were\b|does\b|do\b|did\b|can\b|could\b|should\b|would\b|will\b|has\b|have\b|had\b|"
                r"kind\b|type\b|sort\b|happens\b|happened\b|about\b|if\b)[a-z]+)"), "name"),
]


@cache
def countries() -> frozenset[str]:
    """Every country's names (ISO 3166: official, common and short), normalised as
    `declrag.text.normalize.norm_phrase`."""
    import pycountry

    names = {getattr(c, a, "") for c in pycountry.countries for a in ("name", "common_name", "official_name")}
    return frozenset(norm_phrase(n) for n in names if n)


_DEFAULT = re.compile(r"\b(?:defaults?|initial(?:ly)?)\b")
_ASKS = re.compile(r"\b(?:what|which|how)\b")
_CODE = re.compile(r"\\[A-Za-z@]+")  # a command written as code: \itshape, \bigbreak
_NAMED_IN_CODE = re.compile(  # what names an option, package or variable in a manual's text
    _CODE.pattern  # \itshape
    + r"|(?<![\w-])-{1,2}[a-z][\w-]*"  # --shell-escape
    r"|\b[a-z][\w@]*[A-Z0-9_][\w@-]*"  # algo2e, lastLine, max_len
    r"|\b[A-Z][A-Z0-9_]{2,}\b"  # M4PATH
    r"|(?<![\w-])(?![\w-]*-(?:of|the|and|to|in|a)-)[a-z]+(?:-[a-z0-9]+)+(?![\w-])"  # fix-cm, not state-of-the-art
    r"|(?:^|(?<=\n))\s*(?:\d+\.\s+)?[a-z][\w@-]{2,}(?=\s*[:=])"  # a definition list's term: "rightnl: puts ..."
    r"|\b[a-z][\w@-]*(?==)")  # breakindent=


_COMMAND = re.compile(r"(?:^|\n)\s*[$#>] +\S|`[^`\n]*\s-{1,2}[A-Za-z][^`\n]*`")


def answer_kind(question: str) -> str | None:
    """What the question asks for: ``country`` (what country), ``date`` (when, what year), ``number`` (how many,
    how much, what percentage), ``name`` (who, where, which or what + a noun: a person, place, organisation or thing
    by name), ``command`` (which command, how do I run or install: a command line), ``code`` (which option, package,
    environment variable, document class: a name written as code), ``value`` (what or which default or initial
    setting: a number or a command), or None (what is, why, how: no type)."""
    q = re.sub(r"\b(what|who|where|when|which|how)(?:'|’)s\b", r"\1 is", " ".join(question.lower().split()))
    q = re.sub(r"^(?:according to [^,]+, |in [^,]+, |so |and |ok,? |also,? )", "", q)
    kind = next((kind for pattern, kind in _KIND_OF if pattern.match(q)), None)
    return "value" if kind in (None, "name") and _DEFAULT.search(q) and _ASKS.search(q) else kind


def holds_kind(piece: str, kind: str | None, question: str, asked: set[str] | None = None) -> bool:
    """Whether ``piece`` holds something of ``kind`` (`answer_kind`) that ``question`` does not: a number; for a date,
    a number (a year, a day) or a month, century or decade; a name (`declrag.text.normalize.details`); a country's
    name; for a
    value, a number or a command written as code (``\\itshape``); for code, a name written as code (``\\itshape``,
    ``--shell-escape``, ``algo2e``, ``M4PATH``, ``fix-cm``, ``breakindent=``) or a definition list's term at a line's
    start (``rightnl: put line numbers ...``).
    ``asked``: the question's detail keys, when the caller already has them (one question, many pieces)."""
    if kind is None:
        return False
    asked = {d.key for d in details(question)} if asked is None else asked
    found = [d for d in details(piece) if d.key not in asked]
    if kind == "name":
        return any(d.kind == "name" for d in found)
    if kind == "value":  # a default: a number, or a command written as code
        return any(d.kind == "number" for d in found) or any(c not in question for c in _CODE.findall(piece))
    if kind == "code":  # an option, command, package or variable: written as code, or a definition list's term
        return any(c.strip() not in question for c in _NAMED_IN_CODE.findall(piece))
    if kind == "command":  # a command line: after a shell prompt, or inline code with an option (a fenced block's
        return bool(_COMMAND.search(piece))  # lines hold it by being there: `Piece.code`)
    if kind == "country":
        return any(d.kind == "name" and (d.key in countries() or any(w in countries() for w in d.key.split()))
                   for d in found)
    if kind == "number" or any(d.kind == "number" for d in found):  # a date: a year, a day, a century's number
        return any(d.kind == "number" for d in found)
    low, asked_low = piece.lower(), question.lower()
    return any(re.search(rf"\b{w}\b", low) and w not in asked_low for w in (*MONTHS, "century", "decade"))


def shortlist(question: str, pool: list[Piece], size: int, typed: Sequence[int] = ()) -> list[Piece]:
    """The ``size`` candidates that BM25 over the candidates (and, on ties, their passage's rank and place) puts
    first, in passage order: only these are embedded, which bounds the mode's time (an encoder pass per candidate
    is what costs). With ``typed`` (which candidates hold what the question asks for: 0, 1, or 2 where they hold it
    best), the first ``size // 2`` of those that BM25 left out come too, the best holders first: the answer is looked
    for in every sentence of the passages."""
    if len(pool) <= size:
        return pool
    scores = KeywordIndex([reading(p.text) for p in pool]).scores(question)
    ranked = sorted(range(len(pool)), key=lambda i: (-float(scores[i]), pool[i].n, pool[i].start))
    extra = sorted((i for i in ranked[size:] if typed and typed[i]), key=lambda i: -typed[i])  # stable: BM25 next
    top = ranked[:size] + extra[: size // 2]
    return [pool[i] for i in sorted(top)]


def _of(identities: Sequence[str], n: int) -> str:
    return identities[n - 1] if len(identities) >= n else ""


def extract(question: str, passages: Sequence[str], embed: Embed, query_vector: np.ndarray, *, max_sentences: int = 2,
            min_score: float = 0.45, lexical_weight: float = 0.3, rank_weight: float = 0.02, order: str = "passage",
            max_piece_chars: int = 300, require_details: bool = True, embed_at_most: int = 8,
            type_weight: float = 0.0, identities: Sequence[str] = (), headings: Sequence[frozenset[str]] = (),
            documents: Callable[[int], str] | None = None, wrapped: bool = False,
            calibrate: Callable[[np.ndarray], np.ndarray] | None = None) -> Extract:
    """The extractive answer to ``question`` from ``passages`` (ranked, best first). ``query_vector``: the
    question's embedding (a conversation's turns mixed in, see `answer.Generator`); ``embed`` embeds the
    candidates (the ``embed_at_most`` of `shortlist`). Score = (1 - lexical_weight) * cosine + lexical_weight *
    word overlap - rank_weight * (rank - 1) + type_weight if it holds what the question asks for (`holds_kind`): a
    sentence holding what is asked needs that much less likeness to the question to answer it.
    ``identities``: each passage's document identity (`declrag.ingest.headers.identity`), and ``documents``: passage
    n's whole document text ('' when unknown), both read by the detail rule, the document only when a detail is
    missing from the passage (a store call): the question's words that name the document count as held, as its
    identity's do. ``headings``: each passage's title and section headings (`declrag.ingest.headers.heading_names`),
    never quoted. ``wrapped``: sentences wrapped over lines are whole candidates (`sentence_spans`). ``calibrate``:
    the embedding model's cosines onto the default model's scale, which ``min_score`` was calibrated on
    (`declrag.embed.embedder.Embedder.calibrate`)."""
    if documents is not None:  # read once a passage: the naming words and the detail rule both ask
        documents = cache(documents)
    kind = answer_kind(question) if type_weight else None
    every = candidates(passages, max_piece_chars, wrapped, headings)
    # scored as read (`declrag.text.reading`), cited as is; a code block's line with the line that says what it is
    read = {(p.n, p.start): reading(f"{p.lead}\n{p.text}" if p.lead else p.text) for p in every}
    asked = {d.key for d in details(question)} if kind else set()
    typed = [2 if kind == "command" and p.code else int(holds_kind(read[p.n, p.start], kind, question, asked))
             for p in every] if kind else []  # 2: a code block's line, for a command: looked at first
    holds = {(p.n, p.start) for p, t in zip(every, typed) if t}
    pool = shortlist(question, every, embed_at_most, typed)
    if not pool:
        return Extract([], "the passages hold no sentence")
    sims = embed([read[p.n, p.start] for p in pool]) @ np.asarray(query_vector, dtype=np.float32)
    sims = calibrate(sims) if calibrate is not None else sims
    q_words = content_words(question) - stopwords(question_language(question))  # "der", "и" are no content
    passages = [reading(p) for p in passages]  # the rules below read words, not spans
    naming = _naming(question, passages, identities, documents)
    named = {n: content_words(_of(identities, n)) | naming(n) for n in {p.n for p in pool}}  # once a passage
    lex = [_overlap(q_words, read[p.n, p.start], named[p.n]) for p in pool]
    scored = [Piece(p.n, p.start, p.end, p.text, code=p.code, lead=p.lead, score=
                    round((1 - lexical_weight) * float(s) + lexical_weight * w - rank_weight * (p.n - 1)
                          + type_weight * ((p.n, p.start) in holds), 6))
              for p, s, w in zip(pool, sims, lex)]
    ranked = sorted(scored, key=lambda p: -p.score)
    best = ranked[0]
    if best.score < min_score:
        return Extract([], f"no passage answers this closely enough (its best sentence scores {best.score:.3f}, "
                           f"under {min_score})", best.score)
    chosen = [p for p in ranked if p.score >= min_score]
    if require_details:
        lacks = _lacking(question, passages, identities, documents)
        if gone := lacks(best.n):
            chosen = [p for p in chosen if not lacks(p.n)]
            if not chosen:  # no passage that answers holds (nor does its document) what the question names
                names = ", ".join(gone[:3])
                if any(not lacks(n) for n in range(1, len(passages) + 1)):
                    return Extract([], f"no passage of a document that mentions {names} answers this closely "
                                       "enough", best.score)
                return Extract([], f"the passages never mention {names}", best.score)
        else:
            chosen = [p for p in chosen if p.n == best.n or not lacks(p.n)]
    chosen = chosen[:max_sentences]
    if order == "passage":
        chosen.sort(key=lambda p: (p.n, p.start))
    return Extract(chosen, best=best.score)


def _naming(question: str, passages: Sequence[str], identities: Sequence[str],
            documents: Callable[[int], str] | None) -> Callable[[int], set[str]]:
    """For passage n, the content words of the question's names and numbers that it (and its identity) lacks and its
    whole document holds: the words by which the question names that document ("in Hackl's guide"), which the
    answering sentence need not say. Found once a passage; none without ``documents``."""
    memo: dict[int, set[str]] = {}

    def words(n: int) -> set[str]:
        if n not in memo:
            gone = unsupported(question, f"{passages[n - 1]}\n{_of(identities, n)}") if documents else []
            doc = documents(n) if gone and documents else ""
            whole_doc = known(doc) if doc.strip() else None
            memo[n] = {w for d in gone if whole_doc is not None and whole_doc.has(d) for w in content_words(d.text)}
        return memo[n]

    return words


def _lacking(question: str, passages: Sequence[str], identities: Sequence[str],
             documents: Callable[[int], str] | None) -> Callable[[int], list[str]]:
    """For passage n, the details of ``question`` that neither it, its identity, nor its whole document mention
    (`missing_details`), found once a passage."""
    memo: dict[int, list[str]] = {}

    def lacks(n: int) -> list[str]:
        if n not in memo:
            here = f"{passages[n - 1]}\n{_of(identities, n)}"
            memo[n] = missing_details(question, here)
            if memo[n] and documents is not None:
                memo[n] = missing_details(question, here, documents(n))
        return memo[n]

    return lacks


# ------------------------------------------------------------------------------------------------ checking
@dataclass
class Finding:
    """One answer sentence as `check` found it: ``supported`` (by passage ``by``, 1-based, if any), the details
    (names, numbers, dates, quotes) its passages lack, and whether its own citation pointed at a passage that does
    not support it."""

    sentence: str
    cited: list[int]
    supported: bool
    by: int | None = None
    lexical: float = 0.0
    semantic: float = 0.0
    missing: list[str] = field(default_factory=list)
    wrong_citation: bool = False


def cited_sentences(answer: str) -> list[tuple[str, list[int]]]:
    """The answer's sentences without their ``[n]`` markers, each with the passage numbers it cites (a marker that
    stands at the start of the next sentence belongs to the one before, as models write it)."""
    out: list[tuple[str, list[int]]] = []
    for s in (answer[a:b] for a, b in sentence_spans(answer)) if answer.strip() else ():
        lead = re.match(r"^(\s*\[[\d\s,;]+\])+", s)
        if lead and out:
            out[-1][1].extend(int(x) for m in CITE.finditer(lead.group()) for x in re.split(r"[,;]", m.group(1)))
            s = s[lead.end():]
        nums = [int(x) for m in CITE.finditer(s) for x in re.split(r"[,;]", m.group(1))]
        text = " ".join(re.sub(r"\s*" + CITE.pattern, "", s).split())
        if text:
            out.append((text, nums))
    return out


def check(answer: str, passages: Sequence[str], embed: Embed | None, context: str | None = None,
          calibrate: Callable[[np.ndarray], np.ndarray] | None = None) -> list[Finding]:
    """Each sentence of ``answer`` against ``passages`` (see the module docstring). A sentence that cites passages
    is checked against those first; when they do not support it and another passage does, ``wrong_citation``.
    Details are looked for in the cited passages (all of them when it cites none, or ``context`` when given:
    the metrics check against the whole context). ``calibrate``: as `extract`'s, for `SEMANTIC`."""
    rows = cited_sentences(answer)
    if not rows:
        return []
    texts = [reading(p) for p in passages]  # both sides as read (`declrag.text.reading`): an answer shows them so
    said = [reading(s) for s, _ in rows]
    lex = [[support(s, t) for t in texts] for s in said]
    sem = [[0.0] * len(texts) for _ in rows]
    psents = [(i, texts[i][a:b]) for i in range(len(texts)) for a, b in spans(texts[i], 10_000)]
    if embed is not None and psents and any(max(r, default=0.0) < LEXICAL for r in lex):
        sv = embed(said) @ embed([t for _, t in psents]).T
        sv = calibrate(sv) if calibrate is not None else sv
        for j, (i, _) in enumerate(psents):
            for r in range(len(rows)):
                sem[r][i] = max(sem[r][i], float(sv[r, j]))
    out = []
    for r, (s, cites) in enumerate(rows):
        valid = [n for n in cites if 1 <= n <= len(texts)]
        ok = [lex[r][i] >= LEXICAL or (sem[r][i] >= SEMANTIC and lex[r][i] >= SEMANTIC_LEXICAL)
              for i in range(len(texts))]
        pool = [n - 1 for n in valid] or list(range(len(texts)))
        by = next((i for i in sorted(pool, key=lambda i: -lex[r][i]) if ok[i]), None)
        wrong = by is None and bool(valid) and any(ok)
        if by is None and any(ok):
            by = max((i for i in range(len(texts)) if ok[i]), key=lambda i: lex[r][i])
        where = context if context is not None else "\n\n".join(texts[i] for i in ([by] if by is not None else pool))
        gone = unsupported(said[r], where)
        out.append(Finding(s, valid, by is not None and not gone, None if by is None else by + 1,
                           max(lex[r], default=0.0), max(sem[r], default=0.0), [d.text for d in gone], wrong))
    return out


def unsupported(text: str, context: str) -> list[Detail]:
    """The details (numbers, dates, names, quotes) of ``text`` that ``context`` lacks (both as read:
    `declrag.text.reading`)."""
    text, context = reading(text), reading(context)
    nums, norm = set(numbers(context)), norm_phrase(context)
    return [d for d in details(text) if not detail_supported(d, context, nums, norm)]
