"""What a question names beyond its words: the people who spoke, and a date.

Two cues that neither BM25 nor an embedder reads well, and that conversations answer by
who said a thing and when:

1. **Speakers.** A turn may record who said it (``add_turn(..., speaker="Caroline")``).
   A question that names a speaker of the conversation as a whole word ("What did
   Caroline paint?"), case folded, is about what that person said: :func:`named` finds
   the speakers a question names.
2. **Dates.** A question that names a day ("on 13 October 2023", "October 13, 2023",
   "2023-10-13"), a month ("in July 2023"; "in June" is the last June up to the
   question), or a year ("in 2023") is about turns said then: :func:`date_window` turns
   it into a time window ``[start, end)`` in Unix seconds (UTC, as turn times are).

Each fused turn's score is multiplied by ``1 + speaker_boost`` if a named person said
it, and by ``1 + date_boost`` if it was said within the window or up to
``date_margin_days`` after it (people tell of a thing in the days after it happened)
(:func:`cue_factor`). A question that names neither changes nothing.

How the constants were chosen (``ContextConfig``: speaker 0.5, date 1.0, margin 7
days): on LoCoMo, whose questions name one of the two speakers and, in 13% of them, a
date, the two add 5.6 / 3.2 / 3.1 points of evidence recall at k = 5 / 10 / 20 to the
fused and graph-lifted ranking (the speaker alone 3.8 / 1.8 / 1.8, the date alone
2.2 / 1.6 / 1.3); RealMem's turns have no speakers and its questions name no dates,
so there they change nothing.

Examples
--------
>>> sorted(named("What did Caroline paint with mel?", ["Caroline", "Mel", "Jon"]))
['Caroline', 'Mel']
>>> start, end = date_window("What did Gina find on 1 February, 2023?", now=1.7e9)
>>> end - start
86400.0
>>> cue_factor(spoke=True, dated=False, speaker_boost=0.5, date_boost=1.0)
1.5
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from datetime import UTC, datetime

__all__ = ["cue_factor", "date_window", "named"]

_DAY = 86400.0
_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"  # noqa: E501
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH}\.?,? (\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,? (\d{{4}})\b")
_YEAR = re.compile(r"\b(?:in|of|during) (\d{4})\b")
_BARE_MONTH = re.compile(rf"\b(?:in|during|of) {_MONTH}\b")
_SPACES = re.compile(r"\s+")
_LAST_SECOND = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC, the last datetime


def named(query: str, speakers: Iterable[str]) -> frozenset[str]:
    """The ``speakers`` that ``query`` names, each as a whole word or phrase, case folded.

    Examples
    --------
    >>> sorted(named("Did ANN meet Bo's sister?", ["Ann", "Bo", "Annie"]))
    ['Ann', 'Bo']
    >>> named("Nothing here", ["Ann"])
    frozenset()
    """
    folded = " ".join(_words(query))
    padded = f" {folded} "
    return frozenset(s for s in speakers if (name := " ".join(_words(s))) and f" {name} " in padded)


def _words(text: str) -> list[str]:
    """``text`` case folded, split into runs of letters and digits."""
    return re.findall(r"[^\W_]+", text.casefold())


def _start(year: int, month: int, day: int = 1) -> float | None:
    try:
        return datetime(year, month, day, tzinfo=UTC).timestamp()
    except ValueError:  # 31 February, year 0
        return None


def _month(year: int, month: int) -> tuple[float, float] | None:
    start = _start(year, month)
    end = _start(year + month // 12, month % 12 + 1)
    return None if start is None or end is None else (start, end)


def date_window(query: str, now: float) -> tuple[float, float] | None:
    """The time ``query`` names, as ``[start, end)`` in Unix seconds (UTC), or None.

    The most precise form wins: a day (ISO ``2023-10-13``, ``13 October 2023``,
    ``October 13, 2023``), then a month with its year (``July 2023``), a year after
    "in", "of" or "during" (``in 2023``), a month after them (``in June``: the latest
    June that began by ``now``). An impossible day (``31 February 2023``) names nothing.

    Examples
    --------
    >>> july = date_window("What did Maria start in July 2023?", now=0.0)
    >>> [datetime.fromtimestamp(t, UTC).date().isoformat() for t in july]
    ['2023-07-01', '2023-08-01']
    >>> june = date_window("When did Melanie go camping in June?", now=1_700_000_000.0)
    >>> datetime.fromtimestamp(june[0], UTC).date().isoformat()  # now is 14 Nov 2023
    '2023-06-01'
    >>> date_window("When is the next release?", now=0.0) is None
    True
    """
    text = _SPACES.sub(" ", query.casefold())
    found = _ISO.search(text)
    if found:
        day = _start(int(found[1]), int(found[2]), int(found[3]))
        return None if day is None else (day, day + _DAY)
    for pattern, order in ((_DAY_MONTH_YEAR, (3, 2, 1)), (_MONTH_DAY_YEAR, (3, 1, 2))):
        found = pattern.search(text)
        if found:
            year, month, number = (found[i] for i in order)
            day = _start(int(year), _MONTHS[month], int(number))
            return None if day is None else (day, day + _DAY)
    found = _MONTH_YEAR.search(text)
    if found:
        return _month(int(found[2]), _MONTHS[found[1]])
    found = _YEAR.search(text)
    if found:
        start, end = _start(int(found[1]), 1), _start(int(found[1]) + 1, 1)
        return None if start is None or end is None else (start, end)
    found = _BARE_MONTH.search(text)
    if found:
        month = _MONTHS[found[1]]
        today = datetime.fromtimestamp(min(max(now, 0.0), _LAST_SECOND), UTC)
        return _month(today.year if month <= today.month else today.year - 1, month)
    return None


def cue_factor(*, spoke: bool, dated: bool, speaker_boost: float, date_boost: float) -> float:
    """What a fused score is multiplied by: ``(1 + speaker_boost)`` if a person the
    question names said the turn, times ``(1 + date_boost)`` if it was said in the
    question's window.

    Examples
    --------
    >>> cue_factor(spoke=True, dated=True, speaker_boost=0.5, date_boost=1.0)
    3.0
    >>> cue_factor(spoke=False, dated=False, speaker_boost=0.5, date_boost=1.0)
    1.0
    """
    return (1.0 + speaker_boost if spoke else 1.0) * (1.0 + date_boost if dated else 1.0)
