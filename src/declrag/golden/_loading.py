"""Golden sets: questions with reference answers and gold documents, for evaluation and benchmarks.

Loads the common public layouts (BEIR, SQuAD v1.1/v2.0, the CMU Question-Answer dataset, MTRAG, L-Eval, Hugging
Face datasets) and a simple JSONL format, from a path or from a YAML declaration found in ``dataset_dirs()``. Parsed
sets are cached in-process per (resolved path, modification time). This module finds a set and picks
its reader; ``formats`` holds one reader per layout; ``sets`` the Example and GoldenSet types.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from ..errors import DeclragError
from ..runtime.resources import search_dirs
from ..types import Document, GoldSpan
from . import _leval as leval
from . import _mtrag as mtrag
from ._formats import (
    HF_COLUMNS,
    Parsed,
    beir_build,
    beir_docs,
    cmu,
    cmu_qa_files,
    hf_build,
    jsonl,
    read_jsonl,
    read_qrels,
    squad,
)
from ._sets import GoldenSet, no_split

Format = Literal["beir", "squad", "cmu-qa", "jsonl", "mtrag", "leval", "hf"]
_FORMATS_HINT = ("pass a registered name, a YAML declaration, a BEIR folder (corpus.jsonl), a SQuAD JSON file, "
                 "a CMU QA folder, a JSONL golden file (questions, MTRAG conversation tasks or L-Eval long documents), "
                 "a save_to_disk folder or hf:<id>")


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
    documents: Literal["paragraphs", "articles"] = "paragraphs"  # squad format: a paragraph or an article a document
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
    in the current directory, and the packaged defaults (``declrag.runtime.resources``)."""
    return search_dirs("datasets")


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
                           hint="fields: name, format (beir|squad|cmu-qa|jsonl|mtrag|leval|hf), path, hf, splits, "
                                "corpus, documents (squad: paragraphs|articles), description, license, "
                                "reference") from e
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as e:
        raise DeclragError(f"{path}: cannot read dataset declaration: {e}", hint="see datasets/*.yaml") from e
    spec._file = path.resolve()
    return spec


def find_spec(name: str) -> DatasetSpec:
    known = known_datasets()
    if name not in known:
        raise DeclragError(f"unknown dataset {name!r}; known: {', '.join(sorted(known)) or 'none'} (looked in "
                           f"{', '.join(map(str, dataset_dirs()))})",
                           hint="add a YAML declaration to ./datasets or $DECLRAG_DATASETS, or " + _FORMATS_HINT)
    return _read_spec(known[name])


def load_golden(name_or_path: str | os.PathLike[str], *, split: str | None = None) -> GoldenSet:
    """A golden set: its corpus and its questions with their gold answers and judgements.

    Args:
        name_or_path: a registered name (``scifact``: ``datasets/*.yaml``), a YAML declaration, a file or folder in a
            known format (detected: SQuAD JSON, BEIR, JSONL, MTRAG, CMU QA, a saved Hugging Face dataset), or
            ``hf:<id>``.
        split: keep the examples of this split only; the documents are always the whole corpus.

    Returns:
        The set.

    Raises:
        DeclragError: an unknown name, a path that does not exist, a format that cannot be told, a file that cannot be
            read.
    """
    name_or_path = os.fspath(name_or_path)
    if name_or_path.startswith("hf:"):
        return _load(DatasetSpec(name=name_or_path[3:], format="hf", hf=HFSpec(id=name_or_path[3:])), split)
    known = known_datasets()
    if name_or_path in known and "/" not in name_or_path and os.sep not in name_or_path:
        return _load(_read_spec(known[name_or_path]), split)
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return _load(_read_spec(p), split)
    if p.suffix in (".yaml", ".yml") and not p.exists() and p.stem in known:  # datasets/NAME.yaml from anywhere
        return _load(_read_spec(known[p.stem]), split)
    if p.is_dir() and (p / "dataset.yaml").is_file():  # a folder that declares itself (what declrag synth writes)
        return _load(_read_spec(p / "dataset.yaml"), split)
    if p.exists():
        p = p.resolve()
        return _load(DatasetSpec(name=p.stem if p.is_file() else p.name, format=_detect(p), path=str(p)), split)
    raise DeclragError(f"unknown dataset {name_or_path!r}: not a registered name and no such file or folder; "
                       f"known: {', '.join(sorted(known)) or 'none'} (looked in {', '.join(map(str, dataset_dirs()))})",
                       hint=_FORMATS_HINT)


def _detect(p: Path) -> Format:
    if p.is_dir():
        if (p / "corpus.jsonl").is_file():
            return "beir"
        if any((p / f).is_file() for f in ("dataset_dict.json", "dataset_info.json", "state.json")):
            return "hf"
        if cmu_qa_files(p):
            return "cmu-qa"
    elif p.suffix == ".json":
        return "squad"
    elif p.suffix == ".jsonl":
        first = next(read_jsonl(p), (0, {}))[1]
        return "mtrag" if mtrag.looks_like(first) else "leval" if leval.looks_like(first) else "jsonl"
    raise DeclragError(f"{p}: cannot tell the dataset format", hint=_FORMATS_HINT)


def _load(spec: DatasetSpec, only: str | None) -> GoldenSet:
    local = spec.local_path()
    if local is not None and local.exists():
        local, corpus = local.resolve(), spec._resolve(spec.corpus)
        stamp = (_stamp(local), _stamp(corpus) if corpus and corpus.exists() else None)
        docs, splits = _parse_local(spec.format, str(local), stamp, tuple(spec.splits.items()),
                                    str(corpus) if corpus else None, json.dumps(spec.hf.columns if spec.hf else {}),
                                    spec.documents == "articles")
    elif spec.hf is not None:
        mapping = spec.hf.splits or {k: k for k in spec.splits}
        if only is not None and mapping:  # download only the split asked for
            if only not in mapping:
                raise no_split(spec.name, only, mapping)
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
            raise no_split(spec.name, only, splits)
        splits = {only: splits[only]}
    return GoldenSet(spec.name, list(docs), {k: list(v) for k, v in splits.items()}, spec.description)


def with_answer_spans(parsed: Parsed) -> Parsed:
    """Short answers without offsets (the CMU QA set's, a user's JSONL) located in their gold documents: each
    question's occurrences become its gold spans, one credit (`GoldSpan.occurrences`), so that retrieval is scored
    on the passages that hold the answer. A question whose answers occur nowhere there (yes/no, free text) keeps
    its gold documents. Done once per parsed set (the parsers' caches hold the result)."""
    docs, splits = parsed
    texts = {d.id: d.text for d in docs}
    return docs, {name: tuple(
        replace(e, spans=found) if not (e.spans or e.answer_starts) and e.answers and e.gold and (found := (
            GoldSpan.occurrences(e.answers, {d: texts[d] for d, g in e.gold.items() if g > 0 and d in texts})))
        else e for e in examples) for name, examples in splits.items()}


def _stamp(p: Path) -> tuple[int, int, int]:
    """Latest mtime, total size and count of the files under a folder, or next to a file."""
    files = [Path(r) / f for r, _, fs in os.walk(p) for f in fs] if p.is_dir() else \
        [f for f in p.parent.iterdir() if f.is_file()]
    stats = [f.stat() for f in files]
    return max((s.st_mtime_ns for s in stats), default=0), sum(s.st_size for s in stats), len(stats)


@lru_cache(maxsize=16)
def _parse_local(fmt: str, path: str, stamp: object, splits: tuple[tuple[str, str], ...],
                 corpus: str | None, columns: str, articles: bool = False) -> Parsed:
    return with_answer_spans(_read_local(fmt, path, splits, corpus, columns, articles))


def _read_local(fmt: str, path: str, splits: tuple[tuple[str, str], ...], corpus: str | None, columns: str,
                articles: bool) -> Parsed:
    p, names = Path(path), dict(splits)
    base = p if p.is_dir() else p.parent
    files = {k: base / v for k, v in names.items()}
    if fmt == "beir":
        files = files or {f.stem: f for f in sorted((p / "qrels").glob("*.tsv"))}
        queries = {str(r.get("_id", r.get("id"))): str(r.get("text", "")) for _, r in read_jsonl(p / "queries.jsonl")}
        return beir_build(beir_docs(read_jsonl(p / "corpus.jsonl"), str(p / "corpus.jsonl")), queries,
                           {k: read_qrels(f) for k, f in files.items()}, str(p))
    if fmt == "squad":
        return squad(files or {"train" if "train" in p.stem.lower() else "dev": p}, articles)
    if fmt == "cmu-qa":
        return cmu(p, names or {"all": "."})
    if fmt == "mtrag":
        return mtrag.read(files or {"all": p})
    if fmt == "leval":
        return leval.read(files or {"test": p})
    if fmt == "jsonl":
        sibling = base / "corpus.jsonl"
        auto = {"all": p} if p.is_file() else \
            {f.stem: f for f in sorted(p.glob("*.jsonl")) if f.name not in ("corpus.jsonl", "queries.jsonl")}
        return jsonl(files or auto, Path(corpus) if corpus else sibling if sibling.is_file() else None)
    import datasets  # heavy; only for the hf format

    try:
        ds = datasets.load_from_disk(path)
    except Exception as e:
        raise DeclragError(f"{path}: cannot load a Hugging Face dataset from disk: {e}",
                           hint="pass a folder written by Dataset.save_to_disk or DatasetDict.save_to_disk") from e
    sets = dict(ds) if isinstance(ds, datasets.DatasetDict) else {str(ds.split) if ds.split else "all": ds}
    if missing := [v for v in names.values() if v not in sets]:
        raise no_split(path, missing[0], sets)
    sets = {k: sets[v] for k, v in names.items()} or sets
    docs = beir_docs(read_jsonl(Path(corpus)), corpus) if corpus else []
    return hf_build(sets, json.loads(columns), docs, path)


@lru_cache(maxsize=8)
def _parse_hf(fmt: str, hf_json: str, mapping: tuple[tuple[str, str], ...]) -> Parsed:
    return with_answer_spans(_read_hf(fmt, hf_json, mapping))


def _read_hf(fmt: str, hf_json: str, mapping: tuple[tuple[str, str], ...]) -> Parsed:
    import datasets

    hf, names = HFSpec.model_validate_json(hf_json), dict(mapping)
    src, load = f"hf:{hf.id}", datasets.load_dataset
    if fmt == "beir":
        corpus = load(hf.id, hf.corpus_config or "corpus", split=hf.corpus_split or "corpus")
        queries = {str(r["_id"]): str(r["text"]) for r in load(hf.id, "queries", split="queries")}
        qrels = {ours: [(i, str(r["query-id"]), str(r["corpus-id"]), int(r["score"]))
                        for i, r in enumerate(load(f"{hf.id}-qrels", split=theirs), 1)]
                 for ours, theirs in (names or {"test": "test"}).items()}
        return beir_build(beir_docs(enumerate(corpus, 1), src), queries, qrels, src)
    sets = {ours: load(hf.id, hf.config, split=theirs) for ours, theirs in names.items()} or \
        dict(load(hf.id, hf.config))
    docs: list[Document] = []
    if hf.corpus_config:
        c = {**HF_COLUMNS, **hf.columns}
        docs = [Document(id=str(r.get(c["doc_id"], i)), text=str(r[c["text"]]), source=src,
                         title=str(r.get(c["title"]) or ""))
                for i, r in enumerate(load(hf.id, hf.corpus_config, split=hf.corpus_split or "train"))]
    return hf_build(sets, hf.columns, docs, src)

