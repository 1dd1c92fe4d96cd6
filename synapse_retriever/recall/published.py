"""The published recall rule (``SynapseConfig.published()``), top to bottom.

1. **Spread** (:func:`activation_from`): energy 1.0 at each of the first ``seeds`` hits
   flows two hops along merged live weights, ``propagated = energy × weight ×
   spread_rate × hf(source)``, and each node's energy is reported × its own ``hf``: damped
   at hubs by ``hf = sqrt(hub_degree / degree)`` above ``hub_degree``; the engine
   (:mod:`~synapse_retriever.mirror.spreading`) runs over the in-memory graph's sparse
   adjacency.
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
>>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
>>> act = Activation(energy={"x": 0.54}, paths={"x": ("a", "x")})
>>> [(h.id, h.origin) for h in inject(hits, act)][-1]
('x', 'injected')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from synapse_retriever.config import PublishedRule
from synapse_retriever.mirror.spreading import Activation, NamedPaths
from synapse_retriever.recall.hits import (
    Hit,
    Resolvable,
    checked_cost,
    checked_resolvable,
    injection_slots,
    position_costs,
    resolves,
    validated_hits,
)

if TYPE_CHECKING:
    from synapse_retriever.mirror.graph import MemoryGraph

__all__ = ["ENERGY_TOLERANCE", "RecallPlan", "activation_from", "candidates", "inject", "plan"]

# -- boost and displacement ------------------------------------------------------------

ENERGY_TOLERANCE = 1e-9
"""Energies within this of the threshold count as reaching it (0.5 × 0.5 × 0.6 is 0.15 - 3e-17)."""


def candidates(
    hits: Sequence[tuple[str, float]],
    energy: dict[str, float],
    *,
    threshold: float = PublishedRule.inject_threshold,
) -> list[str]:
    """Absent nodes strong enough to displace a hit, strongest first (ties by id).

    References
    ----------
    The method as published: "Budget-Neutral Synaptic Recall: Displacement Injection with
    Learned Per-Edge Decay for AI Agent Context Retrieval".

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
    seeds: int = PublishedRule.seeds,
    boost: float = PublishedRule.boost,
    threshold: float = PublishedRule.inject_threshold,
    max_inject: int = PublishedRule.max_inject,
    resolvable: Resolvable | None = None,
    cost: Callable[[str], float] | None = None,
    hit_costs: Sequence[float] | None = None,
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
        See :class:`~synapse_retriever.config.PublishedRule` (``threshold`` is its
        ``inject_threshold``), whose values are the defaults.
    resolvable : callable or container, optional
        Whether an absent node can be turned into a result; an unresolvable id never
        costs a slot (filtered before the ``max_inject`` cap).
    cost : callable, optional
        Cost of an id (e.g. its tokens); a candidate is skipped if the output's total
        cost would exceed the input's.
    hit_costs : sequence of float, optional
        With ``cost``: each hit's own cost, by position, where copies of one id differ
        (see :func:`~synapse_retriever.recall.hits.position_costs`); ``cost`` of its id
        by default.

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

    References
    ----------
    The method as published: "Budget-Neutral Synaptic Recall: Displacement Injection with
    Learned Per-Edge Decay for AI Agent Context Retrieval".

    Examples
    --------
    ``d`` is present and reached (boosted by 0.3 × 0.5); ``x`` is absent with energy
    0.54 ≥ 0.15 and takes the weakest slot (``e``'s) and score; ``y`` is too weak:

    >>> from synapse_retriever.mirror.spreading import Activation
    >>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
    >>> act = Activation(energy={"d": 0.5, "x": 0.54, "y": 0.1},
    ...                  paths={"d": ("a", "d"), "x": ("a", "x"), "y": ("b", "y")})
    >>> [(h.id, round(h.score, 2), h.origin) for h in inject(hits, act)]
    [('a', 0.9, 'vector'), ('b', 0.8, 'vector'), ('d', 0.75, 'boosted'), ('c', 0.7, 'vector'), \
('x', 0.5, 'injected')]
    """
    return _injected(
        validated_hits(hits),  # as recall checks them: real, finite, best first
        activation,
        seeds=seeds,
        boost=boost,
        threshold=threshold,
        max_inject=max_inject,
        resolvable=resolvable,
        cost=cost,
        hit_costs=hit_costs,
    )


def _injected(
    hits: Sequence[tuple[str, float]],
    activation: Activation,
    *,
    seeds: int,
    boost: float,
    threshold: float,
    max_inject: int,
    resolvable: Resolvable | None,
    cost: Callable[[str], float] | None,
    hit_costs: Sequence[float] | None,
) -> list[Hit]:
    """:func:`inject` on hits already validated (a plan's)."""
    energy = activation.energy
    cost = checked_cost(cost) if cost is not None else None
    resolvable = checked_resolvable(resolvable)
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
    # checked with no slot open too, as the ACT-R rule checks them: by position, since
    # copies of an id may differ
    costs = position_costs(hits, cost, hit_costs)
    limit = injection_slots(len(rows), seeds=seeds, max_inject=max_inject)
    accepted: list[str] = []
    if limit > 0:
        budget = sum(costs) if costs is not None else 0.0
        total = budget
        for node in candidates(hits, energy, threshold=threshold):
            if len(accepted) == limit:
                break
            if resolvable is not None and not resolves(resolvable, node):
                continue
            if cost is not None and costs is not None:
                after = total - costs[order[pool[len(accepted)]]] + cost(node)
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
class RecallPlan:
    """The published rule's :class:`~synapse_retriever.recall.hits.Plan`: spreading
    activation from the seeds, then :func:`inject` once candidates are resolved.

    Examples
    --------
    >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
    ...                   PublishedRule(seeds=1))
    >>> plan.candidates
    ['x']
    >>> [h.id for h in plan.inject(resolvable=set())]  # x cannot be resolved: nothing changes
    ['a', 'b']
    """

    hits: Sequence[tuple[str, float]]
    activation: Activation
    """Energies and paths from spreading activation seeded with the first ``rule.seeds`` hits."""
    rule: PublishedRule = field(default_factory=PublishedRule)

    @property
    def slots(self) -> int:
        """How many candidates can be injected at most (see :func:`injection_slots`).

        Examples
        --------
        >>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
        >>> RecallPlan(hits, Activation()).slots  # 4 hits, 3 seeds: one slot
        1
        """
        rule = self.rule
        return injection_slots(len(self.hits), seeds=rule.seeds, max_inject=rule.max_inject)

    @property
    def candidates(self) -> list[str]:
        """Absent ids that could displace a hit, strongest first (resolve these).

        Examples
        --------
        >>> act = Activation({"y": 0.2, "x": 0.6})
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], act, PublishedRule(seeds=1))
        >>> plan.candidates
        ['x', 'y']
        """
        if self.slots == 0:
            return []
        return candidates(self.hits, self.activation.energy, threshold=self.rule.inject_threshold)

    def inject(
        self,
        resolvable: Resolvable | None = None,
        cost: Callable[[str], float] | None = None,
        *,
        hit_costs: Sequence[float] | None = None,
    ) -> list[Hit]:
        """Run :func:`inject` on the planned hits; same length as the input.

        Examples
        --------
        >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}), PublishedRule(1))
        >>> [(h.id, h.origin) for h in plan.inject(resolvable={"x"})]
        [('a', 'vector'), ('x', 'injected')]
        """
        return _injected(
            self.hits,
            self.activation,
            seeds=self.rule.seeds,
            boost=self.rule.boost,
            threshold=self.rule.inject_threshold,
            max_inject=self.rule.max_inject,
            resolvable=resolvable,
            cost=cost,
            hit_costs=hit_costs,
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
    rule: PublishedRule,
    now: float,
    active: str,
    *,
    enabled: bool = True,
) -> RecallPlan:
    """The published rule's plan for validated ``hits``: spreading activation from the
    first ``rule.seeds`` ids, reporting the hits and the nodes that reach the threshold;
    ``enabled=False`` (``SynapseConfig.injection_enabled``) plans nothing.

    Examples
    --------
    >>> from synapse_retriever import SynapseConfig, SynapseStore
    >>> store = SynapseStore(":memory:", config=SynapseConfig.published())
    >>> _ = store.reinforce(["a", "b"], at=0)
    >>> store.plan([("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)], at=0).candidates
    ['b']
    """
    activation = Activation()
    if enabled and len(hits) > 1:
        activation = activation_from(
            graph,
            [node for node, _ in hits[: rule.seeds]],
            now,
            active,
            report_min=rule.inject_threshold - ENERGY_TOLERANCE,
            report=[node for node, _ in hits],
        )
    return RecallPlan(hits, activation, rule)
