"""Spreading activation over sparse matrices: energy flows two hops from seeds, damped at hubs.

The engine of the published recall rule (:mod:`~synapse_retriever.recall.published`),
which the in-memory graph runs over its CSR adjacency, and :func:`spread_activation` runs
over a plain dict of dicts::

    propagated = energy × weight × spread_rate × hf(source)
    reported   = energy × hf(node)
    hf(n) = sqrt(hub_degree / degree(n)) above hub_degree, else 1

References
----------
A. M. Collins and E. F. Loftus, "A spreading-activation theory of semantic processing",
*Psychological Review* 82(6), 407-428, 1975.

Examples
--------
>>> graph = {"verify_token": {"load_keys": 0.9}, "load_keys": {"verify_token": 0.9}}
>>> spread_activation(graph, ["verify_token"]).energy
{'load_keys': 0.54}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import sparse

from synapse_retriever._arrays import unique_ids
from synapse_retriever._numbers import numeric
from synapse_retriever._types import FloatArray, IntArray
from synapse_retriever.config import Spreading
from synapse_retriever.errors import InvalidTypeError, InvalidValueError, shown

__all__ = [
    "Activation",
    "NamedPaths",
    "Spread",
    "hub_factor",
    "hub_factors",
    "spread",
    "spread_activation",
]

Matrix: TypeAlias = Any  # scipy.sparse.csr_matrix (scipy ships no type information)
"""A symmetric ``n × n`` matrix of merged live weights in (0, 1], one entry per neighbour."""


@numeric
def hub_factor(degree: int, *, hub_degree: int = Spreading.hub_degree) -> float:
    """Square-root hub normalization: sqrt(hub_degree / degree) above hub_degree, else 1.

    References
    ----------
    Collins and Loftus (1975); the method as published for the hub normalisation (see the
    module docstring).

    Examples
    --------
    >>> hub_factor(200)
    0.5
    >>> hub_factor(5000)
    0.1
    >>> hub_factor(50)
    1.0
    """
    if isinstance(hub_degree, bool) or not isinstance(hub_degree, Integral):
        raise InvalidTypeError(f"hub_degree must be an integer, got {shown(hub_degree)}")
    if hub_degree < 1:
        raise InvalidValueError(f"hub_degree must be an integer >= 1, got {shown(hub_degree)}")
    return math.sqrt(hub_degree / degree) if degree > hub_degree else 1.0


def hub_factors(
    degrees: npt.NDArray[np.integer], *, hub_degree: int = Spreading.hub_degree
) -> FloatArray:
    """:func:`hub_factor` element-wise.

    Examples
    --------
    >>> hub_factors(np.array([3, 200])).tolist()
    [1.0, 0.5]
    """
    safe = np.maximum(degrees, 1).astype(np.float64)
    return np.where(degrees > hub_degree, np.sqrt(hub_degree / safe), 1.0)


@dataclass(frozen=True)
class Spread:
    """Energies of reached nodes by integer id, as :func:`spread` reports them."""

    nodes: IntArray
    energy: FloatArray
    paths: Mapping[int, tuple[int, ...]]
    """Path of the strongest contribution into each reached node, computed on access."""


def spread(
    seeds: Sequence[int],
    matrices: Sequence[Matrix],
    hub: FloatArray,
    *,
    spread_rate: float = Spreading.spread_rate,
    report_min: float = 0.0,
    report: Iterable[int] = (),
) -> Spread:
    """Spread energy 1.0 from each seed for exactly two hops (sparse, vectorized).

    Parameters
    ----------
    seeds : sequence of int
        Seed node ids in ``range(n)``, energy 1.0 each; duplicates count once.
    matrices : sequence of scipy.sparse.csr_matrix
        Their sum is the graph: symmetric ``n × n``, merged live weights in (0, 1].
    hub : array of float
        Each node's hub factor (:func:`hub_factors` of its live merged degree).
    spread_rate : float
        Energy kept per hop (0.6).
    report_min : float
        Report the nodes whose energy before their own hub factor reaches this
        (0 reports every reached node); since hub factors are at most 1, no node
        below it can reach it after.
    report : iterable of int
        Nodes to report whatever their energy (e.g. the hits present in a result list).

    Notes
    -----
    With S the seeds and hf the hub factor of a node's live merged degree::

        E1[m] = min(1, Σ_{s∈S} w(s,m) × rate × hf(s))              m ∉ S
        E2[m] = Σ_{n∈E1} E1[n] × w(n,m) × rate × hf(n)               m ∉ S
        E[m]  = min(1, E1[m] + E2[m]),  reported as E[m] × hf(m)

    Energy never flows into a seed; propagation uses the unscaled E1, and the final
    hub factor keeps a hub from flooding the top-k. Each hop reads only the rows of the
    nodes it spreads from.
    """
    n = hub.size
    seed_ids = unique_ids(np.asarray(seeds, dtype=np.int64))
    seed_ids = seed_ids[(seed_ids >= 0) & (seed_ids < n)]
    if seed_ids.size == 0:
        return Spread(np.zeros(0, np.int64), np.zeros(0), {})
    is_seed = np.zeros(n, bool)
    is_seed[seed_ids] = True

    seed_carry = spread_rate * hub[seed_ids]
    first = _push(matrices, seed_ids, seed_carry, n)
    first[is_seed] = 0.0
    np.minimum(first, 1.0, out=first)

    vias = np.flatnonzero(first)
    carry = first[vias] * spread_rate * hub[vias]
    second = _push(matrices, vias, carry, n)
    second[is_seed] = 0.0
    total = np.minimum(1.0, first + second)

    reached = np.flatnonzero(total)
    wanted = total[reached] >= report_min if report_min > 0.0 else np.ones(reached.size, bool)
    wanted |= np.isin(reached, np.fromiter(report, np.int64))
    nodes = reached[wanted]
    energy = total[nodes] * hub[nodes]
    sources = np.zeros(n)  # flow each seed or via sends per unit of weight
    sources[vias] = carry
    first_sources = np.zeros(n)
    first_sources[seed_ids] = seed_carry
    return Spread(nodes, energy, _Paths(nodes, matrices, first_sources, sources))


def _push(matrices: Sequence[Matrix], rows: IntArray, amounts: FloatArray, n: int) -> FloatArray:
    """Σ_r amounts[r] × row r of the summed (symmetric) matrices, as a dense vector of length n.

    Slicing the rows reads only them; when they hold a good share of all entries, one
    product with the whole matrix is cheaper than the slicing's fixed costs.
    """
    out = np.zeros(n)
    if rows.size == 0:
        return out
    dense: FloatArray | None = None
    for matrix in matrices:
        if not matrix.nnz:
            continue
        touched = int((matrix.indptr[rows + 1] - matrix.indptr[rows]).sum())
        if 4 * touched >= matrix.nnz:
            if dense is None:
                dense = np.zeros(n)
                dense[rows] = amounts
            out += matrix @ dense  # symmetric: row i of A·x is what i receives
        elif touched:
            out += matrix[rows].T @ amounts
    return out


class _Paths(Mapping[int, tuple[int, ...]]):
    """The strongest single contribution into each reported node, found on demand
    from the node's own row (a recall needs a few). Ties go to the first hop, then to
    the smaller node id."""

    def __init__(
        self, nodes: IntArray, matrices: Sequence[Matrix], seeds: FloatArray, vias: FloatArray
    ) -> None:
        self._nodes = nodes  # sorted
        self._matrices = matrices
        self._seeds, self._vias = seeds, vias

    def _strongest(self, node: int, sources: FloatArray) -> tuple[float, int]:
        best, source = -1.0, -1
        for matrix in self._matrices:
            start, stop = matrix.indptr[node], matrix.indptr[node + 1]
            cols = matrix.indices[start:stop]
            flows = matrix.data[start:stop] * sources[cols]
            if flows.size and flows.max() > 0:
                at = int(np.argmax(flows))
                if flows[at] > best or (flows[at] == best and cols[at] < source):
                    best, source = float(flows[at]), int(cols[at])
        return best, source

    def __getitem__(self, node: int) -> tuple[int, ...]:
        at = int(np.searchsorted(self._nodes, node))
        if at == self._nodes.size or self._nodes[at] != node:
            raise KeyError(node)
        flow1, seed = self._strongest(node, self._seeds)
        flow2, via = self._strongest(node, self._vias)
        if flow1 >= flow2:
            return (seed, node)
        return (self._strongest(via, self._seeds)[1], via, node)

    def __iter__(self) -> Iterator[int]:
        return iter(self._nodes.tolist())

    def __len__(self) -> int:
        return int(self._nodes.size)


def spread_activation(
    graph: Mapping[str, Mapping[str, float]],
    seeds: Iterable[str],
    *,
    spread_rate: float = Spreading.spread_rate,
    hub_degree: int = Spreading.hub_degree,
) -> Activation:
    """Spread energy from ``seeds`` over a dict-of-dicts graph of merged weights.

    The same computation as :func:`spread` (see its Notes), for users who keep their
    own graph: ``graph[node][neighbour]`` is the weight in [0, 1] of an undirected edge
    (given one way or both; if both ways differ, the larger counts); weights of 0 are
    absent edges. Every reached node is reported.

    References
    ----------
    Collins and Loftus (1975); the method as published for the hub normalisation (see the
    module docstring).

    Examples
    --------
    Two hops, 0.6 kept per hop: a -> b (0.5) -> c (1.0).

    >>> graph = {"a": {"b": 0.5}, "b": {"a": 0.5, "c": 1.0}, "c": {"b": 1.0}}
    >>> act = spread_activation(graph, ["a"])
    >>> act.energy  # b: 0.5 × 0.6 = 0.3; c: 0.3 × 1.0 × 0.6 = 0.18
    {'b': 0.3, 'c': 0.18}
    >>> act.paths["c"]
    ('a', 'b', 'c')
    """
    if isinstance(seeds, (str, bytes)):
        raise InvalidTypeError(
            "seeds must be an iterable of node ids, got a bare "
            f"{type(seeds).__name__} {shown(seeds)}"
        )
    seeds = list(seeds)  # a generator is read once
    names = sorted({*graph, *(m for row in graph.values() for m in row), *seeds})
    index = {name: i for i, name in enumerate(names)}
    rows, cols, data = [], [], []
    for name, row in graph.items():
        for other, weight in row.items():
            if weight > 0 and other != name:
                rows.append(index[name])
                cols.append(index[other])
                data.append(float(weight))
    n = len(names)
    matrix = sparse.csr_matrix((data, (rows, cols)), shape=(n, n))
    matrix = matrix.maximum(matrix.T).tocsr()  # undirected: an edge given one way counts both ways
    hub = hub_factors(np.diff(matrix.indptr), hub_degree=hub_degree)
    result = spread([index[s] for s in seeds], [matrix], hub, spread_rate=spread_rate)
    return Activation(
        energy={
            names[n]: e for n, e in zip(result.nodes.tolist(), result.energy.tolist(), strict=True)
        },
        paths=NamedPaths(result.paths, names, index),
    )


@dataclass(frozen=True)
class Activation:
    """What spreading activation found, by node name.

    Attributes
    ----------
    energy : dict[str, float]
        Final energy of every reported non-seed node, hub factor applied: E[m] × hf(m).
    paths : dict[str, tuple[str, ...]]
        For each reported node, the path of its largest single contribution:
        ``(seed, node)`` after one hop, ``(seed, via, node)`` after two.

    Examples
    --------
    >>> act = spread_activation({"a": {"b": 0.5}, "b": {"c": 1.0}}, ["a"])
    >>> act.energy
    {'b': 0.3, 'c': 0.18}
    >>> dict(act.paths)
    {'b': ('a', 'b'), 'c': ('a', 'b', 'c')}
    >>> Activation().energy  # nothing reached
    {}
    """

    energy: dict[str, float] = field(default_factory=dict)
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class NamedPaths(Mapping[str, tuple[str, ...]]):
    """Paths by node name over paths by node id, computed on access."""

    def __init__(
        self, paths: Mapping[int, tuple[int, ...]], names: Sequence[str], index: Mapping[str, int]
    ) -> None:
        self._paths, self._names, self._index = paths, names, index

    def __getitem__(self, node: str) -> tuple[str, ...]:
        if node not in self._index:
            raise KeyError(node)
        return tuple(self._names[x] for x in self._paths[self._index[node]])

    def __iter__(self) -> Iterator[str]:
        return (self._names[n] for n in self._paths)

    def __len__(self) -> int:
        return len(self._paths)
