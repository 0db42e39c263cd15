"""The answer written from numbered passages with [n] citations (`Generator`): by the LM, extracted from the
passages, or the LM's checked against them (``generate.mode``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import dspy
import numpy as np

from ....config import GenerateConfig, LMConfig, ProgramConfig, answer_mode, resolve_mode
from ....embed.embedder import Embedder
from ....ingest.headers import heading_names, identity, shown_header
from ....lm import override_lm
from ....lm.prompts import LMPrompt, SignatureSpec
from ....types import Hit
from .._base import Building, PipelineStage, embedding_time
from .._state import Draft, State
from ..history import transcript, window
from ._echo import Prompt
from ._extract import Extract, Piece, check, extract, shown
from ._names import whole, whole_document
from ._postprocess import attribute, is_abstention, resolve_citations

VETTED = "declrag.answer"  # the stream's name for an answer the program made (extractive) or checked (verified)


NO_PASSAGES = "no passage was found"


class Generator(PipelineStage):
    """Answers from numbered passages with [n] citations; the strict prompt is used to regenerate. An LM output that
    echoes the prompt or copies the passages is replaced as ``generate.caught`` says
    (`declrag.pipeline.stages.generate`)."""

    name, phase, section = "generate", "answer", "generate"
    reads: ClassVar[tuple[str, ...]] = ("generate", "history")
    prompts: ClassVar[tuple[str, ...]] = ("generate",)
    variants: ClassVar[dict[str, tuple[str, ...]]] = {"generate.variant": ("generate",)}
    # what is read of the conversation (``history.generate_turns``, ``generate_chars``): set by `build`
    conversation_limits: tuple[int, int] = (4, 1500)

    @classmethod
    def build(cls, program: Building) -> Generator:
        c = program.config
        g = cls(c.generate, c.stage_lm("generate"), program.specs)
        g.embedder, g.document_texts = program.embedder, program.store.document_texts
        g.conversation_limits = (c.history.generate_turns, c.history.generate_chars)
        return g

    @classmethod
    def lm_stages(cls, config: ProgramConfig) -> list[str]:
        return ["generate"] if answer_mode(config) != "extractive" else []

    def describe(self) -> Any:
        mode, variant = self.mode(), self.cfg.variant
        return variant if mode == "lm" else mode if mode == "extractive" else f"verified/{variant}"

    def attributes(self, state: State) -> dict[str, Any]:
        return {"declrag.generate.mode": self.mode()}

    def run(self, state: State, span: Any) -> None:
        """The draft answer from ``state.passages``: the abstention, with no LM call, when none is close enough
        (``state.abstain_below``: `below`); a quoted sentence that ran past its passage widens it. Leaves the judge
        what it reads."""
        q = state.queries
        subs = q.sub_questions if q is not None else []
        question = state.question if not subs else state.question + "\n(Sub-questions: " + "; ".join(subs) + ")"
        state.said, passages = self.said(state.history), state.passages
        if self.below(q.texts[0] if q is not None else state.question, passages, state.abstain_below):
            state.below_reason = f"best passage similarity below {state.abstain_below}"
            draft = Draft(self.cfg.abstain_phrase, True, [], reason="no passage is close enough to the question")
        else:
            draft = self(question=question, passages=passages, conversation=state.said)
        span.set_attribute("declrag.abstained", draft.abstained)
        if draft.widened:  # a quoted sentence ran past its passage: the passage grows to hold it
            state.passages = passages = [draft.widened.get(n, h) for n, h in enumerate(passages, 1)]
        if draft.caught:  # the LM's output echoed the prompt or copied the passages: what replaced it
            span.set_attribute("declrag.generate.caught", draft.caught["kind"])
            span.set_attribute("declrag.generate.replaced_by", draft.caught["replaced_by"])
        state.draft, state.context = draft, self.context(passages)
        state.rewrite = lambda: self(question=question, passages=passages, strict=True, conversation=state.said)

    def below(self, query: str, passages: list[Hit], threshold: float | None) -> bool:
        """The deterministic abstention: the best passage's cosine similarity to ``query`` (chunk embeddings, from the
        cache; on the default model's scale) is below ``threshold`` (``retrieve.abstain_below``; None: never)."""
        if threshold is None:
            return False
        if not passages:
            return True
        assert self.embedder is not None  # set by `build`
        with embedding_time():
            sims = self.embedder.embed_documents([h.chunk.text for h in passages]) @ self.embedder.embed_query(query)
        return float(np.max(self.embedder.calibrate(sims))) < threshold  # `declrag.embed._calibration`

    def said(self, history: tuple[Any, ...]) -> str | None:
        """What this stage reads of the conversation: every system turn (an instruction that stays in force however
        long the conversation grows), then the most recent user and assistant turns, within ``history.generate_turns``
        turns and ``history.generate_chars`` characters for each of the two parts."""
        turns, chars = self.conversation_limits
        system = window([t for t in history if t.role == "system"], 1_000, chars)
        recent = window(history, turns, chars, roles=("user", "assistant"))
        return transcript([*system, *recent]) or None

    def __init__(self, cfg: GenerateConfig, lm: LMConfig, specs: dict[str, SignatureSpec]):
        super().__init__()
        self.cfg = cfg
        spec = specs["generate"].model_copy(update={"demos": specs["generate"].demos[: cfg.demos]})
        self.main = LMPrompt("generate", spec, cfg.variant, lm, abstain=cfg.abstain_phrase)
        self.strict = LMPrompt("generate", spec, "strict" if "strict" in spec.variants else cfg.variant, lm,
                            abstain=cfg.abstain_phrase)
        self.embedder: Embedder | None = None
        # the store's `document_texts` (set by RAGProgram): a passage's whole document, for the detail rule
        self.document_texts: Callable[[Sequence[str]], dict[str, str]] | None = None
        self.knn_pool: list[dict[str, str]] = []
        self.knn_k = 0
        self._knn_vecs: np.ndarray | None = None

    def set_knn_pool(self, pool: list[dict[str, str]], k: int) -> None:
        """Per-question demos: the ``k`` pool entries whose questions are nearest to the question asked."""
        self.knn_pool, self.knn_k, self._knn_vecs = list(pool), k, None

    def _knn_demos(self, question: str) -> list[dspy.Example] | None:
        if not self.knn_pool or not self.knn_k or self.embedder is None:
            return None
        if self._knn_vecs is None:
            self._knn_vecs = self.embedder.embed_queries([d["question"] for d in self.knn_pool])
        sims = self._knn_vecs @ self.embedder.embed_query(question)
        return [dspy.Example(**self.knn_pool[i]) for i in sims.argsort()[::-1][: self.knn_k]]

    def mode(self) -> str:
        """The mode this stage answers in now: ``generate.mode``, with ``auto`` resolved (`config.answer_mode`:
        an LM set in code with `declrag.lm.using_lm` counts as a model named)."""
        return resolve_mode(self.cfg.mode, self.main.lm_config.route, override_lm() is not None)

    def shown(self, passages: list[Hit]) -> list[str]:
        """Each passage's text as the prompt shows it (cut to ``max_passage_chars``, whitespace collapsed)."""
        lim = self.cfg.max_passage_chars
        return [" ".join(h.text[:lim].split()) for h in passages]

    def context(self, passages: list[Hit]) -> str:
        return "\n\n".join(f"[{i}] " + (f"({label}) " if (label := shown_header(h.chunk)) else "") + text
                             for i, (h, text) in enumerate(zip(passages, self.shown(passages)), 1))

    def prompt(self, question: str, passages: list[Hit], strict: bool = False) -> Prompt:
        """What the LM is asked, for telling an echo of it (`declrag.pipeline.stages.generate`): the question, the
        passages as
        shown, each with its label (its document's title and section), the instructions of the prompt used."""
        instructions = (self.strict if strict else self.main).predict.signature.instructions or ""
        return Prompt(question, self.shown(passages), instructions, [shown_header(h.chunk) for h in passages])

    def forward(self, question: str, passages: list[Hit], strict: bool = False, allow_empty: bool = False,
                conversation: str | None = None) -> Draft:
        """``allow_empty`` asks the model even with no passages (robustness probes); otherwise no passages
        means the abstention phrase without an LM call. ``conversation``: the earlier turns as a transcript,
        read when the prompt declares a ``conversation`` input (prompts saved before conversations do not)."""
        phrase = self.cfg.abstain_phrase
        if not passages and not allow_empty:
            return Draft(phrase, True, [], reason=NO_PASSAGES)
        mode = self.mode()
        if mode == "extractive":
            return self._extractive(question, passages, conversation)
        if mode == "lm":
            return self._written(question, passages, strict, conversation)
        gate = self._extract(question, passages, conversation, max_sentences=10, order="score") if passages else None
        if gate is not None and not gate.pieces:  # the passages do not answer it: no LM call, no words to check
            return Draft(phrase, True, [], checked={"mode": "verified", "sentences": 0, "dropped": 0, "replaced": 0,
                                                    "recited": 0, "reason": gate.reason}, reason=gate.reason)
        draft = self._written(question, passages, strict, conversation)
        if draft.caught:  # what replaced an echo or a copy is not checked again
            return draft
        return self._verified(draft, gate.pieces if gate else [], passages)

    def _written(self, question: str, passages: list[Hit], strict: bool, conversation: str | None,
                 retry: bool = True) -> Draft:
        """The LM's answer, its citations resolved (or attributed, when it cited nothing); an echo or a copy
        replaced (`_replaced`)."""
        phrase = self.cfg.abstain_phrase
        context = self.context(passages) if passages else "(no passages)"
        demos = self._knn_demos(question)
        extra: dict[str, Any] = {"demos": demos} if demos is not None else {}
        if conversation and "conversation" in self.main.spec.inputs:
            extra["conversation"] = conversation
        pred = (self.strict if strict else self.main).run(question=question, context=context, **extra)
        raw = (pred.answer or "").strip()
        if is_abstention(raw, phrase):
            return Draft(phrase, True, [], raw=raw, reason="the LM found no answer in the passages")
        if got := self.prompt(question, passages, strict).caught(raw):
            return self._replaced(got.to_dict(), question, passages, strict, conversation, raw, retry)
        cited = resolve_citations(raw, len(passages))
        if cited.used:
            return Draft(cited.text, False, cited.used, removed=cited.removed, raw=raw)
        parts, attributed = [], []
        for sentence, n in attribute(cited.text, [h.text for h in passages]):
            parts.append(f"{sentence} [{n}]" if n else sentence)
            if n and n not in attributed:
                attributed.append(n)
        return Draft(" ".join(parts) or cited.text, False, [], attributed, cited.removed, raw)

    def _replaced(self, got: dict[str, str], question: str, passages: list[Hit], strict: bool,
                  conversation: str | None, raw: str, retry: bool) -> Draft:
        """What the user gets instead of an output that echoed the prompt or copied the passages (``got``): one more
        try with the strict prompt (``generate.caught: retry``, when this was not already it), else the extractive
        answer (``extract``; it abstains when no sentence answers) or the abstention (``abstain``). The draft's
        ``caught`` says which, ``checked`` too."""
        action = self.cfg.caught
        if action == "retry" and retry and not strict:
            again = self._written(question, passages, True, conversation, retry=False)
            if not again.caught:
                return replace(again, caught={**got, "replaced_by": "retry"},
                               checked={**(again.checked or {"mode": self.mode()}), "caught": got["kind"],
                                        "replaced_by": "retry"})
            got = {**got, "retry": again.caught["why"]}
        if action == "abstain":
            draft = Draft(self.cfg.abstain_phrase, True, [], raw=raw, reason=f"the LM's answer {got['why']}")
        else:
            draft = self._extractive(question, passages, conversation) if passages else \
                Draft(self.cfg.abstain_phrase, True, [], reason=NO_PASSAGES)
        by = "abstention" if draft.abstained else "extractive"
        checked = {**(draft.checked or {}), "mode": self.mode(), "caught": got["kind"], "replaced_by": by}
        return replace(draft, raw=raw, caught={**got, "replaced_by": by}, checked=checked)

    # -- the deterministic modes (`declrag.pipeline.stages.generate`)
    # ----------------------------------------------------------
    def _texts(self, passages: list[Hit]) -> list[str]:
        return [h.text[: self.cfg.max_passage_chars] for h in passages]

    def _quotable(self, passages: list[Hit]) -> list[str]:
        """The passages' texts with their running headers and footers (`declrag.types.Chunk.running`) blanked, as
        many spaces as characters: an extractive answer never quotes a page's title line or its number, and its
        spans stay the passage's."""
        out = []
        for h, text in zip(passages, self._texts(passages)):
            shift = h.chunk.start - h.start  # the chunk's place in the passage (context expansion widens it)
            for part in filter(None, h.chunk.running.split(",")):
                a, b = (int(x) + shift for x in part.split(":"))
                a, b = max(a, 0), min(b, len(text))
                if a < b:
                    text = text[:a] + " " * (b - a) + text[b:]
            out.append(text)
        return out

    def _embed(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None  # set by RAGProgram
        with embedding_time():
            return np.asarray(self.embedder.embed_documents(texts), dtype=np.float32)

    def _query_vector(self, question: str, conversation: str | None) -> np.ndarray:
        assert self.embedder is not None
        w = self.cfg.extract.conversation_weight
        with embedding_time():
            q = np.asarray(self.embedder.embed_query(question), dtype=np.float32)
            if not conversation or w == 0:
                return q
            c = np.asarray(self.embedder.embed_query(conversation[-2000:]), dtype=np.float32)
        v = (1 - w) * q + w * c
        return v / (np.linalg.norm(v) or 1.0)

    def _calibrate(self) -> Any:
        """The embedder's cosines onto the default model's scale (`declrag.embed._calibration`)."""
        assert self.embedder is not None  # set by RAGProgram
        return self.embedder.calibrate

    def _extract(self, question: str, passages: list[Hit], conversation: str | None, **over: Any) -> Extract:
        e = self.cfg.extract
        settings = {"max_sentences": e.max_sentences, "min_score": e.min_score, "lexical_weight": e.lexical_weight,
                    "rank_weight": e.rank_weight, "order": e.order, "max_piece_chars": e.max_piece_chars,
                    "require_details": e.require_details, "embed_at_most": e.embed_at_most,
                    "type_weight": e.type_weight, "wrapped": e.whole_sentences, **over}
        texts = self.document_texts if e.document_names else None

        def document(n: int) -> str:  # passage n's whole document
            return whole_document(passages[n - 1], texts) if texts is not None else ""

        return extract(question, self._quotable(passages), self._embed, self._query_vector(question, conversation),
                       identities=[identity(h.chunk.title, h.chunk.section, h.chunk.source) for h in passages],
                       headings=[heading_names(h.chunk.title, h.chunk.section) for h in passages],
                       documents=document if texts is not None else None, calibrate=self._calibrate(),
                       languages=[h.chunk.language for h in passages], **settings)

    def _extractive(self, question: str, passages: list[Hit], conversation: str | None) -> Draft:
        """The answer in the passages' own words; streamed (as one piece) through the LM's path when a stream
        listens (`declrag.pipeline.stages.generate`)."""
        got = self._extract(question, passages, conversation)
        checked = {"mode": "extractive", "best_score": got.best, **({"reason": got.reason} if got.reason else {})}
        if not got.pieces:
            return Draft(self.cfg.abstain_phrase, True, [], checked=checked, reason=got.reason)
        widened: dict[int, Hit] = {}
        if self.cfg.extract.whole_sentences:
            got.pieces, widened = self._whole(got.pieces, passages)
        text = got.text()
        _send_answer(text)
        used = list(dict.fromkeys(p.n for p in got.pieces))
        return Draft(text, False, used, raw=text, quotes=[(p.n, p.start, p.end) for p in got.pieces], checked=checked,
                     widened=widened)

    def _whole(self, pieces: list[Piece], passages: list[Hit]) -> tuple[list[Piece], dict[int, Hit]]:
        """``pieces`` with each one that its passage's first or last characters cut widened to its whole sentences,
        from the document (`extract.whole`), and the passages that then grow to hold them (by number): what is quoted
        is what is handed over and cited, its offsets exact. Two pieces that become one sentence are quoted once."""
        def at_edge(p: Piece) -> bool:
            text = passages[p.n - 1].text[: self.cfg.max_passage_chars]
            return not (len(text) - len(text.lstrip()) < p.start and p.end < len(text.rstrip().rstrip(",;:-–—")))

        edge = [p for p in pieces if at_edge(p)]
        docs = self.document_texts(list({passages[p.n - 1].doc_id for p in edge})) \
            if edge and self.document_texts is not None else {}
        spans: list[tuple[int, int, int]] = []  # (passage, start, end) in the document
        for p in pieces:
            h = passages[p.n - 1]
            a, b = h.start + p.start, h.start + p.end
            doc = docs.get(h.doc_id) if p in edge else None
            shown = h.text[: self.cfg.max_passage_chars]
            if doc is not None and doc[h.start: h.start + len(shown)] == shown:
                a, b = whole(doc, a, b)
            if not any(n == p.n and x < b and a < y for n, x, y in spans):
                spans.append((p.n, a, b))
        widened: dict[int, Hit] = {}
        for n in {n for n, _, _ in spans}:
            h = passages[n - 1]
            mine = [(a, b) for m, a, b in spans if m == n]
            lo, hi = min([h.start] + [a for a, _ in mine]), max([h.end] + [b for _, b in mine])
            if (lo, hi) != (h.start, h.end):  # only an edge piece of a document read above widens
                widened[n] = replace(h, text=docs[h.doc_id][lo:hi], start=lo, end=hi)
        out = []
        for n, a, b in spans:
            h = widened.get(n, passages[n - 1])
            out.append(Piece(n, a - h.start, b - h.start, h.text[a - h.start: b - h.start]))
        return out, widened

    def _verified(self, draft: Draft, spare: list[Piece], passages: list[Hit]) -> Draft:
        """``draft`` with each sentence checked against its passages (`extract.check`): a supported one kept
        (cited by the passage that supports it), an unsupported one dropped or replaced by the best of ``spare``
        (the extractive candidates that clear the threshold, best first) not yet in the answer."""
        if draft.abstained:
            return replace(draft, checked={"mode": "verified", "sentences": 0, "dropped": 0, "replaced": 0,
                                           "recited": 0})
        found = check(draft.text, self._texts(passages), self._embed, calibrate=self._calibrate())
        spare = list(spare)
        parts, used, quotes, dropped, replaced, recited, why = [], [], [], 0, 0, 0, []
        for f in found:
            if f.supported and f.by is not None:
                recited += f.wrong_citation or (bool(f.cited) and f.by not in f.cited)
                parts.append(f"{f.sentence} [{f.by}]")
                used.append(f.by)
                continue
            dropped += 1
            why.append({"sentence": f.sentence[:300], "missing": f.missing[:5], "wrong_citation": f.wrong_citation})
            if self.cfg.unsupported == "extract":
                sub = next((p for p in spare if f"{shown(p.text)} [{p.n}]" not in parts), None)
                if sub is not None:
                    spare.remove(sub)
                    parts.append(f"{shown(sub.text)} [{sub.n}]")
                    used.append(sub.n)
                    quotes.append((sub.n, sub.start, sub.end))
                    replaced += 1
        checked = {"mode": "verified", "sentences": len(found), "dropped": dropped, "replaced": replaced,
                   "recited": recited, "unsupported": why[:5]}
        if not parts:
            return Draft(self.cfg.abstain_phrase, True, [], removed=draft.removed, raw=draft.raw, checked=checked,
                         reason="no sentence of the LM's answer is supported by the passages")
        _send_answer(" ".join(parts))
        return Draft(" ".join(parts), False, list(dict.fromkeys(used)), removed=draft.removed, raw=draft.raw,
                     quotes=quotes, checked=checked)


def _send_answer(text: str) -> None:
    """Put ``text`` on the answer stream, when one listens (`streaming.astream`), as the LM's tokens go."""
    stream = dspy.settings.send_stream
    if stream is None:
        return
    from dspy.streaming.messages import StreamResponse, sync_send_to_stream

    try:
        sync_send_to_stream(stream, StreamResponse(VETTED, "answer", text, is_last_chunk=True))
    except RuntimeError:  # not on a worker thread of the stream's event loop: nothing listens here
        pass
