"""`declrag bench languages`: XQuAD read as its seven languages' files, the same questions in each, and a run that
scores them against English."""

from __future__ import annotations

import pytest
from declrag_bench import languages
from rich.console import Console

needs_xquad = pytest.mark.skipif(not (languages.XQUAD / "xquad.en.json").exists(),
                                 reason="../shared/datasets/xquad is not here")


@needs_xquad
def test_every_language_holds_the_same_questions_whose_answers_its_articles_hold():
    english = [q["id"] for q in languages.load("en")[1]]
    for lang in languages.LANGUAGES:
        articles, questions = languages.load(lang)
        assert len(articles) == 48 and [q["id"] for q in questions] == english, lang
        missing = [q["id"] for q in questions if q["answer"] not in articles[int(q["article"][-2:]) - 1]]
        assert not missing, (lang, missing[:3])


@needs_xquad
def test_a_small_run_scores_chinese_against_english():
    r = languages.run(["zh"], limit=8, progress=False, articles=6)
    en, zh = r["languages"]["en"], r["languages"]["zh"]
    assert r["questions"] == 8 and set(r["languages"]) == {"en", "zh"}
    assert zh["indexing"]["languages"] == {"zh": 6} and en["indexing"]["languages"] == {"en": 6}
    assert zh["hit@5"] >= 0.5  # Chinese is searched by its words (before: a third of English's)
    assert zh["vs_en"]["hit@5"]["n"] == 8 and zh["of_english"]["hit@5"] is not None
    languages.print_report(r, Console(width=200, record=True))
