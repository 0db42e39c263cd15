"""Style probes (`declrag_bench.probes`): the held-out synthetic questions asked again after a situation told in
sentences of other documents, as `declrag bench nolabels` measures them beside the writers."""

from __future__ import annotations

from declrag.golden import Example, GoldenSet
from declrag.types import Document
from declrag_bench.probes import situated

PROSE = {
    "a": "The backup job runs every night at two. It copies the database to the second disk. Nobody checks the logs.",
    "b": "Our office moved to the third floor last spring. The printer there jams when the paper is damp. "
         "We keep a spare toner cartridge in the cupboard.",
    "c": "The river floods the lower meadow in most winters. Farmers move their sheep to the hill before it does.",
}


def _golden(kinds=("ict", "keywords"), n=40) -> GoldenSet:
    docs = [Document(id=d, text=t) for d, t in PROSE.items()]
    dev = [Example(id=f"dev-{i}", question=f"question number {i}?", gold={"abc"[i % 3]: 1},
                   metadata={"synthetic": True, "kind": kinds[i % len(kinds)]}) for i in range(n)]
    return GoldenSet(name="syn", documents=docs, splits={"train": dev[:2], "dev": dev})


def test_a_situated_probe_tells_a_situation_from_other_documents_then_asks_the_same_question():
    golden = _golden()
    probes, why = situated(golden.splits["dev"], golden)
    assert why is None and len(probes) == 40
    for p, e in zip(probes, golden.splits["dev"]):
        told, asked = p.question[: -len(e.question) - 1], p.question[-len(e.question):]
        assert asked == e.question and p.gold == e.gold and p.spans == e.spans
        assert p.metadata["kind"] == "situated" and p.metadata["probe_of"] == e.id and p.id == f"{e.id}~situated"
        own = PROSE[next(iter(e.gold))]
        sentences = [s for d, t in PROSE.items() if d not in e.gold for s in t.replace(". ", ".|").split("|")]
        assert sum(s in told for s in sentences) == 2 and not any(s in own for s in told.split(". ")[:1])
    assert [p.question for p in situated(golden.splits["dev"], golden)[0]] == [p.question for p in probes]  # seeded


def test_a_probe_that_cannot_be_made_is_skipped_and_named():
    golden = _golden()
    one = GoldenSet(name="one", documents=golden.documents[:1], splits=golden.splits)
    assert situated(one.splits["dev"], one) == ([], "the corpus has fewer than two documents with prose sentences "
                                                    "to tell a situation from")
    real = [Example(id="r", question="q?", gold={"a": 1})]
    assert situated(real, golden)[1] == "no synthetic question with gold documents to re-ask"
