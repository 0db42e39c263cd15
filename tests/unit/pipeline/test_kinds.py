"""What a question asks for, in the languages declrag reads question words of (declrag.pipeline.stages.generate)."""

from __future__ import annotations

import numpy as np
import pytest

from declrag.pipeline.stages.generate._extract import extract
from declrag.pipeline.stages.generate._kinds import answer_kind, holds_kind


@pytest.mark.parametrize(("question", "kind"), [
    ("Сколько лет было Мэннингу, когда он играл в Суперкубке 50?", "number"),
    ("Когда в Варшаве было разрушено большинство мест религиозного культа?", "date"),
    ("В каком году был основан университет?", "date"),
    ("Какой актер выполнял сурдоперевод государственного гимна?", "name"),
    ("Как Тесла финансировал свою работу?", None),  # how: no type
    ("Каким образом Тесла финансировал свою работу?", None),
    ("¿Quién fundó la ciudad de Varsovia?", "name"),
    ("¿Cuántos años tenía Manning en la Super Bowl 50?", "number"),
    ("¿En qué año se fundó la universidad?", "date"),
    ("¿Qué es la física cuántica?", None),
    ("¿Por qué se cerró la bolsa de Varsovia?", None),
    ("Wie viele Menschen leben heute in Warschau?", "number"),
    ("Wann wurde die Universität von Warschau gegründet?", "date"),
    ("Wer war der erste König von Polen?", None),  # German nouns are capitalised: a name cannot be told
    ("كم عدد سكان مدينة وارسو اليوم؟", "number"),
    ("متى تم تأسيس جامعة وارسو؟", "date"),
    ("ما هو العام الذي شهد أول استخدام لمؤشر المحرك؟", "date"),
    ("ما المساحة التي يغطيها حوض الأمازون؟", "number"),
    ("ما العامل الذي أدى إلى ذلك؟", None),
    ("सुपर बाउल 50 कब खेला गया था?", "date"),  # Hindi's question word stands inside the question
    ("वारसॉ में कितने लोग रहते हैं?", "number"),
    ("华沙大学是哪一年建立的？", "date"),
    ("华沙现在有多少居民？", "number"),
    ("华沙几乎被完全摧毁了吗？", None),  # 几乎 (almost) asks for no number
    ("When was the University of Warsaw founded?", "date"),  # English as before
    ("Who was the first king of Poland?", "name"),
])
def test_each_language_s_question_words_say_what_the_answer_holds(question: str, kind: str | None):
    assert answer_kind(question) == kind


def test_a_sentence_s_capitalised_first_function_word_is_no_name():
    q = "Какой актер выполнял сурдоперевод гимна?"
    assert not holds_kind("В этот день гимн исполняли на стадионе.", "name", q)  # "В": a capital, no name
    assert holds_kind("Гимн на языке жестов исполнила Марли Мэтлин.", "name", q)


def _zero(texts: list[str]) -> np.ndarray:
    return np.zeros((len(texts), 4), dtype=np.float32)


def test_a_russian_how_many_question_prefers_the_sentence_holding_a_number():
    passages = ["В этом сезоне защита Пэнтерс сделала много перехватов.", "Всего защита Пэнтерс сделала 24 перехвата."]

    def best(type_weight: float) -> list[int]:
        got = extract("Сколько перехватов сделала защита Пэнтерс в этом сезоне?", passages, _zero,
                      np.zeros(4, dtype=np.float32), lexical_weight=1.0, rank_weight=0.0, min_score=0.5,
                      type_weight=type_weight, max_sentences=1, languages=["ru", "ru"])
        return [p.n for p in got.pieces]

    assert best(0.0) == [1]  # by words alone, the sentence that repeats the question
    assert best(0.5) == [2]  # typed: the one that holds a number


def test_the_shortlist_counts_a_russian_question_s_words_by_their_stems():
    from declrag.pipeline.stages.generate._extract import shortlist
    from declrag.pipeline.stages.generate._pieces import candidates
    from declrag.text.stems import stemmer

    passages = ["Город славится парками и музеями.",
                "Большинство мест культа в Варшаве было разрушено в 1944 году.",
                "Река делит город на две части."]
    pool = candidates(passages, 300, False, [])
    question = "Когда разрушили эти места в Варшаву?"  # no word of it as the second passage writes it
    assert [p.n for p in shortlist(question, pool, 1, (), stemmer("ru"))] == [2]  # разрушили / разрушено, ...
    assert [p.n for p in shortlist(question, pool, 1)] == [1]  # by whole words: nothing in common, the first
    assert stemmer("en") is None  # English is shortlisted by whole words, as before
