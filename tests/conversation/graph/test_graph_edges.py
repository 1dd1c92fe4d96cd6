"""Edge strength over time and reinforcement, worked by hand; invariants by hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever.conversation.graph.edges import edge_strength, reinforced
from synapse_retriever.errors import InvalidValueError

HALF_LIFE = math.log(2) / 0.05  # 13.86 days at the default rate


@pytest.mark.parametrize(
    ("age_days", "count", "expected"),
    [
        (0.0, 0, 0.5),  # new: 1 × (0.5 + 0)
        (0.0, 10, 1.0),  # 1 × (0.5 + 0.5 × 1)
        (0.0, 25, 1.0),  # capped at 10 reinforcements
        (0.0, 4, 0.7),  # 0.5 + 0.5 × 0.4
        (HALF_LIFE, 0, 0.25),  # one half-life: 0.5 × 0.5
        (2 * HALF_LIFE, 10, 0.25),  # two: 0.25 × 1
        (1.0, 0, 0.5 * math.exp(-0.05)),  # a day: 0.95123 × 0.5 = 0.47561
        (-3.0, 2, 0.6),  # a negative age counts as 0: 0.5 + 0.5 × 0.2
    ],
)
def test_strength_worked_by_hand(age_days: float, count: int, expected: float) -> None:
    assert edge_strength(age_days, count) == pytest.approx(expected)


def test_the_decay_rate_is_configurable() -> None:
    # rate 0.5 per day, 2 days: exp(-1) × 0.5 = 0.18394
    assert edge_strength(2.0, 0, decay_rate=0.5) == pytest.approx(0.18394, abs=1e-5)


def test_three_traversals_make_one_reinforcement() -> None:
    state = (0, 0)
    history = []
    for _ in range(7):
        state = reinforced(*state, threshold=3)
        history.append(state)
    assert history == [(0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: edge_strength(float("nan"), 0), "age_days must be a finite number, got nan"),
        (lambda: edge_strength(1.0, -1), "count must be >= 0, got -1"),
        (lambda: edge_strength(1.0, 0, decay_rate=0.0), "decay_rate must be .* > 0, got 0.0"),
        (lambda: reinforced(0, 0, threshold=0), "threshold must be >= 1, got 0"),
    ],
)
def test_bad_values_are_refused(call: object, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        call()  # type: ignore[operator]


@given(
    st.floats(0, 1e5),
    st.floats(0, 1e5),
    st.integers(0, 1000),
    st.integers(0, 1000),
)
def test_strength_is_in_unit_range_falls_with_age_and_grows_with_count(
    age: float, later: float, count: int, more: int
) -> None:
    s = edge_strength(age, count)
    assert 0.0 <= s <= 1.0
    assert edge_strength(age + later, count) <= s
    assert edge_strength(age, count + more) >= s
