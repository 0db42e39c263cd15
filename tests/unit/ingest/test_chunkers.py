"""Chunking strategies: exact spans, sizes in model tokens, overlap, parents, semantic cuts."""

from __future__ import annotations

import pytest

from declrag.config import ChunkerConfig
from declrag.ingest.chunkers import Chunker
from declrag.text.sentences import sentence_spans
from declrag.text.tokens import HFTokens, WordTokens
from declrag.testing import HashEmbedder
from declrag.types import Document

from tests.conftest import shared

STRATEGIES = ["fixed", "recursive", "sentence", "semantic", "parent-child"]


@pytest.fixture(scope="module")
def article() -> Document:
    text = shared("cmu-qa", "S08", "data", "set1", "a1.txt.clean").read_text(encoding="utf-8", errors="replace")
    return Document(id="a1", text=text, source="a1.txt", title="Article")


@pytest.fixture(scope="module")
def bert_tokens(minilm):
    return minilm.tokens


def make(name: str, tokens=None, **kw) -> Chunker:
    cfg = ChunkerConfig(name=name, **{"chunk_size": 64, "overlap": 8, "parent_size": 256, **kw})
    return Chunker(cfg, tokens or WordTokens(), HashEmbedder().embed_documents)


@pytest.mark.parametrize("name", STRATEGIES)
def test_spans_are_exact_and_sizes_hold_with_the_model_tokenizer(name, article, bert_tokens):
    chunks = make(name, bert_tokens)(article)
    assert len(chunks) > 5
    for i, c in enumerate(chunks):
        assert article.text[c.start:c.end] == c.text and c.text == c.text.strip()
        assert c.position == i and c.id == f"a1#{i}" and c.doc_id == "a1"
        assert len(bert_tokens.offsets(c.text)) <= 64
    if name == "parent-child":
        for c in chunks:
            assert c.parent_start <= c.start and c.end <= c.parent_end
            assert len(bert_tokens.offsets(article.text[c.parent_start:c.parent_end])) <= 256
    else:
        assert all(c.parent_start is None for c in chunks)


@pytest.mark.parametrize("name", STRATEGIES)
def test_chunks_cover_the_whole_document(name, article):
    chunks = make(name)(article)
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    words = [m.span() for m in __import__("re").finditer(r"\S+", article.text)]
    missing = [s for s in words if not set(range(*s)) <= covered]
    assert not missing, f"{len(missing)} words not in any chunk, e.g. {article.text[slice(*missing[0])]!r}"


def test_fixed_windows_and_overlap_by_hand():
    text = " ".join(f"w{i}" for i in range(10))  # ten one-token words
    doc = Document(id="d", text=text)
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=8, overlap=3), WordTokens())(doc)
    assert [c.text for c in chunks] == ["w0 w1 w2 w3 w4 w5 w6 w7", "w5 w6 w7 w8 w9"]


@pytest.mark.parametrize("head", ["Cast", ""])
def test_windows_move_on_past_a_table_line_longer_than_a_window(head):
    # a table (a unit) whose next line is longer than a window holds: each window used to be cut back to the same
    # line end, a token shorter each time (a navbox on a slide gave 30 chunks of one paragraph's tail)
    prose = " ".join(f"p{i}" for i in range(12))
    rows = [head, " ".join(f"c{i}" for i in range(30)), "r1 | r2"]
    table = "\n".join(r for r in rows if r)
    text = f"{prose}\n\n{table}"
    start = len(prose) + 2
    doc = Document(id="d", text=text, metadata={"units": [[start, len(text), "table", start + len(rows[0])]]})
    chunks = Chunker(ChunkerConfig(name="fixed", chunk_size=8, overlap=3), WordTokens())(doc)
    ends = [c.end for c in chunks]
    assert ends == sorted(set(ends)), [c.text for c in chunks]  # each window ends past the one before it
    assert len(chunks) <= len(text.split()) // 5 + 2, [c.text for c in chunks]
    covered = set().union(*(range(c.start, c.end) for c in chunks))
    assert all(set(range(m.start(), m.end())) <= covered for m in __import__("re").finditer(r"\S+", text))


def test_windows_over_tables_cover_everything_and_never_repeat_a_tail():
    # random paragraphs and tables (units) of random line lengths: every word in a chunk, each chunk ending past the
    # one before it (none a part of the one before), none over the window unless a word is
    import random

    rng = random.Random(7)
    for _ in range(300):
        parts, units = [], []
        at = 0
        for _ in range(rng.randint(1, 6)):
            lines = [" ".join(rng.choice("ab cd ef gh ij".split()) for _ in range(rng.randint(1, 14)))
                     for _ in range(rng.randint(1, 5))]
            block = "\n".join(lines)
            if rng.random() < 0.5:
                units.append([at, at + len(block), "table", at + len(lines[0])])
            parts.append(block)
            at += len(block) + 2
        text = "\n\n".join(parts)
        size = rng.randint(8, 20)
        cfg = ChunkerConfig(name="fixed", chunk_size=size, overlap=rng.randint(0, size - 1))
        chunks = Chunker(cfg, WordTokens())(Document(id="d", text=text, metadata={"units": units}))
        ends = [c.end for c in chunks]
        assert ends == sorted(set(ends)), (text, units, [c.text for c in chunks])
        covered = set().union(*(range(c.start, c.end) for c in chunks))
        assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
        assert all(len(c.text.split()) <= size for c in chunks)


def test_recursive_prefers_paragraphs_then_sentences():
    text = "Alpha beta gamma delta.\n\nEpsilon zeta eta. Theta iota kappa lambda mu nu.\n\nXi omicron."
    doc = Document(id="d", text=text)
    chunks = Chunker(ChunkerConfig(name="recursive", chunk_size=8, overlap=0), WordTokens())(doc)
    assert [c.text for c in chunks] == ["Alpha beta gamma delta.", "Epsilon zeta eta.",
                                        "Theta iota kappa lambda mu nu.", "Xi omicron."]
    big = Chunker(ChunkerConfig(name="recursive", chunk_size=12, overlap=0), WordTokens())(doc)
    assert [c.text for c in big] == ["Alpha beta gamma delta.", "Epsilon zeta eta. Theta iota kappa lambda mu nu.",
                                     "Xi omicron."]  # a paragraph that fits stays whole


def test_recursive_overlap_carries_trailing_pieces():
    text = "One two. Three four. Five six. Seven eight. Nine ten."
    chunks = Chunker(ChunkerConfig(name="recursive", chunk_size=9, overlap=3), WordTokens())(Document(id="d", text=text))
    assert [c.text for c in chunks] == ["One two. Three four. Five six.", "Five six. Seven eight. Nine ten."]


def test_sentence_chunker_keeps_sentences_whole():
    text = "The cat sat. The dog ran far away. A bird sang. It rained."
    chunks = Chunker(ChunkerConfig(name="sentence", chunk_size=10, overlap=0), WordTokens())(Document(id="d", text=text))
    assert [c.text for c in chunks] == ["The cat sat. The dog ran far away.", "A bird sang. It rained."]


def test_semantic_chunker_cuts_where_topics_change():
    a = ["Cats purr and cats nap.", "Cats chase mice, cats climb.", "Cats groom cats."]
    b = ["Stocks fell as markets slid.", "Markets and stocks rallied.", "Stocks closed, markets calm."]
    text = " ".join(a + b)
    cfg = ChunkerConfig(name="semantic", chunk_size=200, overlap=0, semantic_percentile=80)
    chunks = Chunker(cfg, WordTokens(), HashEmbedder().embed_documents)(Document(id="d", text=text))
    assert [c.text for c in chunks] == [" ".join(a), " ".join(b)]


def test_sentence_spans_handle_lines_and_unicode():
    text = "Zoë won 2 awards in Zürich. She left.\nNext line here"
    assert [text[a:b] for a, b in sentence_spans(text)] == ["Zoë won 2 awards in Zürich.", "She left.", "Next line here"]


def test_empty_and_whitespace_documents_give_no_chunks():
    for name in STRATEGIES:
        assert make(name)(Document(id="d", text="   \n\n ")) == []


def test_invalid_configs_are_rejected():
    with pytest.raises(ValueError, match="overlap"):
        ChunkerConfig(chunk_size=32, overlap=32)
    with pytest.raises(ValueError, match="parent_size"):
        ChunkerConfig(name="parent-child", chunk_size=256, parent_size=128)
    with pytest.raises(ValueError):
        ChunkerConfig(name="paragraphs")
    with pytest.raises(ValueError, match="semantic"):
        Chunker(ChunkerConfig(name="semantic"), WordTokens())


def test_hf_tokens_do_not_truncate(minilm):
    toks = HFTokens(minilm.folder)
    long = "word " * 2000
    assert len(toks.offsets(long)) == 2000
