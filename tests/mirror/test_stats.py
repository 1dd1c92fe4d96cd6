"""The store's report, computed from the mirror's columns, is the report of the networkx graph
that ``SynapseStore.graph`` builds, to the bit, whatever the history and the time it is read at."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import SynapseStore
from synapse_retriever.clock import iso
from synapse_retriever.mirror.stats import HALF_LIFE_BINS, WEIGHT_BINS, histogram, median

DAY = 86_400.0
NAMESPACES = ["personal", "shared", "ephemeral", "branch:x"]
NODES = [f"n{i}" for i in range(9)]

steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("reinforce"),
            st.lists(st.sampled_from(NODES), min_size=2, max_size=5),
            st.floats(0.1, 2.0),
            st.sampled_from(NAMESPACES),
            st.sampled_from([0.0, 0.0, 0.5, 3.0, 45.0]),  # days after the previous step
        ),
        st.tuples(st.just("decay"), st.floats(0.0, 200.0)),  # deletes what is pruned by then
        st.tuples(st.just("rename"), st.sampled_from(NODES), st.sampled_from(["r0", "r1"])),
    ),
    max_size=16,
)


def networkx_stats(
    graph: nx.Graph[str] | nx.MultiGraph[str], at: float, name: str
) -> dict[str, Any]:
    """The report as it was made before it read the mirror's columns: from the networkx graph
    of the live edges (the package's ``graph_stats`` up to commit 38e7c51, unchanged)."""
    edges = list(graph.edges(data=True))
    per_ns: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    nodes: defaultdict[str, set[str]] = defaultdict(set)
    for a, b, attrs in edges:
        per_ns[attrs["namespace"]].append(attrs)
        nodes[attrs["namespace"]].update((a, b))
    namespaces = {
        ns: {
            "nodes": len(nodes[ns]),
            "edges": len(rows),
            "mean_weight": statistics.fmean(row["weight"] for row in rows),
            "median_half_life_days": statistics.median(row["half_life_days"] for row in rows),
        }
        for ns, rows in sorted(per_ns.items())
    }
    return {
        "store": name,
        "at": iso(at),
        "nodes": graph.number_of_nodes(),
        "edges": graph.number_of_edges(),
        "namespaces": namespaces,
        "weight_histogram": _bins([e[2]["weight"] for e in edges], WEIGHT_BINS, digits=1),
        "half_life_histogram_days": _bins(
            [e[2]["half_life_days"] for e in edges], HALF_LIFE_BINS, digits=0
        ),
    }


def looped_histogram(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """The histogram as it was counted before, one value and one bin at a time."""
    counts = [0] * (len(edges) - 1)
    last = len(counts) - 1
    for value in values:
        for i in range(len(counts)):
            low, high = edges[i], edges[i + 1]
            if low <= value < high or (i == last and value == high):
                counts[i] += 1
                break
    return counts


def _bins(values: Sequence[float], edges: Sequence[float], *, digits: int) -> list[dict[str, Any]]:
    def label(low: float, high: float) -> str:
        return (
            f"≥ {low:.{digits}f}" if math.isinf(high) else f"{low:.{digits}f} – {high:.{digits}f}"
        )

    counts = looped_histogram(values, edges)
    return [
        {"bin": label(edges[i], edges[i + 1]), "edges": count} for i, count in enumerate(counts)
    ]


def play(store: SynapseStore, history: list[tuple[Any, ...]], at: float) -> float:
    for step in history:
        if step[0] == "reinforce":
            _, ids, strength, namespace, gap = step
            at += gap * DAY
            store.reinforce(ids, strength=strength, namespace=namespace, at=at)
        elif step[0] == "decay":
            store.decay(at=at + step[1] * DAY, force=True)
        elif step[1] in store._mirror.graph.index and step[2] not in store._mirror.graph.index:
            store.rename(step[1], step[2])
    return at


@settings(max_examples=200, deadline=None)
@given(steps, st.floats(-60.0, 400.0))
def test_the_report_is_the_networkx_graphs_report_to_the_bit(
    history: list[tuple[Any, ...]], offset_days: float
) -> None:
    # read before, at and long after the last event: weights above 1 (read before an
    # edge's last reinforcement), decayed, floored by LTP, pruned but not yet swept
    with SynapseStore(":memory:") as store:
        last = play(store, history, 0.0)
        for at in (last + offset_days * DAY, last, 0.0):
            for namespace in [None, *NAMESPACES, "branch:never-written"]:
                graph = store.graph(at=at, namespaces=namespace)
                expected = networkx_stats(graph, at, "s")
                assert store.stats(at, namespace, name="s") == expected


def test_a_report_worked_by_hand() -> None:
    day30 = 30 * DAY
    with SynapseStore(":memory:") as store:
        store.reinforce(["a", "b", "c"], namespace="shared", at=0)  # 3 edges, w0 0.3, 60 days
        store.reinforce(["a", "b"], at=0)  # w0 0.3, 30 days
        store.reinforce(["c", "d"], strength=1.5, at=0)  # w0 0.3 × 1.5 = 0.45, 30 days
        store.reinforce(["e", "f"], strength=2.0, namespace="ephemeral", at=0)  # 0.6, 1 day
        report = store.stats(at=day30, name="s")
        graph = store.graph(at=day30)
    shared = 0.3 * 2 ** (-30 / 60)  # half a half-life: 0.2121
    assert report["store"] == "s"
    assert report["at"] == iso(day30)
    # e–f: 0.6 × 2^-30 = 5.6e-10, below the prune threshold 0.01: neither it nor its nodes
    assert (report["nodes"], report["edges"]) == (4, 5)  # a, b, c, d; 3 shared + 2 personal
    assert (report["nodes"], report["edges"]) == (graph.number_of_nodes(), graph.number_of_edges())
    assert list(report["namespaces"]) == ["personal", "shared"]  # sorted by name
    personal, shared_ns = report["namespaces"]["personal"], report["namespaces"]["shared"]
    assert (personal["nodes"], personal["edges"]) == (4, 2)
    assert personal["mean_weight"] == pytest.approx((0.15 + 0.225) / 2, abs=1e-12)  # one half-life
    assert personal["median_half_life_days"] == 30.0  # (30 + 30) / 2
    assert (shared_ns["nodes"], shared_ns["edges"]) == (3, 3)
    assert shared_ns["mean_weight"] == pytest.approx(shared, abs=1e-12)
    assert shared_ns["median_half_life_days"] == 60.0
    # 0.15 in 0.1–0.2; 0.2121 (three) and 0.225 in 0.2–0.3
    assert [b["edges"] for b in report["weight_histogram"]] == [0, 1, 4, 0, 0, 0, 0, 0, 0, 0]
    assert report["weight_histogram"][2] == {"bin": "0.2 – 0.3", "edges": 4}
    # 30 days (two) in 30–60, 60 days (three) in 60–90
    assert [b["edges"] for b in report["half_life_histogram_days"]] == [0, 0, 0, 2, 3, 0, 0]
    assert report["half_life_histogram_days"][-1] == {"bin": "≥ 120", "edges": 0}
    weights = sorted(w for _, _, w in graph.edges(data="weight"))
    assert weights == pytest.approx([0.15, shared, shared, shared, 0.225], abs=1e-12)


values = st.lists(
    st.one_of(
        st.floats(allow_nan=True),
        st.sampled_from([*WEIGHT_BINS, *HALF_LIFE_BINS, -math.inf, 2.0]),  # on the edges
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([WEIGHT_BINS, HALF_LIFE_BINS, [0.0, 0.1, 0.2, 1.0]]))
def test_histogram_counts_as_the_loop_over_bins_did(found: list[float], edges: list[float]) -> None:
    assert histogram(found, edges) == looped_histogram(found, edges)
    assert histogram(np.asarray(found), edges) == looped_histogram(found, edges)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1))
def test_median_is_statistics_median_to_the_bit(found: list[float]) -> None:
    assert median(np.asarray(found)) == statistics.median(found)
