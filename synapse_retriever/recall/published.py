"""The published recall rule (``SynapseConfig.published()``), top to bottom.

1. **Spread** (:func:`spread`): energy 1.0 at each of the first ``seeds`` hits flows two
   hops along merged live weights, ``propagated = energy × weight × spread_rate × hf``,
   damped at hubs by ``hf = sqrt(hub_degree / degree)`` above ``hub_degree``
   (:func:`hub_factor`). One vectorised engine works over sparse matrices (scipy CSR)
   that the store's in-memory graph provides; :func:`spread_activation` builds them
   from a plain dict of dicts.
2. **Boost and displace** (:func:`inject`): a present non-seed hit gains
   ``boost × energy``; absent nodes with energy of at least ``inject_threshold`` take
   the weakest non-seed slots, at most ``max_inject``, the list never growing.
3. **Plan** (:func:`plan`, :class:`RecallPlan`): both steps for a store's hit list, in
   two phases for callers that resolve candidate ids in between.

References
----------
A. M. Collins and E. F. Loftus, "A spreading-activation theory of semantic processing",
*Psychological Review* 82(6), 407-428, 1975.
"Budget-Neutral Synaptic Recall: Displacement Injection with Learned Per-Edge Decay for
AI Agent Context Retrieval", and its companion "Hebbian Co-Activation with Long-Term
Potentiation and Hub-Normalized Spreading Activation" (the method as published: hub
normalisation, the 0.6 spread rate, 0.15 threshold, 0.3 boost, at most 2 injections).

Examples
--------
>>> graph = {"verify_token": {"load_keys": 0.9}, "load_keys": {"verify_token": 0.9}}
>>> spread_activation(graph, ["verify_token"]).energy
{'load_keys': 0.54}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import sparse

from synapse_retriever._arrays import unique_ids
from synapse_retriever._types import FloatArray, IntArray
from synapse_retriever.recall.hits import (
    Activation,
    Hit,
    NamedPaths,
    Plan,
    Resolvable,
    injection_slots,
    resolves,
)

if TYPE_CHECKING:
    from synapse_retriever.config import SynapseConfig
    from synapse_retriever.memory.graph import MemoryGraph

__all__ = [
    "ENERGY_TOLERANCE",
    "RecallPlan",
    "Spread",
    "activation_from",
    "candidates",
    "hub_factor",
    "hub_factors",
    "inject",
    "plan",
    "spread",
    "spread_activation",
]

Matrix: TypeAlias = Any  # scipy.sparse.csr_matrix (scipy ships no type information)
"""A symmetric ``n × n`` matrix of merged live weights in (0, 1], one entry per neighbour."""


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


def spread(
    seeds: Sequence[int],
    matrices: Sequence[Matrix],
    hub: FloatArray,
    *,
    spread_rate: float = 0.6,
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
    spread_rate: float = 0.6,
    hub_degree: int = 50,
) -> Activation:
    """Spread energy from ``seeds`` over a dict-of-dicts graph of merged weights.

    The same computation as :func:`spread` (see its Notes), for users who keep their
    own graph: ``graph[node][neighbour]`` is the weight in [0, 1] of an undirected edge
    (given one way or both; if both ways differ, the larger counts); weights of 0 are
    absent edges. Every reached node is reported.

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


# -- boost and displacement ------------------------------------------------------------

ENERGY_TOLERANCE = 1e-9
"""Energies within this of the threshold count as reaching it (0.5 × 0.5 × 0.6 is 0.15 - 3e-17)."""


def candidates(
    hits: Sequence[tuple[str, float]],
    energy: dict[str, float],
    *,
    threshold: float = 0.15,
) -> list[str]:
    """Absent nodes strong enough to displace a hit, strongest first (ties by id).

    Examples
    --------
    >>> candidates([("a", 1.0)], {"a": 0.9, "y": 0.2, "x": 0.2, "z": 0.1})
    ['x', 'y']
    """
    present = {hit[0] for hit in hits}
    strong = [
        (-value, node)
        for node, value in energy.items()
        if node not in present and value >= threshold - ENERGY_TOLERANCE
    ]
    return [node for _, node in sorted(strong)]


def inject(
    hits: Sequence[tuple[str, float]],
    activation: Activation,
    *,
    seeds: int = 3,
    boost: float = 0.3,
    threshold: float = 0.15,
    max_inject: int = 2,
    resolvable: Resolvable | None = None,
    cost: Callable[[str], float] | None = None,
) -> list[Hit]:
    """Fold activation energies into a ranked hit list without growing it.

    Parameters
    ----------
    hits : sequence of (id, score)
        Ranked best first; duplicates are kept as they are.
    activation : Activation
        Energies (and paths) from :func:`spread_activation`
        seeded with the first ``seeds`` hits.
    seeds : int
        The first ``seeds`` positions are seeds: never boosted, never displaced.
    boost, threshold, max_inject : float, float, int
        See :class:`~synapse_retriever.config.SynapseConfig`.
    resolvable : callable or container, optional
        Whether an absent node can be turned into a result; an unresolvable id never
        costs a slot (filtered before the ``max_inject`` cap).
    cost : callable, optional
        Cost of an id (e.g. its tokens); a candidate is skipped if the output's total
        cost would exceed the input's.

    Returns
    -------
    list of Hit
        Same length as ``hits``.

    Notes
    -----
    (a) Boost: a present non-seed hit with energy E gets ``score += boost × E``; if any
    was boosted, the list is stably re-sorted by score, best first.
    (b) Displace: candidates (see :func:`candidates`) take the slots of the weakest
    non-seed hits (lowest score; ties: the later position), the strongest candidate
    the better slot, each taking its victim's score. At least one original hit stays.
    (c) If nothing was boosted or injected, the input comes back unchanged.

    Examples
    --------
    ``d`` is present and reached (boosted by 0.3 × 0.5); ``x`` is absent with energy
    0.54 ≥ 0.15 and takes the weakest slot (``e``'s) and score; ``y`` is too weak:

    >>> from synapse_retriever.recall.hits import Activation
    >>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
    >>> act = Activation(energy={"d": 0.5, "x": 0.54, "y": 0.1},
    ...                  paths={"d": ("a", "d"), "x": ("a", "x"), "y": ("b", "y")})
    >>> [(h.id, round(h.score, 2), h.origin) for h in inject(hits, act)]
    [('a', 0.9, 'vector'), ('b', 0.8, 'vector'), ('d', 0.75, 'boosted'), ('c', 0.7, 'vector'), \
('x', 0.5, 'injected')]
    """
    energy = activation.energy
    rows = [(index, hit[0], hit[1]) for index, hit in enumerate(hits)]
    boosted: dict[int, Hit] = {}
    for index, node, score in rows:
        gain = boost * energy.get(node, 0.0)
        if index >= seeds and gain > 0.0:
            boosted[index] = Hit(
                node, score + gain, "boosted", energy[node], activation.paths.get(node, ())
            )
    ranked = [boosted.get(index) or Hit(node, score) for index, node, score in rows]
    order = list(range(len(rows)))
    if boosted:
        order.sort(key=lambda i: -ranked[i].score)
    ranked = [ranked[i] for i in order]

    pool = sorted(
        (slot for slot, index in enumerate(order) if index >= seeds),
        key=lambda slot: (ranked[slot].score, -slot),
    )
    limit = injection_slots(len(rows), seeds=seeds, max_inject=max_inject)
    accepted: list[str] = []
    if limit > 0:
        budget = sum(cost(node) for _, node, _ in rows) if cost is not None else 0.0
        total = budget
        for node in candidates(hits, energy, threshold=threshold):
            if len(accepted) == limit:
                break
            if resolvable is not None and not resolves(resolvable, node):
                continue
            if cost is not None:
                after = total - cost(ranked[pool[len(accepted)]].id) + cost(node)
                if after > budget:
                    continue
                total = after
            accepted.append(node)
    for node, slot in zip(accepted, sorted(pool[: len(accepted)]), strict=True):
        victim = ranked[slot]
        ranked[slot] = Hit(
            node, victim.score, "injected", energy[node], activation.paths.get(node, ()), victim.id
        )
    if not boosted and not accepted:
        return [Hit(node, score) for _, node, score in rows]
    return ranked


@dataclass(frozen=True)
class RecallPlan(Plan):
    """The published rule's :class:`~synapse_retriever.recall.hits.Plan`: spreading
    activation from the seeds, then :func:`inject` once candidates are resolved.

    Examples
    --------
    >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
    ...                   seeds=1)
    >>> plan.candidates
    ['x']
    >>> [h.id for h in plan.inject(resolvable=set())]  # x cannot be resolved: nothing changes
    ['a', 'b']
    """

    boost: float = 0.3
    threshold: float = 0.15

    @property
    def candidates(self) -> list[str]:
        """Absent ids that could displace a hit, strongest first (resolve these).

        Examples
        --------
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"y": 0.2, "x": 0.6}), seeds=1)
        >>> plan.candidates
        ['x', 'y']
        """
        if self.slots == 0:
            return []
        return candidates(self.hits, self.activation.energy, threshold=self.threshold)

    def inject(
        self,
        resolvable: Resolvable | None = None,
        cost: Callable[[str], float] | None = None,
    ) -> list[Hit]:
        """Run :func:`inject` on the planned hits; same length as the input.

        Examples
        --------
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}), seeds=1)
        >>> [(h.id, h.origin) for h in plan.inject(resolvable={"x"})]
        [('a', 'vector'), ('x', 'injected')]
        """
        return inject(
            self.hits,
            self.activation,
            seeds=self.seeds,
            boost=self.boost,
            threshold=self.threshold,
            max_inject=self.max_inject,
            resolvable=resolvable,
            cost=cost,
        )


def activation_from(
    graph: MemoryGraph,
    seeds: Sequence[str],
    now: float,
    active: str,
    *,
    report_min: float = 0.0,
    report: Iterable[str] = (),
) -> Activation:
    """Spreading activation from ``seeds`` over the store's in-memory ``graph``, by name.

    See :meth:`SynapseStore.spread <synapse_retriever.store.SynapseStore.spread>`.
    """
    result = graph.spread(seeds, now, active, report_min=report_min, report=report)
    names = graph.names
    energy = zip(result.nodes.tolist(), result.energy.tolist(), strict=True)
    return Activation(
        energy={names[node]: value for node, value in energy},
        paths=NamedPaths(result.paths, names, graph.index),
    )


def plan(
    hits: list[tuple[str, float]],
    graph: MemoryGraph,
    config: SynapseConfig,
    now: float,
    active: str,
) -> RecallPlan:
    """The published rule's plan for validated ``hits``: spreading activation from the
    first ``config.seeds`` ids, reporting the hits and the nodes that reach the threshold.

    Examples
    --------
    >>> from synapse_retriever import SynapseConfig, SynapseStore
    >>> store = SynapseStore(":memory:", config=SynapseConfig.published())
    >>> _ = store.reinforce(["a", "b"], at=0)
    >>> store.plan([("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)], at=0).candidates
    ['b']
    """
    activation = Activation()
    if config.injection_enabled and len(hits) > 1:
        activation = activation_from(
            graph,
            [node for node, _ in hits[: config.seeds]],
            now,
            active,
            report_min=config.inject_threshold - ENERGY_TOLERANCE,
            report=[node for node, _ in hits],
        )
    return RecallPlan(
        hits,
        activation,
        seeds=config.seeds,
        boost=config.boost,
        threshold=config.inject_threshold,
        max_inject=config.max_inject,
    )
