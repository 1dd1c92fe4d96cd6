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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from synapse_retriever.context.lexical import fts_table, top_matches
from synapse_retriever.errors import NotASynapseDatabaseError, ReadOnlyStoreError
from synapse_retriever.persistence.sqlite import (
    APPLICATION_ID,
    SQLiteStorage,
    typed_error,
    typed_errors,
)

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "ContextStorage",
    "EdgeRow",
    "EntityRow",
    "Links",
    "Loaded",
    "TurnRecord",
]

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
    # 2: the temporal graph: entity nodes and typed edges (turn nodes are "turn:<id>").
    """
    CREATE TABLE context_entities (
        node     TEXT PRIMARY KEY,
        kind     TEXT NOT NULL,
        label    TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE context_edges (
        source      TEXT    NOT NULL,
        target      TEXT    NOT NULL,
        type        TEXT    NOT NULL,
        at          REAL    NOT NULL,
        count       INTEGER NOT NULL DEFAULT 0,
        traversals  INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (source, target, type)
    ) WITHOUT ROWID;
    CREATE INDEX context_edges_by_target ON context_edges (target);
    """,
    # 3: the lexical channel: an FTS5 index over the turns' text (BM25 through bm25()).
    f"""
    {fts_table("context_turns_fts", content="context_turns")};
    INSERT INTO context_turns_fts (context_turns_fts) VALUES ('rebuild');
    """,
    # 4: who said a turn, when the caller says (a question naming them finds their turns).
    "ALTER TABLE context_turns ADD COLUMN speaker TEXT",
]
SCHEMA_VERSION = len(MIGRATIONS)
"""The ``context_*`` schema version this library writes (``context_meta.schema_version``)."""

_COLUMNS = "id, session, role, text, at, surprise, repeats, boost, chunks, summary, speaker"


@dataclass
class TurnRecord:
    """One stored turn (``id`` 0 until inserted).

    ``surprise`` and ``repeats`` are measured once, against the turns before it;
    ``chunks`` and ``summary`` are None until consolidation condenses the turn;
    ``boost`` is what replay added to its importance; ``speaker`` who said it, if the
    caller said (a name, e.g. ``"Caroline"``; the role says which side of the
    conversation).

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
    speaker: str | None = None


@dataclass
class Loaded:
    """Everything a memory needs at open: turns in order, their stored vectors, meta."""

    turns: list[TurnRecord] = field(default_factory=list)
    embedders: list[str] = field(default_factory=list)
    embeddings: list[bytes] = field(default_factory=list)
    consolidated_through: int = 0
    entities: list[EntityRow] = field(default_factory=list)
    edges: list[EdgeRow] = field(default_factory=list)
    graph_through: int = 0
    relations_through: int = 0


EntityRow = tuple[str, str, str]
"""An entity node: (node, kind, label)."""

EdgeRow = tuple[str, str, str, float, int, int]
"""A typed edge: (source, target, type, at, count, traversals)."""

Links = Callable[[int], tuple[Sequence[EntityRow], Sequence[EdgeRow]]]
"""Given a new turn's id, the entity nodes and edges to store with it."""


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
        self._data_version = -1  # what changed() last read
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
                # per connection: the documented power-loss guarantee (WAL, no fsync per
                # commit; a crash of the machine may lose the last turns, never the file)
                self._db.execute("PRAGMA synchronous = NORMAL")
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

    def changed(self) -> bool:
        """Whether another connection (another process, say) committed to the file since
        the last call: one ``PRAGMA data_version``, no table read.

        Examples
        --------
        >>> storage = ContextStorage(":memory:")
        >>> storage.changed(), storage.changed()  # the first call sets the mark
        (True, False)
        >>> storage.close()
        """
        with self._lock, typed_errors(self.path):
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        seen, self._data_version = self._data_version, version
        return version != seen

    def load(self, after: int = 0) -> Loaded:
        """The turns with an id above ``after`` in insertion order, with their stored
        vectors and the embedder's name; the graph rows (all of them, or with ``after``
        those that touch the turns returned) and the marks; one snapshot of the file."""
        edge_rows = "SELECT source, target, type, at, count, traversals FROM context_edges"
        entity_rows = "SELECT node, kind, label FROM context_entities"
        if after:  # the rows that touch the new turns: their edges, the entities at their ends
            new = "SELECT 'turn:' || id FROM context_turns WHERE id > :after"
            edge_rows += f" WHERE source IN ({new}) OR target IN ({new})"
            ends = f"SELECT source FROM ({edge_rows}) UNION SELECT target FROM ({edge_rows})"
            entity_rows += f" WHERE node IN ({ends})"
        with self._lock, typed_errors(self.path):
            self._db.execute("BEGIN")  # one snapshot: no edge read without its turn
            try:
                rows = self._db.execute(
                    f"SELECT {_COLUMNS}, embedder, embedding FROM context_turns "
                    "WHERE id > :after ORDER BY id",
                    {"after": after},
                ).fetchall()
                entities = self._db.execute(entity_rows, {"after": after}).fetchall()
                got = self._db.execute(edge_rows, {"after": after}).fetchall()
                marks = dict(
                    self._db.execute(
                        "SELECT key, value FROM context_meta WHERE key IN "
                        "('consolidated_through', 'graph_through', 'relations_through')"
                    ).fetchall()
                )
            finally:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse even this
                    self._db.execute("ROLLBACK")  # it only read
        loaded = Loaded(
            consolidated_through=int(marks.get("consolidated_through", 0)),
            entities=[(str(n), str(k), str(label)) for n, k, label in entities],
            edges=[(str(a), str(b), str(t), float(w), int(c), int(v)) for a, b, t, w, c, v in got],
            graph_through=int(marks.get("graph_through", 0)),
            relations_through=int(marks.get("relations_through", 0)),
        )
        for row in rows:
            loaded.turns.append(TurnRecord(*row[:11]))
            loaded.embedders.append(row[11])
            loaded.embeddings.append(bytes(row[12]))
        return loaded

    def insert(
        self,
        record: TurnRecord,
        embedder: str,
        embedding: bytes,
        links: Links | None = None,
        *,
        after: int | None = None,
    ) -> int | None:
        """Store a new turn, and what ``links(its id)`` returns (entity nodes, edges), in
        one transaction; returns its id. With ``after``, only if the file's last turn is
        still the one of that id (0: none), else nothing is stored and None is returned:
        another process added a turn the caller has not seen.

        Examples
        --------
        >>> storage = ContextStorage(":memory:")
        >>> record = TurnRecord(0, "s1", "user", "hi", 0.0, 1.0, 0, 0.0, None, None)
        >>> storage.insert(record, "e", b"", after=0), storage.insert(record, "e", b"", after=0)
        (1, None)
        >>> storage.close()
        """
        with self._write() as db:
            if after is not None:
                last = db.execute("SELECT max(id) FROM context_turns").fetchone()[0]
                if (last or 0) != after:
                    return None
            cursor = db.execute(
                "INSERT INTO context_turns (session, role, text, at, surprise, repeats, boost, "
                "chunks, summary, speaker, embedder, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    record.speaker,
                    embedder,
                    embedding,
                ),
            )
            turn_id = int(cursor.lastrowid or 0)
            db.execute(
                "INSERT INTO context_turns_fts (rowid, text) VALUES (?, ?)", (turn_id, record.text)
            )
            if links is not None:
                entities, edges = links(turn_id)
                self._link(db, entities, edges, turn_id)
            return turn_id

    def add_graph(
        self,
        entities: Sequence[EntityRow],
        edges: Sequence[EdgeRow],
        through: int,
        *,
        key: str = "graph_through",
    ) -> None:
        """Store entity nodes and edges (existing ones are kept as they are) and record in
        ``key`` that they cover the turns up to id ``through``; one transaction."""
        with self._write() as db:
            self._link(db, entities, edges, through, key)

    def _link(
        self,
        db: sqlite3.Connection,
        entities: Sequence[EntityRow],
        edges: Sequence[EdgeRow],
        through: int,
        key: str = "graph_through",
    ) -> None:
        db.executemany(
            "INSERT INTO context_entities (node, kind, label) VALUES (?, ?, ?) "
            "ON CONFLICT (node) DO NOTHING",
            entities,
        )
        db.executemany(
            "INSERT INTO context_edges (source, target, type, at, count, traversals) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, target, type) DO NOTHING",
            edges,
        )
        self._set(db, key, through)

    def update_edges(self, edges: Sequence[EdgeRow]) -> None:
        """Store edges' new ``at``, ``count`` and ``traversals`` (after a reinforcement)."""
        with self._write() as db:
            db.executemany(
                "UPDATE context_edges SET at = ?, count = ?, traversals = ? "
                "WHERE source = ? AND target = ? AND type = ?",
                [(w, c, t, a, b, kind) for (a, b, kind, w, c, t) in edges],
            )

    def consolidate(
        self,
        condensed: Sequence[tuple[int, str, str]],
        boosts: Sequence[tuple[int, float]],
        themes: Sequence[str],
        through: int,
        *,
        graph: tuple[Sequence[EntityRow], Sequence[EdgeRow], int] | None = None,
    ) -> None:
        """One consolidation, atomically: (id, chunks, summary) rows, (id, boost) rows, the
        replay's themes, how many turns it covered and, if given, the relations it found
        (entity rows, edge rows, and the last turn id they cover)."""
        with self._write() as db:
            if graph is not None:
                self._link(db, graph[0], graph[1], graph[2], "relations_through")
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

    def lexical(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` turns best matching ``query`` by BM25 over the turns stored now:
        ``(turn id, score)``, best first (:mod:`~synapse_retriever.context.lexical`)."""
        with self._lock, typed_errors(self.path):
            return top_matches(self._db, "context_turns_fts", query, limit)

    def themes(self) -> list[tuple[int, list[str]]]:
        """Every replay so far: (turns covered, themes)."""
        with self._lock, typed_errors(self.path):
            rows = self._db.execute("SELECT turns, themes FROM context_replays ORDER BY id")
            return [(int(n), [t for t in text.split("\n") if t]) for n, text in rows]

    def close(self) -> None:
        """Release the connection."""
        with self._lock:
            self._db.close()
