"""The in-memory recall view agrees with a from-scratch computation, whatever the history."""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import ActrRule, SynapseConfig, SynapseStore, spread_activation
from synapse_retriever._arrays import SAMPLE_STRIDE, lengthen
from synapse_retriever.mirror import graph as graph_module
from synapse_retriever.mirror.graph import Edge, MemoryGraph, strongest
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.persistence.rows import EdgeRow
from synapse_retriever.store.rename import MergeRefusedError

DAY = 86_400.0
FAN = ActrRule.association_fan  # what the ACT-R rule reads per hit, by default
NAMESPACES = ["personal", "shared", "ephemeral", "branch:x"]
nodes = st.sampled_from([f"n{i}" for i in range(9)])
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("reinforce"),
            st.lists(nodes, min_size=2, max_size=5),
            st.floats(0.1, 2.0),
            st.sampled_from(NAMESPACES),
            st.sampled_from([0.0, 0.0, 0.0, 0.5, 3.0, 45.0]),  # days: often the same instant
        ),
        st.tuples(st.just("decay"), st.floats(0.0, 200.0)),
        st.tuples(st.just("fold")),  # fold the log of new edges into the CSR adjacency
        st.tuples(  # a use adds a node (u*: one never reinforced) without any edge
            st.just("use"), st.lists(st.sampled_from(["n0", "u0", "u1", "u2"]), min_size=1)
        ),
        st.tuples(
            st.just("query"), st.lists(nodes, min_size=1, max_size=3), st.sampled_from(NAMESPACES)
        ),
    ),
    min_size=1,
    max_size=25,
)


def reference(store: SynapseStore, seeds: list[str], at: float, active: str) -> dict[str, float]:
    """Energies from a dict of merged weights built from scratch out of store.graph()."""
    factors = store.config.merge_factors(active)
    merged: dict[str, dict[str, float]] = {}
    for a, b, ns, data in store.graph(at=at).edges(keys=True, data=True):
        factor = factors.get(ns, 0.0)
        if factor > 0:
            for x, y in ((a, b), (b, a)):
                row = merged.setdefault(x, {})
                row[y] = min(1.0, row.get(y, 0.0) + factor * data["weight"])
    return spread_activation(merged, seeds, hub_degree=store.config.spreading.hub_degree).energy


@settings(max_examples=150, deadline=None)
@given(steps, st.integers(1, 4))
def test_recall_view_matches_a_from_scratch_spread(steps: list[tuple], hub_degree: int) -> None:
    # a tiny hub degree makes hub factors bite on a 9-node graph
    config = SynapseConfig.actr(weight_tolerance_s=0.0, hub_degree=hub_degree)
    store = SynapseStore(":memory:", config=config)
    now = 0.0
    for step in steps:
        if step[0] == "reinforce":
            _, ids, strength, namespace, gap = step
            now += gap * DAY
            store.reinforce(ids, strength=strength, namespace=namespace, at=now)
        elif step[0] == "decay":
            store.decay(at=now + step[1] * DAY)
        elif step[0] == "fold":
            store._mirror.graph.rebuild()
        elif step[0] == "use":
            store.use(step[1], at=now)
        else:
            _, seeds, active = step
            got = store.activate(seeds, at=now, active_namespace=active)
            want = reference(store, seeds, now, active)
            assert got.keys() == want.keys()
            for node, energy in want.items():
                assert got[node] == pytest.approx(energy, abs=1e-12)


def test_many_new_edges_fold_the_log_into_the_adjacency() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr(weight_tolerance_s=0.0))
    for i in range(3000):  # 3000 new edges: the log is folded in at least once
        store.reinforce(["hub", f"leaf{i}"], at=0)
        if i % 700 == 0:
            assert store.activate(["hub"], at=0)[f"leaf{i}"] == pytest.approx(
                0.3 * 0.6 * (50 / (i + 1)) ** 0.5 if i + 1 > 50 else 0.18
            )
    energy = store.activate(["hub"], at=0)
    # 3000 leaves: hf(hub) = sqrt(50 / 3000) = 0.129099; each leaf 0.3 × 0.6 × 0.129099
    assert energy["leaf0"] == pytest.approx(0.3 * 0.6 * (50 / 3000) ** 0.5)
    assert len(energy) == 3000


def test_a_node_added_by_a_use_alone_resizes_the_cached_view() -> None:
    # a one-file commit of a new file (synapse-retriever bench quality on two real histories): the
    # node count grows with no edge written, and the log of new edges must grow with it
    store = SynapseStore(":memory:", config=SynapseConfig.actr(weight_tolerance_s=0.0))
    store.reinforce(["a", "b"], at=0)  # a new edge: in the log, not in the adjacency
    assert store.activate(["a"], at=0) == pytest.approx({"b": 0.18})
    store.use(["c"], at=0)
    assert store.activate(["a"], at=0) == pytest.approx({"b": 0.18})
    assert store.activate(["c"], at=0) == {}


def test_writes_after_the_adjacency_is_built_update_the_cached_view_in_place() -> None:
    store = SynapseStore(
        ":memory:", config=SynapseConfig.actr(weight_tolerance_s=0.0, hub_degree=2)
    )
    store.reinforce(["s", "a", "b"], at=0)
    store.reinforce(["a", "c"], at=0)
    store._mirror.graph.rebuild()  # every edge now in the CSR adjacency
    assert store.activate(["s"], at=0) == pytest.approx(reference(store, ["s"], 0, "personal"))
    store.reinforce(["s", "a"], strength=2.0, at=0)  # same instant: the cached view is updated
    store.reinforce(["c", "d"], at=0)  # a new edge: the log
    assert store.activate(["s"], at=0) == pytest.approx(reference(store, ["s"], 0, "personal"))
    store.decay(at=0)
    store._mirror.graph.remove([1])  # a deletion seen from another process
    assert store.activate(["s"], at=0) == pytest.approx(reference(store, ["s"], 0, "personal"))


def test_recall_views_are_kept_for_a_few_active_namespaces_only() -> None:
    from synapse_retriever.mirror.graph import MAX_VIEWS

    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], namespace="personal", at=0)
    for i in range(MAX_VIEWS + 3):  # one view per active branch queried
        assert store.activate(["a"], at=0, active_namespace=f"branch:b{i}") == {
            "b": pytest.approx(0.3 * 0.8 * 0.6)  # personal seen from a branch: × 0.8
        }
    assert len(store._mirror.graph._views) == MAX_VIEWS


def co_uses_from_scratch(
    store: SynapseStore, node: str, at: float, active: str
) -> list[tuple[str, float]]:
    """A node's most co-used live neighbours (ties to the smaller id), by id, from store.graph()."""
    factors = store.config.merge_factors(active)
    counts: dict[str, float] = {}
    for a, b, ns, data in store.graph(at=at).edges(node, keys=True, data=True):
        other = b if a == node else a
        if factors.get(ns, 0.0) > 0:
            counts[other] = counts.get(other, 0.0) + factors[ns] * data["count"]
    ids = store._mirror.graph.index
    ranked = sorted(counts.items(), key=lambda item: (-item[1], ids[item[0]]))
    return sorted(ranked[: store.config.recall.association_fan], key=lambda item: ids[item[0]])


@settings(max_examples=100, deadline=None)
@given(steps, st.integers(1, 3))
def test_co_use_rows_match_a_from_scratch_count(steps: list[tuple], fan: int) -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr(association_fan=fan))
    graph, now = store._mirror.graph, 0.0  # rows are cached across time: exact, not within 60 s
    for step in steps:
        if step[0] == "reinforce":
            _, ids, strength, namespace, gap = step
            now += gap * DAY
            store.reinforce(ids, strength=strength, namespace=namespace, at=now)
        elif step[0] == "decay":
            now += step[1] * DAY  # later reads see the edges that decayed since
        elif step[0] == "fold":
            graph.rebuild()
        elif step[0] == "use":
            store.use(step[1], at=now)
        else:
            _, seeds, active = step
            known = [seed for seed in seeds if seed in graph.index]
            rows = graph.co_uses([graph.index[seed] for seed in known], active, now, fan=fan)
            for seed, (others, counts) in zip(known, rows, strict=True):
                want = co_uses_from_scratch(store, seed, now, active)
                assert [graph.names[x] for x in others.tolist()] == [name for name, _ in want]
                assert counts.tolist() == pytest.approx([count for _, count in want])


def test_a_co_use_row_is_kept_while_no_edge_of_it_dies_and_is_exact_at_any_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)  # w0 0.3, half-life 30 days: pruned after 147.x days
    store.reinforce(["a", "c"], at=0)
    store.reinforce(["a", "c"], at=DAY)  # reinforced again (a learned half-life): dies first
    graph, a = store._mirror.graph, store._mirror.graph.index["a"]
    death = float(graph._pruned_at[graph.live_ids()].min())  # a-c's
    assert store.weight("a", "c", at=death + 60) == 0 < store.weight("a", "b", at=death + 60)
    computed: list[float] = []
    rows_at = graph._co_use_rows

    def counted(nodes: list[int], ns: str, at: float, fan: int) -> dict[int, Any]:
        computed.append(at)
        return rows_at(nodes, ns, at, fan)

    monkeypatch.setattr(graph, "_co_use_rows", counted)

    def row(at: float) -> list[str]:
        ((others, _),) = graph.co_uses([a], "personal", at, fan=FAN)
        return [graph.names[x] for x in others.tolist()]

    assert row(2 * DAY) == ["b", "c"] and row(100 * DAY) == ["b", "c"]  # 98 days apart
    assert computed == [2 * DAY]  # ...one row, computed once
    assert row(death + 60) == ["b"] and computed[-1] == death + 60  # a-c died: recomputed
    assert row(3 * DAY) == ["b", "c"]  # a past time, when a-c was alive: recomputed
    assert len(computed) == 3
    assert graph._co_use_entries == 3  # what the cached row holds: b and c, and the row


def test_co_use_rows_beyond_the_entry_budget_drop_the_least_recently_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import synapse_retriever.mirror.graph as graph_module

    monkeypatch.setattr(graph_module, "MAX_CO_USE_ENTRIES", 6)
    store = SynapseStore(":memory:")
    for hub in ("h1", "h2", "h3"):
        store.reinforce([hub, f"{hub}x", f"{hub}y"], at=0)  # each hub: 2 neighbours
    graph = store._mirror.graph
    for hub in ("h1", "h2", "h3"):
        graph.co_uses([graph.index[hub]], "personal", 0.0, fan=FAN)
    rows = graph._co_uses["personal"]
    # a row holds its neighbours and one for itself: 3 each; h1 went at 9 > 6
    assert [graph.names[x] for x in rows] == ["h2", "h3"]
    assert graph._co_use_entries == 6 == sum(r[0].size + 1 for r in rows.values())
    store.reinforce(["h2", "z"], at=0)  # a write forgets the rows of its nodes
    assert [graph.names[x] for x in rows] == ["h3"] and graph._co_use_entries == 3
    # another active namespace: the budget holds across them, the oldest rows first
    graph.co_uses([graph.index["h1"]], "branch:x", 0.0, fan=FAN)  # 3 more: 6
    graph.co_uses([graph.index["z"]], "branch:x", 0.0, fan=FAN)  # z: h2, 1 neighbour: 8 > 6
    assert list(rows) == [] and graph._co_use_entries == 5  # h3 (personal) went
    # rows with no live neighbour count too, so they are dropped like the others
    graph.co_uses([graph.index[f"{hub}x"] for hub in ("h1", "h2")], "branch:x", 0.0, fan=FAN)
    assert graph._co_use_entries <= 6


def test_a_batch_of_new_edges_that_rebuilds_the_adjacency_refreshes_cached_rows() -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["x", "y"], at=0)
    graph = store._mirror.graph
    x = graph.index["x"]
    ((others, _),) = graph.co_uses([x], "personal", 0.0, fan=FAN)
    assert [graph.names[o] for o in others.tolist()] == ["y"]
    start = graph.n  # 9,000 fresh edges at once (another process's bulk import): a rebuild
    graph.add_names([(start + i, f"n{i}") for i in range(9001)])
    ns = graph.ns_index["personal"]
    rows = [(graph.size + 1, ns, x, start, 0.3, 1, 30.0, 0.0, 0.0)]  # x-n0 among them
    rows += [
        (graph.size + 2 + i, ns, start + i, start + i + 1, 0.3, 1, 30.0, 0.0, 0.0)
        for i in range(9000)
    ]
    graph.apply(rows)
    assert graph._log_len == 0  # rebuilt
    ((others, _),) = graph.co_uses([x], "personal", 0.0, fan=FAN)
    assert sorted(graph.names[o] for o in others.tolist()) == ["n0", "y"]


def test_an_edge_is_live_until_its_prune_time_to_the_last_rounding() -> None:
    store = SynapseStore(":memory:")
    for i, strength in enumerate([0.1, 0.5, 1.0, 2.0, 3.0]):
        store.reinforce([f"a{i}", f"b{i}"], strength=strength, at=i * 3600.0)
        store.reinforce([f"a{i}", f"b{i}"], at=i * 7200.0)  # a learned half-life
    graph = store._mirror.graph
    ids = graph.live_ids()
    for when in graph._pruned_at[ids].tolist():
        for at in (when, np.nextafter(when, -np.inf), np.nextafter(when, np.inf), when + 0.9):
            assert graph.live(ids, at).tolist() == (graph.weights(ids, at) > 0).tolist()


def test_a_pair_in_a_second_namespace_is_merged_at_the_next_view_not_at_the_write() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr(weight_tolerance_s=0.0))
    store.reinforce(["a", "b"], namespace="personal", at=0)
    store.reinforce(["a", "c"], namespace="personal", at=0)
    graph = store._mirror.graph
    graph.rebuild()
    store.reinforce(["a", "b"], namespace="shared", at=0)  # the same pair, another namespace
    assert graph._log_len == 1  # a write does not rebuild the adjacency (O(edges))...
    # ...the default rule's co-use rows merge the pair themselves: 1 + 0.5 × 1 (shared)
    ((others, counts),) = graph.co_uses([graph.index["a"]], "personal", 0.0, fan=FAN)
    assert [graph.names[x] for x in others.tolist()] == ["b", "c"]
    assert counts.tolist() == [1.5, 1.0]
    # ...and the published rule's view rebuilds first
    assert store.activate(["a"], at=0) == pytest.approx(reference(store, ["a"], 0, "personal"))
    assert graph._log_len == 0


def adjacency(graph: Any) -> tuple[list[Any], dict[int, bool]]:
    """Each node's CSR row as sorted (other, edge, count) entries, every live edge's two
    positions and count read back, and the twin flag of every live edge."""
    rows = []
    for node in range(graph._built):
        start, stop = graph._indptr[node], graph._indptr[node + 1]
        rows.append(sorted(zip(graph._other[start:stop].tolist(),
                               graph._entry_edge[start:stop].tolist(),
                               graph._entry_count[start:stop].tolist(), strict=True)))  # fmt: skip
    live = graph.live_ids()
    ends = list(zip(graph._a[live].tolist(), graph._b[live].tolist(), strict=True))
    pairs = Counter(ends)
    twins = [pairs[pair] > 1 for pair in ends]
    assert graph._multi[live].tolist() == twins  # a pair in two namespaces, and only that
    for edge in live.tolist():
        assert graph._entry_edge[graph._pos_a[edge]] == edge
        assert graph._entry_edge[graph._pos_b[edge]] == edge
        assert graph._other[graph._pos_a[edge]] == graph._b[edge]
        assert graph._entry_count[graph._pos_a[edge]] == graph._count[edge]
        assert graph._entry_count[graph._pos_b[edge]] == graph._count[edge]
    return rows, dict(zip(live.tolist(), graph._multi[live].tolist(), strict=True))


def play(store: SynapseStore, played: list[tuple[Any, ...]], now: float = 0.0) -> float:
    """Write ``played`` (steps of ``steps``; queries are skipped) into ``store`` from ``now``;
    returns the time reached. A fold merges the log into the adjacency once built."""
    for step in played:
        if step[0] == "reinforce":
            _, ids, strength, namespace, gap = step
            now += gap * DAY
            store.reinforce(ids, strength=strength, namespace=namespace, at=now)
        elif step[0] == "decay":
            store.decay(at=now + step[1] * DAY, force=True)
        elif step[0] == "fold":
            store._mirror.graph.rebuild()
        elif step[0] == "use":
            store.use(step[1], at=now)
    return now


@settings(max_examples=100, deadline=None)
@given(steps)
def test_folding_the_log_in_gives_the_adjacency_a_full_build_gives(steps: list[tuple]) -> None:
    store = SynapseStore(":memory:")
    play(store, steps)
    graph = store._mirror.graph
    graph.rebuild()
    fresh = Mirror(store.config)
    fresh.load(store._storage)
    fresh.graph.rebuild()  # from every live edge at once: a full sort
    assert adjacency(graph) == adjacency(fresh.graph)


def test_an_applied_row_is_read_back_field_by_field() -> None:
    graph = MemoryGraph(SynapseConfig())
    graph.add_names(nodes=[(7, "a"), (8, "b")], namespaces=[(2, "personal")])
    row = EdgeRow(
        id=5,
        namespace=2,
        a=7,
        b=8,
        weight=0.4,
        activation_count=3,
        half_life_days=12.5,
        created_at=100.0,
        last_reinforced_at=200.0,
    )
    graph.apply([row])
    assert graph.edge("personal", "a", "b") == Edge(
        a="a",
        b="b",
        namespace="personal",
        weight=0.4,
        activation_count=3,
        half_life_days=12.5,
        created_at=100.0,
        last_reinforced_at=200.0,
    )


@pytest.mark.parametrize("loaded", ["rows", "snapshot"])
def test_a_loaded_graph_takes_its_first_new_edges_without_growing_its_columns(
    loaded: str,
) -> None:
    pairs = list(itertools.combinations(range(1, 101), 2))  # 4,950 pairs of 100 nodes
    stored, new = pairs[:4000], pairs[4000 : 4000 + 4000 // 8]
    graph = MemoryGraph(SynapseConfig())
    graph.add_names(nodes=[(i, f"n{i}") for i in range(1, 101)], namespaces=[(1, "personal")])
    graph.apply([EdgeRow(k, 1, a, b, 0.5, 1, 30.0, 0.0, 0.0) for k, (a, b) in
                 enumerate(stored, 1)])  # fmt: skip  # a store's load: every row at once
    if loaded == "snapshot":
        graph = MemoryGraph.from_arrays(SynapseConfig(), *graph.arrays())
    capacity = graph._capacity
    graph.apply([EdgeRow(k, 1, a, b, 0.5, 1, 30.0, 0.0, 0.0) for k, (a, b) in
                 enumerate(new, len(stored) + 1)])  # fmt: skip
    assert graph._capacity == capacity
    a, b = new[-1]
    assert graph.edge("personal", f"n{a}", f"n{b}") is not None


def test_a_growth_that_runs_out_of_memory_leaves_the_graph_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b", "c"], at=0)
    graph = store._mirror.graph
    before = graph.edge("personal", "a", "b")
    calls = iter(range(100))

    def failing(holder: Any, key: str, size: int) -> None:
        if next(calls) == 2:  # the records and one column grown, then no memory
            raise MemoryError
        lengthen(holder, key, size)

    monkeypatch.setattr(graph_module, "lengthen", failing)
    with pytest.raises(MemoryError):
        graph._grow(graph._capacity + 1)
    monkeypatch.undo()
    assert graph.edge("personal", "a", "b") == before  # read as before
    assert store.recall([("a", 1.0)], at=0)
    names = [f"n{i}" for i in range(400)]  # past the capacity: grown again, whole
    for k in range(0, 400, 4):
        store.reinforce(names[k : k + 4], at=1)
    fresh = Mirror(store.config)
    fresh.load(store._storage)
    assert graph.edge("personal", "a", "b") == before
    graph.rebuild()
    fresh.graph.rebuild()
    assert adjacency(graph) == adjacency(fresh.graph)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6 * SAMPLE_STRIDE * 8),
    st.integers(0, 40),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
)
def test_strongest_keeps_the_largest_weights_ties_to_the_smaller_id(
    size: int, fan: int, distinct: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    others = rng.permutation(10 * size)[:size]
    weights = rng.integers(1, distinct + 1, size) * 1.5  # few values: mostly ties
    kept, kept_weights = strongest(others, weights, fan)
    best = np.lexsort((others, -weights))[:fan]  # largest first, then the smaller id
    by_id = best[np.argsort(others[best])]
    assert kept.tolist() == others[by_id].tolist()
    assert kept_weights.tolist() == weights[by_id].tolist()


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_long_co_use_rows_read_from_their_candidates_are_the_full_rows(seed: int, fan: int) -> None:
    import synapse_retriever.mirror.graph as graph_module

    rng = np.random.default_rng(seed)
    popular = 1 / np.arange(1, 21)  # 20 nodes, a few of them hubs
    spaces = ["personal"] if rng.random() < 0.5 else ["personal", "shared", "branch:x"]
    store = SynapseStore(":memory:", config=SynapseConfig.actr(association_fan=fan))
    graph, now = store._mirror.graph, 0.0
    for _ in range(int(rng.integers(5, 60))):
        size = int(rng.integers(2, 11))
        ids = rng.choice(20, size, replace=False, p=popular / popular.sum())
        now += float(rng.choice([0.0, 0.0, 0.5, 3.0, 45.0, 150.0])) * DAY
        space = str(rng.choice(spaces))
        store.reinforce(
            [f"n{i}" for i in ids], strength=float(rng.uniform(0.1, 2.0)), namespace=space, at=now
        )
        if rng.random() < 0.2:
            graph.rebuild()  # rows are read from the adjacency; new edges wait in the log
        if rng.random() < 0.1:
            store.decay(at=now)  # pruned edges are removed
        if rng.random() < 0.3:
            at = max(0.0, now - float(rng.choice([0.0, 2.0, 100.0])) * DAY)  # or a past time
            seeds = rng.choice(20, 3, replace=False)
            known = [graph.index[f"n{i}"] for i in seeds if f"n{i}" in graph.index]
            active = str(rng.choice(["personal", "shared", "branch:x"]))
            rows = graph.co_uses(known, active, at, fan=fan)  # cached across writes
            fresh = graph._co_use_rows(known, active, at, fan)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(graph_module, "CANDIDATE_ROW", 10**9)  # every row in full
                full = graph._co_use_rows(known, active, at, fan)
            for x, (others, counts) in zip(known, rows, strict=True):
                want = co_uses_from_scratch(store, graph.names[x], at, active)
                assert [graph.names[o] for o in others.tolist()] == [name for name, _ in want]
                assert counts.tolist() == pytest.approx([count for _, count in want])
                assert fresh[x].others.tolist() == full[x].others.tolist()
                assert fresh[x].counts.tolist() == full[x].counts.tolist()
                assert fresh[x].after < at < fresh[x].before
    values, arrays = graph.arrays()  # a snapshot's graph reads the same rows
    copy = MemoryGraph.from_arrays(store.config, values, arrays)
    nodes = list(range(1, graph.n))
    mine, theirs = (g._co_use_rows(nodes, "shared", now, fan) for g in (graph, copy))
    assert [(r.others.tolist(), r.counts.tolist()) for r in mine.values()] == [
        (r.others.tolist(), r.counts.tolist()) for r in theirs.values()
    ]
    assert copy._entry_count.tolist() == graph._entry_count.tolist()


def test_a_hubs_co_use_row_is_read_from_its_candidates() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr(association_fan=2))
    for i in range(12):  # hub-n0 reinforced 12 times, hub-n1 11 times, ...
        store.reinforce(["hub", *[f"n{j}" for j in range(12 - i)]], at=i * DAY)
    store.reinforce(["hub", "late"], at=12 * DAY)
    graph = store._mirror.graph
    graph.rebuild()
    store.reinforce(["hub", "later"], at=12 * DAY)  # in the log, not the adjacency
    hub = graph.index["hub"]
    _, other, _, cuts = graph._entries([hub], 2)
    assert cuts == {0: 11.0}  # the second largest count
    assert sorted(graph.names[x] for x in other.tolist()) == ["later", "n0", "n1"]
    ((others, counts),) = graph.co_uses([hub], "personal", 12 * DAY, fan=2)
    assert [graph.names[x] for x in others.tolist()] == ["n0", "n1"]
    assert counts.tolist() == [12.0, 11.0]
    assert graph._entries([graph.index["late"]], 2)[3] == {}  # a short row: read whole


def test_a_pair_split_between_the_adjacency_and_the_log_is_read_whole() -> None:
    store = SynapseStore(":memory:", config=SynapseConfig.actr(association_fan=2))
    for i in range(10):  # hub-n0 10 times, hub-n1 9 (the cut), ..., hub-n9 once
        store.reinforce(["hub", *[f"n{j}" for j in range(10 - i)]], at=i * DAY)
    graph = store._mirror.graph
    graph.rebuild()
    for k in range(20):  # hub-n9 in another namespace: in the log, 0.5 × 20 from personal
        store.reinforce(["hub", "n9"], namespace="shared", at=10 * DAY + k)
    hub = graph.index["hub"]
    assert graph._entries([hub], 2)[3] == {0: 9}  # its adjacency row is cut...
    ((others, counts),) = graph.co_uses([hub], "personal", 11 * DAY, fan=2)
    assert [graph.names[x] for x in others.tolist()] == ["n0", "n9"]
    assert counts.tolist() == [10.0, 11.0]  # ...and n9's stored count there is read too


def test_check_names_finds_an_edge_of_a_namespace_without_a_name_and_passes_a_whole_graph() -> None:
    graph = MemoryGraph(SynapseConfig())
    graph.add_names([(1, "a"), (2, "b")], [(1, "personal"), (2, "team")])
    graph.apply([[1, 1, 1, 2, 0.3, 1, 30.0, 0.0, 0.0], [2, 2, 1, 2, 0.3, 1, 30.0, 0.0, 0.0]])
    graph.check_names()  # every end named
    graph.ns_names.pop(1)  # as a load of a file whose namespace row was deleted has it
    with pytest.raises(ValueError, match="edge 1 joins node ids 1 and 2 in namespace id 1: "):
        graph.check_names()
    graph.remove([1])
    graph.check_names()  # a removed edge is no edge


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            steps.map(lambda listed: ("steps", listed)),
            st.tuples(st.just("rename"), nodes, st.sampled_from(["n0", "n5", "r1", "r2"])),
            st.tuples(st.just("rows")),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_rows_the_graph_finds_by_pair_are_the_rows_storage_reads_under_lock(
    plan: list[tuple[Any, ...]],
) -> None:
    """Whatever the history (pairs in several namespaces, edges removed by a sweep and
    learned again, renames, the log folded or not), ``MemoryGraph.rows`` of every pair of
    every known node in every namespace, absent ones among them, is what SQLite's
    ``lock_edges`` reads: the rows a big batch reads from the mirror (``step_edges``)."""
    store = SynapseStore(":memory:")
    now = 0.0

    def compare() -> None:
        graph = store._mirror.graph
        ids = sorted(graph.index.values())
        spaces = [*sorted(graph.ns_names), max(graph.ns_names, default=0) + 1]
        keys = np.array(
            [(ns, a, b) for ns in spaces for a in ids for b in ids if a != b], np.int64
        ).reshape(-1, 3)
        found = graph.rows(keys)
        with store._storage.write() as tx:
            stored = tx.lock_edges([tuple(key) for key in keys.tolist()])
        assert sorted(map(tuple, found.tolist())) == sorted(map(tuple, stored.tolist()))

    for step in plan:
        if step[0] == "rename":
            if step[1] != step[2]:
                with contextlib.suppress(MergeRefusedError):  # a rename does not merge
                    store.rename(step[1], step[2])
        elif step[0] == "rows":
            compare()
        else:
            now = play(store, step[1], now)
    compare()


def test_a_snapshot_whose_adjacency_row_is_out_of_order_is_refused() -> None:
    """A write finds a pair's row by a binary search of the adjacency: arrays whose row is
    not ascending (a snapshot another version wrote, or damaged where its checksums agree)
    are refused, and the store then loads its rows."""
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b", "c", "d"], at=0.0)
    graph = store._mirror.graph
    graph.rebuild()
    values, arrays = graph.arrays()
    MemoryGraph.from_arrays(store.config, values, arrays)  # as it is: taken
    other = arrays["adjacency.other"].copy()
    start, stop = graph._indptr[graph.index["a"]], graph._indptr[graph.index["a"] + 1]
    other[start:stop] = other[start:stop][::-1]  # a's row of three, descending
    with pytest.raises(ValueError, match="does not fit"):
        MemoryGraph.from_arrays(store.config, values, {**arrays, "adjacency.other": other})
