"""Recall: energy spreads two hops out from the seeds, damped at hubs.

One vectorized engine, :func:`spread`, works over any graph that can list the live
neighbours of a batch of nodes (an ``expand`` callback over integer node ids): the
store's in-memory arrays, or a plain dict of dicts through :func:`spread_activation`.

Examples
--------
>>> graph = {"verify_token": {"load_keys": 0.9}, "load_keys": {"verify_token": 0.9}}
>>> spread_activation(graph, ["verify_token"]).energy
{'load_keys': 0.54}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "Activation",
    "NamedPaths",
    "Spread",
    "hub_factor",
    "hub_factors",
    "spread",
    "spread_activation",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Expand = Callable[[IntArray], tuple[IntArray, IntArray, FloatArray]]
"""``expand(nodes)`` for sorted unique ``nodes``: ``(owner, neighbour, weight)`` arrays, one
entry per live neighbour, ``owner`` the position in ``nodes``; ``weight`` is the merged
weight in (0, 1], and each ``(owner, neighbour)`` appears once."""


def hub_factor(degree: int, *, hub_degree: int = 50) -> float:
    """Square-root hub normalization: sqrt(hub_degree / degree) above hub_degree, else 1.

    Examples
    --------
    >>> hub_factor(200)
    0.5
    >>> hub_factor(5000)
    0.1
    >>> hub_factor(50)
    1.0
    """
    return math.sqrt(hub_degree / degree) if degree > hub_degree else 1.0


def hub_factors(degrees: npt.NDArray[np.integer], *, hub_degree: int = 50) -> FloatArray:
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
    """

    energy: dict[str, float] = field(default_factory=dict)
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def spread(
    seeds: Sequence[int],
    expand: Expand,
    n_nodes: int,
    *,
    spread_rate: float = 0.6,
    hub_degree: int = 50,
    report_min: float = 0.0,
    report: Iterable[int] = (),
    degree_bound: Callable[[IntArray], npt.NDArray[np.integer]] | None = None,
) -> Spread:
    """Spread energy 1.0 from each seed for exactly two hops (vectorized).

    Parameters
    ----------
    seeds : sequence of int
        Seed node ids in ``range(n_nodes)``, energy 1.0 each; duplicates count once.
    expand : callable
        Live merged neighbours of a batch of nodes (see ``Expand``).
    n_nodes : int
        Node ids are below it.
    spread_rate, hub_degree : float, int
        Energy kept per hop (0.6); degree above which hubs are damped (50).
    report_min : float
        Report the nodes whose energy before their own hub factor reaches this
        (0 reports every reached node); since hub factors are at most 1, no node
        below it can reach it after.
    report : iterable of int
        Nodes to report whatever their energy (e.g. the hits present in a result list).
    degree_bound : callable, optional
        An upper bound of nodes' degrees, to skip computing exact degrees where the
        bound shows the hub factor is 1.

    Notes
    -----
    With S the seeds and hf the hub factor of a node's live merged degree::

        E1[m] = min(1, Σ_{s∈S} w(s,m) × rate × hf(s))              m ∉ S
        E2[m] = Σ_{n∈E1} E1[n] × w(n,m) × rate × hf(n)               m ∉ S
        E[m]  = min(1, E1[m] + E2[m]),  reported as E[m] × hf(m)

    Energy never flows into a seed; propagation uses the unscaled E1, and the final
    hub factor keeps a hub from flooding the top-k.
    """
    seed_ids = np.unique(np.asarray(seeds, dtype=np.int64))
    empty = Spread(np.zeros(0, np.int64), np.zeros(0), {})
    if seed_ids.size == 0 or n_nodes == 0:
        return empty

    # hop 1
    s_owner, s_other, s_weight = expand(seed_ids)
    seed_hf = hub_factors(np.bincount(s_owner, minlength=seed_ids.size), hub_degree=hub_degree)
    keep = ~np.isin(s_other, seed_ids)
    s_owner, s_other = s_owner[keep], s_other[keep]
    s_flow = s_weight[keep] * spread_rate * seed_hf[s_owner]
    first = np.minimum(1.0, np.bincount(s_other, s_flow, minlength=n_nodes))

    # hop 2
    vias = np.flatnonzero(first)
    v_owner, v_other, v_weight = expand(vias)
    via_degree = np.bincount(v_owner, minlength=vias.size)
    carry = first[vias] * spread_rate * hub_factors(via_degree, hub_degree=hub_degree)
    keep = ~np.isin(v_other, seed_ids)
    v_owner, v_other = v_owner[keep], v_other[keep]
    v_flow = carry[v_owner] * v_weight[keep]
    total = np.minimum(1.0, first + np.bincount(v_other, v_flow, minlength=n_nodes))

    # what to report, and each reported node's own hub factor
    reached = np.flatnonzero(total)
    wanted = total[reached] >= report_min if report_min > 0.0 else np.ones(reached.size, bool)
    extra = np.asarray(sorted(set(report)), dtype=np.int64)
    wanted |= np.isin(reached, extra)
    nodes = reached[wanted]
    degree = np.zeros(nodes.size, np.int64)
    known = np.searchsorted(vias, nodes)
    is_via = (known < vias.size) & (vias[np.minimum(known, vias.size - 1)] == nodes)
    degree[is_via] = via_degree[known[is_via]]
    unknown = np.flatnonzero(~is_via)
    if unknown.size:
        if degree_bound is not None:
            bound = np.asarray(degree_bound(nodes[unknown]))
            degree[unknown] = bound
            unknown = unknown[bound > hub_degree]
        if unknown.size:
            owner, _, _ = expand(nodes[unknown])
            degree[unknown] = np.bincount(owner, minlength=unknown.size)
    energy = total[nodes] * hub_factors(degree, hub_degree=hub_degree)

    paths = _Paths(nodes, seed_ids[s_owner], s_other, s_flow, vias[v_owner], v_other, v_flow)
    return Spread(nodes, energy, paths)


class _Paths(Mapping[int, tuple[int, ...]]):
    """The strongest single contribution into each reported node, found on demand.

    Ties go to the first hop, then to the earlier entry.
    """

    def __init__(
        self,
        nodes: IntArray,
        seed: IntArray,
        first_target: IntArray,
        first_flow: FloatArray,
        via: IntArray,
        second_target: IntArray,
        second_flow: FloatArray,
    ) -> None:
        self._first = (seed, first_target, first_flow)
        self._second = (via, second_target, second_flow)
        self._nodes = nodes  # sorted

    def _strongest(self, hop: int, node: int) -> tuple[float, int]:
        source, target, flow = self._first if hop == 1 else self._second
        where = np.flatnonzero(target == node)
        if where.size == 0:
            return -1.0, -1
        best = where[int(np.argmax(flow[where]))]
        return float(flow[best]), int(source[best])

    def __getitem__(self, node: int) -> tuple[int, ...]:
        at = int(np.searchsorted(self._nodes, node))
        if at == self._nodes.size or self._nodes[at] != node:
            raise KeyError(node)
        flow1, seed = self._strongest(1, node)
        flow2, via = self._strongest(2, node)
        if flow1 >= flow2:
            return (seed, node)
        return (self._strongest(1, via)[1], via, node)

    def __iter__(self) -> Iterator[int]:
        return iter(self._nodes.tolist())

    def __len__(self) -> int:
        return int(self._nodes.size)


def spread_activation(
    graph: Mapping[str, Mapping[str, float]],
    seeds: Iterable[str],
    *,
    spread_rate: float = 0.6,
    hub_degree: int = 50,
) -> Activation:
    """Spread energy from ``seeds`` over a dict-of-dicts graph of merged weights.

    The same computation as :func:`spread` (see its Notes), for users who keep their
    own graph: ``graph[node][neighbour]`` is the weight in [0, 1] of an undirected edge;
    weights of 0 are absent edges. Every reached node is reported.

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
    names = sorted({*graph, *(m for row in graph.values() for m in row), *seeds})
    index = {name: i for i, name in enumerate(names)}
    rows = [
        [(index[m], float(w)) for m, w in graph.get(name, {}).items() if w > 0 and m != name]
        for name in names
    ]

    def expand(nodes: IntArray) -> tuple[IntArray, IntArray, FloatArray]:
        owner = [pos for pos, node in enumerate(nodes.tolist()) for _ in rows[node]]
        pairs = [pair for node in nodes.tolist() for pair in rows[node]]
        return (
            np.asarray(owner, np.int64),
            np.asarray([m for m, _ in pairs], np.int64),
            np.asarray([w for _, w in pairs], np.float64),
        )

    result = spread(
        [index[s] for s in seeds],
        expand,
        len(names),
        spread_rate=spread_rate,
        hub_degree=hub_degree,
    )
    return Activation(
        energy={
            names[n]: e for n, e in zip(result.nodes.tolist(), result.energy.tolist(), strict=True)
        },
        paths=NamedPaths(result.paths, names, index),
    )


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
