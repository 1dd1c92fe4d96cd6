"""Persistence: the only module that does I/O. SQLite is the embedded default.

The store talks to a :class:`Storage` (a small protocol over integer ids) so that
another backend, e.g. PostgreSQL, can slot in without touching the math. Every write
runs in one transaction that takes the write lock first (``BEGIN IMMEDIATE``) and
reads the rows it updates inside that transaction.

Node and namespace names are stored once, in their own tables; an edge row holds
their integer ids. Ids are never reused, so every process that opens the file can
index its in-memory arrays by them. Every write transaction bumps a version counter
and appends what it wrote or deleted to change logs (edge ids, and the (namespace,
node) keys of use rows), so a store fetches exactly what other processes changed since
it last looked; the logs keep the latest ``LOG_VERSIONS`` versions, and a store that
last looked before that reloads everything.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from synapse_retriever.errors import NotASynapseDatabaseError

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "Changes",
    "EdgeRow",
    "SQLiteStorage",
    "Storage",
    "UseColumns",
    "UseRow",
    "WriteTransaction",
]

APPLICATION_ID = 0x53594E41  # "SYNA"
"""``PRAGMA application_id`` of a synapse database; other SQLite files are refused."""


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
        return cls.build([row[:5] for row in rows], lengths, flat)

    @classmethod
    def build(
        cls,
        heads: Sequence[Sequence[float]],
        lengths: npt.NDArray[np.int64],
        flat: npt.NDArray[np.float64],
    ) -> UseColumns:
        """Columns from each row's first five fields, its number of times, and all the
        times one row after another."""
        n = len(heads)
        recent = np.full((n, int(lengths.max()) if n else 0), -np.inf)
        row = np.repeat(np.arange(n), lengths)
        column = np.arange(row.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        recent[row, column] = flat
        head = np.asarray(heads, np.float64).reshape(n, 5)
        ints = head[:, :4].astype(np.int64)
        return cls(ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], head[:, 4], recent)

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
    recent: list[tuple[int, float, tuple[int, ...]]] = field(default_factory=list)
    """New entries of the recent-events log: (namespace, at, nodes), oldest first."""
    full: bool = False
    """Everything, not what changed: the version asked about is older than the change
    logs keep (:data:`LOG_VERSIONS`), so the reader must start again from this."""


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
]
SCHEMA_VERSION = len(MIGRATIONS)

LOG_VERSIONS = 10_000
"""Versions kept in the change logs; a store that looks less often reloads everything."""
LOG_TRIM_EVERY = 1_000
"""The logs are trimmed by the write transactions whose version is a multiple of this."""

BIG_DELETE = 10_000
"""Deleting more edges than this at once raises the page cache to BIG_DELETE_CACHE_KIB."""
BIG_DELETE_CACHE_KIB = 262_144

_COLUMNS = (
    "id, namespace, a, b, weight, activation_count, half_life_days, created_at, last_reinforced_at"
)
_USE_QUERY = "SELECT namespace, node, uses, together, first_at, recent FROM node_uses"


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


class _SQLiteTransaction:
    def __init__(self, db: sqlite3.Connection, version: int) -> None:
        self._db = db
        self.version = version

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

    def rows_among(self, namespace: int, nodes: Sequence[int]) -> list[EdgeRow]:
        marks = ", ".join("?" * len(nodes))
        query = (
            f"SELECT {_COLUMNS} FROM edges "
            f"WHERE a IN ({marks}) AND b IN ({marks}) AND namespace = ?"
        )
        return [EdgeRow(*row) for row in self._db.execute(query, (*nodes, *nodes, namespace))]

    def insert(self, rows: Sequence[EdgeRow]) -> list[EdgeRow]:
        if not rows:
            return []
        last = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'edges'").fetchone()
        start = (last[0] if last else 0) + 1
        placed = [EdgeRow(start + i, *row[1:]) for i, row in enumerate(rows)]
        self._db.executemany(
            f"INSERT INTO edges ({_COLUMNS}, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, self.version) for row in placed],
        )
        return placed

    def update(self, rows: Sequence[EdgeRow]) -> None:
        self._db.executemany(
            "UPDATE edges SET weight = ?, activation_count = ?, half_life_days = ?, "
            "created_at = ?, last_reinforced_at = ?, version = ? WHERE id = ?",
            [
                (
                    r.weight,
                    r.activation_count,
                    r.half_life_days,
                    r.created_at,
                    r.last_reinforced_at,
                    self.version,
                    r.id,
                )
                for r in rows
            ],
        )

    def delete(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        db = self._db
        # scattered deletes touch most pages of the edges and their indexes: a page cache
        # that holds them all writes each once (measured: -20% for 64k of 1M edges)
        cache = int(db.execute("PRAGMA cache_size").fetchone()[0])
        if len(ids) > BIG_DELETE:
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
            [(*row[:5], _pack(row.recent), self.version) for row in rows],
        )

    def used(self, namespace: int, nodes: Sequence[int]) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(nodes), 500):
            chunk = list(nodes[start : start + 500])
            marks = ", ".join("?" * len(chunk))
            found.update(
                row[0]
                for row in self._db.execute(
                    f"SELECT node FROM node_uses WHERE namespace = ? AND node IN ({marks})",
                    (namespace, *chunk),
                )
            )
        return found

    def add_events(self, namespace: int, count: int) -> None:
        self._db.execute(
            "INSERT INTO namespace_events (namespace, events) VALUES (?, ?) "
            "ON CONFLICT (namespace) DO UPDATE SET events = events + excluded.events",
            (namespace, count),
        )

    def log_recent(self, namespace: int, at: float, nodes: Sequence[int], keep: int) -> None:
        db = self._db
        cursor = db.execute(
            "INSERT INTO recent_uses (namespace, at, nodes, version) VALUES (?, ?, ?, ?)",
            (namespace, at, struct.pack(f"<{len(nodes)}q", *nodes), self.version),
        )
        oldest = db.execute(
            "SELECT min(id) FROM recent_uses WHERE namespace = ?", (namespace,)
        ).fetchone()[0]
        if (cursor.lastrowid or 0) - oldest >= 2 * keep:  # more than 2 × keep rows: trim
            db.execute(
                "DELETE FROM recent_uses WHERE namespace = ?1 AND id <= (SELECT id FROM "
                "recent_uses WHERE namespace = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                (namespace, keep),
            )

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        db = self._db
        horizon = db.execute("SELECT value FROM meta WHERE key = 'log_horizon'").fetchone()[0]
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
            present = set(rows[:, 0].astype(np.int64).tolist())
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
            recent=[
                (namespace, at, struct.unpack(f"<{len(nodes) // 8}q", nodes))
                for namespace, at, nodes in db.execute(
                    "SELECT namespace, at, nodes FROM recent_uses WHERE version > ? ORDER BY id",
                    (since,),
                )
            ],
            full=full,
        )

    def trim_logs(self) -> None:
        """Forget the logs of versions older than the latest :data:`LOG_VERSIONS`."""
        horizon = self.version - LOG_VERSIONS
        if horizon > 0:
            self._db.execute("DELETE FROM edge_log WHERE version <= ?", (horizon,))
            self._db.execute("DELETE FROM use_log WHERE version <= ?", (horizon,))
            self._db.execute(
                "UPDATE meta SET value = max(value, ?) WHERE key = 'log_horizon'", (horizon,)
            )

    def record_event(self, event_id: str, at: float) -> bool:
        cursor = self._db.execute(
            "INSERT INTO events (id, at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", (event_id, at)
        )
        return cursor.rowcount == 1

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
        is raised and the file is left untouched.
    busy_timeout_s : float
        How long to wait for another process's write lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        self._in_memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        if not self._in_memory:
            _refuse_foreign_file(Path(self.path))
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise NotASynapseDatabaseError(f"cannot open {self.path!r}: {exc}") from None
        try:
            self._open(busy_timeout_s)
        except BaseException:
            self._db.close()
            raise
        self._data_version = self._pragma("data_version")

    def _pragma(self, name: str) -> int:
        return int(self._db.execute(f"PRAGMA {name}").fetchone()[0])

    def _open(self, busy_timeout_s: float) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        try:
            app_id = self._pragma("application_id")
            user_version = self._pragma("user_version")
            has_tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        except sqlite3.DatabaseError as exc:
            raise NotASynapseDatabaseError(
                f"{self.path!r} is not a synapse database ({exc}); it was left untouched"
            ) from None
        if app_id != APPLICATION_ID and (app_id != 0 or has_tables):
            raise NotASynapseDatabaseError(
                f"{self.path!r} is an SQLite file of another application "
                f"(application_id {app_id:#x}, expected {APPLICATION_ID:#x}); it was left untouched"
            )
        if user_version > SCHEMA_VERSION:
            raise NotASynapseDatabaseError(
                f"{self.path!r} has schema version {user_version}, newer than this library's "
                f"{SCHEMA_VERSION}: upgrade synapse-retriever"
            )
        if not self._in_memory:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            # checkpoint in larger batches: small transactions otherwise pay a
            # checkpoint every ~40 events (measured: +45% reinforcement throughput)
            db.execute("PRAGMA wal_autocheckpoint = 10000")
        if user_version < SCHEMA_VERSION:
            self._migrate()

    def _migrate(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            current = self._pragma("user_version")  # another process may have migrated
            for version in range(current, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[version]):
                    db.execute(statement)
            if current <= 1:  # uses came with version 2: approximate them from the edges
                _backfill_uses(db)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def load(self) -> Changes:
        with self._lock:
            return self._read(0, 0, 0)

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        with self._lock:
            if self._pragma("data_version") == self._data_version:
                return None
            return self._read(since, max_node, max_namespace)

    def _read(self, since: int, max_node: int, max_namespace: int) -> Changes:
        self._db.execute("BEGIN")
        try:
            return _SQLiteTransaction(self._db, 0).changes(since, max_node, max_namespace)
        finally:
            self._db.execute("COMMIT")
            self._data_version = self._pragma("data_version")

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                version = db.execute(
                    "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
                ).fetchone()[0]
                tx = _SQLiteTransaction(db, int(version))
                yield tx
                if tx.version % LOG_TRIM_EVERY == 0:
                    tx.trim_logs()
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
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


def _edge_table(cursor: sqlite3.Cursor, batch: int = 65536) -> npt.NDArray[np.float64]:
    """Rows as one n × 9 float64 array, converted in batches: a million rows as Python
    tuples at once would leave their memory to the allocator long after (measured: about
    100 bytes per edge of resident memory after a load)."""
    chunks = [np.zeros((0, len(EdgeRow._fields)))]
    while rows := cursor.fetchmany(batch):
        chunks.append(np.asarray(rows, dtype=np.float64))
    return np.concatenate(chunks)


def _pack(times: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(times)}d", *times)


def _use_columns(rows: Sequence[tuple[int, int, int, int, float, bytes]]) -> UseColumns:
    """Columns of stored use rows, their packed times unpacked in one pass."""
    lengths = np.fromiter((len(row[5]) // 8 for row in rows), np.int64, len(rows))
    flat = np.frombuffer(b"".join(row[5] for row in rows), "<f8").astype(np.float64)
    return UseColumns.build([row[:5] for row in rows], lengths, flat)


def _backfill_uses(db: sqlite3.Connection) -> None:
    """Approximate the uses of a version-1 file from its edges (see ``uses_from_edges``),
    with its default history (8 times per node) and window (50 events): the migration
    runs before any configuration is known."""
    from synapse_retriever.usage import uses_from_edges

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
    for namespace, at, nodes in latest:
        tx.log_recent(namespace, at, nodes, keep=len(latest))


def _refuse_foreign_file(path: Path) -> None:
    """Refuse, without writing to it, a non-empty file that is not an SQLite database."""
    if path.is_dir():
        raise NotASynapseDatabaseError(f"{str(path)!r} is a directory, not a synapse database")
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotASynapseDatabaseError(f"cannot read {str(path)!r}: {exc}") from None
    if header and header != b"SQLite format 3\x00":
        raise NotASynapseDatabaseError(
            f"{str(path)!r} is not a synapse database (not an SQLite file); it was left untouched"
        )
