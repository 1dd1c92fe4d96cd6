"""SQLite, the embedded backend: one file, WAL, several processes, one learned graph.

Every write runs in one transaction that takes the write lock first (``BEGIN IMMEDIATE``)
and reads the rows it updates inside that transaction.

Node and namespace names are stored once, in their own tables; an edge row holds
their integer ids. Ids are never reused, so every process that opens the file can
index its in-memory arrays by them. Every write transaction bumps a version counter
and appends what it wrote or deleted to change logs (edge ids, and the (namespace,
node) keys of use rows), so a store fetches exactly what other processes changed since
it last looked; the logs keep the latest ``LOG_VERSIONS`` versions, and a store that
last looked before that reloads everything. A private in-memory store (``":memory:"``)
keeps no logs: no other connection can ever read them (their triggers are dropped when it
opens; measured: a tenth of an event's time at 1M edges).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import sqlite3
import stat
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from synapse_retriever.config import Operations, check_flag
from synapse_retriever.errors import (
    AccessDeniedError,
    ClosedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
    StorageUnavailableError,
    SynapseError,
    shown,
)
from synapse_retriever.persistence.protocols import (
    WriteTransaction,
    lock_held_elsewhere,
    lock_timeout_error,
    rolled_back_forget,
)
from synapse_retriever.persistence.rows import (
    EDGE_COLUMNS,
    EMPTY_EDGES,
    Changes,
    EdgeKey,
    EdgeRow,
    EdgeTable,
    EventRecord,
    ForgetCounts,
    RecentEvent,
    StoredSnapshot,
    UseColumns,
    UseKey,
    UseRow,
    snapshot_rows,
    snapshot_stamp,
    table_columns,
)

__all__ = [
    "APPLICATION_ID",
    "LOG_VERSIONS",
    "SCHEMA_VERSION",
    "SIDE_FILES",
    "OpenedFile",
    "SQLiteStorage",
    "begin_write",
    "check_location",
    "opened_file",
    "same_database",
    "same_file",
    "shared_memory",
    "typed_error",
    "typed_errors",
    "upgraded_copy",
    "write_locked",
]

APPLICATION_ID = 0x53594E41  # "SYNA"
"""``PRAGMA application_id`` of a synapse database; other SQLite files are refused."""


MIGRATIONS: list[str] = [
    # 1: names stored once; edges by integer ids, stamped with the version that wrote them.
    """
    CREATE TABLE nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE edges (
        id                 INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace          INTEGER NOT NULL REFERENCES namespaces (id),
        a                  INTEGER NOT NULL REFERENCES nodes (id),
        b                  INTEGER NOT NULL REFERENCES nodes (id),
        weight             REAL    NOT NULL,
        activation_count   INTEGER NOT NULL,
        half_life_days     REAL    NOT NULL,
        created_at         REAL    NOT NULL,
        last_reinforced_at REAL    NOT NULL,
        version            INTEGER NOT NULL,
        CHECK (a <> b)
    );
    CREATE UNIQUE INDEX edges_by_pair ON edges (a, b, namespace);
    CREATE INDEX edges_by_version ON edges (version);
    CREATE TABLE removed (
        version INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (version, id)
    ) WITHOUT ROWID;
    CREATE TABLE events (id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('version', 0);
    """,
    # 2: uses per node (ACT-R base level) and co-activation events per namespace, written in
    # the edges' transaction; a file of version 1 gets them approximated from its edges.
    """
    CREATE TABLE node_uses (
        namespace INTEGER NOT NULL REFERENCES namespaces (id),
        node      INTEGER NOT NULL REFERENCES nodes (id),
        uses      INTEGER NOT NULL,
        together  INTEGER NOT NULL,
        first_at  REAL    NOT NULL,
        recent    BLOB    NOT NULL,
        version   INTEGER NOT NULL,
        PRIMARY KEY (namespace, node)
    ) WITHOUT ROWID;
    CREATE INDEX node_uses_by_version ON node_uses (version);
    CREATE TABLE namespace_events (
        namespace INTEGER PRIMARY KEY REFERENCES namespaces (id),
        events    INTEGER NOT NULL
    );
    CREATE TABLE recent_uses (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace INTEGER NOT NULL REFERENCES namespaces (id),
        at        REAL    NOT NULL,
        nodes     BLOB    NOT NULL,
        version   INTEGER NOT NULL
    );
    CREATE INDEX recent_uses_by_namespace ON recent_uses (namespace, id);
    """,
    # 3: what each version changed in append-only logs, trimmed past LOG_VERSIONS, instead
    # of indexes on the rows' versions: an update moved its row's entry in those indexes,
    # a scattered page write per edge (measured: 25% of a 10-node event at 1M edges). The
    # logs are written by triggers, so every writer logs, even a process of an older release
    # that opened the file before it was migrated (its sweeps fail: `removed` is gone).
    """
    DROP INDEX edges_by_version;
    DROP INDEX node_uses_by_version;
    DROP TABLE removed;
    CREATE TABLE edge_log (
        version INTEGER NOT NULL, edge INTEGER NOT NULL, PRIMARY KEY (version, edge)
    ) WITHOUT ROWID;
    CREATE TABLE use_log (
        version   INTEGER NOT NULL,
        namespace INTEGER NOT NULL,
        node      INTEGER NOT NULL,
        PRIMARY KEY (version, namespace, node)
    ) WITHOUT ROWID;
    INSERT INTO meta (key, value) SELECT 'log_horizon', value FROM meta WHERE key = 'version';
    CREATE TRIGGER edges_log_insert AFTER INSERT ON edges BEGIN
        INSERT OR IGNORE INTO edge_log (version, edge) VALUES (NEW.version, NEW.id);
    END;
    CREATE TRIGGER edges_log_update AFTER UPDATE ON edges BEGIN
        INSERT OR IGNORE INTO edge_log (version, edge) VALUES (NEW.version, NEW.id);
    END;
    CREATE TRIGGER edges_log_delete AFTER DELETE ON edges BEGIN
        INSERT OR IGNORE INTO edge_log (version, edge)
        VALUES ((SELECT value FROM meta WHERE key = 'version'), OLD.id);
    END;
    CREATE TRIGGER uses_log_insert AFTER INSERT ON node_uses BEGIN
        INSERT OR IGNORE INTO use_log (version, namespace, node)
        VALUES (NEW.version, NEW.namespace, NEW.node);
    END;
    CREATE TRIGGER uses_log_update AFTER UPDATE ON node_uses BEGIN
        INSERT OR IGNORE INTO use_log (version, namespace, node)
        VALUES (NEW.version, NEW.namespace, NEW.node);
    END;
    """,
    # 4: when each event id was last seen (recorded, or sent again), apart from its event's
    # time (which a repair reads): a sweep forgets the ids not seen for
    # ``event_ids_kept_days``. The ids of an older file count as seen at its migration, and
    # those a process of an older release still running records (without it) as seen then.
    """
    ALTER TABLE events ADD COLUMN seen REAL NOT NULL DEFAULT 0;
    UPDATE events SET seen = (julianday('now') - 2440587.5) * 86400.0;
    CREATE TRIGGER events_seen AFTER INSERT ON events WHEN NEW.seen = 0 BEGIN
        UPDATE events SET seen = (julianday('now') - 2440587.5) * 86400.0 WHERE id = NEW.id;
    END;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
LOG_TRIGGERS = (
    "edges_log_insert",
    "edges_log_update",
    "edges_log_delete",
    "uses_log_insert",
    "uses_log_update",
)
"""The triggers that write the change logs (migration 3)."""

LOG_VERSIONS = 10_000
"""Versions kept in the change logs; a store that looks less often reloads everything."""
LOG_TRIM_EVERY = 1_000
"""The logs are trimmed by the write transactions whose version is a multiple of this."""

MEMDB_URI = "file:synapse?vfs=memdb"
"""Where ``":memory:"`` is opened: a private database in memory (no leading ``/``: not
shared) behind SQLite's ordinary page cache. A plain ``":memory:"`` database *is* its page
cache, and SQLite walks that whole cache at the commit of a write that split index pages
(``pcache1TruncateUnsafe``: a page renumbered through the pending-byte page leaves the
cache's largest key past the end); measured at 1M edges: 290 µs a commit, against 27 µs
here. A memdb database holds at most 1 GiB (SQLite's ``SQLITE_MEMDB_DEFAULT_MAXSIZE``),
about ten million edges."""

SNAPSHOT_TABLE = """
CREATE TABLE IF NOT EXISTS snapshot (
    part          TEXT    PRIMARY KEY,
    version       INTEGER NOT NULL,
    max_node      INTEGER NOT NULL,
    max_namespace INTEGER NOT NULL,
    data          BLOB    NOT NULL
)
"""
"""The mirror's snapshot (:mod:`~synapse_retriever.mirror.snapshot`), one row per part.
Made by the first snapshot written, not by a migration: a file without it is the same
schema version, which older releases still open (their writes are logged, so a snapshot
and the change log after it stay exact)."""

AUTOCHECKPOINT_PAGES = 10_000
"""Pages in the write-ahead log past which a commit copies them into the file (SQLite's
``wal_autocheckpoint``); a big write's checkpoint runs after it instead (see ``BIG_WRITE``)."""

BIG_DELETE = 10_000
"""Deleting more edges than this at once raises a file's page cache to BIG_DELETE_CACHE_KIB."""
BIG_DELETE_CACHE_KIB = 262_144
BIG_WRITE = 10_000
"""A write transaction that locks (or expects: ``expect``) more pairs than this raises a
file's page cache to BIG_DELETE_CACHE_KIB until it ends: a batch of 40,000 pairs at 1M edges
touches most pages of the edges and their pair index, which a small cache writes out and
reads back (measured: SQLite's share of five such batches 2.9 s → 2.2 s). A single event
keeps the default cache: SQLite walks its whole page cache at some commits (see
``MEMDB_URI``). Such a write's checkpoint runs after its commit, in a thread of its own,
while the caller goes on (``SQLiteStorage._checkpoint_after``). An in-memory store's cache
is never raised (see :data:`MEMORY_CACHE_KIB`)."""
MEMORY_CACHE_KIB = 64
"""The page cache of an in-memory store (32 pages of :data:`PAGE_SIZE`), never raised for a big
write or sweep. Opened on memdb (``MEMDB_URI``), its pages live in memory already, so the cache
only holds a second copy of some, which SQLite walks at some commits: a small one is faster.
Measured at 1M edges with pages of 4 KiB, ``bench perf`` in turn with SQLite's default (2 MiB,
raised to 256 MiB for a big write): one event 48,155 and 46,038 upserts per second against
40,887 and 44,689; 1,000-event batches 152,900 and 151,785 against 138,883 and 141,193; a sweep
of 64,229 edges (a script of its own) 0.21 s against 0.26 to 0.28 s. A cache of 1 GiB wrote one
event at 35,000 a second. With pages of 2 KiB, 32 KiB measured the same as 64 KiB. A plain
in-memory database (SQLite without memdb, another URI) is its page cache whatever its size is
set to: the setting changes nothing there."""

PAGE_SIZE = 2048
"""Bytes per page of a new store, in a file or in memory (SQLite's default is 4,096). One
event's commit writes (in memory, journals) each page it touches whole, and at 1M edges it
touches a few pages of the edges and of their pair index, scattered: half the bytes per page,
half the bytes per commit. ``bench perf`` at 1M edges, four runs in turn against 4 KiB
(medians): one event in memory 52,986 upserts per second against 50,332, on a file 30,217
against 29,176 (bare SQLite's 86,000 against 71,846); at 10,000 edges on a file 41,828 against
37,050. It costs a little elsewhere: a sweep of 63,697 edges 0.51 s against 0.46 s, opening
from the snapshot 0.30 s against 0.27 s, 1,000-event batches 1 to 4% fewer. 8 KiB was slower
still for one event. Set where this class creates the store: a missing or empty file, or a
database in memory. A store keeps the size it was made with: a file made before or at another
size, one SQLite had given a header before (a journal mode or ``user_version`` set on an empty
database), or a shared in-memory database another connection opened first is read and written
as it is."""

SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite appends to a database's name for its side files (write-ahead log, shared
memory, rollback journal): no store may be named so, and no export may overwrite them."""

SQLITE_ERROR, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 1, 5, 6, 8
SQLITE_IOERR, SQLITE_CORRUPT = 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 13, 14, 26
"""SQLite's primary result codes this module tells apart."""

_T = TypeVar("_T")

_COLUMNS = ", ".join(EDGE_COLUMNS)
_ID = EDGE_COLUMNS.index("id")
_NS, _A, _B = (EDGE_COLUMNS.index(name) for name in ("namespace", "a", "b"))
_EDGE_COLUMNS = ", ".join(f"e.{column}" for column in EDGE_COLUMNS)
_USE_QUERY = "SELECT namespace, node, uses, together, first_at, recent FROM node_uses"


class _SQLiteTransaction:
    def __init__(
        self, db: sqlite3.Connection, version: int, *, logged: bool = True, memory: bool = False
    ) -> None:
        self._db = db
        self.version = version
        self._logged = logged
        """Whether the change logs are written (see ``SQLiteStorage.forget_logs``)."""
        self._memory = memory
        """An in-memory database: its page cache is never raised (``MEMORY_CACHE_KIB``)."""
        self.widened: int | None = None
        """The page cache's size before a big write raised it (see ``BIG_WRITE``)."""

    def _widen(self) -> None:
        if self.widened is None and not self._memory:
            self.widened = int(self._db.execute("PRAGMA cache_size").fetchone()[0])
            self._db.execute(f"PRAGMA cache_size = {-BIG_DELETE_CACHE_KIB}")

    def node_ids(self, names: Sequence[str]) -> list[int]:
        found = dict(self._select_in("SELECT name, id FROM nodes WHERE name IN ({})", names))
        missing = [name for name in dict.fromkeys(names) if name not in found]
        if missing:
            start = self._db.execute("SELECT coalesce(max(id), 0) FROM nodes").fetchone()[0] + 1
            new = list(zip(missing, range(start, start + len(missing)), strict=True))
            self._db.executemany("INSERT INTO nodes (name, id) VALUES (?, ?)", new)
            found.update(new)
        return [found[name] for name in names]

    def namespace_id(self, name: str) -> int:
        row = self._db.execute("SELECT id FROM namespaces WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
        cursor = self._db.execute("INSERT INTO namespaces (name) VALUES (?)", (name,))
        return int(cursor.lastrowid or 0)

    def expect(self, edges: int) -> None:
        if edges > BIG_WRITE:
            self._widen()

    def lock_edges(self, keys: Sequence[EdgeKey]) -> EdgeTable:
        # the write lock is this connection's already: reading is locking
        self.expect(len(keys))
        found = [EMPTY_EDGES]
        # in the pair index's order: each of its pages is read once, in turn (a batch of
        # 40,000 pairs at 1M edges reads most of them)
        table = _key_table(keys, len(EdgeKey._fields))
        flat = table[np.lexsort(table.T[_BY_PAIR])].ravel().tolist()
        for chunk in _chunks(flat, 3 * 8000):  # 24,000 of SQLite's 32,766 variables
            marks = ", ".join(["(?, ?, ?)"] * (len(chunk) // 3))
            query = (
                f"WITH k (namespace, a, b) AS (VALUES {marks}) SELECT {_EDGE_COLUMNS} FROM k "
                "CROSS JOIN edges e ON e.a = k.a AND e.b = k.b AND e.namespace = k.namespace"
            )
            found.append(_edge_table(self._db.execute(query, chunk)))
        return np.concatenate(found)

    def edges_by_id(self, ids: Sequence[int]) -> list[EdgeRow]:
        found: list[EdgeRow] = []
        for chunk in _chunks(ids, 900):
            query = f"SELECT {_COLUMNS} FROM edges WHERE id IN ({', '.join('?' * len(chunk))})"
            found += (EdgeRow(*row) for row in self._db.execute(query, chunk))
        return found

    def uses_of(self, keys: Sequence[UseKey]) -> list[UseRow]:
        found: list[UseRow] = []
        for chunk in _chunks(_key_table(keys, len(UseKey._fields)).ravel().tolist(), 2 * 8000):
            marks = ", ".join(["(?, ?)"] * (len(chunk) // 2))
            query = (
                f"WITH k (namespace, node) AS (VALUES {marks}) SELECT u.namespace, u.node, "
                "u.uses, u.together, u.first_at, u.recent FROM k CROSS JOIN node_uses u "
                "ON u.namespace = k.namespace AND u.node = k.node"
            )
            found += (
                UseRow(ns, node, uses, both, first, struct.unpack(f"<{len(times) // 8}d", times))
                for ns, node, uses, both, first, times in self._db.execute(query, chunk)
            )
        return found

    def insert(self, table: EdgeTable) -> EdgeTable:
        if not len(table):
            return table
        last = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'edges'").fetchone()
        start = (last[0] if last else 0) + 1
        # ids in the pair index's order: its new entries are placed in turn, each of its
        # pages visited once, as the table's rows are appended
        order = np.lexsort((table[:, _NS], table[:, _B], table[:, _A]))
        placed = table.copy()
        placed[order, _ID] = np.arange(start, start + len(table))
        self._db.executemany(
            f"INSERT INTO edges ({_COLUMNS}, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            zip(*table_columns(placed[order]), itertools.repeat(self.version)),
        )
        return placed

    def update(self, table: EdgeTable) -> None:
        # in the table's order: each page written in turn
        ordered = table[np.argsort(table[:, _ID], kind="stable")]
        ids, _, _, _, *state = table_columns(ordered)
        self._db.executemany(
            "UPDATE edges SET weight = ?, activation_count = ?, half_life_days = ?, "
            "created_at = ?, last_reinforced_at = ?, version = ? WHERE id = ?",
            zip(*state, itertools.repeat(self.version), ids),
        )

    def delete(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        db = self._db
        # scattered deletes touch most pages of the edges and their indexes: a page cache
        # that holds them all writes each once (measured: -20% for 64k of 1M edges)
        cache = int(db.execute("PRAGMA cache_size").fetchone()[0])
        if len(ids) > BIG_DELETE and not self._memory:
            db.execute(f"PRAGMA cache_size = {-BIG_DELETE_CACHE_KIB}")
        try:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (id INTEGER PRIMARY KEY)")
            db.execute("DELETE FROM doomed")
            db.executemany("INSERT OR IGNORE INTO doomed (id) VALUES (?)", [(i,) for i in ids])
            db.execute("DELETE FROM edges WHERE id IN (SELECT id FROM doomed)")  # logged
            db.execute("DELETE FROM doomed")
        finally:
            db.execute(f"PRAGMA cache_size = {cache}")

    def write_uses(self, rows: Sequence[UseRow]) -> None:
        self._db.executemany(
            "INSERT INTO node_uses (namespace, node, uses, together, first_at, recent, version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, node) DO UPDATE SET "
            "uses = excluded.uses, together = excluded.together, first_at = excluded.first_at, "
            "recent = excluded.recent, version = excluded.version",
            [
                (
                    row.namespace,
                    row.node,
                    row.uses,
                    row.together,
                    row.first,
                    _pack(row.recent),
                    self.version,
                )
                for row in rows
            ],
        )

    def add_events(self, namespace: int, count: int) -> None:
        self._db.execute(
            "INSERT INTO namespace_events (namespace, events) VALUES (?, ?) "
            "ON CONFLICT (namespace) DO UPDATE SET events = events + excluded.events",
            (namespace, count),
        )

    def log_recent(self, entries: Sequence[RecentEvent], keep: int) -> None:
        db = self._db
        db.executemany(
            "INSERT INTO recent_uses (namespace, at, nodes, version) VALUES (?, ?, ?, ?)",
            [
                (namespace, at, struct.pack(f"<{len(nodes)}q", *nodes), self.version)
                for namespace, at, nodes in entries
            ],
        )
        for namespace in dict.fromkeys(namespace for namespace, _, _ in entries):
            (held,) = db.execute(  # counted: trimmed by time, the ids left are not a range
                "SELECT count(*) FROM recent_uses WHERE namespace = ?", (namespace,)
            ).fetchone()
            if held > 2 * keep:  # more than 2 × keep rows: trim
                db.execute(
                    "DELETE FROM recent_uses WHERE id IN (SELECT id FROM recent_uses WHERE "
                    "namespace = ?1 ORDER BY at DESC, id DESC LIMIT -1 OFFSET ?2)",
                    (namespace, keep),
                )

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        db = self._db
        horizon = db.execute("SELECT value FROM meta WHERE key = 'log_horizon'").fetchone()[0]
        if not self._logged:  # no logs: what another writer changed since is known only whole
            horizon = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
        full = since < horizon
        if full:  # the logs no longer reach back to since: everything
            since = max_node = max_namespace = 0
        edges, uses = f"SELECT {_COLUMNS} FROM edges", _USE_QUERY
        after: tuple[int, ...] = ()
        if since:
            edges += " WHERE id IN (SELECT edge FROM edge_log WHERE version > ?)"
            uses += (
                " WHERE (namespace, node) IN "
                "(SELECT namespace, node FROM use_log WHERE version > ?)"
            )
            after = (since,)
        rows = _edge_table(db.execute(edges, after))
        removed: list[int] = []
        if since:
            present = set(rows[:, EDGE_COLUMNS.index("id")].astype(np.int64).tolist())
            logged = db.execute("SELECT DISTINCT edge FROM edge_log WHERE version > ?", after)
            removed = [edge for (edge,) in logged if edge not in present]
        return Changes(
            version=int(db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]),
            nodes=db.execute("SELECT id, name FROM nodes WHERE id > ?", (max_node,)).fetchall(),
            namespaces=db.execute(
                "SELECT id, name FROM namespaces WHERE id > ?", (max_namespace,)
            ).fetchall(),
            rows=rows,
            removed=removed,
            uses=_use_columns(db.execute(uses, after).fetchall()),
            events=db.execute("SELECT namespace, events FROM namespace_events").fetchall(),
            recent=self.recent_entries(since),
            full=full,
        )

    def recent_entries(self, since: int) -> list[RecentEvent]:
        """The entries of the recent-events log written after version ``since``, oldest first."""
        return [
            RecentEvent(namespace, at, struct.unpack(f"<{len(nodes) // 8}q", nodes))
            for namespace, at, nodes in self._db.execute(
                "SELECT namespace, at, nodes FROM recent_uses WHERE version > ? ORDER BY id",
                (since,),
            )
        ]

    def trim_logs(self) -> None:
        """Forget the logs of versions older than the latest :data:`LOG_VERSIONS`."""
        horizon = self.version - LOG_VERSIONS
        if horizon > 0:
            self._db.execute("DELETE FROM edge_log WHERE version <= ?", (horizon,))
            self._db.execute("DELETE FROM use_log WHERE version <= ?", (horizon,))
            self._db.execute(
                "UPDATE meta SET value = max(value, ?) WHERE key = 'log_horizon'", (horizon,)
            )

    def record_events(self, events: Sequence[EventRecord]) -> list[bool]:
        recorded: list[bool] = []
        db = self._db
        for event_id, at, _, seen in events:
            cursor = db.execute(
                "INSERT INTO events (id, at, seen) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (event_id, at, seen),
            )
            recorded.append(cursor.rowcount == 1)
            if not recorded[-1]:  # a replay: seen again now
                db.execute("UPDATE events SET seen = max(seen, ?) WHERE id = ?", (seen, event_id))
        return recorded

    def forget_event_ids(self, before: float) -> int:
        return int(self._db.execute("DELETE FROM events WHERE seen < ?", (before,)).rowcount)

    def forget_after(self, limit: float) -> ForgetCounts:
        db = self._db
        edges = [
            edge
            for (edge,) in db.execute(
                "SELECT id FROM edges WHERE last_reinforced_at > ?1 OR created_at > ?1", (limit,)
            )
        ]
        self.delete(edges)
        columns = _use_columns(db.execute(_USE_QUERY).fetchall())
        late = np.flatnonzero((columns.recent > limit).any(axis=1) | (columns.first > limit))
        dropped = 0
        kept: list[UseRow] = []
        for row in late.tolist():
            times = columns.recent[row]
            times = times[times > -np.inf]
            keep = times[times <= limit]
            dropped += int(times.size - keep.size)
            key = UseKey(int(columns.namespace[row]), int(columns.node[row]))
            uses = int(columns.uses[row]) - int(times.size - keep.size)
            if uses <= 0 or keep.size == 0 or columns.first[row] > limit:
                db.execute("DELETE FROM node_uses WHERE namespace = ? AND node = ?", key)
            else:
                together = min(int(columns.together[row]), uses)
                first = float(columns.first[row])
                kept.append(
                    UseRow(
                        namespace=key.namespace,
                        node=key.node,
                        uses=uses,
                        together=together,
                        first=first,
                        recent=tuple(keep.tolist()),
                    )
                )
        self.write_uses(kept)
        events = db.execute("DELETE FROM recent_uses WHERE at > ?", (limit,)).rowcount
        events += db.execute("DELETE FROM events WHERE at > ?", (limit,)).rowcount
        counts = ForgetCounts(edges=len(edges), uses=dropped, events=events)
        if any(counts):  # deleted use rows are not logged: every reader starts again
            db.execute("UPDATE meta SET value = ? WHERE key = 'log_horizon'", (self.version,))
        return counts

    def _select_in(self, query: str, values: Sequence[str]) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            found += self._db.execute(query.format(", ".join("?" * len(chunk))), chunk).fetchall()
        return found


class SQLiteStorage:
    """SQLite backend: WAL, busy timeout, one connection shared safely between threads.

    Parameters
    ----------
    path : str or PathLike
        The database file; ``":memory:"`` for a private in-memory database. A missing
        or zero-length file becomes a new store; any other file must be a synapse
        database (``PRAGMA application_id``), else :class:`NotASynapseDatabaseError`
        is raised and the file is left untouched. A file SQLite finds damaged raises
        :class:`CorruptDatabaseError`, at open or whenever a read or a write meets the
        damage (the write is rolled back).
    busy_timeout_s : float
        How long to wait for another process's write lock, and for another process
        creating the same new store.
    read_only : bool
        Never write. Also chosen on its own when the file or its folder cannot be
        written; every write then raises :class:`ReadOnlyStoreError`.

    Notes
    -----
    Several processes may open the same missing path at once: each reads the header
    in one read transaction, then the schema is created under the write lock, where
    the header is read again, so the others wait and then find a complete store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = Operations.busy_timeout_s,
        read_only: bool = False,
        _paged: bool = True,
        _page_size: int | None = None,
    ) -> None:
        self.path = file_path(path)
        self._paged = _paged
        self._logged = True
        """Whether this connection writes the change logs (:meth:`forget_logs`)."""
        self._lock = threading.RLock()
        self._in_memory = in_memory(self.path)
        self.read_only = check_flag("read_only", read_only)
        self._busy_timeout_s = busy_timeout_s
        if self._in_memory and self.read_only:
            raise InvalidValueError("an in-memory store cannot be read-only: it starts empty")
        if not self._in_memory:
            self.read_only = check_location(self.path, read_only=self.read_only)
        self._db = self._connect(busy_timeout_s)
        try:
            with self._typed_errors():
                self._open(busy_timeout_s, PAGE_SIZE if _page_size is None else _page_size)
            self._file = opened_file(self._db, self.path)
        except BaseException:
            self._db.close()
            raise
        self._data_version = self._pragma("data_version")
        self._seen = 0
        """The latest version this connection read or wrote."""
        self._pending = False
        """A big write committed and its checkpoint has not run (:meth:`_checkpoint_after`)."""
        self._checkpointing: threading.Thread | None = None
        """The thread of the latest big write's checkpoint."""

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        """A connection: read-write, or read-only (``immutable`` beside a WAL file that
        holds nothing, where no shared-memory file can be made, or first where no one can
        write the file: then no empty ``-wal`` and ``-shm`` are left beside it)."""
        uris = [self.path]
        if self.path == ":memory:" and self._paged:
            uris = [MEMDB_URI, self.path]  # the second where SQLite was built without memdb
        if self.read_only:
            if not Path(self.path).is_file():
                raise NotASynapseDatabaseError(f"no synapse database at {self.path!r} to read")
            uri = Path(self.path).absolute().as_uri()
            uris = [f"{uri}?mode=ro"]
            if _empty_or_missing(Path(f"{self.path}-wal")):  # nothing a reader could miss
                frozen = _frozen(Path(self.path))
                uris.insert(0 if frozen else 1, f"{uri}?immutable=1")
        for position, target in enumerate(uris):
            try:
                db = sqlite3.connect(
                    target,
                    timeout=busy_timeout_s,
                    isolation_level=None,
                    check_same_thread=False,
                    uri=target == MEMDB_URI or (target.startswith("file:") and self.read_only),
                )
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.OperationalError as exc:
                if position + 1 == len(uris):
                    raise NotASynapseDatabaseError(f"cannot open {self.path!r}: {exc}") from None
            except sqlite3.DatabaseError as exc:
                if getattr(exc, "sqlite_errorcode", 0) & 0xFF == SQLITE_NOTADB:
                    raise NotASynapseDatabaseError(  # SQLite read the header and wrote nothing
                        f"{self.path!r} is not a synapse database (not an SQLite file); it was "
                        "left untouched"
                    ) from None
                raise self._typed(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _pragma(self, name: str) -> int:
        return int(self._db.execute(f"PRAGMA {name}").fetchone()[0])

    def _header(self) -> tuple[int, int, bool]:
        """``application_id``, ``user_version`` and whether any table exists, read in one
        transaction (another process may be creating the store meanwhile)."""
        db = self._db
        in_transaction = db.in_transaction
        if not in_transaction:
            db.execute("BEGIN")
        try:
            has_tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
            return self._pragma("application_id"), self._pragma("user_version"), has_tables
        finally:
            if not in_transaction:
                db.execute("COMMIT")

    def _refuse(self, app_id: int, user_version: int, has_tables: bool) -> None:
        # a new store is an empty file: no tables, no application id and no schema version
        if app_id != APPLICATION_ID and (app_id != 0 or has_tables or user_version != 0):
            raise NotASynapseDatabaseError(
                f"{self.path!r} is an SQLite file of another application "
                f"(application_id {app_id:#x}, expected {APPLICATION_ID:#x}); it was left untouched"
            )
        if user_version > SCHEMA_VERSION:
            raise NotASynapseDatabaseError(
                f"{self.path!r} has schema version {user_version}, newer than this library's "
                f"{SCHEMA_VERSION}: upgrade synapse-retriever"
            )

    def _open(self, busy_timeout_s: float, page_size: int) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        app_id, user_version, has_tables = self._header()
        self._refuse(app_id, user_version, has_tables)
        if not has_tables and not self.read_only:  # a new store, before WAL and its first table
            db.execute(f"PRAGMA page_size = {int(page_size)}")  # changes nothing once made
        if self.read_only:
            if user_version < SCHEMA_VERSION:
                raise NotASynapseDatabaseError(
                    f"{self.path!r} is read-only and "
                    + (
                        "empty: there is no store to read"
                        if user_version == 0
                        else f"has schema version {user_version}, older than this library's "
                        f"{SCHEMA_VERSION}: open it once with write access to upgrade it"
                    )
                )
        elif not self._in_memory:
            _retry_busy(lambda: db.execute("PRAGMA journal_mode = WAL"), busy_timeout_s)
            db.execute("PRAGMA synchronous = NORMAL")
            # checkpoint in larger batches: small transactions otherwise pay a
            # checkpoint every ~40 events (measured: +45% reinforcement throughput)
            db.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        if user_version < SCHEMA_VERSION and not self.read_only:
            self._migrate()
        if self.path == ":memory:":  # private: no other connection ever reads the logs
            self.forget_logs()
        if self._in_memory:
            db.execute(f"PRAGMA cache_size = {-MEMORY_CACHE_KIB}")

    def forget_logs(self) -> None:
        """Stop writing the change logs (a private in-memory store: no other connection can
        read them; one filled from a file by ``sqlite3.Connection.backup`` has them). Another
        writer on this storage (a second store given it, an import) is then seen whole: a
        reader behind the latest version reads every row again, where it would have read the
        logs (a write reads its rows from the mirror it caught up: see
        :func:`~synapse_retriever.store.write.step_edges`)."""
        for trigger in LOG_TRIGGERS:
            self._db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        self._logged = False

    def check(self) -> None:
        """Raise :class:`CorruptDatabaseError` if SQLite's structural check of every page
        (``PRAGMA quick_check``) finds damage.

        Not run at open: loading a store reads every table already, and the check would
        add about a quarter to it (measured: 1.1 s at a million edges); ``synapse-retriever import``
        runs it before writing into an existing file.
        """
        with self._lock, self._typed_errors():
            found = [row[0] for row in self._db.execute("PRAGMA quick_check(3)")]
        if found != ["ok"]:
            raise CorruptDatabaseError(_corrupt_message(self.path, "; ".join(found)))

    def _migrate(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # the write lock first: another creator waits here
        try:
            app_id, current, has_tables = self._header()  # another process may have done it
            self._refuse(app_id, current, has_tables)
            for version in range(current, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[version]):
                    db.execute(statement)
            if current <= 1:  # uses came with version 2: approximate them from the edges
                _backfill_uses(db)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # a failed COMMIT may have ended it: keep its own error
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def _typed_errors(self) -> AbstractContextManager[None]:
        return typed_errors(self.path)

    def _typed(self, exc: sqlite3.DatabaseError) -> Exception:
        return typed_error(self.path, exc)

    def load(self) -> Changes:
        with self._lock, self._typed_errors():
            return self._read(0, 0, 0)

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        with self._lock, self._typed_errors():
            if self._pragma("data_version") == self._data_version and since == self._seen:
                return None  # no other connection wrote, and the caller has all this one did
            return self._read(since, max_node, max_namespace)

    def _read(self, since: int, max_node: int, max_namespace: int) -> Changes:
        self._db.execute("BEGIN")
        try:
            changes = _SQLiteTransaction(self._db, 0, logged=self._logged).changes(
                since, max_node, max_namespace
            )
            self._seen = changes.version
            return changes
        finally:
            self._end_read()

    def _end_read(self) -> None:
        """End the read transaction ``BEGIN`` opened, noting the ``data_version`` of what
        it read: inside it, so that a commit of another connection after the read (before
        its end, or between its end and the note) changes the value the next :meth:`poll`
        finds, and is read then (noted after the end, it was taken as read already, and
        missed until yet another commit)."""
        try:
            self._data_version = self._pragma("data_version")
        finally:
            self._db.execute("COMMIT")

    schema_version = SCHEMA_VERSION

    @property
    def keeps_snapshots(self) -> bool:
        return not (self.read_only or self._in_memory)  # no one opens an in-memory one again

    def read_snapshot(self) -> StoredSnapshot | None:
        with self._lock, self._typed_errors():
            db = self._db
            db.execute("BEGIN")
            try:
                if not db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshot'"
                ).fetchone():
                    return None
                stamps = db.execute(
                    "SELECT DISTINCT version, max_node, max_namespace FROM snapshot"
                ).fetchall()
                if not stamps:
                    return None
                (version, max_node, max_namespace), whole = snapshot_stamp(stamps)
                tx = _SQLiteTransaction(db, 0, logged=self._logged)
                changes = tx.changes(version, max_node, max_namespace)
                self._seen = changes.version
                parts: dict[str, bytes] = {}
                # the parts are read only where they may be trusted: one stamp, the logs
                # reaching back to it (stale, every row was read already: 95 MB at 1M edges)
                if not changes.full:
                    changes.recent = tx.recent_entries(0)  # the window is rebuilt whole
                    if whole:
                        parts = dict(db.execute("SELECT part, data FROM snapshot").fetchall())
            finally:
                self._end_read()
        return StoredSnapshot(version, max_node, max_namespace, parts, changes)

    def write_snapshot(
        self,
        version: int,
        max_node: int,
        max_namespace: int,
        parts: dict[str, bytes | memoryview],
    ) -> bool:
        if not self.keeps_snapshots:
            return False
        with self._lock, self._typed_errors():
            db = self._db
            self._settle()  # a big write's checkpoint first, as before every write
            if not begin_write(db, self.path, self._busy_timeout_s, self._file):
                return False  # another writer holds the lock: not now
            try:
                current = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
                if current != version:  # written meanwhile: the mirror is not that version
                    db.execute("ROLLBACK")
                    return False
                db.execute(SNAPSHOT_TABLE)
                db.execute("DELETE FROM snapshot")
                db.executemany(
                    "INSERT INTO snapshot (part, version, max_node, max_namespace, data) "
                    "VALUES (?, ?, ?, ?, ?)",
                    snapshot_rows(version, max_node, max_namespace, parts),
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        return True

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self.path!r} is open read-only (its file or folder cannot be written, or "
                "read_only=True): writes are refused"
            )
        db = self._db
        later = False
        with write_locked(
            self._lock, db, self.path, self._busy_timeout_s, self._file, before=self._settle
        ):
            tx: _SQLiteTransaction | None = None
            try:
                version = db.execute(
                    "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
                ).fetchone()[0]
                tx = _SQLiteTransaction(
                    db, int(version), logged=self._logged, memory=self._in_memory
                )
                yield tx
                if tx.version % LOG_TRIM_EVERY == 0:
                    tx.trim_logs()
                later = tx.widened is not None  # a file's big write (memory never widens)
                if later:  # its checkpoint runs after it (see _checkpoint_after)
                    db.execute("PRAGMA wal_autocheckpoint = 0")
                db.execute("COMMIT")
                self._seen = tx.version
                self._pending = later
            except BaseException:
                later = False
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse even this
                    db.execute("ROLLBACK")
                raise
            finally:
                if tx is not None and tx.widened is not None:  # a file's big write
                    with contextlib.suppress(sqlite3.Error):
                        db.execute(f"PRAGMA cache_size = {tx.widened}")
                    with contextlib.suppress(sqlite3.Error):
                        db.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        if later:
            self._checkpoint_after()

    def _checkpoint_after(self) -> None:
        """Copy a big write's pages from the log into the file in a thread of its own, while
        the caller goes on (the store's in-memory graph takes the write meanwhile), instead
        of inside its commit. Whatever comes first under the storage's lock runs it, once
        (:meth:`_settle`): that thread, or the next write before it begins, or a
        checkpoint; so every write begins after a complete checkpoint, the log starts again
        from its beginning as after a checkpoint in the commit, and holds no more than it
        did. Where no thread can start (at the interpreter's exit, past a limit), it runs
        now. A checkpoint that cannot run (another connection's, a full disk) leaves the log
        to the next one; it raises nothing.

        Measured at 1M edges: a 1,000-event batch's checkpoint copies 13,000 pages in about
        0.1 s, a sixth of the batch (docs/benchmarks/speed.md, the fifteenth pass).
        """
        thread = threading.Thread(target=self._settle, name="synapse-checkpoint")
        try:
            thread.start()
        except RuntimeError:
            self._settle()
            return
        self._checkpointing = thread

    def _settle(self) -> None:
        """Run the checkpoint a big write left to :meth:`_checkpoint_after`, unless it ran."""
        with self._lock:
            if self._pending:
                self._pending = False
                with contextlib.suppress(sqlite3.Error):  # closed meanwhile, too
                    self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def copy(self) -> SQLiteStorage:
        """A private copy of the database in memory, read from this connection (a dry run
        on a store that cannot be written runs on it).

        Examples
        --------
        >>> storage = SQLiteStorage(":memory:")
        >>> with storage.copy().write() as tx:
        ...     tx.version
        1
        """
        with self._lock, self._typed_errors():
            # memdb cannot hold a WAL file's header; an in-memory copy takes the file's page
            # size before anything is written (SQLite refuses to change it there)
            size = self._pragma("page_size")
            copy = SQLiteStorage(":memory:", _paged=False, _page_size=size)
            self._db.backup(copy._db)
        return copy

    def would_forget(self, limit: float) -> ForgetCounts:
        """What a repair at ``limit`` would remove: ``forget_after`` in a transaction rolled
        back, on a private copy of the file (:meth:`copy`) where it cannot be written.

        Examples
        --------
        >>> storage = SQLiteStorage(":memory:")
        >>> storage.would_forget(0.0)
        ForgetCounts(edges=0, uses=0, events=0)
        """
        storage = self.copy() if self.read_only else self
        try:
            return rolled_back_forget(storage, limit)
        finally:
            if storage is not self:
                storage.close()

    def event_ids_before(self, before: float) -> int:
        """How many recorded event ids a sweep's ``forget_event_ids(before)`` would delete.

        Examples
        --------
        >>> SQLiteStorage(":memory:").event_ids_before(0.0)
        0
        """
        with self._lock, self._typed_errors():
            (count,) = self._db.execute(
                "SELECT count(*) FROM events WHERE seen < ?", (before,)
            ).fetchone()
        return int(count)

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the file and empty it, before the file is moved or
        linked on its own (SQLite does it at the last close too, but says nothing if the
        copy fails). Raises :class:`~synapse_retriever.errors.StorageUnavailableError` if
        it cannot (a full disk), or another connection holds the log.

        Examples
        --------
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "s.db")
        >>> storage = SQLiteStorage(path)
        >>> storage.checkpoint()
        >>> os.path.getsize(path + "-wal")
        0
        """
        self._settle()
        with self._lock, self._typed_errors():
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StorageUnavailableError(
                f"{self.path!r}: its write-ahead log could not be copied into it (another "
                "connection reads it); try again"
            )

    def close(self) -> None:
        running = self._checkpointing
        if running is not None and running is not threading.current_thread():
            running.join()  # its checkpoint, or nothing if another call ran it
        with self._lock:
            self._pending = False  # the last connection's close copies the whole log
            self._db.close()


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, triggers' bodies kept whole."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:60]!r}")


_BY_PAIR = [EdgeKey._fields.index(field) for field in ("namespace", "b", "a")]
"""The order of the index ``edges_by_pair``, (a, b, namespace), as ``np.lexsort`` keys of
an :class:`EdgeKey` table (last key first)."""


def _chunks(values: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _key_table(keys: Sequence[tuple[int, ...]], width: int) -> npt.NDArray[np.int64]:
    """``keys`` (tuples of ``width`` ints) as one int64 array, a row per key, filled in C: a
    batch's keys are tens of thousands (measured, 40,000 edge keys sorted and flattened:
    12 ms, against 43 ms for ``sorted`` and a list comprehension)."""
    flat = np.fromiter(itertools.chain.from_iterable(keys), np.int64, width * len(keys))
    return flat.reshape(len(keys), width)


def _edge_table(cursor: sqlite3.Cursor) -> EdgeTable:
    """The rows of ``cursor`` as an edge table, each row's values streamed into it as it is
    read: no list of a million Python tuples (whose memory the allocator keeps long after),
    and no ``np.asarray`` of tuples (measured: 45 rows 57 µs against 80 µs, a million
    rows 1.2 s against 1.7 s)."""
    flat = np.fromiter(itertools.chain.from_iterable(cursor), np.float64)
    return flat.reshape(-1, len(EDGE_COLUMNS))


def _pack(times: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(times)}d", *times)


def _use_columns(rows: Sequence[tuple[int, int, int, int, float, bytes]]) -> UseColumns:
    """Columns of stored use rows (``_USE_QUERY``'s: :class:`UseRow`'s fields, ``recent``
    packed), their packed times unpacked in one pass."""
    packed = [times for *_, times in rows]
    lengths = np.fromiter((len(times) // 8 for times in packed), np.int64, len(rows))
    flat = np.frombuffer(b"".join(packed), "<f8").astype(np.float64)
    return UseColumns.build([head for *head, _ in rows], lengths, flat)


def _backfill_uses(db: sqlite3.Connection) -> None:
    """Approximate the uses of a version-1 file from its edges (see ``uses_from_edges``),
    with its default history (8 times per node) and window (50 events): the migration
    runs before any configuration is known."""
    from synapse_retriever.learning.usage import uses_from_edges  # the math, at migration

    edges = db.execute(
        "SELECT a, b, namespace, activation_count, created_at, last_reinforced_at FROM edges"
    ).fetchall()
    if not edges:
        return
    rows, events, latest = uses_from_edges(edges)
    version = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
    tx = _SQLiteTransaction(db, int(version))
    tx.write_uses(rows)
    for namespace, count in events.items():
        tx.add_events(namespace, count)
    tx.log_recent(latest, keep=len(latest))


def typed_error(path: str, exc: sqlite3.DatabaseError) -> Exception:
    """SQLite's damage, read-only, full-disk and I/O errors as this library's, naming the
    file; ``exc`` itself otherwise."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return CorruptDatabaseError(_corrupt_message(path, str(exc)))
    text = str(exc)
    if text.startswith("Could not decode to UTF-8"):  # Python's: a text written by hand
        return CorruptDatabaseError(_corrupt_message(path, f"{exc}: a text that is not UTF-8"))
    if code == SQLITE_ERROR and (  # a table dropped, or a schema version set back by hand
        text.startswith(("no such table", "no such index", "duplicate column name"))
        or text.endswith("already exists")
        or " has no column named " in text
    ):
        return CorruptDatabaseError(
            _corrupt_message(path, f"{exc}: its schema is not the one its version says")
        )
    if code == SQLITE_READONLY:
        return ReadOnlyStoreError(
            f"{path!r} cannot be written ({exc}): open it read-only to read it"
        )
    if code == SQLITE_CANTOPEN:  # the file, or its -wal or -shm beside it (a /proc file)
        return StorageUnavailableError(
            f"{path!r} cannot be opened as a database ({exc}): SQLite could not open it, or "
            "make its -wal and -shm files beside it"
        )
    if code in (SQLITE_IOERR, SQLITE_FULL):
        return StorageUnavailableError(
            f"{path!r} could not be read or written ({exc}): what was being written was rolled "
            "back; make room on its disk, or check the device, and try again"
        )
    return exc


@contextmanager
def typed_errors(path: str) -> Iterator[None]:
    """Raise :func:`typed_error`'s error for what the block raises (see :class:`SQLiteStorage`).

    Examples
    --------
    >>> with typed_errors("x.db"):
    ...     pass
    """
    try:
        yield
    except sqlite3.DatabaseError as exc:
        typed = typed_error(path, exc)
        if typed is exc:
            raise
        raise typed from None


class OpenedFile(NamedTuple):
    """The file a connection opened: its name as SQLite resolved it, device and inode."""

    name: str
    device: int
    inode: int


def opened_file(db: sqlite3.Connection, path: str) -> OpenedFile | None:
    """The file ``db`` opened at ``path`` as its main database; None for one in memory
    (also a URI of another file system, ``vfs=memdb``: no file of that name to compare).

    Examples
    --------
    >>> import os, sqlite3, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "s.db")
    >>> opened_file(sqlite3.connect(path), path).name == os.path.realpath(path)
    True
    >>> opened_file(sqlite3.connect(":memory:"), ":memory:") is None
    True
    """
    if in_memory(path):
        return None
    name = db.execute("PRAGMA database_list").fetchone()[2]
    try:
        found = os.stat(name)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return OpenedFile(name, found.st_dev, found.st_ino)


BUSY_DELAYS_S = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.025, 0.025, 0.05, 0.05, 0.1)
"""The pauses between two looks at a write lock another connection holds, the last one
repeated: SQLite's own busy handler's."""


def begin_write(
    db: sqlite3.Connection, path: str, busy_timeout_s: float, opened: OpenedFile | None
) -> bool:
    """``BEGIN IMMEDIATE`` on ``db``, without waiting: the write lock, or False (nothing
    begun) while another connection holds it; then, under it, the file ``opened`` must
    still be the one its name names. Deleted, or replaced (a backup moved over it), a write
    would go to a file no one opens again, or put its log over the new file's pages: it is
    rolled back, a :class:`StorageUnavailableError`. ``busy_timeout_s`` is ``db``'s busy
    timeout, set back at once (its reads keep it); a database in memory keeps it throughout
    (only one in a shared cache has other connections, and they lock it without waiting).

    Examples
    --------
    >>> import os, sqlite3, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "s.db")
    >>> db = sqlite3.connect(path, isolation_level=None)
    >>> opened = opened_file(db, path)
    >>> begin_write(db, path, 1.0, opened)
    True
    >>> _ = db.execute("COMMIT")
    >>> os.remove(path)
    >>> try:
    ...     begin_write(db, path, 1.0, opened)
    ... except StorageUnavailableError as error:
    ...     print(str(error).partition(" ")[2])
    was deleted, moved or replaced while it was open: nothing was written; open it again
    """
    # no other connection waits on its lock (a shared cache's lock waits on no busy handler):
    # as it is; a memdb database shared by name waits as a file does
    shared = shared_memory(path)
    private = in_memory(path) and (shared is None or shared[0] == "cache")
    if not private:
        db.execute("PRAGMA busy_timeout = 0")  # waited for outside the caller's locks
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED):
            return False
        raise
    finally:
        if not private:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    if opened is None:
        return True
    try:
        found = os.stat(opened.name)
        same = (found.st_dev, found.st_ino) == (opened.device, opened.inode)
    except (FileNotFoundError, NotADirectoryError):  # gone, or its folder
        same = False
    except OSError as exc:  # a network file system's moment (EIO, ESTALE): not known gone
        db.execute("ROLLBACK")
        raise StorageUnavailableError(
            f"{path!r} could not be looked at ({exc.strerror or exc}): nothing was written; "
            "try again"
        ) from None
    if not same:
        db.execute("ROLLBACK")
        raise StorageUnavailableError(
            f"{path!r} was deleted, moved or replaced while it was open: nothing was written; "
            "open it again"
        )
    return True


def upgraded_copy(path: str, folder: str | os.PathLike[str]) -> str | None:
    """A copy in ``folder`` of the store file at ``path``, if an earlier release wrote it (its
    schema version is below :data:`SCHEMA_VERSION`), for what only reads it or runs dry:
    opened, the copy is upgraded, the file left as that release can read it (opening the
    file itself upgrades it for good). None, nothing copied, for anything else (a store of
    this version, a file of another kind, a missing one: opening ``path`` says what it is).

    The header is read as bytes first: a store of this version with nothing in its
    write-ahead log is left without a connection (nothing is made beside a read-only one).
    Otherwise its version is read, and the copy made, through a read-only connection, by
    SQLite's backup: the log may hold another header (release 0.1.0 checkpointed every
    10,000 pages, and a process of it may hold the file open).

    Raises
    ------
    StorageUnavailableError
        An earlier release's store that could not be copied (a full temporary folder):
        nothing was changed.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "s.db")
    >>> SQLiteStorage(path).close()
    >>> upgraded_copy(path, folder) is None  # this release's
    True
    """
    local = Path(uri_file(path))
    try:
        with local.open("rb") as file:
            header = file.read(100)
    except OSError:  # missing, a folder, unreadable: opening it says what it is
        return None
    version, app_id = (int.from_bytes(header[at : at + 4], "big") for at in (60, 68))
    if not header.startswith(b"SQLite format 3\x00") or app_id not in (0, APPLICATION_ID):
        return None  # not a synapse store: opening it refuses it
    logged = not _empty_or_missing(Path(f"{local}-wal"))  # a header the log may change
    if app_id == APPLICATION_ID and version == SCHEMA_VERSION and not logged:
        return None
    target = os.path.join(folder, local.name or "store.db")
    try:
        with contextlib.closing(
            sqlite3.connect(f"{local.absolute().as_uri()}?mode=ro", uri=True)
        ) as source:
            app_id = int(source.execute("PRAGMA application_id").fetchone()[0])
            version = int(source.execute("PRAGMA user_version").fetchone()[0])
            if app_id != APPLICATION_ID or not 0 < version < SCHEMA_VERSION:
                return None
            with contextlib.closing(sqlite3.connect(target)) as copy:
                source.backup(copy)
    except sqlite3.Error as exc:
        if not 0 < version < SCHEMA_VERSION:
            return None  # unreadable here: opening the file says why
        raise StorageUnavailableError(
            f"{path!r} was written by an earlier release (schema version {version}) and "
            f"could not be copied to be read without upgrading it ({exc}); nothing was "
            "changed: free room in the temporary folder, or upgrade it with a command that "
            "writes"
        ) from None
    return target


def same_database(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether SQLite opens ``a`` and ``b`` as one database: one file (by any spelling,
    ``file:`` URI, symlink or hard link), made already or not, or one database in memory
    shared by name (``cache=shared``, or a memdb name begun by ``/``; ``":memory:"`` is
    private to each connection).

    Examples
    --------
    >>> same_database("/no-such-folder/new.db", "file:///no-such-folder/./new.db?mode=rwc")
    True
    >>> same_database(":memory:", ":memory:"), same_database("file:m?mode=memory&cache=shared",
    ...                                                       "file:m?mode=memory&cache=shared")
    (False, True)
    >>> same_database("file:/m?vfs=memdb", "file:///m?vfs=memdb"), same_database(
    ...     "file:m?vfs=memdb", "file:m?vfs=memdb")
    (True, False)
    """
    a, b = os.fspath(a), os.fspath(b)
    if in_memory(a) or in_memory(b):
        return shared_memory(a) is not None and shared_memory(a) == shared_memory(b)
    return same_file(uri_file(a), uri_file(b))


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file, as Python opens them (by any spelling, symlink
    or hard link), made already or not (``":memory:"`` is no file).

    Examples
    --------
    >>> same_file("/", "/.."), same_file("/", "/no-such-file")
    (True, False)
    >>> same_file("/no-such-folder/new.db", "/no-such-folder/./new.db")  # both to be made
    True
    """
    if ":memory:" in (os.fspath(a), os.fspath(b)):
        return False
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either is missing: where would it be made?
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, RuntimeError, ValueError):  # a link loop, a NUL
            return False


@contextmanager
def write_locked(
    lock: threading.RLock,
    db: sqlite3.Connection,
    path: str,
    busy_timeout_s: float,
    opened: OpenedFile | None,
    *,
    before: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Hold ``lock`` (the storage's, which guards ``db``) with a write transaction begun on
    ``db`` (:func:`begin_write`), SQLite's errors typed; ``before`` runs under ``lock`` just
    before each attempt to begin it. While another connection holds the
    write lock, neither is held: the wait (``busy_timeout_s`` at most, then
    :func:`~synapse_retriever.persistence.protocols.lock_timeout_error`, nothing begun)
    runs outside ``lock``, and outside the caller's own lock where it asked for that
    (:func:`~synapse_retriever.persistence.protocols.releasing_while_busy`), so that
    reads go on meanwhile.

    Examples
    --------
    >>> import os, sqlite3, tempfile, threading
    >>> path = os.path.join(tempfile.mkdtemp(), "s.db")
    >>> db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    >>> with write_locked(threading.RLock(), db, path, 1.0, None):
    ...     db.in_transaction
    True
    >>> _ = db.execute("ROLLBACK")
    """

    def wait(deadline: float) -> None:
        for delay in itertools.chain(BUSY_DELAYS_S, itertools.repeat(BUSY_DELAYS_S[-1])):
            time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
            with lock, typed_errors(path), _closed_meanwhile(path):
                if begin_write(db, path, busy_timeout_s, None):
                    db.execute("ROLLBACK")  # free: the write runs again from its start
                    return
            if time.monotonic() >= deadline:
                raise lock_timeout_error(path, busy_timeout_s, "database is locked")

    deadline: float | None = None
    while True:
        with lock, typed_errors(path), _closed_meanwhile(path):
            if before is not None:
                before()
            if begin_write(db, path, busy_timeout_s, opened):
                yield
                return
        deadline = lock_held_elsewhere(wait, busy_timeout_s, deadline)


@contextmanager
def _closed_meanwhile(path: str) -> Iterator[None]:
    """A connection closed while a write waited for the lock (the store's or memory's
    ``close()`` does not wait for it): :class:`ClosedError`, nothing written."""
    try:
        yield
    except sqlite3.ProgrammingError as exc:
        if "closed" not in str(exc):
            raise
        raise ClosedError(
            f"{path!r} was closed while a write waited for its lock: nothing was written"
        ) from None


def _retry_busy(statement: Callable[[], object], timeout_s: float) -> None:
    """Run ``statement``, retrying while SQLite reports the file busy, up to ``timeout_s``.

    Switching a new file to WAL needs it to itself and can fail at once, without the busy
    handler, while another process is creating the same store (measured: 3 of 240 opens
    of one new path by 6 processes at once)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (SQLITE_BUSY, SQLITE_LOCKED) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def _unwritable(path: Path) -> bool:
    """Whether an existing store file, or its folder, cannot be written."""
    if not path.exists():
        return False
    return not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK)


def _frozen(path: Path) -> bool:
    """Whether no one can write an existing file now: this process cannot (root can write a
    file whatever its permissions say), and no write permission is set for anyone, or the
    permissions let this process write it and the system refuses all the same (an immutable
    file, ``chattr +i``, or a read-only file system)."""
    if os.access(path, os.W_OK):
        return False
    found = path.stat()
    if not found.st_mode & 0o222:
        return True
    if not hasattr(os, "geteuid"):
        return False
    owner = found.st_uid == os.geteuid() and found.st_mode & stat.S_IWUSR
    return os.geteuid() == 0 or bool(owner)


def _empty_or_missing(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def _corrupt_message(path: str, detail: str) -> str:
    detail = " ".join(detail.split())
    return (
        f"{path!r} is a damaged database ({detail}); nothing was written: restore a backup, "
        f"or copy out what is readable with `sqlite3 {path} .recover`"
    )


def in_memory(path: str) -> bool:
    """Whether SQLite opens ``path`` as a database in memory: ``:memory:``, or a ``file:``
    URI named ``:memory:``, with ``mode=memory``, or on SQLite's memdb file system
    (``vfs=memdb``, as ``MEMDB_URI``), its parameters read as SQLite reads them
    (:func:`_uri_parameters`).

    Examples
    --------
    >>> in_memory(":memory:"), in_memory("file:m1?mode=memory&cache=shared"), in_memory("a.db")
    (True, True, False)
    >>> in_memory("file:/team?vfs=memdb"), in_memory("file:s.db?MODE=memory")
    (True, False)
    """
    if path == ":memory:" or (path.startswith("file:") and uri_file(path) == ":memory:"):
        return True
    parameters = _uri_parameters(path)
    return parameters.get("mode") == "memory" or parameters.get("vfs") == "memdb"


def _uri_parameters(path: str) -> dict[str, str]:
    """A ``file:`` URI's query parameters (none for a path), as SQLite reads them: names and
    values percent-decoded, letter case kept (SQLite opens a file for ``VFS=memdb``), the
    last of a name repeated.

    Examples
    --------
    >>> _uri_parameters("file:/x?vfs=%6Demdb&cache=shared&cache=private#f")
    {'vfs': 'memdb', 'cache': 'private'}
    """
    if not path.startswith("file:"):
        return {}
    query = path.partition("?")[2].partition("#")[0]
    pairs = (part.partition("=") for part in query.split("&") if part)
    return {urllib.parse.unquote(name): urllib.parse.unquote(value) for name, _, value in pairs}


def shared_memory(path: str) -> tuple[str, str] | None:
    """How the connections of one process share the database in memory at ``path``: a memdb
    name begun by ``/`` (``("memdb", name)``) or a shared cache (``("cache", name)``); None
    where each connection has its own (``":memory:"``, ``mode=memory`` without a shared
    cache, another memdb name) or ``path`` is no database in memory.

    Examples
    --------
    >>> shared_memory("file:///team?vfs=memdb"), shared_memory("file:m?mode=memory&cache=shared")
    (('memdb', '/team'), ('cache', 'm'))
    >>> shared_memory("file:team?vfs=memdb"), shared_memory("file:/t?vfs=memdb&mode=memory")
    (None, None)
    >>> shared_memory(":memory:"), shared_memory("a.db")
    (None, None)
    """
    if not in_memory(path):
        return None
    parameters, name = _uri_parameters(path), uri_file(path)
    if parameters.get("vfs") == "memdb" and parameters.get("mode") != "memory":
        return ("memdb", name) if name.startswith("/") else None
    return ("cache", name) if parameters.get("cache") == "shared" else None


def uri_file(path: str) -> str:
    """The file SQLite opens for ``path``: for a ``file:`` URI, its path (after an empty or
    ``localhost`` authority, before the query, percent-escapes decoded), else ``path``.

    Examples
    --------
    >>> uri_file("file:s.db"), uri_file("file:///srv/my%20store.db?mode=rw"), uri_file("a.db")
    ('s.db', '/srv/my store.db', 'a.db')
    """
    if not path.startswith("file:"):
        return path
    rest = path[len("file:") :].partition("?")[0].partition("#")[0]
    if rest.startswith("//"):  # an authority: "" or "localhost" (SQLite refuses another)
        rest = "/" + rest[2:].partition("/")[2]
    return urllib.parse.unquote(rest)


_URL = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*)://")  # from a run's start
"""A URL's start, its scheme (a PostgreSQL URL is taken before a path is read; SQLite opens
``file:`` URIs)."""


def file_path(path: object) -> str:
    """``path`` as the str SQLite opens, or a typed error naming it: a str or an
    ``os.PathLike`` of one, neither empty nor holding a NUL (``":memory:"`` for memory), in
    valid Unicode (not a name whose bytes are not UTF-8).

    Examples
    --------
    >>> from pathlib import Path
    >>> file_path(Path("synapses.db"))
    'synapses.db'
    >>> file_path(b"synapses.db")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidTypeError: a store's path must be a str or a path, got \
bytes b'synapses.db'
    >>> file_path("mysql://db/team")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: a store is a file path or a postgresql:// URL, \
got a mysql:// URL
    """
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    if not isinstance(text, str):
        raise InvalidTypeError(
            f"a store's path must be a str or a path, got {type(path).__name__} {shown(path)}"
        )
    if not text:
        raise InvalidValueError("a store's path must not be empty (':memory:' for one in memory)")
    if "\x00" in text:
        raise InvalidValueError(f"a store's path must not hold a NUL character, got {shown(text)}")
    try:
        text.isascii() or text.encode("utf-8")
    except UnicodeEncodeError as error:  # SQLite made the file, then could not name it
        raise InvalidValueError(
            f"a store's path must be valid Unicode, got {shown(text)}: {text[error.start]!r} at "
            f"{error.start} stands for a byte that is not UTF-8 (as os.fsdecode reads such a "
            "name), and SQLite names its files in UTF-8; rename the file or its folder"
        ) from None
    if text.startswith("file:"):  # SQLite decodes a URI's %-escapes into the file's name
        name = re.split(r"[?#]", text[5:], maxsplit=1)[0]
        try:
            urllib.parse.unquote_to_bytes(name).decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidValueError(
                f"a store's path must be valid Unicode, got {shown(text)}: its %-escapes make "
                f"a byte that is not UTF-8 at {error.start} of its file's name, and SQLite "
                "names its files in UTF-8"
            ) from None
    if _connection_string(text) and not os.path.isfile(text):  # a file made so holds them
        raise InvalidValueError(
            f"a store is a file path or a postgresql:// URL, got a libpq connection string "
            f"{shown(text)}: write it as a postgresql:// URL"
        )
    scheme = _URL.search(text)
    if scheme and scheme[1].lower() != "file":  # mysql://..., postgresq://...: no file to make
        raise InvalidValueError(
            f"a store is a file path or a postgresql:// URL, got a {scheme[1]}:// URL"
        )
    folder = text.endswith(("/", os.sep)) or os.path.basename(text) in (".", "..")
    if folder and not text.startswith("file:"):
        raise InvalidValueError(f"a store's path must name a file, not a folder: got {shown(text)}")
    return text


_PASSWORD_SETTING = re.compile(r"(?:^|\s)password\s*=", re.IGNORECASE)
"""A connection string's password, which a file's name must not be made to hold."""


def _connection_string(text: str) -> bool:
    """Whether libpq reads ``text`` as a connection string naming two settings or a password
    (``host=db dbname=team password=...``), not as a file's name (``user=x.db`` is one)."""
    if "=" not in text:
        return False
    password = _PASSWORD_SETTING.search(text) is not None
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # without the postgres extra: a name, unless it holds a password
        return password
    try:
        settings = conninfo_to_dict(text)
    except ProgrammingError:  # a connection string with a mistake: a name, but a password's
        return password
    return "password" in settings or len(settings) >= 2


def check_location(path: str, *, read_only: bool = False) -> bool:
    """Refuse what :class:`SQLiteStorage` refuses at a file ``path`` before it opens
    anything: a directory, a device, a folder that cannot be written or entered, a name
    SQLite gives another database's side file, a path too long for the file system (each a
    :class:`~synapse_retriever.errors.SynapseError` naming ``path``). Returns whether a
    store there can only be read (``read_only``, or the file or its folder cannot be
    written).

    Examples
    --------
    >>> check_location("/tmp/edges.db-wal")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: '/tmp/edges.db-wal' is named as SQLite names ...
    """
    try:
        _refuse_directory(Path(path))
        if not (read_only or path.startswith("file:")):  # a URI is SQLite's
            _refuse_to_write(path)
        return read_only or _unwritable(Path(path))
    except SynapseError:  # ReadOnlyStoreError is a PermissionError too
        raise
    except PermissionError as exc:  # a folder on the way this process may not enter
        raise AccessDeniedError(
            f"{path!r} cannot be opened: this process may not reach it ({exc.strerror}); "
            "nothing was written"
        ) from None
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise InvalidValueError(
            f"{path[:80]!r}... ({len(path)} characters) is a path too long for the file system "
            "(a name or the whole path); nothing was written"
        ) from None


def _refuse_to_write(path: str) -> None:
    """Refuse to create a store in a missing folder or in one that cannot be written, and to
    write one under a name SQLite gives another database's side files (``x.db-wal``,
    ``x.db-shm``, ``x.db-journal``): whoever opens ``x.db`` takes the file for its own log or
    journal, and SQLite deletes it. A store made there by an older release still opens
    read-only, to be exported or moved (its header is never read here: closing a descriptor
    of an open database's ``-shm`` would drop this process's locks on it)."""
    if not Path(path).exists():
        folder = Path(path).parent
        if not folder.is_dir():
            raise InvalidValueError(f"cannot create {path!r}: no directory {str(folder)!r}")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ReadOnlyStoreError(
                f"cannot create {path!r}: its folder {str(folder)!r} cannot be written"
            )
    for suffix in SIDE_FILES:
        base = path.removesuffix(suffix)
        if base != path and Path(base).name:
            raise InvalidValueError(
                f"{path!r} is named as SQLite names the {suffix[1:]} file of {base!r}: opening "
                f"{base!r} would delete it; give the store another name (such as "
                f"{Path(path).name + '.db'!r}); one made there before opens with read_only=True"
            )


def _refuse_directory(path: Path) -> None:
    """Refuse a directory. Whether a file is an SQLite database at all is read by SQLite
    itself, at the connection's first read (:meth:`SQLiteStorage._connect`): reading the
    header through Python would close a descriptor of the file, and closing any
    descriptor of a file drops every POSIX lock this process holds on it, those of its
    other open connections too (SQLite's own descriptors are shared per file and process,
    so they keep them). Two memories on one file in one process lost turns that way. A device,
    a FIFO or a socket is refused too (read by ``stat``, not opened)."""
    if path.is_dir():
        raise NotASynapseDatabaseError(f"{str(path)!r} is a directory, not a synapse database")
    if path.exists() and not path.is_file():
        raise NotASynapseDatabaseError(
            f"{str(path)!r} is not a regular file (a device, a FIFO or a socket), not a synapse "
            "database; it was left untouched"
        )
