"""One reader per golden-set layout: BEIR (corpus.jsonl, queries.jsonl, qrels/*.tsv), SQuAD JSON, the CMU
Question-Answer folders, user JSONL files, and Hugging Face rows. Each returns ``(documents, {split: examples})``
and raises DeclragError naming the file and line of bad input."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..inputs import InputError, Turn, turns
from ..types import Document, GoldSpan, content_hash
from ._sets import Example

log = logging.getLogger(__name__)

Parsed = tuple[tuple[Document, ...], dict[str, tuple[Example, ...]]]
_Qrel = tuple[int, str, str, int]  # line, query id, doc id, score


def _decode(raw: bytes) -> str:
    """UTF-8, else Windows-1252 (Latin-1 plus curly quotes), else Latin-1 (never fails)."""
    for enc in ("utf-8-sig", "cp1252"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            pass
    return raw.decode("latin-1")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DeclragError(f"{path}: file not found", hint="check the dataset folder layout")
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    row = json.loads(_decode(raw))
                except json.JSONDecodeError as e:
                    raise DeclragError(f"{path}:{n}: not valid JSON: {e}", hint="one JSON object per line") from e
                if not isinstance(row, dict):
                    raise DeclragError(f"{path}:{n}: expected a JSON object", hint="one JSON object per line")
                yield n, row


def _dedup(texts: Iterable[Any], starts: Iterable[Any] | None = None, fold: bool = False
           ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Drop empty and repeated answers (case-insensitively with ``fold``), keeping order and offsets."""
    out: dict[str, str] = {}
    pos: list[int] = []
    offsets = list(starts) if starts is not None else []
    for i, t in enumerate(texts):
        t = str(t).strip()
        if t and (key := t.casefold() if fold else t) not in out:
            out[key] = t
            if i < len(offsets):
                pos.append(int(offsets[i]))
    return tuple(out.values()), tuple(pos) if len(pos) == len(out) else ()


def _spans(items: Any) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Answers as SQuAD [{text, answer_start}], HF {text: [...], answer_start: [...]}, a list or a string."""
    if not items or isinstance(items, str):
        return _dedup([items] if items else [])
    if isinstance(items, dict):
        return _dedup(items.get("text") or [], items.get("answer_start"))
    if all(isinstance(a, dict) for a in items):
        starts = [a.get("answer_start") for a in items]
        return _dedup([a.get("text", "") for a in items], None if None in starts else starts)
    return _dedup(items)


def _squad_answer(a: Any) -> bool:
    return isinstance(a, dict) and isinstance(a.get("text"), str) and isinstance(a.get("answer_start"), int)


def _gold(value: Any) -> dict[str, int]:
    if isinstance(value, dict):
        return {str(k): int(v) for k, v in value.items() if int(v) > 0}
    return {str(value): 1} if isinstance(value, (str, int)) else {str(v): 1 for v in value or ()}


def beir_docs(rows: Iterable[tuple[int, dict[str, Any]]], source: str) -> list[Document]:
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for n, r in rows:
        if (did := r.get("_id", r.get("id"))) is None:
            raise DeclragError(f"{source}:{n}: document without `_id`", hint="every corpus line needs `_id`")
        if str(did) in seen:
            raise DeclragError(f"{source}:{n}: duplicate document id {did!r} (first on line {seen[str(did)]})",
                               hint="document ids must be unique in a corpus")
        seen[str(did)] = n
        title, text, meta = str(r.get("title") or ""), str(r.get("text") or ""), r.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        # a corpus written by declrag synth keeps each document's own source, title and page in its metadata
        # (the title there is not put before the text: the text is the document's as indexed)
        own = {k: meta[k] for k in ("source", "title") if isinstance(meta.get(k), str) and meta[k]}
        page = meta.get("page") if isinstance(meta.get("page"), int) else None
        docs.append(Document(id=str(did), text=f"{title}\n\n{text}" if title else text,
                             source=own.get("source", source), title=title or own.get("title", ""), page=page,
                             metadata=meta))
    return docs


def read_qrels(path: Path) -> list[_Qrel]:
    if not path.is_file():
        raise DeclragError(f"{path}: qrels file not found", hint="BEIR splits are qrels/<split>.tsv files")
    rows = []
    for n, line in enumerate(_decode(path.read_bytes()).splitlines(), 1):
        if not line.strip() or (n == 1 and line.startswith("query-id")):
            continue
        cells = line.split("\t") if line.count("\t") == 2 else line.split()
        try:
            if len(cells) != 3:
                raise ValueError(f"expected 3 columns (query-id, corpus-id, score), found {len(cells)}")
            rows.append((n, cells[0].strip(), cells[1].strip(), int(cells[2])))
        except ValueError as e:
            raise DeclragError(f"{path}:{n}: malformed qrels line {line!r}: {e}",
                               hint="each line is `query-id<TAB>corpus-id<TAB>integer score`") from e
    return rows


def beir_build(docs: list[Document], queries: dict[str, str], qrels: dict[str, list[_Qrel]], source: str) -> Parsed:
    splits = {}
    for name, rows in qrels.items():
        gold: dict[str, dict[str, int]] = {}
        for _, qid, cid, score in rows:
            if score > 0:  # an example per query with at least one relevant document
                gold.setdefault(qid, {})[cid] = score
        if missing := [q for q in gold if q not in queries]:
            raise DeclragError(f"{source}: split {name!r} refers to {len(missing)} query ids missing from the "
                               f"queries, e.g. {missing[0]!r}", hint="the qrels and queries.jsonl must match")
        splits[name] = tuple(Example(id=q, question=queries[q], gold=g) for q, g in gold.items())
    return tuple(docs), splits


def squad(files: dict[str, Path], articles: bool = False) -> Parsed:
    """Each paragraph is a Document ``<article title>#<paragraph index>``; each question an Example. With
    ``articles``, each article is one Document ``<article title>`` (its paragraphs joined by a blank line, as a
    user's long file) and each answer's offset is moved into it."""
    docs: dict[str, Document] = {}
    done: dict[Path, tuple[Example, ...]] = {}
    for f in files.values():
        if f in done:
            continue
        try:
            data = json.loads(f.read_bytes())
        except (OSError, ValueError) as e:
            raise DeclragError(f"{f}: cannot read SQuAD JSON: {e}", hint="pass the official SQuAD JSON file") from e
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise DeclragError(f'{f}: not a SQuAD file: no top-level "data" list',
                               hint='SQuAD files look like {"version": ..., "data": [{"title", "paragraphs"}]}')
        out = []
        for ai, art in enumerate(data["data"]):
            title = str(art.get("title") or f"article{ai}")
            offsets = _article(docs, f, title, art) if articles else None
            for pi, para in enumerate(art.get("paragraphs") or []):
                try:
                    did = title if offsets else f"{title}#{pi}"
                    if not offsets:
                        docs.setdefault(did, Document(id=did, text=para["context"], source=str(f),
                                                      title=title.replace("_", " ")))
                    for qa in para.get("qas") or []:
                        impossible, meta = bool(qa.get("is_impossible", False)), {}
                        answers, starts = ((), ()) if impossible else _spans(qa.get("answers"))
                        plausible, pstarts = _spans(qa.get("plausible_answers"))
                        if offsets:  # the paragraph's offsets moved into the article
                            starts, pstarts = (tuple(s + offsets[pi] if s is not None and s >= 0 else s for s in xs)
                                               for xs in (starts, pstarts))
                        if impossible and plausible:
                            meta = {"plausible_answers": list(plausible), "plausible_answer_starts": list(pstarts)}
                        out.append(Example(id=str(qa["id"]), question=qa["question"], answers=answers,
                                           gold={did: 1}, answerable=not impossible, answer_starts=starts,
                                           metadata=meta))
                except (KeyError, TypeError, AttributeError, ValueError) as e:
                    raise DeclragError(f"{f}: malformed entry in article {ai} ({title!r}), paragraph {pi}: {e!r}",
                                       hint="paragraphs need `context` and `qas` with id, question, answers") from e
        done[f] = tuple(out)
    return tuple(docs.values()), {k: done[f] for k, f in files.items()}


def _article(docs: dict[str, Document], f: Path, title: str, art: dict) -> list[int]:
    """One article as one Document (its paragraphs joined by a blank line); each paragraph's offset in it."""
    try:
        texts = [str(p["context"]) for p in art.get("paragraphs") or []]
    except (KeyError, TypeError) as e:
        raise DeclragError(f"{f}: malformed article {title!r}: a paragraph without `context`",
                           hint="paragraphs need `context` and `qas`") from e
    offsets, at = [], 0
    for t in texts:
        offsets.append(at)
        at += len(t) + 2
    docs.setdefault(title, Document(id=title, text="\n\n".join(texts), source=str(f), title=title.replace("_", " ")))
    return offsets or [0]


def cmu_qa_files(p: Path) -> list[Path]:
    if p.is_file():
        return [p]
    top = p / "question_answer_pairs.txt"
    return [top] if top.is_file() else sorted(p.glob("*/question_answer_pairs.txt"))


def cmu(root: Path, splits: dict[str, str]) -> Parsed:
    docs: dict[str, Document] = {}
    out = {}
    for name, rel in splits.items():
        if not (files := cmu_qa_files(root / rel)):
            raise DeclragError(f"{root / rel}: no question_answer_pairs.txt here or one level down",
                               hint="point at the CMU QA folder (with S08, S09, S10) or at one season's folder")
        out[name] = tuple(ex for f in files for ex in _cmu_file(f, docs))
    return tuple(docs.values()), out


def _cmu_file(qf: Path, docs: dict[str, Document]) -> list[Example]:
    """One Example per (article, question); NULL answers dropped; the season is the file's folder name."""
    season, header, missing = qf.parent.name, None, set()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for n, raw in enumerate(qf.read_bytes().split(b"\n"), 1):
        if not (line := _decode(raw.rstrip(b"\r"))).strip():
            continue
        cells = [c.strip() for c in line.split("\t")]
        if header is None:
            if need := [c for c in ("ArticleTitle", "Question", "Answer", "ArticleFile") if c not in cells]:
                raise DeclragError(f"{qf}:{n}: header lacks {', '.join(need)}",
                                   hint="the first line names the tab-separated columns")
            header = cells
            continue
        if len(cells) != len(header):
            raise DeclragError(f"{qf}:{n}: expected {len(header)} tab-separated columns, found {len(cells)}",
                               hint="fields must not contain tabs")
        row = dict(zip(header, cells))
        did = f"{season}/{row['ArticleFile']}"
        if did not in docs:
            article = qf.parent / f"{row['ArticleFile']}.txt.clean"
            if did in missing or not article.is_file():
                if did not in missing:
                    log.debug("%s: article %s not found; skipping its questions", qf, article)
                missing.add(did)
                continue
            docs[did] = Document(id=did, text=_decode(article.read_bytes()), source=str(article),
                                 title=row["ArticleTitle"].replace("_", " "))
        if (question := row["Question"]) in ("", "NULL"):
            continue
        g = groups.setdefault((did, question), {"answers": [], "dq": None, "da": [], "title": row["ArticleTitle"]})
        g["answers"].append(row["Answer"] if row["Answer"] != "NULL" else "")
        dq, da = row.get("DifficultyFromQuestioner", "NULL"), row.get("DifficultyFromAnswerer", "NULL")
        g["dq"] = g["dq"] or (dq if dq != "NULL" else None)
        g["da"] += [da] if da != "NULL" else []
    out = []
    for (did, question), g in groups.items():
        answers = _dedup(g["answers"], fold=True)[0]
        meta = {"article_title": g["title"], "difficulty_questioner": g["dq"], "difficulty_answerer": g["da"]}
        out.append(Example(id=content_hash(did, question)[:12], question=question, answers=answers,
                           gold={did: 1}, answerable=bool(answers), metadata=meta))
    return out


def jsonl(files: dict[str, Path], corpus: Path | None) -> Parsed:
    """User golden files: ``question`` plus optional id, answers (strings, or SQuAD's text and answer_start), gold,
    answerable, metadata, ``spans`` (gold spans: ``[{doc, start, end, grade?, answer?}]``, character offsets in the
    corpus's documents; retrieval is then scored on the passages covering them) and ``history`` (the conversation
    before the question: ``[{role, content}, ...]``, as a chat log has it; ``answer`` is accepted for
    ``answers``)."""
    docs = beir_docs(read_jsonl(corpus), str(corpus)) if corpus else []
    by_id = {d.id: d for d in docs}
    out = {}
    for name, f in files.items():
        exs: list[Example] = []
        seen: dict[str, int] = {}
        for n, r in read_jsonl(f):
            if not isinstance(r.get("question"), str) or not r["question"].strip():
                raise DeclragError(f"{f}:{n}: no `question`", hint="each line needs a non-empty `question` string")
            answers = r.get("answers", r.get("answer"))
            if not (answers is None or isinstance(answers, str)
                    or (isinstance(answers, list) and (all(isinstance(a, str) for a in answers)
                                                       or all(_squad_answer(a) for a in answers)))):
                bad = (next((a for a in answers if not (isinstance(a, str) or _squad_answer(a))), answers)
                       if isinstance(answers, list) else answers)
                raise DeclragError(f"{f}:{n}: reference answer {bad!r} is not a string",
                                   hint="`answers` is a string, a list of strings, or SQuAD's "
                                        "[{\"text\": ..., \"answer_start\": offset in the gold document}]")
            rid = str(r.get("id", f"{f.stem}:{n}"))
            if rid in seen:
                raise DeclragError(f"{f}:{n}: duplicate example id {rid!r} (first on line {seen[rid]})",
                                   hint="example ids must be unique")
            seen[rid] = n
            try:
                texts, starts = _spans(answers)
                gold, spans = _gold(r.get("gold")), gold_spans(f, n, r.get("spans"), by_id)
                check_offsets(f, n, gold, texts, starts, by_id)
                exs.append(Example(id=rid, question=r["question"], answers=texts, answer_starts=starts,
                                   gold=gold or {s.doc: max(x.grade for x in spans if x.doc == s.doc) for s in spans},
                                   history=_history(f, n, r.get("history")), spans=spans,
                                   answerable=bool(r.get("answerable", True)), metadata=r.get("metadata") or {}))
            except (TypeError, ValueError) as e:
                raise DeclragError(f"{f}:{n}: malformed example: {e}",
                                   hint="`answers`: a string or list; `gold`: a list of doc ids or {id: grade}") from e
        out[name] = tuple(exs)
    return tuple(docs), out


SPANS_HINT = ('`spans` is a list of {"doc": document id, "start": first character, "end": one past the last, '
              '"grade": 1 or more (optional), "answer": the answer string inside it (optional)}')


def gold_spans(f: Path, n: int, raw: Any, docs: dict[str, Document]) -> tuple[GoldSpan, ...]:
    """A JSONL line's ``spans``, checked: each inside its document (when the corpus is known), not empty, not
    overlapping another of the line's spans, its answer string inside it; else an error naming file, line, field."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise DeclragError(f"{f}:{n}: `spans` is not a list", hint=SPANS_HINT)
    out: list[GoldSpan] = []
    for i, s in enumerate(raw):
        where = f"{f}:{n}: spans[{i}]"
        try:
            span = GoldSpan.of(s)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DeclragError(f"{where}: not a span ({e!r})", hint=SPANS_HINT) from e
        if not 0 <= span.start < span.end or span.grade < 1:
            raise DeclragError(f"{where}: empty or negative span [{span.start}, {span.end}) or grade {span.grade}",
                               hint="start < end, both offsets >= 0, grade >= 1")
        if (doc := docs.get(span.doc)) is None and docs:
            raise DeclragError(f"{where}: no document {span.doc!r} in the corpus", hint="`doc` is a corpus `_id`")
        if doc is not None and span.end > len(doc.text):
            raise DeclragError(f"{where}: ends at {span.end}, past the end of document {span.doc!r} "
                               f"({len(doc.text)} characters)", hint="offsets count characters of the document text")
        if doc is not None and span.answer and _norm(span.answer) not in _norm(doc.text[span.start:span.end]):
            raise DeclragError(f"{where}: the answer {span.answer!r} is not inside the span "
                               f"({doc.text[span.start:span.end][:80]!r})", hint="fix the offsets or the answer")
        clash = next((j for j, o in enumerate(out) if o.doc == span.doc and o.start < span.end and span.start < o.end),
                     None)
        if clash is not None:
            raise DeclragError(f"{where}: overlaps spans[{clash}] in document {span.doc!r}",
                               hint="merge overlapping spans into one (each span is one credit)")
        out.append(span)
    return tuple(out)


def check_offsets(f: Path, n: int, gold: dict[str, int], answers: tuple[str, ...], starts: tuple[int, ...],
                  docs: dict[str, Document]) -> None:
    """SQuAD-style answers with offsets in the one gold document: each answer must be at its offset."""
    named = [d for d, g in gold.items() if g > 0]
    if not starts or len(named) != 1 or named[0] not in docs:
        return
    text = docs[named[0]].text
    for i, (a, s) in enumerate(zip(answers, starts)):
        if s is not None and s >= 0 and _norm(text[s:s + len(a)]) != _norm(a):
            raise DeclragError(f"{f}:{n}: answers[{i}] {a!r} is not at offset {s} of document {named[0]!r} "
                               f"(there: {text[s:s + len(a)]!r})", hint="answer_start counts characters of the "
                               "gold document's text")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _history(f: Path, n: int, raw: Any) -> tuple[Turn, ...]:
    try:
        return turns(raw, max_turns=10_000, max_chars=10_000_000)
    except InputError as e:
        raise DeclragError(f"{f}:{n}: {e.message}", hint='`history` is a list of {"role": "user"|"assistant"|'
                           '"system", "content": "..."}, oldest first') from e


HF_COLUMNS = {"id": "id", "question": "question", "answers": "answers", "context": "context", "title": "title",
               "gold": "gold", "answerable": "answerable", "doc_id": "id", "text": "text"}


def hf_build(sets: dict[str, Any], columns: dict[str, str], corpus: list[Document], source: str) -> Parsed:
    """Rows with a context column are SQuAD-shaped: each distinct (title, context) becomes a Document."""
    c = {**HF_COLUMNS, **columns}
    docs = {d.id: d for d in corpus}
    by_context: dict[tuple[str, str], str] = {}
    per_title: dict[str, int] = {}
    out = {}
    for name, rows in sets.items():
        exs = []
        for i, r in enumerate(rows):
            if not isinstance(r.get(c["question"]), str):
                raise DeclragError(f"{source} [{name}] row {i}: no {c['question']!r} column",
                                   hint="map the dataset's columns to id/question/answers/context with hf.columns")
            ans_col = c["answers"] if c["answers"] in r else "answer" if "answer" in r else None
            answers, starts = _spans(r[ans_col]) if ans_col else ((), ())
            gold = _gold(r[c["gold"]]) if r.get(c["gold"]) is not None else {}
            if r.get(c["context"]):
                title, ctx = str(r.get(c["title"]) or ""), str(r[c["context"]])
                if (did := by_context.get((title, ctx))) is None:
                    did = by_context[(title, ctx)] = f"{title}#{per_title.get(title, 0)}"
                    per_title[title] = per_title.get(title, 0) + 1
                    docs[did] = Document(id=did, text=ctx, source=source, title=title.replace("_", " "))
                gold = {did: 1}
            answerable = bool(r[c["answerable"]]) if c["answerable"] in r else bool(answers) if ans_col else True
            qid = r.get(c["id"])
            exs.append(Example(id=str(qid) if qid is not None else f"{name}:{i}", question=r[c["question"]],
                               answers=answers, gold=gold, answerable=answerable, answer_starts=starts))
        out[name] = tuple(exs)
    return tuple(docs.values()), out
