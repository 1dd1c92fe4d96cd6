"""Base-level activation and the in-memory use log: numbers worked by hand."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from synapse_retriever.learning.usage import (
    UseTable,
    base_level,
    older_uses,
    recorded_uses,
    use_strengths,
    uses_from_edges,
)
from synapse_retriever.persistence import RecentEvent, UseColumns, UseRow

DAY = 86400.0
PERSONAL_NS, SHARED_NS = 1, 2
ONE = np.array([0.0, 1.0])  # namespace 1 only, factor 1


def _recorded(table: UseTable, nodes: list[int], namespace: int, at: float) -> list[UseRow]:
    """The rows one event of ``nodes`` at ``at`` writes, from what ``table`` holds."""
    event = RecentEvent(namespace, at, nodes)
    return recorded_uses(table.rows(namespace, nodes), [event], table.history)


def test_base_level_worked_by_hand() -> None:
    # uses 1, 4 and 9 days ago: 1 + 1/2 + 1/3 = 1.83333; ln = 0.60614
    assert base_level([9 * DAY, 6 * DAY, 1 * DAY], 10 * DAY) == pytest.approx(0.60614, abs=1e-5)
    # a use "now" counts as one second old: (1/86400)^-0.5 = 293.939; ln = 5.68337
    assert base_level([5.0], 5.0) == pytest.approx(5.68337, abs=1e-5)
    # uses in the future are ignored
    assert base_level([11 * DAY], 10 * DAY) == -math.inf


def test_older_uses_spread_evenly() -> None:
    # 3 uses between 4 and 16 days old, d = 0.5: 3 × (4 − 2) / (0.5 × 12) = 1.0
    assert older_uses(3, 4.0, 16.0) == pytest.approx(1.0)
    # all at one age: 2 × 4^-0.5 = 1.0
    assert older_uses(2, 4.0, 4.0) == pytest.approx(1.0)
    assert older_uses(0, 4.0, 16.0) == 0.0


def test_older_uses_at_any_decay() -> None:
    # d = 0.3, 2 uses between 1 and 9 days old: 2 × (9^0.7 − 1) / (0.7 × 8) = 1.30555
    assert older_uses(2, 1.0, 9.0, decay=0.3) == pytest.approx(1.30555, abs=1e-5)
    # d = 0.5 in closed form, 2 × 2 / (√9 + √1) = 1.0, as the general formula gives
    assert older_uses(2, 1.0, 9.0) == 1.0
    # no kept use to place them after (an infinite oldest age): nothing, at any decay
    for decay in (0.3, 0.5):
        assert older_uses(np.array([2]), np.array([np.inf]), np.array([9.0]), decay)[0] == 0.0


def test_a_row_whose_kept_uses_are_all_after_now_has_no_strength() -> None:
    # kept uses on days 5 and 6, two older ones since day 0; at day 4 none counts, and the
    # older ones have no kept use to be placed after (B = −inf, not NaN)
    recent = np.array([[5 * DAY, 6 * DAY], [1 * DAY, 5 * DAY]])
    for decay in (0.3, 0.5):
        strength = use_strengths(recent, np.array([4, 2]), np.array([0.0, DAY]), 4 * DAY, decay)
        # second row: day 1 counts (3 days old), day 5 does not: 3^-d
        assert strength.tolist() == pytest.approx([0.0, 3.0**-decay])


def test_use_strengths_take_integer_times_and_an_empty_history() -> None:
    # integer seconds: one use a day before now, 1^-0.5 = 1
    assert use_strengths(np.array([[0]]), np.array([1]), np.array([0]), DAY).tolist() == [1.0]
    # no time kept (history 0): the uses cannot be placed, strength 0
    empty = use_strengths(np.zeros((2, 0)), np.array([3, 0]), np.array([0.0, 0.0]), DAY)
    assert empty.tolist() == [0.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.lists(st.floats(0.0, 100.0), min_size=1, max_size=4),  # kept, in days
            st.integers(0, 5),  # older uses
            st.floats(0.0, 50.0),  # first use, days before the oldest kept
        ),
        min_size=1,
        max_size=6,
    ),
    now=st.floats(0.0, 120.0),
    decay=st.sampled_from([0.3, 0.5, 0.7]),
)
@example(rows=[([0.0], 1, 1e-12)], now=2.0, decay=0.3)  # a narrow span: cancellation
@example(rows=[([0.0], 1, 1e-09)], now=2.0, decay=0.5)
@example(rows=[([5.0, 6.0], 2, 1.0)], now=4.0, decay=0.3)  # every kept use after now
def test_use_strengths_match_a_row_by_row_reference(
    rows: list[tuple[list[float], int, float]], now: float, decay: float
) -> None:
    history = 4
    recent = np.full((len(rows), history), -np.inf)
    count, first, expected = [], [], []
    for r, (days, older, before) in enumerate(rows):
        times = sorted(day * DAY for day in days)
        recent[r, : len(times)] = times
        count.append(len(times) + older)
        first.append(times[0] - before * DAY)
        past = [t for t in times if t <= now * DAY]
        exact = sum(max((now * DAY - t) / DAY, 1 / DAY) ** -decay for t in past)
        if older and past:  # Petrov: spread evenly between the oldest kept and the first
            low = max((now * DAY - times[0]) / DAY, 1 / DAY)
            high = max((now * DAY - first[-1]) / DAY, low)
            if high == low:
                exact += older * low**-decay
            else:  # in 50 digits: the width can be tiny
                with localcontext() as context:
                    context.prec = 50
                    hi, lo, e = Decimal(high), Decimal(low), Decimal(1 - decay)
                    exact += float(older * (hi**e - lo**e) / (e * (hi - lo)))
        expected.append(exact)
    strength = use_strengths(recent, np.array(count), np.array(first), now * DAY, decay)
    assert strength.tolist() == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_a_node_keeps_its_latest_uses_and_approximates_the_rest() -> None:
    table = UseTable(history=2)
    for day in (0, 12, 14, 15):
        table.apply(_recorded(table, [7], 1, day * DAY))
    (row,) = _recorded(table, [7], 1, 16 * DAY)  # what the next use would write
    assert (row.uses, row.first, row.recent) == (5, 0.0, (15 * DAY, 16 * DAY))
    # at day 16: kept uses 2 and 1 days old: 2^-0.5 + 1 = 1.70711; the 2 older ones are
    # spread between 2 (the oldest kept) and 16 days old: 2 × (4 − 1.41421) / (0.5 × 14)
    # = 0.73880; exact would be 16^-0.5 + 4^-0.5 = 0.75
    b = table.base_levels(np.array([7]), 16 * DAY, ONE)
    assert b.tolist() == pytest.approx([math.log(1.70711 + 0.73880)], abs=1e-5)
    # the vectorized strengths agree with the scalar formula while every use is kept
    times = [0.0, 2 * DAY, 5 * DAY]
    strength = use_strengths(np.array([times]), np.array([3]), np.array([0.0]), 6 * DAY)
    assert math.log(strength[0]) == pytest.approx(base_level(times, 6 * DAY))


def test_namespaces_merge_by_their_factors() -> None:
    table = UseTable()
    a, b = 1, 2
    table.apply(_recorded(table, [a], SHARED_NS, 0.0))
    table.apply(_recorded(table, [a, a, b], PERSONAL_NS, 3 * DAY))  # duplicates count once
    table.remember([RecentEvent(SHARED_NS, 0.0, [a]), RecentEvent(PERSONAL_NS, 3 * DAY, [a, b])])
    table.add_events(PERSONAL_NS, 1)
    both = np.array([0.0, 1.0, 0.5])  # by namespace id: personal 1, shared 0.5
    # at day 4: personal 1 × 1^-0.5 + shared 0.5 × 4^-0.5 = 1.25
    assert table.base_levels(np.array([a]), 4 * DAY, both).tolist() == pytest.approx(
        [math.log(1.25)]
    )
    assert table.uses(np.array([a]), both).tolist() == [1.5]
    # only the personal event was a co-activation (a and b): 1 × 1, and 0.5 × 0
    assert table.uses(np.array([a]), both, together=True).tolist() == [1.0]
    assert table.events(both) == 1.0
    together, levels = table.levels(np.array([a, b]), 4 * DAY, both)  # both, from one read
    assert together.tolist() == [1.0, 1.0]  # a: 1 × 1 + 0.5 × 0; b: 1 × 1
    assert levels.tolist() == pytest.approx([math.log(1.25), math.log(1.0)])  # b: 1^-0.5
    assert table.base_levels(
        np.array([a, 99]), 4 * DAY, np.array([0.0, 0.0, 0.0, 1.0])
    ).tolist() == [
        -math.inf,
        -math.inf,
    ]
    assert table.recent_nodes(np.array([0.0, 1.0, 1.0])).tolist() == [a, b]
    assert table.recent_nodes(ONE, until=-1.0).tolist() == []
    assert len(table) == 3  # (personal, a), (personal, b), (shared, a)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.floats(0.0, 30.0), st.lists(st.integers(1, 3), min_size=1)),
        min_size=1,
        max_size=12,
    ),
    st.permutations([1, 2, 3, 4]),
    st.lists(st.floats(0.05, 3.0), min_size=4, max_size=4),
)
def test_namespaces_seen_in_another_order_give_the_same_bits(
    events: list[tuple[int, float, list[int]]], order: list[int], weights: list[float]
) -> None:
    # a reopened or batched store may give the namespaces other ids and meet them in
    # another order: the merged levels, uses and events are the same to the last bit
    def table_for(ids: dict[int, int]) -> tuple[UseTable, np.ndarray]:
        table = UseTable()
        for ns, at, nodes in sorted(events, key=lambda e: (ids[e[0]], e[1])):
            table.apply(_recorded(table, nodes, ids[ns], at * DAY))
            table.add_events(ids[ns], 1)
        factors = np.zeros(6)
        for ns, weight in zip([1, 2, 3, 4], weights, strict=True):
            factors[ids[ns]] = weight
        return table, factors

    first, f1 = table_for({ns: ns for ns in (1, 2, 3, 4)})
    second, f2 = table_for({ns: 1 + order.index(ns) for ns in (1, 2, 3, 4)})
    nodes = np.array([1, 2, 3])
    for table, factors in ((first, f1), (second, f2)):
        assert table.events(factors) == pytest.approx(sum(weights[ns - 1] for ns, _, _ in events))
    together1, levels1 = first.levels(nodes, 40 * DAY, f1)
    together2, levels2 = second.levels(nodes, 40 * DAY, f2)
    assert levels1.tobytes() == levels2.tobytes()
    assert together1.tobytes() == together2.tobytes()
    assert first.uses(nodes, f1).tobytes() == second.uses(nodes, f2).tobytes()
    assert first.events(f1) == second.events(f2)


def test_the_recent_window_forgets_old_events() -> None:
    table = UseTable(window=2)
    for i, node in enumerate([10, 11, 12]):
        table.apply(_recorded(table, [node], 1, i * DAY))
        table.remember([RecentEvent(1, i * DAY, [node])])
    assert table.recent_nodes(ONE).tolist() == [12, 11]
    assert table.events(ONE) == 0.0  # single-node uses are no co-activations


@given(st.lists(st.integers(0, 20), max_size=40), st.integers(0, 6))
def test_the_window_holds_the_latest_events_in_time_whatever_order_they_came_in(
    days: list[int], window: int
) -> None:
    # it held the last written: 50 uses dated in the past pushed the newest event out
    table = UseTable(window=window)
    table.remember([RecentEvent(1, day * DAY, [n]) for n, day in enumerate(days)])
    ranked = sorted(range(len(days)), key=lambda n: (days[n], n))  # time, then write order
    kept = ranked[max(0, len(ranked) - window) :] if window else []
    assert table.recent_nodes(ONE).tolist() == sorted(kept, key=lambda n: (-days[n], -n))


def test_uses_approximated_from_edges() -> None:
    edges = [(1, 2, 1, 3, 0.0, 5 * DAY), (1, 3, 1, 1, 2 * DAY, 2 * DAY)]
    rows, events, latest = uses_from_edges(edges, window=1)
    # node 1: the larger count (3), first use at the older creation, latest uses days 2 and 5
    assert rows[0] == UseRow(1, 1, 3, 3, 0.0, (2 * DAY, 5 * DAY))
    assert [(r.node, r.uses) for r in rows] == [(1, 3), (2, 3), (3, 1)]
    assert events == {1: 2}  # two distinct last reinforcements
    # the latest one, with its edge's nodes
    assert latest == [RecentEvent(namespace=1, at=5 * DAY, nodes=(1, 2))]


def test_rows_written_with_a_longer_history_keep_their_latest_times() -> None:
    table = UseTable(history=2)
    table.apply([UseRow(1, 5, 4, 0, 0.0, (1.0, 2.0, 3.0)), UseRow(1, 6, 1, 0, 9.0, (9.0,))])
    (five,) = _recorded(table, [5], 1, 4.0)
    (six,) = _recorded(table, [6], 1, 10.0)
    assert five.recent == (3.0, 4.0) and five.uses == 5  # 2.0 and 3.0 kept, then 4.0
    assert six.recent == (9.0, 10.0) and six.first == 9.0


use_rows = st.lists(
    st.builds(
        UseRow,
        st.sampled_from([1, 2, 5]),
        st.integers(1, 40),
        st.integers(1, 50),
        st.integers(0, 50),
        st.floats(0.0, 1e9),
        st.lists(st.floats(0.0, 1e9), max_size=12).map(lambda times: tuple(sorted(times))),
    ),
    max_size=70,
    unique_by=lambda row: (row.namespace, row.node),
)


@settings(max_examples=150, deadline=None)
@given(use_rows, use_rows)
def test_a_few_rows_set_one_by_one_are_the_rows_set_as_columns(
    first: list[UseRow], second: list[UseRow]
) -> None:
    by_rows, by_columns = UseTable(history=5), UseTable(history=5)
    for rows in (first, second):
        by_rows.apply(rows)  # one by one up to FEW_ROWS
        by_columns.apply(UseColumns.of(rows))
    assert by_rows._rows == by_columns._rows
    assert (
        by_rows._packed[: by_rows._rows].tobytes()
        == by_columns._packed[: by_columns._rows].tobytes()
    )
    for ns in (1, 2, 5):
        assert by_rows.rows(ns, range(41)) == by_columns.rows(ns, range(41))
