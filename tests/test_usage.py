"""Base-level activation and the in-memory use log: numbers worked by hand."""

from __future__ import annotations

import math

import pytest

from synapse_retriever.usage import NodeUse, UsageLog, base_level, older_uses

DAY = 86400.0
SHARED = {"shared": 1.0}


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


def test_a_node_keeps_its_latest_uses_and_approximates_the_rest() -> None:
    use = NodeUse()
    for day in (0, 12, 14, 15):
        use.add(day * DAY, history=2)
    assert (use.count, use.first, use.recent) == (4, 0.0, [14 * DAY, 15 * DAY])
    # at day 16: kept uses 2 and 1 days old: 2^-0.5 + 1 = 1.70711; the 2 older ones are
    # spread between 2 (the oldest kept) and 16 days old: 2 × (4 − 1.41421) / (0.5 × 14)
    # = 0.73880; exact would be 16^-0.5 + 4^-0.5 = 0.75
    assert use.strength(16 * DAY, 0.5) == pytest.approx(1.70711 + 0.73880, abs=1e-5)


def test_namespaces_merge_by_their_factors() -> None:
    log = UsageLog()
    log.record(["a"], "shared", 0.0)
    log.record(["a", "a", "b"], "personal", 3 * DAY)  # duplicates count once
    # at day 4: personal 1 × 1^-0.5 + shared 0.5 × 4^-0.5 = 1.25
    assert log.base_level("a", 4 * DAY, {"personal": 1.0, "shared": 0.5}) == pytest.approx(
        math.log(1.25)
    )
    assert log.uses("a", {"personal": 1.0, "shared": 0.5}) == 1.5
    # only the personal event was a co-activation (a and b): 1 × 1, and 0.5 × 0
    assert log.uses("a", {"personal": 1.0, "shared": 0.5}, together=True) == 1.0
    assert log.events({"personal": 1.0, "shared": 0.5}) == 1.0
    assert log.base_level("a", 4 * DAY, {"ephemeral": 1.0}) == -math.inf
    assert log.recent_nodes({"personal": 1.0, "shared": 1.0}) == ["a", "b"]
    assert log.recent_nodes(SHARED, until=-1.0) == []
    assert len(log) == 2


def test_the_recent_window_forgets_old_events() -> None:
    log = UsageLog(window=2)
    for i, node in enumerate("xyz"):
        log.record([node], "shared", i * DAY)
    assert log.recent_nodes(SHARED) == ["z", "y"]
    assert log.events(SHARED) == 0  # single-node uses are no co-activations


def test_a_log_rebuilt_from_edges() -> None:
    edges = [
        ("a", "b", "shared", 3, 0.0, 5 * DAY),
        ("a", "c", "shared", 1, 2 * DAY, 2 * DAY),
    ]
    log = UsageLog.from_edges(edges)
    # a: the larger count (3), first use at the older creation, latest uses days 2 and 5
    assert log.uses("a", SHARED) == 3.0 and log.uses("c", SHARED) == 1.0
    assert log.events(SHARED) == 2.0  # two distinct last reinforcements
    assert log.recent_nodes(SHARED) == ["a", "b", "c"]
