"""What a store holds, as ``SynapseStore.stats()`` and ``synapse-retriever stats --json`` report it:
nodes, live edges per namespace, and weight and half-life histograms.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from synapse_retriever.clock import iso

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "graph_stats", "histogram"]

WEIGHT_BINS = [i / 10 for i in range(11)]
"""Edges of the weight histogram: ten bins of 0.1 (1.0 falls in the last)."""

HALF_LIFE_BINS = [0.0, 7.0, 14.0, 30.0, 60.0, 90.0, 120.0, math.inf]
"""Edges of the half-life histogram, in days (30 and 60 are the personal and shared defaults)."""


def histogram(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Counts of ``values`` in the bins ``[edges[i], edges[i+1])``; the last bin is closed.

    Values outside ``[edges[0], edges[-1]]`` are not counted.

    Examples
    --------
    Half-lives of 3, 30, 30 and 200 days in the bins <7, 7–30, ≥30:

    >>> histogram([3.0, 30.0, 30.0, 200.0], [0.0, 7.0, 30.0, math.inf])
    [1, 0, 3]
    """
    counts = [0] * (len(edges) - 1)
    last = len(counts) - 1
    for value in values:
        for i in range(len(counts)):
            low, high = edges[i], edges[i + 1]
            if low <= value < high or (i == last and value == high):
                counts[i] += 1
                break
    return counts


def graph_stats(graph: nx.Graph[str] | nx.MultiGraph[str], at: float, name: str) -> dict[str, Any]:
    """The report of a live graph (as :meth:`SynapseStore.graph` builds it) at ``at``.

    Keys: ``store`` (``name``), ``at`` (ISO 8601), ``nodes``, ``edges``, ``namespaces``
    (per namespace: nodes, edges, mean weight, median half-life in days), and the
    ``weight_histogram`` and ``half_life_histogram_days`` (bins of :data:`WEIGHT_BINS`
    and :data:`HALF_LIFE_BINS`, each ``{"bin": label, "edges": count}``).

    Examples
    --------
    >>> import networkx as nx
    >>> graph = nx.MultiGraph()
    >>> _ = graph.add_edge("a", "b", key="shared", namespace="shared", weight=0.3,
    ...                    half_life_days=60.0)
    >>> report = graph_stats(graph, 0, "s.db")
    >>> report["nodes"], report["edges"], report["namespaces"]["shared"]["mean_weight"]
    (2, 1, 0.3)
    """
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


def _bin_label(low: float, high: float, *, digits: int) -> str:
    if math.isinf(high):
        return f"≥ {low:.{digits}f}"
    return f"{low:.{digits}f} – {high:.{digits}f}"


def _bins(values: Sequence[float], edges: Sequence[float], *, digits: int) -> list[dict[str, Any]]:
    counts = histogram(values, edges)
    return [
        {"bin": _bin_label(edges[i], edges[i + 1], digits=digits), "edges": count}
        for i, count in enumerate(counts)
    ]
