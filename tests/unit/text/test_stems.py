"""Word stems per language (declrag.text.stems)."""

from __future__ import annotations

import threading

from declrag.text.stems import stems


def test_inflected_forms_share_a_stem_in_the_languages_snowball_has():
    ru, es, ar = stems("ru"), stems("es"), stems("ar")
    assert ru is not None and es is not None and ar is not None
    assert len(ru(["варшаве", "варшава", "варшавы"])) == 1
    assert es(["financiaba"]) == es(["financiar"])
    assert ar(["المدينة"]) == ar(["مدينة"])  # the article goes
    assert ru(["варшава"]) != ru(["москва"])


def test_english_unknown_and_spaceless_languages_are_compared_whole():
    assert stems("en") is None and stems("") is None and stems("zh") is None


def test_tokens_with_digits_are_kept_whole():
    ru = stems("ru")
    assert ru is not None and ru(["1944", "2-ярдовый"]) >= {"1944"} and "2-ярдовый" in ru(["2-ярдовый"])


def test_stemming_from_many_threads_gives_each_the_same_stems():
    ru = stems("ru")
    assert ru is not None
    words = [f"слово{i}ами" for i in range(300)] + ["варшаве", "финансировал"] * 100
    want = ru(words)
    got: list[set[str]] = []

    def work() -> None:
        got.append(ru(words))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 8
