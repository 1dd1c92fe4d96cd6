"""What a backend must do: :class:`Storage` and the :class:`WriteTransaction` it opens.

A store talks to a small protocol over integer ids, so that another backend (PostgreSQL,
say) is a new module, not an edit across the package. Every write runs in one transaction
that takes the write lock first and reads the rows it updates inside it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar, runtime_checkable

from synapse_retriever.errors import StorageUnavailableError, WriteConflictError
from synapse_retriever.persistence.rows import (
    Changes,
    EdgeKey,
    EdgeRow,
    EdgeTable,
    EventRecord,
    ForgetCounts,
    RecentEvent,
    StoredSnapshot,
    UseKey,
    UseRow,
)

__all__ = [
    "ReplacedTablesError",
    "SnapshotStorage",
    "Storage",
    "TransientWriteError",
    "WriteLockBusy",
    "WriteTransaction",
    "lock_held_elsewhere",
    "lock_timeout_error",
    "releasing_while_busy",
    "retrying",
    "rolled_back_forget",
]


class TransientWriteError(Exception):
    """Raised by a backend for a write that may succeed if run again from the start: a
    deadlock or serialization failure, or a connection lost before the commit. The store
    retries it (``config.operations.write_retries``); it never reaches a caller."""

    def __init__(self, message: str, *, conflict: bool) -> None:
        super().__init__(message)
        self.conflict = conflict
        """A conflict with another writer (else a lost connection)."""


class ReplacedTablesError(TransientWriteError):
    """A write refused because the store's tables are not those the process read its ids
    from (restored from a backup, or made again, since): the store reads them whole, and
    runs the write again with their ids."""

    def __init__(self, message: str) -> None:
        super().__init__(message, conflict=True)


_T = TypeVar("_T")


def retrying(attempt: Callable[[], _T], retries: int, what: str) -> _T:
    """``attempt()``, run again after a :class:`TransientWriteError`, with a backoff of
    10 ms doubling each time and full jitter, at most ``retries`` times; then
    :class:`~synapse_retriever.errors.WriteConflictError` (conflicts) or
    :class:`~synapse_retriever.errors.StorageUnavailableError` (lost connections).

    Examples
    --------
    >>> failures = iter([TransientWriteError("deadlock detected", conflict=True)])
    >>> def attempt():
    ...     for failure in failures:
    ...         raise failure
    ...     return "written"
    >>> retrying(attempt, 3, "store")
    'written'
    """
    for retry in range(retries + 1):
        try:
            return attempt()
        except TransientWriteError as exc:
            if retry == retries and not exc.conflict:
                raise StorageUnavailableError(
                    f"{what}: the connection was lost {retry + 1} times ({exc}); nothing was "
                    "written"
                ) from exc
            if retry == retries:
                raise WriteConflictError(
                    f"{what}: a write failed {retry + 1} times ({exc}); nothing was written: "
                    "raise config.operations.write_retries, or write less at once"
                ) from exc
            time.sleep(random.uniform(0.0, 0.01 * 2**retry))
    raise AssertionError("unreachable")  # pragma: no cover


class WriteLockBusy(Exception):
    """Raised by a backend (SQLite) whose write lock another connection holds, before anything
    began and with none of its own locks held, inside :func:`releasing_while_busy`: the
    caller releases its lock, ``wait(deadline)`` returns once the write lock is free (or
    raises :func:`lock_timeout_error` at ``deadline``, :func:`time.monotonic` seconds), and
    the write runs again from the start. It never reaches a caller."""

    def __init__(self, wait: Callable[[float], None], timeout_s: float) -> None:
        super().__init__("the write lock is held by another connection")
        self.wait = wait
        self.timeout_s = timeout_s
        """The backend's ``busy_timeout_s``: how long the write may wait, overall."""


_releasing = threading.local()
"""``depth``: how many :func:`releasing_while_busy` calls this thread is inside."""


def lock_held_elsewhere(
    wait: Callable[[float], None], timeout_s: float, deadline: float | None
) -> float:
    """What a backend does, holding none of its locks, when another connection holds the
    write lock it asked for without waiting: inside :func:`releasing_while_busy`, raise
    :class:`WriteLockBusy` (its caller waits without its own lock); else
    ``wait(deadline)`` here, ``deadline`` set to ``timeout_s`` from now the first time.
    Returns the deadline, for the backend's next attempt."""
    if deadline is None:
        deadline = time.monotonic() + timeout_s
    if getattr(_releasing, "depth", 0):
        raise WriteLockBusy(wait, timeout_s)
    wait(deadline)
    return deadline


def releasing_while_busy(lock: AbstractContextManager[object], attempt: Callable[[], _T]) -> _T:
    """``attempt()`` under ``lock``; when a write of it finds the backend's write lock held
    by another connection (another process's SQLite write), ``lock`` is released while the
    write waits for it, so that readers that take ``lock`` go on, and ``attempt`` runs again
    whole once it is free: it must read what it writes from under ``lock``. The wait lasts
    the backend's ``busy_timeout_s`` at most, overall (then :func:`lock_timeout_error`,
    nothing written). An uncontended write costs nothing more.

    Examples
    --------
    >>> import threading
    >>> releasing_while_busy(threading.Lock(), lambda: "written")
    'written'
    """
    deadline: float | None = None
    while True:
        with lock:
            _releasing.depth = getattr(_releasing, "depth", 0) + 1
            try:
                return attempt()
            except WriteLockBusy as busy:
                pending = busy
            finally:
                _releasing.depth -= 1
        if deadline is None:
            deadline = time.monotonic() + pending.timeout_s
        pending.wait(deadline)


class _RolledBack(Exception):
    """Rolls :func:`rolled_back_forget`'s transaction back, carrying its counts."""

    def __init__(self, counts: ForgetCounts) -> None:
        super().__init__()
        self.counts = counts


def rolled_back_forget(storage: Storage, limit: float) -> ForgetCounts:
    """What ``forget_after(limit)`` removes from ``storage``, in a write transaction rolled
    back: counted by the very code a repair runs, nothing kept (a backend's
    :meth:`Storage.would_forget` where it may write, or on a private copy).

    Examples
    --------
    >>> from synapse_retriever.persistence.sqlite import SQLiteStorage
    >>> storage = SQLiteStorage(":memory:")
    >>> rolled_back_forget(storage, 0.0)
    ForgetCounts(edges=0, uses=0, events=0)
    """
    try:
        with storage.write() as tx:
            raise _RolledBack(tx.forget_after(limit))
    except _RolledBack as done:
        return done.counts


def lock_timeout_error(path: str, timeout_s: float, detail: str) -> WriteConflictError:
    """The error of a write that waited ``busy_timeout_s`` for a lock another transaction
    (or process) held, and gave up; the same on every backend. Nothing was written: the
    transaction was rolled back (or never began).

    Examples
    --------
    >>> print(lock_timeout_error("team.db", 0.5, "database is locked"))
    'team.db': a lock was held by another transaction longer than busy_timeout_s (0.5 s): \
database is locked; nothing was written
    """
    return WriteConflictError(
        f"{path!r}: a lock was held by another transaction longer than busy_timeout_s "
        f"({timeout_s:g} s): {detail.strip()}; nothing was written"
    )


class WriteTransaction(Protocol):
    """What a store may do inside one write transaction."""

    version: int
    """The version this transaction stamps on what it writes. Where writers take turns
    (SQLite) it is known when the transaction begins; where they run concurrently
    (PostgreSQL) it is 0 until the commit assigns it, in commit order."""

    def node_ids(self, names: Sequence[str]) -> list[int]:
        """Ids of ``names``, in order, creating the missing ones."""
        ...

    def namespace_id(self, name: str) -> int:
        """Id of namespace ``name``, created if missing."""
        ...

    def lock_edges(self, keys: Sequence[EdgeKey]) -> EdgeTable:
        """The current rows of the pairs ``keys`` (an edge table, in no particular order),
        locked until the transaction ends. A
        backend whose writers run concurrently locks a pair no row holds yet by creating a
        blank row for it (count 0, weight 0, times
        :data:`~synapse_retriever.learning.decay.BLANK_TIME`) and returns it; the
        transaction must then write that pair."""
        ...

    def edges_by_id(self, ids: Sequence[int]) -> list[EdgeRow]:
        """The current rows of edges ``ids`` still stored, locked until the transaction ends."""
        ...

    def expect(self, edges: int) -> None:
        """Prepare to write about ``edges`` edges whose rows the caller read without
        :meth:`lock_edges` (from its mirror, where writers take turns), before it writes
        them: SQLite raises a file's page cache for a big write, as :meth:`lock_edges` does
        for one, and copies its log into the file after the commit (an in-memory store's
        cache stays small)."""
        ...

    def insert(self, table: EdgeTable) -> EdgeTable:
        """Insert the new edges of an edge table (their ``id`` is ignored); returns them,
        in the same order, with their new ids."""
        ...

    def update(self, table: EdgeTable) -> None:
        """Overwrite the state of existing edges (the rows of an edge table), by id."""
        ...

    def delete(self, ids: Sequence[int]) -> None:
        """Delete edges by id."""
        ...

    def uses_of(self, keys: Sequence[UseKey]) -> list[UseRow]:
        """The use rows of ``keys`` that have one, locked until the transaction ends. A
        backend whose writers run concurrently locks a key no row holds by creating a blank
        row for it (no use: ``uses`` 0, ``first`` +inf) and returns it; the transaction must
        then write that key."""
        ...

    def write_uses(self, rows: Sequence[UseRow]) -> None:
        """Insert or overwrite use rows."""
        ...

    def add_events(self, namespace: int, count: int) -> None:
        """Add ``count`` co-activation events to a namespace's counter."""
        ...

    def log_recent(self, entries: Sequence[RecentEvent], keep: int) -> None:
        """Log events' nodes, ``entries`` in order; each namespace's latest ``keep`` entries
        in time (of one time, the last logged) are kept: older ones are trimmed whenever it
        holds more than ``2 × keep``."""
        ...

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        """Everything written after version ``since``; names with ids above the maxima."""
        ...

    def record_events(self, events: Sequence[EventRecord]) -> list[bool]:
        """Record the ids of ``events`` with their events' times (what :meth:`forget_after`
        reads) and when they were seen (what :meth:`forget_event_ids` reads: a replay's id
        is seen again then); returns, for each, whether its id was recorded now (False: a
        replay, its id recorded before or earlier in ``events``). An id is the
        store's, whatever its namespace; a store over several backends (a layered one)
        records it in its event's backend, as separate calls would, so the same id on two
        backends is two events."""
        ...

    def forget_event_ids(self, before: float) -> int:
        """Delete the recorded event ids last seen (recorded, or sent again) before
        ``before`` (a sweep's, where ``event_ids_kept_days`` is set), whatever their
        events' times: an event sent again after its id is gone is learned again. Returns
        how many were deleted."""
        ...

    def forget_after(self, limit: float) -> ForgetCounts:
        """Delete what is dated after ``limit``: edges created or reinforced then, use
        times, recent-event entries and event ids; every reader then reloads everything
        (when anything was removed: a repair that finds nothing leaves the logs whole).
        Returns the edges, use times and events (entries and ids) removed."""
        ...


class Storage(Protocol):
    """A backend for :class:`~synapse_retriever.store.SynapseStore`."""

    @property
    def path(self) -> str:
        """Where the store lives, as a person reads it (the store's ``path`` and ``repr``):
        a file's path, a PostgreSQL URL without its password, ``"local + shared"`` for two
        layers."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether every write raises :class:`~synapse_retriever.errors.ReadOnlyStoreError`:
        asked for at open, or found then (a file or folder that cannot be written, a
        database role that may not write)."""
        ...

    def load(self) -> Changes:
        """Everything stored, as changes since version 0."""
        ...

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        """Changes since ``since``, or None when nothing was written since (cheap check)."""
        ...

    def write(self) -> AbstractContextManager[WriteTransaction]:
        """A write transaction: commits on success, rolls back on any exception. A
        write that may succeed if run again raises :class:`TransientWriteError`."""
        ...

    def would_forget(self, limit: float) -> ForgetCounts:
        """What :meth:`WriteTransaction.forget_after` at ``limit`` would remove, counted
        alike, with nothing written: a repair's dry run. It works where the storage is
        read-only too (a file that cannot be written, a role that may only read)."""
        ...

    def event_ids_before(self, before: float) -> int:
        """How many recorded event ids :meth:`WriteTransaction.forget_event_ids` at
        ``before`` would delete, read with nothing written: a sweep's dry run. It works
        where the storage is read-only too."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


@runtime_checkable
class SnapshotStorage(Protocol):
    """A backend that keeps a snapshot of the store's mirror beside its rows (optional: a
    store over one without opens by loading every row)."""

    schema_version: int
    """The schema version a snapshot is stamped with."""

    @property
    def keeps_snapshots(self) -> bool:
        """Whether :meth:`write_snapshot` may write one at all (not where the storage is
        read-only, or where no one can open it again)."""
        ...

    def read_snapshot(self) -> StoredSnapshot | None:
        """The stored snapshot and what changed after it, in one read; None if there is none."""
        ...

    def write_snapshot(
        self,
        version: int,
        max_node: int,
        max_namespace: int,
        parts: dict[str, bytes | memoryview],
    ) -> bool:
        """Replace the stored snapshot by ``parts``, taken at ``version``, if that is still the
        storage's version and its write lock is free at once; whether it was written."""
        ...
