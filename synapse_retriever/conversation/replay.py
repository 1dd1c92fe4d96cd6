"""Replay: the themes of the last turns reinforce the turns that carry them.

Like sleep strengthening what the day kept coming back to, every consolidation extracts
themes from the last ``replay_window`` turns and adds ``replay_boost`` to the importance
of each of those turns that mentions one. Themes come from a pluggable
:class:`ThemeExtractor`; the default :class:`TfidfThemes` needs no model.

Notes
-----
A term is a theme candidate if at least ``min_turns`` of the window's turns use it (a
topic the conversation came back to, not a one-off word). Candidates are ranked by
TF-IDF: the number of uses in the window × the term's inverse document frequency over
the whole conversation, so a recurring but rare topic beats a recurring common word.

Examples
--------
>>> window = ["the deploy broke", "deploy again on friday", "lunch?", "friday deploy works"]
>>> TfidfThemes(max_themes=2).themes(window)
['deploy', 'friday']
>>> matching(window, ["friday"])
[False, True, False, True]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.text import terms

__all__ = ["TfidfThemes", "ThemeExtractor", "matching"]


@runtime_checkable
class ThemeExtractor(Protocol):
    """Extracts the themes (terms) of a window of turn texts.

    Examples
    --------
    A fixed list of topics instead of TF-IDF (for an application that knows its own):

    >>> class Topics:
    ...     def themes(self, texts):
    ...         return [t for t in ("deploy", "billing") if any(t in x.lower() for x in texts)]
    >>> isinstance(Topics(), ThemeExtractor)
    True
    >>> Topics().themes(["The deploy broke.", "Lunch?"])
    ['deploy']
    """

    def themes(self, texts: Sequence[str]) -> list[str]:
        """Themes, most salient first."""
        ...


class TfidfThemes:
    """Recurring terms of the window ranked by TF-IDF.

    Parameters
    ----------
    max_themes : int
        At most this many themes.
    min_turns : int
        A theme must appear in at least this many turns of the window.
    idf : callable, optional
        Inverse document frequency of a term over the conversation (default: 1).

    Examples
    --------
    ``deploy`` and ``friday`` recur; with an IDF that makes ``deploy`` common over the
    whole conversation, ``friday`` ranks first:

    >>> window = ["the deploy broke", "deploy again on friday", "lunch?", "friday deploy works"]
    >>> TfidfThemes(max_themes=2, idf=lambda term: 0.5 if term == "deploy" else 1.0).themes(window)
    ['friday', 'deploy']
    """

    def __init__(
        self,
        max_themes: int = ContextConfig.replay_themes,
        min_turns: int = 2,
        idf: Callable[[str], float] | None = None,
    ) -> None:
        self.max_themes = max_themes
        self.min_turns = min_turns
        self.idf = idf or (lambda term: 1.0)

    def themes(self, texts: Sequence[str]) -> list[str]:
        """Terms used in at least ``min_turns`` texts, by uses × IDF, at most ``max_themes``."""
        uses: Counter[str] = Counter()
        turns: Counter[str] = Counter()
        for text in texts:
            found = terms(text)
            uses.update(found)
            turns.update(set(found))
        candidates = [term for term, count in turns.items() if count >= self.min_turns]
        ranked = sorted(candidates, key=lambda t: (-uses[t] * self.idf(t), t))
        return ranked[: self.max_themes]


def matching(texts: Sequence[str], themes: Sequence[str]) -> list[bool]:
    """Whether each text mentions at least one theme (compared as content terms).

    Examples
    --------
    >>> matching(["The deploy broke.", "Lunch?", "Deploys on Friday"], ["deploy"])
    [True, False, True]
    """
    wanted = {term for theme in themes for term in terms(theme)}
    return [bool(wanted & set(terms(text))) for text in texts]
