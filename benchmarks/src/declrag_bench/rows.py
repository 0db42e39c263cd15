"""What `declrag bench pdf` and `declrag bench languages` share: a fresh store of a folder indexed with the default
settings (`fresh_index`), and one question asked of the default program and scored as a reader meets the result
(`answer_row`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from declrag.config import IngestConfig
from declrag.embed.embedder import Embedder
from declrag.ingest.indexer import Indexer, IndexReport
from declrag.pipeline.program import RAGProgram
from declrag.stores._lancedb import LanceStore
from declrag.stores.base import StoreMeta
from declrag.text.normalize import squad_normalize, strip_citations
from declrag.text.reading import reading

SCORES = ("hit@1", "hit@5", "first_1500", "contains")
FIRST = 1500  # characters handed over, in rank order, that `first_1500` reads
_WS = re.compile(r"\s+")


def fresh_index(where: Path, files: Path, embedder: Embedder, progress: bool, ingest: IngestConfig | None = None,
                **reading: Any) -> tuple[LanceStore, IndexReport]:
    """A new embedded store at ``where`` (one there before is removed) holding ``files`` indexed with ``ingest`` (the
    default settings); ``reading``: `Indexer`'s reading options (``ocr``, ``pdf_reader``)."""
    ingest = ingest or IngestConfig(embedder=embedder.config)
    shutil.rmtree(where, ignore_errors=True)
    store = LanceStore(where)
    store.create(StoreMeta(ingest=ingest))
    return store, Indexer(store, ingest, embedder, progress=progress, **reading).index_paths([files])


def flat(text: str) -> str:
    """``text`` as read (`declrag.text.reading`), whitespace runs made one space, lowercased."""
    return _WS.sub(" ", reading(text)).lower()


def answer_row(prog: RAGProgram, question: str, answer: str) -> dict[str, Any]:
    """Ask ``question``; score what came back against the reference ``answer``:

    - ``hit@1``, ``hit@5``: a passage among the first 1 or 5 handed over holds the answer (`flat`);
    - ``first_1500``: the first `FIRST` characters handed over (passages in rank order, as read, joined by blank
      lines) hold it;
    - ``contains``: the answer (not an abstention) holds the reference, SQuAD-normalised;
    - ``chars``: the characters handed over (what it cost)."""
    got = prog(question=question)
    want = flat(answer)
    read = [flat(p.text) for p in got.passages]
    handed = "\n\n".join(reading(p.text) for p in got.passages)
    return {"question": question, "answer": answer, "got": got.answer,
            "hit@1": float(any(want in r for r in read[:1])), "hit@5": float(any(want in r for r in read[:5])),
            "first_1500": float(want in flat(handed[:FIRST])),
            "contains": float(not got.abstained and squad_normalize(answer) in squad_normalize(
                strip_citations(got.answer))),
            "chars": float(len(handed))}
