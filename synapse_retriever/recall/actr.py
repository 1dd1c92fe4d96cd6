"""The ACT-R recall rule (``SynapseConfig.actr()``): ACT-R retrieval over the vector hits.

Every node's activation is its base-level activation (how recently and how often it
was used, :mod:`synapse_retriever.learning.usage`) plus what it gets from the query's hits
through learned co-use (ACT-R's spreading activation with log-lift strengths)::

    A_i = B_i + W × Σ_j W_j S_ji / Σ_j W_j        j: the hits (never i itself)
    S_ji = max(0, ln(c_ji × N / (n_j × n_i)))     c_ji: co-uses of j and i (the edge's count)
                                                  n_j, n_i: their co-activations; N: events
                                                  of two nodes or more
                                                  W_j: hit j's score / the first hit's

A hit that was never used has B = ``unused_base``. A hit defends its slot with a bonus
of ``keep_bonus`` (the evidence of the vector match) and only ``defend_association``
of its association with the other hits (they are alike by construction); an absent
node takes the slot of the weakest non-protected hit only if it is associated with the
query (the association gate: a learned edge with at least one hit, and a mean log-lift
Σ_j W_j S_ji / Σ_j W_j of at least ``min_association``; or, for a node of the latest
events, two steps of positive log-lift, hit j to a node m to it, S_jm > 0 and S_mi > 0,
its activation then less ``indirect_penalty``) and its activation beats that hit's
defending activation plus the bonus. Base level orders the associated nodes; the
recency prior (``SynapseConfig.recency()``) lifts the gate, letting the latest events'
nodes in on their base level alone. At most ``max_inject`` such swaps; the first
``seeds`` hits never move. The list never grows, its order is kept, and a store that
learned nothing changes nothing.

References
----------
J. R. Anderson and C. Lebiere, *The Atomic Components of Thought*, Lawrence Erlbaum, 1998
(ACT-R's base-level learning B = ln Σ t_j^(−d), and associative strengths from
co-occurrence, S_ji = ln(P(i | j) / P(i))).
J. R. Anderson and L. J. Schooler, "Reflections of the environment in memory",
*Psychological Science* 2(6), 396-408, 1991 (the power law of recency and frequency).

Examples
--------
>>> hits = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
>>> activation = {"a": 0.0, "b": -1.0, "c": -6.0, "x": 1.5, "y": -3.0}
>>> [(h.id, h.origin) for h in swap(hits, activation, ["x", "y"], keep_bonus=2.0)]
[('a', 'vector'), ('b', 'vector'), ('x', 'injected')]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from synapse_retriever._arrays import nth_largest, unique_ids
from synapse_retriever._numbers import numeric
from synapse_retriever._types import FloatArray, IntArray
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import ActrRule
from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.recall.hits import (
    Hit,
    Resolvable,
    checked_cost,
    checked_resolvable,
    injection_slots,
    position_costs,
    resolves,
)

if TYPE_CHECKING:
    from synapse_retriever.learning.usage import UseTable
    from synapse_retriever.mirror.graph import MemoryGraph

__all__ = [
    "ActrPlan",
    "NodeValues",
    "RankedNames",
    "StrongestSources",
    "intermediates",
    "lift_strengths",
    "plan",
    "source_weights",
    "swap",
]


def lift_strengths(
    hits: IntArray,
    sources: Sequence[tuple[IntArray, FloatArray]],
    nodes: IntArray,
    uses: FloatArray,
    events: float,
    weights: FloatArray | None = None,
) -> FloatArray:
    """Weighted mean log-lift strength from the hits to each of ``nodes`` (integer ids).

    Parameters
    ----------
    hits : array of int
        The sources j (distinct; -1 for a hit the store does not know).
    sources : sequence of (array, array)
        Per hit, the ids of the nodes it co-occurred with and the co-use counts c_ji.
    nodes : array of int
        Distinct ids to score (hits and candidates), ascending; ``uses`` gives each
        one's n.
    events : float
        N, the co-activation events.
    weights : array, optional
        Each hit's W_j (all 1 by default).

    Notes
    -----
    S_ji = max(0, ln(c_ji × N / (n_j × n_i))), left out where a count is 0 or the node
    is not in ``nodes``; the result is Σ_j W_j S_ji / Σ_{j ≠ i} W_j: a node is averaged
    over every hit but itself, including the hits it never co-occurred with.

    References
    ----------
    Anderson and Lebiere (1998), ACT-R's retrieval from base level and association (see the
    module docstring).

    Examples
    --------
    j (id 1) used 4 times, i (id 3) 2 times, together twice, in N = 16 events:
    S = ln(2 × 16 / 8) = ln 4; with a second, unrelated hit k (id 2) of the same weight:
    ln 4 / 2 = ln 2 = 0.6931; with weights 1 and 3: ln 4 / 4 = 0.3466.

    >>> hits, nodes, uses = np.array([1, 2]), np.array([1, 2, 3]), np.array([4.0, 1.0, 2.0])
    >>> sources = [(np.array([3]), np.array([2.0])), (np.array([], np.int64), np.array([]))]
    >>> lift_strengths(hits, sources, nodes, uses, 16).round(4).tolist()
    [0.0, 0.0, 0.6931]
    >>> lift_strengths(hits, sources, nodes, uses, 16, np.array([1.0, 3.0])).round(4).tolist()
    [0.0, 0.0, 0.3466]
    """
    w = np.ones(hits.size) if weights is None else np.asarray(weights, np.float64)
    if nodes.size == 0:
        return np.zeros(0)

    def position(ids: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        at = np.minimum(nodes.searchsorted(ids), nodes.size - 1)
        return at, nodes[at] == ids

    hit_at, hit_found = position(hits)
    n_j = np.where(hit_found, uses[hit_at], 0.0)
    total: FloatArray = np.zeros(nodes.size)
    # only hits that are known, used and weighted can lend strength
    lending = [
        j
        for j, (n, weight) in enumerate(zip(n_j.tolist(), w.tolist(), strict=True))
        if n > 0 and weight > 0 and sources[j][0].size
    ]
    if lending:
        source = np.repeat(lending, [sources[j][0].size for j in lending])
        others = np.concatenate([sources[j][0] for j in lending])
        counts = np.concatenate([sources[j][1] for j in lending])
        at, found = position(others)
        n_i = np.where(found, uses[at], 0.0)
        keep = np.flatnonzero(found & (counts > 0) & (n_i > 0) & (others != hits[source]))
        source, at = source[keep], at[keep]
        with np.errstate(divide="ignore"):
            strength = np.log(counts[keep] * events / (n_j[source] * n_i[keep]))
        positive = strength > 0
        lent = w[source[positive]] * strength[positive]
        total = np.bincount(at[positive], lent, nodes.size).astype(np.float64)
    own = np.zeros(nodes.size)
    own[hit_at[hit_found]] = w[hit_found]
    rest = w.sum() - own
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((rest > 0) & (total > 0), total / rest, 0.0)


def intermediates(
    candidates: IntArray,
    rows: Sequence[tuple[IntArray, FloatArray]],
    near: IntArray,
    nodes: IntArray,
    uses: FloatArray,
    events: float,
) -> IntArray:
    """Per candidate, the node through which it is associated with the hits in two hops
    (-1 if none): its neighbour in ``near`` of the highest log-lift, if positive.

    Parameters
    ----------
    candidates : array of int
        The ids i to link (each in ``nodes``).
    rows : sequence of (array, array)
        Per candidate, the ids of its live neighbours and the co-use counts c_mi.
    near : array of int
        The nodes associated with the hits (distinct, ascending): the hits, and their
        neighbours of positive log-lift with them.
    nodes : array of int
        Distinct ids, ascending, holding the candidates and ``near``; ``uses`` gives each
        one's n.
    events : float
        N, the co-activation events.

    Returns
    -------
    array of int
        The intermediate m of each candidate: argmax over m in ``near`` of S_mi (ties: the
        smaller id), or -1 where no such m has S_mi > 0.

    Notes
    -----
    S_mi = ln(c_mi × N / (n_m × n_i)), the log-lift of :func:`lift_strengths`. A candidate
    i is associated with the hits in two hops when some hit j has S_jm > 0 with a node m
    (or m is a hit) and S_mi > 0: the path spreading activation takes from a hit through
    one node, each step more often together than chance.

    Examples
    --------
    N = 20 events; i (id 3) used 4 times: with m = 1 (used 5 times) twice, S = ln(2 × 20 /
    20) = 0.6931; with m = 2 (used 10 times) twice, S = ln(40 / 40) = 0, no association;
    with 9 (not near the hits) 4 times. Candidate 4 (used 2 times) met only 2, once:
    S = ln(20 / 20) = 0.

    >>> nodes, uses = np.array([1, 2, 3, 4, 9]), np.array([5.0, 10.0, 4.0, 2.0, 4.0])
    >>> rows = [(np.array([1, 2, 9]), np.array([2.0, 2.0, 4.0])), (np.array([2]), np.array([1.0]))]
    >>> intermediates(np.array([3, 4]), rows, np.array([1, 2]), nodes, uses, 20).tolist()
    [1, -1]
    """
    out = np.full(candidates.size, -1, np.int64)
    if candidates.size == 0 or near.size == 0:
        return out
    owner = np.repeat(np.arange(candidates.size), [ids.size for ids, _ in rows])
    ids = np.concatenate([ids for ids, _ in rows]).astype(np.int64, copy=False)
    counts = np.concatenate([c for _, c in rows])
    is_near = np.zeros(max(int(near[-1]), int(ids.max(initial=0))) + 1, bool)
    is_near[near] = True
    inside = is_near[ids]
    owner, ids, counts = owner[inside], ids[inside], counts[inside]
    n_m = uses[nodes.searchsorted(ids)]
    n_i = uses[nodes.searchsorted(candidates)][owner]
    with np.errstate(divide="ignore"):
        strength = np.log(counts * events / (n_m * n_i))
    keep = strength > 0
    owner, ids, strength = owner[keep], ids[keep], strength[keep]
    if owner.size == 0:
        return out
    # owners ascend (rows in candidate order): per owner, the strongest, then the smaller id
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    best = np.repeat(np.maximum.reduceat(strength, starts), np.diff(np.r_[starts, owner.size]))
    tied = np.where(strength == best, ids, np.iinfo(np.int64).max)
    out[owner[starts]] = np.minimum.reduceat(tied, starts)
    return out


@numeric
def source_weights(scores: Sequence[float]) -> list[float]:
    """W_j of each hit: its score relative to the first hit's, clipped at 0 (all 1 if the
    first score is not positive).

    References
    ----------
    Anderson and Lebiere (1998), ACT-R's retrieval from base level and association (see the
    module docstring).

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
    seeds: int = ActrRule.seeds,
    keep_bonus: float = ActrRule.keep_bonus,
    unused_base: float = ActrRule.unused_base,
    max_inject: int = ActrRule.max_inject,
    resolvable: Resolvable | None = None,
    cost: Callable[[str], float] | None = None,
    paths: Mapping[str, tuple[str, ...]] | None = None,
    hit_costs: Sequence[float] | None = None,
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
    unused_base : float
        The activation of an id ``activation`` lacks.
    max_inject : int
        At most this many swaps. These four default to
        :class:`~synapse_retriever.config.ActrRule`'s values.
    resolvable, cost, hit_costs
        As in :func:`~synapse_retriever.recall.published.inject`.

    Notes
    -----
    Victims are the non-protected hits in increasing order of A + ``keep_bonus`` (ties:
    the later position). The i-th strongest accepted candidate is paired with the i-th
    weakest victim and swapped while it is strictly stronger. Accepted candidates then
    fill their victims' slots in rank order, the strongest the best slot, each taking
    its victim's score. If nothing is swapped the input comes back unchanged.

    References
    ----------
    Anderson and Lebiere (1998), ACT-R's retrieval from base level and association (see the
    module docstring).
    """
    rows = [(node, score) for node, score in hits]
    cost = checked_cost(cost) if cost is not None else None
    costs = position_costs(rows, cost, hit_costs)  # by position: copies of an id may differ
    resolvable = checked_resolvable(resolvable)
    limit = injection_slots(len(rows), seeds=seeds, max_inject=max_inject)
    present = {node for node, _ in rows}
    victims = sorted(
        range(min(seeds, len(rows)), len(rows)),
        key=lambda i: (activation.get(rows[i][0], unused_base) + keep_bonus, -i),
    )
    accepted: list[tuple[str, int]] = []
    budget = sum(costs) if costs is not None else 0.0
    total = budget
    for node in candidates:
        if len(accepted) >= limit or len(accepted) >= len(victims):
            break
        if node in present or (resolvable is not None and not resolves(resolvable, node)):
            continue
        victim = victims[len(accepted)]
        strength = activation.get(node, unused_base)
        if not strength > activation.get(rows[victim][0], unused_base) + keep_bonus:
            break
        if cost is not None and costs is not None:
            after = total - costs[victim] + cost(node)
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
            paths.get(node, ()) if paths is not None else (),
            victim_id,
        )
    return out


@dataclass(frozen=True)
class ActrPlan:
    """The ACT-R rule's :class:`~synapse_retriever.recall.hits.Plan`: each node's
    activation, then :func:`swap` once candidates are resolved.

    ``activation`` holds each reached node's activation A, by name (a node it lacks has
    ``unused_base``: the rule's, raised in a memory that stopped learning); ``order`` lists
    the absent nodes whose A beats the weakest movable hit's plus ``keep_bonus`` (the only
    ones :func:`swap` could accept), strongest first, exact ties by name; ``paths`` the
    path by which each of them is associated with the hits.

    Examples
    --------
    >>> hits = [("a", 0.9), ("b", 0.8)]
    >>> plan = ActrPlan(hits, ActrRule(), -6.0, {"a": 0.0, "b": -6.0, "x": 1.0}, order=["x"])
    >>> plan.slots, plan.candidates, [(h.id, h.origin) for h in plan.inject()]
    (1, ['x'], [('a', 'vector'), ('x', 'injected')])
    """

    hits: Sequence[tuple[str, float]]
    rule: ActrRule
    unused_base: float
    activation: Mapping[str, float] = field(default_factory=dict)
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order: Sequence[str] = field(default_factory=tuple)

    @property
    def slots(self) -> int:
        """How many candidates can be injected at most (see :func:`injection_slots`)."""
        rule = self.rule
        return injection_slots(len(self.hits), seeds=rule.seeds, max_inject=rule.max_inject)

    @property
    def candidates(self) -> list[str]:
        """Absent ids that beat the weakest movable hit, strongest first (resolve these)."""
        return list(self.order) if self.slots else []

    def inject(
        self,
        resolvable: Resolvable | None = None,
        cost: Callable[[str], float] | None = None,
        *,
        hit_costs: Sequence[float] | None = None,
    ) -> list[Hit]:
        """Run :func:`swap` on the planned hits; same length as the input."""
        return swap(
            self.hits,
            self.activation,
            self.order,
            seeds=self.rule.seeds,
            keep_bonus=self.rule.keep_bonus,
            unused_base=self.unused_base,
            max_inject=self.rule.max_inject,
            resolvable=resolvable,
            cost=cost,
            paths=self.paths,
            hit_costs=hit_costs,
        )


class NodeValues(Mapping[str, float]):
    """A value per node name over arrays of node ids and values, looked up on access;
    ``extra`` holds values by name, looked up first (names without an id, or the few
    looked up most).

    Examples
    --------
    >>> names, index = ["", "a", "b"], {"a": 1, "b": 2}
    >>> values = NodeValues(np.array([2, 1]), np.array([0.5, -1.0]), names, index, {"q": -6.0})
    >>> values["b"], values["q"], values.get("z"), sorted(values)
    (0.5, -6.0, None, ['a', 'b', 'q'])
    """

    def __init__(
        self,
        nodes: IntArray,
        values: FloatArray,
        names: Sequence[str],
        index: Mapping[str, int],
        extra: Mapping[str, float] | None = None,
    ) -> None:
        order = np.argsort(nodes, kind="stable")
        self._nodes, self._values = nodes[order], values[order]
        self._names, self._index = names, index
        self._extra = dict(extra or {})

    def __getitem__(self, name: str) -> float:
        if name in self._extra:
            return self._extra[name]
        at = self._position(name)
        if at < 0:
            raise KeyError(name)
        return float(self._values[at])

    def __iter__(self) -> Iterator[str]:
        yield from (self._names[node] for node in self._nodes.tolist())
        yield from (name for name in self._extra if self._position(name) < 0)

    def __len__(self) -> int:
        return int(self._nodes.size) + sum(self._position(name) < 0 for name in self._extra)

    def _position(self, name: str) -> int:
        node = self._index.get(name, -1)
        at = int(self._nodes.searchsorted(node))
        return at if node >= 0 and at < self._nodes.size and self._nodes[at] == node else -1


class RankedNames(Sequence[str]):
    """Node names by value, highest first, exact ties by name; ranked only as far as the
    sequence is read (a recall reads the first few of hundreds): each read takes the
    strongest of the rest still unranked, with every tie of the last, and sorts just
    those.

    Examples
    --------
    >>> names = ["", "a", "b", "c"]
    >>> ranked = RankedNames(np.array([1, 3, 2]), np.array([1.0, 2.0, 1.0]), names)
    >>> ranked[0], list(ranked), len(ranked), ranked.values(2)
    ('c', ['c', 'a', 'b'], 3, [2.0, 1.0])
    """

    def __init__(self, nodes: IntArray, values: FloatArray, names: Sequence[str]) -> None:
        """``nodes`` and their ``values`` (not NaN), in any order."""
        if np.isnan(values).any():
            raise InvalidValueError(f"values must not be NaN, got {shown(values)}")
        self._size = int(nodes.size)
        self._nodes, self._values, self._names = nodes, values, names
        self._done: list[str] = []
        self._done_values: list[float] = []

    def values(self, count: int) -> list[float]:
        """The values of the first ``count`` names."""
        self._resolve(count)
        return self._done_values[: max(count, 0)]

    def _resolve(self, upto: int) -> None:
        """Rank the first ``upto`` names (and every tie of the last)."""
        need = min(upto, self._size) - len(self._done)
        if need <= 0:
            return
        values = self._values
        if need < values.size:  # the need-th largest; everything tied with it comes too
            cut = nth_largest(values, need)
            take = values >= cut
            chunk = zip((-values[take]).tolist(), self._nodes[take].tolist(), strict=True)
            self._nodes, self._values = self._nodes[~take], values[~take]
        else:
            chunk = zip((-values).tolist(), self._nodes.tolist(), strict=True)
            self._nodes, self._values = self._nodes[:0], values[:0]
        names = self._names
        for value, name in sorted((v, names[node]) for v, node in chunk):
            self._done.append(name)
            self._done_values.append(-value)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            picked = range(*i.indices(len(self)))
            self._resolve(max(picked, default=-1) + 1)
            return [self._done[k] for k in picked]
        at = i + len(self) if i < 0 else i
        if not 0 <= at < len(self):
            raise IndexError(i)
        self._resolve(at + 1)
        return self._done[at]

    def __iter__(self) -> Iterator[str]:
        at = 0
        while at < len(self):
            self._resolve(at + 16)  # a few at a time: a swap reads the first ones
            yield from self._done[at : len(self._done)]
            at = len(self._done)

    def __len__(self) -> int:
        return self._size


class StrongestSources(Mapping[str, tuple[str, ...]]):
    """``(hit, node)`` for each candidate, with the hit it co-occurred with most (ties:
    the earlier hit), found on access (a recall reads the few it injects). ``through``
    names the node between for the nodes reached in two steps: their path is ``(hit, step,
    node)``, or ``(step, node)`` where the step is a hit; they are looked up first and
    listed last.

    Examples
    --------
    >>> sources = [(np.array([3]), np.array([1.0])), (np.array([3, 4]), np.array([2.0, 1.0]))]
    >>> names, index = ["", "", "", "x", "y"], {"x": 3, "y": 4}
    >>> paths = StrongestSources(["j", "k"], sources, np.array([3, 4]), names, index)
    >>> paths["x"], dict(paths), "q" in paths
    (('k', 'x'), {'x': ('k', 'x'), 'y': ('k', 'y')}, False)
    >>> through = {"q": "y", "x": "j"}
    >>> dict(StrongestSources(["j", "k"], sources, np.array([3, 4]), names, index, through))
    {'x': ('j', 'x'), 'y': ('k', 'y'), 'q': ('k', 'y', 'q')}
    """

    def __init__(
        self,
        hits: Sequence[str],
        sources: Sequence[tuple[IntArray, FloatArray]],
        candidates: IntArray,
        names: Sequence[str],
        index: Mapping[str, int],
        through: Mapping[str, str] | None = None,
    ) -> None:
        self._hits, self._sources = hits, sources
        self._candidates, self._sorted = candidates, np.sort(candidates)
        self._names, self._index = names, index
        self._through = dict(through or {})

    def __getitem__(self, name: str) -> tuple[str, ...]:
        step = self._through.get(name)
        if step is not None:
            start = (step,) if step in self._hits else self._from_hit(step)
            path = None if start is None else (*start, name)
        else:
            path = self._strongest(name)
        if path is None:
            raise KeyError(name)
        return path

    def _strongest(self, name: str) -> tuple[str, ...] | None:
        """``(hit, name)`` for a candidate ``name`` (see :meth:`_from_hit`), else None."""
        node = self._index.get(name, -1)
        at = int(self._sorted.searchsorted(node))
        if node < 0 or at == self._sorted.size or self._sorted[at] != node:
            return None
        return self._from_hit(name)

    def _from_hit(self, name: str) -> tuple[str, ...] | None:
        """``(hit, name)`` with the hit ``name`` co-occurred with most, if any."""
        node = self._index.get(name, -1)
        best, source = 0.0, ""
        for hit, (others, counts) in zip(self._hits, self._sources, strict=True):
            at = int(others.searchsorted(node))  # rows ascend by id
            if at < others.size and others[at] == node and counts[at] > best:
                best, source = float(counts[at]), hit
        return (source, name) if best > 0 else None

    def __iter__(self) -> Iterator[str]:
        names = (self._names[node] for node in self._candidates.tolist())
        found = [name for name in names if self._strongest(name) is not None]
        seen = set(found)
        yield from found
        yield from (name for name in self._through if name not in seen)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def plan(
    hits: list[tuple[str, float]],
    graph: MemoryGraph,
    uses: UseTable,
    rule: ActrRule,
    now: float,
    active: str,
    *,
    enabled: bool = True,
) -> ActrPlan:
    """The ACT-R rule's plan for validated ``hits`` (best first) at time ``now``.

    The candidates are each hit's ``association_fan`` most co-used live neighbours and
    the latest events' nodes. Every one gets A = B + W × lift (the module's formula, with
    a hit's share of the association ``defend_association``); a memory that stopped
    learning g days ago raises ``unused_base`` by ``stale_unused × ln(1 + g)``. Under the
    association gate (``require_association``) a latest event's node that is no
    neighbour of a hit needs two steps of positive log-lift to the hits (see
    :func:`intermediates`; ``association_hops=2``, else it is left out) and loses
    ``indirect_penalty``, and every candidate needs its lift (the mean log-lift with the
    hits) to be at least ``min_association``; the recency prior lets every candidate in.
    ``enabled=False`` (``SynapseConfig.injection_enabled``) plans nothing.

    Examples
    --------
    >>> from synapse_retriever import SynapseConfig, SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["a", "b"], at=0)
    >>> store.plan([("a", 0.9), ("x", 0.5)], at=86400).candidates  # b: B 0 beats x's -6 + 3
    ['b']
    >>> store.use(["readme"], at=0)  # used, but with none of the hits
    >>> store.plan([("a", 0.9), ("x", 0.5)], at=86400).candidates  # gated out
    ['b']
    >>> _ = store.reinforce(["b", "c"], at=0)  # c: two steps from a, through b
    >>> _ = store.reinforce(["d", "e"], at=0)  # elsewhere: N = 3, so S_ab = S_bc = ln 1.5 > 0
    >>> plan = store.plan([("a", 0.9), ("x", 0.5), ("y", 0.4)], at=86400)
    >>> plan.candidates, round(plan.activation["c"], 4)  # c: B 0 - indirect_penalty 1
    (['b', 'c'], -1.0)
    >>> [(h.id, h.path) for h in plan.inject()]
    [('a', ()), ('b', ('a', 'b')), ('c', ('a', 'b', 'c'))]
    >>> recency = SynapseStore(":memory:", config=SynapseConfig.recency())
    >>> _ = recency.reinforce(["a", "b"], at=0)
    >>> recency.use(["readme"], at=0)
    >>> recency.plan([("a", 0.9), ("x", 0.5)], at=86400).candidates  # readme: B 0 too
    ['b', 'readme']
    """
    if not enabled or len(hits) < 2:
        return ActrPlan(hits, rule, rule.unused_base)
    factors = graph.factors(active)
    names = list(dict.fromkeys(node for node, _ in hits))
    ids = np.array([graph.index.get(name, -1) for name in names], np.int64)
    sources = (
        graph.co_uses(ids.tolist(), active, now, fan=rule.association_fan)
        if rule.association_fan
        else [(np.zeros(0, np.int64), np.zeros(0))] * len(names)  # query-blind
    )
    gated = rule.require_association
    two_hops = gated and rule.association_hops == 2
    recent = (
        uses.recent_nodes(factors, until=now) if two_hops or not gated else np.zeros(0, np.int64)
    )
    known = ids[ids >= 0]
    nodes = unique_ids(np.concatenate([recent, known, *(row for row, _ in sources)]))
    counts, base = uses.levels(nodes, now, factors, rule.base_decay)
    events = uses.events(factors)
    latest = uses.latest_time(factors, until=now)
    # a memory that stopped learning g days ago: never-used nodes are less surely worse
    stale = math.log1p(max(0.0, now - latest) / SECONDS_PER_DAY) if latest > -math.inf else 0.0
    unused_base = rule.unused_base + rule.stale_unused * stale
    first_score = {node: score for node, score in reversed(hits)}  # a repeated id: its first
    weights = np.array(source_weights([first_score[name] for name in names]))
    lift = lift_strengths(ids, sources, nodes, counts, events, weights)
    present = np.zeros(nodes.size, bool)
    present[np.searchsorted(nodes, known)] = True
    share = np.where(present, rule.defend_association, 1.0)
    activation = np.where(base == -np.inf, unused_base, base)
    activation = activation + share * rule.association * lift
    # the hits and the strongest candidates are looked up most: by name up front
    by_name = {name: unused_base for name in names}  # never seen: unused_base
    by_name.update(
        zip(
            [graph.names[x] for x in known.tolist()],
            activation[np.searchsorted(nodes, known)].tolist(),
            strict=True,
        )
    )
    movable = [by_name[node] for node, _ in hits[rule.seeds :]]
    floor = min(movable, default=math.inf) + rule.keep_bonus
    eligible = (activation > floor) & ~present
    through: dict[str, str] = {}  # the node between, of the nodes linked in two hops
    if gated:  # an edge with a hit, and at least min_association of lift
        linked = np.zeros(nodes.size, bool)
        linked[np.searchsorted(nodes, np.concatenate([row for row, _ in sources]))] = True
        if two_hops:  # or a latest event's node associated with one associated with a hit
            far = nodes[eligible & ~linked]
            near = unique_ids(np.concatenate([known, nodes[lift > 0]]))
            middle = intermediates(
                far,
                graph.co_uses(far.tolist(), active, now, fan=rule.association_fan),
                near,
                nodes,
                counts,
                events,
            )
            far, middle = far[middle >= 0], middle[middle >= 0]
            at = np.searchsorted(nodes, far)
            linked[at] = True
            activation[at] -= rule.indirect_penalty
            eligible &= activation > floor
            through = {
                graph.names[node]: graph.names[step]
                for node, step in zip(far.tolist(), middle.tolist(), strict=True)
            }
        eligible &= linked & (lift >= rule.min_association)
    strong = np.flatnonzero(eligible)
    order = RankedNames(nodes[strong], activation[strong], graph.names)  # ties by name
    head = len(hits) + rule.max_inject  # what a swap reads first
    by_name.update(zip(order[:head], order.values(head), strict=True))
    return ActrPlan(
        hits,
        rule,
        unused_base,
        NodeValues(nodes, activation, graph.names, graph.index, by_name),
        StrongestSources(names, sources, nodes[strong], graph.names, graph.index, through),
        order,
    )
