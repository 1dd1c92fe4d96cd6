"""The in-memory graph the recall path reads: stored edge states, per namespace.

No I/O here: the store loads rows into a :class:`MemoryGraph` and keeps it current on
every write, so a query never touches SQL.

Examples
--------
>>> from synapse_retriever.config import SynapseConfig
>>> g = MemoryGraph(SynapseConfig())
>>> g.put(Edge("a", "b", "personal", 0.9, 1, 30.0, 0.0, 0.0))
>>> g.merged(now=0.0, active_namespace="personal")["a"]
{'b': 0.9}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import SynapseConfig
from synapse_retriever.decay import effective_weight

__all__ = ["Edge", "MemoryGraph", "MergedView"]


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge as stored at its last reinforcement (``a < b``; times in POSIX seconds).

    ``weight`` is the stored w0; read the decayed weight with
    :meth:`SynapseStore.weight <synapse_retriever.store.SynapseStore.weight>` or
    :meth:`weight_at`.
    """

    a: str
    b: str
    namespace: str
    weight: float
    activation_count: int
    half_life_days: float
    created_at: float
    last_reinforced_at: float

    def weight_at(self, now: float, config: SynapseConfig) -> float:
        """Effective weight at ``now`` (POSIX seconds): decay, LTP floor, pruning to 0.0.

        Examples
        --------
        >>> edge = Edge("a", "b", "personal", 0.8, 1, 30.0, 0.0, 0.0)
        >>> round(edge.weight_at(30 * 86400.0, SynapseConfig()), 12)  # one half-life
        0.4
        """
        return effective_weight(
            self.weight,
            self.half_life_days,
            (now - self.last_reinforced_at) / SECONDS_PER_DAY,
            count=self.activation_count,
            ltp=config.is_ltp_namespace(self.namespace),
            ltp_min_count=config.ltp_min_count,
            ltp_floor=config.ltp_floor,
            prune_threshold=config.prune_threshold,
        )


class MemoryGraph:
    """Stored edge states indexed ``namespace -> node -> neighbour -> Edge`` (both directions)."""

    def __init__(self, config: SynapseConfig) -> None:
        self.config = config
        self._adj: dict[str, dict[str, dict[str, Edge]]] = {}

    def put(self, edge: Edge) -> None:
        """Insert or replace an edge."""
        adj = self._adj.setdefault(edge.namespace, {})
        adj.setdefault(edge.a, {})[edge.b] = edge
        adj.setdefault(edge.b, {})[edge.a] = edge

    def remove(self, namespace: str, a: str, b: str) -> None:
        """Forget an edge if present."""
        adj = self._adj.get(namespace, {})
        for x, y in ((a, b), (b, a)):
            neighbours = adj.get(x)
            if neighbours is not None:
                neighbours.pop(y, None)
                if not neighbours:
                    del adj[x]

    def get(self, namespace: str, a: str, b: str) -> Edge | None:
        """The stored edge between ``a`` and ``b`` in ``namespace``, or None."""
        return self._adj.get(namespace, {}).get(a, {}).get(b)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one edge, sorted."""
        return sorted(ns for ns, adj in self._adj.items() if adj)

    def edges(self, namespace: str | None = None) -> Iterator[Edge]:
        """Every stored edge once (optionally of one namespace)."""
        for ns in [namespace] if namespace is not None else list(self._adj):
            for node, neighbours in self._adj.get(ns, {}).items():
                for other, edge in neighbours.items():
                    if node < other:
                        yield edge

    def neighbours(self, namespace: str, node: str) -> Mapping[str, Edge]:
        """Stored neighbours of ``node`` in ``namespace`` (pruned ones included)."""
        return self._adj.get(namespace, {}).get(node, {})

    def merged(self, now: float, active_namespace: str) -> MergedView:
        """A read-only view of live, merged weights at ``now`` for one query."""
        return MergedView(self, now, self.config.merge_factors(active_namespace))


class MergedView(Mapping[str, Mapping[str, float]]):
    """Adjacency ``node -> {neighbour: merged weight}`` computed lazily, memoized per query.

    The merged weight of an edge is ``min(1, Σ_ns factor(ns) × effective weight)``;
    pruned edges are absent. Only the nodes a query touches are ever computed.
    """

    def __init__(self, graph: MemoryGraph, now: float, factors: dict[str, float]) -> None:
        self._graph = graph
        self._now = now
        self._factors = [(ns, f, graph._adj[ns]) for ns, f in factors.items() if ns in graph._adj]
        self._cache: dict[str, dict[str, float]] = {}

    def __getitem__(self, node: str) -> Mapping[str, float]:
        cached = self._cache.get(node)
        if cached is not None:
            return cached
        config, now = self._graph.config, self._now
        merged: dict[str, float] = {}
        for _, factor, adj in self._factors:
            for other, edge in adj.get(node, {}).items():
                weight = edge.weight_at(now, config)
                if weight > 0.0:
                    merged[other] = merged.get(other, 0.0) + factor * weight
        for other, weight in merged.items():
            if weight > 1.0:
                merged[other] = 1.0
        self._cache[node] = merged
        return merged

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for _, _, adj in self._factors:
            for node in adj:
                if node not in seen and self[node]:
                    seen.add(node)
                    yield node

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def hub_degree(self, node: str) -> int:
        """Live merged degree, exact where the hub factor needs it.

        Nodes whose stored degree is at most ``hub_degree`` have hub factor 1 whatever
        their live degree, so their stored degree is returned without decaying edges.
        """
        bound = sum(len(adj.get(node, ())) for _, _, adj in self._factors)
        if bound <= self._graph.config.hub_degree:
            return bound
        return len(self[node])
