"""A rename: node ``old`` becomes ``new`` with its edges and uses, in one transaction.

:func:`rename_node` is one attempt at :meth:`SynapseStore.rename
<synapse_retriever.store.SynapseStore.rename>` (which validates the names, holds the
store's lock and runs it again after a
:class:`~synapse_retriever.persistence.protocols.TransientWriteError`). Its stages, in
order:

1. read every commit so far (on every backend), then open the write transaction and catch
   up inside it (exact where writers take turns: SQLite); with an event id,
   :func:`record_rename` records it, and a rename recorded before stops here;
2. :func:`namespaces_to_move`: the namespaces ``old`` was learned in (edges or uses), of
   those asked for;
3. :func:`lock_edges_to_move`: lock ``old``'s edges and the pairs they move to;
4. :func:`lock_uses`: lock both nodes' use rows, and start again if they are not the rows
   the mirror holds;
5. :func:`refuse_merge`: refuse when ``new`` already has edges or uses there;
6. :func:`move_edges`: write the edges under ``new`` and delete them under ``old``;
7. :func:`move_uses`: ``old``'s use rows become ``new``'s, ``old``'s left blank;

and, once committed, the mirror (:meth:`~synapse_retriever.mirror.mirror.Mirror.committed`).

Why the lock order is safe with concurrent writers (PostgreSQL): a rename takes its locks
in the order every write takes them, edges (step 3: by id, then the new pairs, each in the
backend's sorted order) before use rows (step 4); locking the use rows first deadlocked with
a writer holding one of the node's edges. A writer whose event names both the old and the
new name may still cross the rename's two sets of edges, a deadlock the server breaks and
the rename runs again after (such a rename is refused anyway: the new name has a past).
Every event that uses a node writes that node's use row, so locking both nodes' use rows
orders the rename with every such write: one that committed before the lock is in the rows
read under it (and, not yet in the mirror, makes them differ: step 4 starts again); one that
comes after waits for the commit and sees the nodes moved. A pair under ``new`` that another
writer created meanwhile (a blank row that is not blank) starts the rename again too (step
6), once step 5 has found, from the mirror step 4 found current, that ``new`` had no
associations before. A failure at any step rolls the whole transaction back: nothing moved,
the mirror unchanged but for other writers' commits read in step 1. A layered store renames
in each layer's transaction, the shared one first.

Examples
--------
>>> from synapse_retriever import SynapseConfig
>>> from synapse_retriever.mirror.mirror import Mirror
>>> from synapse_retriever.persistence.sqlite import SQLiteStorage
>>> from synapse_retriever.store.write import Event, write_events
>>> storage, config = SQLiteStorage(":memory:"), SynapseConfig()
>>> mirror = Mirror(config)
>>> mirror.load(storage)
>>> event = Event(["pkg/jwt.py", "keys.py"], "personal", 0.0, None, 0.3)
>>> _ = write_events(storage, mirror, config, [event], "skew")
>>> rename_node(storage, mirror, "pkg/jwt.py", "lib/jwt.py", None)  # edges moved
1
>>> mirror.graph.edge("personal", "keys.py", "lib/jwt.py").activation_count
1
>>> mirror.graph.edge("personal", "keys.py", "pkg/jwt.py") is None
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from synapse_retriever._types import IntArray
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.mirror.graph import MemoryGraph
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.persistence import EdgeRow, Storage, UseRow, WriteTransaction
from synapse_retriever.persistence.protocols import TransientWriteError
from synapse_retriever.persistence.rows import (
    EdgeKey,
    EventRecord,
    UseKey,
    edge_rows,
    rows_array,
)

__all__ = [
    "MergeRefusedError",
    "lock_edges_to_move",
    "lock_uses",
    "move_edges",
    "move_uses",
    "namespaces_to_move",
    "record_rename",
    "refuse_merge",
    "rename_node",
    "uses_differ",
]


class MergeRefusedError(InvalidValueError):
    """A rename onto a node that has associations there: refused, nothing written (the
    caller may pass over it, as a warm start does for a path that held another file)."""


def rename_node(
    storage: Storage,
    mirror: Mirror,
    old: str,
    new: str,
    only: set[str] | None,
    event_id: str | None = None,
) -> int:
    """Move node ``old`` to the id ``new`` in the namespaces ``only`` (None: every one), in
    one transaction of ``storage``, then in ``mirror``; the edges moved. With ``event_id``
    (``only`` then names one namespace), the id is recorded first: one recorded before
    moves nothing, and a rename refused as a merge commits its id before it raises. The
    stages and their lock order are in the module docstring."""
    mirror.refresh(storage, force=True)  # every commit so far, on every backend
    refused: MergeRefusedError | None = None
    with storage.write() as tx:
        mirror.catch_up(tx)  # exact where writers take turns (SQLite)
        if event_id is not None and not record_rename(tx, mirror, event_id, only):
            return 0  # renamed (or refused) before
        graph = mirror.graph  # after the catch-up: a full reload replaces it
        if old not in graph.index:
            return 0
        old_id = graph.index[old]
        edges = graph.incident(old_id)
        spaces = namespaces_to_move(mirror, old_id, edges, only)
        if not spaces:
            return 0
        # no merge: the new name may have no past in those namespaces (in any, for all)
        checked = spaces if only is not None else sorted(graph.ns_names)
        if event_id is not None and new in graph.index:
            try:  # refused before anything is locked: the id alone is committed
                refuse_merge(mirror, old, new, graph.index[new], checked, edges)
            except MergeRefusedError as exc:
                refused = exc
        if refused is None:
            # the new name's id first, known or not: its use rows are locked with the old's
            new_id = graph.index[new] if new in graph.index else tx.node_ids([new])[0]
            rows, moved, blanks = lock_edges_to_move(tx, graph, edges, spaces, old_id, new_id, new)
            locked = lock_uses(tx, mirror, old_id, new_id, spaces, checked)
            refuse_merge(mirror, old, new, new_id, checked, edges)
            inserted, updated = move_edges(tx, rows, moved, blanks)
            uses = move_uses(tx, locked, old_id, new_id)
    if refused is not None:
        raise refused  # after the commit of its id: met again, it moves nothing

    def apply_own(_: bool) -> None:
        mirror.graph.add_names([(new_id, new)])
        mirror.graph.remove([row.id for row in rows])
        mirror.graph.apply([*inserted, *updated])
        mirror.uses.apply(uses)

    mirror.committed(tx.version, apply_own)
    return len(rows)


def record_rename(
    tx: WriteTransaction, mirror: Mirror, event_id: str, only: set[str] | None
) -> bool:
    """Record ``event_id`` in the one namespace of ``only`` (created if new, as a write
    creates it, before the event id: the lock order); whether it is new."""
    (namespace,) = only or {""}  # the store has checked it names one
    known = mirror.graph.ns_index.get(namespace)
    ns_id = known if known is not None else tx.namespace_id(namespace)
    now = time.time()
    return tx.record_events([EventRecord(event_id, now, ns_id, now)])[0]


def namespaces_to_move(
    mirror: Mirror, old_id: int, edges: IntArray, only: set[str] | None
) -> list[int]:
    """Ids of the namespaces node ``old_id`` has ``edges`` or uses in (of ``only``, unless
    None), sorted. Reads the mirror only."""
    graph = mirror.graph
    learned = {graph.ns_names[int(ns)] for ns in graph.namespaces_of(edges)}
    learned |= {name for ns, name in graph.ns_names.items() if mirror.uses.rows(ns, [old_id])}
    return sorted(graph.ns_index[ns] for ns in learned if only is None or ns in only)


def lock_uses(
    tx: WriteTransaction,
    mirror: Mirror,
    old_id: int,
    new_id: int,
    spaces: Sequence[int],
    checked: Sequence[int],
) -> dict[UseKey, UseRow]:
    """Lock the use rows of ``old_id`` in ``spaces`` and of ``new_id`` in ``checked`` (in
    sorted order) and return them by ``(namespace, node)``.

    Raises
    ------
    TransientWriteError
        A row read under lock is not the one the mirror holds: a write to either node
        committed after the mirror was read. Nothing is written; the rename starts again.
    """
    keys = sorted({UseKey(ns, old_id) for ns in spaces} | {UseKey(ns, new_id) for ns in checked})
    locked = {UseKey(row.namespace, row.node): row for row in tx.uses_of(keys)}
    seen = {
        UseKey(r.namespace, r.node): r
        for ns in checked
        for r in mirror.uses.rows(ns, [old_id, new_id])
    }
    if any(uses_differ(locked.get(key), seen.get(key)) for key in keys):
        raise TransientWriteError("a write to the renamed nodes slipped in", conflict=True)
    return locked


def refuse_merge(
    mirror: Mirror, old: str, new: str, new_id: int, checked: Sequence[int], edges: IntArray
) -> None:
    """Refuse a rename onto a node that has edges or uses in one of the namespaces
    ``checked`` (a rename does not merge two nodes). Reads the mirror, which
    :func:`lock_uses` has just found current for both nodes.

    Raises
    ------
    InvalidValueError
        ``new`` already has associations there.
    """
    graph = mirror.graph
    theirs = graph.namespaces_of(graph.incident(new_id) if new_id < graph.n else edges[:0])
    if np.isin(theirs, checked).any() or any(
        row.uses for ns in checked for row in mirror.uses.rows(ns, [new_id])
    ):
        raise MergeRefusedError(
            f"cannot rename {old!r} to {new!r}: {new!r} already has associations "
            "(a rename does not merge two nodes)"
        )


def lock_edges_to_move(
    tx: WriteTransaction,
    graph: MemoryGraph,
    edges: IntArray,
    spaces: Sequence[int],
    old_id: int,
    new_id: int,
    new: str,
) -> tuple[list[EdgeRow], dict[EdgeKey, EdgeRow], dict[EdgeKey, EdgeRow]]:
    """Lock ``old_id``'s ``edges`` of the namespaces ``spaces`` in ``tx``, then the pairs
    they move to under ``new_id``: the rows to move (current, read under lock), each by the
    pair it moves to, and the rows stored under those pairs (a blank row where a concurrent
    backend locks a pair it did not hold)."""
    wanted = edges[np.isin(graph.namespaces_of(edges), spaces)]
    rows = tx.edges_by_id(wanted.tolist())  # current, locked
    moved: dict[EdgeKey, EdgeRow] = {}
    for row in rows:
        other = row.b if row.a == old_id else row.a
        if other == new_id:  # no pair of a node with itself: refuse_merge refuses this one
            continue
        pair = (new_id, other) if new < graph.names[other] else (other, new_id)
        moved[EdgeKey(row.namespace, *pair)] = row
    blanks = {EdgeKey(r.namespace, r.a, r.b): r for r in edge_rows(tx.lock_edges(list(moved)))}
    return rows, moved, blanks


def move_edges(
    tx: WriteTransaction,
    rows: Sequence[EdgeRow],
    moved: dict[EdgeKey, EdgeRow],
    blanks: dict[EdgeKey, EdgeRow],
) -> tuple[list[EdgeRow], list[EdgeRow]]:
    """Move the locked ``rows`` to their new pairs (``moved``, from
    :func:`lock_edges_to_move`) in ``tx``, their state unchanged: the rows inserted and
    updated under the new pairs (a pair a concurrent backend holds a blank row for is
    updated, the others inserted); ``rows`` are deleted.

    Raises
    ------
    TransientWriteError
        A pair under ``new`` was written by another writer meanwhile: the rename starts
        again.
    """
    if any(r.activation_count for r in blanks.values()):
        raise TransientWriteError("the new name was written meanwhile", conflict=True)
    state = {
        key: row._replace(namespace=key.namespace, a=key.a, b=key.b) for key, row in moved.items()
    }
    updated = [state[key]._replace(id=row.id) for key, row in blanks.items()]
    inserted = edge_rows(tx.insert(rows_array([r for k, r in state.items() if k not in blanks])))
    tx.update(rows_array(updated))
    tx.delete([row.id for row in rows])
    return inserted, updated


def move_uses(
    tx: WriteTransaction, locked: dict[UseKey, UseRow], old_id: int, new_id: int
) -> list[UseRow]:
    """Write ``old_id``'s use rows of ``locked`` (read under lock) as ``new_id``'s, and
    ``old_id``'s as blank (no use); returns the rows written."""
    old_uses = [row for row in locked.values() if row.node == old_id and row.uses]
    uses = [use._replace(node=new_id) for use in old_uses]
    blank = [
        UseRow(namespace=use.namespace, node=old_id, uses=0, together=0, first=math.inf, recent=())
        for use in old_uses
    ]
    tx.write_uses([*uses, *blank])
    return [*uses, *blank]


def uses_differ(stored: UseRow | None, seen: UseRow | None) -> bool:
    """Whether a use row read under lock is not the one the mirror holds: another use was
    recorded since (a blank row, which a concurrent backend creates to lock a key, counts
    as none).

    Examples
    --------
    >>> blank = UseRow(namespace=1, node=7, uses=0, together=0, first=math.inf, recent=())
    >>> uses_differ(blank, None)  # a lock's blank row: no use either way
    False
    >>> used = blank._replace(uses=1, first=5.0, recent=(5.0,))
    >>> uses_differ(used, None)  # a use the mirror has not seen
    True
    """

    def state(row: UseRow | None) -> tuple[int, int, float]:
        if row is None:
            return (0, 0, -math.inf)
        return (row.uses, row.together, max(row.recent, default=-math.inf))

    return state(stored) != state(seen)
