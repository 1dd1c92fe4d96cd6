"""The ACT-R recall rule: hand-worked activations and the invariants of the preset."""

from __future__ import annotations

import dataclasses
import math
import random
import sqlite3
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import SynapseConfig, SynapseStore
from synapse_retriever.errors import InvalidTypeError, InvalidValueError
from synapse_retriever.recall.actr import (
    NodeValues,
    RankedNames,
    StrongestSources,
    intermediates,
    lift_strengths,
    swap,
)

DAY = 86400.0


def test_lift_strengths_worked_by_hand() -> None:
    # N = 20 events; j used 5 times, i 4 times, together 3 times: lift = 3 × 20 / 20 = 3,
    # S = ln 3 = 1.09861; h (used 10 times) met i once: 1 × 20 / 40 = 0.5 < 1, S = 0
    # (never negative); mean over the 2 sources: 1.09861 / 2 = 0.54931
    j, h, i = 1, 2, 3
    hits, nodes = np.array([j, h]), np.array([j, h, i])
    sources = [(np.array([i]), np.array([3.0])), (np.array([i]), np.array([1.0]))]
    s = lift_strengths(hits, sources, nodes, np.array([5.0, 10.0, 4.0]), 20)
    assert s.tolist() == pytest.approx([0.0, 0.0, 0.54931], abs=1e-5)
    # j is a hit too: its own row is left out and it is averaged over the other hit only
    sources = [(np.array([h]), np.array([3.0])), (np.array([j]), np.array([3.0]))]
    # S_jh = ln(3 × 20 / 50) = 0.18232, over the weight of the other source (1)
    s = lift_strengths(hits, sources, nodes, np.array([5.0, 10.0, 4.0]), 20)
    assert s.tolist() == pytest.approx([0.18232, 0.18232, 0.0], abs=1e-5)
    empty = (np.zeros(0, np.int64), np.zeros(0))
    assert lift_strengths(np.array([-1]), [empty], np.zeros(0, np.int64), np.zeros(0), 10).size == 0
    # j never used (n_j = 0): no strength from it
    s = lift_strengths(np.array([j]), [(np.array([i]), np.array([1.0]))], np.array([j, i]),
                       np.array([0.0, 1.0]), 10)  # fmt: skip
    assert s.tolist() == [0.0, 0.0]


def test_node_values_look_up_by_name() -> None:
    values = NodeValues(
        np.array([3, 1]), np.array([0.5, 2.0]), ["", "a", "", "c"], {"a": 1, "c": 3}
    )
    assert dict(values) == {"a": 2.0, "c": 0.5}
    assert "b" not in values and values.get("b", -1.0) == -1.0


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), max_size=40),
    st.lists(st.integers(-45, 45), max_size=6),
)
def test_ranked_names_read_in_any_order_rank_by_value_then_name(
    values: list[float], reads: list[int]
) -> None:
    names = ["", *(f"n{k:02d}" for k in random.Random(len(values)).sample(range(99), 40))]
    nodes = np.arange(1, len(values) + 1)
    ranked = RankedNames(nodes, np.asarray(values, np.float64), names)  # in any order
    pairs = sorted(zip(values, nodes.tolist(), strict=True), key=lambda v: (-v[0], names[v[1]]))
    want = [names[n] for _, n in pairs]
    for at in reads:  # partial reads first: a slice or an index resolves only what it needs
        if -len(want) <= at < len(want):
            assert ranked[at] == want[at]
        assert ranked[:at] == want[:at]
        assert ranked.values(max(at, 0)) == [v for v, _ in pairs][: max(at, 0)]
    assert list(ranked) == want and len(ranked) == len(want)


def test_ranked_names_refuse_nan_and_rank_infinities() -> None:
    names = ["", "a", "b", "c"]
    with pytest.raises(InvalidValueError, match="NaN"):
        RankedNames(np.array([1, 2]), np.array([1.0, np.nan]), names)
    ranked = RankedNames(np.array([1, 2, 3]), np.array([-np.inf, np.inf, 0.0]), names)
    assert list(ranked) == ["b", "c", "a"] and ranked.values(-1) == []
    assert list(RankedNames(np.array([], np.int64), np.array([]), names)) == []


def test_a_path_starts_at_the_hit_most_co_used_with_the_node_ties_to_the_earlier_hit() -> None:
    row = (np.array([5, 6]), np.array([2.0, 1.0]))
    sources = [(np.array([6]), np.array([3.0])), row, row]
    paths = StrongestSources(["j", "k", "m"], sources, np.array([5, 6]), *NAMES)
    assert paths["five"] == ("k", "five")  # k and m: 2 co-uses each, k comes first
    assert paths["six"] == ("j", "six")  # j: 3 co-uses
    assert "seven" not in paths


def test_paths_through_a_step_are_looked_up_first_and_listed_after_the_found_ones() -> None:
    # the nodes reached in two steps: their path runs through the node between
    row = (np.array([5, 6]), np.array([2.0, 1.0]))
    through = {"seven": "five", "six": "five", "eight": "j"}
    paths = StrongestSources(["j"], [row], np.array([5, 6, 7]), *NAMES, through)
    assert paths["five"] == ("j", "five")  # found from the co-use counts
    assert paths["six"] == ("j", "five", "six")  # through five: looked up first
    assert paths["eight"] == ("j", "eight")  # the step is a hit: the path starts there
    assert list(paths) == ["five", "six", "seven", "eight"] and len(paths) == 4
    lost = StrongestSources(["j"], [row], np.array([5]), *NAMES, {"seven": "x"})
    assert "seven" not in lost  # a step no hit co-occurred with: no path


NAMES = (["", "", "", "", "", "five", "six", "seven"], {"five": 5, "six": 6, "seven": 7})


def test_swap_needs_to_beat_the_victim_plus_the_bonus() -> None:
    hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    # victims by A + 2: d (−6 + 2 = −4), c (−1 + 2 = 1), b (0 + 2 = 2); a is fixed
    activation = {"a": 5.0, "b": 0.0, "c": -1.0, "x": 1.5, "y": 0.9, "z": 3.0}
    out = swap(hits, activation, ["z", "x", "y"], keep_bonus=2.0)
    # z (3.0) beats d (−4), x (1.5) beats c (1.0), y (0.9) does not beat b (2.0);
    # z, the stronger, takes the better of the two slots (c's), x takes d's
    assert [(h.id, h.score, h.origin, h.displaced) for h in out] == [
        ("a", 0.9, "vector", None),
        ("b", 0.8, "vector", None),
        ("z", 0.7, "injected", "c"),
        ("x", 0.6, "injected", "d"),
    ]
    # a larger bonus protects c: only z gets in
    out = swap(hits, activation, ["z", "x", "y"], keep_bonus=2.6)
    assert [h.id for h in out] == ["a", "b", "c", "z"]
    # unresolvable candidates never cost a slot; the cap holds
    out = swap(hits, activation, ["z", "x"], resolvable={"x"}, max_inject=1)
    assert [h.id for h in out] == ["a", "b", "c", "x"]


def test_swap_keeps_the_token_budget() -> None:
    hits = [("a", 0.9), ("b", 0.5)]
    cost = {"a": 10, "b": 5, "big": 50, "small": 3}.__getitem__
    out = swap(hits, {"big": 9.0, "small": 1.0}, ["big", "small"], cost=cost)
    assert [h.id for h in out] == ["a", "small"]


def test_the_store_computes_base_level_plus_association() -> None:
    # the recency prior: the unassociated nodes are candidates too, to be worked by hand
    store = SynapseStore(":memory:", config=SynapseConfig.recency())
    store.reinforce(["jwt", "keys"], namespace="shared", at=0)
    store.reinforce(["jwt", "keys"], namespace="shared", at=DAY)
    store.reinforce(["old", "other"], namespace="shared", at=0)  # an unrelated co-activation
    store.use(["readme"], namespace="shared", at=2 * DAY)  # a use, no co-activation
    plan = store.plan([("jwt", 0.9), ("login", 0.5), ("docs", 0.4)], at=4 * DAY,
                      active_namespace="shared")  # fmt: skip
    a = plan.activation
    # keys: uses 4 and 3 days ago: B = ln(0.5 + 0.57735) = 0.07450; lift from jwt: N = 3
    # co-activations, c = 2, n_jwt = n_keys = 2: ln(2 × 3 / 4) = 0.40547; source weights are the
    # scores over the first: 1, 0.5/0.9, 0.4/0.9 (sum 2), login and docs never used:
    # S = 1 × 0.40547 / 2 = 0.20273; A = 0.07450 + 1.0 × 0.20273 = 0.27723
    assert a["keys"] == pytest.approx(0.27723, abs=1e-5)
    # readme: one use 2 days ago, B = ln 2^-0.5 = −0.34657, no association
    assert a["readme"] == pytest.approx(-0.34657, abs=1e-5)
    # never used: unused_base, raised by the memory's staleness: its latest event (readme's
    # use) is 2 days old: −6 + 1.0 × ln(1 + 2) = −4.90139
    assert a["login"] == pytest.approx(-4.90139, abs=1e-5)
    assert a["old"] == pytest.approx(math.log(0.5), abs=1e-9)  # one use 4 days ago
    # every candidate beats the weakest movable hit's −4.90139 + 3 = −1.90139
    assert plan.candidates == ["keys", "readme", "old", "other"]
    hits = plan.inject()
    assert [(h.id, h.origin) for h in hits] == [
        ("jwt", "vector"),
        ("keys", "injected"),
        ("readme", "injected"),
    ]
    assert hits[1].path == ("jwt", "keys")
    store.close()


def test_a_memory_that_stopped_learning_trusts_never_used_hits_more() -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)  # the memory's only event
    hits = [("a", 0.9), ("x", 0.5)]  # x was never used
    # day 1: b has B = ln 1^-0.5 = 0, no lift (N = 1, c = n_a = n_b = 1: ln 1 = 0): A = 0;
    # x defends at −6 + ln(1 + 1) + 3 = −2.30685: b takes its slot
    assert [h.id for h in store.recall(hits, at=DAY)] == ["a", "b"]
    # day 30: b has B = ln 30^-0.5 = −1.70060; x defends at −6 + ln 31 + 3 = 0.43399: x stays
    assert store.plan(hits, at=30 * DAY).activation["x"] == pytest.approx(-2.56601, abs=1e-5)
    assert [h.id for h in store.recall(hits, at=30 * DAY)] == ["a", "x"]
    # without the staleness term x defends at −3 and b (−1.70060) still takes the slot
    fixed = SynapseStore(":memory:", config=SynapseConfig.actr(stale_unused=0.0))
    fixed.reinforce(["a", "b"], at=0)
    assert [h.id for h in fixed.recall(hits, at=30 * DAY)] == ["a", "b"]


def test_the_default_swaps_at_most_two_nodes_in_as_published() -> None:
    # the published promise: at most 2 absent nodes swapped in, at least one original kept
    assert SynapseConfig().recall.max_inject == 2
    assert SynapseConfig.actr().recall.max_inject == 2  # the preset is the default
    assert SynapseConfig.actr(max_inject=3).recall.max_inject == 3  # a third slot, on request


def test_recall_swaps_in_at_most_two_of_three_qualifying_nodes_by_default() -> None:
    hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]  # never used
    # the recency prior (x, y and z share no edge with a hit), at the default cap and at 3
    for config, swaps in ((SynapseConfig.recency(), 2), (SynapseConfig.recency(max_inject=3), 3)):
        with SynapseStore(":memory:", config=config) as store:
            store.reinforce(["x", "y", "z"], at=0)
            # a day later x, y and z have A = ln 1^-0.5 + 0 = 0 (lift: ln(1 × 1 / (1 × 1)) = 0);
            # each movable hit defends at −6 + ln(1 + 1) + 3 = −2.30685: all three qualify
            assert sorted(store.plan(hits, at=DAY).candidates) == ["x", "y", "z"]
            out = store.recall(hits, at=DAY)
            assert [h.origin for h in out].count("injected") == swaps
            assert len(out) == len(hits) and out[0].id == "a"


def test_actr_preset_is_the_default_and_the_published_preset_differs() -> None:
    assert SynapseConfig() == SynapseConfig.actr() == SynapseConfig.preset("actr")
    default = SynapseConfig()
    assert (default.rule, default.recall.seeds, default.recall.max_inject) == ("actr", 1, 2)
    published = SynapseConfig.published()
    assert published == SynapseConfig.preset("published")
    assert (published.rule, published.recall.seeds, published.recall.max_inject) == (
        "published",
        3,
        2,
    )
    # the published method's spreading and injection constants
    assert (published.spreading.spread_rate, published.spreading.hub_degree) == (0.6, 50)
    assert (published.recall.boost, published.recall.inject_threshold) == (0.3, 0.15)
    # the presets differ only in the rule: learning, spreading and operations are shared
    differing = {
        field.name
        for field in dataclasses.fields(SynapseConfig)
        if getattr(default, field.name) != getattr(published, field.name)
    }
    assert differing == {"recall"}
    assert (default.recall.max_inject, published.recall.max_inject) == (2, 2)  # both swap 2
    # overrides win over the preset's values
    assert SynapseConfig.published(seeds=1).recall.seeds == 1
    assert SynapseConfig.actr(max_inject=0).recall.max_inject == 0
    assert SynapseConfig.published(max_inject=3).recall.max_inject == 3
    with pytest.raises(ValueError, match="preset"):
        SynapseConfig.preset("best")
    with pytest.raises(ValueError, match="keep_bonus is a constant of the actr rule"):
        SynapseConfig.published(keep_bonus=2.0)  # the rule's type says which constants apply
    magic: Any = "magic"
    with pytest.raises(TypeError, match="recall must be an ActrRule or a PublishedRule"):
        SynapseConfig(recall=magic)


events = st.lists(
    st.tuples(st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=4), st.floats(0, 9)),
    max_size=12,
)
hit_lists = st.lists(st.sampled_from("abcdefghijklm"), min_size=0, max_size=10, unique=True)


configs = st.sampled_from(
    [SynapseConfig(), SynapseConfig.actr(association_hops=1), SynapseConfig.recency()]
)


def _recall(
    history: list[tuple[list[str], float]],
    ids: list[str],
    config: SynapseConfig | None = None,
) -> list[str]:
    store = SynapseStore(":memory:", config=config or SynapseConfig())
    at = 0.0
    for nodes, gap in history:
        at += gap * DAY
        if len(set(nodes)) > 1:
            store.reinforce(nodes, at=at)
        else:
            store.use(nodes, at=at)
    hits = [(node, 1.0 - i / 20) for i, node in enumerate(ids)]
    result = [h.id for h in store.recall(hits, at=at + DAY)]
    store.close()
    return result


@settings(max_examples=60, deadline=None)
@given(events, hit_lists, configs)
def test_recall_never_grows_the_result_and_keeps_an_original(
    history: list[tuple[list[str], float]], ids: list[str], config: SynapseConfig
) -> None:
    result = _recall(history, ids, config)
    assert len(result) == len(ids)
    assert len(set(result)) == len(result)
    if ids:
        assert result[0] == ids[0]  # the first hit never moves: at least one original stays
        assert sum(node in ids for node in result) >= len(ids) - 2  # at most 2 swaps


@settings(max_examples=60, deadline=None)
@given(events, hit_lists, st.sampled_from([(1, 0.0), (1, 0.5), (1, 2.0), (2, 0.5), (2, 2.0)]))
def test_one_hop_or_a_minimum_association_injects_only_nodes_with_an_edge_to_a_hit(
    history: list[tuple[list[str], float]], ids: list[str], gate: tuple[int, float]
) -> None:
    # one hop, or any min_association above 0 (a node two steps away has no lift)
    hops, minimum = gate
    config = SynapseConfig.actr(association_hops=hops, min_association=minimum)
    store = SynapseStore(":memory:", config=config)
    at = 0.0
    for nodes, gap in history:
        at += gap * DAY
        if len(set(nodes)) > 1:
            store.reinforce(nodes, at=at)
        else:
            store.use(nodes, at=at)
    hits = [(node, 1.0 - i / 20) for i, node in enumerate(ids)]
    plan = store.plan(hits, at=at + DAY)
    for hit in plan.inject():
        if hit.origin == "injected":
            assert any(store.weight(hit.id, node, at=at + DAY) > 0 for node in ids)
            # and its path starts at a hit it was used with
            assert hit.path[0] in ids and hit.path[1] == hit.id
    store.close()


@settings(max_examples=30, deadline=None)
@given(hit_lists, configs)
def test_a_cold_store_is_the_identity(ids: list[str], config: SynapseConfig) -> None:
    hits = [(node, 1.0 - i / 20) for i, node in enumerate(ids)]
    with SynapseStore(":memory:", config=config) as store:
        result = store.recall(hits, at=0)
    assert [(h.id, h.score, h.origin) for h in result] == [(n, s, "vector") for n, s in hits]


def test_unused_base_is_the_floor_of_every_activation() -> None:
    assert math.isfinite(SynapseConfig.actr().recall.unused_base)


def test_a_reopened_store_keeps_its_use_history(tmp_path: object) -> None:
    path = f"{tmp_path}/synapses.db"
    hits = [("jwt", 0.9), ("login", 0.5)]
    config = SynapseConfig.recency()  # readme, used alone, is a candidate too
    with SynapseStore(path, config=config) as store:
        store.reinforce(["jwt", "keys"], namespace="shared", at=0)
        store.reinforce(["jwt", "keys"], namespace="shared", at=DAY)
        store.use(["readme"], namespace="shared", at=2 * DAY)
        before = dict(store.plan(hits, at=4 * DAY, active_namespace="shared").activation)
    with SynapseStore(path, config=config) as store:
        after = dict(store.plan(hits, at=4 * DAY, active_namespace="shared").activation)
        assert [h.id for h in store.recall(hits, at=4 * DAY, active_namespace="shared")] == [
            "jwt",
            "keys",
        ]
    # keys: uses 4 and 3 days old, B = ln(0.5 + 0.57735) = 0.07450; lift ln(2 × 2 / 4) = 0;
    # readme: one use alone 2 days old, B = ln 2^-0.5 = -0.34657; both as before the restart
    assert after == before
    assert after["keys"] == pytest.approx(0.07450, abs=1e-5)
    assert after["readme"] == pytest.approx(-0.34657, abs=1e-5)


def test_a_file_of_schema_1_gets_its_uses_approximated_from_its_edges(tmp_path: object) -> None:
    path = f"{tmp_path}/synapses.db"
    with SynapseStore(path, config=SynapseConfig.actr()) as store:
        store.reinforce(["jwt", "keys"], namespace="shared", at=0)
        store.reinforce(["jwt", "keys"], namespace="shared", at=DAY)
    db = sqlite3.connect(path)  # back to what version 1 of the schema wrote
    db.executescript(
        "DROP TRIGGER events_seen; ALTER TABLE events DROP COLUMN seen; "
        "DROP TABLE node_uses; DROP TABLE namespace_events; DROP TABLE recent_uses; "
        "DROP TRIGGER edges_log_insert; DROP TRIGGER edges_log_update; "
        "DROP TRIGGER edges_log_delete; "
        "DROP TABLE edge_log; DROP TABLE use_log; DELETE FROM meta WHERE key = 'log_horizon'; "
        "CREATE INDEX edges_by_version ON edges (version); "
        "CREATE TABLE removed (version INTEGER NOT NULL, id INTEGER NOT NULL, "
        "PRIMARY KEY (version, id)) WITHOUT ROWID; PRAGMA user_version = 1;"
    )
    db.close()
    with SynapseStore(path, config=SynapseConfig.actr()) as store:
        energy = store.plan([("jwt", 0.9), ("login", 0.5)], at=4 * DAY, active_namespace="shared")
        keys = energy.activation["keys"]
    # from the one edge: 2 uses (its count), the latest exact (3 days old: 0.57735), the
    # other spread between 3 and 4 days old (its creation): 1 × (2 − 1.73205) / 0.5 =
    # 0.53590 instead of 0.5; B = ln 1.11325 = 0.10728
    assert keys == pytest.approx(0.10728, abs=1e-5)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    assert db.execute("SELECT events FROM namespace_events").fetchall() == [(1,)]
    db.close()


def test_every_store_records_uses_whatever_its_rule() -> None:
    # the rule is a recall-time choice: a file written under one rule serves the other
    with SynapseStore(":memory:", config=SynapseConfig.published()) as store:
        store.reinforce(["a", "b"], at=0)
        assert len(store._mirror.uses) == 2


def test_a_hit_defends_with_half_its_association() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr())
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["a", "b"], at=DAY)
    store.reinforce(["c", "d"], at=DAY)
    energy = store.plan([("a", 1.0), ("b", 1.0)], at=2 * DAY).activation
    # b: B = ln(2^-0.5 + 1^-0.5) = ln 1.70711 = 0.53480; lift from a: N = 3, c = 2,
    # n_a = n_b = 2: ln(2 × 3 / 4) = 0.40547 over the weight of the other sources (a: 1);
    # defending, half of it: A = 0.53480 + 0.5 × 0.40547 = 0.73753
    assert energy["b"] == pytest.approx(0.73753, abs=1e-5)
    store.close()


NAMESPACES = ["personal", "shared", "branch:x"]
actr_nodes = st.sampled_from([f"n{i}" for i in range(8)])
actr_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("reinforce"),
            st.lists(actr_nodes, min_size=2, max_size=4),
            st.sampled_from(NAMESPACES),
            st.sampled_from([0.0, 0.0, 0.2, 3.0, 40.0]),  # days: often the same instant
        ),
        st.tuples(
            st.just("use"),
            st.lists(actr_nodes, min_size=1, max_size=2),
            st.sampled_from(NAMESPACES),
            st.sampled_from([0.0, 0.5, 9.0]),
        ),
        st.tuples(st.just("decay"), st.floats(0.0, 400.0)),
        st.tuples(st.just("fold")),
        st.tuples(
            st.just("query"),
            st.lists(actr_nodes, min_size=2, max_size=5, unique=True),
            st.sampled_from(NAMESPACES),
        ),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(actr_steps)
def test_a_long_lived_store_plans_as_a_freshly_opened_one(steps: list[tuple]) -> None:
    # the in-memory state (use arrays, recent events, cached co-use rows kept across
    # writes and time) must equal what a store opened on the same file computes from
    # scratch, with the default weight tolerance: the ACT-R rule's plan is exact
    _plans_as_a_fresh_store(steps, SynapseConfig.recency(recent_events=4, use_history=3))


@settings(max_examples=30, deadline=None)
@given(actr_steps)
def test_a_long_lived_store_plans_two_hops_as_a_freshly_opened_one(steps: list[tuple]) -> None:
    # the same under the default gate: the latest events' co-use rows are read too
    _plans_as_a_fresh_store(steps, SynapseConfig.actr(recent_events=4, use_history=3))


def _plans_as_a_fresh_store(steps: list[tuple], config: SynapseConfig) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/s.db"
        store = SynapseStore(path, config=config)
        now = 0.0
        for step in steps:
            if step[0] in ("reinforce", "use"):
                _, ids, namespace, gap = step
                now += gap * DAY
                if step[0] == "reinforce":
                    store.reinforce(ids, namespace=namespace, at=now)
                else:
                    store.use(ids, namespace=namespace, at=now)
            elif step[0] == "decay":
                store.decay(at=now + step[1] * DAY)
            elif step[0] == "fold":
                store._mirror.graph.rebuild()
            else:
                _, ids, active = step
                hits = [(node, 1.0 - i / 10) for i, node in enumerate(ids)]
                live = store.plan(hits, at=now, active_namespace=active)
                with SynapseStore(path, config=config) as fresh:
                    want = fresh.plan(hits, at=now, active_namespace=active)
                assert dict(live.activation) == pytest.approx(dict(want.activation))
                assert list(live.order) == list(want.order)
                assert live.inject() == want.inject()
        store.close()


def test_uses_written_by_another_process_are_seen_here(tmp_path: object) -> None:
    path = f"{tmp_path}/s.db"
    config = SynapseConfig.recency(refresh_interval_s=0.0)  # readme: a use, no edge
    reader = SynapseStore(path, config=config)
    hits = [("jwt", 0.9), ("login", 0.5)]
    assert [h.id for h in reader.recall(hits, at=DAY)] == ["jwt", "login"]
    with SynapseStore(path, config=config) as writer:
        writer.use(["readme"], at=0)
    # readme: B = ln 1^-0.5 = 0 beats login (never used: -6) + bonus 3
    assert [h.id for h in reader.recall(hits, at=DAY)] == ["jwt", "readme"]
    reader.close()


def test_a_failed_event_records_no_use() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr())
    store.reinforce(["a", "b"], at=DAY)
    with pytest.raises(ValueError, match="earlier"):
        store.reinforce(["a", "b", "c"], at=0, late="raise")  # before the edge's last one
    assert store._mirror.uses.uses(np.array([1, 2]), np.array([0.0, 1.0])).tolist() == [1.0, 1.0]
    assert store._storage._db.execute("SELECT count(*) FROM node_uses").fetchone() == (2,)
    store.close()


def test_cached_co_use_rows_follow_writes() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr())
    for i in range(8):  # N grows: a pair used once together now has a lift above 1
        store.reinforce([f"x{i}", f"y{i}"], at=0)
    hits = [("a", 1.0), ("q", 0.5)]
    store.reinforce(["a", "b"], at=0)
    assert store.plan(hits, at=0).activation["b"] > 0  # a's co-use row is cached now
    store.reinforce(["a", "c"], at=0)  # same instant: only the write can refresh the row
    energy = store.plan(hits, at=0).activation
    # c: N = 10 events, n_a = 2, n_c = 1, once with a: S = ln(1 × 10 / 2) = ln 5 = 1.60944;
    # a is its only source (q was never used), weights 1 and 0.5: 1.60944 / 1.5 = 1.07296;
    # B = ln(86400^0.5) = 5.68337 (one use a second ago)
    assert energy["c"] == pytest.approx(5.68337 + 1.07296, abs=1e-5)
    store.close()


def test_the_log_of_recent_events_stays_bounded(tmp_path: object) -> None:
    config = SynapseConfig.actr(recent_events=4)
    with SynapseStore(f"{tmp_path}/s.db", config=config) as store:
        for i in range(100):  # two namespaces take turns: each is trimmed on its own
            store.reinforce([f"a{i}", f"b{i}"], namespace=["personal", "shared"][i % 2], at=i)
        rows = store._storage._db.execute(
            "SELECT namespace, count(*) FROM recent_uses GROUP BY namespace"
        ).fetchall()
        assert len(rows) == 2 and all(4 <= count <= 2 * 4 for _, count in rows)
        # the four latest personal events (even i), latest first
        personal = np.array([0.0, 1.0, 0.0])
        expected = [f"{x}{i}" for i in (98, 96, 94, 92) for x in "ab"]
        assert [
            store._mirror.graph.names[n] for n in store._mirror.uses.recent_nodes(personal)
        ] == expected


def test_several_nodes_used_at_once_are_a_co_activation_event() -> None:
    store = SynapseStore(":memory:")
    store.use(["a", "b"], at=0)
    store.use(["c"], at=0)
    one = np.array([0.0, 1.0])
    assert store._mirror.uses.events(one) == 1.0  # N counts events of two nodes or more
    ids = np.array([store._mirror.graph.index[x] for x in "abc"])
    assert store._mirror.uses.uses(ids, one, together=True).tolist() == [1.0, 1.0, 0.0]
    assert store.edge("a", "b") is None  # no edge between them
    store.close()


def test_nodes_with_the_same_history_tie_and_go_by_name() -> None:
    # files always committed together have equal activations to the last bit, wherever
    # they sit among the candidates (a BLAS product summed some rows differently), so
    # the tie rule orders them by name
    store = SynapseStore(":memory:")
    rnd = random.Random(0)
    names = [f"f{i:03d}" for i in range(300)]
    t = 0.0
    for _ in range(400):
        t += rnd.random() * DAY
        store.reinforce(rnd.sample(names, rnd.randint(2, 6)), namespace="shared", at=t)
    for k in range(100):
        t += rnd.random() * DAY
        twins = [f"new{k}_{j}" for j in range(6)]
        for _ in range(5):
            t += rnd.random() * DAY
            store.reinforce([names[k], *twins], namespace="shared", at=t)
        for _ in range(3):
            t += rnd.random() * DAY
            store.reinforce(rnd.sample(names, 4), namespace="shared", at=t)
        hits = [(names[k], 1.0), *((n, 0.5) for n in rnd.sample(names[150:], 6))]
        plan = store.plan(hits, at=t + DAY, active_namespace="shared")
        assert len({plan.activation[n] for n in twins}) == 1
        ranked = [n for n in plan.order if n in twins]
        assert ranked == sorted(ranked)
    store.close()


def test_a_hit_keeps_its_most_co_used_neighbours_ties_to_the_smaller_id() -> None:
    config = SynapseConfig.actr(association_fan=3)
    store = SynapseStore(":memory:", config=config)
    for other, times in (("b", 1), ("c", 2), ("d", 1), ("e", 2), ("f", 1)):
        for i in range(times):
            store.reinforce(["a", other], at=i)
    ids = {name: store._mirror.graph.index[name] for name in "abcdef"}
    ((others, counts),) = store._mirror.graph.co_uses([ids["a"]], "personal", 0.0, fan=3)
    # c and e (2 co-uses each), then b, the smallest id of the three with 1
    assert [store._mirror.graph.names[x] for x in others.tolist()] == ["b", "c", "e"]
    assert counts.tolist() == [1.0, 2.0, 2.0]
    store.close()


def test_reinforcing_one_node_records_a_use_once_per_event_id() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.recency())  # a use, no edge
    assert store.reinforce(["readme"], at=0, event_id="run:1") == 0  # no pair, no edge
    assert store.reinforce(["readme"], at=0, event_id="run:1") == 0  # a replay: nothing
    node = np.array([store._mirror.graph.index["readme"]])
    assert store._mirror.uses.uses(node, np.array([0.0, 1.0])).tolist() == [1.0]
    assert store.reinforce(["readme"], strength=0.0, at=0) == 0  # strength 0: nothing at all
    assert store._mirror.uses.uses(node, np.array([0.0, 1.0])).tolist() == [1.0]
    # used a day ago (B = 0) beats a never-used hit (-6 + 3)
    assert [h.id for h in store.recall([("a", 0.9), ("b", 0.5)], at=86400)] == ["a", "readme"]
    store.close()


def test_with_no_neighbours_read_the_rule_is_query_blind() -> None:
    # association_fan = 0 (the benchmark's query-blind twin): a hit's co-used neighbour is
    # no candidate unless the latest events hold it; the same memory, queried through a
    # hit or another, injects the same nodes
    blind = SynapseConfig.actr(association_fan=0, recent_events=1)
    seen = SynapseConfig.actr(recent_events=1)
    results = {}
    for name, config in (("blind", blind), ("seen", seen)):
        store = SynapseStore(":memory:", config=config)
        for day in range(20):
            store.reinforce(["a", "b"], at=day * DAY)  # a and b, used together daily
        store.reinforce(["c", "d"], at=20 * DAY)  # the latest event
        hits = [("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)]
        results[name] = [h.id for h in store.recall(hits, at=21 * DAY)]
        other = [("q", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)]
        results[name + " other"] = [h.id for h in store.recall(other, at=21 * DAY)]
    assert "b" in results["seen"]  # a's neighbour, reached through the hit
    assert "b" not in results["blind"]  # not read: only c and d were candidates
    assert results["blind"][1:] == results["blind other"][1:]  # the query's hit changes nothing


def test_an_unassociated_recent_node_is_never_injected_by_default() -> None:
    # billing.py is used in every task of the week, never with jwt.py or its partner
    hits = [("jwt.py", 0.9), ("login.md", 0.5), ("faq.md", 0.4)]
    results = {}
    for name, config in (("default", SynapseConfig()), ("recency", SynapseConfig.recency())):
        with SynapseStore(":memory:", config=config) as store:
            store.reinforce(["jwt.py", "keys.py"], at=0)
            for day in range(1, 8):
                store.reinforce(["billing.py", "invoice.py"], at=day * DAY)
            results[name] = [(h.id, h.origin) for h in store.recall(hits, at=8 * DAY)]
    # billing and invoice: B = ln(Σ_{d=1..7} d^-0.5) = ln 4.18 = 1.43, beating the never-used
    # hits' −6 + ln 2 + 3 = −2.31 on base level alone: the recency prior injects them
    assert ("billing.py", "injected") in results["recency"]
    # the gate: only keys.py (an edge with jwt.py) may take a slot
    assert results["default"] == [
        ("jwt.py", "vector"),
        ("login.md", "vector"),
        ("keys.py", "injected"),
    ]


def test_min_association_keeps_out_weakly_associated_nodes() -> None:
    def recall(minimum: float) -> list[str]:
        with SynapseStore(":memory:", config=SynapseConfig.actr(min_association=minimum)) as store:
            store.reinforce(["jwt.py", "keys.py"], at=0)
            store.reinforce(["a", "b"], at=0)  # an unrelated event: N = 2
            plan = store.plan([("jwt.py", 0.9), ("x", 0.5)], at=DAY)
            return [h.id for h in plan.inject()]

    # keys.py: S = ln(c × N / (n_jwt × n_keys)) = ln(1 × 2 / 1) = ln 2 = 0.69315 from jwt
    # (weight 1); x lends nothing (never used) but weighs 0.5 / 0.9 = 0.55556 in the mean:
    # 0.69315 / 1.55556 = 0.44560
    assert recall(0.0) == ["jwt.py", "keys.py"]
    assert recall(0.445) == ["jwt.py", "keys.py"]
    assert recall(0.446) == ["jwt.py", "x"]


def test_min_association_is_validated_and_needs_the_gate() -> None:
    with pytest.raises(InvalidValueError, match="min_association must be a finite number"):
        SynapseConfig.actr(min_association=-0.1)
    with pytest.raises(InvalidValueError, match="require_association=False"):
        SynapseConfig.recency(min_association=0.5)
    with pytest.raises(TypeError, match="require_association must be a bool"):
        SynapseConfig.actr(require_association=1)


def test_intermediates_worked_by_hand() -> None:
    # N = 10 events. Candidate 5 (used 2 times) met 6 (used 2 times) twice and 8 (used 4
    # times) twice: S_6 = ln(2 × 10 / 4) = ln 5 = 1.609, S_8 = ln(20 / 8) = 0.916: 6.
    # Candidate 7 (used 5 times) met the hit 2 (used 2 times, an edge the hit's fan left
    # out) once: S = ln(10 / 10) = 0, no better than chance: -1. Candidate 9 (used once)
    # met only 4 (used once, not near the hits): -1. Candidate 3 (used once) met 8 once:
    # S = ln(10 / 4) = 0.916 > 0: 8.
    nodes = np.array([2, 3, 4, 5, 6, 7, 8, 9])
    uses = np.array([2.0, 1.0, 1.0, 2.0, 2.0, 5.0, 4.0, 1.0])
    rows = [
        (np.array([6, 8]), np.array([2.0, 2.0])),
        (np.array([2]), np.array([1.0])),
        (np.array([4]), np.array([1.0])),
        (np.array([8]), np.array([1.0])),
    ]
    near = np.array([2, 6, 8])
    found = intermediates(np.array([5, 7, 9, 3]), rows, near, nodes, uses, 10)
    assert found.tolist() == [6, -1, -1, 8]
    assert intermediates(np.zeros(0, np.int64), [], near, nodes, uses, 10).tolist() == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(1, 12), st.integers(1, 4)), max_size=8), max_size=6),
    st.lists(st.integers(1, 12), min_size=1, unique=True),
    st.lists(st.integers(1, 9), min_size=12, max_size=12),
    st.integers(1, 30),
)
def test_intermediates_pick_the_strongest_near_neighbour_ties_to_the_smaller_id(
    entries: list[list[tuple[int, int]]], near: list[int], used: list[int], events: int
) -> None:
    # one candidate per row (ids 20, 21, ...), each row ascending by id; every id is a node
    rows = []
    for row in entries:
        counts = dict(row)
        ids = sorted(counts)
        rows.append((np.array(ids, np.int64), np.array([float(counts[m]) for m in ids])))
    candidates = np.arange(20, 20 + len(rows))
    nodes = np.concatenate([np.arange(1, 13), candidates])
    uses = np.concatenate([np.array(used, float), np.full(len(rows), 3.0)])
    found = intermediates(candidates, rows, np.array(sorted(near)), nodes, uses, events)
    for k, (ids, counts) in enumerate(rows):  # the reference: one candidate at a time
        lifts = {
            m: c * events / (used[m - 1] * 3.0)
            for m, c in zip(ids.tolist(), counts.tolist(), strict=True)
            if m in near
        }
        best = max((lift for lift in lifts.values() if lift > 1), default=None)
        expected = -1 if best is None else min(m for m, lift in lifts.items() if lift == best)
        assert found[k] == expected


def test_two_hops_admit_a_recent_node_associated_through_one_node() -> None:
    hits = [("jwt.py", 0.9), ("login.md", 0.5), ("faq.md", 0.4)]
    results = {}
    for name, config in (
        ("one hop", SynapseConfig.actr(association_hops=1)),
        ("two hops", SynapseConfig()),  # the default
        ("recency", SynapseConfig.recency()),
    ):
        with SynapseStore(":memory:", config=config) as store:
            store.reinforce(["jwt.py", "keys.py"], at=0)  # keys.py: a neighbour of the hit
            store.reinforce(["keys.py", "rotate.py"], at=DAY)  # rotate.py: two hops away
            for day in range(1, 8):
                store.reinforce(["billing.py", "invoice.py"], at=day * DAY)  # no path
            results[name] = [(h.id, h.origin, h.path) for h in store.recall(hits, at=8 * DAY)]
            if name == "two hops":
                energy = dict(store.plan(hits, at=8 * DAY).activation)
    # N = 9 events; keys.py (n = 2) met jwt.py (n = 1) once: S = ln(1 × 9 / 2) = 1.50408,
    # over the hits' weights 1 + 0.556 + 0.444 = 2: lift 0.75204; B = ln(8^-0.5 + 7^-0.5)
    # = -0.31264, A = 0.43940. rotate.py: reached through keys.py (S = ln(1 × 9 / (2 × 1))
    # = 1.50408 > 0 on both steps), B = ln(7^-0.5) = -0.97296, no lift, less the indirect
    # penalty 1: A = -1.97296. The victims (never used; the latest event a day old) defend
    # with -6 + ln 2 + 3 = -2.30685: both beat it, keys.py first.
    assert energy["keys.py"] == pytest.approx(0.43940, abs=1e-5)
    assert energy["rotate.py"] == pytest.approx(-1.97296, abs=1e-5)
    assert results["two hops"] == [
        ("jwt.py", "vector", ()),
        ("keys.py", "injected", ("jwt.py", "keys.py")),
        ("rotate.py", "injected", ("jwt.py", "keys.py", "rotate.py")),
    ]
    # one hop: rotate.py has no edge with a hit; billing.py (B = 1.43) beats both, but is
    # reached from no hit in any number of hops: only the recency prior lets it in
    assert [node for node, _, _ in results["one hop"]] == ["jwt.py", "login.md", "keys.py"]
    assert [node for node, _, _ in results["recency"]] == ["jwt.py", "billing.py", "invoice.py"]


@settings(max_examples=60, deadline=None)
@given(events, hit_lists)
def test_the_default_injects_only_nodes_within_two_edges_of_a_hit(
    history: list[tuple[list[str], float]], ids: list[str]
) -> None:
    store = SynapseStore(":memory:")
    at = 0.0
    for nodes, gap in history:
        at += gap * DAY
        if len(set(nodes)) > 1:
            store.reinforce(nodes, at=at)
        else:
            store.use(nodes, at=at)
    now = at + DAY
    hits = [(node, 1.0 - i / 20) for i, node in enumerate(ids)]

    def linked(a: str, b: str) -> bool:
        return store.weight(a, b, at=now) > 0

    for hit in store.plan(hits, at=now).inject():
        if hit.origin == "injected":
            # the path names the hit, the intermediate node if any, and the node: each
            # step a live edge
            assert hit.path[0] in ids and hit.path[-1] == hit.id and len(hit.path) in (2, 3)
            assert all(linked(a, b) for a, b in zip(hit.path[:-1], hit.path[1:], strict=True))
    store.close()


def test_an_unassociated_recent_node_is_never_injected_in_two_hops() -> None:
    # billing.py is used in every task of the week, and reaches jwt.py through no node
    hits = [("jwt.py", 0.9), ("login.md", 0.5), ("faq.md", 0.4)]
    with SynapseStore(":memory:") as store:  # the default: two hops
        store.reinforce(["jwt.py", "keys.py"], at=0)
        store.reinforce(["readme.md", "billing.py"], at=0)  # a path, but none from a hit
        for day in range(1, 8):
            store.reinforce(["billing.py", "invoice.py"], at=day * DAY)
        result = [h.id for h in store.recall(hits, at=8 * DAY)]
    assert result == ["jwt.py", "login.md", "keys.py"]


def test_association_hops_and_indirect_penalty_are_validated() -> None:
    for bad in (0, 3, 1.5):
        with pytest.raises(InvalidValueError, match="association_hops must be 1 or 2"):
            SynapseConfig.actr(association_hops=bad)
    with pytest.raises(InvalidTypeError, match="association_hops must be 1 or 2, got True"):
        SynapseConfig.actr(association_hops=True)
    with pytest.raises(InvalidValueError, match="indirect_penalty must be a finite number"):
        SynapseConfig.actr(indirect_penalty=-1.0)
