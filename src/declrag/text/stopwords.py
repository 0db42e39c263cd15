"""Function words ("the", "der", "и", "का") of each language, as the keyword tokens that write them
(`declrag.text.keywords`), for the rules that weigh a question's content words (`declrag.pipeline.stages.generate`).

The lists are the stop-words package's (python-stop-words, BSD-3-Clause: 33 languages, from the Snowball, Ranks NL
and stopwords-iso collections); a language it lacks has none. English keeps declrag's own list
(`declrag.text.keywords.STOPWORDS_EN`, Weaviate's), which the English rules were calibrated with. And a keyword query's
words without them (`query_terms`), the one place both stores' keyword queries are made.
"""

from __future__ import annotations

from functools import cache, lru_cache

from .keywords import STOPWORDS_EN, keyword_tokens, tokenize
from .languages import QUESTION_CONFIDENCE, QUESTION_LETTERS, identify
from .reading import reading

# languages that write every noun with a capital letter: a capitalised word there is no sign of a name
NOUNS_CAPITALISED = frozenset({"de", "lb"})
QUESTIONS_KNOWN = 1024  # questions whose language is kept (an LRU: a server asks for one question several times)


# question words the package's lists lack (its Hindi list has no "क्या", its Spanish one only the unaccented "cuando"):
# a question's "when" or "how many" is no content word of the sentence that answers it
QUESTION_WORDS = {
    "de": "wer wen wem wessen was wann wo wohin woher wie wieviel wieviele welche welcher welches welchem welchen "
          "warum weshalb wozu",
    "es": "quién quiénes qué cuándo dónde adónde cuánto cuánta cuántos cuántas cuál cuáles cómo",
    "fr": "qui que quoi quand où combien quel quelle quels quelles comment pourquoi lequel laquelle",
    "it": "chi che cosa quando dove quanto quanta quanti quante quale quali come perché",
    "pt": "quem que quando onde quanto quanta quantos quantas qual quais como porque",
    "ru": "кто что где когда сколько какой какая какое какие каком какого каких какую каким какими каков какова "
          "каково каковы почему зачем откуда куда чей чья чьё чьи",
    "ar": "ما ماذا من متى أين كم كيف لماذا أي أية هل",
    "hi": "क्या कब कितने कितना कितनी कितनों कहाँ कहां किस किसने किसे किसका किसकी किसके किसको कौन कौनसा कैसे क्यों",
    "zh": "什么 哪里 哪儿 多少 哪个 哪些 为什么 怎么 怎样 如何 何时",
}


@cache  # one entry per language the package has (33 at most)
def stopwords(language: str) -> frozenset[str]:
    """The function words of ``language`` (an ISO 639-1 code) as keyword tokens, with its question words
    (`QUESTION_WORDS`); empty for English (see the module docstring) and for a language the package does not
    have."""
    if language in ("", "en"):
        return frozenset()
    from stop_words import LANGUAGE_MAPPING, get_stop_words  # its lists are read on first need

    words = [*get_stop_words(language), *QUESTION_WORDS.get(language, "").split()] \
        if language in LANGUAGE_MAPPING else QUESTION_WORDS.get(language, "").split()
    return frozenset(t for w in words for t in keyword_tokens(w))


@lru_cache(maxsize=QUESTIONS_KNOWN)
def question_language(question: str, among: frozenset[str] = frozenset()) -> str:
    """The language ``question`` is written in, where the identifier is sure of it (`QUESTION_CONFIDENCE`), else ""
    (`declrag.text.languages.identify`). ``among``: the languages of the passages it is asked of; a question too
    short to tell on its own ("有多少人？", "Кто завладел мячом?", which alone reads as Bulgarian) is then the one of
    those, or English, that it is surely written in."""
    if told := identify(question, QUESTION_LETTERS, QUESTION_CONFIDENCE):
        return told
    among = frozenset(lang for lang in among if lang) | {"en"}
    return identify(question, 1, QUESTION_CONFIDENCE, among) if len(among) > 1 else ""


def query_terms(query: str) -> list[str]:
    """The query's words as the index holds them: read as the searched text is (`declrag.text.reading`: a
    full-width or ligatured query matches), tokenised, stopwords out: English's, and the function words of the
    query's language where the identifier is sure of it (`declrag.text.stopwords`: "в", "каком", "der", "का")."""
    words = tokenize(reading(query))
    other = stopwords(question_language(query)) if words else frozenset()
    return [t for t in words if t not in STOPWORDS_EN and t not in other]
