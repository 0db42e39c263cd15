"""Function words per language (declrag.text.stopwords) and what the extractive answer does with them."""

from __future__ import annotations

import numpy as np

from declrag.pipeline.stages.generate._extract import extract, missing_details
from declrag.text.stopwords import question_language, stopwords


def test_each_language_has_its_function_words_as_keyword_tokens():
    assert {"der", "und", "wann"} <= stopwords("de") and {"и", "был"} <= stopwords("ru")
    assert {"el", "para"} <= stopwords("es") and "का" in stopwords("hi")
    assert "vertrag" not in stopwords("de") and "эдикт" not in stopwords("ru")
    assert stopwords("en") == frozenset()  # English keeps declrag's own list, which its rules were calibrated with
    assert stopwords("xx") == stopwords("") == frozenset()  # a language the lists lack: none, no error


def test_a_question_s_language_is_named_only_when_the_identifier_is_sure():
    assert question_language("Wann wurde dieses Edikt erlassen?") == "de"
    assert question_language("When was this edict issued?") == "en"
    assert question_language("Edikt?") == ""  # too few letters to tell


def _zero(texts: list[str]) -> np.ndarray:  # no likeness at all: the score is the word overlap alone
    return np.zeros((len(texts), 4), dtype=np.float32)


def _answer(question: str, passage: str):
    return extract(question, [passage], _zero, np.zeros(4, dtype=np.float32), lexical_weight=1.0,
                   rank_weight=0.0, min_score=0.9)


def test_a_german_question_s_function_words_do_not_count_against_the_sentence_that_answers_it():
    passage = "Der Vertrag wurde 1763 in Paris unterzeichnet. Danach begann eine lange Zeit des Friedens."
    got = _answer("Wann wurde der Vertrag von Paris unterzeichnet?", passage)
    assert got.pieces and got.pieces[0].text.startswith("Der Vertrag wurde 1763"), got.reason
    assert got.best == 1.0  # Vertrag, Paris, unterzeichnet: all there ("wann", "der", "von" are function words)


def test_german_nouns_are_not_names_to_the_detail_rule_but_english_names_still_are():
    passage = "Seit 2005 sind die wichtigsten Reisebegleiter des Doktors meist weiblich."
    assert missing_details("Welches Geschlecht haben seit 2005 die Reisebegleiter?", passage) == []
    assert missing_details("Welches Geschlecht haben seit 2006 die Reisebegleiter?", passage) == ["2006"]
    assert missing_details("Which companions did the Acme Corporation hire after 2005?",
                           "Since 2005 the companions have mostly been women.") == ["Acme Corporation"]


def test_a_spanish_question_word_is_no_name_even_after_its_opening_mark():
    passage = "La empresa McKinsey & Company fue fundada en 1926 por James O. McKinsey en Chicago."
    for q in ("¿Quién fundó McKinsey & Company?", "¿Cuántas oficinas abrió McKinsey & Company en 1926?"):
        assert missing_details(q, passage) == [], q
    assert missing_details("¿Quién fundó Bain & Company?", passage) == ["Bain"]


def test_question_words_count_as_function_words_where_the_lists_lack_them():
    assert {"क्या", "कब", "कितने"} <= stopwords("hi") and {"متى", "كم"} <= stopwords("ar")
    assert {"cuándo", "cuántos"} <= stopwords("es") and {"каком", "какие"} <= stopwords("ru")
    assert "什么" in stopwords("zh")  # a bigram, as keyword search writes it
    assert stopwords("en") == frozenset()


def test_a_question_too_short_to_tell_alone_is_told_among_its_passages_languages():
    assert question_language("有多少人？") == ""  # four letters: too few alone
    assert question_language("有多少人？", frozenset({"zh"})) == "zh"
    assert question_language("Кто завладел мячом?") == ""  # alone it reads as Bulgarian, not surely
    assert question_language("Кто завладел мячом?", frozenset({"ru"})) == "ru"
    assert question_language("Who won the cup?", frozenset({"ru"})) == "en"  # English is always a candidate
    assert question_language("Who won?", frozenset({"en", ""})) == ""  # nothing to choose between


def test_russian_inflected_names_and_a_capitalised_question_word_are_not_missing_details():
    passage = "В Южной Калифорнии играет только одна команда лиги, Лос-Анджелес Гэлекси."
    assert missing_details("Какая команда лиги представляет Южную Калифорнию?", passage) == []
    assert missing_details("Почему Полония не играет в лиге?", "Полония не играет в лиге с 1990 года.") == []
    assert missing_details("Какая команда представляет Северную Дакоту?", passage) == ["Северную Дакоту"]


def test_a_russian_question_s_words_are_matched_by_their_stems():
    passage = "Большинство мест религиозного культа в Варшаве было разрушено в 1944 году. Город восстановили позже."
    got = _answer("Когда были разрушены места культа в Варшаве?", passage)
    assert got.pieces and got.pieces[0].text.startswith("Большинство мест"), got.reason
    assert got.best == 1.0  # разрушены / разрушено, места / мест: the same stems


def test_the_keyword_query_leaves_out_its_language_s_function_words_on_both_stores():
    from declrag.text.stopwords import query_terms  # the one place both stores' keyword queries are made

    assert query_terms("В каком году была основана Варшава?") == ["основана", "варшава"]
    assert query_terms("Wann wurde die Universität in Warschau gegründet?") == ["wurde", "universität", "warschau",
                                                                              "gegründet"]
    assert query_terms("When was the University of Warsaw founded?") == ["when", "university", "warsaw", "founded"]
    assert query_terms("Варшава") == ["варшава"]  # too short to tell its language: nothing more is left out
