"""The rows a store reads and writes, as plain data: edges, node uses, and what changed.

Every backend speaks in these types (see :mod:`~synapse_retriever.persistence.protocols`);
the math in :mod:`~synapse_retriever.learning` reads them too, so they live apart from any I/O.

Examples
--------
>>> row = EdgeRow(1, 1, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)
>>> row.weight, row.half_life_days
(0.3, 30.0)
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "EDGE_COLUMNS",
    "EMPTY_EDGES",
    "Changes",
    "EdgeKey",
    "EdgeRow",
    "EdgeTable",
    "EventRecord",
    "ForgetCounts",
    "RecentEvent",
    "SnapshotRow",
    "StoredSnapshot",
    "UseColumns",
    "UseKey",
    "UseRow",
    "edge_row",
    "edge_rows",
    "named",
    "rows_array",
    "snapshot_rows",
    "snapshot_stamp",
    "table_columns",
    "table_keys",
]


class EdgeRow(NamedTuple):
    """One stored edge, by integer ids (``a``'s name sorts before ``b``'s)."""

    id: int
    namespace: int
    a: int
    b: int
    weight: float
    activation_count: int
    half_life_days: float
    created_at: float
    last_reinforced_at: float


EDGE_COLUMNS: tuple[str, ...] = EdgeRow._fields
"""The columns of an edge table (:data:`EdgeTable`, :attr:`Changes.rows`): :class:`EdgeRow`'s
fields, in order. A field's column is ``EDGE_COLUMNS.index(name)``; modules that read a column
on a hot path keep that number in a module constant (as fast as a literal)."""

_KEY_COLUMNS = [EDGE_COLUMNS.index(field) for field in ("namespace", "a", "b")]


class EdgeKey(NamedTuple):
    """The key of one stored edge: a pair of node ids in a namespace (``a``'s name sorts
    before ``b``'s), as :meth:`~synapse_retriever.persistence.protocols.WriteTransaction.lock_edges`
    takes it.

    Examples
    --------
    >>> key = EdgeKey(namespace=1, a=7, b=8)
    >>> key == (1, 7, 8), key.a
    (True, 7)
    """

    namespace: int
    a: int
    b: int


class UseKey(NamedTuple):
    """The key of one node's use row: a node id in a namespace."""

    namespace: int
    node: int


class RecentEvent(NamedTuple):
    """One entry of the recent-events log: a co-activation's namespace, time and node ids."""

    namespace: int
    at: float
    nodes: Sequence[int]


class EventRecord(NamedTuple):
    """An event id to record once: the caller's id, the event's time (a repair forgets the
    ids of events dated ahead of the clock), its namespace, and when it was seen (the
    clock's time of the write: a sweep forgets the ids not seen for
    ``event_ids_kept_days``; a replay refreshes it)."""

    event_id: str
    at: float
    namespace: int
    seen: float


class ForgetCounts(NamedTuple):
    """What :meth:`~synapse_retriever.persistence.protocols.WriteTransaction.forget_after`
    removed: edges, node use times, and events (recent-log entries and event ids)."""

    edges: int
    uses: int
    events: int

    @classmethod
    def total(cls, counts: Iterable[ForgetCounts]) -> ForgetCounts:
        """``counts`` summed field by field (the layers of one store).

        Examples
        --------
        >>> ForgetCounts.total([ForgetCounts(1, 2, 3), ForgetCounts(1, 0, 0)])
        ForgetCounts(edges=2, uses=2, events=3)
        """
        rows = list(counts)
        return cls(
            edges=sum(c.edges for c in rows),
            uses=sum(c.uses for c in rows),
            events=sum(c.events for c in rows),
        )


_new_edge_row = functools.partial(tuple.__new__, EdgeRow)

Named = TypeVar("Named", bound=tuple[Any, ...])


def named(kind: type[Named], rows: Iterable[Iterable[Any]]) -> list[Named]:
    """``rows``, each in the fields' order of ``kind`` (a named tuple), as ``kind``, made in C:
    a batch's keys are tens of thousands, and ``kind(*row)`` runs a Python function per row.

    Examples
    --------
    >>> named(EdgeKey, [(1, 7, 8)])
    [EdgeKey(namespace=1, a=7, b=8)]
    """
    return list(map(functools.partial(tuple.__new__, kind), rows))


def edge_row(values: Iterable[float]) -> EdgeRow:
    """An :class:`EdgeRow` of ``values`` in its fields' order, made in C (``EdgeRow(*values)``
    runs a Python function: a fifth of a 40,000-pair batch's row handling).

    Examples
    --------
    >>> edge_row((1, 1, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)).weight
    0.3
    """
    return _new_edge_row(values)


EdgeTable: TypeAlias = npt.NDArray[np.float64]
"""Edge rows as one n × 9 float64 array, a row per edge, :data:`EDGE_COLUMNS` in order (ids,
node and namespace ids and counts are integers below 2^53, exact in a float64). A write
carries its edges so from storage through the edge math to the in-memory graph, without a
Python object per row (measured: a tenth of a 1,000-event batch in memory at 1M edges)."""

EMPTY_EDGES: EdgeTable = np.zeros((0, len(EDGE_COLUMNS)))
"""An :data:`EdgeTable` of no row (read-only: shared by every caller)."""
EMPTY_EDGES.setflags(write=False)


def rows_array(rows: Sequence[Sequence[float]]) -> EdgeTable:
    """Edge rows as one :data:`EdgeTable` (four times faster than ``np.asarray`` on a list
    of named tuples).

    Examples
    --------
    >>> rows_array([EdgeRow(1, 1, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)]).shape
    (1, 9)
    """
    width = len(EDGE_COLUMNS)
    flat = np.fromiter(itertools.chain.from_iterable(rows), np.float64, count=width * len(rows))
    return flat.reshape(len(rows), width)


_INTEGER_FIELDS = frozenset({"id", "namespace", "a", "b", "activation_count"})


def table_columns(table: EdgeTable) -> list[list[Any]]:
    """The columns of ``table`` as Python lists, :data:`EDGE_COLUMNS` in order, the integer
    fields as ints (what SQL parameters and :class:`EdgeRow` hold).

    Examples
    --------
    >>> table_columns(rows_array([EdgeRow(1, 1, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)]))
    [[1], [1], [7], [8], [0.3], [1], [30.0], [0.0], [0.0]]
    """
    return [
        (column.astype(np.int64) if name in _INTEGER_FIELDS else column).tolist()
        for name, column in zip(EDGE_COLUMNS, table.T, strict=True)
    ]


def table_keys(table: EdgeTable) -> list[tuple[int, int, int]]:
    """The ``(namespace, a, b)`` of each row of ``table``: its :class:`EdgeKey`'s values.

    Examples
    --------
    >>> table_keys(rows_array([EdgeRow(1, 2, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)]))
    [(2, 7, 8)]
    """
    ends = table[:, _KEY_COLUMNS].astype(np.int64).T.tolist()
    return list(zip(*ends, strict=True))


def edge_rows(table: EdgeTable) -> list[EdgeRow]:
    """The rows of ``table`` as :class:`EdgeRow`, their integer fields as ints.

    Examples
    --------
    >>> edge_rows(rows_array([EdgeRow(1, 1, 7, 8, 0.3, 1, 30.0, 0.0, 0.0)]))[0].a
    7
    """
    return named(EdgeRow, zip(*table_columns(table), strict=True))


class UseRow(NamedTuple):
    """How often and when one node was used in one namespace (ACT-R base level)."""

    namespace: int
    node: int
    uses: int
    together: int
    """Uses in co-activations (events of two nodes or more)."""
    first: float
    recent: tuple[float, ...]
    """The latest use times, ascending."""


@dataclass
class UseColumns:
    """Use rows as arrays: ``recent`` holds each row's latest use times, ascending from
    the left, -inf where fewer were kept.

    Examples
    --------
    >>> rows = [UseRow(1, 7, 2, 1, 0.0, (0.0, 5.0)), UseRow(1, 8, 1, 0, 5.0, (5.0,))]
    >>> columns = UseColumns.of(rows)
    >>> columns.node.tolist(), columns.recent.tolist()
    ([7, 8], [[0.0, 5.0], [5.0, -inf]])
    """

    namespace: npt.NDArray[np.int64]
    node: npt.NDArray[np.int64]
    uses: npt.NDArray[np.int64]
    together: npt.NDArray[np.int64]
    first: npt.NDArray[np.float64]
    recent: npt.NDArray[np.float64]

    @classmethod
    def of(cls, rows: Sequence[UseRow]) -> UseColumns:
        """Columns of ``rows``."""
        lengths = np.fromiter((len(row.recent) for row in rows), np.int64, len(rows))
        flat = np.fromiter(itertools.chain.from_iterable(row.recent for row in rows), np.float64)
        heads = [(row.namespace, row.node, row.uses, row.together, row.first) for row in rows]
        return cls.build(heads, lengths, flat)

    @classmethod
    def build(
        cls,
        heads: Sequence[Sequence[float]],
        lengths: npt.NDArray[np.int64],
        flat: npt.NDArray[np.float64],
    ) -> UseColumns:
        """Columns from each row's fields before ``recent``, its number of times, and all
        the times one row after another."""
        n = len(heads)
        recent = np.full((n, int(lengths.max()) if n else 0), -np.inf)
        row = np.repeat(np.arange(n), lengths)
        column = np.arange(row.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        recent[row, column] = flat
        namespace, node, uses, together, first = np.asarray(heads, np.float64).reshape(n, 5).T
        return cls(
            namespace=namespace.astype(np.int64),
            node=node.astype(np.int64),
            uses=uses.astype(np.int64),
            together=together.astype(np.int64),
            first=first,
            recent=recent,
        )

    def __len__(self) -> int:
        return int(self.node.size)


@dataclass
class Changes:
    """What changed in storage after a version: new names, written rows, deleted ids,
    written use rows, and every namespace's co-activation event count."""

    version: int
    nodes: list[tuple[int, str]] = field(default_factory=list)
    namespaces: list[tuple[int, str]] = field(default_factory=list)
    rows: Sequence[Sequence[float]] | npt.NDArray[np.float64] = field(default_factory=list)
    """Edge rows in :class:`EdgeRow`'s order (from storage: one float64 array, n × 9)."""
    removed: list[int] = field(default_factory=list)
    uses: UseColumns = field(default_factory=lambda: UseColumns.of([]))
    events: list[tuple[int, int]] = field(default_factory=list)
    recent: list[RecentEvent] = field(default_factory=list)
    """New entries of the recent-events log, oldest first."""
    full: bool = False
    """Everything, not what changed: the version asked about is older than the change
    logs keep (:data:`~synapse_retriever.persistence.sqlite.LOG_VERSIONS`), so the reader
    must start again from this."""


@dataclass
class StoredSnapshot:
    """A snapshot of a mirror as storage keeps it (see
    :mod:`~synapse_retriever.mirror.snapshot`), and what changed after it, read together."""

    version: int
    """The storage version the parts reflect."""
    max_node: int
    max_namespace: int
    parts: dict[str, bytes]
    changes: Changes
    """Everything written after ``version`` (all of it, ``full``, where the change logs no
    longer reach back to it), with the recent-events log whole, not only what came after."""


SnapshotRow = tuple[str, int, int, int, bytes | memoryview]
"""One row of a backend's ``snapshot`` table: part, version, max_node, max_namespace, data."""


def snapshot_rows(
    version: int, max_node: int, max_namespace: int, parts: dict[str, bytes | memoryview]
) -> list[SnapshotRow]:
    """The rows of a ``snapshot`` table that hold ``parts``, each stamped with the version
    and the name maxima they reflect.

    Examples
    --------
    >>> snapshot_rows(7, 3, 1, {"header": b"{}"})
    [('header', 7, 3, 1, b'{}')]
    """
    return [(part, version, max_node, max_namespace, data) for part, data in parts.items()]


def snapshot_stamp(stamps: Iterable[tuple[int, int, int]]) -> tuple[tuple[int, int, int], bool]:
    """The stamp (version, max_node, max_namespace) a snapshot's rows are read at, and
    whether every row carries it. Rows of two stamps are not one snapshot (its parts are
    not to be decoded); the oldest stamp is given, so that the changes read after it are
    all a load from the rows would need.

    Examples
    --------
    >>> snapshot_stamp([(7, 3, 1), (7, 3, 1)])
    ((7, 3, 1), True)
    >>> snapshot_stamp([(7, 3, 1), (6, 3, 1)])
    ((6, 3, 1), False)
    """
    distinct = set(stamps)
    return min(distinct), len(distinct) == 1
