"""The candidates step's pruning before the gradient, checked against plan_levels on every turn.

``plan_context`` (conversation/assemble.py) passes :func:`plan_levels` only the turns
:func:`~synapse_retriever.conversation.assemble.candidates` returns, and claims the levels
are those of planning every turn:

1. a turn at or below the SUMMARY threshold is left out, unless it must stay (pinned,
   working memory; the relevance pass's picks are pinned here) or is in a group;
2. ungrouped optional turns are walked most important first (ties: newest first); once
   the turns that must stay (FULL) plus each walked turn at its cheapest level exceed the
   budget, every less important ungrouped turn is left out. Only when the turns that must
   stay fit the budget at FULL.

Rule (2) starts from what plan_levels itself needs whatever happens: the turns that must
stay FULL and the other members of their groups (tool calls) at their cheapest; above the
budget, working memory may shrink and free room, so nothing is left out. (An earlier walk
started from the must-stay turns alone and was wrong there: the three cases of
:func:`test_the_walk_is_right_when_working_memory_shrinks` were its counterexamples.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import ContextBudgetError, Level, plan_levels, threshold_level
from synapse_retriever.conversation.assemble import _walk_order, candidates

THRESHOLDS = (0.7, 0.4, 0.2)


@pytest.fixture(autouse=True)
def _quiet_shrink_warning() -> Iterator[None]:
    """plan_levels logs a warning on every shrunk working memory; hundreds of them here."""
    logger = logging.getLogger("synapse_retriever.conversation.levels")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@dataclass(frozen=True)
class Case:
    importance: list[float]
    costs: list[tuple[int, int, int]]
    budget: int
    pinned: list[bool]
    groups: list[int | None]
    working_memory: int
    demotion: str
    overflow: str

    def must_stay(self) -> list[int]:
        """Pinned turns and the last ``working_memory`` unpinned ones."""
        unpinned = [i for i in range(len(self.pinned)) if not self.pinned[i]]
        tail = set(unpinned[-self.working_memory :]) if self.working_memory else set()
        return [i for i in range(len(self.pinned)) if self.pinned[i] or i in tail]


def subset(case: Case, *, walk: bool = True) -> list[int]:
    """The turns plan_context plans, oldest first: :func:`candidates` (rules 1 and 2), or
    rule (1) alone, written out here, if not ``walk``."""
    must = case.must_stay()
    if walk:
        return candidates(
            case.importance,
            case.costs.__getitem__,
            case.budget,
            must=must,
            groups=case.groups,
            summary_threshold=THRESHOLDS[2],
        )
    return [
        i
        for i in range(len(case.importance))
        if i in must
        or case.groups[i] is not None
        or threshold_level(case.importance[i], THRESHOLDS) is not Level.DROPPED
    ]


def shrinks(case: Case) -> bool:
    """plan_levels shrinks working memory: FULL must-stay turns + their groups' cheapest."""
    must = set(case.must_stay())
    ids = {case.groups[i] for i in must} - {None}
    mates = [j for j, g in enumerate(case.groups) if g in ids and j not in must]
    needed = sum(case.costs[i][0] for i in must) + sum(min(case.costs[j]) for j in mates)
    return case.overflow == "shrink" and needed > case.budget


def plan(case: Case, rows: list[int] | None = None) -> list[Level]:
    rows = list(range(len(case.importance))) if rows is None else rows
    return plan_levels(
        [case.importance[i] for i in rows],
        [case.costs[i] for i in rows],
        case.budget,
        working_memory=case.working_memory,
        thresholds=THRESHOLDS,
        demotion=case.demotion,
        pinned=[case.pinned[i] for i in rows],
        groups=[case.groups[i] for i in rows],
        overflow=case.overflow,
    )


def check(case: Case, rows: list[int]) -> None:
    """Every planned turn: its level in the full plan; every pruned turn: DROPPED there."""
    try:
        reference = plan(case)
    except ContextBudgetError as error:
        with pytest.raises(ContextBudgetError) as pruned:
            plan(case, rows)
        assert (pruned.value.needed, pruned.value.budget) == (error.needed, error.budget)
        return
    levels = dict(zip(rows, plan(case, rows), strict=True))
    assert [levels.get(i, Level.DROPPED) for i in range(len(reference))] == reference, case


importances = st.one_of(
    st.sampled_from([0.0, 0.2, 0.4, 0.7, 1.0, 0.3, 0.5, 0.9]),  # thresholds, ties
    st.floats(0.0, 1.0),
)
cost_triples = st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40)).map(
    lambda xs: tuple(sorted(xs, reverse=True))  # FULL >= CHUNKS >= SUMMARY, often equal
)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 14))
    importance = draw(st.lists(importances, min_size=n, max_size=n))
    costs = draw(st.lists(cost_triples, min_size=n, max_size=n))
    pinned = draw(st.lists(st.sampled_from([False, False, False, True]), min_size=n, max_size=n))
    groups = draw(st.lists(st.sampled_from([None, None, None, None, 0, 1]), min_size=n, max_size=n))
    working_memory = draw(st.integers(0, 5))
    case = Case(importance, costs, 0, pinned, groups, working_memory, "importance", "raise")
    must = case.must_stay()
    walked = sum(  # the ungrouped optional turns at their cheapest: rule (2)'s range
        min(costs[i])
        for i in range(n)
        if i not in must
        and groups[i] is None
        and threshold_level(importance[i], THRESHOLDS) is not Level.DROPPED
    )
    floor = sum(costs[i][0] for i in must)
    total = sum(full for full, _, _ in costs)
    return Case(
        importance,
        costs,
        draw(st.one_of(st.integers(floor, floor + walked), st.integers(0, total + 20))),
        pinned,
        groups,
        working_memory,
        draw(st.sampled_from(["importance", "fade"])),
        draw(st.sampled_from(["raise", "shrink"])),
    )


@settings(max_examples=300, deadline=None, database=None)
@given(cases())
def test_pruned_plan_matches_full_plan(case: Case) -> None:
    check(case, subset(case))


@settings(max_examples=300, deadline=None, database=None)
@given(cases())
def test_turns_below_the_summary_threshold_can_be_left_out(case: Case) -> None:
    check(case, subset(case, walk=False))  # rule (1) alone, shrinking included


def walk_counterexample(costs: list[tuple[int, int, int]], budget: int, demotion: str) -> Case:
    """Turn 3: working memory, grouped with turn 2 (a tool call and its result)."""
    return Case(
        importance=[0.9, 0.5, 0.0, 0.0],
        costs=costs,
        budget=budget,
        pinned=[False] * 4,
        groups=[None, None, 1, 1],
        working_memory=1,
        demotion=demotion,
        overflow="shrink",
    )


WALK_COUNTEREXAMPLES = [
    # plan_levels needs 2 (turn 3 FULL) + 1 (turn 2 at its cheapest) > 2: it shrinks
    # working memory to nothing, and turns 2 and 3 (importance 0) are dropped. The old
    # walk counted 2 + 1 (turn 0 at its cheapest) > 2 and left turn 1 out: full plan
    # [full, full, dropped, dropped], pruned [full, -, dropped, dropped].
    *(
        pytest.param(walk_counterexample([(1, 1, 1)] * 3 + [(2, 2, 2)], 2, d), id=f"unit-{d}")
        for d in ("importance", "fade")
    ),
    # Needed 100 + 10 > 105, walk 100 + 10 > 105. Full plan [chunks, chunks, dropped,
    # dropped] (turn 1 to SUMMARY, turn 0 to CHUNKS, then the room left restores turn 1);
    # the old walk's [full, -, dropped, dropped] differed in turn 0's level too.
    pytest.param(walk_counterexample([(100, 30, 10)] * 4, 105, "fade"), id="levels-fade"),
]


@pytest.mark.parametrize("case", WALK_COUNTEREXAMPLES)
def test_the_walk_is_right_when_working_memory_shrinks(case: Case) -> None:
    assert shrinks(case)
    assert subset(case) == [0, 1, 2, 3]  # nothing left out: working memory may shrink
    check(case, subset(case))


@settings(max_examples=300, deadline=None, database=None)
@given(cases())
def test_the_walk_order_is_the_one_a_sort_of_tuples_gives(case: Case) -> None:
    # NumPy's sort replaced sorted() over (alone, -importance, -turn) tuples, which held the
    # interpreter (an async caller's event loop) for a tenth of a second at 20,000 turns
    must = case.must_stay()
    kept = set(must)
    expected = sorted(
        (
            i
            for i in range(len(case.importance))
            if i not in kept and (case.groups[i] is not None or case.importance[i] > 0.2)
        ),
        key=lambda i: (case.groups[i] is None, -case.importance[i], -i),
    )
    assert _walk_order(case.importance, must, case.groups, 0.2) == expected
