"""Golden sets: questions with reference answers and gold documents, for evaluation and benchmarks.

Loads the common public layouts (BEIR, SQuAD v1.1/v2.0, the CMU Question-Answer dataset, Hugging Face
datasets) and a simple JSONL format, from a path or from a YAML declaration found in ``dataset_dirs()``.
Parsed sets are cached in-process per (resolved path, modification time).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from .errors import DeclragError
from .types import Document, content_hash

log = logging.getLogger(__name__)

Format = Literal["beir", "squad", "cmu-qa", "jsonl", "hf"]
_Parsed = tuple[tuple[Document, ...], dict[str, tuple["Example", ...]]]
_Qrel = tuple[int, str, str, int]  # line, query id, doc id, score
_FORMATS_HINT = ("pass a registered name, a YAML declaration, a BEIR folder (corpus.jsonl), a SQuAD JSON file, "
                 "a CMU QA folder, a JSONL golden file, a save_to_disk folder or hf:<id>")


@dataclass(frozen=True, slots=True)
class Example:
    """One evaluation question with its reference answers and graded gold documents."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    gold: dict[str, int] = field(default_factory=dict)
    answerable: bool = True
    answer_starts: tuple[int, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class GoldenSet:
    """A corpus and its evaluation questions, by split."""

    name: str
    documents: list[Document]
    splits: dict[str, list[Example]]
    _by_id: dict[str, Document] | None = field(default=None, init=False, repr=False, compare=False)

    def split(self, name: str) -> list[Example]:
        if name not in self.splits:
            raise _no_split(self.name, name, self.splits)
        return self.splits[name]

    def doc(self, doc_id: str) -> Document:
        if self._by_id is None or len(self._by_id) != len(self.documents):
            self._by_id = {d.id: d for d in self.documents}
        if doc_id not in self._by_id:
            raise DeclragError(f"golden set {self.name!r} has no document {doc_id!r}",
                               hint="gold ids refer to the set's own documents; check the corpus and the qrels")
        return self._by_id[doc_id]


def _no_split(name: str, split: str, available: Iterable[str]) -> DeclragError:
    return DeclragError(f"dataset {name!r} has no split {split!r}; available: {', '.join(available) or 'none'}",
                        hint="use one of the available split names")


class HFSpec(BaseModel):
    """Where to get a dataset from the Hugging Face Hub (BEIR sets: qrels come from ``<id>-qrels``)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    config: str | None = None
    splits: dict[str, str] = {}  # our split name -> Hub split name (default: the spec's split names)
    columns: dict[str, str] = {}  # our field (id, question, answers, context, title, gold, doc_id, text) -> column
    corpus_config: str | None = None  # the config holding the documents, when separate from the questions
    corpus_split: str | None = None


class DatasetSpec(BaseModel):
    """A YAML declaration of a golden set."""

    model_config = ConfigDict(extra="forbid")
    name: str
    format: Format
    path: str | None = None
    hf: HFSpec | None = None
    splits: dict[str, str] = {}
    corpus: str | None = None  # jsonl/hf formats: a documents file in the BEIR corpus.jsonl layout
    description: str = ""
    license: str = ""
    reference: dict[str, float] = {}
    _file: Path | None = PrivateAttr(default=None)

    def _resolve(self, p: str | None) -> Path | None:
        if not p:
            return None
        path = Path(os.path.expanduser(os.path.expandvars(p)))
        return path if path.is_absolute() or self._file is None else self._file.parent / path

    def local_path(self) -> Path | None:
        """The declared path, with ${VARS} expanded, relative to the declaring YAML file's folder."""
        return self._resolve(self.path)


def dataset_dirs() -> list[Path]:
    """Where declarations are looked up, in order: $DECLRAG_DATASETS (os.pathsep-separated), ./datasets
    in the current directory, and the project's own datasets/ folder."""
    dirs = [Path(p) for p in os.environ.get("DECLRAG_DATASETS", "").split(os.pathsep) if p]
    dirs += [Path.cwd() / "datasets", Path(__file__).resolve().parents[2] / "datasets"]
    unique: dict[Path, Path] = {}
    for d in dirs:
        unique.setdefault(d.resolve(), d)
    return list(unique.values())


def known_datasets() -> dict[str, Path]:
    """Registered name (the YAML's ``name``, else its file stem) -> YAML file; earlier folders win."""
    found: dict[str, Path] = {}
    for d in (d for d in dataset_dirs() if d.is_dir()):
        for f in sorted(f for f in d.iterdir() if f.suffix in (".yaml", ".yml") and f.is_file()):
            try:
                data = yaml.safe_load(f.read_text(encoding="utf-8"))
            except (yaml.YAMLError, OSError, UnicodeDecodeError):
                data = None
            name = data.get("name") if isinstance(data, dict) else None
            found.setdefault(name if isinstance(name, str) and name else f.stem, f)
    return found


def _read_spec(path: Path) -> DatasetSpec:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("a dataset declaration must be a mapping")
        spec = DatasetSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors())
        raise DeclragError(f"{path}: invalid dataset declaration: {problems}",
                           hint="fields: name, format (beir|squad|cmu-qa|jsonl|hf), path, hf, splits, corpus, "
                                "description, license, reference") from e
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as e:
        raise DeclragError(f"{path}: cannot read dataset declaration: {e}", hint="see datasets/*.yaml") from e
    spec._file = path.resolve()
    return spec


def find_spec(name: str) -> DatasetSpec:
    known = known_datasets()
    if name not in known:
        raise DeclragError(f"unknown dataset {name!r}; known: {', '.join(sorted(known)) or 'none'}",
                           hint="add a YAML declaration to ./datasets or $DECLRAG_DATASETS, or " + _FORMATS_HINT)
    return _read_spec(known[name])


def load_golden(name_or_path: str, *, split: str | None = None) -> GoldenSet:
    """Load a golden set by registered name, YAML declaration, path or ``hf:<id>`` (format detected for
    paths). ``split`` limits the examples; documents are always the full corpus."""
    if name_or_path.startswith("hf:"):
        return _load(DatasetSpec(name=name_or_path[3:], format="hf", hf=HFSpec(id=name_or_path[3:])), split)
    known = known_datasets()
    if name_or_path in known and "/" not in name_or_path and os.sep not in name_or_path:
        return _load(_read_spec(known[name_or_path]), split)
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return _load(_read_spec(p), split)
    if p.exists():
        p = p.resolve()
        return _load(DatasetSpec(name=p.stem if p.is_file() else p.name, format=_detect(p), path=str(p)), split)
    raise DeclragError(f"unknown dataset {name_or_path!r}: not a registered name and no such file or folder; "
                       f"known: {', '.join(sorted(known)) or 'none'}", hint=_FORMATS_HINT)


def _detect(p: Path) -> Format:
    if p.is_dir():
        if (p / "corpus.jsonl").is_file():
            return "beir"
        if any((p / f).is_file() for f in ("dataset_dict.json", "dataset_info.json", "state.json")):
            return "hf"
        if _cmu_qa_files(p):
            return "cmu-qa"
    elif p.suffix in (".json", ".jsonl"):
        return "squad" if p.suffix == ".json" else "jsonl"
    raise DeclragError(f"{p}: cannot tell the dataset format", hint=_FORMATS_HINT)


def _load(spec: DatasetSpec, only: str | None) -> GoldenSet:
    local = spec.local_path()
    if local is not None and local.exists():
        local, corpus = local.resolve(), spec._resolve(spec.corpus)
        stamp = (_stamp(local), _stamp(corpus) if corpus and corpus.exists() else None)
        docs, splits = _parse_local(spec.format, str(local), stamp, tuple(spec.splits.items()),
                                    str(corpus) if corpus else None, json.dumps(spec.hf.columns if spec.hf else {}))
    elif spec.hf is not None:
        mapping = spec.hf.splits or {k: k for k in spec.splits}
        if only is not None and mapping:  # download only the split asked for
            if only not in mapping:
                raise _no_split(spec.name, only, mapping)
            mapping = {only: mapping[only]}
        try:
            docs, splits = _parse_hf(spec.format, spec.hf.model_dump_json(), tuple(mapping.items()))
        except Exception as e:
            raise DeclragError(f"dataset {spec.name!r}: local path {local or '(none declared)'} not found, and "
                               f"loading Hugging Face dataset {spec.hf.id!r} failed: {e}",
                               hint="put the files at the declared path (${VARS} are expanded), or check the "
                                    "network and the HF id (HF_DATASETS_OFFLINE=1 uses only the HF cache)") from e
    else:
        raise DeclragError(f"dataset {spec.name!r}: {local or 'no path declared'} not found and no hf fallback",
                           hint="fix `path` in the declaration (relative to the YAML file's folder) or add `hf`")
    if only is not None:
        if only not in splits:
            raise _no_split(spec.name, only, splits)
        splits = {only: splits[only]}
    return GoldenSet(spec.name, list(docs), {k: list(v) for k, v in splits.items()})


def _stamp(p: Path) -> tuple[int, int, int]:
    """Latest mtime, total size and count of the files under a folder, or next to a file."""
    files = [Path(r) / f for r, _, fs in os.walk(p) for f in fs] if p.is_dir() else \
        [f for f in p.parent.iterdir() if f.is_file()]
    stats = [f.stat() for f in files]
    return max((s.st_mtime_ns for s in stats), default=0), sum(s.st_size for s in stats), len(stats)


@lru_cache(maxsize=16)
def _parse_local(fmt: str, path: str, stamp: object, splits: tuple[tuple[str, str], ...],
                 corpus: str | None, columns: str) -> _Parsed:
    p, names = Path(path), dict(splits)
    base = p if p.is_dir() else p.parent
    files = {k: base / v for k, v in names.items()}
    if fmt == "beir":
        files = files or {f.stem: f for f in sorted((p / "qrels").glob("*.tsv"))}
        queries = {str(r.get("_id", r.get("id"))): str(r.get("text", "")) for _, r in _read_jsonl(p / "queries.jsonl")}
        return _beir_build(_beir_docs(_read_jsonl(p / "corpus.jsonl"), str(p / "corpus.jsonl")), queries,
                           {k: _read_qrels(f) for k, f in files.items()}, str(p))
    if fmt == "squad":
        return _squad(files or {"train" if "train" in p.stem.lower() else "dev": p})
    if fmt == "cmu-qa":
        return _cmu(p, names or {"all": "."})
    if fmt == "jsonl":
        sibling = base / "corpus.jsonl"
        auto = {"all": p} if p.is_file() else \
            {f.stem: f for f in sorted(p.glob("*.jsonl")) if f.name not in ("corpus.jsonl", "queries.jsonl")}
        return _jsonl(files or auto, Path(corpus) if corpus else sibling if sibling.is_file() else None)
    import datasets  # heavy; only for the hf format

    try:
        ds = datasets.load_from_disk(path)
    except Exception as e:
        raise DeclragError(f"{path}: cannot load a Hugging Face dataset from disk: {e}",
                           hint="pass a folder written by Dataset.save_to_disk or DatasetDict.save_to_disk") from e
    sets = dict(ds) if isinstance(ds, datasets.DatasetDict) else {str(ds.split) if ds.split else "all": ds}
    if missing := [v for v in names.values() if v not in sets]:
        raise _no_split(path, missing[0], sets)
    sets = {k: sets[v] for k, v in names.items()} or sets
    docs = _beir_docs(_read_jsonl(Path(corpus)), corpus) if corpus else []
    return _hf_build(sets, json.loads(columns), docs, path)


@lru_cache(maxsize=8)
def _parse_hf(fmt: str, hf_json: str, mapping: tuple[tuple[str, str], ...]) -> _Parsed:
    import datasets

    hf, names = HFSpec.model_validate_json(hf_json), dict(mapping)
    src, load = f"hf:{hf.id}", datasets.load_dataset
    if fmt == "beir":
        corpus = load(hf.id, hf.corpus_config or "corpus", split=hf.corpus_split or "corpus")
        queries = {str(r["_id"]): str(r["text"]) for r in load(hf.id, "queries", split="queries")}
        qrels = {ours: [(i, str(r["query-id"]), str(r["corpus-id"]), int(r["score"]))
                        for i, r in enumerate(load(f"{hf.id}-qrels", split=theirs), 1)]
                 for ours, theirs in (names or {"test": "test"}).items()}
        return _beir_build(_beir_docs(enumerate(corpus, 1), src), queries, qrels, src)
    sets = {ours: load(hf.id, hf.config, split=theirs) for ours, theirs in names.items()} or \
        dict(load(hf.id, hf.config))
    docs: list[Document] = []
    if hf.corpus_config:
        c = {**_HF_COLUMNS, **hf.columns}
        docs = [Document(id=str(r.get(c["doc_id"], i)), text=str(r[c["text"]]), source=src,
                         title=str(r.get(c["title"]) or ""))
                for i, r in enumerate(load(hf.id, hf.corpus_config, split=hf.corpus_split or "train"))]
    return _hf_build(sets, hf.columns, docs, src)


def _decode(raw: bytes) -> str:
    """UTF-8, else Windows-1252 (Latin-1 plus curly quotes), else Latin-1 (never fails)."""
    for enc in ("utf-8-sig", "cp1252"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            pass
    return raw.decode("latin-1")


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
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


def _gold(value: Any) -> dict[str, int]:
    if isinstance(value, dict):
        return {str(k): int(v) for k, v in value.items() if int(v) > 0}
    return {str(value): 1} if isinstance(value, (str, int)) else {str(v): 1 for v in value or ()}


def _beir_docs(rows: Iterable[tuple[int, dict[str, Any]]], source: str) -> list[Document]:
    docs, seen = [], {}
    for n, r in rows:
        if (did := r.get("_id", r.get("id"))) is None:
            raise DeclragError(f"{source}:{n}: document without `_id`", hint="every corpus line needs `_id`")
        if str(did) in seen:
            raise DeclragError(f"{source}:{n}: duplicate document id {did!r} (first on line {seen[str(did)]})",
                               hint="document ids must be unique in a corpus")
        seen[str(did)] = n
        title, text, meta = str(r.get("title") or ""), str(r.get("text") or ""), r.get("metadata")
        docs.append(Document(id=str(did), text=f"{title}\n\n{text}" if title else text, source=source,
                             title=title, metadata=meta if isinstance(meta, dict) else {}))
    return docs


def _read_qrels(path: Path) -> list[_Qrel]:
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


def _beir_build(docs: list[Document], queries: dict[str, str], qrels: dict[str, list[_Qrel]], source: str) -> _Parsed:
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


def _squad(files: dict[str, Path]) -> _Parsed:
    """Each paragraph is a Document ``<article title>#<paragraph index>``; each question an Example."""
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
            for pi, para in enumerate(art.get("paragraphs") or []):
                try:
                    did = f"{title}#{pi}"
                    docs.setdefault(did, Document(id=did, text=para["context"], source=str(f),
                                                  title=title.replace("_", " ")))
                    for qa in para.get("qas") or []:
                        impossible, meta = bool(qa.get("is_impossible", False)), {}
                        answers, starts = ((), ()) if impossible else _spans(qa.get("answers"))
                        plausible, pstarts = _spans(qa.get("plausible_answers"))
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


def _cmu_qa_files(p: Path) -> list[Path]:
    if p.is_file():
        return [p]
    top = p / "question_answer_pairs.txt"
    return [top] if top.is_file() else sorted(p.glob("*/question_answer_pairs.txt"))


def _cmu(root: Path, splits: dict[str, str]) -> _Parsed:
    docs: dict[str, Document] = {}
    out = {}
    for name, rel in splits.items():
        if not (files := _cmu_qa_files(root / rel)):
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


def _jsonl(files: dict[str, Path], corpus: Path | None) -> _Parsed:
    """User golden files: ``question`` plus optional id, answers, gold, answerable, metadata."""
    docs = _beir_docs(_read_jsonl(corpus), str(corpus)) if corpus else []
    out = {}
    for name, f in files.items():
        exs, seen = [], {}
        for n, r in _read_jsonl(f):
            if not isinstance(r.get("question"), str) or not r["question"].strip():
                raise DeclragError(f"{f}:{n}: no `question`", hint="each line needs a non-empty `question` string")
            answers = r.get("answers")
            if not (answers is None or isinstance(answers, str)
                    or (isinstance(answers, list) and all(isinstance(a, str) for a in answers))):
                bad = next((a for a in answers if not isinstance(a, str)), answers) if isinstance(answers, list) else answers
                raise DeclragError(f"{f}:{n}: reference answer {bad!r} is not a string",
                                   hint="`answers` is a string or a list of strings")
            rid = str(r.get("id", f"{f.stem}:{n}"))
            if rid in seen:
                raise DeclragError(f"{f}:{n}: duplicate example id {rid!r} (first on line {seen[rid]})",
                                   hint="example ids must be unique")
            seen[rid] = n
            try:
                exs.append(Example(id=rid, question=r["question"],
                                   answers=_spans(r.get("answers"))[0], gold=_gold(r.get("gold")),
                                   answerable=bool(r.get("answerable", True)), metadata=r.get("metadata") or {}))
            except (TypeError, ValueError) as e:
                raise DeclragError(f"{f}:{n}: malformed example: {e}",
                                   hint="`answers`: a string or list; `gold`: a list of doc ids or {id: grade}") from e
        out[name] = tuple(exs)
    return tuple(docs), out


_HF_COLUMNS = {"id": "id", "question": "question", "answers": "answers", "context": "context", "title": "title",
               "gold": "gold", "answerable": "answerable", "doc_id": "id", "text": "text"}


def _hf_build(sets: dict[str, Any], columns: dict[str, str], corpus: list[Document], source: str) -> _Parsed:
    """Rows with a context column are SQuAD-shaped: each distinct (title, context) becomes a Document."""
    c = {**_HF_COLUMNS, **columns}
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
