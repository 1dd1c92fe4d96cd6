"""Base-level activation: how recently and how often each node was used (ACT-R).

A node's base-level activation at time t, from the times t_j of its uses::

    B = ln Σ_j (t − t_j)^(−d)        ages in days, at least one second; d = 0.5

:class:`UseTable` keeps, per namespace and node, the use count, the co-activation count,
the first use and the last ``history`` use times, in NumPy arrays indexed by node id;
older uses are taken as spread evenly between the first use and the oldest kept one
(Petrov's hybrid approximation), so memory per node is bounded and B is exact while a
node has at most ``history`` uses. The store persists every row
(:class:`~synapse_retriever.persistence.UseRow`) in the same transaction as the edges.

References
----------
J. R. Anderson and L. J. Schooler, "Reflections of the environment in memory",
*Psychological Science* 2(6), 396-408, 1991 (B = ln Σ t_j^(−d), d = 0.5).
A. A. Petrov, "Computationally efficient approximation of the base-level learning
equation in ACT-R", *Proceedings of the Seventh International Conference on Cognitive
Modeling*, 391-392, 2006 (the hybrid approximation of the older uses).

Examples
--------
One use 1 day ago and one 4 days ago: B = ln(1^−0.5 + 4^−0.5) = ln 1.5.

>>> round(base_level([0.0, 3 * 86400.0], 4 * 86400.0), 4)
0.4055
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from synapse_retriever._arrays import unique_ids
from synapse_retriever._numbers import numeric
from synapse_retriever._types import FloatArray, IntArray
from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.config import ActrRule, Learning
from synapse_retriever.persistence.rows import RecentEvent, UseColumns, UseRow

__all__ = [
    "UseTable",
    "base_level",
    "older_uses",
    "recorded_uses",
    "use_strengths",
    "uses_from_edges",
]


MIN_AGE_DAYS = 1.0 / SECONDS_PER_DAY
"""A use less than a second old counts as one second old."""

_USES, _TOGETHER, _FIRST, _KEPT, _RECENT = 0, 1, 2, 3, 4  # columns of the packed rows
FEW_ROWS = 64
"""Rows a :meth:`UseTable.apply` sets one by one rather than as columns."""


@numeric
def base_level(times: Iterable[float], now: float, decay: float = ActrRule.base_decay) -> float:
    """ACT-R base-level activation ln Σ (now − t_j)^(−decay), ages in days; −inf if unused.

    Uses after ``now`` are ignored.

    References
    ----------
    Anderson and Schooler (1991); Petrov (2006) for the approximation of older uses (see the
    module docstring).

    Examples
    --------
    >>> base_level([], 0.0)
    -inf
    >>> base_level([0.0], 86400.0)  # one use one day ago: ln 1
    0.0
    """
    total = sum(max((now - t) / SECONDS_PER_DAY, MIN_AGE_DAYS) ** -decay for t in times if t <= now)
    return math.log(total) if total > 0.0 else -math.inf


@overload
def older_uses(count: float, oldest_kept: float, first: float, decay: float = ...) -> float: ...
@overload
def older_uses(
    count: FloatArray | IntArray, oldest_kept: FloatArray, first: FloatArray, decay: float = ...
) -> FloatArray: ...
def older_uses(
    count: float | FloatArray | IntArray,
    oldest_kept: float | FloatArray,
    first: float | FloatArray,
    decay: float = ActrRule.base_decay,
) -> float | FloatArray:
    """Σ age^(−decay) of ``count`` uses spread evenly between two ages (in days).

    Floats or arrays (element-wise).

    Notes
    -----
    Petrov (2006): with t_k the age of the oldest use kept exactly and L the age of
    the first use, ``count`` uses evenly spread over [t_k, L] contribute::

        count × (L^(1−d) − t_k^(1−d)) / ((1 − d) × (L − t_k))

    and ``count × t_k^(−d)`` when L = t_k. At d = 0.5 both are ``count × 2 / (√L + √t_k)``
    ((√L − √t_k) / (0.5 (L − t_k)) with L − t_k = (√L − √t_k)(√L + √t_k)): no division
    by the width, and 0 where t_k is infinite.

    Examples
    --------
    Two uses spread between 1 and 9 days old: 2 × (9^0.5 − 1^0.5) / (0.5 × 8) = 1.0.

    >>> older_uses(2, 1.0, 9.0)
    1.0
    >>> older_uses(np.array([2, 0]), np.array([1.0, 1.0]), np.array([9.0, 9.0])).tolist()
    [1.0, 0.0]
    """
    low = np.maximum(oldest_kept, MIN_AGE_DAYS)
    high = np.maximum(first, low)
    if decay == 0.5:  # sqrt: ~10× a power
        spread = 2.0 / (np.sqrt(high) + np.sqrt(low))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            width = high - low  # nan where both are infinite: spread 0
            span = high ** (1 - decay) - low ** (1 - decay)
            # a narrow span cancels: the midpoint's value, within (width / low)² of the mean
            narrow = ~(width >= 1e-6 * low)
            spread = np.where(narrow, (0.5 * (low + high)) ** -decay, span / ((1 - decay) * width))
    result = np.where(np.asarray(count) > 0, np.asarray(count) * spread, 0.0)
    return float(result) if result.ndim == 0 else result


def use_strengths(
    recent: FloatArray,
    count: FloatArray | IntArray,
    first: FloatArray,
    now: float,
    decay: float = ActrRule.base_decay,
    kept: FloatArray | IntArray | None = None,
) -> FloatArray:
    """Σ_j (now − t_j)^(−decay) per row, over every use (older ones approximated).

    Parameters
    ----------
    recent : array (rows, history)
        The latest use times of each row, ascending, -inf after the last kept one.
    count, first : arrays (rows,)
        Each row's number of uses and its first use time.
    kept : array (rows,), optional
        The finite times of each row (counted when not given).

    Notes
    -----
    The kept uses at or before ``now`` count exactly; the ``count − kept`` older uses
    are spread between the oldest kept one and the first use (:func:`older_uses`).
    A row with no kept use at or before ``now`` has strength 0 (B = −inf), even if it
    has older uses (they are only placed relative to a kept one).

    Examples
    --------
    Uses on days 0, 12, 14 and 15, the last two kept; at day 16: 2^−0.5 + 1^−0.5 =
    1.70711 exact, plus the 2 older uses spread between 2 and 16 days old:
    2 × (4 − 1.41421) / (0.5 × 14) = 0.73880 (exact would be 0.75).

    >>> day = 86400.0
    >>> recent = np.array([[14 * day, 15 * day]])
    >>> round(float(use_strengths(recent, np.array([4]), np.array([0.0]), 16 * day)[0]), 4)
    2.4459
    """
    age = np.subtract(now, recent, dtype=np.float64)  # +inf where nothing was kept
    if recent.size and recent.max() > now:  # uses after now are ignored
        age[recent > now] = np.inf
    age *= 1.0 / SECONDS_PER_DAY
    np.maximum(age, MIN_AGE_DAYS, out=age)
    # times ascend: the first kept is the oldest (+inf if none is at or before now)
    oldest = age[:, 0].copy() if age.shape[1] else np.full(age.shape[0], np.inf)
    if decay == 0.5:  # sqrt: ~10× a power; 1/inf = 0
        np.reciprocal(np.sqrt(age, out=age), out=age)
    else:
        np.power(age, -decay, out=age)
    total: FloatArray = age[:, 0].copy() if age.shape[1] else np.zeros(age.shape[0])
    for k in range(1, age.shape[1]):  # column by column: equal histories, equal sums (a
        total += age[:, k]  # BLAS product sums rows by position), 2× a row-wise sum
    if kept is None:
        kept = np.isfinite(recent).sum(axis=1)
    # uses not kept exactly, spread between the oldest kept and the first
    older = np.subtract(count, kept, dtype=np.float64)
    total += older_uses(older, oldest, (now - first) / SECONDS_PER_DAY, decay)
    return total


def uses_from_edges(
    edges: Iterable[tuple[int, int, int, int, float, float]],
    *,
    history: int = Learning.use_history,
    window: int = Learning.recent_events,
) -> tuple[list[UseRow], dict[int, int], list[RecentEvent]]:
    """Approximate use rows and event counts from edges ``(a, b, namespace, count, created,
    last)``, for a file written before uses were stored.

    A node's uses (all co-activations): as many as its most reinforced edge's count,
    the first at its oldest edge's creation, the latest at its edges' distinct last
    reinforcements; a namespace's events: its distinct last-reinforcement times, the
    latest ``window`` of them remembered with the nodes of the edges last reinforced then.
    Single-node uses, and the times of co-uses whose edges were reinforced again later,
    are lost.

    Examples
    --------
    >>> rows, events, latest = uses_from_edges([(1, 2, 1, 3, 0.0, 86400.0)])
    >>> rows[0]
    UseRow(namespace=1, node=1, uses=3, together=3, first=0.0, recent=(86400.0,))
    >>> events, latest
    ({1: 1}, [RecentEvent(namespace=1, at=86400.0, nodes=(1, 2))])
    """
    state: dict[tuple[int, int], tuple[int, float, set[float]]] = {}
    times: dict[int, dict[float, set[int]]] = {}
    for a, b, ns, count, created, last in edges:
        for node in (a, b):
            most, first, lasts = state.get((ns, node), (count, created, set()))
            lasts.add(last)
            state[(ns, node)] = (max(most, count), min(first, created), lasts)
        times.setdefault(ns, {}).setdefault(last, set()).update((a, b))
    rows = []
    for (ns, node), (count, first, lasts) in sorted(state.items()):
        recent = sorted(lasts)[-history:]
        uses = max(count, len(recent))
        rows.append(
            UseRow(
                namespace=ns,
                node=node,
                uses=uses,
                together=uses,
                first=min(first, recent[0]),
                recent=tuple(recent),
            )
        )
    latest = [
        RecentEvent(ns, at, tuple(sorted(nodes)))
        for ns, by_time in sorted(times.items())
        for at, nodes in sorted(by_time.items())[-window:]
    ]
    return rows, {ns: len(at) for ns, at in times.items()}, latest


def recorded_uses(
    stored: Sequence[UseRow],
    events: Sequence[RecentEvent],
    history: int = Learning.use_history,
) -> list[UseRow]:
    """The use rows of the nodes of ``events`` after them: ``stored`` rows plus each event.

    A node counts once per event (duplicates are dropped); an event of two distinct nodes
    or more is a co-activation and counts in ``together`` too. Each row keeps its latest
    ``history`` times, ascending; ``first`` is the earliest use. The order of the events
    does not matter.

    Examples
    --------
    >>> old = UseRow(1, 7, 3, 1, 0.0, (0.0, 5.0, 9.0))
    >>> events = [RecentEvent(1, 4.0, [7, 8]), RecentEvent(1, 12.0, [7])]
    >>> recorded_uses([old], events, history=3)
    [UseRow(namespace=1, node=7, uses=5, together=2, first=0.0, recent=(5.0, 9.0, 12.0)), \
UseRow(namespace=1, node=8, uses=1, together=1, first=4.0, recent=(4.0,))]
    """
    rows = {(row.namespace, row.node): row for row in stored}
    added: dict[tuple[int, int], tuple[int, int, list[float]]] = {}
    for namespace, at, nodes in events:
        distinct = dict.fromkeys(nodes)
        together = int(len(distinct) > 1)
        for node in distinct:
            uses, both, times = added.get((namespace, node), (0, 0, []))
            times.append(at)
            added[(namespace, node)] = (uses + 1, both + together, times)
    result = []
    for (namespace, node), (uses, both, times) in added.items():
        row = rows.get((namespace, node))
        if row is None:
            first, kept = min(times), sorted(times)[-history:]
        else:
            uses, both = row.uses + uses, row.together + both
            first, kept = min(row.first, *times), sorted([*row.recent, *times])[-history:]
        result.append(
            UseRow(
                namespace=namespace,
                node=node,
                uses=uses,
                together=both,
                first=first,
                recent=tuple(kept),
            )
        )
    return result


def namespace_sum(parts: Sequence[tuple[IntArray, FloatArray]], size: int) -> FloatArray:
    """Σ over namespaces of ``(positions, values)`` parts, one result per position.

    The sum does not depend on the order of the parts (namespace ids follow the order a
    store first saw them, which a reopened or batched store need not share): where
    several parts meet, their values are added in ascending order.

    Examples
    --------
    >>> parts = [(np.array([0, 1]), np.array([0.1, 1.0])), (np.array([1]), np.array([0.2]))]
    >>> namespace_sum(parts, 3).tolist()
    [0.1, 1.2, 0.0]
    >>> namespace_sum(parts[::-1], 3).tolist() == namespace_sum(parts, 3).tolist()
    True
    """
    total: FloatArray = np.zeros(size)
    if len(parts) == 1:
        at, values = parts[0]
        total[at] = values
    elif parts:
        stacked = np.zeros((len(parts), size))
        for k, (at, values) in enumerate(parts):
            stacked[k, at] = values
        stacked.sort(axis=0)
        for row in stacked:  # row by row: a fixed order of addition
            total += row
    return total


def _time(event: tuple[float, tuple[int, ...]]) -> float:
    return event[0]


class UseTable:
    """Use history per (namespace, node) in NumPy arrays, and each namespace's events.

    Parameters
    ----------
    history : int
        Use times kept exactly per row (older uses are approximated).
    window : int
        Latest events remembered per namespace for :meth:`recent_nodes`.

    Namespaces and nodes are integer ids; ``factors`` arguments are arrays indexed by
    namespace id (a namespace's merge factor, 0 to leave it out).

    Examples
    --------
    >>> table = UseTable()
    >>> both, alone = [RecentEvent(1, 0.0, [1, 2])], [RecentEvent(1, 3 * 86400.0, [1])]
    >>> table.apply(recorded_uses([], both))  # a co-activation
    >>> table.add_events(1, 1)
    >>> table.remember(both)
    >>> table.apply(recorded_uses(table.rows(1, [1]), alone))  # a use alone
    >>> table.remember(alone)
    >>> factors = np.array([0.0, 1.0])
    >>> round(float(table.base_levels(np.array([1]), 4 * 86400.0, factors)[0]), 4)  # ln(1 + 0.5)
    0.4055
    >>> table.uses(np.array([1, 2]), factors).tolist(), table.events(factors)
    ([2.0, 1.0], 1.0)
    >>> table.uses(np.array([1]), factors, together=True).tolist()
    [1.0]
    >>> table.recent_nodes(factors).tolist()  # latest first
    [1, 2]
    """

    def __init__(
        self, *, history: int = Learning.use_history, window: int = Learning.recent_events
    ) -> None:
        self.history = history
        self.window = window
        self._row_of: dict[int, npt.NDArray[np.int32]] = {}  # namespace -> node -> row, -1
        self._rows = 0
        # one row per (namespace, node), packed so a query gathers each node's row in one
        # read (measured: 100 µs for 800 scattered rows, against 175 µs from four arrays):
        # uses, uses together, first use, how many times are kept, then the latest times
        self._packed = np.zeros((0, _RECENT + history))
        self._events: dict[int, int] = {}
        self._latest: dict[int, deque[tuple[float, tuple[int, ...]]]] = {}  # latest events
        self._newest: dict[int, float] = {}  # namespace -> time of its latest event
        self._recent_nodes: dict[tuple[int, ...], IntArray] = {}  # until a new event

    # -- writes ------------------------------------------------------------------------

    def apply(self, columns: UseColumns | Sequence[UseRow]) -> None:
        """Set rows as storage holds them."""
        if not isinstance(columns, UseColumns):
            if 0 < len(columns) <= FEW_ROWS:
                self._apply_rows(columns)
                return
            columns = UseColumns.of(columns)
        if not len(columns):
            return
        rows = np.empty(len(columns), np.int64)
        for namespace in unique_ids(columns.namespace).tolist():
            at = np.flatnonzero(columns.namespace == namespace)
            rows[at] = self._rows_for(namespace, columns.node[at])
        self._packed[rows, _USES] = columns.uses
        self._packed[rows, _TOGETHER] = columns.together
        self._packed[rows, _FIRST] = columns.first
        recent = columns.recent
        if recent.shape[1] > self.history:  # written with a longer history: keep the latest
            kept = np.isfinite(recent).sum(axis=1)
            shift = np.maximum(kept - self.history, 0)
            take = np.minimum(shift[:, None] + np.arange(self.history), recent.shape[1] - 1)
            recent = np.where(
                np.arange(self.history) < np.minimum(kept, self.history)[:, None],
                np.take_along_axis(recent, take, axis=1),
                -np.inf,
            )
        self._packed[rows, _KEPT] = np.isfinite(recent).sum(axis=1)
        self._packed[rows, _RECENT:] = -np.inf
        self._packed[rows, _RECENT : _RECENT + recent.shape[1]] = recent

    def _apply_rows(self, rows: Sequence[UseRow]) -> None:
        """:meth:`apply` for a few rows (an event's): the same values, set row by row
        (building the columns costs more than the rows: 90 µs an event at 1M edges)."""
        history = self.history
        block = np.full((len(rows), _RECENT + history), -np.inf)
        for k, row in enumerate(rows):
            recent = row.recent[-history:]  # ascending: the latest ``history``
            block[k, : _RECENT + len(recent)] = (
                row.uses, row.together, row.first, len(recent), *recent,
            )  # fmt: skip
        spaces = [row.namespace for row in rows]
        nodes = np.fromiter((row.node for row in rows), np.int64, len(rows))
        if len(set(spaces)) == 1:
            at = self._rows_for(spaces[0], nodes)
        else:
            at = np.empty(len(rows), np.int64)
            for namespace in sorted(set(spaces)):
                mine = np.flatnonzero(np.asarray(spaces) == namespace)
                at[mine] = self._rows_for(namespace, nodes[mine])
        self._packed[at] = block

    def _rows_for(self, namespace: int, nodes: IntArray) -> IntArray:
        """Rows of ``nodes`` in ``namespace``, new ones appended."""
        rows_of = self._row_of.get(namespace, np.zeros(0, np.int32))
        top = int(nodes.max()) + 1
        if top > rows_of.size:
            grown = np.full(max(top, 2 * rows_of.size), -1, np.int32)
            grown[: rows_of.size] = rows_of
            rows_of = self._row_of[namespace] = grown
        rows = rows_of[nodes].astype(np.int64)
        new = np.flatnonzero(rows < 0)
        if new.size:
            fresh = unique_ids(nodes[new])
            needed = self._rows + fresh.size
            if needed > self._packed.shape[0]:
                size = max(64, needed, 2 * self._packed.shape[0])
                extra = np.zeros((size - self._packed.shape[0], self._packed.shape[1]))
                extra[:, _RECENT:] = -np.inf
                self._packed = np.concatenate([self._packed, extra])
            rows_of[fresh] = np.arange(self._rows, needed)
            self._rows = needed
            rows = rows_of[nodes].astype(np.int64)
        return rows

    def remember(self, events: Iterable[RecentEvent]) -> None:
        """Remember ``events`` (in the order they were written) for :meth:`recent_nodes`:
        each namespace keeps its ``window`` latest in time, of one time the last written,
        whatever order they came in (a use dated in the past, an import, another writer)."""
        for namespace, at, nodes in events:
            latest = self._latest.setdefault(namespace, deque(maxlen=self.window))
            self._newest[namespace] = max(self._newest.get(namespace, at), at)
            self._recent_nodes.clear()
            if not latest or at >= latest[-1][0]:  # the usual case: the newest
                latest.append((at, tuple(nodes)))  # (full: the oldest goes)
                continue
            if len(latest) == latest.maxlen:
                if at < latest[0][0]:
                    continue  # older than every event kept
                latest.popleft()
            latest.insert(bisect.bisect_right(latest, at, key=_time), (at, tuple(nodes)))

    def set_events(self, namespace: int, events: int) -> None:
        """Set the number of co-activation events of a namespace."""
        self._events[namespace] = events

    def add_events(self, namespace: int, events: int) -> None:
        """Count more co-activation events in a namespace."""
        self._events[namespace] = self._events.get(namespace, 0) + events

    def rows(self, namespace: int, nodes: Iterable[int]) -> list[UseRow]:
        """The rows of ``nodes`` in ``namespace`` this table holds (none for an unused node)."""
        found = []
        for node in nodes:
            row = self._row(namespace, node)
            if row >= 0:
                packed = self._packed[row]
                kept = packed[_RECENT:]
                recent = tuple(kept[np.isfinite(kept)].tolist())
                uses, both = int(packed[_USES]), int(packed[_TOGETHER])
                found.append(
                    UseRow(
                        namespace=namespace,
                        node=node,
                        uses=uses,
                        together=both,
                        first=float(packed[_FIRST]),
                        recent=recent,
                    )
                )
        return found

    def _row(self, namespace: int, node: int) -> int:
        rows = self._row_of.get(namespace)
        return int(rows[node]) if rows is not None and node < rows.size else -1

    # -- a snapshot of the rows --------------------------------------------------------

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The use rows as arrays (views, not copies): each namespace's node -> row index
        and the packed rows; :meth:`from_arrays` rebuilds them. The events and the latest
        events are not among them: storage holds those whole, and small.

        Examples
        --------
        >>> table = UseTable()
        >>> table.apply(recorded_uses([], [(1, 0.0, [1, 2])]))
        >>> copy = UseTable.from_arrays(table.arrays())
        >>> copy.rows(1, [1, 2]) == table.rows(1, [1, 2])
        True
        """
        arrays: dict[str, npt.NDArray[Any]] = {
            f"rows_of.{ns}": rows for ns, rows in sorted(self._row_of.items())
        }
        arrays["packed"] = self._packed[: self._rows]
        return arrays

    @classmethod
    def from_arrays(
        cls,
        arrays: dict[str, npt.NDArray[Any]],
        *,
        history: int = Learning.use_history,
        window: int = Learning.recent_events,
    ) -> UseTable:
        """The rows :meth:`arrays` described, copied (``ValueError`` where they do not fit)."""
        table = cls(history=history, window=window)
        packed = arrays["packed"]
        if packed.ndim != 2 or packed.shape[1] != _RECENT + history:
            raise ValueError(f"use rows of width {packed.shape}, expected {_RECENT + history}")
        table._packed = np.array(packed, np.float64)
        table._rows = int(packed.shape[0])
        for name, rows in arrays.items():
            if name.startswith("rows_of."):
                row_of = np.array(rows, np.int32)
                if row_of.size and (row_of.min() < -1 or row_of.max() >= table._rows):
                    raise ValueError(f"use rows of namespace {name[8:]} out of range")
                table._row_of[int(name[8:])] = row_of
        return table

    # -- reads -------------------------------------------------------------------------

    def _gather(
        self, nodes: IntArray, factors: FloatArray
    ) -> list[tuple[float, IntArray, IntArray]]:
        """Per namespace with a positive factor: (factor, positions in ``nodes``, rows)."""
        found = []
        for ns, rows_of in self._row_of.items():
            factor = float(factors[ns]) if ns < factors.size else 0.0
            if factor <= 0.0:
                continue
            inside = nodes < rows_of.size
            rows = np.full(nodes.size, -1, np.int64)
            rows[inside] = rows_of[nodes[inside]]
            at = np.flatnonzero(rows >= 0)
            if at.size:
                found.append((factor, at, rows[at]))
        return found

    def base_levels(
        self,
        nodes: IntArray,
        now: float,
        factors: FloatArray,
        decay: float = ActrRule.base_decay,
    ) -> FloatArray:
        """B = ln Σ_ns factor × Σ_j (now − t_j)^(−decay) per node; −inf if never used."""
        return self.levels(nodes, now, factors, decay)[1]

    def levels(
        self,
        nodes: IntArray,
        now: float,
        factors: FloatArray,
        decay: float = ActrRule.base_decay,
    ) -> tuple[FloatArray, FloatArray]:
        """Uses in co-activations (as :meth:`uses` with ``together``) and base levels (as
        :meth:`base_levels`) of each node, from one read of its rows."""
        together, total = [], []
        for factor, at, rows in self._gather(nodes, factors):
            packed = self._packed[rows]
            strength = use_strengths(
                packed[:, _RECENT:],
                packed[:, _USES],
                packed[:, _FIRST],
                now,
                decay,
                kept=packed[:, _KEPT],
            )
            together.append((at, factor * packed[:, _TOGETHER]))
            total.append((at, factor * strength))
        summed = namespace_sum(total, nodes.size)
        levels: FloatArray = np.full(nodes.size, -np.inf)
        used = summed > 0.0
        levels[used] = np.log(summed[used])
        return namespace_sum(together, nodes.size), levels

    def uses(self, nodes: IntArray, factors: FloatArray, *, together: bool = False) -> FloatArray:
        """Σ_ns factor × uses of each node (only uses in co-activations with ``together``)."""
        column = _TOGETHER if together else _USES
        parts = [
            (at, factor * self._packed[rows, column])
            for factor, at, rows in self._gather(nodes, factors)
        ]
        return namespace_sum(parts, nodes.size)

    def events(self, factors: FloatArray) -> float:
        """Σ_ns factor × co-activation events (two nodes or more) of the namespace."""
        return math.fsum(
            float(factors[ns]) * events
            for ns, events in self._events.items()
            if ns < factors.size and factors[ns] > 0
        )

    def latest_time(self, factors: FloatArray, until: float = math.inf) -> float:
        """Time of the latest event at or before ``until`` in the namespaces with a
        positive factor; -inf if none."""
        spaces = [ns for ns in self._latest if ns < factors.size and factors[ns] > 0]
        newest = max((self._newest[ns] for ns in spaces), default=-math.inf)
        if newest <= until:
            return newest
        return max(  # a query in the past: the events remembered before it
            (at for ns in spaces for at, _ in self._latest[ns] if at <= until),
            default=-math.inf,
        )

    def recent_nodes(self, factors: FloatArray, until: float = math.inf) -> IntArray:
        """Distinct nodes of the latest ``window`` events of each namespace with a positive
        factor (at or before ``until``), latest first."""
        spaces = tuple(ns for ns in self._latest if ns < factors.size and factors[ns] > 0)
        every = all(self._newest[ns] <= until for ns in spaces)  # no event after until
        if every and spaces in self._recent_nodes:
            return self._recent_nodes[spaces]
        events = [
            (at, nodes) for ns in spaces for at, nodes in reversed(self._latest[ns]) if at <= until
        ]
        events.sort(key=lambda event: -event[0])
        found = np.fromiter(dict.fromkeys(node for _, nodes in events for node in nodes), np.int64)
        if every:
            self._recent_nodes[spaces] = found
        return found

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        arrays: list[npt.NDArray[Any]] = [self._packed]
        return sum(int(a.nbytes) for a in [*arrays, *self._row_of.values()])

    def __len__(self) -> int:
        """Rows (namespace, node) with at least one use."""
        return self._rows
