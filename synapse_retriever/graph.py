"""The in-memory graph the recall path reads: columnar edge state and a CSR adjacency.

No I/O here. The store loads storage rows into a :class:`MemoryGraph` and applies every
later change, so a query never touches SQL. Edges live in NumPy columns indexed by
their storage id (ids are never reused); adjacency is a CSR index over node ids plus a
small log of edges added since it was built, merged back when it grows. A query
decays only the edges it touches, vectorized.

Examples
--------
>>> from synapse_retriever.config import SynapseConfig
>>> g = MemoryGraph(SynapseConfig())
>>> g.add_names(nodes=[(1, "a"), (2, "b")], namespaces=[(1, "personal")])
>>> g.apply([(1, 1, 1, 2, 0.9, 1, 30.0, 0.0, 0.0)])
>>> g.edge("personal", "a", "b").weight
0.9
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from synapse_retriever.activation import Spread, spread
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import SynapseConfig
from synapse_retriever.decay import effective_weight

__all__ = ["Edge", "MemoryGraph"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


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
        return float(
            effective_weight(
                self.weight,
                self.half_life_days,
                (now - self.last_reinforced_at) / SECONDS_PER_DAY,
                count=self.activation_count,
                ltp=config.is_ltp_namespace(self.namespace),
                ltp_min_count=config.ltp_min_count,
                ltp_floor=config.ltp_floor,
                prune_threshold=config.prune_threshold,
            )
        )


_COLUMNS: dict[str, tuple[type, float]] = {
    "ns": (np.int64, 0),
    "a": (np.int64, -1),
    "b": (np.int64, -1),
    "w0": (np.float64, 0.0),
    "count": (np.int64, 0),
    "half_life": (np.float64, 0.0),
    "created": (np.float64, 0.0),
    "last": (np.float64, 0.0),
    "multi": (np.bool_, False),  # the same pair also exists in another namespace
}


class MemoryGraph:
    """Every stored edge, in NumPy columns by storage id, with a CSR adjacency over nodes.

    A removed or never-used slot has ``a == -1``; a pruned edge stays until a sweep
    deletes it (reads see it as weight 0).
    """

    def __init__(self, config: SynapseConfig) -> None:
        self.config = config
        self.names: list[str] = [""]  # node id -> name; id 0 is never used
        self.index: dict[str, int] = {}
        self.ns_names: dict[int, str] = {}
        self.ns_index: dict[str, int] = {}
        self._ltp_ns = np.zeros(1, bool)
        self._capacity = 0
        self._cols: dict[str, npt.NDArray[Any]] = {
            name: np.zeros(0, dtype) for name, (dtype, _) in _COLUMNS.items()
        }
        self._grow(1024)
        self.size = 0  # one past the highest edge id seen
        # CSR over node ids (built for ids < len(indptr) - 1), and the edges added since
        self._indptr = np.zeros(1, np.int64)
        self._entries = np.zeros(0, np.int64)
        self._log: dict[int, list[int]] = {}
        self._log_len = 0
        self._in_log = np.zeros(1, bool)

    # -- columns -----------------------------------------------------------------------

    def _grow(self, needed: int) -> None:
        capacity = max(needed, int(self._capacity * 1.5), 1024)
        for name, (dtype, fill) in _COLUMNS.items():
            column: npt.NDArray[Any] = np.full(capacity, fill, dtype)
            column[: self._capacity] = self._cols[name]
            self._cols[name] = column
        self._capacity = capacity
        c = self._cols
        self._ns, self._a, self._b, self._count = c["ns"], c["a"], c["b"], c["count"]
        self._w0, self._hl, self._last, self._created = (
            c["w0"],
            c["half_life"],
            c["last"],
            c["created"],
        )
        self._multi = c["multi"]

    def add_names(
        self, nodes: Iterable[tuple[int, str]] = (), namespaces: Iterable[tuple[int, str]] = ()
    ) -> None:
        """Learn the names of node and namespace ids."""
        for node_id, name in nodes:
            if node_id >= len(self.names):
                self.names.extend([""] * (node_id + 1 - len(self.names)))
            self.names[node_id] = name
            self.index[name] = node_id
        if self._in_log.size < len(self.names):
            grown = np.zeros(2 * len(self.names), bool)
            grown[: self._in_log.size] = self._in_log
            self._in_log = grown
        for ns_id, name in namespaces:
            self.ns_names[ns_id] = name
            self.ns_index[name] = ns_id
        ltp = np.zeros(max(self.ns_names, default=0) + 1, bool)
        for ns_id, name in self.ns_names.items():
            ltp[ns_id] = self.config.is_ltp_namespace(name)
        self._ltp_ns = ltp

    @property
    def max_node(self) -> int:
        """Highest node id known."""
        return len(self.names) - 1

    @property
    def max_namespace(self) -> int:
        """Highest namespace id known."""
        return max(self.ns_names, default=0)

    # -- writes ------------------------------------------------------------------------

    def apply(self, rows: Sequence[Sequence[float]]) -> None:
        """Insert or overwrite edges from storage rows (``EdgeRow`` order)."""
        if not len(rows):
            return
        table = np.asarray(rows, dtype=np.float64)
        ids = table[:, 0].astype(np.int64)
        top = int(ids.max()) + 1
        if top > self._capacity:
            self._grow(top)
        new = np.unique(ids[self._a[ids] < 0])
        self._ns[ids] = table[:, 1]
        self._a[ids] = table[:, 2]
        self._b[ids] = table[:, 3]
        self._w0[ids] = table[:, 4]
        self._count[ids] = table[:, 5]
        self._hl[ids] = table[:, 6]
        self._created[ids] = table[:, 7]
        self._last[ids] = table[:, 8]
        self.size = max(self.size, top)
        if new.size:
            self._link(new)

    def remove(self, ids: Iterable[int]) -> None:
        """Forget edges by id (their adjacency entries are dropped at the next rebuild)."""
        gone = np.asarray([i for i in ids if 0 <= i < self.size], np.int64)
        self._a[gone] = self._b[gone] = -1
        self._w0[gone] = 0.0

    def _link(self, new: IntArray) -> None:
        """Add new edges to the adjacency and flag pairs present in several namespaces."""
        if len(self.ns_names) > 1:
            self._flag_multi(new)
        if new.size > max(4096, self._entries.size // 8):
            self.rebuild()
            return
        for edge, x, y in zip(
            new.tolist(), self._a[new].tolist(), self._b[new].tolist(), strict=True
        ):
            self._log.setdefault(x, []).append(edge)
            self._log.setdefault(y, []).append(edge)
            self._in_log[x] = self._in_log[y] = True
        self._log_len += 2 * new.size
        if self._log_len > max(4096, self._entries.size // 8):
            self.rebuild()

    def _flag_multi(self, new: IntArray) -> None:
        """Flag new edges whose pair is stored in another namespace too (and their twins)."""
        a, b = self._a[new], self._b[new]
        by_lower = np.where(self.degree_bound(a) <= self.degree_bound(b), a, b)
        nodes = np.unique(by_lower)
        _, edges = self._incident(nodes)
        edges = np.union1d(edges, new)
        key = self._a[edges] * (self.max_node + 1) + self._b[edges]
        keys, counts = np.unique(key, return_counts=True)
        shared = keys[counts > 1]
        if shared.size:
            self._multi[edges[np.isin(key, shared)]] = True

    def rebuild(self) -> None:
        """Rebuild the CSR adjacency from the live edges and empty the log."""
        live = np.flatnonzero(self._a[: self.size] >= 0)
        ends = np.concatenate([self._a[live], self._b[live]])
        edges = np.concatenate([live, live])
        order = np.argsort(ends, kind="stable")
        self._entries = edges[order]
        counts = np.bincount(ends, minlength=self.max_node + 1)
        self._indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if len(self.ns_names) > 1:  # one vectorized pass flags every multi-namespace pair
            key = self._a[live] * (self.max_node + 1) + self._b[live]
            keys, counts = np.unique(key, return_counts=True)
            self._multi[live] = np.isin(key, keys[counts > 1])
        self._log.clear()
        self._log_len = 0
        self._in_log[:] = False

    # -- reads -------------------------------------------------------------------------

    def _incident(self, nodes: IntArray) -> tuple[IntArray, IntArray]:
        """``(owner position, edge id)`` of every adjacency entry of sorted unique ``nodes``."""
        built = self._indptr.size - 1
        inside = np.minimum(nodes, built)
        starts = self._indptr[inside]
        lengths = np.where(nodes < built, self._indptr[np.minimum(inside + 1, built)] - starts, 0)
        total = int(lengths.sum())
        owner = np.repeat(np.arange(nodes.size), lengths)
        offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths - starts, lengths)
        edges = self._entries[offsets]
        if self._log_len:
            logged = np.flatnonzero(self._in_log[nodes])
            if logged.size:
                extra = [self._log[n] for n in nodes[logged].tolist()]
                owner = np.concatenate([owner, np.repeat(logged, [len(x) for x in extra])])
                edges = np.concatenate([edges, np.fromiter(chain.from_iterable(extra), np.int64)])
        alive = self._a[edges] >= 0
        return owner[alive], edges[alive]

    def degree_bound(self, nodes: IntArray) -> IntArray:
        """Stored degree of each node over every namespace: an upper bound of its live degree."""
        built = self._indptr.size - 1
        inside = np.minimum(nodes, built)
        bound = np.where(
            nodes < built, self._indptr[np.minimum(inside + 1, built)] - self._indptr[inside], 0
        )
        if self._log_len:
            logged = np.flatnonzero(self._in_log[nodes])
            bound[logged] += np.asarray(
                [len(self._log[n]) for n in nodes[logged].tolist()], np.int64
            )
        return bound

    def weights(self, edges: IntArray, now: float) -> FloatArray:
        """Effective weights of edge ids at ``now``: decay, LTP floor, pruning to 0."""
        config = self.config
        return np.asarray(
            effective_weight(
                self._w0[edges],
                self._hl[edges],
                (now - self._last[edges]) / SECONDS_PER_DAY,
                count=self._count[edges],
                ltp=self._ltp_ns[self._ns[edges]],
                ltp_min_count=config.ltp_min_count,
                ltp_floor=config.ltp_floor,
                prune_threshold=config.prune_threshold,
            )
        )

    def factors(self, active_namespace: str) -> FloatArray:
        """Merge factor per namespace id for a query in ``active_namespace``."""
        factors = np.zeros(self.max_namespace + 1)
        for name, factor in self.config.merge_factors(active_namespace).items():
            ns_id = self.ns_index.get(name)
            if ns_id is not None:
                factors[ns_id] = factor
        return factors

    def expand(
        self, nodes: IntArray, now: float, factors: FloatArray
    ) -> tuple[IntArray, IntArray, FloatArray]:
        """Live merged neighbours of sorted unique ``nodes`` (see ``activation.Expand``)."""
        owner, edges = self._incident(nodes)
        factor = factors[self._ns[edges]]
        read = factor > 0
        owner, edges, factor = owner[read], edges[read], factor[read]
        weight = factor * self.weights(edges, now)
        live = weight > 0
        owner, edges, weight = owner[live], edges[live], weight[live]
        other = self._a[edges] + self._b[edges] - nodes[owner]
        multi = self._multi[edges]
        if multi.any():  # a pair in several namespaces: one merged weight, capped at 1
            key = owner[multi] * (self.max_node + 1) + other[multi]
            keys, inverse = np.unique(key, return_inverse=True)
            merged = np.minimum(1.0, np.bincount(inverse, weight[multi]))
            single = ~multi
            owner = np.concatenate([owner[single], keys // (self.max_node + 1)])
            other = np.concatenate([other[single], keys % (self.max_node + 1)])
            weight = np.concatenate([weight[single], merged])
        return owner, other, weight

    def spread(
        self,
        seeds: Sequence[str],
        now: float,
        active_namespace: str,
        *,
        report_min: float = 0.0,
        report: Iterable[str] = (),
    ) -> Spread:
        """Spreading activation from named seeds (unknown names spread nothing)."""
        factors = self.factors(active_namespace)
        config = self.config
        return spread(
            [self.index[s] for s in seeds if s in self.index],
            lambda nodes: self.expand(nodes, now, factors),
            self.max_node + 1,
            spread_rate=config.spread_rate,
            hub_degree=config.hub_degree,
            report_min=report_min,
            report=[self.index[r] for r in report if r in self.index],
            degree_bound=self.degree_bound,
        )

    # -- stored state ------------------------------------------------------------------

    def edge(self, namespace: str, a: str, b: str) -> Edge | None:
        """The stored edge between ``a`` and ``b`` in ``namespace``, or None."""
        ns_id, x, y = self.ns_index.get(namespace), self.index.get(a), self.index.get(b)
        if ns_id is None or x is None or y is None:
            return None
        _, edges = self._incident(np.asarray([x], np.int64))
        match = edges[(self._a[edges] + self._b[edges] == x + y) & (self._ns[edges] == ns_id)]
        return self._edge(int(match[0])) if match.size else None

    def _edge(self, edge: int) -> Edge:
        return Edge(
            self.names[int(self._a[edge])],
            self.names[int(self._b[edge])],
            self.ns_names[int(self._ns[edge])],
            float(self._w0[edge]),
            int(self._count[edge]),
            float(self._hl[edge]),
            float(self._created[edge]),
            float(self._last[edge]),
        )

    def live_ids(self, namespace: str | None = None) -> IntArray:
        """Ids of stored (not deleted) edges, optionally of one namespace."""
        ids = np.flatnonzero(self._a[: self.size] >= 0)
        if namespace is not None:
            ids = ids[self._ns[ids] == self.ns_index.get(namespace, -1)]
        return ids

    def edges(self, ids: IntArray) -> Iterator[Edge]:
        """Stored edges by id."""
        for edge in ids.tolist():
            yield self._edge(edge)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one stored edge, sorted."""
        used = np.unique(self._ns[self.live_ids()])
        return sorted(self.ns_names[int(i)] for i in used)

    def nbytes(self) -> int:
        """Bytes held by the arrays (columns, adjacency, log)."""
        arrays = [*self._cols.values(), self._indptr, self._entries, self._in_log]
        return sum(a.nbytes for a in arrays)
