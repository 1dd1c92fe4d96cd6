"""What a store keeps in memory of its storage, and how it stays current.

A :class:`Mirror` holds the :class:`~synapse_retriever.mirror.graph.MemoryGraph`, the
node uses (:class:`~synapse_retriever.learning.usage.UseTable`) and the storage version
they reflect. The store applies its own writes to it; what other processes commit is
read incrementally from the change logs: inside each write transaction (:meth:`catch_up`)
and, for reads, at most once per ``refresh_interval_s`` (:meth:`refresh`).

Examples
--------
>>> from synapse_retriever import SynapseConfig
>>> from synapse_retriever.persistence.sqlite import SQLiteStorage
>>> storage = SQLiteStorage(":memory:")
>>> mirror = Mirror(SynapseConfig())
>>> mirror.load(storage)
>>> mirror.version, mirror.graph.max_node
(0, 0)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import time
from collections.abc import Callable

from synapse_retriever.config import SynapseConfig
from synapse_retriever.learning.usage import UseTable
from synapse_retriever.mirror import snapshot
from synapse_retriever.mirror.graph import MemoryGraph
from synapse_retriever.mirror.snapshot import Decoded
from synapse_retriever.persistence.protocols import SnapshotStorage, Storage, WriteTransaction
from synapse_retriever.persistence.rows import Changes, StoredSnapshot

__all__ = [
    "BIG_LOAD",
    "SNAPSHOT_MIN_EDGES",
    "SNAPSHOT_STALE_VERSIONS",
    "Mirror",
    "return_freed_memory",
]

BIG_LOAD = 100_000
"""Edges loaded at once above which the freed heap is handed back to the OS."""

SNAPSHOT_MIN_EDGES = 100_000
"""Stored edge slots from which a store keeps a snapshot of its mirror (below, loading
every row takes a few tenths of a second: measured 0.4 s at 100,000 edges)."""

SNAPSHOT_STALE_VERSIONS = 1_000
"""Versions after the stored snapshot's from which closing a store writes a new one."""


class Mirror:
    """The in-memory graph, node uses and storage version of one store.

    Parameters
    ----------
    config : SynapseConfig
        The store's configuration (the graph's namespaces and decay, the uses' history).
    """

    def __init__(self, config: SynapseConfig) -> None:
        self.config = config
        self.graph = MemoryGraph(config)
        self.uses = _use_table(config)
        self.version = 0
        """The storage version this mirror reflects."""
        self.turns = False
        """Whether the last write caught up inside its transaction: its storage's writers
        take turns (see :meth:`catch_up`)."""
        self.written = 0
        """Edge rows the store's last ``reinforce``, ``reinforce_many`` or ``use`` that
        committed wrote (0 for a use, or for replays): a batch reads its rows ahead of its
        transaction only after a write of many (see
        :func:`~synapse_retriever.store.write.read_ahead`)."""
        self.snapshot_version: int | None = None
        """The version of the snapshot storage holds, as this mirror last read or wrote it."""
        self._polled = time.monotonic()

    def open(self, storage: Storage) -> None:
        """Everything ``storage`` holds: from its snapshot and the changes after it where it
        keeps a sound one (see :mod:`~synapse_retriever.mirror.snapshot`), else every row."""
        if isinstance(storage, SnapshotStorage):
            stored = storage.read_snapshot()
            if stored is not None:
                found = None if stored.changes.full else self._trusted(stored, storage)
                if found is not None:
                    self.graph, self.uses, self.version = found.graph, found.uses, found.version
                    self.snapshot_version = found.version
                    del stored.parts, found
                    self.apply(stored.changes)
                    if self.graph.size >= BIG_LOAD:  # the parts' bytes, freed to the heap
                        return_freed_memory()
                    self._polled = time.monotonic()
                    return
                if stored.changes.full:  # stale: every row was read with it already
                    del stored.parts
                    self._start(stored.changes)
                    return
        self.load(storage)

    def _trusted(self, stored: StoredSnapshot, storage: SnapshotStorage) -> Decoded | None:
        """The snapshot ``stored`` holds, or None if it cannot be trusted (it is then rebuilt
        from the rows, and written anew at close)."""
        try:
            found = snapshot.decode(
                stored.parts,
                self.config,
                schema=storage.schema_version,
                stamp=(stored.version, stored.max_node, stored.max_namespace),
            )
        except snapshot.SnapshotError:
            return None
        stamp = (found.version, found.max_node, found.max_namespace)
        if stamp != (stored.version, stored.max_node, stored.max_namespace):
            return None
        return found if found.version <= stored.changes.version else None

    def save(self, storage: Storage) -> bool:
        """Write a snapshot of this mirror, brought up to date first, if ``storage`` keeps
        snapshots, the graph has ``SNAPSHOT_MIN_EDGES`` edge slots or more, and the stored
        snapshot is ``SNAPSHOT_STALE_VERSIONS`` versions behind or missing; whether one
        was written (not when another writer holds the lock, or writes meanwhile)."""
        if (
            not isinstance(storage, SnapshotStorage)
            or not storage.keeps_snapshots
            or self.graph.size < SNAPSHOT_MIN_EDGES
        ):
            return False
        self.refresh(storage, force=True)  # exact at its version, as a snapshot must be
        if (
            self.snapshot_version is not None
            and self.version - self.snapshot_version < SNAPSHOT_STALE_VERSIONS
        ):
            return False
        parts = snapshot.encode(self.graph, self.uses, self.version, schema=storage.schema_version)
        graph = self.graph
        if not storage.write_snapshot(self.version, graph.max_node, graph.max_namespace, parts):
            return False
        self.snapshot_version = self.version
        return True

    def load(self, storage: Storage) -> None:
        """Everything ``storage`` holds, from scratch."""
        self._start(storage.load())

    def _start(self, loaded: Changes) -> None:
        """Start again from ``loaded``: everything storage holds."""
        self.graph = MemoryGraph(self.config)
        self.uses = _use_table(self.config)
        self.version = 0
        self.apply(loaded)
        self.graph.check_names()
        if len(loaded.rows) >= BIG_LOAD:  # a collection costs ~0.3 s in a large process
            del loaded
            return_freed_memory()
        self._polled = time.monotonic()

    def apply(self, changes: Changes) -> None:
        """Apply what storage reports changed (everything, if ``changes.full``)."""
        if changes.full:  # everything, not what changed: start again from it
            self.graph = MemoryGraph(self.config)
            self.uses = _use_table(self.config)
        self.graph.add_names(changes.nodes, changes.namespaces)
        self.graph.apply(changes.rows)
        self.graph.remove(changes.removed)
        self.uses.apply(changes.uses)
        for namespace, events in changes.events:
            self.uses.set_events(namespace, events)
        self.uses.remember(changes.recent)
        # everything read again may be older: tables restored from a backup under the store
        self.version = changes.version if changes.full else max(self.version, changes.version)
        if changes.full:
            self.graph.check_names()

    def catch_up(self, tx: WriteTransaction) -> None:
        """Apply what other processes committed since our last look (read inside ``tx``).

        Only where writers take turns (SQLite): there ``tx`` knows its version, and what
        committed before it is all there is. Where they run concurrently, the version
        comes at the commit, and :meth:`committed` catches up then.
        """
        self.turns = bool(tx.version)
        if tx.version and tx.version - 1 != self.version:
            graph = self.graph
            changes = tx.changes(self.version, graph.max_node, graph.max_namespace)
            # everything before this transaction: if it rolls back, its version number is
            # free again and another process's next commit will carry it
            changes.version = tx.version - 1
            self.apply(changes)

    def committed(self, version: int, apply_own: Callable[[bool], None]) -> None:
        """After a write committed as ``version``, apply it with ``apply_own``.

        If it follows the version this mirror reflects, the mirror now reflects it.
        Otherwise another writer committed in between: the write's rows (read under lock,
        so newer than anything the mirror holds) are applied all the same, but not its
        entry in the recent-events log (``apply_own(False)``), and the version stays: the
        next poll reads everything since, the write's log entry among it.
        """
        contiguous = version == self.version + 1
        apply_own(contiguous)
        if contiguous:
            self.version = version

    def refresh(self, storage: Storage, *, force: bool = False) -> None:
        """Apply other processes' writes, checking at most once per refresh interval
        (every time with ``force``)."""
        clock = time.monotonic()
        if clock - self._polled < self.config.operations.refresh_interval_s and not force:
            return
        self._polled = clock
        graph = self.graph
        changes = storage.poll(self.version, graph.max_node, graph.max_namespace)
        if changes is not None:
            self.apply(changes)


def return_freed_memory() -> None:
    """Hand freed heap memory back to the OS, as a mirror does after loading ``BIG_LOAD``
    edges or more (glibc keeps it otherwise: measured 27 bytes per edge of resident
    memory at 1M edges); a no-op off glibc."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _use_table(config: SynapseConfig) -> UseTable:
    """An empty table of uses, keeping what ``config.learning`` says."""
    return UseTable(history=config.learning.use_history, window=config.learning.recent_events)
