"""What a store holds, as ``SynapseStore.stats()`` and ``synapse-retriever stats --json`` report it:
nodes, live edges per namespace, and weight and half-life histograms, computed from the
mirror's columns.

Examples
--------
>>> histogram([0.05, 0.15, 0.15, 1.0], [0.0, 0.1, 0.2, 1.0])  # 1.0 falls in the last bin
[1, 2, 1]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from synapse_retriever.clock import iso

if TYPE_CHECKING:
    from synapse_retriever._types import FloatArray
    from synapse_retriever.config import Learning
    from synapse_retriever.mirror.graph import EdgeColumns

__all__ = ["HALF_LIFE_BINS", "WEIGHT_BINS", "graph_stats", "histogram", "median"]

WEIGHT_BINS = [i / 10 for i in range(11)]
"""Edges of the weight histogram: ten bins of 0.1 (1.0 falls in the last)."""

HALF_LIFE_BINS = [0.0, 7.0, 14.0, 30.0, 60.0, 90.0, 120.0, math.inf]
"""Edges of the half-life histogram, in days (30 and 60 are the personal and shared defaults)."""


def histogram(values: Sequence[float] | FloatArray, edges: Sequence[float]) -> list[int]:
    """Counts of ``values`` in the bins ``[edges[i], edges[i+1])`` (``edges`` ascending);
    the last bin is closed.

    Values outside ``[edges[0], edges[-1]]`` (and NaN) are not counted.

    Notes
    -----
    A value ``v`` falls in the bin ``i`` of the last edge ``edges[i] <= v``, found by a
    binary search; ``v == edges[-1]`` falls in the last bin.

    Examples
    --------
    Half-lives of 3, 30, 30 and 200 days in the bins <7, 7–30, ≥30:

    >>> histogram([3.0, 30.0, 30.0, 200.0], [0.0, 7.0, 30.0, math.inf])
    [1, 0, 3]
    """
    found = np.asarray(values, np.float64)
    bins = len(edges) - 1
    index = np.searchsorted(np.asarray(edges, np.float64), found, side="right") - 1
    index[found == edges[-1]] = bins - 1
    counts = np.bincount(index[(index >= 0) & (index < bins)], minlength=bins)
    return [int(count) for count in counts]


def median(values: FloatArray) -> float:
    """The middle of ``values`` (not empty) once sorted, or the mean of the two middle
    ones: :func:`statistics.median`, to the bit, in linear time.

    Examples
    --------
    >>> median(np.array([60.0, 7.0, 30.0])), median(np.array([60.0, 7.0, 30.0, 14.0]))
    (30.0, 22.0)
    """
    n = values.size
    low, high = np.partition(values, [(n - 1) // 2, n // 2])[[(n - 1) // 2, n // 2]].tolist()
    return float(low) if n % 2 else (low + high) / 2


def graph_stats(
    edges: EdgeColumns,
    at: float,
    name: str,
    *,
    namespaces: Mapping[int, str],
    learning: Learning,
) -> dict[str, Any]:
    """The report of the stored ``edges`` (as :meth:`MemoryGraph.columns
    <synapse_retriever.mirror.graph.MemoryGraph.columns>` copies them) live at ``at``.

    Keys: ``store`` (``name``), ``at`` (ISO 8601), ``nodes``, ``edges``, ``namespaces``
    (per namespace, by name: nodes, edges, mean weight, median half-life in days), and the
    ``weight_histogram`` and ``half_life_histogram_days`` (bins of :data:`WEIGHT_BINS`
    and :data:`HALF_LIFE_BINS`, each ``{"bin": label, "edges": count}``).

    Notes
    -----
    An edge is live when its effective weight at ``at`` is positive (decayed, floored by
    LTP, pruned below the threshold); weights in the report are those. A node counts once
    however many live edges it has. The mean weight is the correctly rounded sum
    (:func:`math.fsum`) over the count, as :func:`statistics.fmean` computes it.

    Examples
    --------
    >>> from synapse_retriever.config import SynapseConfig
    >>> from synapse_retriever.mirror.graph import MemoryGraph
    >>> g = MemoryGraph(SynapseConfig())
    >>> g.add_names([(1, "a"), (2, "b"), (3, "c")], [(1, "shared"), (2, "personal")])
    >>> g.apply([(1, 1, 1, 2, 0.3, 1, 60.0, 0.0, 0.0), (2, 2, 2, 3, 0.6, 2, 30.0, 0.0, 0.0)])
    >>> report = graph_stats(g.columns(), 0, "s.db", namespaces=g.ns_names,
    ...                      learning=g.config.learning)
    >>> report["nodes"], report["edges"], report["namespaces"]["shared"]
    (3, 2, {'nodes': 2, 'edges': 1, 'mean_weight': 0.3, 'median_half_life_days': 60.0})
    """
    weights = edges.weights_at(at, learning)
    live = weights > 0
    ns, a, b = edges.namespace[live], edges.a[live], edges.b[live]
    weights, half_lives = weights[live], edges.half_life_days[live]
    if np.any(ns[1:] < ns[:-1]):  # each namespace's edges side by side, in slices
        order = np.argsort(ns, kind="stable")
        ns, a, b = ns[order], a[order], b[order]
        weights, half_lives = weights[order], half_lives[order]
    starts = np.flatnonzero(np.diff(ns)) + 1  # where each namespace after the first begins
    bounds = [0, *starts.tolist(), ns.size] if ns.size else []
    ids = int(max(a.max(), b.max())) + 1 if ns.size else 0  # node ids are below
    per_ns = {}
    for start, stop in itertools.pairwise(bounds):
        rows = slice(start, stop)
        per_ns[namespaces[int(ns[start])]] = {
            "nodes": _distinct(a[rows], b[rows], ids),
            "edges": stop - start,
            "mean_weight": math.fsum(weights[rows].tolist()) / (stop - start),
            "median_half_life_days": median(half_lives[rows]),
        }
    return {
        "store": name,
        "at": iso(at),
        "nodes": _distinct(a, b, ids),
        "edges": int(ns.size),
        "namespaces": dict(sorted(per_ns.items())),
        "weight_histogram": _bins(weights, WEIGHT_BINS, digits=1),
        "half_life_histogram_days": _bins(half_lives, HALF_LIFE_BINS, digits=0),
    }


def _distinct(a: npt.NDArray[np.int32], b: npt.NDArray[np.int32], ids: int) -> int:
    """Distinct node ids, all below ``ids``, in ``a`` and ``b``: marked, then counted."""
    seen = np.zeros(ids, np.bool_)
    seen[a] = True
    seen[b] = True
    return int(np.count_nonzero(seen))


def _bin_label(low: float, high: float, *, digits: int) -> str:
    if math.isinf(high):
        return f"≥ {low:.{digits}f}"
    return f"{low:.{digits}f} – {high:.{digits}f}"


def _bins(values: FloatArray, edges: Sequence[float], *, digits: int) -> list[dict[str, Any]]:
    counts = histogram(values, edges)
    return [
        {"bin": _bin_label(edges[i], edges[i + 1], digits=digits), "edges": count}
        for i, count in enumerate(counts)
    ]
