"""What a question asks for (`answer_kind`: a date, a number, a name, a country, a command, ...) and whether a
sentence holds it (`holds_kind`): the extractive answer's typed answers (`declrag.pipeline.stages.generate`).

The question words are read in the question's language (`declrag.text.stopwords.question_language`): English's, and
German's, Spanish's, Russian's, Arabic's, Hindi's and Chinese's (`_KIND_BY_LANGUAGE`). A name is a capitalised word
(`declrag.text.normalize.details`), so a question asking for one is typed only in a language that capitalises names
alone: not German (every noun), nor Arabic, Hindi or Chinese (no capitals); those are typed for dates and numbers.
Hindi and Chinese put the question word inside the question, not first, and are read anywhere in it.
"""

from __future__ import annotations

import re
from functools import cache

from ....text.normalize import MONTHS, details, norm_phrase
from ....text.stopwords import question_language, stopwords

_KIND_OF = [  # (pattern on the question's start, lower case, after any leading clause) -> what the answer holds
    (re.compile(r"^(?:in |from |to |of |for |by |with )?(?:what|which) (?:[a-z0-9-]+ ){0,2}commands?\b|"
                r"^how (?:do|can|should) (?:i|you|we) (?:run|start|stop|install|reset|restart|launch|invoke)\b"),
     "command"),
    (re.compile(r"^(?:in |from |to |of |for |by |with )?(?:what|which) (?:[a-z0-9-]+ ){0,2}(?:options?|"
                r"packages?|environments?|environment variables?|settings?|parameters?|macros?|flags?|keywords?|"
                r"document class(?:es)?|switch(?:es)?)\b"), "code"),
    (re.compile(r"^(?:in |from |to |of |for |by )?(?:what|which) (?:country|countries|nation|nations)\b"), "country"),
    (re.compile(r"^(?:in |by |since |until )?(?:when|what year|which year|what date|what day|what month|"
                r"what century|what decade|what time period)\b"), "date"),
    (re.compile(r"^(?:how (?:many|much|long|old|far|big|large|tall|high|deep|wide|often|fast)|"
                r"what (?:is |was |are |were )?the (?:number|amount|percentage|population|size|cost|price|value)|"
                r"what (?:percentage|number|amount|proportion|fraction))\b"), "number"),
    (re.compile(r"^(?:who|whom|whose|where|what (?:is|was|are|were) the (?:name|capital|title|author|authors|"
                r"founder|leader|president|head|owner|largest|biggest|oldest|first|last|main)\b|"
                r"(?:in |at |from |to |on |by |of |for )?(?:which|what) (?!is\b|are\b|was\b|"
                r"were\b|does\b|do\b|did\b|can\b|could\b|should\b|would\b|will\b|has\b|have\b|had\b|"
                r"kind\b|type\b|sort\b|happens\b|happened\b|about\b|if\b)[a-z]+)"), "name"),
]


_RU_WHICH = r"(?:какой|какая|какое|какие|какого|какую|каком|каких|каким|какими|которой|которого|котором)"
# (pattern on the question, lower case, ¿ and ¡ and direction marks left out) -> what the answer holds, per language
# other than English; the first that matches wins
_KIND_BY_LANGUAGE: dict[str, list[tuple[re.Pattern[str], str]]] = {
    "de": [(re.compile(r"^(?:wie (?:viele?|oft|lange|alt|hoch|groß|gross|weit|schwer|tief|breit|schnell)|wieviele?|"
                       r"(?:welcher|welchen) (?:prozentsatz|anteil)|(?:welche|was ist die) (?:anzahl|zahl|summe))\b"),
            "number"),
           (re.compile(r"^(?:seit |bis )?(?:wann|(?:in |an )?(?:welchem|welcher|welches) (?:jahr|jahrhundert|"
                       r"jahrzehnt|monat|tag|datum|zeitraum))\b"), "date")],
    "es": [(re.compile(r"^(?:(?:en |a |de |con |para )?cu[aá]nt[oa]s?|(?:en |a )?qu[eé] (?:porcentaje|cantidad|"
                       r"n[uú]mero|proporci[oó]n)|cu[aá]l (?:es|era|fue) (?:el|la) (?:n[uú]mero|cantidad|porcentaje|"
                       r"poblaci[oó]n|tama[nñ]o|precio|valor))\b"), "number"),
           (re.compile(r"^(?:desde |hasta )?(?:cu[aá]ndo|(?:en |de )?qu[eé] (?:a[nñ]o|fecha|siglo|d[eé]cada|mes|"
                       r"d[ií]a|[eé]poca|per[ií]odo))\b"), "date"),
           (re.compile(r"^(?:(?:a |con |de |por |para |en )?qui[eé]n(?:es)?|(?:en |de |a )?d[oó]nde|ad[oó]nde|"
                       r"c[oó]mo se llama(?:ba|n|ban)?|(?:cu[aá]l|qu[eé]) (?:es|era|fue) el nombre|"
                       r"(?:en |de |a |con |para |por )?(?:qu[eé]|cu[aá]l(?:es)?) (?!es\b|son\b|era\b|eran\b|fue\b|"
                       r"fueron\b|significa\b|tipo\b|clase\b|se\b|hace\b|hizo\b|pasa\b|pas[oó]\b|ocurre\b|"
                       r"ocurri[oó]\b|sucede\b|sucedi[oó]\b|hay\b|hab[ií]a\b|tiene\b|ten[ií]a\b|puede\b|pod[ií]a\b|"
                       r"debe\b|le\b|les\b|lo\b|la\b|los\b|las\b|un\b|una\b|[ae]s\b)[a-záéíóúñ]+)"), "name")],
    "ru": [(re.compile(r"^(?:сколько|каков(?:а|о|ы)? (?:процент|доля|численность|количество|число|площадь|"
                       r"стоимость|размер)|(?:какой|каков) (?:процент|доля)|какое (?:количество|число))"), "number"),
           (re.compile(r"^(?:когда|(?:в|с|до|к) (?:каком|какой|какого|котором) (?:году?|веке|века|столетии|"
                       r"месяце|десятилетии|веку|времени|дне|день|числе|период)|в какой (?:год|период|день|момент))"),
            "date"),
           (re.compile(r"^(?:кто|кого|кому|кем|чей|чья|чьё|чье|чьи|(?:с|у|от|для|о|к|на|за) (?:кем|кого|кому|ком)|"
                       r"где|куда|откуда|как (?:называется|называлась|назывался|называлось|называются|назывались|"
                       r"называли|назвали|звали|зовут)|(?:в|на|с|из|к|от|по|для|у|за|при|о|об|во|со) ?" + _RU_WHICH
                       + r" (?!тип|вид|образ|роль|цел|причин|значени|был|явля|есть|можно)\w+|" + _RU_WHICH
                       + r" (?!тип|вид|образ|роль|цел|причин|значени|был|явля|есть|можно)\w+)"), "name")],
    "ar": [(re.compile(r"^(?:كم|ما (?:هو |هي )?(?:ال)?(?:عدد|نسبة|مقدار|كمية|حجم|تكلفة|سعر|مساحة|مسافة|طول|عمر)\b)"),
            "number"),
           (re.compile(r"^(?:متى|منذ متى|(?:في|منذ|خلال) (?:أي|أية) (?:عام|سنة|قرن|عقد|شهر|يوم|تاريخ|فترة)|"
                       r"ما (?:هو |هي )?(?:العام|السنة|التاريخ|القرن|العقد|الشهر|اليوم)\b)"), "date")],
    "hi": [(re.compile(r"(?:कितने|कितना|कितनी|कितनों|किस प्रतिशत|कितना प्रतिशत)"), "number"),
           (re.compile(r"(?:कब|किस (?:वर्ष|साल|सदी|शताब्दी|दशक|तारीख|तिथि|महीने|दिन|समय|अवधि))"), "date")],
    "zh": [(re.compile(r"(?:什么时候|何时|哪一?年|哪个世纪|哪一天|哪天|几月|何年|什么年代|哪个年代|哪个时期)"), "date"),
           (re.compile(r"(?:多少|几(?!乎)|百分之|多大|多长|多高|多久|多远|多重)"), "number")],
}


@cache
def countries() -> frozenset[str]:
    """Every country's names (ISO 3166: official, common and short), normalised as
    `declrag.text.normalize.norm_phrase`."""
    import pycountry

    names = {getattr(c, a, "") for c in pycountry.countries for a in ("name", "common_name", "official_name")}
    return frozenset(norm_phrase(n) for n in names if n)


_DEFAULT = re.compile(r"\b(?:defaults?|initial(?:ly)?)\b")
_ASKS = re.compile(r"\b(?:what|which|how)\b")
_CODE = re.compile(r"\\[A-Za-z@]+")  # a command written as code: \itshape, \bigbreak
_NAMED_IN_CODE = re.compile(  # what names an option, package or variable in a manual's text
    _CODE.pattern  # \itshape
    + r"|(?<![\w-])-{1,2}[a-z][\w-]*"  # --shell-escape
    r"|\b[a-z][\w@]*[A-Z0-9_][\w@-]*"  # algo2e, lastLine, max_len
    r"|\b[A-Z][A-Z0-9_]{2,}\b"  # M4PATH
    r"|(?<![\w-])(?![\w-]*-(?:of|the|and|to|in|a)-)[a-z]+(?:-[a-z0-9]+)+(?![\w-])"  # fix-cm, not state-of-the-art
    r"|(?:^|(?<=\n))\s*(?:\d+\.\s+)?[a-z][\w@-]{2,}(?=\s*[:=])"  # a definition list's term: "rightnl: puts ..."
    r"|\b[a-z][\w@-]*(?==)")  # breakindent=


_COMMAND = re.compile(r"(?:^|\n)\s*[$#>] +\S|`[^`\n]*\s-{1,2}[A-Za-z][^`\n]*`")


def answer_kind(question: str, language: str | None = None) -> str | None:
    """What the question asks for: ``country`` (what country), ``date`` (when, what year), ``number`` (how many,
    how much, what percentage), ``name`` (who, where, which or what + a noun: a person, place, organisation or thing
    by name), ``command`` (which command, how do I run or install: a command line), ``code`` (which option, package,
    environment variable, document class: a name written as code), ``value`` (what or which default or initial
    setting: a number or a command), or None (what is, why, how: no type). A question in another language
    (`question_language`) is read with that language's question words (`_KIND_BY_LANGUAGE`; see the module
    docstring), one in a language without them is not typed. ``language``: the question's, when the caller knows
    it (`question_language` with the passages' languages)."""
    language = question_language(question) if language is None else language
    if language not in ("", "en"):
        q = " ".join(question.lower().lstrip(" ¿¡\u200e\u200f\"'«“").split())
        return next((kind for pattern, kind in _KIND_BY_LANGUAGE.get(language, ()) if pattern.search(q)), None)
    q = re.sub(r"\b(what|who|where|when|which|how)(?:'|’)s\b", r"\1 is", " ".join(question.lower().split()))
    q = re.sub(r"^(?:according to [^,]+, |in [^,]+, |so |and |ok,? |also,? )", "", q)
    kind = next((kind for pattern, kind in _KIND_OF if pattern.match(q)), None)
    return "value" if kind in (None, "name") and _DEFAULT.search(q) and _ASKS.search(q) else kind


def holds_kind(piece: str, kind: str | None, question: str, asked: set[str] | None = None,
               language: str | None = None) -> bool:
    """Whether ``piece`` holds something of ``kind`` (`answer_kind`) that ``question`` does not: a number; for a date,
    a number (a year, a day) or a month, century or decade; a name (`declrag.text.normalize.details`); a country's
    name; for a
    value, a number or a command written as code (``\\itshape``); for code, a name written as code (``\\itshape``,
    ``--shell-escape``, ``algo2e``, ``M4PATH``, ``fix-cm``, ``breakindent=``) or a definition list's term at a line's
    start (``rightnl: put line numbers ...``).
    ``asked``: the question's detail keys, when the caller already has them (one question, many pieces)."""
    if kind is None:
        return False
    asked = {d.key for d in details(question)} if asked is None else asked
    found = [d for d in details(piece) if d.key not in asked]
    language = question_language(question) if language is None and kind == "name" else language
    if kind == "name" and language not in (None, "", "en"):
        function = stopwords(language)  # a sentence's capitalised first word ("В", "El") names nothing
        found = [d for d in found if not set(d.key.split()) <= function]
    if kind == "name":
        return any(d.kind == "name" for d in found)
    if kind == "value":  # a default: a number, or a command written as code
        return any(d.kind == "number" for d in found) or any(c not in question for c in _CODE.findall(piece))
    if kind == "code":  # an option, command, package or variable: written as code, or a definition list's term
        return any(c.strip() not in question for c in _NAMED_IN_CODE.findall(piece))
    if kind == "command":  # a command line: after a shell prompt, or inline code with an option (a fenced block's
        return bool(_COMMAND.search(piece))  # lines hold it by being there: `Piece.code`)
    if kind == "country":
        return any(d.kind == "name" and (d.key in countries() or any(w in countries() for w in d.key.split()))
                   for d in found)
    if kind == "number" or any(d.kind == "number" for d in found):  # a date: a year, a day, a century's number
        return any(d.kind == "number" for d in found)
    low, asked_low = piece.lower(), question.lower()
    return any(re.search(rf"\b{w}\b", low) and w not in asked_low for w in (*MONTHS, "century", "decade"))

