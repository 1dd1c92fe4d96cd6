"""Forgetting: hand-worked numbers for every formula in decay.py, and its invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever import SynapseConfig
from synapse_retriever.learning.decay import (
    MAX_COUNT,
    PairEvent,
    canonical_pairs,
    clamped_times,
    decayed_weight,
    effective_weight,
    learned_half_life,
    pair_keys,
    pruned_at,
    reinforce_edges,
    reinforced_weight,
)
from synapse_retriever.persistence.rows import (
    EDGE_COLUMNS,
    EMPTY_EDGES,
    EdgeRow,
    edge_rows,
    rows_array,
)

DAY = 86_400.0


def test_learned_half_life_twice_one_day_apart() -> None:
    # count 2: ratio = ln(1.2) = 0.182322; learned = 3 + 117 × 0.182322 / 1.182322 = 21.0421
    # confidence = exp(−ln2 × 1 / 30) = 0.977160
    # half_life = 0.022840 × 30 + 0.977160 × 21.0421 = 0.6852 + 20.5615 = 21.2467
    assert learned_half_life(2, 1.0, 30.0) == pytest.approx(21.2467, abs=1e-3)


def test_learned_half_life_twice_sixty_days_apart() -> None:
    # confidence = exp(−ln2 × 60 / 30) = 0.25
    # half_life = 0.75 × 30 + 0.25 × 21.0421 = 22.5 + 5.2605 = 27.7605
    assert learned_half_life(2, 60.0, 30.0) == pytest.approx(27.7605, abs=1e-3)


def test_learned_half_life_same_timestamp_has_full_confidence() -> None:
    # gap 0: confidence 1, half_life = learned; count 10: ratio = ln 2 = 0.693147
    # learned = 3 + 117 × 0.693147 / 1.693147 = 3 + 47.898 = 50.898
    assert learned_half_life(10, 0.0, 30.0) == pytest.approx(50.898, abs=1e-3)


def test_learned_half_life_is_clamped_to_bounds_widened_by_the_default() -> None:
    # ephemeral default 1 day: the clamp is [1, 120], so a long idle gap falls back to 1
    # confidence = exp(−ln2 × 30 / 1) ≈ 9.3e-10: half_life ≈ 1.0
    assert learned_half_life(2, 30.0, 1.0) == pytest.approx(1.0, abs=1e-6)
    # count 10**9 at gap 0: learned → 120 (ratio/(1+ratio) → 1), never above
    assert learned_half_life(10**9, 0.0, 30.0) <= 120.0


def test_decay_is_half_per_half_life() -> None:
    # 0.8 × exp(−ln2 / 30 × 60) = 0.8 × 0.25 = 0.2
    assert decayed_weight(0.8, 30.0, 60.0) == pytest.approx(0.2)
    assert decayed_weight(0.8, 30.0, -5.0) == 0.8  # a read before the last reinforcement


def test_pruned_at_147_2_days_for_w0_0_3_and_30_day_half_life() -> None:
    # 0.3 × 2^(−d / 30) = 0.01  ⇔  d = 30 × log2(30) = 30 × 4.906891 = 147.2067 days
    assert 30 * math.log2(30) == pytest.approx(147.2067, abs=1e-4)
    assert effective_weight(0.3, 30.0, 147.20, count=1) == pytest.approx(0.0100, abs=1e-5)
    assert effective_weight(0.3, 30.0, 147.21, count=1) == 0.0
    # the same day as a time: last reinforced at day 10, pruned from day 157.2067
    assert pruned_at(0.3, 30.0, 10 * DAY, count=1) / DAY == pytest.approx(157.2067, abs=1e-4)


def test_pruned_at_is_never_for_a_floored_edge_and_always_below_the_threshold() -> None:
    assert pruned_at(0.5, 30.0, 0.0, count=5) == math.inf  # LTP holds it at 0.2
    assert pruned_at(0.5, 30.0, 0.0, count=5, ltp=False) < math.inf  # ephemeral: decays
    assert pruned_at(0.005, 30.0, 0.0, count=1) == -math.inf  # 0.005 < 0.01 already
    assert pruned_at(0.0, 30.0, 0.0, count=1) == -math.inf  # a deleted edge
    # a floor under the threshold does not save it: 0.3 × 2^(−d/30) = 0.05, d = 77.5 days
    assert pruned_at(0.3, 30.0, 0.0, count=9, ltp_floor=0.01, prune_threshold=0.05) / DAY == (
        pytest.approx(30 * math.log2(6))
    )


def test_ltp_floor_needs_count_5_w0_0_2_and_a_non_ephemeral_namespace() -> None:
    # 365 days at 30 days: 0.5 × 2^(−12.17) ≈ 1.1e-4, floored at 0.2 when proven
    assert effective_weight(0.5, 30.0, 365.0, count=5) == 0.2
    assert effective_weight(0.5, 30.0, 365.0, count=4) == 0.0  # not proven: pruned
    assert effective_weight(0.5, 30.0, 365.0, count=5, ltp=False) == 0.0  # ephemeral
    assert effective_weight(0.15, 30.0, 365.0, count=9) == 0.0  # w0 below the floor
    # the floor never lowers a weight: 0.5 × 2^(−1) = 0.25 > 0.2
    assert effective_weight(0.5, 30.0, 30.0, count=5) == pytest.approx(0.25)


def test_an_activation_count_saturates_at_max_count() -> None:
    event = PairEvent(namespace="personal", namespace_id=1, pairs=[(1, 2)], names=["a", "b"],
                      node_ids=[1, 2], at=DAY, explicit=True, delta=0.3)  # fmt: skip
    below = EdgeRow(5, 1, 1, 2, 0.5, MAX_COUNT - 1, 30.0, 0.0, 0.0)
    _, stepped = reinforce_edges(rows_array([below]), [event], SynapseConfig())
    (once,) = edge_rows(stepped)
    _, stepped = reinforce_edges(rows_array([below]), [event, event._replace(at=2 * DAY)],
                                 SynapseConfig())  # fmt: skip
    (twice,) = edge_rows(stepped)
    assert MAX_COUNT == 2_147_483_647  # the largest count in 32 bits
    assert once.activation_count == twice.activation_count == MAX_COUNT
    assert twice.weight == 1.0  # the edge still learns: 0.5 decayed by a day, + 0.3, + 0.3


def test_reinforced_weight_caps_at_one() -> None:
    assert reinforced_weight(0.3, 0.3) == pytest.approx(0.6)
    assert reinforced_weight(0.9, 0.6) == 1.0


@given(
    w0=st.floats(0.0, 1.0),
    half_life=st.floats(1.0, 120.0),
    age=st.floats(0.0, 10_000.0),
    count=st.integers(1, 100),
)
def test_effective_weight_stays_in_unit_interval_and_never_grows(
    w0: float, half_life: float, age: float, count: int
) -> None:
    weight = effective_weight(w0, half_life, age, count=count)
    assert 0.0 <= weight <= max(w0, 0.2)
    later = effective_weight(w0, half_life, age + 1.0, count=count)
    assert later <= weight


@given(
    w0=st.floats(0.0, 1.0),
    half_life=st.floats(1.0, 400.0),
    count=st.integers(1, 9),
    ltp=st.booleans(),
    offset=st.floats(-1e7, 1e7),
)
def test_an_edge_is_live_exactly_until_its_prune_time(
    w0: float, half_life: float, count: int, ltp: bool, offset: float
) -> None:
    last = 1.7e9
    when = pruned_at(w0, half_life, last, count=count, ltp=ltp)
    at = (when if math.isfinite(when) else last) + offset
    weight = effective_weight(w0, half_life, (at - last) / DAY, count=count, ltp=ltp)
    if abs(at - when) > 1e-3:  # rounding may differ at the boundary itself (graph.live)
        assert (weight > 0) == (at < when)


@given(count=st.integers(1, 10_000), gap=st.floats(0.0, 10_000.0))
def test_learned_half_life_stays_in_bounds(count: int, gap: float) -> None:
    for default in (1.0, 30.0, 60.0):
        half_life = learned_half_life(count, gap, default)
        assert min(3.0, default) <= half_life <= 120.0


def _pair_events(draw: st.DrawFn) -> list[PairEvent]:
    """Events of 2 to 5 of 6 nodes, in one or two namespaces, at times that may go back."""
    events = []
    for _ in range(draw(st.integers(1, 6))):
        nodes = draw(st.lists(st.integers(1, 6), min_size=2, max_size=5, unique=True))
        namespace = draw(st.sampled_from(["personal", "ephemeral"]))
        names = [f"n{node}" for node in nodes]
        events.append(
            PairEvent(
                namespace=namespace,
                namespace_id=1 if namespace == "personal" else 2,
                pairs=canonical_pairs(names, nodes),
                names=names,
                node_ids=nodes,
                at=draw(st.sampled_from([0.0, DAY, 40 * DAY, 200 * DAY])),
                explicit=True,
                delta=draw(st.sampled_from([0.3, 0.15, 0.6])),
            )
        )
    return events


@given(data=st.data())
def test_clamped_times_move_each_event_to_the_latest_reinforcement_of_its_pairs(
    data: st.DataObject,
) -> None:
    events = _pair_events(data.draw)
    keys = sorted({(e.namespace_id, a, b) for e in events for a, b in e.pairs})
    stored = data.draw(st.lists(st.sampled_from([0.0, 30 * DAY, 300 * DAY]), min_size=len(keys),
                                max_size=len(keys)))  # fmt: skip
    last = dict(zip(keys, stored, strict=True))
    latest, expected = dict(last), []
    for event in events:  # the definition, event by event
        at = max([event.at] + [latest[(event.namespace_id, a, b)] for a, b in event.pairs])
        latest.update({(event.namespace_id, a, b): at for a, b in event.pairs})
        expected.append(at)
    assert clamped_times(last, events) == expected
    first = events[0]
    other = first._replace(pairs=[(98, 99)], at=math.nan)  # not a time, between two
    assert clamped_times({}, [first, other, first._replace(at=first.at - 1)])[2] == first.at
    assert clamped_times({}, sorted(events, key=lambda e: e.at)) == sorted(e.at for e in events)


@given(data=st.data())
def test_a_batch_of_events_leaves_the_state_its_events_leave_one_at_a_time(
    data: st.DataObject,
) -> None:
    config = SynapseConfig()
    events = _pair_events(data.draw)
    events = [
        event._replace(at=at) for event, at in zip(events, clamped_times({}, events), strict=True)
    ]
    inserted, updated = reinforce_edges(EMPTY_EDGES, events, config)
    assert updated.shape == (0, len(EDGE_COLUMNS))
    held: dict[tuple[int, int, int], EdgeRow] = {}
    for number, event in enumerate(events):
        new, old = reinforce_edges(rows_array(list(held.values())), [event], config)
        for row in edge_rows(new):
            row = row._replace(id=100 + number * 10 + len(held))
            held[(row.namespace, row.a, row.b)] = row
        for row in edge_rows(old):
            held[(row.namespace, row.a, row.b)] = row
    one_at_a_time = {key: row._replace(id=0) for key, row in held.items()}
    assert {(row.namespace, row.a, row.b): row for row in edge_rows(inserted)} == one_at_a_time


@given(data=st.data())
def test_pair_keys_hold_each_pair_once_in_order_of_first_occurrence_with_its_ranks(
    data: st.DataObject,
) -> None:
    events = _pair_events(data.draw)
    occurrences = [(e.namespace_id, a, b) for e in events for a, b in e.pairs]
    keys = list(dict.fromkeys(occurrences))  # the definition
    got = pair_keys(events)
    assert [tuple(key) for key in got.keys.tolist()] == keys
    assert got.key_of.tolist() == [keys.index(o) for o in occurrences]
    assert got.rank.tolist() == [occurrences[:i].count(o) for i, o in enumerate(occurrences)]


def test_stored_rows_are_found_by_pair_in_any_order_and_rows_not_asked_are_ignored() -> None:
    config = SynapseConfig()
    big = 2**31 - 1  # the largest node id the in-memory graph holds
    event = PairEvent(namespace="personal", namespace_id=3, pairs=[(big, 5), (5, big - 1)],
                      names=["a", "b", "c"], node_ids=[big, 5, big - 1], at=DAY, explicit=True,
                      delta=0.3)  # fmt: skip
    rows = [
        EdgeRow(11, 3, 5, big - 1, 0.6, 2, 20.0, 0.0, 0.0),
        EdgeRow(12, 4, big, 5, 0.9, 3, 25.0, 0.0, 0.0),  # another namespace: not asked
        EdgeRow(10, 3, big, 5, 0.3, 1, 30.0, 0.0, 0.0),
    ]
    inserted, updated = reinforce_edges(rows_array(rows), [event], config)
    assert len(inserted) == 0
    stepped = {row.id: row for row in edge_rows(updated)}
    assert sorted(stepped) == [10, 11]
    for stored in (rows[0], rows[2]):  # each stepped from its own row: + 0.3 on a decayed w
        decayed = effective_weight(
            stored.weight, stored.half_life_days, 1.0, count=stored.activation_count
        )
        expected = min(1.0, float(decayed) + 0.3)
        assert stepped[stored.id].weight == pytest.approx(expected)
        assert stepped[stored.id].activation_count == stored.activation_count + 1


def test_pair_keys_of_one_event_that_repeats_a_pair_hold_it_once() -> None:
    event = PairEvent(namespace="personal", namespace_id=1, pairs=[(7, 8), (7, 9), (7, 8)],
                      names=["a", "b", "c"], node_ids=[7, 8, 9], at=0.0, explicit=True,
                      delta=0.3)  # fmt: skip
    keys, key_of, rank = pair_keys([event])
    assert (keys.tolist(), key_of.tolist(), rank.tolist()) == (
        [[1, 7, 8], [1, 7, 9]],
        [0, 1, 0],
        [0, 0, 1],
    )
