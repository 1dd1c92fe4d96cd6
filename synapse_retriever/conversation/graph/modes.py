"""Which kind of question: the mode that sets how vector and graph recall are blended.

An analytical question ("why did we change X?", "what caused the outage?") asks for a
chain of events, which the graph holds; an exploratory one ("ideas for the launch?",
"what if we used Redis?") asks for what is alike, which the vectors find. The mode
also sets the temperature of the importance score (``ContextConfig.temperatures``).

============== ================= ======== =======
mode           also called       vector   graph
============== ================= ======== =======
creative       exploratory       0.7      0.3
analytical                       0.3      0.7
conversational balanced          0.5      0.5
============== ================= ======== =======

:func:`detect_mode` is deterministic: cue words and question forms, counted; the
larger count wins, a tie or no cue is conversational. Anything with
``mode(query) -> str`` (a :class:`ModeDetector`) can replace it, e.g. a model that
classifies.

References
----------
The conversation-memory design (processing modes; the 0.7 / 0.3, 0.3 / 0.7 and
0.5 / 0.5 blends).

Examples
--------
>>> detect_mode("Why did we change the retry policy?")
'analytical'
>>> detect_mode("Any ideas for the launch party?")
'creative'
>>> detect_mode("Thanks, that works.")
'conversational'
>>> mode_weights("exploratory")
(0.7, 0.3)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "MODE_ALIASES",
    "MODE_PROMPT",
    "MODE_WEIGHTS",
    "ModeDetector",
    "PromptModeDetector",
    "canonical_mode",
    "detect_mode",
    "mode_weights",
]

MODE_WEIGHTS = {"creative": (0.7, 0.3), "analytical": (0.3, 0.7), "conversational": (0.5, 0.5)}
"""(vector weight, graph weight) of each mode."""

MODE_ALIASES = {"exploratory": "creative", "balanced": "conversational"}
"""Other names of the modes, as the design writes them."""

MODE_PROMPT = """\
Classify the question by what answering it needs. Reply with one word:
analytical (causes, decisions, fixes, comparisons: what led to what),
creative (ideas, alternatives, what-ifs: what is alike or new), or
conversational (anything else).

Question: {query}"""

log = logging.getLogger(__name__)

_ANALYTICAL = re.compile(
    r"\bwhy\b|\bwhat (?:caused|causes|led to|broke|went wrong|happened)\b|\bhow (?:did|do|can) "
    r"(?:we|you|i|they) (?:fix|solve|resolve|debug|decide|end up|get)\b|\bcause[sd]?\b|\broot "
    r"cause\b|\bbecause\b|\breason\b|\bdecid(?:e|ed|ing|ion)\b|\bagreed?\b|\bconclu(?:de|ded|sion)\b"
    r"|\bdebug|\bfix(?:ed|es)?\b|\bbug\b|\berror\b|\bfail(?:ed|ing|ure|s)?\b|\bbroke(?:n)?\b"
    r"|\bcompare|\bdifference between\b|\btrade-?offs?\b|\bexplain\b|\bwhat changed\b"
    r"|\bwhen did\b|\bwhich (?:version|commit|file)\b|\bsteps?\b|\bcaused by\b",
    re.IGNORECASE,
)
_CREATIVE = re.compile(
    r"\bideas?\b|\bwhat if\b|\bbrainstorm|\bimagine\b|\bsuggest(?:ions?)?\b|\binspir"
    r"|\balternatives?\b|\bcreative\b|\bexplore\b|\bpossibilit(?:y|ies)\b|\bcould we\b"
    r"|\bhow about\b|\bnew ways?\b|\bdream\b|\bcome up with\b|\bthemes?\b|\bnames? for\b"
    r"|\bwild\b|\bfun\b|\bsimilar to\b|\blike this\b|\bremind",
    re.IGNORECASE,
)


@runtime_checkable
class ModeDetector(Protocol):
    """Anything that names a query's mode: ``mode(query) -> str`` (a mode or an alias)."""

    def mode(self, query: str) -> str:
        """The mode of ``query``."""
        ...


def canonical_mode(mode: str) -> str:
    """A mode's own name (an alias resolved); an unknown name raises InvalidValueError.

    Examples
    --------
    >>> canonical_mode("balanced"), canonical_mode("analytical")
    ('conversational', 'analytical')
    """
    known = sorted([*MODE_WEIGHTS, *MODE_ALIASES])
    if not isinstance(mode, str):  # a list: unhashable, a raw TypeError below
        raise InvalidTypeError(
            f"mode must be a str, one of {known} or 'auto', got {type(mode).__name__} {shown(mode)}"
        )
    name = MODE_ALIASES.get(mode, mode)
    if name not in MODE_WEIGHTS:
        raise InvalidValueError(f"mode must be one of {known} or 'auto', got {shown(mode)}")
    return str(name)  # a str subclass (an enum's member) as the plain name


def mode_weights(mode: str) -> tuple[float, float]:
    """``(vector weight, graph weight)`` of a mode or alias.

    Examples
    --------
    >>> mode_weights("analytical"), mode_weights("balanced")
    ((0.3, 0.7), (0.5, 0.5))
    """
    return MODE_WEIGHTS[canonical_mode(mode)]


def detect_mode(query: str) -> str:
    """The mode of ``query`` by its cue words: the more frequent kind wins.

    Analytical cues ask for causes, decisions and fixes ("why", "what caused", "how did we
    fix", "decided", "bug"); creative cues ask for new or similar things ("ideas", "what
    if", "brainstorm", "alternatives"). Each cue found counts one; a tie (none included)
    is ``conversational``.

    Examples
    --------
    >>> detect_mode("What caused the outage last week?")
    'analytical'
    >>> detect_mode("What if we brainstorm some alternatives?")
    'creative'
    >>> detect_mode("See you tomorrow!")
    'conversational'
    """
    analytical = len(_ANALYTICAL.findall(query))
    creative = len(_CREATIVE.findall(query))
    if analytical > creative:
        return "analytical"
    if creative > analytical:
        return "creative"
    return "conversational"


class PromptModeDetector:
    """A mode from a language model: any ``prompt -> completion`` callable.

    The first mode name (or alias) in the answer wins; an answer naming none falls back
    to :func:`detect_mode` (logged), so a model never stops a retrieval. The LangChain and
    LlamaIndex adapters wrap a chat model or an LLM in one.

    Examples
    --------
    >>> PromptModeDetector(lambda prompt: "Analytical.").mode("Tell me about the outage")
    'analytical'
    >>> PromptModeDetector(lambda prompt: "No idea!").mode("Any ideas for the party?")
    'creative'
    """

    def __init__(self, complete: Callable[[str], str], *, prompt: str = MODE_PROMPT) -> None:
        self.complete = complete
        self.prompt = prompt

    def mode(self, query: str) -> str:
        """The model's mode for ``query``, else the cue words'."""
        answer = self.complete(self.prompt.format(query=query))
        names = [*MODE_WEIGHTS, *MODE_ALIASES]
        found = re.findall(r"[a-z]+", answer.lower()) if isinstance(answer, str) else []
        for word in found:
            if word in names:
                return canonical_mode(word)
        log.warning("mode detector: no mode in %.200r; using the cue words", answer)
        return detect_mode(query)
