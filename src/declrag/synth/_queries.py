"""The question writers of `declrag synth` that need no model (``cloze``, ``ict``, ``keywords``, ``mixed``; the
table in docs/guides/synth.md says what each writes and what its gold is). The LM writers are in `generate` and
`inpars`.

``ict`` (the inverse cloze task, Lee et al., ACL 2019) removes each query's sentence from the copy of the corpus
the set is scored against, so that no passage matches it word for word. ``mixed`` is half ``ict``, half
``keywords``: keyword queries share their words with the passage, inverse-cloze ones share none, and real
questions lie between; a set of both ranks retrieval settings closer to them than either alone.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..text.keywords import tokenize
from ..text.sentences import sentence_spans
from ..types import Chunk, Document
from ._generate import Candidate, content_words


@dataclass(frozen=True)
class Generator:
    """A question writer: what it is, whether it needs ``--model`` and whether it writes reference answers."""

    name: str
    model: bool
    answers: bool
    about: str


GENERATORS = {g.name: g for g in (
    Generator("ict", False, False, "inverse cloze: a whole sentence, removed from the set's copy of the corpus"),
    Generator("mixed", False, False, "half inverse cloze, half keyword queries, over one copy of the corpus"),
    Generator("cloze", False, False, "cropped sentences and document titles"),
    Generator("keywords", False, False, "the 3-5 most salient terms (tf-idf) of a three-sentence window"),
    Generator("inpars", True, False, "few-shot queries from an LM (InPars); base models complete the prompt"),
    Generator("lm", True, True, "typed questions (factoid, explanatory, unanswerable, two documents) with answers"),
)}
DEFAULT_OFFLINE = "mixed"  # the no-model writer that ranks settings best (README, "Synthetic sets against real ones")
DEFAULT_WITH_MODEL = "lm"
CLOZE_KEEP = 0.6  # the share of a sentence's content words a cloze query keeps
SENTENCE_WORDS = (6, 40)  # content words of a sentence a query is made from
KEYWORDS = (3, 5)  # terms of a keyword query


def _sentences(passage: str) -> list[tuple[int, int]]:
    lo, hi = SENTENCE_WORDS
    return [(a, b) for a, b in sentence_spans(passage) if lo <= len(content_words(passage[a:b])) <= hi]


def cloze_query(passage: str, offset: int, rng: random.Random) -> tuple[str, tuple[int, int]] | None:
    """A pseudo-query from a sentence of the passage: a random ``CLOZE_KEEP`` share of its content words, in order
    (the inverse cloze task, cropped), and the sentence's span in the document (``offset``: the passage's)."""
    spans = _sentences(passage)
    if not spans:
        return None
    a, b = rng.choice(spans)
    words = content_words(passage[a:b])
    keep = sorted(rng.sample(range(len(words)), max(4, math.ceil(CLOZE_KEEP * len(words)))))
    return " ".join(words[i] for i in keep), (offset + a, offset + b)


def title_query(doc: Document) -> str | None:
    """A document's title as a query, where it is a real title (at least three words, not a file name)."""
    title = " ".join(doc.title.split())
    stem = Path(doc.source).stem if doc.source else ""
    if len(tokenize(title)) < 3 or title == stem or "/" in title or title.endswith((".pdf", ".md", ".txt")):
        return None
    return title


def title_queries(docs: Sequence[Document], most: int, seed: int, normalize: Callable[[str], str]) -> list[Candidate]:
    """At most ``most`` title questions (about their whole document), from documents with a real title of their
    own: a title names its document only where no other document has it (SQuAD's paragraphs share their
    article's)."""
    titles = {d.id: t for d in docs if (t := title_query(d))}
    counts = Counter(normalize(t) for t in titles.values())
    titled = [d for d in docs if d.id in titles and counts[normalize(titles[d.id])] == 1]
    random.Random(seed).shuffle(titled)
    return [Candidate(question=titles[d.id], kind="title", doc_id=d.id, span=(0, len(d.text))) for d in titled[:most]]


# --------------------------------------------------------------------------------------------- keywords
class Salience:
    """tf-idf of terms, idf over the corpus's passages."""

    def __init__(self, passages: Sequence[str]):
        df: Counter[str] = Counter()
        for p in passages:
            df.update({w.lower() for w in content_words(p)})
        self.n = len(passages)
        self.df = df

    def query(self, text: str, rng: random.Random) -> str | None:
        words = [w for w in content_words(text) if len(w) > 2 and not w.isdigit()]
        tf = Counter(w.lower() for w in words)
        if len(tf) < KEYWORDS[0]:
            return None
        score = {w: c * math.log((1 + self.n) / (1 + self.df.get(w, 0))) for w, c in tf.items()}
        top = set(sorted(score, key=lambda w: (-score[w], w))[: rng.randint(*KEYWORDS)])
        out: list[str] = []
        for w in words:  # in the order they occur, each once
            if w.lower() in top and w.lower() not in {o.lower() for o in out}:
                out.append(w)
        return " ".join(out)


def keyword_query(doc: Document, chunk: Chunk, salience: Salience, rng: random.Random
                  ) -> tuple[str, tuple[int, int]] | None:
    """Salient terms of a window of three sentences of ``chunk`` (centred on a drawn one), and the window's span."""
    spans = sentence_spans(doc.text, chunk.start, chunk.end)
    usable = [i for i, (a, b) in enumerate(spans)
              if SENTENCE_WORDS[0] <= len(content_words(doc.text[a:b])) <= SENTENCE_WORDS[1]]
    if not usable:
        return None
    i = rng.choice(usable)
    a, b = spans[max(i - 1, 0)][0], spans[min(i + 1, len(spans) - 1)][1]
    made = salience.query(doc.text[a:b], rng)
    return (made, (a, b)) if made else None


# --------------------------------------------------------------------------------------------- inverse cloze
def ict_queries(docs: Sequence[Document], passages: list[tuple[Document, Chunk]], order: Sequence[int], want: int,
                seed: int) -> tuple[list[Candidate], list[Document]]:
    """Up to ``want`` inverse-cloze questions (one sentence of each passage in ``order``) and the documents with
    those sentences removed; each question's gold span is its neighbours' in the new text."""
    sentences: dict[str, list[tuple[int, int]]] = {}
    chosen: dict[str, set[int]] = {}
    picks: list[tuple[str, int]] = []
    for i in order:
        if len(picks) >= want:
            break
        doc, chunk = passages[i]
        spans = sentences.setdefault(doc.id, sentence_spans(doc.text))
        taken = chosen.setdefault(doc.id, set())
        inside = [j for j, (a, b) in enumerate(spans) if chunk.start <= a and b <= chunk.end
                  and SENTENCE_WORDS[0] <= len(content_words(doc.text[a:b])) <= SENTENCE_WORDS[1]
                  and not {j - 1, j, j + 1} & taken and 0 < j < len(spans) - 1]
        if inside:
            j = random.Random(f"{seed}:{i}").choice(inside)
            taken.add(j)
            picks.append((doc.id, j))
    by_id = {d.id: d for d in docs}
    new_docs, shift = [], {}
    for d in docs:
        if not chosen.get(d.id):
            new_docs.append(d)
            continue
        cut = sorted(_gap(d.text, sentences[d.id], j) for j in chosen[d.id])
        pieces, removed, at = [], [], 0
        for a, b in cut:
            pieces.append(d.text[at:a])
            removed.append([_moved(a, cut), d.text[a:b]])
            at = b
        pieces.append(d.text[at:])
        new_docs.append(replace(d, text="".join(pieces), metadata={**d.metadata, "removed": removed}))
        shift[d.id] = cut
    out = []
    for did, j in picks:
        spans, text = sentences[did], by_id[did].text
        a, b = spans[j]
        start, end = _moved(spans[j - 1][0], shift[did]), _moved(spans[j + 1][1], shift[did])
        out.append(Candidate(question=" ".join(text[a:b].split()), kind="ict", doc_id=did, span=(start, end)))
    return out, new_docs


def _gap(text: str, spans: list[tuple[int, int]], j: int) -> tuple[int, int]:
    """The characters removing sentence ``j`` takes out: the sentence and the spaces after it (up to the next)."""
    return spans[j][0], spans[j + 1][0] if j + 1 < len(spans) and spans[j + 1][0] >= spans[j][1] else spans[j][1]


def _moved(pos: int, cut: list[tuple[int, int]]) -> int:
    """Where ``pos`` of the original text is once the ranges ``cut`` are removed (``pos`` in none of them)."""
    return pos - sum(b - a for a, b in cut if b <= pos)


def mixed_queries(docs: Sequence[Document], passages: list[tuple[Document, Chunk]], order: Sequence[int], want: int,
                  seed: int, salience: Salience) -> tuple[list[Candidate], list[Document]]:
    """Half inverse-cloze questions (the even places of ``order``), half keyword queries (the odd ones: other
    passages, so that no keyword window holds a removed sentence), all over the inverse cloze's copy."""
    ict, copies = ict_queries(docs, passages, order[0::2], (want + 1) // 2, seed)
    shift = {d.id: _cuts(d) for d in copies}
    out = list(ict)
    for i in order[1::2]:
        if len(out) >= want:
            break
        doc, chunk = passages[i]
        if (made := keyword_query(doc, chunk, salience, random.Random(f"{seed}:{i}"))) is not None:
            a, b = made[1]
            out.append(Candidate(question=made[0], kind="keywords", doc_id=doc.id,
                                 span=(_moved(a, shift[doc.id]), _moved(b, shift[doc.id]))))
    return out, copies


def _cuts(copy: Document) -> list[tuple[int, int]]:
    """The ranges of the original text a copy's ``metadata["removed"]`` took out (`Document.original`)."""
    out, before = [], 0
    for pos, text in copy.metadata.get("removed", []):
        out.append((pos + before, pos + before + len(text)))
        before += len(text)
    return out
