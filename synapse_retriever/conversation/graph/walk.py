"""The conversation graph in memory, and the walk that recalls turns along its edges.

:class:`TemporalGraph` holds the typed edges (turns and entities as nodes); the memory
keeps it current with its SQLite tables, so a retrieval reads no database.
:func:`graph_search` spreads activation from seed nodes along the edges:

Notes
-----
1. Seeds: the query's entities that are nodes, each weighted by its specificity
   ``log((N + 1) / df) / log(N + 1)`` (N turns, df of them mention it: an entity every
   turn mentions weighs ~0), and the query's nearest turns, weighted by similarity.
2. Each hop passes ``a(v) = a(u) × strength(u, v) × damping × hf(u)`` to a neighbour
   (both directions of every edge), ``hf(u) = sqrt(hub_degree / degree(u))`` above
   ``hub_degree`` (the core's hub normalisation), over at most ``fan_out`` of ``u``'s
   strongest edges; a node keeps the best activation that reached it by an edge (a
   seed's own weight does not count) and the path of typed edges that brought it; a
   path never returns to a node it passed. ``depth`` hops at most.
3. Turns reached by at least one edge are the result, best first, each with its path.

References
----------
Anderson (1983), A spreading activation theory of memory; Collins and Loftus (1975).
The conversation-memory design (graph retrieval with decaying, reinforced edges).

Examples
--------
>>> graph = TemporalGraph()
>>> _ = graph.add_edge("turn:1", "turn:2", "FOLLOWED_BY", at=0.0)
>>> _ = graph.add_edge("turn:2", "code:retry_policy", "MENTIONS", at=0.0)
>>> _ = graph.add_edge("turn:9", "code:retry_policy", "MENTIONS", at=0.0)
>>> hits = graph_search(graph, {"code:retry_policy": 1.0}, now=0.0)
>>> [(h.turn_id, round(h.score, 3), [e.type for e in h.path]) for h in hits]
[(9, 0.25, ['MENTIONS']), (2, 0.25, ['MENTIONS']), (1, 0.062, ['MENTIONS', 'FOLLOWED_BY'])]
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.graph.edges import edge_strength
from synapse_retriever.mirror.spreading import hub_factor
from synapse_retriever.persistence.conversation.protocol import TypedEdgeKey

__all__ = ["GraphHit", "TemporalGraph", "TypedEdge", "graph_search", "specificity", "turn_node"]

_DAY_S = 86_400.0


def turn_node(turn_id: int) -> str:
    """The node id of a turn: ``turn:<id>``.

    Examples
    --------
    >>> turn_node(12)
    'turn:12'
    """
    return f"turn:{turn_id}"


@dataclass
class TypedEdge:
    """A typed edge: ``source -type-> target``, made (or last strengthened) at ``at``
    (seconds), with its reinforcement ``count`` and the ``traversals`` since the last."""

    source: str
    target: str
    type: str
    at: float
    count: int = 0
    traversals: int = 0

    @property
    def key(self) -> TypedEdgeKey:
        """``(source, target, type)``: one edge per key."""
        return (self.source, self.target, self.type)

    def strength(self, now: float, decay_rate: float = ContextConfig.edge_decay_rate) -> float:
        """Its strength at ``now`` (seconds): :func:`~.edges.edge_strength`."""
        return edge_strength((now - self.at) / _DAY_S, self.count, decay_rate=decay_rate)


@dataclass
class GraphHit:
    """A turn the walk reached: its id, activation, and the typed edges that led to it."""

    turn_id: int
    score: float
    path: list[TypedEdge] = field(default_factory=list)


class TemporalGraph:
    """Typed edges over turns and entities, with each node's neighbours (both ways).

    Examples
    --------
    >>> graph = TemporalGraph()
    >>> graph.add_edge("turn:1", "name:new york", "MENTIONS", at=0.0)
    True
    >>> graph.add_edge("turn:1", "name:new york", "MENTIONS", at=9.0)  # already there
    False
    >>> len(graph), graph.degree("name:new york"), graph.mentions("name:new york")
    (1, 1, 1)
    """

    def __init__(self) -> None:
        self.edges: dict[TypedEdgeKey, TypedEdge] = {}
        self._neighbours: dict[str, list[TypedEdge]] = defaultdict(list)
        self._turns = 0

    def __len__(self) -> int:
        return len(self.edges)

    def add_edge(
        self,
        source: str,
        target: str,
        type: str,
        *,
        at: float,
        count: int = 0,
        traversals: int = 0,
    ) -> bool:
        """Add an edge unless one of this key exists; True if it was new."""  # fmt: skip
        key = (source, target, type)
        if key in self.edges:
            return False
        edge = TypedEdge(source, target, type, at, count, traversals)
        self.edges[key] = edge
        self._neighbours[source].append(edge)
        if target != source:
            self._neighbours[target].append(edge)
        return True

    def add_turn(self) -> None:
        """Count one more turn (the N of :func:`specificity`)."""
        self._turns += 1

    @property
    def turns(self) -> int:
        """How many turns the graph has seen."""
        return self._turns

    def neighbours(self, node: str) -> list[TypedEdge]:
        """Every edge at ``node``, either way."""
        return self._neighbours.get(node, [])

    def degree(self, node: str) -> int:
        """How many edges touch ``node``."""
        return len(self._neighbours.get(node, ()))

    def mentions(self, node: str) -> int:
        """How many turns mention the entity ``node``."""
        return sum(1 for e in self._neighbours.get(node, ()) if e.type == "MENTIONS")

    def __contains__(self, node: object) -> bool:
        return node in self._neighbours


def specificity(mentions: int, turns: int) -> float:
    """How specific an entity is: ``log((N + 1) / df) / log(N + 1)``, in [0, 1].

    Examples
    --------
    One turn in 99 mentions it: log(100 / 1) / log(100) = 1; all 99: log(100 / 99) /
    log(100) = 0.002.

    >>> specificity(1, 99), round(specificity(99, 99), 3)
    (1.0, 0.002)
    """
    if turns <= 0 or mentions <= 0:
        return 0.0
    return max(0.0, math.log((turns + 1) / mentions) / math.log(turns + 1))


def graph_search(
    graph: TemporalGraph,
    seeds: Mapping[str, float],
    *,
    now: float,
    depth: int = ContextConfig.graph_depth,
    damping: float = ContextConfig.graph_damping,
    fan_out: int = ContextConfig.graph_fan_out,
    hub_degree: int = 50,
    decay_rate: float = ContextConfig.edge_decay_rate,
    allowed: Iterable[str] | None = None,
) -> list[GraphHit]:
    """Turns reached from ``seeds`` along typed edges, best first (see the module notes).

    Parameters
    ----------
    graph : TemporalGraph
    seeds : mapping of node id to weight
        Where the walk starts (entity nodes, turn nodes); absent nodes are ignored.
    now : float
        The time (seconds) at which edge strengths are read.
    depth, damping, fan_out, hub_degree, decay_rate
        Hops at most; the factor per hop; the strongest edges followed per node; the
        degree above which a node's output is damped; the edges' decay per day.
    allowed : iterable of str, optional
        TypedEdge types to follow (default: all).

    Returns
    -------
    list of GraphHit
        Turns reached by at least one edge; ties go to the newer turn. Where ``fan_out``
        cuts between tied edges, the newer turn is followed (then the greater node name, then
        the greater edge type), so the walk does not depend on the order the edges were added
        or loaded in.
    """
    types = frozenset(allowed) if allowed is not None else None
    best: dict[str, tuple[float, list[TypedEdge]]] = {}
    frontier: list[tuple[float, str, str, list[TypedEdge]]] = [
        (float(w), node, node, []) for node, w in seeds.items() if node in graph and w > 0
    ]
    for _ in range(depth):
        reached: dict[str, tuple[float, str, list[TypedEdge]]] = {}
        for activation, start, node, path in frontier:
            edges = [e for e in graph.neighbours(node) if types is None or e.type in types]
            out = activation * damping * hub_factor(len(edges), hub_degree=hub_degree)
            for strength, edge, other in _strongest(edges, node, fan_out, now, decay_rate):
                if other == start or any(other in (e.source, e.target) for e in path):
                    continue  # no cycles
                value = out * strength
                if value > max(reached.get(other, (0.0,))[0], best.get(other, (0.0,))[0]):
                    reached[other] = (value, start, [*path, edge])
        best.update({node: (value, path) for node, (value, _, path) in reached.items()})
        frontier = [(value, start, node, path) for node, (value, start, path) in reached.items()]
        if not frontier:
            break
    hits = [
        GraphHit(int(node[5:]), value, path)
        for node, (value, path) in best.items()
        if node.startswith("turn:")
    ]
    hits.sort(key=lambda hit: (-hit.score, -hit.turn_id))
    return hits


def _strongest(
    edges: list[TypedEdge], node: str, fan_out: int, now: float, decay_rate: float
) -> list[tuple[float, TypedEdge, str]]:
    """The ``fan_out`` strongest of ``node``'s ``edges``, as (strength, edge, other end),
    strongest first; ties go to the newer turn, then to the greater node name and edge type,
    whatever order the edges were added or loaded in.

    >>> graph = TemporalGraph()
    >>> for other in ("turn:9", "turn:10", "code:x"):
    ...     _ = graph.add_edge("turn:1", other, "RELATES_TO", at=0.0)
    >>> [other for _, _, other in _strongest(graph.neighbours("turn:1"), "turn:1", 2, 0.0, 0.05)]
    ['turn:10', 'turn:9']
    """
    ends = [
        (e.strength(now, decay_rate), e, e.target if e.source == node else e.source) for e in edges
    ]
    return heapq.nlargest(fan_out, ends, key=lambda end: (end[0], *_tie_order(end[2]), end[1].type))


def _tie_order(node: str) -> tuple[int, str]:
    """A turn by its id (a newer turn ranks higher), any other node below every turn, by
    name."""
    return (int(node[5:]), "") if node.startswith("turn:") else (0, node)
