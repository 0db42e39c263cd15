"""Text in every language its users write in: keyword tokens, sentence ends, a document's language, and the note an
abstention carries when the question is in another language than the passages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from declrag.config import IngestConfig, ProgramConfig, default_config
from declrag.ingest.headers import text_title
from declrag.ingest.indexer import Indexer
from declrag.pipeline.program import RAGProgram
from declrag.stores import open_store
from declrag.text.keywords import keyword_tokens
from declrag.text.languages import identify, not_theirs, uncovered
from declrag.text.sentences import sentence_spans
from tests.conftest import shared


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


# ------------------------------------------------------------------------------------------------- keyword tokens
def test_latin_text_keeps_the_word_tokens_it_always_had():
    text = "The Brandenburg-Gate's 2nd snake_case café, 3.5 km (approx.) — ÉTÉ!"
    assert keyword_tokens(text) == re.findall(r"[^\W_]+", text.lower())


@pytest.mark.parametrize("text, want", [
    ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # vowel signs and the virama stay in their word
    ("图书馆开门", ["图书", "书馆", "馆开", "开门"]),  # no spaces: overlapping bigrams
    ("门", ["门"]),  # a lone character is its own token
    ("東京タワー", ["東京", "京タ", "タワ", "ワー"]),  # kanji and katakana alike
    ("ภาษาไทย", ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]),  # Thai by grapheme cluster
    ("308分", ["308", "分"]),  # digits apart from the characters after them
    ("русский язык", ["русский", "язык"]),
    ("Мо́сква — столи́ца", ["москва", "столица"]),  # stress marks: accents a query does not write
    ("كَتَبَ الولد", ["كتب", "الولد"]),  # so are Arabic's harakat
])
def test_every_script_is_cut_into_words_a_query_can_match(text, want):
    assert keyword_tokens(text) == want


# ------------------------------------------------------------------------------------------------- sentences
@pytest.mark.parametrize("text, want", [
    ("图书馆早上八点开门，晚上十点关门。周末缩短两个小时！你知道吗？",
     ["图书馆早上八点开门，晚上十点关门。", "周末缩短两个小时！", "你知道吗？"]),
    ("यह एक वाक्य है। यह दूसरा है।", ["यह एक वाक्य है।", "यह दूसरा है।"]),  # the danda
    ("สวัสดีครับ วันนี้อากาศดี", ["สวัสดีครับ", "วันนี้อากาศดี"]),  # a space between Thai sentences
    ("هذه جملة. هل هذه جملة؟", ["هذه جملة.", "هل هذه جملة؟"]),
])
def test_sentences_end_where_their_language_ends_them(text, want):
    assert sentences(text) == want


def test_a_sentence_in_a_script_without_spaces_is_no_title():
    assert text_title("公司食堂的午餐从十一点半开始供应，素食窗口在二楼东侧。\n") == ""
    assert text_title("游泳馆规定\n\n游泳馆要求所有游客佩戴泳帽。") == "游泳馆规定"


# ------------------------------------------------------------------------------------------------- languages
def test_xquad_paragraphs_are_named_in_their_language():
    for lang in ("en", "de", "es", "ru", "ar", "hi", "zh"):
        data = json.loads(shared("xquad", f"xquad.{lang}.json").read_text("utf-8"))["data"]
        paragraphs = [p["context"] for art in data[:12] for p in art["paragraphs"]]
        named = [identify(p) for p in paragraphs]
        assert named.count(lang) >= 0.98 * len(named), (lang, [n for n in named if n != lang])


def test_too_little_text_is_not_named():
    assert identify("x 12") == "" and identify("") == ""


def test_an_english_embedder_is_said_not_to_cover_other_languages():
    assert uncovered({"zh": 4, "en": 9, "": 1}, "sentence-transformers/all-MiniLM-L6-v2") == ["zh"]
    assert uncovered({"zh": 4}, "intfloat/multilingual-e5-small") == []
    assert uncovered({"zh": 4}, "/models/my-own-model") == []  # a model declrag does not know: nothing claimed


def test_a_question_in_another_language_is_said_so_and_english_ones_almost_never_are():
    assert not_theirs("Quelle est la capitale de la France ?", ["en"]) == "; the question is in fr, the passages in en"
    assert not_theirs("黑豹队的防守丢了多少分？", ["en", ""]) == "; the question is in zh, the passages in en"
    assert not_theirs("What did Lady Gaga sing?", ["en"]) == ""
    data = json.loads(shared("xquad", "xquad.en.json").read_text("utf-8"))["data"]
    english = [q["question"] for art in data for p in art["paragraphs"] for q in p["qas"]]
    assert sum(bool(not_theirs(q, ["en"])) for q in english) <= 0.005 * len(english)


# ------------------------------------------------------------------------------------------------- the bug report
CJK_QUESTIONS = [("图书馆晚上几点关门？", "zh-1.txt", "晚上十点关门"),
                 ("素食窗口在哪里？", "zh-2.txt", "二楼东侧"),
                 ("地铁三号线为什么暂停运营？", "zh-3.txt", "轨道维修"),
                 ("游泳馆要求游客佩戴什么？", "zh-4.txt", "泳帽")]


def test_the_chinese_files_of_the_bug_report_are_found_and_answered(tmp_path: Path, minilm):
    st, meta = open_store(str(tmp_path / "store"), IngestConfig())
    with st:
        report = Indexer(st, meta.ingest, minilm, progress=False).index_paths([shared("..", "cases", "reading", "cjk")])
        assert report.languages == {"zh": 4}
        said = "languages: zh 4; the embedder all-MiniLM-L6-v2 was not trained on zh: found by keywords"
        assert said in report.summary()
        prog = RAGProgram(default_config(ProgramConfig()), store=st, embedder=minilm)
        for question, file, fact in CJK_QUESTIONS:
            [hit, *_] = st.keyword_search(question, 3)
            assert hit.chunk.source.endswith(file) and hit.chunk.language == "zh", question
            got = prog(question=question)
            assert not got.abstained and fact in got.answer, (question, got.answer, got.reason)
            assert got.citations[0]["source"].endswith(file), question
        got = prog(question="游泳馆几点关门？")  # when the pool closes: no file says
        assert got.abstained
        got = prog(question="Quelle est l'heure d'ouverture de la bibliothèque le dimanche ?")
        assert got.abstained and got.reason.endswith("; the question is in fr, the passages in zh")


def test_synthetic_writers_find_words_and_sentences_in_chinese_and_hindi():
    from declrag.synth._generate import content_words
    from declrag.synth._queries import _sentences

    assert content_words("हिन्दी भारत की राजभाषा है") == ["हिन्दी", "भारत", "की", "राजभाषा", "है"]
    assert content_words("图书馆每天开门")[:2] == ["图书", "书馆"]  # a Chinese sentence has words to pick from
    passage = "图书馆每天早上八点开门，晚上十点关门。周末的开放时间缩短两个小时。"
    assert len(_sentences(passage)) == 2  # both long enough to make a query of


def test_a_model_s_question_in_chinese_is_kept_and_its_writers_ask_for_the_passage_s_language():
    from declrag.lm.prompts._signatures import spec
    from declrag.synth._generate import clean_question

    assert clean_question("Question: 游泳馆要求游客佩戴什么？") == "游泳馆要求游客佩戴什么？"  # a full-width mark
    assert clean_question("好吗？") is None  # too short, in any script
    for kind in ("factoid", "explanatory", "unanswerable", "multi"):
        assert "in the language of the passage" in spec(f"synth_{kind}").variants["default"]


def test_a_record_s_own_language_wins_and_each_chunk_carries_its_document_s(tmp_path: Path):
    from declrag.testing import HashEmbedder

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.jsonl").write_text(
        json.dumps({"id": "a", "text": "Die Bibliothek öffnet jeden Morgen um acht Uhr und schließt um zehn.",
                    "language": "de-CH"}) + "\n"
        + json.dumps({"id": "b", "text": "The library opens every morning at eight and closes at ten."}) + "\n",
        "utf-8")
    st, meta = open_store(str(tmp_path / "store"), IngestConfig())
    with st:
        report = Indexer(st, meta.ingest, HashEmbedder(), progress=False).index_paths([tmp_path / "docs"])
        assert report.languages == {"de-CH": 1, "en": 1}
        assert {c.doc_id: c.language for c in st.get(["a#0", "b#0"])} == {"a": "de-CH", "b": "en"}
        assert {h.chunk.doc_id for h in st.keyword_search("Bibliothek library", 5)} == {"a", "b"}
        assert [h.chunk.doc_id for h in st.keyword_search("Bibliothek library", 5, {"language": "de-CH"})] == ["a"]
