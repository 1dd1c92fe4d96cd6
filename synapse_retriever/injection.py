"""Budget-neutral injection: boost present hits, displace the weakest, never grow the list.

Pure functions over a ranked list of ``(id, score)`` pairs and an :class:`Activation`.

Examples
--------
>>> from synapse_retriever.activation import Activation
>>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
>>> act = Activation(energy={"x": 0.54}, paths={"x": ("a", "x")})
>>> [(h.id, h.score, h.origin) for h in inject(hits, act)]
[('a', 0.9, 'vector'), ('b', 0.8, 'vector'), ('c', 0.7, 'vector'), ('d', 0.6, 'vector'), \
('x', 0.5, 'injected')]
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from synapse_retriever.activation import Activation

__all__ = [
    "ANNOTATION_KEYS",
    "Hit",
    "Origin",
    "RecallPlan",
    "candidates",
    "inject",
    "injection_slots",
]

Origin = Literal["vector", "boosted", "injected"]

ENERGY_TOLERANCE = 1e-9
"""Energies within this of the threshold count as reaching it (0.5 × 0.5 × 0.6 is 0.15 - 3e-17)."""

ANNOTATION_KEYS = ("synapse_origin", "synapse_energy", "synapse_path", "synapse_displaced")
"""Metadata keys that adapters add to boosted and injected results (never to plain hits)."""


class Hit(NamedTuple):
    """One result of :func:`inject`.

    Attributes
    ----------
    id : str
        Node id.
    score : float
        Input score; boosted hits gain ``boost × energy``; injected hits take their victim's.
    origin : {"vector", "boosted", "injected"}
        Why the hit is here.
    energy : float
        Activation energy that reached it (0.0 for plain vector hits).
    path : tuple of str
        The strongest path that brought the energy: ``(seed, id)`` or ``(seed, via, id)``.
    displaced : str or None
        For injected hits, the id of the hit whose slot it took.

    Examples
    --------
    >>> Hit("auth/jwt.py", 0.91)  # a plain vector hit
    Hit(id='auth/jwt.py', score=0.91, origin='vector', energy=0.0, path=(), displaced=None)
    >>> hit = Hit("config/keys.py", 0.55, "injected", 0.54, ("auth/jwt.py", "config/keys.py"),
    ...           "docs/auth-stub.md")
    >>> hit.origin, hit.displaced
    ('injected', 'docs/auth-stub.md')
    """

    id: str
    score: float
    origin: Origin = "vector"
    energy: float = 0.0
    path: tuple[str, ...] = ()
    displaced: str | None = None

    def annotation(self) -> dict[str, object]:
        """Metadata saying why the hit is here; empty for plain vector hits.

        Examples
        --------
        >>> Hit("x", 0.5, "injected", 0.54, ("a", "x"), "e").annotation()["synapse_path"]
        'a -> x'
        """
        if self.origin == "vector":
            return {}
        notes: dict[str, object] = {
            "synapse_origin": self.origin,
            "synapse_energy": round(self.energy, 6),
            "synapse_path": " -> ".join(self.path),
        }
        if self.displaced is not None:
            notes["synapse_displaced"] = self.displaced
        return notes


Resolvable = Callable[[str], bool] | Container[str]


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


def injection_slots(n: int, *, seeds: int = 3, max_inject: int = 2) -> int:
    """Absent nodes that ``n`` hits can take in: ``min(max_inject, n − seeds, n − 1)``, at least 0.

    Seeds are never displaced, and at least one original hit stays.

    Examples
    --------
    >>> injection_slots(5), injection_slots(4), injection_slots(3), injection_slots(2, seeds=1)
    (2, 1, 0, 1)
    """
    return max(0, min(max_inject, n - seeds, n - 1))


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
        Energies (and paths) from :func:`~synapse_retriever.activation.spread_activation`
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

    >>> from synapse_retriever.activation import Activation
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
            if resolvable is not None and not _resolves(resolvable, node):
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


def _resolves(resolvable: Resolvable, node: str) -> bool:
    if callable(resolvable):
        return bool(resolvable(node))
    return node in resolvable


@dataclass(frozen=True)
class RecallPlan:
    """Activation computed for a hit list, ready to inject: two phases for callers that
    must resolve candidate ids themselves (e.g. with an async docstore) in between.

    Examples
    --------
    >>> from synapse_retriever.activation import Activation
    >>> plan = RecallPlan([("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}),
    ...                   seeds=1)
    >>> plan.candidates
    ['x']
    >>> [h.id for h in plan.inject(resolvable=set())]  # x cannot be resolved: nothing changes
    ['a', 'b']
    """

    hits: Sequence[tuple[str, float]]
    activation: Activation
    seeds: int = 3
    boost: float = 0.3
    threshold: float = 0.15
    max_inject: int = 2

    @property
    def slots(self) -> int:
        """How many candidates can be injected at most (see :func:`injection_slots`).

        Examples
        --------
        >>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
        >>> RecallPlan(hits, Activation()).slots  # 4 hits, 3 seeds: one slot
        1
        """
        return injection_slots(len(self.hits), seeds=self.seeds, max_inject=self.max_inject)

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
