"""The ACT-R recall rule (``SynapseConfig.actr()``): ACT-R retrieval over the vector hits.

Every node's activation is its base-level activation (how recently and how often it
was used, :mod:`synapse_retriever.usage`) plus what it gets from the query's hits
through learned co-use (ACT-R's spreading activation with log-lift strengths)::

    A_i = B_i + W × Σ_j W_j S_ji / Σ_j W_j        j: the hits (never i itself)
    S_ji = max(0, ln(c_ji × N / (n_j × n_i)))     c_ji: co-uses of j and i (the edge's count)
                                                  n_j, n_i: their co-activations; N: events
                                                  of two nodes or more
                                                  W_j: hit j's score / the first hit's

A hit that was never used has B = ``unused_base``. A hit defends its slot with a bonus
of ``keep_bonus`` (the evidence of the vector match) and only ``defend_association``
of its association with the other hits (they are alike by construction); an absent
node takes the slot of the weakest non-protected hit only if its activation beats that
hit's defending activation plus the bonus. At most ``max_inject`` such swaps; the first
``seeds`` hits never move. The list never grows, its order is kept, and a store that
learned nothing changes nothing.

Examples
--------
>>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
>>> activation = {"a": 0.0, "b": -1.0, "c": -6.0, "x": 1.5, "y": -3.0}
>>> [(h.id, h.origin) for h in swap(hits, activation, ["x", "y"], keep_bonus=2.0)]
[('a', 'vector'), ('b', 'vector'), ('x', 'injected')]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from synapse_retriever.injection import Hit, RecallPlan, Resolvable, injection_slots

__all__ = ["ActrPlan", "lift_association", "source_weights", "swap"]


def lift_association(
    sources: Sequence[tuple[str, Mapping[str, float]]],
    uses: Mapping[str, float],
    events: float,
    weights: Sequence[float] | None = None,
) -> dict[str, float]:
    """Weighted mean log-lift strength from the sources to the nodes they co-occurred with.

    ``sources`` pairs each source j with its co-use counts ``{i: c_ji}``; ``uses`` gives
    n for sources and neighbours (a missing or zero count leaves the pair out);
    ``weights`` gives each source's W_j (all 1 by default).

    Notes
    -----
    S_ji = max(0, ln(c_ji × N / (n_j × n_i))); the result is
    Σ_j W_j S_ji / Σ_{j ≠ i} W_j: a node is averaged over every source but itself,
    including the sources it never co-occurred with.

    Examples
    --------
    j used 4 times, i 2 times, together twice, in N = 16 events: S = ln(2 × 16 / 8) = ln 4;
    with a second, unrelated source of the same weight: ln 4 / 2 = ln 2 = 0.6931; with
    weights 1 and 3: ln 4 / 4 = 0.3466.

    >>> s = lift_association([("j", {"i": 2}), ("k", {})], {"i": 2, "j": 4, "k": 1}, 16)
    >>> round(s["i"], 4)
    0.6931
    >>> s = lift_association([("j", {"i": 2}), ("k", {})], {"i": 2, "j": 4, "k": 1}, 16, [1, 3])
    >>> round(s["i"], 4)
    0.3466
    """
    w = [1.0] * len(sources) if weights is None else [float(x) for x in weights]
    total: dict[str, float] = {}
    for (source, row), weight in zip(sources, w, strict=True):
        n_j = uses.get(source, 0.0)
        if n_j <= 0 or weight <= 0:
            continue
        for node, c in row.items():
            n_i = uses.get(node, 0.0)
            if c > 0 and n_i > 0 and node != source:
                strength = math.log(c * events / (n_j * n_i))
                if strength > 0:
                    total[node] = total.get(node, 0.0) + weight * strength
    all_weight = sum(w)
    own = {source: weight for (source, _), weight in zip(sources, w, strict=True)}
    result = {}
    for node, value in total.items():
        rest = all_weight - own.get(node, 0.0)
        if rest > 0:
            result[node] = value / rest
    return result


def source_weights(scores: Sequence[float]) -> list[float]:
    """W_j of each hit: its score relative to the first hit's, clipped at 0 (all 1 if the
    first score is not positive).

    Examples
    --------
    >>> source_weights([0.8, 0.4, -0.1])
    [1.0, 0.5, 0.0]
    >>> source_weights([0.0, 0.0])
    [1.0, 1.0]
    """
    top = scores[0] if scores else 0.0
    if not top > 0:
        return [1.0] * len(scores)
    return [max(0.0, s / top) for s in scores]


def swap(
    hits: Sequence[tuple[str, float]],
    activation: Mapping[str, float],
    candidates: Sequence[str],
    *,
    seeds: int = 1,
    keep_bonus: float = 2.0,
    unused_base: float = -6.0,
    max_inject: int = 3,
    resolvable: Resolvable | None = None,
    cost: Callable[[str], float] | None = None,
    paths: Mapping[str, tuple[str, ...]] | None = None,
) -> list[Hit]:
    """Swap weak hits for stronger absent nodes, one for one, never growing the list.

    Parameters
    ----------
    hits : sequence of (id, score)
        Ranked best first.
    activation : mapping
        A of hits and candidates; a missing id has ``unused_base``.
    candidates : sequence of str
        Absent ids, strongest first.
    seeds : int
        The first ``seeds`` hits never move (at least one original hit stays).
    keep_bonus : float
        Added to a hit's activation when it defends its slot.
    max_inject : int
        At most this many swaps.
    resolvable, cost
        As in :func:`~synapse_retriever.injection.inject`.

    Notes
    -----
    Victims are the non-protected hits in increasing order of A + ``keep_bonus`` (ties:
    the later position). The i-th strongest accepted candidate is paired with the i-th
    weakest victim and swapped while it is strictly stronger. Accepted candidates then
    fill their victims' slots in rank order, the strongest the best slot, each taking
    its victim's score. If nothing is swapped the input comes back unchanged.
    """
    rows = [(node, score) for node, score in hits]
    limit = injection_slots(len(rows), seeds=seeds, max_inject=max_inject)
    present = {node for node, _ in rows}
    victims = sorted(
        range(min(seeds, len(rows)), len(rows)),
        key=lambda i: (activation.get(rows[i][0], unused_base) + keep_bonus, -i),
    )
    accepted: list[tuple[str, int]] = []
    budget = sum(cost(node) for node, _ in rows) if cost is not None else 0.0
    total = budget
    for node in candidates:
        if len(accepted) >= limit or len(accepted) >= len(victims):
            break
        if node in present or (resolvable is not None and not _resolves(resolvable, node)):
            continue
        victim = victims[len(accepted)]
        strength = activation.get(node, unused_base)
        if not strength > activation.get(rows[victim][0], unused_base) + keep_bonus:
            break
        if cost is not None:
            after = total - cost(rows[victim][0]) + cost(node)
            if after > budget:
                continue
            total = after
        accepted.append((node, victim))
    if not accepted:
        return [Hit(node, score) for node, score in rows]
    out = [Hit(node, score) for node, score in rows]
    slots = sorted(victim for _, victim in accepted)
    for (node, _), slot in zip(accepted, slots, strict=True):
        victim_id, victim_score = rows[slot]
        out[slot] = Hit(
            node,
            victim_score,
            "injected",
            float(activation.get(node, unused_base)),
            (paths or {}).get(node, ()),
            victim_id,
        )
    return out


def _resolves(resolvable: Resolvable, node: str) -> bool:
    if callable(resolvable):
        return bool(resolvable(node))
    return node in resolvable


@dataclass(frozen=True)
class ActrPlan(RecallPlan):
    """A :class:`~synapse_retriever.injection.RecallPlan` for the ACT-R rule.

    ``activation.energy`` holds each reached node's activation A; ``order`` lists the
    absent candidates, strongest first.
    """

    keep_bonus: float = 2.0
    unused_base: float = -6.0
    order: tuple[str, ...] = field(default_factory=tuple)

    @property
    def candidates(self) -> list[str]:
        """Absent ids that beat the weakest movable hit, strongest first (resolve these)."""
        if self.slots == 0 or not self.order:
            return []
        energy = self.activation.energy
        floor = min(energy.get(node, self.unused_base) for node, _ in self.hits[self.seeds :])
        return [
            node
            for node in self.order
            if energy.get(node, self.unused_base) > floor + self.keep_bonus
        ]

    def inject(
        self,
        resolvable: Resolvable | None = None,
        cost: Callable[[str], float] | None = None,
    ) -> list[Hit]:
        """Run :func:`swap` on the planned hits; same length as the input."""
        return swap(
            self.hits,
            self.activation.energy,
            self.order,
            seeds=self.seeds,
            keep_bonus=self.keep_bonus,
            unused_base=self.unused_base,
            max_inject=self.max_inject,
            resolvable=resolvable,
            cost=cost,
            paths=self.activation.paths,
        )
