"""The in-memory graph the recall path reads: columnar edge state and a CSR adjacency.

No I/O here. The store loads storage rows into a :class:`MemoryGraph` and applies every
later change, so a query never touches SQL. Edges live in NumPy columns indexed by
their storage id (ids are never reused); adjacency is a CSR index over node ids plus a
log of edges added since it was built, folded in when it grows. For each active
namespace, a *view* holds every entry's merged live weight and every node's hub factor
as sparse matrices, so spreading activation reads only the rows it spreads through.

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

import math
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import sparse

from synapse_retriever._arrays import group_sums, lengthen, lower_bounds, nth_largest
from synapse_retriever._types import FloatArray, IntArray
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import Learning, SynapseConfig
from synapse_retriever.learning.decay import ArrayLike, effective_weight, pruned_at
from synapse_retriever.mirror.spreading import Spread, hub_factors, spread
from synapse_retriever.persistence.rows import EDGE_COLUMNS, EdgeTable, rows_array

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Edge", "EdgeColumns", "MemoryGraph"]


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge as stored at its last reinforcement (``a < b``; times in POSIX seconds).

    ``weight`` is the stored w0; read the decayed weight with
    :meth:`SynapseStore.weight <synapse_retriever.store.SynapseStore.weight>` or
    :meth:`weight_at`.

    Examples
    --------
    >>> from synapse_retriever import SynapseStore
    >>> store = SynapseStore(":memory:")
    >>> _ = store.reinforce(["auth/jwt.py", "config/keys.py"], at=0)
    >>> edge = store.edge("auth/jwt.py", "config/keys.py")
    >>> edge.weight, edge.activation_count, edge.half_life_days
    (0.3, 1, 30.0)
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
        learning = config.learning
        return float(
            _weights(
                learning,
                now,
                w0=self.weight,
                half_life_days=self.half_life_days,
                last_reinforced_at=self.last_reinforced_at,
                count=self.activation_count,
                ltp=learning.is_ltp_namespace(self.namespace),
            )
        )


def _weights(
    learning: Learning,
    now: float,
    *,
    w0: ArrayLike,
    half_life_days: ArrayLike,
    last_reinforced_at: ArrayLike,
    count: ArrayLike,
    ltp: bool | npt.NDArray[np.bool_],
) -> FloatArray:
    """Effective weights at ``now`` of edges stored as given: :func:`effective_weight`
    with the configuration's LTP floor and prune threshold."""
    return np.asarray(
        effective_weight(
            w0,
            half_life_days,
            (now - last_reinforced_at) / SECONDS_PER_DAY,
            count=count,
            ltp=ltp,
            ltp_min_count=learning.ltp_min_count,
            ltp_floor=learning.ltp_floor,
            prune_threshold=learning.prune_threshold,
        )
    )


class EdgeColumns(NamedTuple):
    """Stored edges as columns, one entry per edge: copies, which later writes leave as
    they are (see :meth:`MemoryGraph.columns`).

    Examples
    --------
    >>> g = MemoryGraph(SynapseConfig())
    >>> g.add_names(nodes=[(1, "a"), (2, "b")], namespaces=[(1, "personal")])
    >>> g.apply([(1, 1, 1, 2, 0.8, 1, 30.0, 0.0, 0.0)])
    >>> edges = g.columns()
    >>> edges.a.tolist(), edges.b.tolist(), edges.weight.tolist()
    ([1], [2], [0.8])
    >>> edges.weights_at(30 * 86400.0, g.config.learning).round(12).tolist()  # one half-life
    [0.4]
    """

    namespace: npt.NDArray[np.int32]
    """Namespace id."""
    a: npt.NDArray[np.int32]
    """Node id of one end."""
    b: npt.NDArray[np.int32]
    """Node id of the other end."""
    weight: FloatArray
    """Stored weight (w0), at the last reinforcement."""
    activation_count: npt.NDArray[np.int32]
    half_life_days: FloatArray
    last_reinforced_at: FloatArray
    """POSIX seconds."""
    ltp: npt.NDArray[np.bool_]
    """Whether the namespace allows the LTP floor."""

    def weights_at(self, now: float, learning: Learning) -> FloatArray:
        """Effective weights at ``now`` (POSIX seconds): decay, LTP floor, pruning to 0.0."""
        return _weights(
            learning,
            now,
            w0=self.weight,
            half_life_days=self.half_life_days,
            last_reinforced_at=self.last_reinforced_at,
            count=self.activation_count,
            ltp=self.ltp,
        )


_COLUMNS: dict[str, tuple[type, float]] = {
    "ns": (np.int32, 0),
    "a": (np.int32, -1),  # -1: a slot never used, or a deleted edge
    "b": (np.int32, -1),
    "count": (np.int32, 0),  # at most learning.decay.MAX_COUNT
    "w0": (np.float64, 0.0),
    "half_life": (np.float64, 1.0),
    "created": (np.float64, 0.0),
    "last": (np.float64, 0.0),
    "pruned_at": (np.float64, -np.inf),  # when its effective weight reaches 0 (decay.pruned_at)
    "multi": (np.bool_, False),  # the same pair is stored in another namespace too
    "pos_a": (np.int32, -1),  # where the edge's two adjacency entries sit (-1: in the log)
    "pos_b": (np.int32, -1),
}
_TOGETHER = ("pruned_at", "count", "ns", "multi")
"""Columns stored side by side, one record per edge: a cold co-use row reads the four
for each of a node's edges, scattered over the graph, in one gather of their records
(measured at 1M edges, the 39,731 edges of a hub: 1.1 ms for the columns one by one, 0.8 ms
for the records, bound by the memory's latency)."""

_ALIASES = (
    "_ns", "_a", "_b", "_count", "_w0", "_hl", "_last", "_created", "_multi", "_pos_a",
    "_pos_b", "_pruned_at",
)  # fmt: skip
"""The attributes that name a column (each also in ``_cols``)."""

_ID = EDGE_COLUMNS.index("id")
_FROM_ROW = {
    column: EDGE_COLUMNS.index(field)
    for column, field in (
        ("ns", "namespace"),
        ("a", "a"),
        ("b", "b"),
        ("w0", "weight"),
        ("count", "activation_count"),
        ("half_life", "half_life_days"),
        ("created", "created_at"),
        ("last", "last_reinforced_at"),
    )
}
"""Each column set from an edge row, and its column in an edge table (``EDGE_COLUMNS``)."""


_PAIR_SHIFT = 31
"""A pair's key in the log's index: ``a << 31 | b`` (node ids are below 2^31: int32)."""

MAX_VIEWS = 4
"""Recall views kept at once (one per active namespace recently queried)."""

PRUNE_MARGIN_S = 1.0
"""Within this many seconds of an edge's closed-form prune time, liveness is decided by
its effective weight (the two can differ by rounding near the boundary)."""

_ROUNDING = 1e-12
"""Relative room left for rounding where a merged count (a sum of products) is compared
with a bound of stored counts."""

CANDIDATE_ROW = 4
"""A co-use row of more than this many times ``fan`` entries is read from its candidates
(``MemoryGraph._entries``; measured at 1M edges, the row of a hub of 39,731 neighbours:
0.15 ms, against 0.49 to 0.53 ms for the whole row's gather)."""

MAX_CO_USE_ENTRIES = 1_000_000
"""Neighbours (16 bytes each), plus one per row, held by the cached co-use rows at most;
the least recently used rows go first."""


class _CoUseRow(NamedTuple):
    """A node's cached co-use row: its neighbours, their co-use counts, and the open
    interval of times it is exact in."""

    others: IntArray
    counts: FloatArray
    after: float
    before: float


def _validity(
    owner: IntArray, when: FloatArray, alive: npt.NDArray[np.bool_], rows: int, *, grouped: bool
) -> tuple[list[float], list[float]]:
    """Per row (``owner`` 0 to rows − 1, ascending if ``grouped``), the open interval of
    times its live edges stay those of ``alive``: after the latest prune time of a dead
    edge, before the earliest of a live one, ``PRUNE_MARGIN_S`` inside both.

    Examples
    --------
    >>> owner, when = np.array([0, 0, 1]), np.array([10.0, 50.0, 30.0])
    >>> _validity(owner, when, np.array([False, True, True]), 3, grouped=True)
    ([11.0, -inf, -inf], [49.0, 29.0, inf])
    """
    dead = None if alive.all() else np.where(alive, -np.inf, when)  # usually none
    living = when if dead is None else np.where(alive, when, np.inf)
    after, before = np.full(rows, -np.inf), np.full(rows, np.inf)
    if grouped:  # one reduction per row's run (a hub's 40k edges: 4x np.maximum.at)
        bounds = np.searchsorted(owner, np.arange(rows + 1))
        starts = bounds[:-1]
        some = bounds[1:] > starts
        if some.any():
            before[some] = np.minimum.reduceat(living, starts[some])
            if dead is not None:
                after[some] = np.maximum.reduceat(dead, starts[some])
    else:
        np.minimum.at(before, owner, living)
        if dead is not None:
            np.maximum.at(after, owner, dead)
    return (after + PRUNE_MARGIN_S).tolist(), (before - PRUNE_MARGIN_S).tolist()


def _held(row: _CoUseRow) -> int:
    """What a cached row counts against ``MAX_CO_USE_ENTRIES``: its neighbours, and one
    for the row itself (an empty row costs memory too)."""
    return int(row.others.size) + 1


@dataclass
class _View:
    """Merged live weights for one active namespace, evaluated at time ``at``."""

    at: float
    factors: FloatArray  # merge factor per namespace id
    data: FloatArray  # aligned with the CSR entries
    hub: FloatArray  # hub factor per node
    main: sparse.csr_matrix
    log: sparse.csr_matrix | None = None  # edges added since the CSR was built
    log_degree: IntArray | None = None
    dirty: set[int] = field(default_factory=set)  # nodes whose hub factor is stale


def strongest(others: IntArray, weights: FloatArray, fan: int) -> tuple[IntArray, FloatArray]:
    """The ``fan`` entries of largest weight (ties to the smaller id), by id ascending.

    Examples
    --------
    >>> others, weights = strongest(np.array([9, 4, 7, 2]), np.array([1.0, 3.0, 1.0, 1.0]), 3)
    >>> others.tolist(), weights.tolist()
    ([2, 4, 7], [1.0, 3.0, 1.0])
    """
    if fan <= 0:
        return others[:0], weights[:0]
    if others.size > fan:
        cut = nth_largest(weights, fan)
        above = np.flatnonzero(weights > cut)
        tied = np.flatnonzero(weights == cut)
        tied = tied[np.argsort(others[tied], kind="stable")[: fan - above.size]]
        pick = np.concatenate([above, tied])
        others, weights = others[pick], weights[pick]
    order = np.argsort(others, kind="stable")
    return others[order], weights[order]


def _rows_ascending(indptr: npt.NDArray[np.int32], other: npt.NDArray[np.int32]) -> bool:
    """Whether each adjacency row's other ends ascend (equal for a pair's twins), as a
    write's binary search by pair needs (:meth:`MemoryGraph.rows`)."""
    starts = np.zeros(other.size, bool)
    starts[indptr[:-1][indptr[:-1] < other.size]] = True  # where a row begins
    return not np.any((np.diff(other) < 0) & ~starts[1:])


class MemoryGraph:
    """Every stored edge, in NumPy columns by storage id, with a CSR adjacency over nodes.

    Recall reads :meth:`view`: per active namespace, the merged live weight of every
    adjacency entry and the hub factor of every node, evaluated at a time within
    ``config.spreading.weight_tolerance_s`` of the query's and kept current by every write, so a
    query only reads the rows it spreads through.
    """

    def __init__(self, config: SynapseConfig) -> None:
        self.config = config
        self.names: list[str] = [""]  # node id -> name; id 0 is never used
        self.index: dict[str, int] = {}
        self.ns_names: dict[int, str] = {}
        self.ns_index: dict[str, int] = {}
        self._ltp_ns = np.zeros(1, bool)
        self._capacity = 0
        self._record = np.dtype([(name, _COLUMNS[name][0]) for name in _TOGETHER])
        self._cols: dict[str, npt.NDArray[Any]] = {
            name: np.zeros(0, dtype) for name, (dtype, _) in _COLUMNS.items()
        }
        self._record_array = np.zeros(0, self._record)  # the columns of _TOGETHER
        self._grow(1024)
        self.size = 0  # one past the highest edge id seen
        # CSR over node ids < built, entries sorted by node: the other end and the edge id
        self._built = 0
        self._indptr = np.zeros(1, np.int32)
        self._other = np.zeros(0, np.int32)
        self._entry_edge = np.zeros(0, np.int32)
        self._entry_count = np.zeros(0, np.int32)  # each entry's edge's activation count
        self._log = np.zeros(1024, np.int64)  # ids of edges added since the CSR was built
        self._log_len = 0
        self._log_of: dict[int, list[int]] = {}  # node -> its edges in the log
        # the pair keys of the log's first _log_indexed edges, ascending, and those edges
        self._log_keys = np.zeros(0, np.int64)
        self._log_ids = np.zeros(0, np.int64)
        self._log_indexed = 0
        self._unmerged = False  # a pair in two namespaces is split between the log and the CSR
        self._views: OrderedDict[str, _View] = OrderedDict()  # most recently used last
        # per active namespace (at most MAX_VIEWS, as the views), node -> co-use row and
        # the open interval of times it is exact in; least recently used first
        self._co_uses: OrderedDict[str, OrderedDict[int, _CoUseRow]] = OrderedDict()
        self._co_use_entries = 0  # held by every cached row (at most MAX_CO_USE_ENTRIES)

    # -- columns and names -------------------------------------------------------------

    def _grow(self, needed: int) -> None:
        # an eighth more than needed: a graph loaded whole takes its first writes without
        # growing its columns (measured at 1M edges: 28 ms, the first write after opening)
        capacity = max(needed + needed // 8, int(self._capacity * 1.5), 1024)
        for name in _TOGETHER:
            del self._cols[name]  # views of the records: named again below
        for alias in (*_ALIASES, "_records"):  # other names for the columns: without them,
            self.__dict__.pop(alias, None)  # each grows in place (lengthen), not copied
        try:
            lengthen(self.__dict__, "_record_array", capacity)
            for name in _COLUMNS:
                if name not in _TOGETHER:
                    lengthen(self._cols, name, capacity)
        finally:  # even after a MemoryError: every column, at least as long as before
            self._name_columns()
        for name, (_, fill) in _COLUMNS.items():
            if fill:  # zero already
                self._cols[name][self._capacity :] = fill
        self._capacity = capacity

    def _name_columns(self) -> None:
        """The records' fields in ``_cols``, and each column's attribute."""
        records = self._record_array
        for name in _TOGETHER:
            self._cols[name] = records[name]
        self._records = records.view(np.uint8).reshape(records.size, records.dtype.itemsize)
        c = self._cols
        self._ns, self._a, self._b, self._count = c["ns"], c["a"], c["b"], c["count"]
        self._w0, self._hl, self._last, self._created = (
            c["w0"],
            c["half_life"],
            c["last"],
            c["created"],
        )
        self._multi, self._pos_a, self._pos_b = c["multi"], c["pos_a"], c["pos_b"]
        self._pruned_at = c["pruned_at"]

    def add_names(
        self, nodes: Iterable[tuple[int, str]] = (), namespaces: Iterable[tuple[int, str]] = ()
    ) -> None:
        """Learn the names of node and namespace ids."""
        for node_id, name in nodes:
            if node_id >= len(self.names):
                self.names.extend([""] * (node_id + 1 - len(self.names)))
            self.names[node_id] = name
            self.index[name] = node_id
        added = False
        for ns_id, name in namespaces:
            added |= ns_id not in self.ns_names
            self.ns_names[ns_id] = name
            self.ns_index[name] = ns_id
        if added:
            ltp = np.zeros(max(self.ns_names) + 1, bool)
            for ns_id, name in self.ns_names.items():
                ltp[ns_id] = self.config.learning.is_ltp_namespace(name)
            self._ltp_ns = ltp
            self._views.clear()  # merge factors depend on which namespaces exist
            self._co_uses.clear()
            self._co_use_entries = 0

    @property
    def n(self) -> int:
        """Number of node ids (the largest id plus one)."""
        return len(self.names)

    @property
    def max_node(self) -> int:
        """Highest node id known."""
        return len(self.names) - 1

    @property
    def max_namespace(self) -> int:
        """Highest namespace id known."""
        return max(self.ns_names, default=0)

    def check_names(self) -> None:
        """Raise ``ValueError`` naming the first live edge whose node or namespace has no
        name: rows no store writes (a node's row deleted by hand), which a read of the edge
        would fail on later.

        Examples
        --------
        >>> graph = MemoryGraph(SynapseConfig())
        >>> graph.add_names([(1, "a")], [(1, "personal")])
        >>> graph.apply([[1, 1, 1, 2, 0.3, 1, 30.0, 0.0, 0.0]])
        >>> graph.check_names()
        Traceback (most recent call last):
        ...
        ValueError: edge 1 joins node ids 1 and 2 in namespace id 1: node 2 has no name
        """
        live = np.flatnonzero(self._a[: self.size] >= 0)
        if not live.size:
            return
        named = np.fromiter(map(bool, self.names), bool, len(self.names))
        ends = np.stack([self._a[live], self._b[live]])
        inside = ends < named.size
        good = inside & named[np.where(inside, ends, 0)]
        known = np.isin(self._ns[live], np.fromiter(self.ns_names, np.int64))
        bad = np.flatnonzero(~good.all(axis=0) | ~known)
        if not bad.size:
            return
        edge, first = int(live[bad[0]]), int(bad[0])
        a, b, ns = int(self._a[edge]), int(self._b[edge]), int(self._ns[edge])
        unnamed = f"namespace {ns}" if not known[first] else f"node {b if good[0, first] else a}"
        raise ValueError(
            f"edge {edge} joins node ids {a} and {b} in namespace id {ns}: {unnamed} has no name"
        )

    # -- writes ------------------------------------------------------------------------

    def apply(self, rows: Sequence[Sequence[float]] | FloatArray) -> None:
        """Insert or overwrite edges from storage rows (``EdgeRow`` order)."""
        if not len(rows):
            return
        table = rows if isinstance(rows, np.ndarray) else rows_array(rows)
        ids = table[:, _ID].astype(np.int64)
        top = int(ids.max()) + 1
        if top > self._capacity:
            self._grow(top)
        fresh = self._a[ids] < 0
        for name, column in _FROM_ROW.items():
            self._cols[name][ids] = table[:, column]
        self._pruned_at[ids] = self._prune_times(ids)
        self._count_entries(ids)
        self.size = max(self.size, top)
        if fresh.any():
            self._add(ids[fresh])  # storage ids are unique: no need to sort them
        self._touch(ids[~fresh])

    def remove(self, ids: Iterable[int]) -> None:
        """Forget edges by id."""
        gone = np.asarray([i for i in ids if 0 <= i < self.size], np.int64)
        gone = gone[self._a[gone] >= 0]
        if gone.size:
            self._w0[gone] = 0.0
            self._pruned_at[gone] = -np.inf
            self._count_entries(gone, removed=True)
            self._touch(gone)
            self._a[gone] = self._b[gone] = -1

    def _count_entries(self, edges: IntArray, *, removed: bool = False) -> None:
        """Copy the activation counts of ``edges`` to their adjacency entries, if any (0
        for ``removed`` edges, whose entries stay until the next rebuild)."""
        main = edges[self._pos_a[edges] >= 0]
        if main.size:
            count = 0 if removed else self._count[main]
            self._entry_count[self._pos_a[main]] = count
            self._entry_count[self._pos_b[main]] = count

    def _add(self, new: IntArray) -> None:
        """New edges go to the log. A pair also stored in another namespace needs a rebuild
        before the next recall view (one merged, capped weight per pair needs both in the
        same structure); co-use rows merge such pairs themselves."""
        self._forget_co_uses(new)  # a rebuild keeps the rows: forget its ends' first
        needed = self._log_len + new.size
        if needed > self._log.size:
            self._log = np.resize(self._log, max(needed, 2 * self._log.size))
        self._log[self._log_len : needed] = new
        self._log_len = needed
        if needed > max(8192, self._other.size // 16):
            self.rebuild()  # folded in at once: the log need not be indexed by node
            return
        if len(self.ns_names) > 1 and self._twins(new):
            self._unmerged = True
            self._views.clear()
        ends = zip(new.tolist(), self._a[new].tolist(), self._b[new].tolist(), strict=True)
        for edge, a, b in ends:
            self._log_of.setdefault(a, []).append(edge)
            self._log_of.setdefault(b, []).append(edge)
        for view in self._views.values():
            view.log = None

    def _twins(self, new: IntArray) -> bool:
        """Flag new edges whose pair is also stored in another namespace, and those twins;
        True if any. Each pair is looked up in the row of its end of smaller degree (new
        edges are not in the adjacency yet), never in the whole graph."""
        keys = self._pair_key(new).tolist()
        repeated = {key for key, count in Counter(keys).items() if count > 1}
        twins: list[int] = []
        ends = zip(new.tolist(), self._a[new].tolist(), self._b[new].tolist(), keys, strict=True)
        for edge, a, b, key in ends:
            x, y = (a, b) if self._degree(a) <= self._degree(b) else (b, a)
            row = self.incident(x)
            same = row[self._a[row] + self._b[row] - x == y]
            if same.size or key in repeated:
                twins += [edge, *same.tolist()]
        self._multi[twins] = True
        return bool(twins)

    def _degree(self, node: int) -> int:
        """Stored edges of ``node``, deleted ones included."""
        built = int(self._indptr[node + 1] - self._indptr[node]) if node < self._built else 0
        return built + len(self._log_of.get(node, ()))

    def _pair_key(self, edges: IntArray) -> IntArray:
        key: IntArray = self._a[edges].astype(np.int64) * self.n + self._b[edges]
        return key

    def _touch(self, edges: IntArray) -> None:
        """Bring every view up to date with changed edges (weight, or removal)."""
        self._forget_co_uses(edges)
        if edges.size == 0 or not self._views:
            return
        in_main = edges[self._pos_a[edges] >= 0]
        if self._multi[edges].any():
            self._views.clear()  # merged pairs: recompute from scratch at the next query
            return
        ends = np.concatenate([self._a[edges], self._b[edges]]).tolist()
        for view in self._views.values():
            if in_main.size:
                value = view.factors[self._ns[in_main]] * self.weights(in_main, view.at)
                view.data[self._pos_a[in_main]] = value
                view.data[self._pos_b[in_main]] = value
            if in_main.size < edges.size:
                view.log = None
            view.dirty.update(ends)

    def rebuild(self) -> None:
        """Rebuild the CSR adjacency from the live edges and empty the log.

        Where an adjacency was built before, the log's entries are merged into it (its
        entries stay sorted by node, then the other end): linear in the graph, not a sort
        of it (measured at 1M edges, a log of 119,220 edges: 0.16 s in all, most of it the
        first touch of fresh arrays; the sort of 2M entries alone took 0.09 s).
        """
        n = self.n
        other: npt.NDArray[np.int32]
        edge: npt.NDArray[np.int32]
        if self._built and self._other.size:
            other, edge, count, lengths = self._merged(n)
        else:
            live = self.live_ids()
            owner = np.concatenate([self._a[live], self._b[live]]).astype(np.int64)
            other64 = np.concatenate([self._b[live], self._a[live]]).astype(np.int64)
            order = np.argsort(owner * n + other64)  # by node, then by the other end
            other = other64[order].astype(np.int32)
            edge = np.concatenate([live, live])[order].astype(np.int32)
            count = self._count[edge]
            lengths = np.bincount(owner, minlength=n)
        self._other, self._entry_edge, self._entry_count = other, edge, count
        side_a = other == self._b[edge]  # the entry in the row of the edge's end a
        self._pos_a[: self.size] = -1
        self._pos_b[: self.size] = -1
        self._pos_a[edge[side_a]] = np.flatnonzero(side_a)
        side_a = ~side_a
        self._pos_b[edge[side_a]] = np.flatnonzero(side_a)
        self._built = n
        self._indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        if len(self.ns_names) > 1:  # a pair in two namespaces: two entries side by side
            starts = np.zeros(other.size + 1, bool)
            starts[self._indptr] = True  # where a node's row begins: no twin across it
            twin = (other[1:] == other[:-1]) & ~starts[1:-1]
            self._multi[edge] = False
            self._multi[edge[1:][twin]] = True
            self._multi[edge[:-1][twin]] = True
        self._log_len = 0
        self._log_of.clear()
        self._log_keys, self._log_ids = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._log_indexed = 0
        self._unmerged = False
        self._views.clear()  # co-use rows stay: a rebuild moves edges, it changes none

    def _merged(
        self, n: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32], IntArray]:
        """The adjacency's other ends, edges and counts with the log's entries merged in,
        and the length of each node's row: without a deleted edge's entries, every row
        still sorted by the other end. Few temporaries the size of the adjacency: at 1M
        edges each is fresh memory, and this process's first touch of its pages (measured
        here) took longer than the work done in them."""
        lengths = np.zeros(n, np.int64)
        lengths[: self._built] = np.diff(self._indptr)
        other, edge, count = self._other, self._entry_edge, self._entry_count
        keep = self._a[edge] >= 0
        if not keep.all():
            owner = np.repeat(np.arange(self._built), lengths[: self._built])
            lengths -= np.bincount(owner[~keep], minlength=n)
            other, edge, count = other[keep], edge[keep], count[keep]
        del keep
        log = self._log[: self._log_len]
        log = log[self._a[log] >= 0]
        new_owner = np.concatenate([self._a[log], self._b[log]]).astype(np.int64)
        new_key = new_owner * n + np.concatenate([self._b[log], self._a[log]])
        order = np.argsort(new_key)
        new_key = new_key[order]
        key = np.repeat(np.arange(n, dtype=np.int64) * n, lengths)
        key += other
        at = np.searchsorted(
            key, new_key
        )  # before an equal key: a twin's entries stay side by side
        del key
        at += np.arange(at.size)  # where each new entry lands in the merged arrays
        old = np.ones(other.size + at.size, bool)
        old[at] = False
        new_edge = np.concatenate([log, log])[order]
        merged: list[npt.NDArray[np.int32]] = []
        for column, added in (
            (other, (new_key % n).astype(np.int32)),
            (edge, new_edge.astype(np.int32)),
            (count, self._count[new_edge]),
        ):
            out = np.empty(old.size, column.dtype)
            out[at] = added
            out[old] = column
            merged.append(out)
        lengths += np.bincount(new_owner, minlength=n)
        return merged[0], merged[1], merged[2], lengths

    # -- the rows of pairs -------------------------------------------------------------

    def rows(self, keys: IntArray) -> EdgeTable:
        """The stored edges of ``keys`` (an n × 3 array of ``(namespace, a, b)``, each pair
        once) as an edge table, in no particular order: the rows storage holds, where this
        graph has caught up with it. A big batch reads its pairs' rows here where writers
        take turns, under the write lock, instead of by a query (see
        :func:`~synapse_retriever.store.write.step_edges`).

        Examples
        --------
        >>> g = MemoryGraph(SynapseConfig())
        >>> g.add_names([(7, "a"), (8, "b")], [(1, "personal")])
        >>> g.apply([(4, 1, 7, 8, 0.3, 1, 30.0, 0.0, 5.0)])
        >>> g.rows(np.array([[1, 7, 8], [1, 8, 7], [2, 7, 8]])).tolist()
        [[4.0, 1.0, 7.0, 8.0, 0.3, 1.0, 30.0, 0.0, 5.0]]
        """
        edges = self._find(keys)
        edges = edges[edges >= 0]
        table = np.empty((edges.size, len(EDGE_COLUMNS)))
        table[:, _ID] = edges
        for name, column in _FROM_ROW.items():
            table[:, column] = self._cols[name][edges]
        return table

    def _find(self, keys: IntArray) -> IntArray:
        """The id of the stored edge of each of ``keys``, -1 where none: a binary search of
        one end in the adjacency row of the other (the shorter row), then of the pair in the
        log's sorted keys (an end added since the adjacency was built has no row there)."""
        a, b = keys[:, 1], keys[:, 2]
        found = np.full(len(keys), -1, np.int64)
        inside = np.flatnonzero((a < self._built) & (b < self._built))
        if inside.size and self._other.size:
            x, y = a[inside], b[inside]  # each pair looked up in the shorter of its rows
            shorter = np.diff(self._indptr)[y] < np.diff(self._indptr)[x]
            x, y = np.where(shorter, y, x), np.where(shorter, x, y)
            start, stop = self._indptr[x], self._indptr[x + 1]
            at = lower_bounds(self._other, start, stop, y)
            self._match(found, keys, inside, at, stop, self._other, y, self._entry_edge)
        pairs, edges = self._log_index()
        left = np.flatnonzero(found < 0)
        if left.size and pairs.size:
            target = a[left] << _PAIR_SHIFT | b[left]
            at = np.searchsorted(pairs, target)
            stop = np.full(left.size, pairs.size)
            self._match(found, keys, left, at, stop, pairs, target, edges)
        return found

    def _match(
        self,
        found: IntArray,
        keys: IntArray,
        which: IntArray,
        at: IntArray,
        stop: npt.NDArray[np.integer[Any]],
        values: npt.NDArray[np.integer[Any]],
        targets: IntArray,
        edges: npt.NDArray[np.integer[Any]],
    ) -> None:
        """Set ``found[which]`` to the first stored edge of its key among ``edges[at:stop]``
        while ``values`` there equal ``targets`` (a pair's entries lie side by side: one
        per namespace, removed edges among them)."""
        ns, a, b = keys[which, 0], keys[which, 1], keys[which, 2]
        at = at.astype(np.int64)
        open_ = at < stop
        while open_.any():
            pos = np.where(open_, at, 0)
            open_ &= values[pos] == targets
            edge = edges[pos].astype(np.int64)
            hit = open_ & (self._a[edge] == a) & (self._b[edge] == b) & (self._ns[edge] == ns)
            found[which[hit]] = edge[hit]
            at += 1
            open_ &= ~hit & (at < stop)

    def _log_index(self) -> tuple[IntArray, IntArray]:
        """The pair keys (``a << 31 | b``) of the log's edges, ascending, and those edges;
        what was logged since the last call is merged in (a removed edge keeps its entry:
        :meth:`_match` checks each edge's ends)."""
        if self._log_indexed < self._log_len:
            new = self._log[self._log_indexed : self._log_len]
            key = self._a[new].astype(np.int64) << _PAIR_SHIFT | self._b[new]
            order = np.argsort(key)
            key, new = key[order], new[order]
            at = np.searchsorted(self._log_keys, key)
            self._log_keys = np.insert(self._log_keys, at, key)
            self._log_ids = np.insert(self._log_ids, at, new)
            self._log_indexed = self._log_len
        return self._log_keys, self._log_ids

    # -- the recall view ---------------------------------------------------------------

    def view(self, active_namespace: str, now: float) -> _View:
        """Merged live weights and hub factors for a query in ``active_namespace`` at ``now``."""
        if self._unmerged:
            self.rebuild()
        view = self._views.get(active_namespace)
        if view is None or abs(view.at - now) > self.config.spreading.weight_tolerance_s:
            view = self._views[active_namespace] = self._build_view(active_namespace, now)
            while len(self._views) > MAX_VIEWS:  # each view holds 16 bytes per edge
                self._views.popitem(last=False)
        self._views.move_to_end(active_namespace)
        n = self.n
        if view.main.shape[0] < n:  # nodes added without an edge (a use alone)
            view.main = self._main_matrix(view.data)
            view.hub = np.concatenate([view.hub, np.ones(n - view.hub.size)])
            view.log = None  # sized for the old count too
        if view.log is None:
            self._build_log(view)
        if view.dirty:
            self._rehub(view, np.fromiter(view.dirty, np.int64))
            view.dirty.clear()
        return view

    def _main_matrix(self, data: FloatArray) -> sparse.csr_matrix:
        n = self.n
        indptr = np.concatenate(
            [self._indptr, np.full(n - self._built, self._indptr[-1], np.int32)]
        )
        return sparse.csr_matrix((data, self._other, indptr), shape=(n, n), copy=False)

    def _build_view(self, active_namespace: str, now: float) -> _View:
        factors = self.factors(active_namespace)
        edges = self._entry_edge
        unique_edges = self.live_ids()
        weight = np.zeros(self._capacity)
        weight[unique_edges] = factors[self._ns[unique_edges]] * self.weights(unique_edges, now)
        data = weight[edges]
        multi = np.flatnonzero(self._multi[edges] & (data > 0))
        if multi.size:  # one merged weight per pair, capped at 1, on its first entry
            rows = np.searchsorted(self._indptr, multi, side="right") - 1
            key = rows * self.n + self._other[multi]
            _, first = np.unique(key, return_index=True)
            _, merged = group_sums(key, data[multi])  # whatever the order of the entries
            data[multi] = 0.0
            data[multi[first]] = np.minimum(1.0, merged)
        degree = np.bincount(
            np.repeat(np.arange(self._built), np.diff(self._indptr)), weights=data > 0,
            minlength=self.n,
        )  # fmt: skip
        hub = hub_factors(degree.astype(np.int64), hub_degree=self.config.spreading.hub_degree)
        view = _View(now, factors, data, hub, self._main_matrix(data))
        return view

    def _build_log(self, view: _View) -> None:
        n = self.n
        edges = self._log[: self._log_len]
        edges = edges[self._a[edges] >= 0]
        weight = view.factors[self._ns[edges]] * self.weights(edges, view.at)
        edges, weight = edges[weight > 0], weight[weight > 0]
        a, b = self._a[edges], self._b[edges]
        matrix = sparse.csr_matrix(
            (np.concatenate([weight, weight]), (np.concatenate([a, b]), np.concatenate([b, a]))),
            shape=(n, n),
        )
        np.minimum(matrix.data, 1.0, out=matrix.data)  # twins in the log: merged, capped
        old = view.log_degree
        view.log = matrix
        view.log_degree = np.diff(matrix.indptr).astype(np.int64)
        touched = np.flatnonzero(view.log_degree)
        if old is not None:
            touched = np.union1d(touched, np.flatnonzero(old))
        view.dirty.update(touched.tolist())

    def _rehub(self, view: _View, nodes: IntArray) -> None:
        """Recompute the hub factor of ``nodes`` from their rows."""
        built = nodes < self._built
        degree = np.zeros(nodes.size, np.int64)
        for i, node in enumerate(nodes[built].tolist()):
            start, stop = self._indptr[node], self._indptr[node + 1]
            degree[np.flatnonzero(built)[i]] = int(np.count_nonzero(view.data[start:stop]))
        if view.log_degree is not None:
            degree += view.log_degree[nodes]
        view.hub[nodes] = hub_factors(degree, hub_degree=self.config.spreading.hub_degree)

    def weights(self, edges: IntArray, now: float) -> FloatArray:
        """Effective weights of edge ids at ``now``: decay, LTP floor, pruning to 0."""
        return _weights(
            self.config.learning,
            now,
            w0=self._w0[edges],
            half_life_days=self._hl[edges],
            last_reinforced_at=self._last[edges],
            count=self._count[edges],
            ltp=self._ltp_ns[self._ns[edges]],
        )

    def live(
        self, edges: IntArray, now: float, when: FloatArray | None = None
    ) -> npt.NDArray[np.bool_]:
        """Whether edges have a positive effective weight at ``now``: one comparison with
        their precomputed prune times (``when``, read if not given), the exact weight
        within ``PRUNE_MARGIN_S`` of one."""
        when = self._pruned_at[edges] if when is None else when
        alive: npt.NDArray[np.bool_] = now < when
        near = np.flatnonzero(np.abs(when - now) <= PRUNE_MARGIN_S)
        if near.size:
            alive[near] = self.weights(edges[near], now) > 0
        return alive

    def _prune_times(self, edges: IntArray) -> FloatArray:
        learning = self.config.learning
        return np.asarray(
            pruned_at(
                self._w0[edges],
                self._hl[edges],
                self._last[edges],
                count=self._count[edges],
                ltp=self._ltp_ns[self._ns[edges]],
                ltp_min_count=learning.ltp_min_count,
                ltp_floor=learning.ltp_floor,
                prune_threshold=learning.prune_threshold,
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
        view = self.view(active_namespace, now)
        matrices = [view.main] if view.log is None or not view.log.nnz else [view.main, view.log]
        return spread(
            [self.index[s] for s in seeds if s in self.index],
            matrices,
            view.hub,
            spread_rate=self.config.spreading.spread_rate,
            report_min=report_min,
            report=[self.index[r] for r in report if r in self.index],
        )

    def co_uses(
        self, nodes: Sequence[int], active_namespace: str, now: float, *, fan: int
    ) -> list[tuple[IntArray, FloatArray]]:
        """Each node's live neighbours (ids, ascending) and their co-use counts.

        A pair's count is Σ_ns factor × activation count over its live edges, with the
        merge factors of ``active_namespace``; only the ``fan`` (the ACT-R rule's
        ``association_fan``, one per store: rows are kept as cut) most
        co-used neighbours are kept (ties to the smaller id). Exact at ``now``: a row is
        kept until a write touches the node or ``now`` leaves the times it holds in (an
        edge of it dies, or a dead one was alive), the least recently used rows dropped
        beyond ``MAX_CO_USE_ENTRIES`` neighbours. An unknown node (-1) has none.
        """
        rows = self._co_uses.get(active_namespace)
        if rows is None:
            rows = self._co_uses[active_namespace] = OrderedDict()
            while len(self._co_uses) > MAX_VIEWS:
                _, dropped = self._co_uses.popitem(last=False)
                self._co_use_entries -= sum(_held(row) for row in dropped.values())
        self._co_uses.move_to_end(active_namespace)
        distinct = list(dict.fromkeys(nodes))
        for x in distinct:
            row = rows.get(x)
            if row is not None and not row.after < now < row.before:
                del rows[x]  # an edge of it died, or a dead one is alive at a past ``now``
                self._co_use_entries -= _held(row)
        missing = [x for x in distinct if x not in rows]
        if missing:
            found = self._co_use_rows(missing, active_namespace, now, fan)
            rows.update(found)
            self._co_use_entries += sum(_held(row) for row in found.values())
        for x in distinct:
            rows.move_to_end(x)
        while self._co_use_entries > MAX_CO_USE_ENTRIES and self._evict_co_use_row(
            rows, len(distinct)
        ):
            pass
        return [(rows[x].others, rows[x].counts) for x in nodes]

    def _evict_co_use_row(self, current: OrderedDict[int, _CoUseRow], keep: int) -> bool:
        """Drop the least recently used row of the least recently used namespace, never
        one of the ``keep`` most recently used of ``current`` (the query's); False if
        there is none to drop."""
        for rows in self._co_uses.values():
            if len(rows) > (keep if rows is current else 0):
                _, row = rows.popitem(last=False)
                self._co_use_entries -= _held(row)
                return True
        return False

    def _co_use_rows(
        self, nodes: list[int], active_namespace: str, at: float, fan: int
    ) -> dict[int, _CoUseRow]:
        """Co-use rows at ``at``, each with the open interval of times it holds exactly in:
        from the latest prune time of a dead edge of it to the earliest of a live one,
        with ``PRUNE_MARGIN_S`` where liveness is decided exactly. A long row is read from
        its candidates (:meth:`_entries`); where too few of them reach the cut, from the
        candidates of a lower cut that the first read sets, else in full."""
        known = [x for x in nodes if 0 <= x < self.n]
        empty = _CoUseRow(np.zeros(0, np.int64), np.zeros(0), -math.inf, math.inf)
        found: dict[int, _CoUseRow] = {x: empty for x in nodes}
        if not known:
            return found
        rows, short = self._exact_rows(known, active_namespace, at, fan, {})
        found.update(rows)
        lower = {x: floor for x, floor in short.items() if floor is not None}
        whole = [x for x, floor in short.items() if floor is None]
        if lower:
            rows, still = self._exact_rows(list(lower), active_namespace, at, fan, lower)
            found.update(rows)
            whole += list(still)
        if whole:
            found.update(self._exact_rows(whole, active_namespace, at, fan, None)[0])
        return found

    def _exact_rows(
        self,
        known: list[int],
        active_namespace: str,
        at: float,
        fan: int,
        floors: dict[int, int] | None,
    ) -> tuple[dict[int, _CoUseRow], dict[int, int | None]]:
        """The co-use rows of ``known`` (node ids) from their entries: long rows cut to
        their candidates (``floors``: the least stored count of a candidate pair by node;
        ``_entries`` sets the others' cut; None: no cut). Returns the rows, and the nodes
        whose candidates were too few, each with a lower floor that holds its row, or
        None (read it in full)."""
        owner, other, edges, cuts = self._entries(known, fan if floors is not None else 0, floors)
        logged = bool(self._log_of) and any(x in self._log_of for x in known)
        # the edges' scattered records, gathered as bytes in one pass (a take of structured
        # items copies field by field)
        record = np.take(self._records, edges, axis=0).view(self._record)[:, 0]
        factors = self.factors(active_namespace)
        if len(self.ns_names) == 1:  # one namespace: one factor, not a gather of 40k
            factor = np.full(edges.size, factors[max(self.ns_names)])
        else:
            factor = factors[record["ns"]]
        keep = factor > 0
        if not keep.all():
            edges, factor, owner, other = edges[keep], factor[keep], owner[keep], other[keep]
            record = record[keep]
        when = record["pruned_at"]
        alive = self.live(edges, at, when)  # a removed edge is never live
        after, before = _validity(owner, when, alive, len(known), grouped=not logged)
        if not alive.all():
            edges, factor, owner, other = edges[alive], factor[alive], owner[alive], other[alive]
            record = record[alive]
        counts = record["count"] * factor
        if record["multi"].any():  # a pair in several namespaces: one summed count
            key, counts = group_sums(owner * self.n + other, counts)
            owner, other = key // self.n, key % self.n
        elif logged:  # log entries follow the adjacency's: sort
            order = np.lexsort((other, owner))
            owner, other, counts = owner[order], other[order], counts[order]
        bounds = np.searchsorted(owner, np.arange(len(known) + 1)).tolist()
        top = float(factors.max())  # no pair counts more than top × its stored counts
        found: dict[int, _CoUseRow] = {}
        short: dict[int, int | None] = {}
        for i, x in enumerate(known):
            others, mine = other[bounds[i] : bounds[i + 1]], counts[bounds[i] : bounds[i + 1]]
            if i in cuts:  # a pair below the cut counts at most top × (cut - 1)
                above = mine > top * (cuts[i] - 1) * (1 + _ROUNDING)
                if np.count_nonzero(above) < fan:  # too few: a cut that the fan-th reaches
                    least = nth_largest(mine, fan) / top if mine.size >= fan else 0.0
                    floor = math.ceil(least * (1 - _ROUNDING))
                    short[x] = floor if 0 < floor < cuts[i] else None
                    continue
            if others.size > fan:
                others, mine = strongest(others, mine, fan)
            found[x] = _CoUseRow(others, mine, after[i], before[i])
        return found, short

    def _entries(
        self, nodes: list[int], fan: int, floors: dict[int, int] | None = None
    ) -> tuple[IntArray, IntArray, IntArray, dict[int, int]]:
        """The stored edges of each of ``nodes`` (removed ones included): the index of
        the node in ``nodes``, the other end and the edge id, by node, then adjacency
        entries (sorted by the other end) before the log's. Adjacency entries are read
        in place, not through the edges' columns (a hub's row is contiguous there).

        With ``fan`` (0: none), an adjacency row longer than ``CANDIDATE_ROW`` times
        ``fan`` keeps its candidates only: the pairs whose stored counts (``_entry_count``,
        in place: no gather of the row's scattered records) add up to the cut (the node's
        ``floors`` if given, else the ``fan``-th largest of the row's sums), or that the
        log holds too. The cuts are returned by node index. Any other pair counts at most
        the cut less one, times the largest merge factor; a row with ``fan`` live pairs
        above that needs none of the others, and holds while its candidates live and die
        as they did.
        """
        first = np.minimum(nodes, self._built)  # a node added since: an empty row, at the end
        starts = self._indptr[first].tolist()
        stops = self._indptr[np.minimum(first + 1, self._built)].tolist()
        rows: list[slice | IntArray] = [
            slice(start, stop) for start, stop in zip(starts, stops, strict=True)
        ]
        sizes = np.subtract(stops, starts)
        cuts: dict[int, int] = {}
        for i, (x, start, stop) in enumerate(zip(nodes, starts, stops, strict=True)):
            if fan > 0 and stop - start > CANDIDATE_ROW * fan:
                picked = self._candidates(x, start, stop, fan, (floors or {}).get(x))
                if picked is not None:
                    (rows[i], cuts[i]), sizes[i] = picked, picked[0].size
        # each row a slice, copied whole (a hub's 40k entries: a copy, not a gather)
        other = np.concatenate([self._other[row] for row in rows]).astype(np.int64)
        edges = np.concatenate([self._entry_edge[row] for row in rows]).astype(np.int64)
        owner = np.repeat(np.arange(len(nodes)), sizes)
        logged = [(i, self._log_of[x]) for i, x in enumerate(nodes) if x in self._log_of]
        if logged:
            extra = np.asarray([e for _, row in logged for e in row], np.int64)
            extra_owner = np.repeat([i for i, _ in logged], [len(row) for _, row in logged])
            mine = np.asarray(nodes, np.int64)[extra_owner]
            extra_other = self._a[extra].astype(np.int64) + self._b[extra] - mine
            owner = np.concatenate([owner, extra_owner])
            other = np.concatenate([other, extra_other])
            edges = np.concatenate([edges, extra])
        return owner, other, edges, cuts

    def _candidates(
        self, x: int, start: int, stop: int, fan: int, floor: int | None
    ) -> tuple[IntArray, int] | None:
        """The adjacency entries of the candidate pairs of ``x``'s row ``start:stop`` and
        their cut (see :meth:`_entries`): ``floor``, or the ``fan``-th largest of the pairs'
        stored counts; None if the row holds ``fan`` pairs or fewer."""
        counts = self._entry_count[start:stop]
        others = self._other[start:stop]
        first = None  # a pair an entry, unless a pair is stored in two namespaces
        if len(self.ns_names) > 1 and np.any(others[1:] == others[:-1]):
            first = np.flatnonzero(np.r_[True, others[1:] != others[:-1]])  # side by side
            if first.size <= fan:
                return None
            counts = np.add.reduceat(counts, first, dtype=np.int64)
        cut = int(nth_largest(counts, fan)) if floor is None else floor
        chosen = counts >= cut
        logged = self._log_of.get(x) if len(self.ns_names) > 1 else None
        if logged:  # a pair the log holds too: its stored counts are not all here
            extra = np.asarray(logged, np.int64)
            ends = self._a[extra].astype(np.int64) + self._b[extra] - x
            at = np.minimum(np.searchsorted(others, ends), others.size - 1)
            twin = at[others[at] == ends]
            chosen[twin if first is None else np.searchsorted(first, twin, "right") - 1] = True
        if first is not None:
            chosen = np.repeat(chosen, np.diff(np.r_[first, others.size]))
        return start + np.flatnonzero(chosen), cut

    def _forget_co_uses(self, edges: IntArray) -> None:
        if not self._co_uses or edges.size == 0:
            return
        ends = np.concatenate([self._a[edges], self._b[edges]]).tolist()
        for rows in self._co_uses.values():
            for node in ends:
                row = rows.pop(node, None)
                if row is not None:
                    self._co_use_entries -= _held(row)

    # -- a snapshot of the whole state -------------------------------------------------

    def arrays(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """Everything this graph holds, as plain values and arrays (views, not copies):
        what :meth:`from_arrays` rebuilds it from, exactly as it is now (the adjacency, the
        log of edges added since it was built, the recall inputs of every edge).

        Examples
        --------
        >>> g = MemoryGraph(SynapseConfig())
        >>> g.add_names(nodes=[(1, "a"), (2, "b")], namespaces=[(1, "personal")])
        >>> g.apply([(1, 1, 1, 2, 0.9, 1, 30.0, 0.0, 0.0)])
        >>> values, arrays = g.arrays()
        >>> copy = MemoryGraph.from_arrays(SynapseConfig(), values, arrays)
        >>> copy.edge("personal", "a", "b") == g.edge("personal", "a", "b")
        True
        """
        values = {
            "size": self.size,
            "built": self._built,
            "unmerged": self._unmerged,
            "namespaces": sorted(self.ns_names.items()),
        }
        arrays: dict[str, npt.NDArray[Any]] = {
            f"edge.{name}": self._cols[name][: self.size] for name in _COLUMNS
        }
        arrays["adjacency.indptr"] = self._indptr
        arrays["adjacency.other"] = self._other
        arrays["adjacency.edge"] = self._entry_edge
        arrays["log"] = self._log[: self._log_len]
        arrays["names"] = np.frombuffer("\0".join(self.names).encode(), np.uint8)
        return values, arrays

    @classmethod
    def from_arrays(
        cls, config: SynapseConfig, values: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]
    ) -> MemoryGraph:
        """The graph :meth:`arrays` described (its arrays copied: the graph owns its own).

        Raises ``ValueError`` where the parts do not fit together (lengths, ids out of
        range), before anything is allocated by a size the arrays do not hold; a snapshot
        that fails is rebuilt from storage, never trusted."""
        graph = cls(config)
        size, built = int(values["size"]), int(values["built"])
        names = bytes(arrays["names"]).decode().split("\0")
        if names[0] != "":
            raise ValueError("node names: id 0 is never used")
        graph.names = names
        graph.index = {name: i for i, name in enumerate(names) if name}
        graph.add_names(namespaces=[(int(i), str(name)) for i, name in values["namespaces"]])
        n = len(names)
        columns = {name: arrays[f"edge.{name}"] for name in _COLUMNS}
        for name, (dtype, _) in _COLUMNS.items():
            column = columns[name]
            if column.dtype != np.dtype(dtype) or column.size != size:
                raise ValueError(
                    f"edge column {name}: {column.size} of {column.dtype}, not {size} edges"
                )
        graph._grow(max(size, 1024))  # after the check: a size the columns do not hold
        for name, column in columns.items():  # would be allocated (a damaged header)
            graph._cols[name][:size] = column
        graph.size = size
        indptr = arrays["adjacency.indptr"].astype(np.int32)
        other = arrays["adjacency.other"].astype(np.int32)
        entry_edge = arrays["adjacency.edge"].astype(np.int32)
        log = arrays["log"].astype(np.int64)
        ends = np.concatenate([graph._a[:size], graph._b[:size]])
        if (
            indptr.size != built + 1
            or built > n
            or indptr[0] != 0
            or indptr[-1] != other.size
            or other.size != entry_edge.size
            or np.any(np.diff(indptr) < 0)
            or np.any((ends < -1) | (ends >= n))
            or np.any((other < 0) | (other >= n))
            or np.any((entry_edge < 0) | (entry_edge >= max(size, 1)))
            or np.any((log < 0) | (log >= max(size, 1)))
            or not _rows_ascending(indptr, other)
        ):
            raise ValueError("the adjacency does not fit the edges")
        graph._built, graph._indptr, graph._other, graph._entry_edge = (
            built,
            indptr,
            other,
            entry_edge,
        )
        graph._entry_count = np.where(graph._a[entry_edge] >= 0, graph._count[entry_edge], 0)
        graph._log = np.zeros(max(1024, 2 * log.size), np.int64)
        graph._log[: log.size] = log
        graph._log_len = int(log.size)
        for edge, a, b in zip(log.tolist(), graph._a[log].tolist(), graph._b[log].tolist(),
                              strict=True):  # fmt: skip
            graph._log_of.setdefault(a, []).append(edge)
            graph._log_of.setdefault(b, []).append(edge)
        graph._unmerged = bool(values["unmerged"])
        return graph

    def refresh_prune_times(self) -> None:
        """Compute every edge's prune time again (the configuration's decay differs from
        the one they were computed with)."""
        ids = np.arange(self.size)
        self._pruned_at[ids] = np.where(self._a[ids] >= 0, self._prune_times(ids), -np.inf)

    # -- stored state ------------------------------------------------------------------

    def namespaces_of(self, edges: IntArray) -> IntArray:
        """The namespace id of each of ``edges``."""
        found: IntArray = self._ns[edges].astype(np.int64)
        return found

    def incident(self, node: int) -> IntArray:
        """Ids of the stored edges of ``node``."""
        found = []
        if node < self._built:
            found.append(self._entry_edge[self._indptr[node] : self._indptr[node + 1]])
        found.append(np.asarray(self._log_of.get(node, ()), np.int64))
        edges = np.concatenate(found).astype(np.int64)
        return edges[self._a[edges] >= 0]

    def neighbours(
        self, node: str, now: float, namespace: str | None = None
    ) -> list[tuple[str, Edge, float]]:
        """Live edges of ``node``, optionally of one namespace: (neighbour, edge, weight)."""
        x = self.index.get(node)
        if x is None:
            return []
        edges = self.incident(x)
        if namespace is not None:
            edges = edges[self._ns[edges] == self.ns_index.get(namespace, -1)]
        weights = self.weights(edges, now)
        found = []
        for edge, weight in zip(edges.tolist(), weights.tolist(), strict=True):
            if weight > 0:
                stored = self._edge(edge)
                found.append((stored.b if stored.a == node else stored.a, stored, weight))
        return found

    def edge(self, namespace: str, a: str, b: str) -> Edge | None:
        """The stored edge between ``a`` and ``b`` in ``namespace``, or None."""
        ns_id, x, y = self.ns_index.get(namespace), self.index.get(a), self.index.get(b)
        if ns_id is None or x is None or y is None:
            return None
        edges = self.incident(x)
        match = edges[(self._a[edges] + self._b[edges] == x + y) & (self._ns[edges] == ns_id)]
        return self._edge(int(match[0])) if match.size else None

    def _edge(self, edge: int) -> Edge:
        return Edge(
            a=self.names[int(self._a[edge])],
            b=self.names[int(self._b[edge])],
            namespace=self.ns_names[int(self._ns[edge])],
            weight=float(self._w0[edge]),
            activation_count=int(self._count[edge]),
            half_life_days=float(self._hl[edge]),
            created_at=float(self._created[edge]),
            last_reinforced_at=float(self._last[edge]),
        )

    def live_ids(self, namespace: str | None = None) -> IntArray:
        """Ids of stored (not deleted) edges, optionally of one namespace."""
        ids = np.flatnonzero(self._a[: self.size] >= 0)
        if namespace is not None:
            ids = ids[self._ns[ids] == self.ns_index.get(namespace, -1)]
        return ids

    def columns(self, namespace: str | None = None) -> EdgeColumns:
        """The stored (not deleted) edges, optionally of one namespace, as copies of their
        columns: what a report reads after the store's lock is released."""
        ids = self.live_ids(namespace)
        ns = self._ns[ids]
        return EdgeColumns(
            namespace=ns,
            a=self._a[ids],
            b=self._b[ids],
            weight=self._w0[ids],
            activation_count=self._count[ids],
            half_life_days=self._hl[ids],
            last_reinforced_at=self._last[ids],
            ltp=self._ltp_ns[ns],
        )

    def edges(self, ids: IntArray) -> Iterator[Edge]:
        """Stored edges by id."""
        for edge in ids.tolist():
            yield self._edge(edge)

    def namespaces(self) -> list[str]:
        """Namespaces that hold at least one stored edge, sorted."""
        used = np.unique(self._ns[self.live_ids()])
        return sorted(self.ns_names[int(i)] for i in used)

    def nbytes(self) -> int:
        """Bytes held by the arrays: columns, adjacency, log (and its index by pair) and
        recall views."""
        arrays = [*self._cols.values(), self._indptr, self._other, self._entry_edge]
        arrays += [self._entry_count, self._log, self._log_keys, self._log_ids]
        for view in self._views.values():
            arrays += [view.data, view.hub]
        return sum(a.nbytes for a in arrays)

    def to_networkx(
        self, now: float, namespaces: Sequence[str] | None = None, *, single: bool = False
    ) -> nx.Graph[str] | nx.MultiGraph[str]:
        """The live edges of ``namespaces`` (None: all) at ``now`` as networkx: an
        ``nx.Graph`` when ``single``, else an ``nx.MultiGraph`` keyed by namespace (see
        :meth:`SynapseStore.graph <synapse_retriever.store.SynapseStore.graph>`)."""
        import networkx as nx

        result: nx.Graph[str] = nx.Graph() if single else nx.MultiGraph()
        for ns in namespaces if namespaces is not None else self.namespaces():
            ids = self.live_ids(ns)
            weights = self.weights(ids, now)
            ids, weights = ids[weights > 0], weights[weights > 0]
            for edge, weight in zip(self.edges(ids), weights.tolist(), strict=True):
                attrs = {
                    "weight": weight,
                    "stored_weight": edge.weight,
                    "count": edge.activation_count,
                    "half_life_days": edge.half_life_days,
                    "namespace": ns,
                    "created_at": edge.created_at,
                    "last_reinforced_at": edge.last_reinforced_at,
                }
                if single:
                    result.add_edge(edge.a, edge.b, **attrs)
                else:
                    result.add_edge(edge.a, edge.b, key=ns, **attrs)
        return result
