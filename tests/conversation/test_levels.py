"""Tests for conversation/levels.py: thresholds, working memory, the budget rule, groups."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import ContextBudgetError, Level, plan_levels, threshold_level
from synapse_retriever.errors import InvalidTypeError, InvalidValueError

F, C, S, D = Level.FULL, Level.CHUNKS, Level.SUMMARY, Level.DROPPED
COSTS = (100, 30, 10)  # FULL, CHUNKS, SUMMARY tokens of every turn below


def test_thresholds_are_strict() -> None:
    assert [threshold_level(x) for x in (0.71, 0.7, 0.41, 0.4, 0.21, 0.2, 0.0)] == [
        F, C, C, S, S, D, D,
    ]  # fmt: skip
    assert threshold_level(0.5, (0.9, 0.6, 0.3)) is S


def test_levels_by_importance_beyond_working_memory() -> None:
    importance = [0.9, 0.5, 0.3, 0.1, 0.0, 0.0]
    plan = plan_levels(importance, [COSTS] * 6, 10_000, working_memory=2)
    assert plan == [F, C, S, D, F, F]  # the last two are working memory, whatever their score


def test_working_memory_covers_everything_in_a_short_history() -> None:
    assert plan_levels([0.0, 0.0], [COSTS] * 2, 200) == [F, F]
    assert plan_levels([], [], 0) == []


def test_budget_rule_demotes_the_least_important_one_level_at_a_time() -> None:
    # FULL 0.9 (100) + CHUNKS 0.5 (30) + SUMMARY 0.3 (10) + 2 × 100 working = 340 tokens.
    importance = [0.9, 0.5, 0.3, 0.0, 0.0]
    costs = [COSTS] * 5
    kwargs = {"working_memory": 2}
    assert plan_levels(importance, costs, 340, **kwargs) == [F, C, S, F, F]
    # 330: the 0.3 turn is the least important: SUMMARY → DROPPED frees 10.
    assert plan_levels(importance, costs, 330, **kwargs) == [F, C, D, F, F]
    # 320: then the 0.5 turn CHUNKS → SUMMARY frees 20 (310).
    assert plan_levels(importance, costs, 310, **kwargs) == [F, S, D, F, F]
    # 300: the 0.5 turn is still the least important: dropped (300).
    assert plan_levels(importance, costs, 300, **kwargs) == [F, D, D, F, F]
    # 230: the 0.9 turn goes FULL → CHUNKS (230).
    assert plan_levels(importance, costs, 230, **kwargs) == [C, D, D, F, F]
    assert plan_levels(importance, costs, 200, **kwargs) == [D, D, D, F, F]


def test_fade_condenses_every_turn_before_it_drops_any() -> None:
    # The same turns as above at 230 tokens: importance order dropped the 0.5 and 0.3
    # turns; fade first condenses all three, least important first (0.3 is SUMMARY
    # already; 0.5 CHUNKS → SUMMARY: 320; 0.9 FULL → CHUNKS: 250, → SUMMARY: 230).
    importance = [0.9, 0.5, 0.3, 0.0, 0.0]
    costs = [COSTS] * 5
    assert plan_levels(importance, costs, 230, working_memory=2, demotion="fade") == [
        S, S, S, F, F,
    ]  # fmt: skip
    # then drops, least important first: 220 → the 0.3 turn, 210 → the 0.5 turn
    assert plan_levels(importance, costs, 220, working_memory=2, demotion="fade") == [
        S, S, D, F, F,
    ]  # fmt: skip
    assert plan_levels(importance, costs, 210, working_memory=2, demotion="fade") == [
        S, D, D, F, F,
    ]  # fmt: skip
    # with room, the most important keeps its detail longest: 250 → only 0.9 is CHUNKS
    assert plan_levels(importance, costs, 250, working_memory=2, demotion="fade") == [
        C, S, S, F, F,
    ]  # fmt: skip


def test_a_level_that_costs_no_less_is_skipped() -> None:
    # A one-sentence turn: CHUNKS is the whole text (same cost), so FULL → SUMMARY at once,
    # and a threshold level of CHUNKS shows the full text at the same cost.
    costs = [(10, 10, 4), COSTS]
    assert plan_levels([0.5, 0.0], costs, 1000, working_memory=1) == [F, F]
    assert plan_levels([0.5, 0.0], costs, 105, working_memory=1) == [S, F]
    assert plan_levels([0.5, 0.0], [(10, 10, 10), COSTS], 105, working_memory=1) == [D, F]


def test_pinned_turns_stay_full_and_count_toward_the_budget() -> None:
    plan = plan_levels([0.0, 0.9, 0.0], [COSTS] * 3, 230, working_memory=1, pinned=[1, 0, 0])
    assert plan == [F, C, F]  # 100 pinned + 100 working leave 30: CHUNKS


def test_groups_are_kept_or_dropped_together() -> None:
    importance = [0.9, 0.1, 0.5, 0.0]  # turn 0 calls a tool, turn 1 answers it
    groups = [7, 7, None, None]
    # The 0.1 member is below the SUMMARY threshold, but its group is present: SUMMARY.
    plan = plan_levels(importance, [COSTS] * 4, 10_000, working_memory=1, groups=groups)
    assert plan == [F, S, C, F]
    # Tight budget: the group's drop step ranks by its most important member (0.9), so the
    # 0.5 turn goes first; then the group drops whole, never one member alone.
    for budget in range(100, 240):
        plan = plan_levels(importance, [COSTS] * 4, budget, working_memory=1, groups=groups)
        assert (plan[0] is D) == (plan[1] is D), (budget, plan)


def test_a_group_with_a_working_memory_member_is_never_dropped() -> None:
    groups = [1, None, 1]  # turn 0's tool call is answered by turn 2, in working memory
    plan = plan_levels([0.0, 0.9, 0.0], [COSTS] * 3, 110, working_memory=1, groups=groups)
    assert plan == [S, D, F]  # the caller stays (as a SUMMARY), the unrelated 0.9 turn goes
    with pytest.raises(ContextBudgetError) as error:
        plan_levels([0.0, 0.9, 0.0], [COSTS] * 3, 105, working_memory=1, groups=groups)
    assert error.value.needed == 110


def test_working_memory_over_budget_is_an_error_that_names_both_numbers() -> None:
    with pytest.raises(ContextBudgetError, match=r"needs 200 tokens, more than budget_tokens=150"):
        plan_levels([0.0, 0.0], [COSTS] * 2, 150)
    with pytest.raises(ValueError):  # a ContextBudgetError is a ValueError
        plan_levels([0.0, 0.0], [COSTS] * 2, 150)


def test_overflow_shrink_condenses_the_oldest_working_memory_turns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        plan = plan_levels([0.5, 0.5, 0.5], [COSTS] * 3, 230, overflow="shrink")
    assert plan == [C, F, F]  # the oldest left working memory and was condensed
    assert "working memory exceeds budget_tokens=230" in caplog.text
    with pytest.raises(ContextBudgetError, match="pinned turns"):
        plan_levels([0.5], [COSTS], 50, pinned=[True], overflow="shrink")


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(InvalidValueError, match="2 importances but 1 costs"):
        plan_levels([0.1, 0.2], [COSTS], 100)
    with pytest.raises(InvalidValueError, match="one entry per turn"):
        plan_levels([0.1], [COSTS], 100, pinned=[True, False])


def test_numpy_costs_an_array_of_them_and_a_generator_are_planned_as_lists() -> None:
    expected = plan_levels([0.5, 0.9], [COSTS, COSTS], 1_000)
    assert plan_levels([0.5, 0.9], np.array([COSTS, COSTS]), np.int64(1_000)) == expected
    assert plan_levels(iter([0.5, 0.9]), (c for c in [COSTS, COSTS]), 1_000) == expected
    with pytest.raises(InvalidTypeError, match="importance must be a sequence, one per turn"):
        plan_levels(None, [COSTS], 100)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("costs", "budget", "options", "error", "says"),
    [
        ([(100, math.nan, 10)], 100, {}, InvalidValueError, r"costs\[0\] must be three token"),
        ([(100, 30)], 100, {}, InvalidValueError, r"costs\[0\] must be three token counts"),
        ([(100, 30, -1)], 100, {}, InvalidValueError, r"costs\[0\] must be three token counts"),
        ([COSTS], math.nan, {}, InvalidTypeError, "budget must be an int, got float"),
        ([COSTS], -1, {}, InvalidValueError, "budget must be >= 0, got -1"),
        ([COSTS], 100, {"demotion": "x"}, InvalidValueError, "demotion must be 'importance' or"),
        ([COSTS], 100, {"overflow": "x"}, InvalidValueError, "overflow must be 'raise' or"),
        ([COSTS], 100, {"working_memory": -1}, InvalidValueError, "working_memory must be >= 0"),
    ],
)
def test_what_cannot_be_planned_with_is_refused_by_name(
    costs: list[tuple[int, int, int]],
    budget: int,
    options: dict[str, object],
    error: type[Exception],
    says: str,
) -> None:
    # a NaN cost raised a raw ValueError, a pair of costs zip's; demotion="x" planned as
    # "importance", and budget=nan said "needs 200 tokens, more than budget_tokens=nan"
    with pytest.raises(error, match=says):
        plan_levels([0.5], costs, budget, **options)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.floats(0, 1),
            st.integers(0, 200),
            st.integers(0, 200),
            st.integers(0, 200),
            st.sampled_from([None, 0, 1, 2]),
        ),
        max_size=25,
    ),
    working=st.integers(0, 6),
    budget=st.integers(0, 3000),
    demotion=st.sampled_from(["importance", "fade"]),
)
def test_the_plan_never_exceeds_the_budget_and_keeps_working_memory_full(
    turns: list[tuple[float, int, int, int, int | None]],
    working: int,
    budget: int,
    demotion: str,
) -> None:
    importance = [t[0] for t in turns]
    costs = [(f, min(f, c), min(f, c, s)) for _, f, c, s, _ in turns]
    groups = [t[4] for t in turns]
    try:
        plan = plan_levels(
            importance, costs, budget, working_memory=working, demotion=demotion, groups=groups
        )
    except ContextBudgetError as error:
        assert error.needed > budget
        return
    cost = {F: 0, C: 1, S: 2}
    assert sum(costs[i][cost[lv]] for i, lv in enumerate(plan) if lv is not D) <= budget
    for i in range(max(0, len(turns) - working), len(turns)):
        assert plan[i] is F
    for group in {g for g in groups if g is not None}:
        members = [plan[i] is D for i, g in enumerate(groups) if g == group]
        assert all(members) or not any(members)
