"""Persistence of conversation memory: ``context_*`` tables inside a synapse database.

One file per application: the turns live in the same SQLite file as a
:class:`~synapse_retriever.SynapseStore`'s edges. The core owns the file's
``PRAGMA application_id`` and ``user_version``; this module never changes them. It opens
(or creates) the file through the core's
:class:`~synapse_retriever.persistence.sqlite.SQLiteStorage` first, so a file of another
application is refused, untouched, the same way, and a new
file is stamped as a synapse database. Its own schema version lives in the
``context_meta`` table, next to its own list of migrations, :data:`MIGRATIONS`.

Every write is one ``BEGIN IMMEDIATE`` transaction; the connection is shared safely
between the caller's thread and the consolidation thread.

Examples
--------
>>> storage = ContextStorage(":memory:")
>>> record = TurnRecord(0, "s1", "user", "hello", 0.0, 1.0, 0, 0.0, None, None)
>>> storage.insert(record, "hashing-v1-8", b"")
1
>>> [turn.text for turn in storage.load().turns]
['hello']
>>> storage.close()
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from synapse_retriever.errors import NotASynapseDatabaseError, ReadOnlyStoreError
from synapse_retriever.persistence.sqlite import (
    APPLICATION_ID,
    SQLiteStorage,
    typed_error,
    typed_errors,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ContextStorage", "Loaded", "TurnRecord"]

MIGRATIONS: list[str] = [
    # 1: turns with their signals, pre-computed condensations and vectors; replays.
    """
    CREATE TABLE context_turns (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        session         TEXT    NOT NULL,
        role            TEXT    NOT NULL,
        text            TEXT    NOT NULL,
        at              REAL    NOT NULL,
        surprise        REAL    NOT NULL,
        repeats         INTEGER NOT NULL,
        boost           REAL    NOT NULL DEFAULT 0,
        chunks          TEXT,
        summary         TEXT,
        embedder        TEXT    NOT NULL,
        embedding       BLOB    NOT NULL
    );
    CREATE INDEX context_turns_by_session ON context_turns (session, id);
    CREATE TABLE context_replays (
        id       INTEGER PRIMARY KEY AUTOINCREMENT,
        turns    INTEGER NOT NULL,
        themes   TEXT    NOT NULL
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
"""The ``context_*`` schema version this library writes (``context_meta.schema_version``)."""

_COLUMNS = "id, session, role, text, at, surprise, repeats, boost, chunks, summary"


@dataclass
class TurnRecord:
    """One stored turn (``id`` 0 until inserted).

    ``surprise`` and ``repeats`` are measured once, against the turns before it;
    ``chunks`` and ``summary`` are None until consolidation condenses the turn;
    ``boost`` is what replay added to its importance.

    Examples
    --------
    >>> from synapse_retriever.context import ConversationMemory
    >>> with ConversationMemory(":memory:") as memory:
    ...     _ = memory.add_turn("I moved the deploy to Fridays.", at=0)
    ...     turn = memory.turns()[0]
    >>> turn.id, turn.role, turn.surprise, turn.repeats, turn.chunks
    (1, 'user', 1.0, 0, None)
    """

    id: int
    session: str
    role: str
    text: str
    at: float
    surprise: float
    repeats: int
    boost: float
    chunks: str | None
    summary: str | None


@dataclass
class Loaded:
    """Everything a memory needs at open: turns in order, their stored vectors, meta."""

    turns: list[TurnRecord] = field(default_factory=list)
    embedders: list[str] = field(default_factory=list)
    embeddings: list[bytes] = field(default_factory=list)
    consolidated_through: int = 0


class ContextStorage:
    """The ``context_*`` tables of a synapse database file (or a private ``:memory:`` one).

    Parameters
    ----------
    path : str or PathLike
        The synapse database; created (and stamped by the core) if missing.
    busy_timeout_s : float
        How long to wait for another connection's write lock.

    Raises
    ------
    NotASynapseDatabaseError
        The file belongs to another application, or its ``context_*`` schema is newer
        than this library's.

    Examples
    --------
    >>> storage = ContextStorage(":memory:")
    >>> record = TurnRecord(0, "s1", "user", "Deploys move to Fridays.", 0.0, 1.0, 0, 0.0,
    ...                     None, None)
    >>> storage.insert(record, "hashing-v1-8", b"")
    1
    >>> storage.consolidate([(1, "Deploys move to Fridays.", "Deploys Fridays.")], [(1, 0.05)],
    ...                     ["deploy"], through=1)
    >>> turn = storage.load().turns[0]
    >>> turn.summary, turn.boost, storage.themes()
    ('Deploys Fridays.', 0.05, [(1, ['deploy'])])
    >>> storage.close()
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        in_memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        if not in_memory:
            core = SQLiteStorage(self.path, busy_timeout_s=busy_timeout_s)  # refuse or stamp
            core.close()
            if core.read_only:
                raise ReadOnlyStoreError(
                    f"{self.path!r} cannot be written (the file or its folder is read-only), and "
                    "a conversation memory writes every turn: copy it somewhere writable"
                )
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if not in_memory:
                app_id = int(self._db.execute("PRAGMA application_id").fetchone()[0])
                if app_id != APPLICATION_ID:
                    raise NotASynapseDatabaseError(
                        f"{self.path!r} is not a synapse database (application_id {app_id:#x})"
                    )
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise typed_error(self.path, exc) from None
        except BaseException:
            self._db.close()
            raise

    def _migrate(self) -> None:
        with self._write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS context_meta "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
            )
            row = db.execute(
                "SELECT value FROM context_meta WHERE key = 'schema_version'"
            ).fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise NotASynapseDatabaseError(
                    f"{self.path!r} has conversation-memory schema version {current}, newer "
                    f"than this library's {SCHEMA_VERSION}: upgrade synapse-retriever"
                )
            for version in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        db.execute(statement)
            self._set(db, "schema_version", SCHEMA_VERSION)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, typed_errors(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse even this
                    self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _set(db: sqlite3.Connection, key: str, value: int) -> None:
        db.execute(
            "INSERT INTO context_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    def load(self) -> Loaded:
        """Every turn in insertion order, with its stored vector and the embedder's name."""
        with self._lock, typed_errors(self.path):
            rows = self._db.execute(
                f"SELECT {_COLUMNS}, embedder, embedding FROM context_turns ORDER BY id"
            ).fetchall()
            meta = self._db.execute(
                "SELECT value FROM context_meta WHERE key = 'consolidated_through'"
            ).fetchone()
        loaded = Loaded(consolidated_through=int(meta[0]) if meta else 0)
        for row in rows:
            loaded.turns.append(TurnRecord(*row[:10]))
            loaded.embedders.append(row[10])
            loaded.embeddings.append(bytes(row[11]))
        return loaded

    def insert(self, record: TurnRecord, embedder: str, embedding: bytes) -> int:
        """Store a new turn; returns its id."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO context_turns (session, role, text, at, surprise, repeats, boost, "
                "chunks, summary, embedder, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.session,
                    record.role,
                    record.text,
                    record.at,
                    record.surprise,
                    record.repeats,
                    record.boost,
                    record.chunks,
                    record.summary,
                    embedder,
                    embedding,
                ),
            )
            return int(cursor.lastrowid or 0)

    def consolidate(
        self,
        condensed: Sequence[tuple[int, str, str]],
        boosts: Sequence[tuple[int, float]],
        themes: Sequence[str],
        through: int,
    ) -> None:
        """One consolidation, atomically: (id, chunks, summary) rows, (id, boost) rows, the
        replay's themes, and how many turns it covered."""
        with self._write() as db:
            db.executemany(
                "UPDATE context_turns SET chunks = ?, summary = ? WHERE id = ?",
                [(chunks, summary, turn_id) for turn_id, chunks, summary in condensed],
            )
            db.executemany(
                "UPDATE context_turns SET boost = ? WHERE id = ?",
                [(boost, turn_id) for turn_id, boost in boosts],
            )
            db.execute(
                "INSERT INTO context_replays (turns, themes) VALUES (?, ?)",
                (through, "\n".join(themes)),
            )
            self._set(db, "consolidated_through", through)

    def replace_embeddings(self, embedder: str, rows: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors recomputed with another embedder."""
        with self._write() as db:
            db.executemany(
                "UPDATE context_turns SET embedder = ?, embedding = ? WHERE id = ?",
                [(embedder, blob, turn_id) for turn_id, blob in rows],
            )

    def themes(self) -> list[tuple[int, list[str]]]:
        """Every replay so far: (turns covered, themes)."""
        with self._lock, typed_errors(self.path):
            rows = self._db.execute("SELECT turns, themes FROM context_replays ORDER BY id")
            return [(int(n), [t for t in text.split("\n") if t]) for n, text in rows]

    def close(self) -> None:
        """Release the connection."""
        with self._lock:
            self._db.close()
