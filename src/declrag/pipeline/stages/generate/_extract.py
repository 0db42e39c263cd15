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
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from rapidfuzz.distance import Levenshtein

from ....stores.bm25 import KeywordIndex
from ....text.keywords import keyword_tokens
from ....text.normalize import Detail, detail_supported, details, norm_phrase, numbers
from ....text.reading import reading
from ....text.sentences import sentence_spans
from ....text.stems import stemmer, stems
from ....text.stopwords import NOUNS_CAPITALISED, question_language, stopwords
from ._kinds import answer_kind, holds_kind
from ._names import known
from ._pieces import CITE, Piece, candidates, shown, spans
from ._postprocess import content_words, support

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


def _overlap(question: set[str], piece: str, identity: set[str] | frozenset[str] = frozenset(),
             fold: Callable[[Iterable[str]], set[str]] | None = None) -> float:
    """The share of the question's content words that the piece holds, or its document's identity (its content
    words): the words by which a question names its document (the Weaviate guide, the Milan thesis) are there.
    ``fold``: the question's language's stems (`declrag.text.stems`), which ``question`` is given in too."""
    words = content_words(piece) | identity
    return len(question & (fold(words) if fold else words)) / len(question) if question else 0.0


def missing_details(question: str, context: str, document: str = "", language: str | None = None) -> list[str]:
    """The names and numbers of ``question`` that ``context`` never mentions, nor ``document`` (the passage's whole
    document, when given: a name on its title page or in a running header counts). Not counted: its first word; a
    count it spells out ("the other three concepts": a passage lists them without saying how many); a name each of
    whose words ``context`` (or ``document``) has, or nearly (`_near`: Milan / Milano, Japanese / Japan,
    San Franciscio / San Francisco); a capitalised word in a language that capitalises every noun
    (`NOUNS_CAPITALISED`: German), where only numbers and quotes are details, or a function word of the question's
    language (`declrag.text.stopwords`; ``language``: the question's, when the caller knows it), also when it opens
    a name ("Почему Полония": Russian capitalises a question's first word); in a language with stems
    (`declrag.text.stems`), a name word whose stem the context has ("Южную Калифорнию", "Южной Калифорнии")."""
    first = [w.lstrip("¿¡«\"'“‘(") for w in question.strip().split()[:1]]  # Spanish opens a question with ¿
    gone = unsupported(question, context)
    lang = question_language(question) if language is None else language
    if gone and lang:  # a German noun; a function word ("Cuántas") is no name
        gone = [d for d in gone if d.kind != "name" or lang not in NOUNS_CAPITALISED
                and not set(d.key.split()) <= stopwords(lang)]
    whole = known(document) if gone and document.strip() else None
    if whole is not None:
        gone = [d for d in gone if not whole.has(d)]
    words = set(norm_phrase(context).split()) if any(d.kind == "name" for d in gone) else set()
    function, fold = (stopwords(lang), stems(lang)) if lang else (frozenset(), None)
    held = fold(keyword_tokens(context)) if fold and words else set()  # the context's words' stems

    def stemmed(d: Detail) -> bool:  # each of the name's words (its function words aside) by its stem
        return bool(held) and fold is not None and fold(t for t in keyword_tokens(d.text) if t not in function) <= held

    return [d.text for d in gone
            if not (d.kind == "name" and (first and d.text == first[0] or _near(d.key, words, function)
                                          or stemmed(d)
                                          or (whole is not None and _near(d.key, whole.words, function))))
            and not (d.kind == "number" and _spelled(d.key, question))]


_SMALL = {str(i) for i in range(1, 11)}


def _spelled(value: str, question: str) -> bool:
    """A number from one to ten that ``question`` writes only as a word."""
    return value in _SMALL and not re.search(rf"(?<![\w.,]){value}(?![\w]|[.,]\d)", question)


def _near(key: str, words: AbstractSet[str], skip: AbstractSet[str] = frozenset()) -> bool:
    """Every word of a name (normalised; its of, the, and, de aside) is in ``words``, or is a word of 5 letters or
    more that one of ``words`` nearly is: the same but for its ending (its first 5 letters or more shared, all but
    the last of the shorter word's: Milan / Milano, Japan / Japanese, Buddhism / Buddhist), or a misspelling of it
    (one letter off, two in a word of 9 or more). ``skip``: words that need not be there (the question's language's
    function words)."""
    def near(w: str) -> bool:
        if w in words or w in skip:
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


def shortlist(question: str, pool: list[Piece], size: int, typed: Sequence[int] = (),
              stem: Callable[[str], str] | None = None) -> list[Piece]:
    """The ``size`` candidates that BM25 over the candidates (and, on ties, their passage's rank and place) puts
    first, in passage order: only these are embedded, which bounds the mode's time (an encoder pass per candidate
    is what costs). With ``typed`` (which candidates hold what the question asks for: 0, 1, or 2 where they hold it
    best), the first ``size // 2`` of those that BM25 left out come too, the best holders first: the answer is looked
    for in every sentence of the passages. ``stem``: the question's language's (`declrag.text.stems.stemmer`), by
    which BM25 then counts words: "Варшаве" finds "Варшава"."""
    if len(pool) <= size:
        return pool
    if stem is None:
        scores = KeywordIndex([reading(p.text) for p in pool]).scores(question)
    else:  # by stems: each text (and the question) as its words' stems, in order
        def stemmed(text: str) -> str:
            return " ".join(map(stem, keyword_tokens(text)))
        scores = KeywordIndex([stemmed(reading(p.text)) for p in pool]).scores(stemmed(question))
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
            calibrate: Callable[[np.ndarray], np.ndarray] | None = None, languages: Sequence[str] = ()) -> Extract:
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
    (`declrag.embed.embedder.Embedder.calibrate`). ``languages``: each passage's language ("" not known), which
    tells the language of a question too short to tell alone (`declrag.text.stopwords.question_language`): its
    question words (`declrag.pipeline.stages.generate`), function words and stems (`declrag.text.stems`) are that
    language's."""
    if documents is not None:  # read once a passage: the naming words and the detail rule both ask
        documents = cache(documents)
    language = question_language(question, frozenset(languages))  # the passages' languages tell a short one
    kind = answer_kind(question, language) if type_weight else None
    every = candidates(passages, max_piece_chars, wrapped, headings)
    # scored as read (`declrag.text.reading`), cited as is; a code block's line with the line that says what it is
    read = {(p.n, p.start): reading(f"{p.lead}\n{p.text}" if p.lead else p.text) for p in every}
    asked = {d.key for d in details(question)} if kind else set()
    typed = [2 if kind == "command" and p.code else int(holds_kind(read[p.n, p.start], kind, question, asked, language))
             for p in every] if kind else []  # 2: a code block's line, for a command: looked at first
    holds = {(p.n, p.start) for p, t in zip(every, typed) if t}
    pool = shortlist(question, every, embed_at_most, typed, stemmer(language))
    if not pool:
        return Extract([], "the passages hold no sentence")
    sims = embed([read[p.n, p.start] for p in pool]) @ np.asarray(query_vector, dtype=np.float32)
    sims = calibrate(sims) if calibrate is not None else sims
    fold = stems(language)  # "Варшаве" asks about "Варшава"
    q_words = content_words(question) - stopwords(language)  # "der", "и" are no content
    q_words = fold(q_words) if fold else q_words
    passages = [reading(p) for p in passages]  # the rules below read words, not spans
    naming = _naming(question, passages, identities, documents)
    named = {n: content_words(_of(identities, n)) | naming(n) for n in {p.n for p in pool}}  # once a passage
    lex = [_overlap(q_words, read[p.n, p.start], named[p.n], fold) for p in pool]
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
        lacks = _lacking(question, passages, identities, documents, language)
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
             documents: Callable[[int], str] | None, language: str) -> Callable[[int], list[str]]:
    """For passage n, the details of ``question`` that neither it, its identity, nor its whole document mention
    (`missing_details`), found once a passage."""
    memo: dict[int, list[str]] = {}

    def lacks(n: int) -> list[str]:
        if n not in memo:
            here = f"{passages[n - 1]}\n{_of(identities, n)}"
            memo[n] = missing_details(question, here, language=language)
            if memo[n] and documents is not None:
                memo[n] = missing_details(question, here, documents(n), language)
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
