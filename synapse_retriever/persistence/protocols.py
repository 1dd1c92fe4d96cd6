"""What a backend must do: :class:`Storage` and the :class:`WriteTransaction` it opens.

A store talks to a small protocol over integer ids, so that another backend (PostgreSQL,
say) is a new module, not an edit across the package. Every write runs in one transaction
that takes the write lock first and reads the rows it updates inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from synapse_retriever.persistence.rows import Changes, EdgeRow, UseRow

__all__ = ["Storage", "WriteTransaction"]


class WriteTransaction(Protocol):
    """What a store may do inside one write transaction."""

    version: int
    """The version this transaction stamps on what it writes."""

    def node_ids(self, names: Sequence[str]) -> list[int]:
        """Ids of ``names``, in order, creating the missing ones."""
        ...

    def namespace_id(self, name: str) -> int:
        """Id of namespace ``name``, created if missing."""
        ...

    def rows_among(self, namespace: int, nodes: Sequence[int]) -> list[EdgeRow]:
        """Current rows of ``namespace`` whose two ends are both in ``nodes``."""
        ...

    def insert(self, rows: Sequence[EdgeRow]) -> list[EdgeRow]:
        """Insert new edges (their ``id`` is ignored); returns them with their new ids."""
        ...

    def update(self, rows: Sequence[EdgeRow]) -> None:
        """Overwrite the state of existing edges, by id."""
        ...

    def delete(self, ids: Sequence[int]) -> None:
        """Delete edges by id."""
        ...

    def write_uses(self, rows: Sequence[UseRow]) -> None:
        """Insert or overwrite use rows."""
        ...

    def add_events(self, namespace: int, count: int) -> None:
        """Add ``count`` co-activation events to a namespace's counter."""
        ...

    def used(self, namespace: int, nodes: Sequence[int]) -> set[int]:
        """Those of ``nodes`` that have a use row in ``namespace``."""
        ...

    def log_recent(self, namespace: int, at: float, nodes: Sequence[int], keep: int) -> None:
        """Log an event's nodes; the namespace's latest ``keep`` entries are kept (older
        ones are trimmed whenever it holds more than ``2 × keep``)."""
        ...

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        """Everything written after version ``since``; names with ids above the maxima."""
        ...

    def record_event(self, event_id: str, at: float) -> bool:
        """Record an event id; False if it was recorded before (the event is a replay)."""
        ...

    def forget_after(self, limit: float) -> tuple[int, int, int]:
        """Delete what is dated after ``limit``: edges created or reinforced then, use
        times, recent-event entries and event ids; every reader then reloads everything.
        Returns the edges, use times and events (entries and ids) removed."""
        ...


class Storage(Protocol):
    """A backend for :class:`~synapse_retriever.store.SynapseStore`."""

    def load(self) -> Changes:
        """Everything stored, as changes since version 0."""
        ...

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        """Changes since ``since``, or None when no other connection wrote (cheap check)."""
        ...

    def write(self) -> AbstractContextManager[WriteTransaction]:
        """A write transaction: commits on success, rolls back on any exception."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
