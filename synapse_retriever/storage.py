"""Persistence: the only module that does I/O. SQLite is the embedded default.

The store talks to a :class:`Storage` (a small protocol) so that another backend,
e.g. PostgreSQL, can slot in without touching the math. Every write runs in one
transaction that takes the write lock first (``BEGIN IMMEDIATE``) and reads the rows
it updates inside that transaction.

Rows carry a ``version``: every write transaction bumps a counter in ``meta`` and
stamps the rows it writes, so a store can fetch just what other processes changed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from synapse_retriever.errors import NotASynapseDatabaseError
from synapse_retriever.graph import Edge

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SQLiteStorage", "Storage", "WriteTransaction"]

APPLICATION_ID = 0x53594E41  # "SYNA"
"""``PRAGMA application_id`` of a synapse database; other SQLite files are refused."""

EdgeKey = tuple[str, str, str]  # (namespace, a, b) with a < b

MIGRATIONS: list[str] = [
    # 1: edges keyed by (namespace, a, b) with a < b, stamped with the write's version.
    """
    CREATE TABLE edges (
        namespace          TEXT    NOT NULL,
        a                  TEXT    NOT NULL,
        b                  TEXT    NOT NULL,
        weight             REAL    NOT NULL,
        activation_count   INTEGER NOT NULL,
        half_life_days     REAL    NOT NULL,
        created_at         REAL    NOT NULL,
        last_reinforced_at REAL    NOT NULL,
        version            INTEGER NOT NULL,
        PRIMARY KEY (namespace, a, b),
        CHECK (a < b)
    ) WITHOUT ROWID;
    CREATE INDEX edges_by_version ON edges (version);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('version', 0);
    CREATE TABLE events (id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)

_COLUMNS = (
    "a, b, namespace, weight, activation_count, half_life_days, created_at, last_reinforced_at"
)
_UPSERT = f"""
    INSERT INTO edges ({_COLUMNS}, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (namespace, a, b) DO UPDATE SET
        weight = excluded.weight,
        activation_count = excluded.activation_count,
        half_life_days = excluded.half_life_days,
        created_at = excluded.created_at,
        last_reinforced_at = excluded.last_reinforced_at,
        version = excluded.version
"""


class WriteTransaction(Protocol):
    """What a store may do inside one write transaction."""

    version: int
    """The version this transaction stamps on the rows it writes."""

    def get(self, keys: Sequence[EdgeKey]) -> dict[EdgeKey, Edge]:
        """Current rows for ``keys`` (absent keys are missing from the result)."""
        ...

    def put(self, edges: Sequence[Edge]) -> None:
        """Upsert ``edges``."""
        ...

    def delete(self, keys: Sequence[EdgeKey]) -> None:
        """Delete ``keys``."""
        ...

    def scan(self) -> Iterator[Edge]:
        """Every row."""
        ...

    def changed_since(self, version: int) -> list[Edge]:
        """Rows written by transactions after ``version``."""
        ...

    def record_event(self, event_id: str, at: float) -> bool:
        """Record an event id; False if it was recorded before (the event is a replay)."""
        ...


class Storage(Protocol):
    """A backend for :class:`~synapse_retriever.store.SynapseStore`."""

    def load(self) -> tuple[list[Edge], int]:
        """Every row and the current version."""
        ...

    def poll(self, version: int) -> tuple[list[Edge], int] | None:
        """Rows changed after ``version`` and the new version, or None if nothing changed."""
        ...

    def write(self) -> AbstractContextManager[WriteTransaction]:
        """A write transaction: commits on success, rolls back on any exception."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def _edge(row: tuple[object, ...]) -> Edge:
    return Edge(*row)  # type: ignore[arg-type]


class _SQLiteTransaction:
    def __init__(self, db: sqlite3.Connection, version: int) -> None:
        self._db = db
        self.version = version

    def get(self, keys: Sequence[EdgeKey]) -> dict[EdgeKey, Edge]:
        found: dict[EdgeKey, Edge] = {}
        query = f"SELECT {_COLUMNS} FROM edges WHERE namespace = ? AND a = ? AND b = ?"
        for key in keys:
            row = self._db.execute(query, key).fetchone()
            if row is not None:
                found[key] = _edge(row)
        return found

    def put(self, edges: Sequence[Edge]) -> None:
        self._db.executemany(
            _UPSERT,
            [
                (
                    e.a,
                    e.b,
                    e.namespace,
                    e.weight,
                    e.activation_count,
                    e.half_life_days,
                    e.created_at,
                    e.last_reinforced_at,
                    self.version,
                )
                for e in edges
            ],
        )

    def delete(self, keys: Sequence[EdgeKey]) -> None:
        self._db.executemany("DELETE FROM edges WHERE namespace = ? AND a = ? AND b = ?", keys)

    def scan(self) -> Iterator[Edge]:
        for row in self._db.execute(f"SELECT {_COLUMNS} FROM edges"):
            yield _edge(row)

    def changed_since(self, version: int) -> list[Edge]:
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM edges WHERE version > ?", (version,))
        return [_edge(row) for row in rows]

    def record_event(self, event_id: str, at: float) -> bool:
        cursor = self._db.execute(
            "INSERT INTO events (id, at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", (event_id, at)
        )
        return cursor.rowcount == 1


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
        self.path = str(path)
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
        if user_version < SCHEMA_VERSION:
            self._migrate(user_version)

    def _migrate(self, from_version: int) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            current = self._pragma("user_version")  # another process may have migrated
            for version in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def load(self) -> tuple[list[Edge], int]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                version = self._version()
                edges = [_edge(row) for row in self._db.execute(f"SELECT {_COLUMNS} FROM edges")]
            finally:
                self._db.execute("COMMIT")
            self._data_version = self._pragma("data_version")
            return edges, version

    def _version(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])

    def poll(self, version: int) -> tuple[list[Edge], int] | None:
        with self._lock:
            data_version = self._pragma("data_version")
            if data_version == self._data_version:
                return None
            self._db.execute("BEGIN")
            try:
                current = self._version()
                changed = _SQLiteTransaction(self._db, current).changed_since(version)
            finally:
                self._db.execute("COMMIT")
            self._data_version = data_version
            return changed, current

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                version = self._version() + 1
                db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (version,))
                yield _SQLiteTransaction(db, version)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()


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
