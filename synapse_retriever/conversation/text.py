"""Words, sentences and term statistics: the plain-text parts every default shares.

The offline defaults (the hashing embedder, the extractive summarizer, TF-IDF themes)
all read text the same way (:func:`word_text`): Unicode word runs with their combining
marks (a Hindi word is one, not its letters cut apart at each vowel sign), case-folded,
English stopwords dropped, a plural ``s`` stripped; scripts written without spaces
(Chinese, Japanese, Korean) as the overlapping pairs of characters of each run, as search
engines index them (a CJK run is a phrase, not a word). Sentences end at ``.``, ``!`` or
``?`` (or a danda, an Arabic question mark, an Urdu, Ethiopic or Myanmar full stop) followed
by a space, at a CJK full stop, or at a line break.

Examples
--------
>>> terms("The deploys moved to Fridays!")
['deploy', 'moved', 'friday']
>>> sentences("Hi there. The deploy moved to Fridays! Ok?")
['Hi there.', 'The deploy moved to Fridays!', 'Ok?']
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.tokens import CJK

__all__ = [
    "COMBINING_MARKS",
    "STOPWORDS",
    "WORD_MARKS",
    "TermStats",
    "latin_folded",
    "letters",
    "number",
    "sentences",
    "telegraphic",
    "terms",
    "word_text",
]

_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing done down during each else
even ever few for from further get got had has have having he her here hers herself him
himself his how i if in into is it its itself just let like me more most much must my
myself no nor not now of off oh ok okay on once only or other our ours ourselves out over
own really same she should so some such than that the their theirs them themselves then
there these they this those though through to too under until up us very was we well
were what when where which while who whom why will with would yeah yes yet you your
yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Common English function words, left out of every term-based signal."""
_TELEGRAM_KEEP_TEXT = """
no nor not but against before after until when while once if or now yet again
above below over under between up down off out on in at from to
more most much too than only just even few all any both each some other else same
"""
_TELEGRAM_KEEPS = frozenset(_TELEGRAM_KEEP_TEXT.split())
"""Stopwords a telegram keeps: what a sentence says turns on them. A negation or an
exception ("do not retry" is not "retry", "all but one" not "all one"), a condition, a time
or an alternative ("when tests pass", "not yet", "from now on", "failed again", "or"), a
place, an order or a direction ("before Monday" is not "Monday", "from Postgres to SQLite",
"turn off"), a quantity or a degree ("more than 5", "not just the cache", "did not help
much", "the other host")."""


def _marks(*spans: tuple[int, int], kind: str = "M") -> frozenset[int]:
    """The code points of Unicode category ``kind*`` (combining marks) in ``spans``."""
    return frozenset(
        code
        for a, b in spans
        for code in range(a, b + 1)
        if unicodedata.category(chr(code)).startswith(kind)
    )


def _ranges(codes: frozenset[int]) -> str:
    """``codes`` as the ranges of a regex character class (``a-z``)."""
    runs: list[list[int]] = []
    for code in sorted(codes):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in runs)


# Hebrew points and cantillation, Arabic harakat, Devanagari's nukta: a word written with
# them or without is one (ज़रूरी, जरूरी), as Hindi search folds it
_FOLDED = _marks((0x0591, 0x05C7), (0x0610, 0x061A), (0x064B, 0x065F), (0x0670, 0x0670),
                 (0x06D6, 0x06ED), (0x093C, 0x093C), kind="Mn")  # fmt: skip
# marks that cut words: those of scripts written without spaces between words (Thai, Lao,
# Myanmar, Khmer, Buginese, Tai Tham, Balinese, Javanese, Tai Viet), searched by the pieces
# their marks cut; variation selectors and enclosing keycaps (an emoji's)
_CUTTING = _marks((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x1A00, 0x1AAF),
                  (0x1B00, 0x1B7F), (0x20DD, 0x20E4), (0xA980, 0xA9FF), (0xAA60, 0xAADF),
                  (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))  # fmt: skip
COMBINING_MARKS = _ranges(_marks((0, 0x1FFFF)))
"""Every combining mark (Unicode category M), as the ranges of a regex character class."""
WORD_MARKS = _ranges(_marks((0, 0x1FFFF)) - _CUTTING)
"""The combining marks that belong to the word they follow (Devanagari's and Tamil's vowel
signs, Hebrew's points, say), as the ranges of a regex character class; :func:`word_text`
drops those that search folds."""
_FOLDED_MARK = re.compile(f"[{_ranges(_FOLDED)}]")


def _letter_folds() -> dict[int, str]:
    """The letters read as another, as search engines fold them (Lucene's Greek, Arabic,
    Persian and Hindi normalizers, Russian's ё): Greek's accented vowels as their base
    letter, ё as е, Turkish's dotless ı as i (sınır is sinir, as ICU folds it), Arabic's alef
    with hamza or madda as bare alef, teh marbuta and Urdu's heh as heh, alef maksura and the
    Persian and Urdu yeh as yeh, Persian kaf as kaf, the tatweel as nothing, Devanagari's
    letters with a nukta as their base letter, full- and half-width forms as the usual."""
    folds: dict[int, str] = {}
    for code in (*range(0x0370, 0x0400), *range(0x1F00, 0x2000)):  # Greek, and polytonic
        parts = unicodedata.normalize("NFD", chr(code))
        if len(parts) > 1 and all(unicodedata.category(c).startswith("M") for c in parts[1:]):
            folds[code] = parts[0].casefold()
    for code in range(0xFF01, 0xFFDD):  # ＡＰＩ, ｻｰﾊﾞｰ
        folds[code] = unicodedata.normalize("NFKC", chr(code)).casefold()
    folds.update({0x0451: "\u0435", 0x0131: "i", 0x0640: ""})  # ё, ı, the tatweel
    folds.update(dict.fromkeys((0x0622, 0x0623, 0x0625, 0x0671), "\u0627"))  # alef
    folds.update(dict.fromkeys((0x0629, 0x06C0, 0x06C1), "\u0647"))  # teh marbuta, Urdu heh
    folds.update(dict.fromkeys((0x0649, 0x06CC, 0x06D2), "\u064a"))  # alef maksura, yeh
    folds[0x06A9] = "\u0643"  # Persian kaf
    folds.update({0x0929: "\u0928", 0x0931: "\u0930", 0x0934: "\u0933"})  # nukta letters
    return folds


_FOLDS = _letter_folds()
_FOLDABLE = re.compile(f"[{_ranges(frozenset(_FOLDS))}]")
_JOINER = re.compile(rf"(?<=[\w{WORD_MARKS}])[\u200c\u200d]+(?=\w)")  # ZWNJ, ZWJ in a word
# in Arabic script a non-joiner parts a word's pieces (Persian "کتاب‌ها", books): a space
_ARABIC_NON_JOINER = re.compile(
    r"(?<=[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff])\u200c"
)
_ASCII_WORD = re.compile(r"\w+")
_NOT_A_WORD = re.compile(r"[^\x00-\x7f\w\s]+")  # beyond ASCII: marks, symbols, emoji
_NOT_A_MARK = re.compile(f"[^{WORD_MARKS}]")
_WORD = re.compile(rf"\w[\w{WORD_MARKS}]*")
_WORD_MARK = re.compile(f"[{WORD_MARKS}]")
_CJK_RUN = re.compile(rf"(?:(?=\w)[{CJK}])+")  # letters only: not ・ nor a combining mark
_PUNCTUATION = ".,;:!?()[]{}\"'`"
# A space run after . ! or ? (or the danda and the Arabic, Urdu, Ethiopic and Myanmar full
# stops and question marks), or a whole space run holding a line break. The break is looked
# for only from a run's first character, so a long run is read once (linear).
_SENTENCE_END = re.compile(  # a CJK full stop ends one too, after its closing quote if any
    r"(?<=[.!?\u0964\u0965\u061f\u06d4\u1362\u104b])\s+|(?<=[。！？])(?![」』”’）)])\s*|(?<=[。！？][」』”’）)])\s*"
    r"|(?<!\s)[^\S\n]*\n\s*"
)
_MAX_SENTENCE_WORDS = 40
_SPACE_RUN = re.compile(r"\s+")
"""A run of white space: where release 0.1.0 ended a sentence, if it held a line end or
followed ``.``, ``!`` or ``?`` (its own pattern for it read a long run from each of its
characters: ``sentences(style=1)`` finds the same ends in one pass)."""


def word_text(text: str) -> str:
    """``text`` as the word-based signals read it: case-folded and composed (NFC), the letters
    search folds folded (Greek accents, ё, Turkish ı, Arabic alef forms, teh marbuta and
    tatweel, Persian yeh and kaf, full- and half-width forms), a word's marks kept in it,
    Hebrew points, Arabic harakat and Devanagari's nukta dropped (its candrabindu read as
    anusvara), joiners inside a word dropped (in Arabic script a non-joiner is a space: it
    parts a word's pieces), and a space for what is no part of a word beyond ASCII
    (punctuation, symbols, emoji, the marks of scripts written without spaces, a mark after
    no letter). Python's Unicode tables decide, the same for a text and for a question typed
    to find it.

    Examples
    --------
    >>> word_text("Thanks🥰 see you👍🏽! CAFÉ")  # ASCII punctuation stays: a separator to all
    'thanks  see you ! café'
    >>> word_text("שָׁלוֹם") == "שלום" and word_text("नमस्\u200dते") == "नमस्ते"
    True
    """
    if text.isascii():  # (a flag of the str: no scan) nothing to compose, fold or join
        return text.lower()
    # ß as ss, ς as σ; İ case-folded is i with a dot above, the dot dropped
    folded = unicodedata.normalize("NFC", text.casefold().replace("i\u0307", "i"))
    for _ in range(3):  # composed again (a half-width ﾊﾞ is バ), until nothing is left to fold
        if not _FOLDABLE.search(folded):
            break
        folded = unicodedata.normalize("NFC", folded.translate(_FOLDS))
    folded = _FOLDED_MARK.sub("", folded).replace("\u0901", "\u0902")  # candrabindu: anusvara
    if "\u200c" in folded or "\u200d" in folded:
        folded = _JOINER.sub("", _ARABIC_NON_JOINER.sub(" ", folded))
    return _NOT_A_WORD.sub(_marks_of_a_word, folded)


def _marks_of_a_word(run: re.Match[str]) -> str:
    """A run of what is neither a letter, a digit nor a space, beyond ASCII: the marks it
    starts with if they follow a letter or a digit (their word's), and a space."""
    start = run.start()
    if not (start and run.string[start - 1].isalnum()):
        return " "
    marks = run.group()
    other = _NOT_A_MARK.search(marks)
    return marks if other is None else f"{marks[: other.start()]} "


def letters(word: str) -> int:
    """How many letters (and digits) ``word`` holds, its marks not counted: a one-letter
    word, left out of every signal as "a" is, may carry a vowel sign ("है", "is").

    Examples
    --------
    >>> letters("है"), letters("deploy")
    (1, 6)
    """
    return len(word) if word.isascii() else len(word) - len(_WORD_MARK.findall(word))


def number(word: str) -> bool:
    """Whether ``word`` is digits (with their marks: a keycap's ``1`` with U+0301 is ``1``),
    kept though shorter than two letters.

    Examples
    --------
    >>> number("42"), number("1\u0301"), number("x1")
    (True, True, False)
    """
    return word.isdigit() or _WORD_MARK.sub("", word).isdigit()


_LATIN_MARKS = re.compile(r"(?<=[A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f]+")
"""The accents of a Latin letter once decomposed (NFD): what SQLite's FTS5 ``unicode61``
tokenizer removes with ``remove_diacritics 2``; the marks of other scripts stay."""


def latin_folded(text: str) -> str:
    """``text`` with its Latin letters' accents removed, as BM25's index removes them, so that
    ``cafe`` and ``café`` are one term to the hashing embedder too.

    Examples
    --------
    >>> latin_folded("Café crème, Ærø, Tiếng Việt, किताब")
    'Cafe creme, Ærø, Tieng Viet, किताब'
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", _LATIN_MARKS.sub("", unicodedata.normalize("NFD", text)))


def _normalize(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """Content terms of ``text`` in order: case-folded words, stopwords dropped, plural ``s``
    cut; a run of CJK characters gives each pair of neighbours (one character alone, itself).

    Examples
    --------
    >>> terms("It's on host db-stg-7, as always")
    ['host', 'db', 'stg', '7', 'alway']
    >>> terms("部署改到星期五")  # no spaces between words: the pairs, so 星期 matches 星期一
    ['部署', '署改', '改到', '到星', '星期', '期五']
    >>> terms("猫，deploy")
    ['猫', 'deploy']
    """
    lowered = word_text(text)
    if lowered.isascii():  # (a flag of the str: no scan) no marks, no CJK
        return [
            _normalize(word)
            for word in _ASCII_WORD.findall(lowered)
            if (word not in STOPWORDS and len(word) > 1) or word.isdigit()
        ]
    lowered = _CJK_RUN.sub(_pairs, lowered)
    return [
        _normalize(word)
        for word in _WORD.findall(lowered)
        if (word not in STOPWORDS and letters(word) > 1)
        or number(word)
        or (word >= "\u1100" and _CJK_RUN.fullmatch(word))  # a CJK run of one
    ]


def _pairs(run: re.Match[str]) -> str:
    """A CJK run's overlapping pairs of characters (one character: itself), as words."""
    text = run.group()
    return f" {' '.join(text[i : i + 2] for i in range(max(1, len(text) - 1)))} "


def sentences(text: str, *, style: int = 2) -> list[str]:
    """Split ``text`` into sentences; a run of more than 40 words is cut into 40-word pieces.
    ``style=1`` splits as release 0.1.0 did (at ``.!?`` and line ends only), to find the
    sentence one of its summaries was made of (:func:`~.summarize.restyled`).

    Examples
    --------
    >>> sentences("one line\\nanother line")
    ['one line', 'another line']
    >>> sentences("   ")
    []
    >>> sentences("部署改到星期五。今天天气很好！")  # CJK full stops end sentences too
    ['部署改到星期五。', '今天天气很好！']
    >>> sentences("他说：「改到星期五。」好的。")
    ['他说：「改到星期五。」', '好的。']
    >>> sentences("शादी जयपुर में है। टिकट बुक करने हैं।")  # a danda too (Arabic's ؟ and ۔)
    ['शादी जयपुर में है।', 'टिकट बुक करने हैं।']
    >>> sentences("शादी जयपुर में है। टिकट बुक करने हैं।", style=1)
    ['शादी जयपुर में है। टिकट बुक करने हैं।']
    """
    if style not in (1, 2):
        raise InvalidValueError(f"style must be 1 or 2, got {shown(style)}")
    text = text.strip()
    pieces: list[str] = []
    for part in _split_0_1_0(text) if style == 1 else _SENTENCE_END.split(text):
        words = part.split()
        for start in range(0, len(words), _MAX_SENTENCE_WORDS):
            pieces.append(" ".join(words[start : start + _MAX_SENTENCE_WORDS]))
    return [piece for piece in pieces if piece]


def _split_0_1_0(text: str) -> list[str]:
    """``text`` cut at each white-space run that holds a line end or follows ``.!?``."""
    parts, start = [], 0
    for run in _SPACE_RUN.finditer(text):
        if "\n" in run.group() or (run.start() and text[run.start() - 1] in ".!?"):
            parts.append(text[start : run.start()])
            start = run.end()
    parts.append(text[start:])
    return parts


def telegraphic(sentence: str, *, style: int = 2) -> str:
    """``sentence`` without its stopwords, in telegram style; unchanged if no word but
    stopwords would remain. A negation, a condition, an order in time or place, a direction
    and a quantity stay (``_TELEGRAM_KEEPS``), and so does a one-letter name past the first
    word ("plan A"), so that a telegram says less than its sentence rather than something else
    (a contrast that rests on a pronoun, "she fixed it, not he", is still lost: a telegram is
    lossy, and CHUNKS keeps whole sentences).

    ``style=1`` is the rule of release 0.1.0, which dropped every stopword, a negation too
    ("not retry" became "retry"): kept only to recognise the summaries that release stored,
    and redo them (:func:`~.summarize.restyled`).

    Examples
    --------
    >>> telegraphic("I moved the deploy to Fridays.")
    'moved deploy to Fridays.'
    >>> telegraphic("The migration did not succeed; do not retry it before Monday.")
    'migration not succeed; not retry before Monday.'
    >>> telegraphic("Use plan A, not plan B.")
    'Use plan A, not plan B.'
    >>> telegraphic("No, do it.")
    'No, do it.'
    >>> telegraphic("The migration did not succeed; do not retry it before Monday.", style=1)
    'migration succeed; retry Monday.'
    """
    if style not in (1, 2):
        raise InvalidValueError(f"style must be 1 or 2, got {shown(style)}")
    words = sentence.split()
    if style == 1:
        kept = [word for word in words if word.strip(_PUNCTUATION).lower() not in STOPWORDS]
        if not kept:
            return sentence
    else:
        kept = [
            word
            for at, word in enumerate(words)
            if _telegram_word(word, at == 0)
            or " ".join(w.strip(_PUNCTUATION) for w in words[at : at + 2]).lower() in _SOME
        ]
        if all(_stopword(word, at == 0) for at, word in enumerate(kept)):
            return sentence
    text = " ".join(kept)
    end = words[-1][-1]
    if end in ".!?" and not text.endswith(end):
        text += end
    return text


_SOME = frozenset({"a few", "a little"})
"""Where "a" is kept: "a few tests failed" is not "few tests failed"."""


def _telegram_word(word: str, first: bool) -> bool:
    return not _stopword(word, first) or word.strip(_PUNCTUATION).lower() in _TELEGRAM_KEEPS


def _stopword(word: str, first: bool) -> bool:
    bare = word.strip(_PUNCTUATION)
    name = len(bare) == 1 and bare.isupper() and not first  # "plan A", not "A plan"
    return bare.lower() in STOPWORDS and not name


class TermStats:
    """Document frequencies over a growing set of texts, for inverse document frequency.

    Examples
    --------
    >>> stats = TermStats(["the deploy moved", "deploy on fridays", "lunch"])
    >>> round(stats.idf("deploy"), 3)  # log((1 + 3) / (1 + 2)) + 1
    1.288
    >>> round(stats.idf("unseen"), 3)  # log(4 / 1) + 1
    2.386
    """

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.documents = 0
        self.frequency: Counter[str] = Counter()
        for text in texts:
            self.add(text)

    def add(self, text: str) -> None:
        """Count one more document."""
        self.documents += 1
        self.frequency.update(set(terms(text)))

    def idf(self, term: str) -> float:
        """Smoothed inverse document frequency: log((1 + N) / (1 + df)) + 1."""
        return math.log((1 + self.documents) / (1 + self.frequency.get(term, 0))) + 1.0
