"""Words, sentences and term statistics: the plain-text parts every default shares.

The offline defaults (the hashing embedder, the extractive summarizer, TF-IDF themes)
all read text the same way: Unicode word runs, lowercased, English stopwords dropped, a
plural ``s`` stripped; scripts written without spaces (Chinese, Japanese, Korean) as the
overlapping pairs of characters of each run, as search engines index them (a CJK run is
a phrase, not a word). Sentences end at ``.``, ``!`` or ``?`` followed by a space, at a
CJK full stop, or at a line break.

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

from synapse_retriever.tokens import CJK

__all__ = ["STOPWORDS", "TermStats", "sentences", "telegraphic", "terms"]

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

_WORD = re.compile(r"\w+")
_CJK_RUN = re.compile(rf"(?:(?=\w)[{CJK}])+")  # letters only: not ・ nor a combining mark
_PUNCTUATION = ".,;:!?()[]{}\"'`"
# A space run after . ! or ?, or a whole space run holding a line break. The break is
# looked for only from a run's first character, so a long run is read once (linear).
_SENTENCE_END = re.compile(  # a CJK full stop ends one too, after its closing quote if any
    r"(?<=[.!?])\s+|(?<=[。！？])(?![」』”’）)])\s*|(?<=[。！？][」』”’）)])\s*"
    r"|(?<!\s)[^\S\n]*\n\s*"
)
_MAX_SENTENCE_WORDS = 40


def _normalize(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """Content terms of ``text`` in order: lowercased words, stopwords dropped, plural ``s``
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
    lowered = text.lower()
    if not lowered.isascii():  # (a flag of the str: no scan)
        lowered = _CJK_RUN.sub(_pairs, unicodedata.normalize("NFC", lowered))
    return [
        _normalize(word)
        for word in _WORD.findall(lowered)
        if (word not in STOPWORDS and len(word) > 1)
        or word.isdigit()
        or (word >= "\u1100" and _CJK_RUN.fullmatch(word))  # a CJK run of one
    ]


def _pairs(run: re.Match[str]) -> str:
    """A CJK run's overlapping pairs of characters (one character: itself), as words."""
    text = run.group()
    return f" {' '.join(text[i : i + 2] for i in range(max(1, len(text) - 1)))} "


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; a run of more than 40 words is cut into 40-word pieces.

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
    """
    pieces: list[str] = []
    for part in _SENTENCE_END.split(text.strip()):
        words = part.split()
        for start in range(0, len(words), _MAX_SENTENCE_WORDS):
            pieces.append(" ".join(words[start : start + _MAX_SENTENCE_WORDS]))
    return [piece for piece in pieces if piece]


def telegraphic(sentence: str) -> str:
    """``sentence`` without its stopwords, in telegram style; unchanged if nothing would remain.

    Examples
    --------
    >>> telegraphic("I moved the deploy to Fridays.")
    'moved deploy Fridays.'
    >>> telegraphic("Are you ok?")
    'Are you ok?'
    """
    words = sentence.split()
    kept = [word for word in words if word.strip(_PUNCTUATION).lower() not in STOPWORDS]
    if not kept:
        return sentence
    text = " ".join(kept)
    end = words[-1][-1]
    if end in ".!?" and not text.endswith(end):
        text += end
    return text


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
