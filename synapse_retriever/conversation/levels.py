"""Detail levels and the budget rule: which turns stay FULL, condensed, summarized or dropped.

A pure function over importances and token costs; it reads no text.

Notes
-----
1. The last ``working_memory`` turns, and pinned turns (e.g. a system message), are FULL.
2. Every other turn gets a level by importance: FULL above ``full``, CHUNKS above
   ``chunks``, SUMMARY above ``summary``, else DROPPED.
3. While the total cost exceeds the budget, one turn is demoted one level (never a cliff
   for all at once). ``demotion="importance"`` (as published): the least important turn,
   again and again, so it is dropped before the next one loses any detail.
   ``demotion="fade"``: every condensation first (FULL → CHUNKS → SUMMARY, least important
   first), then drops (least important first): graded detail buys room, and no turn is
   forgotten while another could still be condensed. Room the last step left over goes
   back to the most important kept turns, up to their threshold level. A level that costs
   no less than the one above it is skipped.
4. If working memory alone does not fit, :class:`ContextBudgetError` says by how much
   (or, with ``overflow="shrink"``, the oldest working-memory turns become ordinary turns
   until it fits). A turn is never cut mid-text.

Groups (e.g. an assistant message with tool calls and the tool results that answer them)
are present together or dropped together, so tool-call pairing survives degradation.

Examples
--------
Seven turns, the last five in working memory, each FULL turn costing 100 tokens, CHUNKS
30, SUMMARY 10. Turn 0 has importance 0.8 (FULL), turn 1 has 0.5 (CHUNKS):
5 × 100 + 100 + 30 = 630 tokens.

>>> costs = [(100, 30, 10)] * 7
>>> [lv.value for lv in plan_levels([0.8, 0.5, 0, 0, 0, 0, 0], costs, 1000)]
['full', 'chunks', 'full', 'full', 'full', 'full', 'full']

With a budget of 600, the least important turn (turn 1) is demoted first: to SUMMARY
(610 tokens, still too many), then dropped (600):

>>> [lv.value for lv in plan_levels([0.8, 0.5, 0, 0, 0, 0, 0], costs, 600)][:2]
['full', 'dropped']
"""

from __future__ import annotations

import heapq
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence, Sized
from enum import StrEnum

from synapse_retriever._numbers import numeric
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown
from synapse_retriever.tokens import check_tokens, is_int

__all__ = ["ContextBudgetError", "Level", "plan_levels", "threshold_level"]

PUBLISHED = ContextConfig.published()
"""The method as published, whose rule this module is: its defaults are the preset's."""

PUBLISHED_THRESHOLDS = (
    PUBLISHED.full_threshold,
    PUBLISHED.chunks_threshold,
    PUBLISHED.summary_threshold,
)


class Level(StrEnum):
    """How much of a turn goes into the prompt (a ``str``: ``Level.FULL == "full"``).

    Examples
    --------
    >>> Level.CHUNKS == "chunks", [level.value for level in Level]
    (True, ['full', 'chunks', 'summary', 'dropped'])
    """

    FULL = "full"
    CHUNKS = "chunks"
    SUMMARY = "summary"
    DROPPED = "dropped"


log = logging.getLogger(__name__)

_KEPT = (Level.FULL, Level.CHUNKS, Level.SUMMARY)


class ContextBudgetError(InvalidValueError):
    """Pinned turns alone (whatever ``overflow`` says), or with ``overflow="raise"``
    working memory and pinned turns, need more tokens than the budget.

    Attributes
    ----------
    needed : int
        Tokens the turns that must stay FULL need.
    budget : int
        The budget that was asked for.

    Examples
    --------
    Three turns in working memory at 100 tokens each do not fit in 250; no turn is cut:

    >>> try:
    ...     plan_levels([0.0] * 3, [(100, 30, 10)] * 3, 250)
    ... except ContextBudgetError as error:
    ...     print(error.needed, error.budget)
    300 250
    """

    def __init__(self, needed: int, budget: int, what: str = "working memory") -> None:
        self.needed = needed
        self.budget = budget
        way_out = (
            "pinned turns (a system prompt) are never condensed or dropped: raise the budget"
            if what == "pinned turns"
            else "no turn is cut mid-text: raise the budget, lower working_memory, or use "
            "overflow='shrink'"
        )
        need = "need" if what == "pinned turns" else "needs"
        tokens = "token" if needed == 1 else "tokens"
        super().__init__(
            f"{what} alone {need} {needed} {tokens}, more than budget_tokens={budget}; {way_out}"
        )


@numeric
def threshold_level(
    importance: float, thresholds: tuple[float, float, float] = PUBLISHED_THRESHOLDS
) -> Level:
    """FULL above ``thresholds[0]``, CHUNKS above ``[1]``, SUMMARY above ``[2]``, else DROPPED.

    Examples
    --------
    >>> [threshold_level(x).value for x in (0.71, 0.7, 0.4, 0.2)]
    ['full', 'chunks', 'summary', 'dropped']
    """
    full, chunks, summary = thresholds
    if importance > full:
        return Level.FULL
    if importance > chunks:
        return Level.CHUNKS
    if importance > summary:
        return Level.SUMMARY
    return Level.DROPPED


def plan_levels(
    importance: Sequence[float],
    costs: Sequence[tuple[int, int, int]],
    budget: int,
    *,
    working_memory: int = PUBLISHED.working_memory,
    thresholds: tuple[float, float, float] = PUBLISHED_THRESHOLDS,
    demotion: str = PUBLISHED.demotion,
    pinned: Sequence[bool] | None = None,
    groups: Sequence[int | None] | None = None,
    overflow: str = PUBLISHED.overflow,
    checked: bool = True,
) -> list[Level]:
    """The level of each turn (oldest first) so that the total cost fits ``budget``.

    Parameters
    ----------
    importance : sequence of float
        Importance of each turn, in conversation order.
    costs : sequence of (int, int, int)
        Tokens of each turn at FULL, CHUNKS and SUMMARY.
    budget : int
        The most tokens the kept turns may cost together.
    working_memory : int
        The last this-many unpinned turns are FULL.
    thresholds : (float, float, float)
        FULL, CHUNKS and SUMMARY thresholds.
    demotion : {"importance", "fade"}
        The budget rule's order (see the module notes).
    pinned : sequence of bool, optional
        Turns kept FULL whatever the budget, outside working memory (a system message).
    groups : sequence of int or None, optional
        Turns with the same group id are kept or dropped together; ``None``: alone.
    overflow : {"raise", "shrink"}
        What to do when the turns that must stay FULL exceed the budget.
    checked : bool
        Check the costs, budget and rules first (False: the caller made them itself, as
        ``assemble`` does: a check per turn of every call saved).

    Returns
    -------
    list of Level
        One level per turn; the costs of the kept levels sum to at most ``budget``.

    Raises
    ------
    ContextBudgetError
        The turns that must stay FULL do not fit (with ``overflow="shrink"``: even with
        no working memory).

    Examples
    --------
    ``fade`` condenses every turn before it drops any: at 590 tokens the 0.5 turn goes to
    SUMMARY (610), then the 0.8 turn to CHUNKS (540); the 50 tokens left over bring the
    0.5 turn back to CHUNKS (560, not enough for the 0.8 turn's FULL), and nothing is
    dropped:

    >>> costs = [(100, 30, 10)] * 7
    >>> plan = plan_levels([0.8, 0.5, 0, 0, 0, 0, 0], costs, 590, demotion="fade")
    >>> [lv.value for lv in plan][:2]
    ['chunks', 'chunks']
    """
    if checked:
        for name, values in (("importance", importance), ("costs", costs)):
            if not isinstance(values, Iterable) or isinstance(values, str | bytes):
                raise InvalidTypeError(
                    f"{name} must be a sequence, one per turn, got {type(values).__name__} "
                    f"{shown(values)}"
                )
        importance, costs = list(importance), list(costs)  # a generator is read once
        _check_plan(costs, budget, working_memory, demotion, overflow)
    n = len(importance)
    if len(costs) != n:
        raise InvalidValueError(f"got {n} importances but {len(costs)} costs")
    pinned_flags = [bool(p) for p in pinned] if pinned is not None else [False] * n
    group_ids = list(groups) if groups is not None else [None] * n
    if len(pinned_flags) != n or len(group_ids) != n:
        raise InvalidValueError("pinned and groups must have one entry per turn")
    ladders = [_ladder(cost) for cost in costs]
    members: dict[int, list[int]] = defaultdict(list)
    for i, group_id in enumerate(group_ids):
        if group_id is not None:
            members[group_id].append(i)

    def group_of(i: int) -> list[int]:
        group = group_ids[i]
        return members[group] if group is not None else [i]

    unpinned = [i for i in range(n) if not pinned_flags[i]]
    working = unpinned[len(unpinned) - min(working_memory, len(unpinned)) :]
    pinned_turns = {i for i in range(n) if pinned_flags[i]}

    def needs(forced: set[int]) -> tuple[int, set[int]]:
        """What ``forced`` costs FULL with the other members of its groups at their
        cheapest (they cannot be dropped), and those members."""
        floor = {j for i in forced for j in group_of(i) if j not in forced}
        return sum(costs[i][0] for i in forced) + sum(ladders[j][-1][1] for j in floor), floor

    alone, _ = needs(pinned_turns)
    if alone > budget:  # never condensed nor dropped, whatever overflow says
        raise ContextBudgetError(alone, budget, "pinned turns")
    shrunk = 0
    while True:
        forced = pinned_turns | set(working)
        needed, floor = needs(forced)
        if needed <= budget:
            break
        if overflow != "shrink":
            raise ContextBudgetError(needed, budget, "working memory")
        working = working[1:]  # at worst none: the pinned turns alone fit
        shrunk += 1
    if shrunk:
        log.warning(
            "working memory exceeds budget_tokens=%d: its %d oldest turn(s) may be condensed",
            budget,
            shrunk,
        )

    # 1-2: working memory and pinned turns FULL, the others by threshold.
    rung = [0] * n  # index into ladders[i]; len(ladders[i]) means dropped
    for i in range(n):
        if i not in forced:
            rung[i] = _rung_for(ladders[i], costs[i], threshold_level(importance[i], thresholds))
    for together in members.values():  # a group is present if any member is
        if any(rung[i] < len(ladders[i]) for i in together) or forced & set(together):
            for i in together:
                rung[i] = min(rung[i], len(ladders[i]) - 1)

    def cost(i: int) -> int:
        return ladders[i][rung[i]][1] if rung[i] < len(ladders[i]) else 0

    total = sum(cost(i) for i in range(n))
    if total <= budget:
        return [_level(ladders[i], rung[i]) for i in range(n)]

    # 3: demote one step at a time until the total fits.
    version = [0] * n
    heap: list[tuple[float, float, int, int]] = []

    def push(i: int) -> None:
        if i in forced or rung[i] >= len(ladders[i]):
            return
        last = rung[i] == len(ladders[i]) - 1
        if last and i in floor:
            return
        alive = [j for j in group_of(i) if rung[j] < len(ladders[j])]
        rank = max(float(importance[j]) for j in alive) if last else float(importance[i])
        # fade: every condensation (least important first) before any drop
        key = rank + 2.0 if demotion == "fade" and last else rank
        heapq.heappush(heap, (key, rank, i, version[i]))

    for i in range(n):
        push(i)
    while total > budget and heap:
        _, _, i, seen = heapq.heappop(heap)
        if seen != version[i]:
            continue
        if rung[i] == len(ladders[i]) - 1:
            for j in group_of(i):
                total -= cost(j)
                rung[j] = len(ladders[j])
        else:
            total -= cost(i) - ladders[i][rung[i] + 1][1]
            rung[i] += 1
        for j in group_of(i):  # the group's drop step changed with it
            version[j] += 1
            push(j)
    if demotion == "fade":  # 4: room the last step left goes back to the most important
        initial = [_rung_for(ladders[i], costs[i], threshold_level(importance[i], thresholds))
                   for i in range(n)]  # fmt: skip
        slack = budget - total
        kept = [i for i in range(n) if i not in forced and rung[i] < len(ladders[i])]
        for i in sorted(kept, key=lambda i: (-float(importance[i]), i)):
            while rung[i] > initial[i] and ladders[i][rung[i] - 1][1] - cost(i) <= slack:
                slack -= ladders[i][rung[i] - 1][1] - cost(i)
                rung[i] -= 1
    return [_level(ladders[i], rung[i]) for i in range(n)]


def _ladder(cost: tuple[int, int, int]) -> list[tuple[Level, int]]:
    """The levels of a turn whose cost strictly decreases: FULL, then cheaper ones only."""
    ladder = [(Level.FULL, int(cost[0]))]
    for level, tokens in zip((Level.CHUNKS, Level.SUMMARY), cost[1:], strict=True):
        if tokens < ladder[-1][1]:
            ladder.append((level, int(tokens)))
    return ladder


def _rung_for(ladder: list[tuple[Level, int]], cost: tuple[int, int, int], level: Level) -> int:
    """The most detailed rung that costs no more than ``level`` (a dropped level: past the end)."""
    if level is Level.DROPPED:
        return len(ladder)
    limit = cost[_KEPT.index(level)]
    for i, (_, tokens) in enumerate(ladder):
        if tokens <= limit:
            return i
    return len(ladder) - 1


def _level(ladder: list[tuple[Level, int]], rung: int) -> Level:
    return ladder[rung][0] if rung < len(ladder) else Level.DROPPED


def _check_plan(
    costs: Sequence[tuple[int, int, int]],
    budget: object,
    working_memory: object,
    demotion: object,
    overflow: object,
) -> None:
    """Refuse, by name, what :func:`plan_levels` cannot plan with (a NaN cost raised a raw
    ``ValueError``, a pair of costs ``zip``'s, and an unknown ``demotion`` planned as
    ``"importance"``)."""
    check_tokens("budget", budget)
    check_tokens("working_memory", working_memory)
    for i, cost in enumerate(costs):
        if not (  # an array row too
            isinstance(cost, Sized)
            and len(cost) == 3
            and all(is_int(c) and int(c) >= 0 for c in cost)
        ):
            raise InvalidValueError(
                f"costs[{i}] must be three token counts (FULL, CHUNKS, SUMMARY), ints >= 0, "
                f"got {shown(cost)}"
            )
    if demotion not in ("importance", "fade"):
        raise InvalidValueError(f"demotion must be 'importance' or 'fade', got {shown(demotion)}")
    if overflow not in ("raise", "shrink"):
        raise InvalidValueError(f"overflow must be 'raise' or 'shrink', got {shown(overflow)}")
