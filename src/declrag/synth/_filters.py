"""The filters of `declrag synth` (wording, language, duplicates, the round trip; docs/guides/synth.md), each
counted in the report with examples of what it removed, and the grading that adds gold beyond the seed passage.

Judged gold (`grade`): a synthetic question is often answered by other documents too, and a set that counts only
its seed as relevant ranks systems badly, so the top candidates of the keyword, vector and hybrid legs are pooled
and graded. The round trip asks for both legs so that the set does not simply favour the retriever that filtered it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Collection
from typing import Any, Protocol

import numpy as np

from ..config import LMConfig
from ..lm import check_lm
from ..lm.prompts import LMPrompt, spec
from ..stores.base import Store
from ..text.keywords import STOPWORDS_EN, tokenize
from ..text.normalize import squad_normalize
from ._generate import Candidate

DEDUP_COSINE = 0.95
FILTERS = ("wording", "language", "duplicates", "round_trip")  # the names `synthesize(skip=...)` switches off
ROUND_TRIP_K = 20
POOL_K = 5  # per leg, for grading
ENGLISH_RARE, ENGLISH_COMMON = 0.05, 0.2  # shares of English function words: a non-English text, an English one
# a question that only makes sense beside its passage, or that is about the task rather than the subject
_PASSAGE_WORDING = re.compile(
    r"\b(according to|in|from|of|about|by) (the|this|that|these|above|given) (text|passage|document|article|"
    r"context|excerpts?|paragraph|summary|sentence)s?\b|"
    r"\b(the|this|that) (text|passage|excerpt|paragraph|author|sentence) (says?|states?|mentions?|describes?|"
    r"suggests?|discusses?|is about)\b|"
    r"\b(this|that|the|these|above|given) (passage|excerpts?|paragraph)\b|"
    r"\b(this|that|the|your|my|next) (question|answer)\b",
    re.I)


class Drop(Protocol):
    def __call__(self, reason: str, c: Candidate) -> None: ...


class QueryEmbedder(Protocol):
    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


class QueryVectors:
    """Each question embedded once per run however many filters ask (dedup, round trip, grading)."""

    def __init__(self, emb: QueryEmbedder):
        self.emb, self.seen = emb, dict[str, np.ndarray]()

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        if todo := [t for t in dict.fromkeys(texts) if t not in self.seen]:
            self.seen.update(zip(todo, self.emb.embed_queries(todo)))
        return np.stack([self.seen[t] for t in texts])


def script(text: str) -> str:
    """The writing system most of the text's letters are in (LATIN, CYRILLIC, CJK, ARABIC, ...), from their Unicode
    names; "" for text without letters."""
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            key = "CJK" if name.startswith(("CJK", "HIRAGANA", "KATAKANA")) else name.split(" ")[0]
            counts[key] = counts.get(key, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else ""


def english_share(text: str) -> float:
    words = re.findall(r"[^\W\d_]+", text.lower())
    return sum(w in STOPWORDS_EN for w in words) / len(words) if words else 0.0


def language_problem(question: str, passage: str) -> str | None:
    """Why the question is not in its passage's language, as far as a check without a language model can tell:
    another writing system, or English function words in a question whose Latin-script passage has almost none."""
    q, p = script(question), script(passage)
    if q and p and q != p:
        return f"question not in its passage's writing system ({q.lower()} vs {p.lower()})"
    if p == "LATIN" and english_share(passage) < ENGLISH_RARE and english_share(question) >= ENGLISH_COMMON:
        return "question in English, its passage is not"
    return None


def reason_filter(reason: str) -> str | None:
    """The filter (in `FILTERS`) a removal reason of the report comes from; None for generation's own drops."""
    for prefix, name in (("passage-dependent", "wording"), ("question not in its passage", "language"),
                         ("question in English", "language"), ("exact duplicate", "duplicates"),
                         ("near duplicate", "duplicates"), ("round trip", "round_trip")):
        if reason.startswith(prefix):
            return name
    return None


def normalize(question: str) -> str:
    return " ".join(tokenize(question))


def wording_and_duplicates(cands: list[Candidate], emb: QueryEmbedder, drop: Drop,
                           passage_of: Callable[[Candidate], str] | None = None,
                           skip: Collection[str] = ()) -> list[Candidate]:
    """The wording, language (with ``passage_of``, the text a question was written from) and duplicate filters;
    those named in ``skip`` (`FILTERS`) are switched off."""
    kept: list[Candidate] = []
    seen: set[str] = set()
    for c in cands:
        if "wording" not in skip and _PASSAGE_WORDING.search(c.question):
            drop("passage-dependent wording", c)
        elif ("language" not in skip and passage_of is not None
              and (why := language_problem(c.question, passage_of(c)))):
            drop(why, c)
        elif "duplicates" not in skip and ((key := normalize(c.question)) in seen or not key):
            drop("exact duplicate", c)
        else:
            if "duplicates" not in skip:
                seen.add(key)
            kept.append(c)
    if not kept or "duplicates" in skip:
        return kept
    vecs = emb.embed_queries([c.question for c in kept])
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    unique: list[int] = []
    for i, c in enumerate(kept):
        sim = float(np.max(vecs[unique] @ vecs[i])) if unique else 0.0
        if sim >= DEDUP_COSINE:
            drop(f"near duplicate (cosine >= {DEDUP_COSINE})", c)
            continue
        c.scores["max_cosine_to_kept"] = round(sim, 4)
        unique.append(i)
    return [kept[i] for i in unique]


def duplicate_share(questions: list[str], emb: QueryEmbedder, cosine: float) -> dict[str, Any]:
    """How much of a finished set is still duplicated, measured below the filter's own threshold: the share of
    questions whose normalized text, or whose embedding at cosine >= ``cosine``, matches an earlier question's."""
    if not questions:
        return {"questions": 0, "exact": 0.0, "near": 0.0, "cosine": cosine}
    keys = [normalize(q) for q in questions]
    exact = len(keys) - len(set(keys))
    vecs = emb.embed_queries(questions)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    near = sum(float(np.max(vecs[:i] @ vecs[i])) >= cosine for i in range(1, len(vecs)))  # one before it
    return {"questions": len(questions), "exact": round(exact / len(keys), 4), "near": round(near / len(keys), 4),
            "cosine": cosine}


def _ranked_docs(hits) -> list[str]:
    return list(dict.fromkeys(h.doc_id for h in hits))


def round_trip(cands: list[Candidate], store: Store, emb: QueryEmbedder, drop: Drop,
               found_by: dict[str, int]) -> list[Candidate]:
    """Keep an answerable question whose source document is in the top ``ROUND_TRIP_K`` of the keyword or the
    vector leg (each leg's rank recorded; None: not found). Unanswerable questions have no source to find."""
    if not cands:
        return cands
    vecs = emb.embed_queries([c.question for c in cands])
    out = []
    for c, v in zip(cands, vecs):
        if not c.answerable:
            out.append(c)
            continue
        ranks: dict[str, int | None] = {}
        for leg, docs in (("keyword", _ranked_docs(store.keyword_search(c.question, ROUND_TRIP_K))),
                          ("vector", _ranked_docs(store.vector_search(v, ROUND_TRIP_K)))):
            ranks[leg] = docs.index(c.doc_id) + 1 if c.doc_id in docs else None
        c.scores["round_trip_rank"] = ranks
        found = [leg for leg, r in ranks.items() if r is not None]
        if not found:
            drop(f"round trip (source not in the top {ROUND_TRIP_K} of either leg)", c)
            continue
        found_by["+".join(found)] = found_by.get("+".join(found), 0) + 1
        out.append(c)
    return out


def pool(question: str, vec: np.ndarray, store: Store) -> list[str]:
    """The top ``POOL_K`` documents of the keyword, vector and hybrid legs, in that order, each once."""
    return list(dict.fromkeys(_ranked_docs(store.keyword_search(question, POOL_K * 3))[:POOL_K]
                              + _ranked_docs(store.vector_search(vec, POOL_K * 3))[:POOL_K]
                              + _ranked_docs(store.hybrid_search(question, vec, POOL_K * 3))[:POOL_K]))


def containing(docs: list[str], answers: tuple[str, ...], normalized: Callable[[str], str]) -> list[str]:
    """The documents whose text (``normalized``: a document id -> its SQuAD-normalized text) contains one of the
    answers, normalized too: the deterministic grader."""
    norm = [a for a in (squad_normalize(x) for x in answers) if a]
    return [d for d in docs if any(a in normalized(d) for a in norm)]


def _normalized(text_of: Callable[[str], str]) -> Callable[[str], str]:
    """``text_of`` normalized once per document (pools of many questions share documents)."""
    return functools.cache(lambda d: squad_normalize(text_of(d)))


class LMGrader:
    """Grades a question's whole pool in one LM call (`signatures/synth_grade.yaml`): the passages numbered, the
    reply the numbers of those that answer it. ``passage_chars`` of each document are shown."""

    def __init__(self, route: str, passage_chars: int = 600):
        cfg = LMConfig(route=route, temperature=0.0, max_tokens=32)
        check_lm(cfg)
        self.route, self.chars = route, passage_chars
        self.stage = LMPrompt("synth", spec("synth_grade"), "default", cfg)

    def __call__(self, question: str, docs: list[str], text_of: Callable[[str], str]) -> list[str]:
        numbered = "\n".join(f"[{i}] {' '.join(text_of(d).split())[: self.chars]}" for i, d in enumerate(docs, 1))
        reply = str(self.stage.run(question=question, passages=numbered).get("relevant") or "")
        picked = {int(x) for x in re.findall(r"\d+", reply)}
        return [d for i, d in enumerate(docs, 1) if i in picked]


def grade(cands: list[Candidate], store: Store, emb: QueryEmbedder, text_of: Callable[[str], str],
          grader: LMGrader | None = None) -> int:
    """Judged gold: for each question with a reference answer, the documents of its `pool` that the grader calls
    relevant are gold too (grade 1): with no ``grader``, those that contain the answer; with an `LMGrader`, those
    it picks (one call per question). Returns how many gold documents this added beyond the seeds."""
    todo = [c for c in cands if c.answerable and c.answers]
    if not todo:
        return 0
    vecs = emb.embed_queries([c.question for c in todo])
    normalized = _normalized(text_of)
    added = 0
    for c, v in zip(todo, vecs):
        pooled = pool(c.question, v, store)
        relevant = grader(c.question, pooled, text_of) if grader else containing(pooled, c.answers, normalized)
        extra = [d for d in relevant if d not in c.gold]
        for d in extra:
            c.gold[d] = 1
        c.scores["judged"] = {"pool": len(pooled), "added": extra,
                              "grader": f"LM {grader.route}" if grader else "answer in document"}
        added += len(extra)
    return added


def grader_agreement(questions: list[str], answers: list[tuple[str, ...]], golds: list[dict[str, int]],
                     store: Store, emb: QueryEmbedder, text_of: Callable[[str], str]) -> dict[str, Any]:
    """How the deterministic grader agrees with real relevance judgements on the same pools: of the pooled
    documents it grades relevant, the share the qrels call relevant (precision), and of the pooled documents the
    qrels call relevant, the share it grades relevant (recall)."""
    vecs = emb.embed_queries(questions)
    normalized = _normalized(text_of)
    graded = judged = both = 0
    for q, a, g, v in zip(questions, answers, golds, vecs):
        pooled = pool(q, v, store)
        mine, theirs = set(containing(pooled, a, normalized)), {d for d in pooled if d in g}
        graded, judged, both = graded + len(mine), judged + len(theirs), both + len(mine & theirs)
    return {"questions": len(questions), "graded_relevant": graded, "qrels_relevant_in_pool": judged,
            "precision": round(both / graded, 4) if graded else None,
            "recall": round(both / judged, 4) if judged else None}
