"""`declrag compile --usage SOURCE`: the questions a served program's users asked and rated, in what ships
(docs/guides/usage.md, "Compile from usage").

SOURCE is a usage store (the SQLite file or ``postgresql+psycopg://`` URI that `declrag serve` recorded to) or the
JSONL file (or folder) that `declrag usage export` wrote. Its distinct questions (`declrag.usage.export`) become:

- **gold** where a rating says where the answer is: a helpful rating's citation span, or a corrected answer found
  (whole words) in the corpus. They are real questions, asked before anyone saw the answer.
- **fair** gold: the gold of an explored answer (its passages multileaved from the served program's ranking and its
  neighbours', `declrag.pipeline.stages.select`), and a correction (found anywhere in the corpus). A helpful rating of
  the served program's own passages names a passage that program found: it can check that another program finds it
  too, never show that the served program is better. With at least `DECIDES` fair questions, `select.by_usage`
  lets them choose among the rankers they were explored with (`rankers`), by the rule the held-out questions
  follow; with fewer, every gold question can only keep the baseline (the chosen program must not be worse on them
  by more than `select.CHECK_MARGIN`).
- They are judged on the corpus they were asked of: the served documents (a synthetic set's copy, with sentences
  taken out for its inverse-cloze questions, has them put back for them), in the program that ships.
- A span is trusted only where the compile's corpus still holds it: its document there (else ``deleted``), and the
  text at the span the text cited (its fingerprint, recorded with the answer; else ``changed``). An answer rated
  under another corpus says nothing certain about this one. Such rows are counted (``stale``), never used.
- **unrated** questions and "not helpful" ratings without a correction carry no label: counted, and kept for
  `declrag bench usage` to measure their uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..golden import Example, load_golden
from ..inputs import Turn
from ..pipeline.stages.select import settings
from ..types import GoldSpan
from ._agreement import check_questions
from ._space import _cast, _holds, apply

DECIDES = 20  # gold usage questions needed for them to decide alone what ships


@dataclass
class UsageQuestions:
    """What a usage source gives a compile: its gold questions (writer ``usage``) and the counts of the rest."""

    source: str
    gold: list[Example] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        fair = sum(bool(e.metadata.get("fair")) for e in self.gold)
        return {"source": self.source, "gold": len(self.gold), "need": DECIDES, "decides": fair >= DECIDES,
                **self.counts}


@dataclass
class Theirs:
    """The user's own questions that a compile reads beside its golden set: ``check`` (`--check-questions`: the
    file and its questions, `declrag.optimize._agreement`) and ``usage`` (`--usage`)."""

    check: tuple[str, list[Example]] | None = None
    usage: UsageQuestions | None = None

    @classmethod
    def read(cls, check: str | Path | None, usage: str | Path | None, dataset: str | None) -> Theirs | None:
        """Both read before the run folder is written: a bad file leaves nothing behind."""
        if not check and not usage:
            return None
        docs = load_golden(str(dataset)).documents
        return cls((str(check), check_questions(check, docs)) if check else None,
                   usage_questions(usage, docs) if usage else None)


def rows_of(source: str | Path) -> list[dict[str, Any]]:
    """The golden rows of a usage store or an exported JSONL (one clear error when it is neither)."""
    # imported here, not at the top: SQLAlchemy loads only for a compile that reads a usage store
    from ..usage import UsageStore, golden_rows

    text = str(source)
    path = Path(text).expanduser()
    if "://" not in text and path.is_dir():
        path = path / "questions.jsonl"
    if "://" not in text and path.suffix == ".jsonl":
        if not path.is_file():
            raise DeclragError(f"--usage {source}: no such file",
                               hint="the JSONL that `declrag usage export STORE --out SET` wrote, or the store itself")
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DeclragError(f"--usage {path}:{n}: not JSON ({e.msg})",
                                   hint="a file that `declrag usage export` wrote, one question a line") from None
        return rows
    if "://" not in text and not path.is_file():
        raise DeclragError(f"--usage {source}: no such usage store",
                           hint="the SQLite file or postgresql+psycopg:// URI that `declrag serve` printed at start-up "
                                "(records: ...), or a JSONL from `declrag usage export`")
    store = UsageStore(text, create=False)
    try:
        return golden_rows(store.records())
    finally:
        store.close()


def usage_questions(source: str | Path, documents: list) -> UsageQuestions:
    """``source``'s rows as `UsageQuestions` over the corpus the users asked them of: ``documents`` as served (a
    synthetic set's copy with sentences taken out has them put back, `Document.original`; its own questions keep
    the copy), so that no rated question loses its gold to how the set was made. A compile scores them over that
    corpus (`declrag.optimize._objective.score`). Counts, besides the ratings: ``stale`` (a cited document no longer
    in the corpus, ``deleted``; or its text there no longer the text cited, ``changed``) and ``fair``."""
    served = [d.original() for d in documents]
    by_id = named(served)
    texts = {d.id: d.text for d in served}  # where a correction is looked for
    out = UsageQuestions(str(source))
    counts = dict.fromkeys(("questions", "helpful", "not_helpful", "unrated", "stale", "deleted", "changed",
                            "fair"), 0)
    for row in rows_of(source):
        meta = row.get("metadata") or {}
        counts["questions"] += 1
        rating = meta.get("rating")
        counts[rating if rating in ("helpful", "not_helpful") else "unrated"] += 1
        if rating is None:
            continue
        spans = _spans(row, by_id, texts)
        if isinstance(spans, str):
            counts["stale"] += 1
            counts[spans] += 1
            continue
        if spans:
            explored = meta.get("explored") if rating == "helpful" else None
            fair = bool(explored) or not row.get("spans")  # explored, or a correction found in the corpus
            counts["fair"] += fair
            out.gold.append(Example(
                id=str(row.get("id") or f"usage-{counts['questions']}"), question=str(row["question"]),
                answers=tuple(row.get("answers") or ()), gold={s.doc: 1 for s in spans}, spans=spans,
                history=tuple(Turn(str(t.get("role")), str(t.get("content", ""))) for t in row.get("history") or ()),
                metadata={"kind": "usage", "source": "usage", "rating": rating, "asked": meta.get("asked", 1),
                          "version": meta.get("version"), "fair": fair, "explored": explored}))
    out.counts = counts
    return out


def named(documents: list) -> dict[str, Any]:
    """The documents by id, and by every trailing part of a path id (``docs/a.md`` and ``a.md`` for
    ``/home/me/docs/a.md``) that names one document only: `declrag serve` names files relative to the folder it
    indexed (`declrag.payloads.PublicPaths`), and that is how its usage store records citations."""
    out: dict[str, Any] = {}
    ambiguous: set[str] = set()
    for d in documents:
        parts = d.id.split("/")
        for i in range(1, len(parts)):
            tail = "/".join(parts[i:])
            if tail in out and out[tail] is not d:
                ambiguous.add(tail)
            out[tail] = d
    for tail in ambiguous:
        del out[tail]
    return {**out, **{d.id: d for d in documents}}


def _spans(row: dict[str, Any], docs: dict[str, Any], texts: dict[str, str]) -> tuple[GoldSpan, ...] | str:
    """A rated row's gold spans in the served corpus: its own (helpful), else its correction's occurrences; () when it
    has none; ``"deleted"`` when a document it cites is not in the corpus, ``"changed"`` when the text at a span is
    no longer the text cited (its fingerprint, where recorded, differs; or the span runs past the document's end)."""
    # imported here: the fingerprint is the recorder's, and the usage package loads only for a compile that reads one
    from ..usage import span_hash

    spans = []
    for s in row.get("spans") or ():
        doc, start, end = docs.get(str(s["doc"])), int(s["start"]), int(s["end"])
        if doc is None:
            return "deleted"
        text = texts[doc.id]
        if not 0 <= start < end <= len(text) or (s.get("hash") and span_hash(text[start:end]) != s["hash"]):
            return "changed"
        spans.append(GoldSpan(doc.id, start, end))
    if spans:
        return tuple(spans)
    return GoldSpan.occurrences(list(row.get("answers") or ()), texts) if row.get("answers") else ()


def rankers(space, base_values: dict[str, Any], fair: list[Example]) -> list[tuple[str, dict[str, Any]]]:
    """The distinct programs the ``fair`` questions were explored with, as (label, values of ``space``'s parameters):
    each ranker's settings (`declrag.pipeline.stages.select.Explorer.record`) mapped onto the parameters by their paths
    (the rest at ``base_values``). A ranker the space cannot express (a setting it has no parameter for, away from
    the baseline's) is left out; so is the baseline's own program."""
    wanted: dict[str, tuple[str, dict[str, Any]]] = {}  # each ranker once, however many questions it served
    for e in fair:
        record = e.metadata.get("explored") or {}
        for change in [{}, *(record.get("changes") or [])]:
            one = {**(record.get("served") or {}), **change}
            label = ", ".join(f"{k}={v}" for k, v in change.items()) or "the served program"
            wanted.setdefault(json.dumps(one, sort_keys=True, default=str), (label, one))
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    base_key = json.dumps(base_values, sort_keys=True, default=str)
    for label, one in wanted.values():
        values: dict[str, Any] = {}
        for name, p in space.params.items():
            if p.when and not _holds(p.when, values):
                continue
            values[name] = _cast(p, one[p.path]) if p.path in one else base_values.get(name)
        values = {k: v for k, v in values.items() if v is not None}
        try:
            got = settings(apply(space.base, values, space.params))
        except DeclragError:
            continue
        if any(got.get(k) != v for k, v in one.items()):  # a setting the space cannot express
            continue
        key = json.dumps(values, sort_keys=True, default=str)
        if key != base_key and key not in out:
            out[key] = (label, values)
    return list(out.values())
