"""Passages handed over best-first: each what matched, a lower one giving up what a higher one holds, k of them."""

from __future__ import annotations

from pathlib import Path

from declrag.config import IngestConfig, SearchParams
from declrag.ingest.indexer import Indexer
from declrag.pipeline.stages.retrieve._searching import LEFT_AT_LEAST, best_first, hand_over, search
from declrag.stores import open_store
from declrag.testing import HashEmbedder
from declrag.types import Chunk, Hit

TEXT = "".join(f"Line {i:02d} of the log says the pump ran for {i} minutes.\n" for i in range(40))


def hit(doc: str, start: int, end: int, score: float = 1.0) -> Hit:
    c = Chunk(id=f"{doc}#{start}", doc_id=doc, text=TEXT[start:end], start=start, end=end, position=start)
    return Hit(chunk=c, score=score, text=TEXT[start:end], start=start, end=end)


def test_a_lower_passage_gives_up_what_a_higher_one_holds():
    top, overlapping, inside, other = hit("a", 100, 400), hit("a", 300, 700), hit("a", 150, 380), hit("b", 100, 400)
    got = best_first([top, overlapping, inside, other])
    assert [(h.doc_id, h.start, h.end) for h in got][0] == ("a", 100, 400)  # the best one as it matched
    second = got[1]
    assert second.start >= 400 and second.end == 700 and second.text == TEXT[second.start:second.end]
    assert not second.text[0].isspace() and second.chunk is overlapping.chunk  # its own chunk, trimmed
    assert [h.doc_id for h in got] == ["a", "a", "b"]  # the one wholly inside the best is left out
    assert got[2] is other  # another document's passage is untouched


def test_a_sliver_is_left_out_and_k_is_filled_from_below():
    top, sliver, fill = hit("a", 0, 500), hit("a", 20, 520), hit("a", 600, 800)
    assert (520 - 500) < LEFT_AT_LEAST * 500
    assert [(h.start, h.end) for h in best_first([top, sliver, fill], k=2)] == [(0, 500), (600, 800)]
    assert hand_over(None, [top, sliver, fill], k=2, how="none") == [top, sliver]  # type: ignore[arg-type]
    # the longest part left: a lower passage around a higher one keeps its longer side
    around = best_first([hit("a", 200, 300), hit("a", 150, 600)])
    assert around[1].end == 600 and 300 <= around[1].start < 302  # [300, 600), not [150, 200)


def test_k_passages_over_a_short_document_of_many_chunks(tmp_path: Path):
    """The kind the issue saw: ``search --k 20`` on a file of 9 chunks gave one result spanning the whole file."""
    from declrag.config import ChunkerConfig

    d = tmp_path / "d"
    d.mkdir()
    (d / "log.md").write_text("# Pump log\n\n" + TEXT)
    emb = HashEmbedder()
    ingest = IngestConfig(chunker=ChunkerConfig(name="fixed", chunk_size=64, overlap=16))
    store, meta = open_store(tmp_path / "s", ingest)
    Indexer(store, meta.ingest, emb, progress=False).index_paths([d])
    chunks = store.count()
    assert 6 <= chunks < 20
    got = search(store, emb, "pump minutes log", SearchParams(limit=20))
    assert len(got) == chunks  # every chunk, none merged into another
    for h in got:  # each starts with (and is part of) the chunk that matched
        assert h.chunk.start <= h.start < h.end <= h.chunk.end
        assert h.text == h.chunk.text[h.start - h.chunk.start:h.end - h.chunk.start]
    spans = sorted((h.start, h.end) for h in got)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no character twice
    merged = search(store, emb, "pump minutes log", SearchParams(limit=20, handover="merge"))
    assert len(merged) == 1  # what merging did: the whole file as one result


def test_a_title_or_heading_line_is_never_quoted_as_an_answer(tmp_path: Path):
    """Small files whose first line is a title ("Pool Rules [1] The pool ..."): the answer quotes sentences only."""
    from declrag.config import ProgramConfig, default_config
    from declrag.ingest.headers import heading_names
    from declrag.pipeline.stages.generate._pieces import candidates
    from declrag.pipeline.program import RAGProgram

    files = {"pool.txt": "Pool Rules\n\nThe pool opens at seven and closes at nine every day.\n",
             "kiln.txt": "Kiln Schedule\n\nThe kiln is fired on Tuesdays after the glaze dries.\n",
             "boat.md": "# Boat Club\n\nRowing Times\n\nThe boats go out at dawn when the river is calm.\n"}
    d = tmp_path / "d"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    emb = HashEmbedder()
    store, meta = open_store(tmp_path / "s", IngestConfig())
    Indexer(store, meta.ingest, emb, progress=False).index_paths([d])
    prog = RAGProgram(default_config(ProgramConfig()), store=store, embedder=emb)
    for question, title in (("When does the pool open? Pool Rules", "Pool Rules"),
                            ("Kiln Schedule: when is the kiln fired?", "Kiln Schedule")):
        got = prog(question=question)
        assert title not in got.answer and got.citations, got.answer  # the sentence, not the title line
    names = heading_names("Boat Club", "Boat Club > Rowing Times")
    text = files["boat.md"]
    quoted = [p.text for p in candidates([text], 300, True, [names])]
    assert quoted == ["The boats go out at dawn when the river is calm."]  # nor a heading of its section
    assert "Rowing Times" in [p.text for p in candidates([text], 300, True)]  # what it would quote without them


def test_joined_appends_a_neighbour_found_lower_to_the_passage_it_goes_on_from():
    top, after, before, other = hit("a", 100, 400), hit("a", 380, 700), hit("a", 0, 120), hit("b", 0, 300)
    got = best_first([top, after, before, other], k=3, join=True)
    first = got[0]
    assert (first.start, first.end) == (100, 700) and first.text == TEXT[100:700]  # what matched first, then on
    assert first.chunk is top.chunk
    # a neighbour before it is not joined (it would put what matched less first): a passage of its own, trimmed
    assert [(h.doc_id, h.end <= 100) for h in got[1:]] == [("a", True), ("b", False)]
    assert got[1].start == 0 and got[1].text == TEXT[0:got[1].end]
