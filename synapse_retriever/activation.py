"""Recall: energy spreads two hops out from the seeds, damped at hubs.

Pure functions over an adjacency mapping ``node -> {neighbour: merged weight}``
(a dict of dicts, or the store's live view of its in-memory graph).

Examples
--------
>>> graph = {"verify_token": {"load_keys": 0.9}, "load_keys": {"verify_token": 0.9}}
>>> spread_activation(graph, ["verify_token"]).energy
{'load_keys': 0.54}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Activation", "hub_factor", "spread_activation"]

Adjacency = Mapping[str, Mapping[str, float]]


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


@dataclass(frozen=True)
class Activation:
    """What spreading activation found.

    Attributes
    ----------
    energy : dict[str, float]
        Final energy of every reached non-seed node, hub factor applied: E[m] × hf(m).
    paths : dict[str, tuple[str, ...]]
        For each reached node, the path of its largest single contribution:
        ``(seed, node)`` after one hop, ``(seed, via, node)`` after two.
    """

    energy: dict[str, float] = field(default_factory=dict)
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)


def spread_activation(
    graph: Adjacency,
    seeds: Iterable[str],
    *,
    spread_rate: float = 0.6,
    hub_degree: int = 50,
    degree: Callable[[str], int] | None = None,
) -> Activation:
    """Spread energy 1.0 from each seed for exactly two hops.

    Parameters
    ----------
    graph : Mapping[str, Mapping[str, float]]
        Undirected adjacency with merged, decayed weights in [0, 1]; absent nodes have
        no neighbours.
    seeds : iterable of str
        Seed nodes, energy 1.0 each; duplicates count once.
    spread_rate : float
        Fraction of energy carried per hop (0.6).
    hub_degree : int
        Degree above which a node's hub factor is sqrt(hub_degree / degree).
    degree : callable, optional
        Degree of a node; defaults to ``len(graph[node])``.

    Notes
    -----
    With S the seeds and hf the hub factor::

        E1[m] = min(1, Σ_{s∈S} w(s,m) × rate × hf(s))              m ∉ S
        E2[m] = Σ_{n∈E1} E1[n] × w(n,m) × rate × hf(n)               m ∉ S
        E[m]  = min(1, E1[m] + E2[m]),  returned as E[m] × hf(m)

    Energy never flows into a seed. Propagation uses the unscaled E1; the final
    hub factor keeps a hub from flooding the top-k.

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
    seed_set = dict.fromkeys(seeds)
    empty: Mapping[str, float] = {}
    degree_of = degree if degree is not None else (lambda n: len(graph.get(n, empty)))

    def hf(node: str) -> float:
        return hub_factor(degree_of(node), hub_degree=hub_degree)

    first: dict[str, float] = {}
    best: dict[str, tuple[float, tuple[str, ...]]] = {}
    for seed in seed_set:
        neighbours = graph.get(seed, empty)
        if not neighbours:
            continue
        carry = spread_rate * hf(seed)
        for node, weight in neighbours.items():
            if node in seed_set:
                continue
            flow = weight * carry
            first[node] = first.get(node, 0.0) + flow
            if flow > best.get(node, (-1.0, ()))[0]:
                best[node] = (flow, (seed, node))
    for node, value in first.items():
        first[node] = min(1.0, value)

    second: dict[str, float] = {}
    for via, reached in first.items():
        neighbours = graph.get(via, empty)
        carry = reached * spread_rate * hf(via)
        for node, weight in neighbours.items():
            if node in seed_set:
                continue
            flow = weight * carry
            second[node] = second.get(node, 0.0) + flow
            if flow > best.get(node, (-1.0, ()))[0]:
                best[node] = (flow, (best[via][1][0], via, node))

    final: dict[str, float] = {}
    for node in (*first, *(n for n in second if n not in first)):
        total = min(1.0, first.get(node, 0.0) + second.get(node, 0.0))
        if total > 0.0:
            final[node] = total * hf(node)
    return Activation(energy=final, paths={node: best[node][1] for node in final})
