"""Text as a reader sees it: hyphenation joined, compatibility forms folded, invisible characters out; searched and
shown in that form, cited in the file's own characters."""

from __future__ import annotations

from pathlib import Path

import pytest

from declrag.config import IngestConfig
from declrag.ingest.indexer import Indexer
from declrag.ingest.loaders import LoadError, load_file
from declrag.pipeline.stages.generate._extract import shown
from declrag.stores import open_store
from declrag.text.stopwords import query_terms
from declrag.testing import HashEmbedder
from declrag.text.reading import is_break, reading, visible
from declrag.types import searched_text


@pytest.mark.parametrize(("left", "right"), [
    ("calibra", "tion"), ("docu", "ments"), ("in", "formation"), ("re", "peated"), ("ware", "house"),
    ("sched", "ule"), ("Replace", "ment"), ("tokeni", "zation"), ("some", "thing")])
def test_a_word_a_typesetter_broke_is_joined(left: str, right: str):
    assert is_break(left, right)
    assert reading(f"The {left}-\n{right} was done.") == f"The {left}{right} was done."


@pytest.mark.parametrize(("left", "right"), [
    ("text", "embedding"), ("well", "known"), ("self", "contained"), ("long", "term"), ("non", "English"),
    ("COVID", "19"), ("cross", "validation")])
def test_a_real_hyphen_at_a_line_end_keeps_its_hyphen_and_loses_the_break(left: str, right: str):
    assert not is_break(left, right)
    assert reading(f"A {left}-\n  {right} model.") == f"A {left}-{right} model."


def test_the_text_s_own_spelling_decides_first():
    # "multi-lingual" written with its hyphen elsewhere keeps it; "pitchsensor", unknown to any word list, is joined
    # because the text writes it so
    assert reading("a multi-lingual model.\nThe multi-\nlingual one.").endswith("The multi-lingual one.")
    assert reading("The pitchsensor.\nA pitch-\nsensor fault.").endswith("A pitchsensor fault.")


def test_a_soft_hyphen_is_a_break_wherever_it_is():
    assert reading("docu\u00adments and calibra\u00ad\ntion") == "documents and calibration"


def test_compatibility_forms_and_invisible_characters():
    assert reading("The oﬃcial ﬁgure") == "The official figure"  # ligatures
    assert reading("ｏｆｆｉｃｉａｌ　ＦＩＧＵＲＥ １２") == "official FIGURE 12"  # full-width letters, digits, space
    assert reading("caf\u0065\u0301") == "caf\u00e9"  # a decomposed accent composed
    assert reading("zero\u200bwidth\u2060joined\ufeff") == "zerowidthjoined"  # format characters out
    assert reading("a\u00a0b") == "a b"
    assert not visible("\u200b\u200c \ufeff\n") and visible("\u200ba")
    plain = "Nothing to change here.\nTwo lines, one - dash."
    assert reading(plain) == plain  # case, punctuation, line breaks stay


def test_a_chunk_is_searched_as_read_and_the_query_too():
    text = "The oﬃcial ﬁgure after calibra-\ntion."
    assert searched_text("", text) == "The official figure after calibration."
    assert query_terms("ｏｆｆｉｃｉａｌ ﬁgure") == ["official", "figure"]
    assert shown(text) == "The official figure after calibration."  # the answer reads it so too


@pytest.mark.parametrize("name", ["zw.txt", "zw.md", "zw.jsonl"])
def test_a_file_of_invisible_characters_is_empty(tmp_path: Path, name: str):
    p = tmp_path / name
    p.write_text('{"text": "\u200b\u200b"}\n' if name.endswith(".jsonl") else "\u200b\ufeff\u200c \n", "utf-8")
    with pytest.raises(LoadError) as info:
        load_file(p)
    assert info.value.reason in ("no visible text (only invisible characters)",
                                 'no usable record (1 skipped; line 1: "text" is empty; fix the record or remove the '
                                 'line)')


def test_every_loader_and_the_store_search_as_read_and_cite_the_files_own_characters(tmp_path: Path):
    """One mechanism for every format: a text, a Markdown and an HTML file with ligatures, full-width letters and a
    broken word are found by the plain words, and their chunks are exact spans of the file's own text."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The harbour oﬃce conﬁrmed the reﬁt.\n", "utf-8")
    (folder / "b.md").write_text("# Notes\n\nThe ｔｕｒｂｉｎｅ was serviced.\n", "utf-8")
    (folder / "c.html").write_text("<p>The ﬂoating dock\u200b stays closed.</p>", "utf-8")
    (folder / "d.txt").write_text("The warehouse calibra-\ntion was re-\npeated.\n", "utf-8")  # as pdftotext writes
    st, meta = open_store(str(tmp_path / "store"), IngestConfig())
    with st:
        Indexer(st, meta.ingest, HashEmbedder(), progress=False).index_paths([folder])
        for query, file in (("office confirmed refit", "a.txt"), ("turbine serviced", "b.md"),
                            ("floating dock", "c.html"), ("calibration repeated", "d.txt")):
            [hit, *_] = st.keyword_search(query, 3)
            assert hit.chunk.source.endswith(file), query
            assert reading(hit.text) != hit.text  # what matched is the read form; what is cited, the file's own
            if not file.endswith(".html"):
                assert Path(hit.chunk.source).read_text("utf-8")[hit.start:hit.end] == hit.text
    assert meta.format >= 4
