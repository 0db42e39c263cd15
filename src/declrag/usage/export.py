"""From usage to a golden set (`declrag usage export`): the questions users asked, each once, with what their
ratings say.

- A question rated **helpful** with the citation that answered becomes gold: the words the answer took from that
  passage (its ``quotes``, kept where the answer mode records them: extractive and verified), else the passage's
  span in its document (``spans``, each with the fingerprint of its text where the record has it: ``hash``); its
  document graded 1 (``gold``). Rated helpful without a citation: every cited
  passage is gold. The words, not the passage: a passage is as long as the program that found it made it (a
  window's neighbours, passages merged), and gold that long would credit a longer-passage program for handing over
  part of it (`declrag bench usage` measured a window of 1 gaining +.15 on such gold and losing .021 on real
  questions).
  An explored answer's row keeps the rankers its passages were multileaved from (``metadata.explored``): its gold
  is fair evidence between them (`declrag.pipeline.stages.select`).
- A question rated **not helpful** keeps its passages as hard negatives (``metadata.negatives``: chunk ids) and no
  gold; a corrected answer becomes its reference answer (``answers``), to be found in the corpus by eval.
- An **unrated** question stays a real question without labels (``metadata.unrated``): what people ask and how.
- The same question (case, spacing and the conversation before it alike) asked several times is one row; the last
  rating counts. Each row keeps the program version that answered it (``metadata.version``), since an answer
  rated under one program says nothing certain about another's passages.
- A gold document with readers keeps them (``metadata.readers``: document id -> groups), so that a set made from one
  group's questions is known as theirs wherever it goes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_SPACE = re.compile(r"\s+")


def key(question: str, history: list[dict[str, Any]]) -> str:
    def norm(s: str) -> str:
        return _SPACE.sub(" ", s).strip().lower()

    return json.dumps([norm(question), [[t.get("role"), norm(str(t.get("content", "")))] for t in history]])


def golden_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One JSONL golden row per distinct question asked on an answering route (searches have no answer to rate)."""
    by: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["answer"] is None:
            continue
        k = key(r["question"], r["history"])
        row = by.get(k) or {"id": f"usage-{len(by) + 1}", "question": r["question"],
                            "metadata": {"source": "usage", "asked": 0}}
        if r["history"]:
            row["history"] = r["history"]
        row["metadata"]["asked"] += 1
        row["metadata"]["version"] = r["version"]
        if (fb := r["feedback"]) is not None:
            _labels(row, r, fb)
        by[k] = row
    out = list(by.values())
    for row in out:
        if "rating" not in row["metadata"]:
            row["metadata"]["unrated"] = True
    return out


def _labels(row: dict[str, Any], r: dict[str, Any], fb: dict[str, Any]) -> None:
    """The labels of the question's last rating (an earlier rating's are replaced)."""
    for k in ("gold", "spans", "answers"):
        row.pop(k, None)
    for k in ("negatives", "explored", "readers"):
        row["metadata"].pop(k, None)
    row["metadata"]["rating"] = "helpful" if fb["helpful"] else "not_helpful"
    cites = r["citations"]
    if fb["helpful"]:  # an abstention's nearest passages are gold only when the rating names one
        chosen = [c for c in cites if c["n"] == fb["citation"]] if fb["citation"] is not None else \
            [c for c in cites if not c.get("nearest")]
        if chosen:
            row["spans"] = [{"doc": c["doc_id"], "start": s, "end": e, **({"hash": h} if h else {})} for c in chosen
                            for (s, e), h in _spans_of(c)]
            row["gold"] = {c["doc_id"]: 1 for c in chosen}
            if readers := {c["doc_id"]: c["readers"] for c in chosen if c.get("readers")}:
                row["metadata"]["readers"] = readers  # who may read each gold document (`declrag.access`)
            if r.get("explored"):
                row["metadata"]["explored"] = r["explored"]
    else:
        row["metadata"]["negatives"] = [p["chunk_id"] for p in r["passages"]]
    if fb.get("correction"):
        row["answers"] = [fb["correction"]]


def _spans_of(citation: dict[str, Any]) -> list[tuple[tuple[int, int], str | None]]:
    """A citation's gold spans, each with its text's fingerprint where recorded: its quotes, else its span."""
    if quotes := citation.get("quotes"):
        return list(zip(map(tuple, quotes), citation.get("quote_hashes") or [None] * len(quotes), strict=True))
    return [(tuple(citation["span"]), citation.get("hash"))]


def export(records: Iterable[dict[str, Any]], out: Path) -> dict[str, int]:
    """Write the golden rows to ``out`` (JSONL; a folder gets ``questions.jsonl``). Returns counts."""
    rows = golden_rows(records)
    path = out / "questions.jsonl" if out.suffix != ".jsonl" else out
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    rated = [r for r in rows if "rating" in r["metadata"]]
    return {"questions": len(rows), "gold": sum("gold" in r for r in rows),
            "not_helpful": sum(r["metadata"]["rating"] == "not_helpful" for r in rated),
            "unrated": len(rows) - len(rated)}
