"""Style probes: the held-out synthetic questions asked again the way the offline writers never ask them, measured
beside the writers in `declrag bench nolabels`'s transfer table (`declrag_bench.transfer`). A candidate for compile's
selection rule (issue 57, item 4) that did **not** earn its place: on the scenario set (107 real situated questions)
the situated probe's gains ran against the real ones (Pearson r -.66 over the ten single changes; BM25 rerank +.14
on the probe, -.22 on the real questions), and told from the gold document's own sentences, or with the question's
passage words dropped, it did no better (docs/benchmarks/nolabels.md, "Transfer"). Compile does not use it.

The offline writers' questions are short and made of their passage's topic words. People also tell their situation
before they ask ("We moved the server to a new disk last week. The nightly job still writes to the old path. Where
does ...?"). A stage that ranks by shared words alone (a BM25 rerank) is rewarded by the writers' questions and
punished by those (issue 57: -.30 hit@1 on 271 situated guidance questions while both writers backed it). A probe
needs no model:

- ``situated``: the question after two sentences drawn from *other* documents of the corpus, so that what precedes
  the question is as wordy and as off-topic as a real circumstance, and no word of it points at the answer.

A probe that cannot be made (a corpus of one document, a set without synthetic questions) is skipped and named.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace

from declrag.golden import Example, GoldenSet
from declrag.text.sentences import sentence_spans

STYLES = ("situated",)
SENTENCES = 2  # circumstance sentences before the question
_WORD = re.compile(r"\w+")
_SHORTEST, _LONGEST = 6, 30  # words in a circumstance sentence
_POOL = 2000  # circumstance sentences kept, drawn across the corpus


def _circumstances(golden: GoldenSet, rng: random.Random) -> list[tuple[str, str]]:
    """(document id, sentence) pairs of plain prose sentences, spread over the corpus's documents."""
    out: list[tuple[str, str]] = []
    per_doc = max(1, _POOL // max(len(golden.documents), 1))
    for doc in golden.documents:
        sentences = [doc.text[a:b] for a, b in sentence_spans(doc.text[:200_000])]
        prose = [s for s in sentences
                 if _SHORTEST <= len(_WORD.findall(s)) <= _LONGEST and s[-1:] in ".!" and s[:1].isupper()]
        out.extend((doc.id, s) for s in rng.sample(prose, min(per_doc, len(prose))))
    return out


def situated(examples: Sequence[Example], golden: GoldenSet, seed: int = 13) -> tuple[list[Example], str | None]:
    """Each synthetic example with gold documents asked after `SENTENCES` sentences of other documents; the probe
    shares the example's gold and spans, so it is scored against the same evidence. Returns (probes, why none)."""
    rng = random.Random(seed)
    source = [e for e in examples if e.metadata.get("synthetic") and e.gold and e.answerable]
    if not source:
        return [], "no synthetic question with gold documents to re-ask"
    pool = _circumstances(golden, rng)
    if len({d for d, _ in pool}) < 2:
        return [], "the corpus has fewer than two documents with prose sentences to tell a situation from"
    out = []
    for e in source:
        elsewhere = [s for d, s in pool if d not in e.gold]
        if len(elsewhere) < SENTENCES:
            continue
        told = " ".join(rng.sample(elsewhere, SENTENCES))
        out.append(replace(e, id=f"{e.id}~situated", question=f"{told} {e.question}",
                           metadata={**e.metadata, "kind": "situated", "probe_of": e.id}))
    return out, None if out else "no question has a document other than its own to tell a situation from"


def probe(examples: Sequence[Example], golden: GoldenSet, seed: int = 13) -> tuple[list[Example], dict[str, str]]:
    """Every style's probes of ``examples`` and, for each style that could not be made, why."""
    made, skipped = situated(examples, golden, seed)
    return made, ({"situated": skipped} if skipped else {})
