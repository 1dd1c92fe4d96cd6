"""What a store keeps in memory of its storage, and how it stays current.

A :class:`Mirror` holds the :class:`~synapse_retriever.memory.graph.MemoryGraph`, the
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
from synapse_retriever.memory.graph import MemoryGraph
from synapse_retriever.persistence.protocols import Storage, WriteTransaction
from synapse_retriever.persistence.rows import Changes

__all__ = ["BIG_LOAD", "Mirror", "return_freed_memory"]

BIG_LOAD = 100_000
"""Edges loaded at once above which the freed heap is handed back to the OS."""


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
        self.uses = UseTable(history=config.use_history, window=config.recent_events)
        self.version = 0
        """The storage version this mirror reflects."""
        self._polled = time.monotonic()

    def load(self, storage: Storage) -> None:
        """Everything ``storage`` holds, from scratch."""
        self.graph = MemoryGraph(self.config)
        self.uses = UseTable(history=self.config.use_history, window=self.config.recent_events)
        self.version = 0
        loaded = storage.load()
        self.apply(loaded)
        if len(loaded.rows) >= BIG_LOAD:  # a collection costs ~0.3 s in a large process
            del loaded
            return_freed_memory()
        self._polled = time.monotonic()

    def apply(self, changes: Changes) -> None:
        """Apply what storage reports changed (everything, if ``changes.full``)."""
        if changes.full:  # everything, not what changed: start again from it
            self.graph = MemoryGraph(self.config)
            self.uses = UseTable(history=self.config.use_history, window=self.config.recent_events)
        self.graph.add_names(changes.nodes, changes.namespaces)
        self.graph.apply(changes.rows)
        self.graph.remove(changes.removed)
        self.uses.apply(changes.uses)
        for namespace, events in changes.events:
            self.uses.set_events(namespace, events)
        self.uses.remember(changes.recent)
        self.version = max(self.version, changes.version)

    def catch_up(self, tx: WriteTransaction) -> None:
        """Apply what other processes committed since our last look (read inside ``tx``).

        Only where writers take turns (SQLite): there ``tx`` knows its version, and what
        committed before it is all there is. Where they run concurrently, the version
        comes at the commit, and :meth:`committed` catches up then.
        """
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
        if clock - self._polled < self.config.refresh_interval_s and not force:
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
