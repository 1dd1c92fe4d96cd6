"""SQLite, the embedded backend of conversation memory: ``context_*`` tables in a synapse file.

One file per application: the turns live in the same SQLite file as a
:class:`~synapse_retriever.SynapseStore`'s edges, every user's in the same tables, each
row stamped with its user. The core owns the file's ``PRAGMA application_id`` and
``user_version``; this module never changes them. It opens (or creates) the file through
the core's :class:`~synapse_retriever.persistence.sqlite.SQLiteStorage` first, so a file
of another application is refused, untouched, the same way, and a new file is stamped as
a synapse database. Its own schema version lives in the ``context_meta`` table, next to
its own list of migrations, :data:`MIGRATIONS`; the marks of each user's memory (how far
consolidation and the graph have read, the consolidation lease) in ``context_marks``.

Every write is one ``BEGIN IMMEDIATE`` transaction; the connection is shared safely
between the caller's thread and the consolidation thread. Every statement names the
storage's user as a bound parameter, so a user name is data, never SQL.

Examples
--------
>>> alice = SQLiteConversationStorage(":memory:", user="alice")
>>> record = TurnRecord(0, "s1", "user", "hello", 0.0, 1.0, 0, 0.0, None, None)
>>> alice.insert(record, "hashing-v1-8", b"")
1
>>> [turn.text for turn in alice.load().turns], alice.user
(['hello'], 'alice')
>>> alice.close()
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from synapse_retriever.config import Operations
from synapse_retriever.errors import (
    CorruptDatabaseError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
)
from synapse_retriever.persistence.conversation.protocol import (
    EntityRow,
    Links,
    Loaded,
    TurnRecord,
    TypedEdgeKey,
    TypedEdgeRow,
    check_user,
    restored_under,
)
from synapse_retriever.persistence.sqlite import (
    APPLICATION_ID,
    SQLiteStorage,
    file_path,
    opened_file,
    typed_error,
    typed_errors,
    write_locked,
)

__all__ = [
    "CONSOLIDATION_LEASE_S",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLiteConversationStorage",
]

log = logging.getLogger(__name__)

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
    # 3: the lexical channel: an FTS5 index over the turns' text (dropped by 5).
    """
    CREATE VIRTUAL TABLE context_turns_fts USING fts5(text, content='context_turns',
        content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');
    INSERT INTO context_turns_fts (context_turns_fts) VALUES ('rebuild');
    """,
    # 4: who said a turn, when the caller says (a question naming them finds their turns).
    "ALTER TABLE context_turns ADD COLUMN speaker TEXT",
    # 5: users: every row and mark belongs to one (the rows before it to the default, '');
    # the graph's keys start with the user (a primary key cannot be altered: new tables,
    # copied, the old ones dropped); the marks move to context_marks, per user; the FTS5
    # index goes (BM25 statistics must be one user's: the memory indexes in process).
    """
    ALTER TABLE context_turns ADD COLUMN user TEXT NOT NULL DEFAULT '';
    CREATE INDEX context_turns_by_user ON context_turns (user, id);
    ALTER TABLE context_replays ADD COLUMN user TEXT NOT NULL DEFAULT '';
    CREATE INDEX context_replays_by_user ON context_replays (user, id);
    CREATE TABLE context_entities_by_user (
        user     TEXT NOT NULL,
        node     TEXT NOT NULL,
        kind     TEXT NOT NULL,
        label    TEXT NOT NULL,
        PRIMARY KEY (user, node)
    ) WITHOUT ROWID;
    INSERT INTO context_entities_by_user (user, node, kind, label)
        SELECT '', node, kind, label FROM context_entities;
    DROP TABLE context_entities;
    ALTER TABLE context_entities_by_user RENAME TO context_entities;
    CREATE TABLE context_edges_by_user (
        user        TEXT    NOT NULL,
        source      TEXT    NOT NULL,
        target      TEXT    NOT NULL,
        type        TEXT    NOT NULL,
        at          REAL    NOT NULL,
        count       INTEGER NOT NULL DEFAULT 0,
        traversals  INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (user, source, target, type)
    ) WITHOUT ROWID;
    INSERT INTO context_edges_by_user (user, source, target, type, at, count, traversals)
        SELECT '', source, target, type, at, count, traversals FROM context_edges;
    DROP TABLE context_edges;
    ALTER TABLE context_edges_by_user RENAME TO context_edges;
    CREATE INDEX context_edges_by_target ON context_edges (user, target);
    CREATE TABLE context_marks (
        user     TEXT NOT NULL,
        key      TEXT NOT NULL,
        value    TEXT NOT NULL,
        PRIMARY KEY (user, key)
    ) WITHOUT ROWID;
    INSERT INTO context_marks (user, key, value)
        SELECT '', key, value FROM context_meta
        WHERE key IN ('consolidated_through', 'graph_through', 'relations_through');
    DELETE FROM context_meta
        WHERE key IN ('consolidated_through', 'graph_through', 'relations_through');
    DROP TABLE context_turns_fts
    """,
    # 6: the caller's own id of a turn, one turn per key and user (a retried add_turn).
    """
    ALTER TABLE context_turns ADD COLUMN key TEXT;
    CREATE UNIQUE INDEX context_turns_by_key ON context_turns (user, key) WHERE key IS NOT NULL
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
"""The ``context_*`` schema version this library writes (``context_meta.schema_version``)."""

CONSOLIDATION_LEASE_S = 600.0
"""How long a process's hold on a user's consolidation lasts, in seconds, unless it
releases it first (it does, at the end of each consolidation). A process that dies
holding it (SIGKILL, power loss) keeps the others from consolidating that user's memory
for at most this long. A consolidation that outlasts it may overlap another process's:
the one that finishes second writes nothing unless it covers more turns
(:meth:`SQLiteConversationStorage.consolidate`)."""

_LEASE = "consolidation_lease"
"""The mark that holds the lease: ``"<expiry, epoch seconds> <owner>"``."""

_MARKS = ("consolidated_through", "graph_through", "relations_through", "summary_style")

_IN_MARKS = ", ".join("?" * len(_MARKS))

_COLUMNS = "id, session, role, text, at, surprise, repeats, boost, chunks, summary, speaker, key"
_TYPED = """(typeof(session) = 'text' AND typeof(role) = 'text' AND typeof(text) = 'text'
    AND typeof(at) IN ('real', 'integer') AND typeof(surprise) IN ('real', 'integer')
    AND typeof(repeats) = 'integer' AND typeof(boost) IN ('real', 'integer')
    AND typeof(chunks) IN ('text', 'null') AND typeof(summary) IN ('text', 'null')
    AND typeof(speaker) IN ('text', 'null') AND typeof(key) IN ('text', 'null')
    AND typeof(embedder) = 'text' AND typeof(embedding) = 'blob'
    AND abs(at) <= 1.7976931348623157e308 AND abs(surprise) <= 1.7976931348623157e308
    AND abs(boost) <= 1.7976931348623157e308)"""
"""Whether a turn's row holds what this library writes in each column (SQLite keeps the
type of what a hand edit wrote, a text in a REAL column say; an infinite time or signal):
a column of each row read."""


class SQLiteConversationStorage:
    """One user's conversation memory in a synapse database file (or a private
    ``:memory:`` one): :class:`~.protocol.ConversationStorage` on SQLite.

    Parameters
    ----------
    path : str or PathLike
        The synapse database; created (and stamped by the core) if missing.
    user : str, optional
        Whose rows these are (:func:`~.protocol.check_user`); None, the default user, is
        the memory of every file written before users existed.
    busy_timeout_s : float
        How long to wait for another connection's write lock.

    Raises
    ------
    NotASynapseDatabaseError
        The file belongs to another application, or its ``context_*`` schema is newer
        than this library's.
    ReadOnlyStoreError
        The file or its folder cannot be written.
    InvalidValueError, InvalidTypeError
        ``user`` is not a valid user name (:func:`~.protocol.check_user`).

    Examples
    --------
    >>> storage = SQLiteConversationStorage(":memory:")
    >>> record = TurnRecord(0, "s1", "user", "Deploys move to Fridays.", 0.0, 1.0, 0, 0.0,
    ...                     None, None)
    >>> storage.insert(record, "hashing-v1-8", b"")
    1
    >>> storage.consolidate([(1, "Deploys move to Fridays.", "Deploys Fridays.")], [(1, 0.05)],
    ...                     ["deploy"], through=1)
    True
    >>> storage.consolidate([], [], [], through=1)  # this window is consolidated already
    False
    >>> turn = storage.load().turns[0]
    >>> turn.summary, turn.boost, storage.themes()
    ('Deploys Fridays.', 0.05, [(1, ['deploy'])])
    >>> storage.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        user: str | None = None,
        busy_timeout_s: float = Operations.busy_timeout_s,
    ) -> None:
        self.user = check_user(user)
        self.path = file_path(path)
        self.where = self.path
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._data_version = -1  # what changed() last read
        self._owner = f"{os.getpid()}-{uuid.uuid4().hex}"  # this object's lease token
        self._leases = 0  # consolidation_turn blocks of this object holding the lease
        # guards _leases, held while the lease's write waits for another process's write
        # lock: not self._lock, which reads take
        self._lease_lock = threading.RLock()
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
            self._file = opened_file(self._db, self.path)
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

    def __repr__(self) -> str:
        return f"SQLiteConversationStorage({self.path!r}, user={self.user!r})"

    def _migrate(self) -> None:
        with self._write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS context_meta "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
            )
            row = db.execute(
                "SELECT value FROM context_meta WHERE key = 'schema_version'"
            ).fetchone()
            try:
                current = int(row[0]) if row else 0
            except ValueError:
                raise _unreadable(self.path, f"schema_version {row[0]!r}") from None
            if current > SCHEMA_VERSION:
                raise NotASynapseDatabaseError(
                    f"{self.path!r} has conversation-memory schema version {current}, newer "
                    f"than this library's {SCHEMA_VERSION}: upgrade synapse-retriever"
                )
            for version in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.execute(
                "INSERT INTO context_meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with write_locked(self._lock, self._db, self.path, self._busy_timeout_s, self._file):
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse even this
                    self._db.execute("ROLLBACK")
                raise

    def _not_behind(self, db: sqlite3.Connection, seen: int) -> int:
        """This user's last turn id; :class:`StorageUnavailableError` if it is older than
        ``seen``, the last the memory took in (turns are never deleted: the file was restored
        into, or edited, while the memory was open)."""
        last = int(
            db.execute("SELECT max(id) FROM context_turns WHERE user = ?", (self.user,)).fetchone()[
                0
            ]
            or 0
        )
        if last < seen:
            raise restored_under(self.path, self.user, f"the last is {last}, not {seen}")
        return last

    def _holds(self, db: sqlite3.Connection, turns: int) -> None:
        """:class:`StorageUnavailableError` unless this user has ``turns`` turns at least, as
        many as a consolidation covers (turns are never deleted)."""
        [(count,)] = db.execute(
            "SELECT count(*) FROM context_turns WHERE user = ?", (self.user,)
        ).fetchall()
        if int(count) < turns:
            raise restored_under(self.path, self.user, f"{count} turns, not {turns}")

    def _mark(self, db: sqlite3.Connection, key: str, value: object) -> None:
        db.execute(
            "INSERT INTO context_marks (user, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (user, key) DO UPDATE SET value = excluded.value",
            (self.user, key, str(value)),
        )

    def _marks(self, db: sqlite3.Connection) -> dict[str, int]:
        rows = db.execute(
            f"SELECT key, value FROM context_marks WHERE user = ? AND key IN ({_IN_MARKS})",
            (self.user, *_MARKS),
        ).fetchall()
        try:
            return {str(key): int(value) for key, value in rows}
        except ValueError:
            raise _unreadable(self.path, f"a mark of {rows!r:.120}") from None

    def changed(self) -> bool:
        """Whether another connection (another process, say) committed to the file since
        the last call: one ``PRAGMA data_version``, no table read. The file is shared by
        every user, so another user's commit counts too (the :meth:`load` that follows
        finds nothing new); one of this user's is never missed.

        Examples
        --------
        >>> storage = SQLiteConversationStorage(":memory:")
        >>> storage.changed(), storage.changed()  # the first call sets the mark
        (True, False)
        >>> storage.close()
        """
        with self._lock, typed_errors(self.path):
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        seen, self._data_version = self._data_version, version
        return version != seen

    def load(self, after: int = 0) -> Loaded:
        """This user's turns with an id above ``after`` in id order, with their stored
        vectors and the embedder's name; this user's graph rows (all of them, or with
        ``after`` those that touch the turns returned) and marks; one snapshot of the file.

        Examples
        --------
        >>> storage = SQLiteConversationStorage(":memory:", user="bob")
        >>> record = TurnRecord(0, "s1", "user", "hi", 0.0, 1.0, 0, 0.0, None, None)
        >>> links = lambda turn_id: ([], [TypedEdgeRow("turn:1", f"turn:{turn_id}",
        ...                                            "FOLLOWED_BY", 0.0)])
        >>> storage.insert(record, "e", b""), storage.insert(record, "e", b"", links)
        (1, 2)
        >>> loaded = storage.load(after=1)
        >>> [turn.id for turn in loaded.turns], loaded.edges, loaded.graph_through
        ([2], [TypedEdgeRow(source='turn:1', target='turn:2', type='FOLLOWED_BY', at=0.0, \
reinforcements=0, traversals=0)], 2)
        >>> storage.close()
        """
        edge_rows = (
            "SELECT source, target, type, at, count, traversals FROM context_edges "
            "WHERE user = :user"
        )
        entity_rows = "SELECT node, kind, label FROM context_entities WHERE user = :user"
        if after:  # the rows that touch the new turns: their edges, the entities at their ends
            new = "SELECT 'turn:' || id FROM context_turns WHERE user = :user AND id > :after"
            edge_rows += f" AND (source IN ({new}) OR target IN ({new}))"
            ends = f"SELECT source FROM ({edge_rows}) UNION SELECT target FROM ({edge_rows})"
            entity_rows += f" AND node IN ({ends})"
        arguments = {"user": self.user, "after": after}
        with self._lock, typed_errors(self.path):
            self._db.execute("BEGIN")  # one snapshot: no edge read without its turn
            try:
                rows = self._db.execute(
                    f"SELECT {_COLUMNS}, embedder, embedding, {_TYPED} FROM context_turns "
                    "WHERE user = :user AND id > :after ORDER BY id",
                    arguments,
                ).fetchall()
                entities = self._db.execute(entity_rows, arguments).fetchall()
                edges = self._db.execute(edge_rows, arguments).fetchall()
                marks = self._marks(self._db)
            finally:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse even this
                    self._db.execute("ROLLBACK")  # it only read
        try:
            typed_edges = [
                TypedEdgeRow(_node(a), _node(b), str(t), _finite(w), int(c), int(v))
                for a, b, t, w, c, v in edges
            ]
        except (TypeError, ValueError, OverflowError) as exc:
            raise _unreadable(self.path, f"an edge: {exc}") from None
        loaded = Loaded(
            consolidated_through=marks.get("consolidated_through", 0),
            entities=[EntityRow(str(n), str(k), str(label)) for n, k, label in entities],
            edges=typed_edges,
            graph_through=marks.get("graph_through", 0),
            relations_through=marks.get("relations_through", 0),
            summary_style=marks.get("summary_style", 0),
        )
        for row in rows:
            if not row[14]:
                raise _unreadable(self.path, f"turn {row[0]}: a column of another type or infinite")
            loaded.turns.append(TurnRecord(*row[:12]))
            loaded.embedders.append(row[12])
            loaded.embeddings.append(bytes(row[13]))
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
        """Store a new turn of this user, and what ``links(its id)`` returns (entity
        nodes, edges), in one transaction; returns its id. With ``after``, only if this
        user's last turn is still the one of that id (0: none), else nothing is stored and
        None is returned: another process added a turn the caller has not seen. Another
        user's turns do not count. A turn whose ``key`` names a stored turn of this user is
        not stored either (None).

        Examples
        --------
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "chat.db")
        >>> ann = SQLiteConversationStorage(path, user="ann")
        >>> bob = SQLiteConversationStorage(path, user="bob")
        >>> record = TurnRecord(0, "s1", "user", "hi", 0.0, 1.0, 0, 0.0, None, None)
        >>> ann.insert(record, "e", b"", after=0), ann.insert(record, "e", b"", after=0)
        (1, None)
        >>> bob.insert(record, "e", b"", after=0)  # ann's turn is not bob's
        2
        >>> ann.close(), bob.close()
        (None, None)
        """
        with self._write() as db:
            if after is not None and self._not_behind(db, after) != after:
                return None
            cursor = db.execute(
                "INSERT INTO context_turns (user, session, role, text, at, surprise, repeats, "
                "boost, chunks, summary, speaker, key, embedder, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user, key) WHERE key IS NOT NULL DO NOTHING",
                (
                    self.user,
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
                    record.key,
                    embedder,
                    embedding,
                ),
            )
            if cursor.rowcount == 0:
                return None  # its key is another turn's: stored already
            turn_id = int(cursor.lastrowid or 0)
            if links is not None:
                entities, edges = links(turn_id)
                self._link(db, entities, edges, turn_id)
            return turn_id

    def add_graph(
        self,
        entities: Sequence[EntityRow],
        edges: Sequence[TypedEdgeRow],
        through: int,
        *,
        key: str = "graph_through",
    ) -> None:
        """Store entity nodes and edges of this user (existing ones are kept as they are)
        and record in mark ``key`` that they cover the turns up to id ``through``; one
        transaction."""
        with self._write() as db:
            self._link(db, entities, edges, through, key)

    def _link(
        self,
        db: sqlite3.Connection,
        entities: Sequence[EntityRow],
        edges: Sequence[TypedEdgeRow],
        through: int,
        key: str = "graph_through",
    ) -> None:
        user = self.user
        db.executemany(
            "INSERT INTO context_entities (user, node, kind, label) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (user, node) DO NOTHING",
            [(user, *entity) for entity in entities],
        )
        db.executemany(
            "INSERT INTO context_edges (user, source, target, type, at, count, traversals) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user, source, target, type) DO NOTHING",
            [(user, *edge) for edge in edges],
        )
        self._mark(db, key, through)

    def traverse_edges(
        self, keys: Sequence[TypedEdgeKey], step: Callable[[TypedEdgeRow], TypedEdgeRow]
    ) -> list[TypedEdgeRow]:
        """In one ``BEGIN IMMEDIATE`` transaction: this user's edges ``keys`` name, read,
        stepped and stored (see the protocol); no keys, no transaction."""
        if not keys:
            return []
        with self._write() as db:
            stored = [
                db.execute(
                    "SELECT source, target, type, at, count, traversals FROM context_edges "
                    "WHERE user = ? AND source = ? AND target = ? AND type = ?",
                    (self.user, *key),
                ).fetchone()
                for key in keys
            ]
            stepped = [step(TypedEdgeRow(*row)) for row in stored if row is not None]
            db.executemany(
                "UPDATE context_edges SET at = ?, count = ?, traversals = ? "
                "WHERE user = ? AND source = ? AND target = ? AND type = ?",
                [
                    (e.at, e.reinforcements, e.traversals, self.user, e.source, e.target, e.type)
                    for e in stepped
                ],
            )
        return stepped

    def consolidate(
        self,
        condensed: Sequence[tuple[int, str, str]],
        boosts: Sequence[tuple[int, float]],
        themes: Sequence[str],
        through: int,
        *,
        graph: tuple[Sequence[EntityRow], Sequence[TypedEdgeRow], int] | None = None,
    ) -> bool:
        """One consolidation of this user's turns, atomically: ``(id, chunks, summary)``
        rows, ``(id, boost)`` rows, the replay's themes, how many turns it covered and, if
        given, the relations it found (entity rows, edge rows, and the last turn id they
        cover). False, and nothing written, when this user's consolidation already covers
        ``through`` turns (another process did it)."""
        user = self.user
        with self._write() as db:
            if self._marks(db).get("consolidated_through", 0) >= through:
                return False
            self._holds(db, through)
            if graph is not None:
                self._link(db, *graph, "relations_through")
            db.executemany(
                "UPDATE context_turns SET chunks = ?, summary = ? WHERE id = ? AND user = ?",
                [(chunks, summary, turn_id, user) for turn_id, chunks, summary in condensed],
            )
            db.executemany(
                "UPDATE context_turns SET boost = ? WHERE id = ? AND user = ?",
                [(boost, turn_id, user) for turn_id, boost in boosts],
            )
            db.execute(
                "INSERT INTO context_replays (user, turns, themes) VALUES (?, ?, ?)",
                (user, through, "\n".join(themes)),
            )
            self._mark(db, "consolidated_through", through)
            return True

    @contextmanager
    def consolidation_turn(self) -> Iterator[bool]:
        """Hold this user's consolidation lease while the block runs, if no other process
        holds it: the block gets True, else False at once (the caller skips).

        The lease is a row of ``context_marks`` (its owner and its expiry), taken in one
        ``BEGIN IMMEDIATE`` transaction when it is absent, expired or this object's own,
        and deleted at the block's end. A process that dies holding it leaves the row,
        which expires :data:`CONSOLIDATION_LEASE_S` seconds after it was taken.

        Examples
        --------
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "chat.db")
        >>> one, two = SQLiteConversationStorage(path), SQLiteConversationStorage(path)
        >>> with one.consolidation_turn() as mine, two.consolidation_turn() as theirs:
        ...     mine, theirs
        (True, False)
        >>> with two.consolidation_turn() as theirs:  # released
        ...     theirs
        True
        >>> one.close(), two.close()
        (None, None)
        """
        with self._lease_lock:
            if self._leases:  # held by this object already (another of its threads)
                self._leases += 1
                held = True
            else:
                held = self._take_lease()
                self._leases += held
        try:
            yield held
        finally:
            if held:
                with self._lease_lock:
                    self._leases -= 1
                    if not self._leases:
                        self._release_lease()

    def _take_lease(self) -> bool:
        now = time.time()
        with self._write() as db:
            row = db.execute(
                "SELECT value FROM context_marks WHERE user = ? AND key = ?", (self.user, _LEASE)
            ).fetchone()
            if row is not None:
                expiry, _, owner = str(row[0]).partition(" ")
                try:
                    until = float(expiry)
                except ValueError:  # a mark edited by hand: no lease holds it
                    until = -math.inf
                held = math.isfinite(until) and until > now  # "inf" would hold it for ever
                if held and owner != self._owner:
                    return False
            self._mark(db, _LEASE, f"{now + CONSOLIDATION_LEASE_S!r} {self._owner}")
            return True

    def _release_lease(self) -> None:
        try:
            with self._write() as db:
                db.execute(
                    "DELETE FROM context_marks WHERE user = ? AND key = ? "
                    "AND substr(value, instr(value, ' ') + 1) = ?",
                    (self.user, _LEASE, self._owner),
                )
        except Exception:  # it expires on its own: never hide the block's own outcome
            log.warning("could not release the consolidation lease of %r", self, exc_info=True)

    def replace_embeddings(self, embedder: str, rows: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors of this user's turns recomputed with another embedder."""
        with self._write() as db:
            db.executemany(
                "UPDATE context_turns SET embedder = ?, embedding = ? WHERE id = ? AND user = ?",
                [(embedder, blob, turn_id, self.user) for turn_id, blob in rows],
            )

    def restyle_summaries(self, rows: Sequence[tuple[int, str]], style: int) -> None:
        """Store summaries redone in telegram style ``style``, ``(turn id, summary)``, and
        mark this user's summaries as following it; one transaction."""
        with self._write() as db:
            db.executemany(
                "UPDATE context_turns SET summary = ? WHERE id = ? AND user = ?",
                [(summary, turn_id, self.user) for turn_id, summary in rows],
            )
            self._mark(db, "summary_style", style)

    def themes(self) -> list[tuple[int, list[str]]]:
        """Every replay so far of this user: (turns covered, themes), oldest first."""
        with self._lock, typed_errors(self.path):
            rows = self._db.execute(
                "SELECT turns, themes FROM context_replays WHERE user = ? ORDER BY id",
                (self.user,),
            )
            try:
                return [(int(n), [t for t in text.split("\n") if t]) for n, text in rows]
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                raise _unreadable(self.path, f"a replay: {exc}") from None

    def close(self) -> None:
        """Release the connection (idempotent)."""
        with self._lock:
            self._db.close()


def _unreadable(path: str, what: str) -> CorruptDatabaseError:
    """A file whose rows this library cannot read as it wrote them (edited by hand)."""
    return CorruptDatabaseError(
        f"{path!r} holds rows no conversation memory writes ({what}); nothing was written: "
        "restore a backup"
    )


def _node(name: object) -> str:
    """A graph node's name as stored: a turn's (``turn:<id>``) holds its id."""
    text = str(name)
    if text.startswith("turn:") and not text[5:].isdigit():
        raise ValueError(f"a turn node {text!r:.60} without its turn's id")
    return text


def _finite(value: object) -> float:
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ValueError(f"an edge's time {number}")
    return number
