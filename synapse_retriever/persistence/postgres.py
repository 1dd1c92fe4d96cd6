"""PostgreSQL, the team backend: one database, many writers, one learned graph.

Every agent of a team points its store at one database (``SynapseStore("postgresql://...")``);
they write at once. The method's math stays in Python, once
(:func:`~synapse_retriever.learning.decay.reinforce_edges`); what makes concurrent writers
safe is how each transaction takes its locks:

1. the event's pairs no row holds yet are inserted as blank rows (count 0), sorted by
   ``(namespace, a, b)``, with ``INSERT ... ON CONFLICT DO NOTHING``: two writers creating
   the same pair meet on the unique key, the second waits for the first;
2. every pair's row is then read ``FOR UPDATE``, sorted the same way: a row is read only
   once its lock is held, so no update is computed from a stale state (none is lost),
   and every writer takes its locks in one global order (none deadlocks): new names
   (namespaces, then nodes, each sorted), event ids (sorted), edges, use rows
   ``(namespace, node)`` (a first use locked by a blank row, as a new pair), then the
   version row, then the namespaces' event counters;
3. the store computes the new states from those rows and writes them back by id.

Each transaction logs what it wrote (``edge_log``, ``use_log``, ``name_log``) under a token
of its own, then takes the next version from one counter row, locked by its last small
writes before the commit, and maps it to the token (``versions``): versions are handed out
in commit order, so a reader that has applied version v has seen everything committed up
to v, and fetches exactly what the versions after v logged. A deadlock
or serialization failure, and a connection lost before the commit, are reported as
:class:`~synapse_retriever.persistence.protocols.TransientWriteError`, which the store
retries with backoff.

Readers learn that another writer committed from a ``NOTIFY`` (a signal only: it carries
its schema's oid, so a store hears its own schema's commits, and the version tells what
changed); without notifications (a connection pooler
in transaction mode, a listener that lost its connection) they poll once per refresh
interval. Every unique key and every ``ON CONFLICT`` target of the tables that grow with
each edge (edges, node uses, recent events, the edge and use logs) holds ``namespace``, the
column they would be distributed by; the event ids, names and versions do not (see the
docs' "Scaling out" page for what that means).

Examples
--------
>>> split_url("postgresql://agent@db.internal/team?sslmode=require")
('postgresql://agent@db.internal/team?sslmode=require', 'db.internal/team')
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import re
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import numpy as np

from synapse_retriever.config import Operations, check_flag
from synapse_retriever.errors import (
    AccessDeniedError,
    CorruptDatabaseError,
    InvalidValueError,
    MissingExtraError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
    StorageUnavailableError,
    shown,
)
from synapse_retriever.learning.decay import BLANK_TIME
from synapse_retriever.persistence.protocols import (
    ReplacedTablesError,
    TransientWriteError,
    WriteTransaction,
    lock_timeout_error,
    rolled_back_forget,
)
from synapse_retriever.persistence.rows import (
    EDGE_COLUMNS,
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
    rows_array,
    snapshot_rows,
    snapshot_stamp,
    table_columns,
    table_keys,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CHANNEL",
    "CREATOR_LOCK",
    "SCHEMA_VERSION",
    "SNAPSHOT_TABLE",
    "AnswerBudget",
    "Commit",
    "Connections",
    "Listener",
    "PostgresStorage",
    "is_postgres_url",
    "lock_timeout",
    "schema_missing",
    "snapshot",
    "split_url",
    "statement_cancelled",
    "typed_write_errors",
    "write_rows",
]

logger = logging.getLogger("synapse_retriever")
_T = TypeVar("_T")

APPLICATION_ID = 0x53594E41  # "SYNA", as in SQLite's PRAGMA application_id
CHANNEL = "synapse_retriever"
"""The ``LISTEN``/``NOTIFY`` channel a commit signals on, its schema's oid as the payload (a
store hears its own schema's commits, and an empty payload: an older release's)."""
LOG_VERSIONS = 10_000
"""Versions kept in the change logs; a reader that looks less often reloads everything."""
LOG_TRIM_EVERY = 1_000
"""The logs are trimmed by the transactions whose token is a multiple of this."""
TRIM_RECENT_EVERY = 64
"""The recent-events log keeps 2 × ``recent_events`` entries per namespace, trimmed by the
transactions whose token is a multiple of this."""
POLL_TIMEOUT_S = 1.0
"""How long a read waits for a connection or a lock before recall goes on from memory."""
ANSWER_TIMEOUT_S = 2.0
"""How long a connection check may go unanswered (a stalled network, a frozen server)
before the connection is given up; and how long a read gives the server to answer, all
told, once a connection is free: the check, a new connection if one is needed, and its
look at the version (:class:`AnswerBudget`)."""
LISTEN_WAKE_S = 0.05
"""How often a listener waiting for notifications looks whether it should stop: closing a
store (or the last conversation memory of a URL) waits that long at most."""
UNREACHABLE_BACKOFF_S = 5.0
"""How long reads leave a server that did not answer alone before asking again."""
PROBE_S = 2.0
"""How long a new listener waits to hear its own probe ``NOTIFY``, sent from another
connection."""
PROBE_MISSES = 3
"""Probes in a row not heard within :data:`PROBE_S` (each on a new connection, backing off
as after a lost one) that mean a ``LISTEN`` hears nothing there (a pooler in transaction
mode): the listener stops, and readers poll instead."""
CONNECTION_OPTIONS: dict[str, int | str] = {
    "connect_timeout": 5,  # libpq waits without bound (the kernel's 130 s) otherwise
    "client_encoding": "utf8",  # text as str, whatever the database's encoding (SQL_ASCII: bytes)
    "keepalives": 1,  # a peer gone silent is found after 5 + 3 × 2 s of quiet
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,  # ms: data sent and unacknowledged that long drops it
}
"""libpq settings of every connection: how long a connection may take to open, and how
soon a server or network that stopped answering is noticed."""
ALONE_ROWS = 1_000
"""A write whose result is not read and that carries more rows than this runs on its own:
the pipeline is synced after it, so nothing is queued behind it. While the server runs a
long statement, or one that waits for another writer's lock, it reads no more of the
connection, and the next statements' bytes wait in a send window it keeps shut;
``tcp_user_timeout`` then drops the connection. Measured on one machine: 64 KB queued
behind a statement of 3 s kept the connection, 128 KB lost it; a write of 1M edges in one
transaction lost it after 55 s, every time. A thousand rows of keys is some 25 KB."""
_ADMIN_SHUTDOWN = "57P01"
"""SQLSTATE of a connection the server terminated (``pg_terminate_backend``, a pooler)."""
_OPEN_ATTEMPTS = 3
"""Connections opened in a row when the server terminates each while it is set up."""

SCHEMA = [
    """
    CREATE TABLE meta (key text PRIMARY KEY, value bigint NOT NULL);
    INSERT INTO meta (key, value) VALUES
        ('application_id', {application_id}), ('schema_version', {schema_version}),
        ('version', 0), ('log_horizon', 0);
    CREATE TABLE nodes (
        id   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name text NOT NULL UNIQUE
    );
    CREATE TABLE namespaces (
        id   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name text NOT NULL UNIQUE
    );
    CREATE TABLE edges (
        namespace          bigint NOT NULL,
        id                 bigint GENERATED BY DEFAULT AS IDENTITY,
        a                  bigint NOT NULL,
        b                  bigint NOT NULL,
        weight             double precision NOT NULL,
        activation_count   bigint NOT NULL,
        half_life_days     double precision NOT NULL,
        created_at         double precision NOT NULL,
        last_reinforced_at double precision NOT NULL,
        PRIMARY KEY (namespace, a, b),
        UNIQUE (namespace, id),
        CHECK (a <> b)
    );
    CREATE TABLE node_uses (
        namespace bigint NOT NULL,
        node      bigint NOT NULL,
        uses      bigint NOT NULL,
        together  bigint NOT NULL,
        first_at  double precision NOT NULL,
        recent    double precision[] NOT NULL,
        PRIMARY KEY (namespace, node)
    );
    CREATE TABLE namespace_events (
        namespace bigint PRIMARY KEY,
        events    bigint NOT NULL
    );
    CREATE TABLE recent_uses (
        namespace bigint NOT NULL,
        id        bigint GENERATED BY DEFAULT AS IDENTITY,
        at        double precision NOT NULL,
        nodes     bigint[] NOT NULL,
        tx        bigint NOT NULL,
        PRIMARY KEY (namespace, id)
    );
    CREATE INDEX recent_uses_by_tx ON recent_uses (tx);
    CREATE TABLE events (id text PRIMARY KEY, at double precision NOT NULL);
    CREATE SEQUENCE transactions;
    CREATE TABLE versions (version bigint PRIMARY KEY, tx bigint NOT NULL);
    CREATE INDEX versions_by_tx ON versions (tx);
    CREATE TABLE edge_log (
        namespace bigint NOT NULL, tx bigint NOT NULL, edge bigint NOT NULL,
        PRIMARY KEY (namespace, tx, edge)
    );
    CREATE INDEX edge_log_by_tx ON edge_log (tx);
    CREATE TABLE use_log (
        namespace bigint NOT NULL, tx bigint NOT NULL, node bigint NOT NULL,
        PRIMARY KEY (namespace, tx, node)
    );
    CREATE INDEX use_log_by_tx ON use_log (tx);
    CREATE TABLE name_log (
        tx bigint NOT NULL, kind char(1) NOT NULL, id bigint NOT NULL,
        PRIMARY KEY (tx, kind, id)
    );
    """,
    # 2: when each event id was last seen (recorded, or sent again), apart from its event's
    # time (which a repair reads): a sweep forgets the ids not seen for
    # ``event_ids_kept_days``. The ids of an older store count as seen at its migration, and
    # those a process of an older release still running records (without it) as seen then.
    """
    ALTER TABLE events ADD COLUMN seen double precision NOT NULL DEFAULT extract(epoch FROM now());
    UPDATE meta SET value = 2 WHERE key = 'schema_version';
    """,
]
SCHEMA_VERSION = len(SCHEMA)
TABLES = frozenset(
    {
        "meta",
        "nodes",
        "namespaces",
        "edges",
        "node_uses",
        "namespace_events",
        "recent_uses",
        "events",
        "edge_log",
        "use_log",
        "name_log",
        "versions",
        "snapshot",  # made by the first snapshot written (SNAPSHOT_TABLE)
    }
)
SNAPSHOT_TABLE = """
CREATE TABLE IF NOT EXISTS snapshot (
    part          text   PRIMARY KEY,
    version       bigint NOT NULL,
    max_node      bigint NOT NULL,
    max_namespace bigint NOT NULL,
    data          bytea  NOT NULL
);
ALTER TABLE snapshot ALTER COLUMN data SET STORAGE EXTERNAL;
"""
"""The mirror's snapshot (:mod:`~synapse_retriever.mirror.snapshot`), one row per part, as
in an SQLite file. Made by the first snapshot written, not by a migration: a schema without
it is the same schema version. Its parts are stored out of line and uncompressed (``STORAGE
EXTERNAL``): arrays of ids and floats gain little from compression, and cost its time at
every write and every open."""
CREATOR_LOCK = "hashtext('synapse-retriever')"
"""The advisory lock a process holds while it creates a store's tables (a transaction's)."""
WRITES = {
    "edges": "INSERT, UPDATE, DELETE",
    "meta": "UPDATE",
    "nodes": "INSERT",
    "namespaces": "INSERT",
    "node_uses": "INSERT, UPDATE, DELETE",
    "namespace_events": "INSERT, UPDATE",
    "recent_uses": "INSERT, DELETE",
    "events": "INSERT, UPDATE, DELETE",
    "edge_log": "INSERT, DELETE",
    "use_log": "INSERT, DELETE",
    "name_log": "INSERT, DELETE",
    "versions": "INSERT, DELETE",
}
"""What writes do in each table (writes trim the logs and the recent events; a sweep and
a repair delete): a role without one of these rights opens the store read-only."""
READS = TABLES - {"snapshot"}
"""What a store reads as it opens and as it polls (a role that may not read the optional
snapshot opens from the rows)."""
SHARED_PREFIX = "context_"
"""The conversation memory's tables (:mod:`.conversation.postgres`) start so: they share
a store's schema, as they share its SQLite file."""

_COLUMNS = ", ".join(EDGE_COLUMNS)
_ID, _NAMESPACE, _A, _B = (EDGE_COLUMNS.index(name) for name in ("id", "namespace", "a", "b"))
_E_COLUMNS = ", ".join(f"e.{column}" for column in EDGE_COLUMNS)
_KEYS = "unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS k (namespace, a, b)"
SCHEMA_OID = "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
"""The oid of the connection's schema: by its name as stored (``current_schema()::regnamespace``
reads the name again as an identifier, ``Ops`` as ``ops``, and refuses ``team.v2``)."""
_SNAPSHOT_CLASS = f"FROM pg_class WHERE relname = 'snapshot' AND relnamespace = {SCHEMA_OID}"
_CREATES = re.compile(r"CREATE (?:UNIQUE )?(TABLE|SEQUENCE|INDEX)(?: IF NOT EXISTS)? (\w+)")
_KINDS = {"TABLE": "r", "SEQUENCE": "S", "INDEX": "i"}
_KIND_NAMES = {
    "r": "table",
    "p": "partitioned table",
    "v": "view",
    "m": "materialized view",
    "f": "foreign table",
    "S": "sequence",
    "i": "index",
    "I": "partitioned index",
    "c": "composite type",
}


def created_objects(*scripts: str) -> dict[str, str]:
    """The objects ``scripts`` create by name, each with its ``pg_class.relkind`` (``r`` a
    table, ``S`` a sequence, ``i`` an index): the names another application's objects must
    not hold (PostgreSQL picks free names for the rest, an identity's sequence, a key's index).

    Examples
    --------
    >>> created_objects("CREATE TABLE a (id int); CREATE INDEX a_by_id ON a (id);",
    ...                 "CREATE SEQUENCE t; CREATE TABLE IF NOT EXISTS b (x int)")
    {'a': 'r', 'a_by_id': 'i', 't': 'S', 'b': 'r'}
    """
    return {name: _KINDS[what] for what, name in _CREATES.findall("\n".join(scripts))}


def name_clashes(conn: psycopg.Connection[Any], objects: dict[str, str]) -> list[str]:
    """What ``conn``'s schema holds under one of the names of ``objects`` (as
    :func:`created_objects` gives them) that is not that object: a relation of another kind
    (a sequence or a view named as a table, a composite type), or a type (an enum, a
    domain) named as a table or a sequence, whose own type it would clash with; and, where
    none of their tables is there yet (they were never created), whatever holds one of
    the names (a sequence ``transactions`` of another application). Shown as ``"sequence
    transactions"``, sorted; empty where nothing clashes."""
    relations = conn.execute(
        f"SELECT relname, relkind FROM pg_class WHERE relnamespace = {SCHEMA_OID} "
        "AND relname = ANY(%s::text[])",
        (list(objects),),
    ).fetchall()
    made = any(kind == objects[name] == "r" for name, kind in relations)
    found = [
        f"{_KIND_NAMES.get(kind, 'relation')} {name}"
        for name, kind in relations
        if kind != objects[name] or not made
    ]
    typed = [name for name, kind in objects.items() if kind != "i"]  # an index has no type
    types = conn.execute(  # a relation's own type is the relation's (above)
        f"SELECT typname FROM pg_type WHERE typnamespace = {SCHEMA_OID} AND typrelid = 0 "
        "AND typname = ANY(%s::text[])",
        (typed,),
    ).fetchall()
    found += [f"type {name}" for (name,) in types]
    return sorted(found)


OBJECTS = created_objects(*SCHEMA, SNAPSHOT_TABLE)
"""The objects a store creates by name (:func:`created_objects`)."""


def is_postgres_url(path: object) -> bool:
    """Whether ``path`` names a PostgreSQL database (``postgresql://`` or ``postgres://``).

    Examples
    --------
    >>> is_postgres_url("postgresql://localhost/team"), is_postgres_url("synapses.db")
    (True, False)
    """
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def check_schema(conn: psycopg.Connection[Any], where: str) -> None:
    """Raise :class:`NotASynapseDatabaseError` where ``conn`` has no schema to work in: its
    ``search_path`` names none that exists (``-csearch_path=synapse`` before ``CREATE SCHEMA
    synapse``), where PostgreSQL would refuse the first table."""
    [(schema,)] = conn.execute("SELECT current_schema()").fetchall()
    if schema is None:
        [(path,)] = conn.execute("SHOW search_path").fetchall()
        raise NotASynapseDatabaseError(
            f"{where!r}: its search_path ({path}) names no schema that exists; create it "
            "first (CREATE SCHEMA ...); nothing was written"
        )


def split_url(url: str) -> tuple[str, str]:
    """The connection string, and a name for messages without its password: the host, port
    and database libpq reads in it.

    Raises
    ------
    InvalidValueError
        libpq cannot read the URL (a bad percent-escape, a parameter it does not know, an
        IPv6 address without its closing bracket), its port is not a number, or an ``@``
        ends up in its host or database (a ``/`` in a password that is not written ``%2F``
        ends the user and password early). The message shows neither the URL's user and
        password nor any token libpq quoted, which may be part of them.

    Examples
    --------
    >>> split_url("postgres://me:secret@localhost:5432/team")[1]
    'localhost:5432/team'
    >>> split_url("postgresql://me:se%ZZcret@localhost/team")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: 'postgresql://…' is not a valid PostgreSQL URL \
(invalid percent-encoded token: "…")
    """
    unread = f"{url.partition('://')[0]}://…"  # nothing of it can be trusted to hold no secret
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # the extra is missing: the storage says so
        return url, unread
    problem: str | None = None
    try:
        parts = conninfo_to_dict(url)
    except ProgrammingError as exc:  # raised below, outside: no __context__ to carry it
        problem = _QUOTED.sub('"…"', (str(exc).strip().splitlines() or ["unreadable"])[0])
        if any(secret in problem for secret in _secrets(url)):
            problem = "libpq cannot read it"
    if problem is not None:
        raise InvalidValueError(f"{unread!r} is not a valid PostgreSQL URL ({problem})")
    host, port, database = (str(parts.get(key) or "") for key in ("host", "port", "dbname"))
    authority = url.partition("://")[2].split("/", 1)[0]  # libpq ends a user's password at "/"
    userinfo = "@" in authority
    if authority.count("@") > 1 or ("@" in database and "@" in url and not userinfo):
        raise InvalidValueError(
            f"{unread!r} is not a valid PostgreSQL URL (libpq reads an '@' as part of its host "
            "or database: write a '/' or '@' in a user or password as %2F or %40)"
        )
    # an '@' libpq read in a value: what came before it may be a password a '/' cut short
    named = unread if "@" in url and not userinfo else f"postgresql://{host}/{database}"
    if not all(piece.strip().isdigit() for piece in port.split(",") if piece.strip()):
        raise InvalidValueError(
            f"{named!r} is not a valid PostgreSQL URL (its port is not a number)"
        )
    if named == unread:
        return url, unread
    port = port if port.strip(", ") else ""  # "h1,h2": libpq's "," for no port
    where = f"{host or 'localhost'}{f':{port}' if port else ''}{f'/{database}' if database else ''}"
    return url, where


def _secrets(url: str) -> set[str]:
    """The passwords ``url`` may hold, as written and percent-decoded: what lies between its
    scheme and its last ``@``, and a ``password`` parameter's value."""
    rest = url.partition("://")[2]
    found = {rest.rpartition("@")[0].partition(":")[2]}
    query = rest.partition("?")[2]
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if unquote(key).strip().lower() == "password":
            found.add(value)
    return {s for value in found if value for s in (value, unquote(value)) if s}


_QUOTED = re.compile(r'"[^"]*"')
"""A token libpq quotes in its message: part of the URL, maybe of its password."""


class Origin:
    """Which tables a storage's reads came from: the oid of the store's ``meta`` table,
    which tables restored from a backup or made again (a reset) have anew. Rows read since
    from other tables are not changes to what was read before: they are read whole.

    >>> origin = Origin()
    >>> origin.moved(16384), origin.moved(16384), origin.moved(20001)
    (False, False, True)
    >>> origin.written(30002), origin.written(30002)  # a write found them: refused till read
    (True, True)
    >>> origin.moved(30002), origin.written(30002)
    (True, False)
    """

    def __init__(self) -> None:
        self.oid: int | None = None
        self.stale = False
        """A write found other tables: the next read reads them whole."""

    def moved(self, oid: int) -> bool:
        """Whether ``oid`` is another ``meta`` table's than the last read's, or a write found
        other tables since; now it is known."""
        moved = (self.oid is not None and self.oid != oid) or self.stale
        self.oid, self.stale = oid, False
        return moved

    def written(self, oid: int) -> bool:
        """Whether a write's ``oid`` is another ``meta`` table's than the last read's, or the
        tables a write found before are still unread (:attr:`stale`): then the write must
        not go on with ids read from the old ones, and the next read reads them whole."""
        if self.oid is None or (self.oid == oid and not self.stale):
            return False
        self.oid, self.stale = oid, True
        return True


ORIGIN = "'meta'::regclass::oid"
"""The oid of the store's ``meta`` table (:class:`Origin`), as SQL."""


class _PostgresTransaction:
    """One write transaction on one connection (see the module docstring for its locks)."""

    def __init__(self, conn: psycopg.Connection[Any], origin: Origin) -> None:
        self._conn = conn
        self._origin = origin
        self.version = 0
        self._edges: set[tuple[int, int]] = set()  # (namespace, id) written or deleted
        self._uses: set[tuple[int, int]] = set()
        self._names: list[tuple[str, int]] = []
        self._recent: list[RecentEvent] = []  # nodes as lists: PostgreSQL arrays
        self._keep = 0
        self._reload = False
        self._events: dict[int, int] = {}
        self.committing = 0
        """The version :meth:`finish` took; it is the transaction's once committed."""

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(query, params).fetchall()

    def node_ids(self, names: Sequence[str]) -> list[int]:
        return self._named("nodes", "n", names)

    def namespace_id(self, name: str) -> int:
        return self._named("namespaces", "s", [name])[0]

    def _named(self, table: str, kind: str, names: Sequence[str]) -> list[int]:
        distinct = sorted(set(names))
        # only names no row holds get an id: a conflict would burn one (readers size
        # arrays by ids); sorted, so two writers creating the same names cannot deadlock
        created = self._rows(
            f"INSERT INTO {table} (name) SELECT n FROM unnest(%s::text[]) AS u (n) "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.name = u.n) ORDER BY n "
            "ON CONFLICT (name) DO NOTHING RETURNING id",
            (distinct,),
        )
        self._names += [(kind, row[0]) for row in created]
        found = dict(
            self._rows(f"SELECT name, id FROM {table} WHERE name = ANY(%s::text[])", (distinct,))
        )
        return [int(found[name]) for name in names]

    def lock_edges(self, keys: Sequence[EdgeKey]) -> EdgeTable:
        ordered = sorted(set(keys))
        columns = [list(column) for column in zip(*ordered, strict=True)] if ordered else [[]] * 3
        write_rows(
            self._conn,
            "INSERT INTO edges (namespace, a, b, weight, activation_count, half_life_days, "
            "created_at, last_reinforced_at) "
            f"SELECT k.namespace, k.a, k.b, 0, 0, 1, %s, %s FROM {_KEYS} "
            "WHERE NOT EXISTS (SELECT 1 FROM edges e WHERE e.namespace = k.namespace "
            "AND e.a = k.a AND e.b = k.b) ORDER BY 1, 2, 3 ON CONFLICT DO NOTHING",
            (BLANK_TIME, BLANK_TIME, *columns),
            len(ordered),
        )
        rows = self._rows(
            f"SELECT {_E_COLUMNS} FROM edges e JOIN {_KEYS} ON e.namespace = k.namespace "
            "AND e.a = k.a AND e.b = k.b ORDER BY e.namespace, e.a, e.b FOR UPDATE OF e",
            columns,
        )
        return rows_array(rows)

    def expect(self, edges: int) -> None:
        pass  # writers run concurrently: every write reads its rows with lock_edges

    def edges_by_id(self, ids: Sequence[int]) -> list[EdgeRow]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM edges WHERE id = ANY(%s::bigint[]) "
            "ORDER BY namespace, a, b FOR UPDATE",
            (list(ids),),
        )
        return [EdgeRow(*row) for row in rows]

    def insert(self, table: EdgeTable) -> EdgeTable:
        if not len(table):
            return table
        created = self._rows(
            "INSERT INTO edges (namespace, a, b, weight, activation_count, half_life_days, "
            "created_at, last_reinforced_at) SELECT * FROM unnest(%s::bigint[], %s::bigint[], "
            "%s::bigint[], %s::float8[], %s::bigint[], %s::float8[], %s::float8[], "
            "%s::float8[]) ORDER BY 1, 2, 3 RETURNING namespace, a, b, id",
            table_columns(table)[1:],  # every column but the id, in the order above
        )
        ids = {(ns, a, b): edge for ns, a, b, edge in created}
        keys = table_keys(table)
        placed = table.copy()
        placed[:, _ID] = [ids[key] for key in keys]
        self._edges.update((key[0], ids[key]) for key in keys)
        return placed

    def update(self, table: EdgeTable) -> None:
        if not len(table):
            return
        ordered = table[np.lexsort((table[:, _B], table[:, _A], table[:, _NAMESPACE]))]
        ids, spaces, _, _, *state = table_columns(ordered)
        write_rows(
            self._conn,
            "UPDATE edges e SET weight = u.w, activation_count = u.c, half_life_days = u.h, "
            "created_at = u.t0, last_reinforced_at = u.t1 FROM unnest(%s::bigint[], "
            "%s::bigint[], %s::float8[], %s::bigint[], %s::float8[], %s::float8[], "
            "%s::float8[]) AS u (n, id, w, c, h, t0, t1) WHERE e.namespace = u.n AND e.id = u.id",
            [spaces, ids, *state],
            len(ordered),
        )
        self._edges.update(zip(spaces, ids, strict=True))

    def delete(self, ids: Sequence[int]) -> None:
        if not len(ids):
            return
        gone = self._rows(
            "DELETE FROM edges WHERE id = ANY(%s::bigint[]) RETURNING namespace, id", (list(ids),)
        )
        self._edges.update((int(ns), int(edge)) for ns, edge in gone)

    def uses_of(self, keys: Sequence[UseKey]) -> list[UseRow]:
        ordered = sorted(set(keys))
        columns = [list(column) for column in zip(*ordered, strict=True)] if ordered else [[], []]
        # as for edges: a first use creates a blank row (no use yet), so two writers using
        # a node for the first time meet on its key and the second reads the first's row
        write_rows(
            self._conn,
            "INSERT INTO node_uses (namespace, node, uses, together, first_at, recent) "
            "SELECT k.namespace, k.node, 0, 0, 'Infinity', '{}' FROM unnest(%s::bigint[], "
            "%s::bigint[]) AS k (namespace, node) WHERE NOT EXISTS (SELECT 1 FROM node_uses u "
            "WHERE u.namespace = k.namespace AND u.node = k.node) ORDER BY 1, 2 "
            "ON CONFLICT DO NOTHING",
            columns,
            len(ordered),
        )
        rows = self._rows(
            "SELECT u.namespace, u.node, u.uses, u.together, u.first_at, u.recent "
            "FROM node_uses u JOIN unnest(%s::bigint[], %s::bigint[]) AS k (namespace, node) "
            "ON u.namespace = k.namespace AND u.node = k.node "
            "ORDER BY u.namespace, u.node FOR UPDATE OF u",
            columns,
        )
        return [
            UseRow(ns, node, uses, both, first, tuple(recent))
            for ns, node, uses, both, first, recent in rows
        ]

    def write_uses(self, rows: Sequence[UseRow]) -> None:
        if not rows:
            return
        ordered = sorted(rows, key=lambda row: (row.namespace, row.node))
        self._conn.cursor().executemany(
            "INSERT INTO node_uses (namespace, node, uses, together, first_at, recent) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, node) DO UPDATE SET "
            "uses = excluded.uses, together = excluded.together, "
            "first_at = excluded.first_at, recent = excluded.recent",
            [
                (row.namespace, row.node, row.uses, row.together, row.first, list(row.recent))
                for row in ordered
            ],
        )
        self._uses.update((row.namespace, row.node) for row in rows)

    def add_events(self, namespace: int, count: int) -> None:
        # the counter row is one per namespace, which every writer locks: added at the
        # commit (see finish), so it is held for one round trip
        self._events[namespace] = self._events.get(namespace, 0) + count

    def log_recent(self, entries: Sequence[RecentEvent], keep: int) -> None:
        # written with the version, at the commit (see finish)
        self._recent += [entry._replace(nodes=list(entry.nodes)) for entry in entries]
        self._keep = max(self._keep, keep)

    def record_events(self, events: Sequence[EventRecord]) -> list[bool]:
        first = {
            event_id: (at, seen) for event_id, at, _, seen in reversed(events)
        }  # twice: the first
        ordered = sorted(first)
        # in sorted order, as every writer (and a sweep) locks them; a replay's row is seen
        # again now, unless it was seen later (another clock): either way not returned new
        written = self._rows(
            "INSERT INTO events (id, at, seen) "
            "SELECT * FROM unnest(%s::text[], %s::float8[], %s::float8[]) ORDER BY 1 "
            "ON CONFLICT (id) DO UPDATE SET seen = excluded.seen "
            "WHERE events.seen < excluded.seen "
            "RETURNING id, xmax = 0",  # xmax 0: inserted, not updated
            (ordered, [first[i][0] for i in ordered], [first[i][1] for i in ordered]),
        )
        new = {event_id for event_id, inserted in written if inserted}
        recorded = []
        for event_id, *_ in events:  # an id met again in the batch is a replay
            recorded.append(event_id in new)
            new.discard(event_id)
        return recorded

    def forget_event_ids(self, before: float) -> int:
        [(count,)] = self._rows(  # counted by the server: a year of ids is millions of rows
            # locked in id order, as writers lock the ids they send again (a deadlock else)
            "WITH gone AS (DELETE FROM events WHERE id IN (SELECT id FROM events "
            "WHERE seen < %s ORDER BY id FOR UPDATE) RETURNING 1) SELECT count(*) FROM gone",
            (before,),
        )
        return int(count)

    def forget_after(self, limit: float) -> ForgetCounts:
        edges = self._rows(
            "DELETE FROM edges WHERE last_reinforced_at > %s OR created_at > %s "
            "RETURNING namespace, id",
            (limit, limit),
        )
        self._edges.update((int(ns), int(edge)) for ns, edge in edges)
        late = self._rows(
            "SELECT namespace, node, uses, together, first_at, recent FROM node_uses "
            "WHERE first_at > %s OR EXISTS (SELECT 1 FROM unnest(recent) AS t WHERE t > %s) "
            "ORDER BY namespace, node FOR UPDATE",
            (limit, limit),
        )
        dropped = 0
        kept: list[UseRow] = []
        for ns, node, uses, together, first, recent in late:
            keep = [t for t in recent if t <= limit]
            dropped += len(recent) - len(keep)
            left = uses - (len(recent) - len(keep))
            if left <= 0 or not keep or first > limit:
                self._conn.execute(
                    "DELETE FROM node_uses WHERE namespace = %s AND node = %s", (ns, node)
                )
            else:
                kept.append(
                    UseRow(
                        namespace=ns,
                        node=node,
                        uses=left,
                        together=min(together, left),
                        first=first,
                        recent=tuple(keep),
                    )
                )
        self.write_uses(kept)
        events = len(self._rows("DELETE FROM recent_uses WHERE at > %s RETURNING 1", (limit,)))
        events += len(self._rows("DELETE FROM events WHERE at > %s RETURNING 1", (limit,)))
        counts = ForgetCounts(edges=len(edges), uses=dropped, events=events)
        # deleted use rows are not logged: every reader reloads (none if nothing went)
        self._reload = self._reload or any(counts)
        return counts

    def changes(self, since: int, max_node: int, max_namespace: int) -> Changes:
        return _changes(self._conn, since, self._origin)

    def finish(self) -> None:
        """Log what this transaction wrote under a token of its own, then take the version
        (versions then follow commit order), map it to the token, add the event counts and
        signal the commit; all in one round trip (a log of more than ``ALONE_ROWS`` rows in
        one of its own). The logs, however large, are written
        before the rows every writer locks (the version, a namespace's event counter), so
        those are held only for a few small writes and the commit."""
        conn = self._conn
        token = "currval('transactions')"
        version = "(SELECT value FROM meta WHERE key = 'version')"  # this transaction's, once set
        with conn.pipeline():  # nothing is read back until the end
            conn.execute("SELECT nextval('transactions')")
            if self._edges:
                namespaces, edges = zip(*sorted(self._edges), strict=True)
                write_rows(
                    self._conn,
                    f"INSERT INTO edge_log (namespace, tx, edge) SELECT n, {token}, e "
                    "FROM unnest(%s::bigint[], %s::bigint[]) AS u (n, e)",
                    (list(namespaces), list(edges)),
                    len(edges),
                )
            if self._uses:
                namespaces, nodes = zip(*sorted(self._uses), strict=True)
                write_rows(
                    self._conn,
                    f"INSERT INTO use_log (namespace, tx, node) SELECT n, {token}, u "
                    "FROM unnest(%s::bigint[], %s::bigint[]) AS x (n, u)",
                    (list(namespaces), list(nodes)),
                    len(nodes),
                )
            if self._names:
                kinds, ids = zip(*self._names, strict=True)
                write_rows(
                    self._conn,
                    f"INSERT INTO name_log (tx, kind, id) SELECT {token}, k, i FROM "
                    "unnest(%s::text[], %s::bigint[]) AS x (k, i) ON CONFLICT DO NOTHING",
                    (list(kinds), list(ids)),
                    len(ids),
                )
            if self._recent:
                conn.cursor().executemany(
                    "INSERT INTO recent_uses (namespace, at, nodes, tx) "
                    f"VALUES (%s, %s, %s, {token})",
                    self._recent,
                )
            # trims, now and then (by the token): before the rows every writer locks
            committed = "(SELECT value FROM meta WHERE key = 'version')"  # not yet this one's
            if self._recent:
                conn.execute(
                    "DELETE FROM recent_uses r USING (SELECT namespace, id FROM (SELECT "
                    "namespace, id, row_number() OVER (PARTITION BY namespace "
                    "ORDER BY at DESC, id DESC) AS newer FROM recent_uses "
                    "WHERE namespace = ANY(%s::bigint[])) AS ranked "
                    "WHERE newer > %s) AS old WHERE r.namespace = old.namespace AND r.id = old.id "
                    f"AND {token} %% %s = 0",
                    (sorted({entry.namespace for entry in self._recent}), 2 * self._keep,
                     TRIM_RECENT_EVERY),
                )  # fmt: skip
            if not self._reload:
                conn.execute(
                    f"UPDATE meta SET value = greatest(value, {committed} - %s) "
                    f"WHERE key = 'log_horizon' AND {token} %% %s = 0",
                    (LOG_VERSIONS, LOG_TRIM_EVERY),
                )
                for table in ("edge_log", "use_log", "name_log", "versions"):
                    conn.execute(
                        f"DELETE FROM {table} WHERE tx IN (SELECT tx FROM versions WHERE "
                        f"version <= {committed} - %s) AND {token} %% %s = 0",
                        (LOG_VERSIONS, LOG_TRIM_EVERY),
                    )
            # from here on, rows every writer locks: a few small writes, then the commit
            bumped = conn.execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
            )
            conn.execute(f"INSERT INTO versions (version, tx) VALUES ({version}, {token})")
            for namespace, count in sorted(self._events.items()):
                conn.execute(
                    "INSERT INTO namespace_events (namespace, events) VALUES (%s, %s) "
                    "ON CONFLICT (namespace) DO UPDATE SET events = namespace_events.events "
                    "+ excluded.events",
                    (namespace, count),
                )
            if self._reload:  # what was deleted is not logged: every reader starts again
                conn.execute(f"UPDATE meta SET value = {version} WHERE key = 'log_horizon'")
            conn.execute(f"SELECT pg_notify(%s, {SCHEMA_OID}::text)", (CHANNEL,))
        row = bumped.fetchone()
        self.committing = int(row[0]) if row else 0


def _changes(conn: psycopg.Connection[Any], since: int, origin: Origin) -> Changes:
    """Everything committed after version ``since``, read by ``conn`` in one snapshot; all
    of it if the logs no longer reach back to it, or the tables are not those ``origin``
    read last or are at an earlier version (restored from a backup, or made again)."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    [(oid,)] = conn.execute(f"SELECT {ORIGIN}").fetchall()
    moved = origin.moved(int(oid))
    full = since < meta["log_horizon"] or since == 0 or since > meta["version"] or moved
    after = "(SELECT tx FROM versions WHERE version > %s)"
    if full:
        since = 0
        edges = conn.execute(f"SELECT {_COLUMNS} FROM edges WHERE activation_count > 0")
        uses = conn.execute(
            "SELECT namespace, node, uses, together, first_at, recent FROM node_uses"
        ).fetchall()
        nodes = conn.execute("SELECT id, name FROM nodes").fetchall()
        spaces = conn.execute("SELECT id, name FROM namespaces").fetchall()
    else:
        edges = conn.execute(
            f"SELECT {_E_COLUMNS} FROM edges e JOIN (SELECT DISTINCT namespace, edge FROM "
            f"edge_log WHERE tx IN {after}) AS l ON e.namespace = l.namespace AND e.id = l.edge",
            (since,),
        )
        uses = conn.execute(
            "SELECT u.namespace, u.node, u.uses, u.together, u.first_at, u.recent FROM "
            f"node_uses u JOIN (SELECT DISTINCT namespace, node FROM use_log WHERE tx IN {after})"
            " AS l ON u.namespace = l.namespace AND u.node = l.node",
            (since,),
        ).fetchall()
        nodes = conn.execute(
            "SELECT id, name FROM nodes WHERE id IN (SELECT id FROM name_log WHERE kind = 'n' "
            f"AND tx IN {after})",
            (since,),
        ).fetchall()
        spaces = conn.execute(
            "SELECT id, name FROM namespaces WHERE id IN (SELECT id FROM name_log "
            f"WHERE kind = 's' AND tx IN {after})",
            (since,),
        ).fetchall()
    rows = np.asarray(edges.fetchall(), np.float64).reshape(-1, len(EDGE_COLUMNS))
    removed: list[int] = []
    if not full:
        present = set(rows[:, EDGE_COLUMNS.index("id")].astype(np.int64).tolist())
        logged = conn.execute(f"SELECT DISTINCT edge FROM edge_log WHERE tx IN {after}", (since,))
        removed = [int(edge) for (edge,) in logged if edge not in present]
    use_rows = [
        UseRow(ns, node, n, both, first, tuple(times)) for ns, node, n, both, first, times in uses
    ]
    return Changes(
        version=int(meta["version"]),
        nodes=[(int(i), name) for i, name in nodes],
        namespaces=[(int(i), name) for i, name in spaces],
        rows=rows,
        removed=removed,
        uses=UseColumns.of(use_rows),
        events=[
            (int(ns), int(n))
            for ns, n in conn.execute("SELECT namespace, events FROM namespace_events")
        ],
        recent=_recent(conn, since),
        full=full,
    )


def write_rows(conn: psycopg.Connection[Any], query: str, params: Sequence[Any], rows: int) -> None:
    """Run ``query``, whose result is not read, for ``rows`` rows, in ``conn``'s pipeline:
    queued with the next statement (one round trip for a small write), or on its own beyond
    ``ALONE_ROWS`` (sent, then waited for: nothing is queued behind a long statement)."""
    if rows <= ALONE_ROWS:
        conn.execute(query, params)
        return
    with conn.pipeline():  # nested: sent and waited for when the block ends
        conn.execute(query, params)


def _recent(conn: psycopg.Connection[Any], since: int) -> list[RecentEvent]:
    """The entries of the recent-events log committed after version ``since`` (all of them
    for 0), in commit order (entries whose version the logs no longer map, first)."""
    if since == 0:
        rows = conn.execute(
            "SELECT r.namespace, r.at, r.nodes FROM recent_uses r LEFT JOIN versions v "
            "ON v.tx = r.tx ORDER BY v.version NULLS FIRST, r.id"
        )
    else:
        rows = conn.execute(
            "SELECT r.namespace, r.at, r.nodes FROM recent_uses r JOIN versions v ON v.tx = r.tx "
            "WHERE v.version > %s ORDER BY v.version, r.id",
            (since,),
        )
    return [
        RecentEvent(int(ns), float(at), tuple(int(n) for n in members)) for ns, at, members in rows
    ]


def _stored_snapshot(conn: psycopg.Connection[Any], origin: Origin) -> StoredSnapshot | None:
    """The snapshot ``conn``'s schema holds and everything committed after it, read in the
    transaction ``conn`` is in (one snapshot of the database: nothing committed between
    the two reads is lost); None where there is none, or this role may not read it. The
    parts are read only where they may be trusted: one stamp, the logs reaching back to it."""
    readable = conn.execute(
        f"SELECT has_table_privilege(oid, 'SELECT') {_SNAPSHOT_CLASS}"
    ).fetchone()
    if readable is None or not readable[0]:
        return None
    stamps = conn.execute("SELECT DISTINCT version, max_node, max_namespace FROM snapshot")
    found = [(int(v), int(n), int(s)) for v, n, s in stamps]
    if not found:
        return None
    (version, max_node, max_namespace), whole = snapshot_stamp(found)
    changes = _changes(conn, version, origin)
    parts: dict[str, bytes] = {}
    if not changes.full:  # else stale: every row was read with it already
        changes.recent = _recent(conn, 0)  # the window is rebuilt whole
        if whole:  # bytea read in binary: no hex text to decode (95 MB at 1M edges)
            parts = dict(conn.cursor(binary=True).execute("SELECT part, data FROM snapshot"))
    return StoredSnapshot(version, max_node, max_namespace, parts, changes)


def _snapshot_table(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s schema holds the snapshot table, made and committed now if it was
    missing and the creator's lock (:data:`CREATOR_LOCK`) is free: False if it is not (held
    for a moment only, never waited for)."""
    query = f"SELECT 1 {_SNAPSHOT_CLASS}"
    if conn.execute(query).fetchone():
        return True
    [(locked,)] = conn.execute(f"SELECT pg_try_advisory_xact_lock({CREATOR_LOCK})").fetchall()
    if not locked:
        conn.rollback()
        return False
    if not conn.execute(query).fetchone():  # another process may have made it meanwhile
        conn.execute(SNAPSHOT_TABLE.encode())
    conn.commit()
    return True


def lock_timeout(seconds: float) -> str:
    """The statement that bounds each lock wait of the transaction it runs in to ``seconds``
    (1 ms at least: 0 would mean no bound). Transaction-local, so nothing stays on a backend
    that a pooler hands to others; it takes no snapshot, so a ``SET TRANSACTION`` may follow.

    Examples
    --------
    >>> lock_timeout(0.5), lock_timeout(0.0)
    ('SET LOCAL lock_timeout = 500', 'SET LOCAL lock_timeout = 1')
    """
    return f"SET LOCAL lock_timeout = {max(1, round(seconds * 1000))}"


class AnswerBudget:
    """The time a read gives the server to answer, all told, from :meth:`start` on (the
    moment a connection slot is free, and again once a new connection is open): the check
    of a pooled connection and the read's first statements share it, so their waits do not
    add up.

    Examples
    --------
    >>> budget = AnswerBudget(2.0)
    >>> budget.left()  # not started: the whole of it
    2.0
    >>> budget.start()
    >>> 1.9 < budget.left() <= 2.0
    True
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends: float | None = None

    def start(self) -> None:
        self._ends = time.monotonic() + self.seconds

    def left(self) -> float:
        """The seconds left (0 or less once spent)."""
        return self.seconds if self._ends is None else self._ends - time.monotonic()


class Connections:
    """At most ``size`` connections to one database, kept open between uses.

    Each is checked before it is handed out (an empty query, answered within
    :data:`ANSWER_TIMEOUT_S`); one found dead (a killed backend, a restarted server, a
    stalled network) is closed and replaced at once by a new one, whose opening is bounded
    by ``connect_timeout`` (:data:`CONNECTION_OPTIONS`). A call after killed connections
    thus waits one connect, never a backoff (psycopg_pool's 1, 2, 4, ... s between checks
    kept one write waiting its whole 30 s timeout while the server was up). Each
    transaction on them waits ``lock_timeout_s`` at most for each lock (``SET LOCAL
    lock_timeout`` as it begins: :mod:`._bounded`), so a pooler in transaction mode, which
    runs each transaction on any of its server backends, changes nothing.

    A read passes an :class:`AnswerBudget`: the check of a pooled connection and the read's
    first statements share it (a check that went unanswered leaves none: no new connection
    is tried, the read goes on from memory); a new connection, when no pooled one is left,
    gets its whole ``connect_timeout`` and starts the budget again. A write may wait a
    check and then a whole ``connect_timeout``.
    """

    def __init__(self, url: str, where: str, size: int, lock_timeout_s: float) -> None:
        import psycopg

        self._psycopg = psycopg
        self._url, self.where, self._size = url, where, size
        self._lock_timeout_s = lock_timeout_s
        self._idle: list[psycopg.Connection[Any]] = []
        self._guard = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    @contextmanager
    def connection(
        self, timeout_s: float, budget: AnswerBudget | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A live connection, given back on leaving the block; ``timeout_s`` bounds the
        wait for a free one, ``budget`` (started once one is free) what getting it live
        takes after that (:class:`StorageUnavailableError` past either). A statement the
        server cancels in the block (its ``statement_timeout``) raises
        :func:`statement_cancelled`'s error, which names the setting's value; one that meets
        a table or column missing from the schema (dropped while it was open, or by hand),
        :func:`schema_missing`'s."""
        if not self._slots.acquire(timeout=timeout_s):
            raise StorageUnavailableError(
                f"{self.where!r}: none of its {self._size} connections was free within "
                f"{timeout_s:g} s"
            )
        try:
            if budget is not None:
                budget.start()
            conn = self._take(budget)
            try:
                yield conn
            except self._psycopg.errors.QueryCanceled as exc:  # the server's statement_timeout
                setting = _statement_timeout(conn)
                raise statement_cancelled(self.where, _primary(exc), setting) from None
            except (
                self._psycopg.errors.UndefinedTable,
                self._psycopg.errors.UndefinedColumn,
            ) as exc:
                raise schema_missing(self.where, _primary(exc)) from None
            finally:
                self._give(conn)
        finally:
            self._slots.release()

    def connect(self, **options: Any) -> psycopg.Connection[Any]:
        """A new connection (:data:`CONNECTION_OPTIONS` and ``options``), the lock waits of
        its transactions bounded; :class:`StorageUnavailableError` if it cannot be opened. A
        connection the server terminates while it is being set up (an administrator's or a
        pooler's kill, SQLSTATE 57P01, at most :data:`_OPEN_ATTEMPTS` times in a row) is
        replaced at once: the server answered, so the next one may live."""
        from synapse_retriever.persistence._bounded import BoundedConnection, BoundedCursor

        for attempt in range(1, _OPEN_ATTEMPTS + 1):
            try:
                conn = BoundedConnection.connect(
                    self._url,
                    cursor_factory=BoundedCursor,
                    # no server-side prepared statements: behind a pooler in transaction
                    # mode, one prepared on a backend is missing on the next (PgBouncer
                    # before 1.21, or without max_prepared_statements)
                    prepare_threshold=None,
                    **{**CONNECTION_OPTIONS, **options},
                )
                conn.bound = lock_timeout(self._lock_timeout_s)
                # each transaction begins READ COMMITTED, what the writes' locking is argued
                # for, whatever the server's default (and on any backend a pooler gives it)
                conn.isolation_level = self._psycopg.IsolationLevel.READ_COMMITTED
                return conn
            except self._psycopg.OperationalError as exc:
                killed = getattr(exc, "sqlstate", None) == _ADMIN_SHUTDOWN
                if not killed or attempt == _OPEN_ATTEMPTS:
                    raise StorageUnavailableError(
                        f"{self.where!r} cannot be reached: cannot connect ({str(exc).strip()})"
                    ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self, budget: AnswerBudget | None = None) -> psycopg.Connection[Any]:
        """An idle connection that answers its check, else a new one; the checks within
        ``budget`` where one is given. A new connection gets its whole ``connect_timeout``
        (a healthy server may take seconds to accept one: TLS, a login over LDAP, a busy
        pooler), and once it is open the budget starts again: the server answered."""
        while True:
            left = ANSWER_TIMEOUT_S if budget is None else budget.left()
            if left <= 0:
                assert budget is not None
                raise StorageUnavailableError(
                    f"{self.where!r} cannot be reached: it did not answer within "
                    f"{budget.seconds:g} s"
                )
            with self._guard:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self.connect()
                if budget is not None:
                    budget.start()
                return conn
            if _answers(conn, min(ANSWER_TIMEOUT_S, left)):
                return conn
            conn.close()

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        idle = self._psycopg.pq.TransactionStatus.IDLE
        if not conn.closed and conn.info.transaction_status != idle:
            with contextlib.suppress(Exception):
                conn.rollback()
        with self._guard:
            keep = not self._closed and not conn.closed and not conn.broken
            keep = keep and conn.info.transaction_status == idle
            if keep:
                self._idle.append(conn)
        if not keep:
            conn.close()

    def close(self) -> None:
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _statement_timeout(conn: psycopg.Connection[Any]) -> str | None:
    """``conn``'s ``statement_timeout`` (``SHOW``, after rolling its transaction back);
    None if it cannot be asked (the connection is lost)."""
    try:
        conn.rollback()
        [(setting,)] = conn.execute("SHOW statement_timeout").fetchall()
        conn.rollback()
    except Exception:
        return None
    return str(setting)


def statement_cancelled(where: str, detail: str, setting: str | None) -> StorageUnavailableError:
    """The error of a statement the server cancelled (SQLSTATE 57014): one that ran longer
    than the ``statement_timeout`` of the role, database or connection (``setting``, its
    value, None if unknown), which this library respects (an administrator set it on
    purpose), or one a cancel request ended (``pg_cancel_backend``). Its transaction was
    rolled back. Not a lock conflict, and not retried: the same statement would run as long.

    Examples
    --------
    >>> print(statement_cancelled("db/team", "canceling statement due to statement timeout",
    ...                           "20ms"))
    'db/team': the server cancelled a statement that ran longer than its statement_timeout \
(20ms, set for this role, database or connection): canceling statement due to statement \
timeout; nothing was written. Raise it for the role this library connects as (ALTER ROLE ... \
SET statement_timeout = '5min') or in the URL (?options=-cstatement_timeout%3D300000), or \
write smaller batches
    """
    if setting == "0":  # no timeout: someone cancelled it
        return StorageUnavailableError(
            f"{where!r}: the server cancelled a statement ({detail.strip()}; statement_timeout "
            "is off: a cancel request, pg_cancel_backend); nothing was written"
        )
    shown = "its value: SHOW statement_timeout" if setting is None else setting
    return StorageUnavailableError(
        f"{where!r}: the server cancelled a statement that ran longer than its "
        f"statement_timeout ({shown}, set for this role, database or connection): "
        f"{detail.strip()}; nothing was written. Raise it for the role this library connects "
        "as (ALTER ROLE ... SET statement_timeout = '5min') or in the URL "
        "(?options=-cstatement_timeout%3D300000), or write smaller batches"
    )


def _answers(conn: psycopg.Connection[Any], seconds: float) -> bool:
    """Whether ``conn`` answers an empty query within ``seconds``."""
    if conn.closed or conn.broken:
        return False
    try:
        with _deadline(conn, seconds):
            conn.autocommit = True  # no transaction for the check
            try:
                conn.execute("")
            finally:
                with contextlib.suppress(Exception):
                    conn.autocommit = False
    except Exception:
        return False
    return not conn.closed


class _Deadlines:
    """One daemon thread that runs the actions of the deadlines that come due, for every
    :func:`_deadline` block of the process: a block pays a lock and a heap push, not a
    thread of its own (a timer thread per block cost 0.1 to 0.5 ms: every pooled
    connection's health check and every poll run in such a block)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No deadline and no thread: a new process's state (a forked child has no thread)."""
        self._due = threading.Condition()
        self._heap: list[list[Any]] = []  # [when, order, action or None once cancelled]
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], None]) -> list[Any]:
        """Run ``action`` in ``seconds`` unless :meth:`cancel` comes first."""
        entry = [time.monotonic() + seconds, next(self._order), action]
        with self._due:
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="synapse-deadlines", daemon=True
                )
                self._thread.start()
            self._due.notify()
        return entry

    def cancel(self, entry: list[Any]) -> None:
        with self._due:
            entry[2] = None  # left in the heap, dropped when due

    def _run(self) -> None:
        with self._due:
            while True:
                if not self._heap:
                    self._due.wait()
                    continue
                when, _, action = self._heap[0]
                left = when - time.monotonic()
                if action is not None and left > 0:
                    self._due.wait(left)
                    continue
                heapq.heappop(self._heap)
                if action is not None:
                    self._due.release()  # the action takes its block's lock: not under ours
                    try:
                        action()
                    except Exception:  # the thread serves every other deadline: it goes on
                        logger.exception("a deadline's action failed")
                    finally:
                        self._due.acquire()


_DEADLINES = _Deadlines()
os.register_at_fork(after_in_child=_DEADLINES.reset)


@contextmanager
def _deadline(conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
    """Shut ``conn``'s socket down if the block is still running after ``seconds``.

    A server or network that stopped answering then fails the block at once (psycopg's
    ``OperationalError``: the connection is lost) instead of holding it until the kernel
    gives up; the connection is closed on leaving the block. Neither ``statement_timeout``
    (the server is not answering) nor TCP keepalives (the kernel still acknowledges a
    frozen server's packets, and a proxy's) bound that wait.
    """
    guard = threading.Lock()
    state = {"done": False, "fired": False}

    def expire() -> None:
        with guard:
            if state["done"]:
                return
            state["fired"] = True
            if conn.closed:  # lost or closed within the block: no socket to shut down
                return
            with (
                contextlib.suppress(OSError, ValueError),
                socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock,
            ):
                sock.shutdown(socket.SHUT_RDWR)

    entry = _DEADLINES.arm(seconds, expire)
    try:
        yield
    finally:
        with guard:
            state["done"] = True
        _DEADLINES.cancel(entry)
        if state["fired"]:
            conn.close()


class Commit:
    """Where a write is: :func:`typed_write_errors` tells a lost connection before the
    commit (retried) from one during it (the outcome unknown)."""

    committing = False
    """Set just before ``COMMIT`` is sent."""


@contextmanager
def typed_write_errors(
    where: str,
    timeout_s: float,
    *,
    unknown_commit: str = "an event_id makes a retry exact",
) -> Iterator[Commit]:
    """Raise what a write transaction's block raises as this library's errors.

    A deadlock, a serialization failure, a unique key met by a concurrent writer and a
    connection lost before the commit are :class:`TransientWriteError` (retried by
    :func:`~synapse_retriever.persistence.protocols.retrying`); a role or server that may
    not write is :class:`ReadOnlyStoreError`; a lock waited on longer than ``timeout_s``
    (``lock_timeout``) is :func:`lock_timeout_error`; a statement the server cancelled (its
    ``statement_timeout``) is :func:`statement_cancelled`; a connection lost while committing
    (``commit.committing`` set) is :class:`StorageUnavailableError` (whether it was
    committed is unknown: ``unknown_commit`` says what then); a value too large for
    PostgreSQL, or one it refuses, is :class:`InvalidValueError`; whatever else the server
    refuses (a full disk, say) is :class:`StorageUnavailableError`, not retried.

    Examples
    --------
    >>> import psycopg
    >>> with typed_write_errors("db/team", 0.5):
    ...     raise psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.WriteConflictError: 'db/team': a lock was held by another \
transaction longer than busy_timeout_s (0.5 s): canceling statement due to lock timeout; \
nothing was written
    """
    import psycopg

    errors = psycopg.errors
    commit = Commit()
    try:
        yield commit
    except (errors.DeadlockDetected, errors.SerializationFailure) as exc:
        raise TransientWriteError(str(exc).strip(), conflict=True) from exc
    except (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction) as exc:
        raise ReadOnlyStoreError(f"{where!r} cannot be written: {exc}") from None
    except errors.ProgramLimitExceeded as exc:  # a value too large: a retry cannot help
        raise InvalidValueError(
            f"{where!r}: a value is too large for PostgreSQL "
            f"({exc.diag.message_primary or str(exc).strip()}); nothing was written"
        ) from None
    except errors.LockNotAvailable as exc:  # waited timeout_s (lock_timeout)
        raise lock_timeout_error(where, timeout_s, exc.diag.message_primary or str(exc)) from None
    except errors.QueryCanceled as exc:  # statement_timeout, or a cancel request
        raise statement_cancelled(where, _primary(exc), None) from None
    except errors.UniqueViolation as exc:  # a pair locked blank, deleted by a sweep, re-created
        raise TransientWriteError(str(exc).strip(), conflict=True) from exc
    except psycopg.OperationalError as exc:
        if not _lost(exc):  # the server answered: a disk full, out of memory, ...
            raise StorageUnavailableError(
                f"{where!r}: the server refused the write ({_primary(exc)}); nothing was written"
            ) from exc
        if commit.committing:
            raise StorageUnavailableError(
                f"{where!r}: the connection was lost while committing ({exc}); whether "
                f"the write was committed is unknown ({unknown_commit})"
            ) from exc
        raise TransientWriteError(str(exc).strip(), conflict=False) from exc
    except psycopg.DataError as exc:  # a value the server refuses: a retry cannot help
        raise InvalidValueError(
            f"{where!r}: PostgreSQL refused a value ({_primary(exc)}); nothing was written"
        ) from None
    except psycopg.DatabaseError as exc:  # anything else the server reports
        raise StorageUnavailableError(
            f"{where!r}: the server refused the write ({_primary(exc)}); nothing was written"
        ) from exc


def schema_missing(where: str, detail: str) -> CorruptDatabaseError:
    """The error of a statement that met a table or column of the store's schema missing
    (SQLSTATE 42P01, 42703): dropped by hand, before the store opened or while it was open
    (a schema dropped under it), where SQLite reports a table dropped from its file as
    damage too. Its transaction was rolled back; not retried: the schema stays as it is.

    Examples
    --------
    >>> print(schema_missing("db/team", 'relation "meta" does not exist'))
    'db/team' misses part of a synapse store's schema (relation "meta" does not exist); \
nothing was written: restore a backup, or re-create the store from an export
    """
    return CorruptDatabaseError(
        f"{where!r} misses part of a synapse store's schema ({detail.strip()}); nothing was "
        "written: restore a backup, or re-create the store from an export"
    )


def _primary(exc: Exception) -> str:
    """The server's one-line message of ``exc`` (psycopg's text without the server's)."""
    diag = getattr(exc, "diag", None)
    return (diag.message_primary if diag is not None else None) or str(exc).strip()


def _lost(exc: Exception) -> bool:
    """Whether ``exc`` says the connection is gone (no answer, SQLSTATE class 08, or a
    server shutting the session down), rather than the server refusing a statement."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class Listener:
    """A thread that ``LISTEN``s on ``channel`` with a connection of its own and calls
    ``heard(payload)`` for each notification, and ``heard(None)`` each time it starts
    listening (what was committed while no one listened); it reconnects after a lost
    connection, backing off up to 5 s (readers poll meanwhile: :attr:`listening` is
    False). The store hears every commit on :data:`CHANNEL`; a conversation memory hears
    its user's (:mod:`.conversation.postgres`).

    Each time it starts listening it first sends a probe ``NOTIFY`` from another
    connection. One not heard within :data:`PROBE_S` is taken as a lost connection;
    :data:`PROBE_MISSES` in a row mean the ``LISTEN`` goes to a server backend that does not
    pass notifications on (a pooler in transaction mode hands it to other clients between
    transactions). It then stops for good, says so in the log, and readers poll once per
    refresh interval, as with ``listen=False``.
    """

    def __init__(
        self, connections: Connections, channel: str, heard: Callable[[str | None], None]
    ) -> None:
        """Start listening on a thread of its own. ``channel`` is an identifier of this
        library's (never a caller's value: it is part of the ``LISTEN`` statement)."""
        self._connections, self._channel, self._heard = connections, channel, heard
        self.listening = False
        """Whether commits are being heard right now."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._listen, name=f"synapse listen {connections.where}", daemon=True
        )
        self._thread.start()

    def _listen(self) -> None:
        delay, missed = 0.05, 0
        while not self._stopping.is_set():
            try:
                with self._connections.connect(autocommit=True) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    if not self._hears_itself(conn):
                        missed += 1
                        if missed < PROBE_MISSES:  # a busy server, maybe: as a lost connection
                            raise StorageUnavailableError("the probe NOTIFY was not heard")
                        if not self._stopping.is_set():
                            logger.warning(
                                "%r: a LISTEN hears nothing here (%d probes in a row; a "
                                "pooler in transaction mode?): polling once per refresh "
                                "interval instead",
                                self._connections.where,
                                missed,
                            )
                        return  # not listening: readers poll
                    self.listening, delay, missed = True, 0.05, 0
                    self._heard(None)  # what committed while no one listened
                    while not self._stopping.is_set():
                        for notify in conn.notifies(timeout=LISTEN_WAKE_S):
                            self._heard(notify.payload)
            except Exception as exc:  # whatever stops it, readers poll meanwhile
                if self.listening:
                    logger.warning(
                        "%r: listening stopped (%s); polling until it is back",
                        self._connections.where,
                        exc,
                    )
                self.listening = False
                self._stopping.wait(delay)
                delay = min(2 * delay, 5.0)
        self.listening = False

    def _hears_itself(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether ``conn``, listening, hears a probe ``NOTIFY`` sent from another
        connection within :data:`PROBE_S` (what else it hears meanwhile is passed on)."""
        probe = f"probe {secrets.token_hex(8)}"
        with self._connections.connect(autocommit=True) as other:
            other.execute("SELECT pg_notify(%s, %s)", (self._channel, probe))
        deadline = time.monotonic() + PROBE_S
        while not self._stopping.is_set() and (left := deadline - time.monotonic()) > 0:
            for notify in conn.notifies(timeout=min(left, LISTEN_WAKE_S)):
                if notify.payload == probe:
                    return True
                self._heard(notify.payload)
        return False

    def close(self) -> None:
        """Stop listening (within :data:`LISTEN_WAKE_S`)."""
        self._stopping.set()
        if self._thread is not threading.current_thread():  # a finalizer run by its own GC
            self._thread.join(timeout=2.0)


class PostgresStorage:
    """PostgreSQL backend: a pool of connections to one database, shared by many writers.

    Parameters
    ----------
    url : str
        ``postgresql://user@host:port/database`` (any libpq connection URL; the tables
        live in the connection's current schema). An empty schema becomes a new store; a
        schema holding other tables, or a sequence or type named as one of the store's
        (:func:`name_clashes`), is refused (:class:`NotASynapseDatabaseError`) and left
        untouched.
    read_only : bool
        Never write. Also chosen on its own when the role may not write the tables (a
        read-only role) or the server is a standby; every write then raises
        :class:`ReadOnlyStoreError`.
    pool_size : int
        Connections at most (writes and reads of one store take one each).
    timeout_s : float
        How long to wait for a free connection, and for each lock a write or a load
        waits on (``lock_timeout``); the store passes ``config.operations.busy_timeout_s``.
    create : bool
        Create the store in an empty schema (else :class:`NotASynapseDatabaseError`).
    listen : bool
        Learn of other writers' commits from ``LISTEN``/``NOTIFY`` (a reader then runs
        no SQL until something changed); False polls once per refresh interval instead,
        as a reader behind a pooler in transaction mode must.
    """

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        pool_size: int = 4,
        timeout_s: float = Operations.busy_timeout_s,
        listen: bool = True,
        create: bool = True,
    ) -> None:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - the extra is in the dev requirements
            raise MissingExtraError(
                "PostgreSQL needs the postgres extra: pip install 'synapse-retriever[postgres]'"
            ) from None
        if not is_postgres_url(url):
            raise InvalidValueError(f"not a PostgreSQL URL: {shown(url)}")
        self._psycopg = psycopg
        self._create = check_flag("create", create)
        check_flag("listen", listen)
        self.url, self.path = split_url(url)
        self.read_only = check_flag("read_only", read_only)
        self._timeout_s = timeout_s
        self._pool = Connections(self.url, self.path, pool_size, timeout_s)
        self._changed = threading.Event()
        self._changed.set()
        self._origin = Origin()
        self._unreachable_until = 0.0
        self._listener: Listener | None = None
        try:
            self._open()
        except BaseException:
            self._pool.close()
            raise
        if listen:  # every commit signalled (and a reconnection: what came meanwhile)
            changed = self._changed  # not self: the thread must not keep the storage alive
            ours = {None, "", self._schema}  # another schema's commits are not ours

            def heard(payload: str | None) -> None:
                if payload in ours:
                    changed.set()

            self._listener = Listener(self._pool, CHANNEL, heard)
        # a storage dropped without close() gives its connections and thread back
        self._release = weakref.finalize(self, _release, self._listener, self._pool)
        self._release.atexit = False

    @contextmanager
    def _connection(
        self, timeout_s: float | None = None, budget: AnswerBudget | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (:meth:`Connections.connection`); an unreachable server is a
        :class:`StorageUnavailableError`, a table this role may not read an
        :class:`AccessDeniedError` naming every such table (a write's rights are checked
        when the store opens: it opens read-only). ``timeout_s`` (``busy_timeout_s`` by
        default) bounds the wait for a free connection and for each lock a read meets; a
        lock held longer (``LOCK TABLE``, ``VACUUM FULL``, a schema change) is a
        :class:`StorageUnavailableError` that says so."""
        wait_s = self._timeout_s if timeout_s is None else timeout_s
        try:
            with self._pool.connection(wait_s, budget) as c:
                try:
                    yield c
                except self._psycopg.errors.InsufficientPrivilege as exc:
                    c.rollback()
                    denied = unreadable(c, READS)
                    if not denied:  # a right on something else than a table
                        raise AccessDeniedError(f"{self.path!r}: {_primary(exc)}") from None
                    raise access_denied(c, self.path, denied, "a store") from None
        except self._psycopg.errors.LockNotAvailable as exc:  # the server answered: no outage
            raise StorageUnavailableError(
                f"{self.path!r}: a lock held by another transaction (LOCK TABLE, VACUUM FULL, "
                f"a schema change) was not released within {wait_s:g} s ({_primary(exc)})"
            ) from None
        except self._psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"{self.path!r} cannot be reached: {exc}") from None

    def database(self) -> tuple[str, str, str] | None:
        """Where this store lives, whatever the URL's spelling (a host's other name, a
        pooler): the server (its system identifier, which a physical copy shares, and its
        start time, which it does not), the database and the schema; None where the server
        does not tell this role (a managed server may not)."""
        try:
            with self._connection() as conn:
                [(server, database)] = conn.execute(
                    "SELECT (SELECT system_identifier FROM pg_control_system())::text || ' ' || "
                    "pg_postmaster_start_time()::text, current_database()"
                ).fetchall()
        except (self._psycopg.Error, StorageUnavailableError, AccessDeniedError):
            return None
        return str(server), str(database), self._schema

    def _open(self) -> None:
        with self._connection() as conn:
            check_schema(conn, self.path)
            [(schema,)] = conn.execute(f"SELECT {SCHEMA_OID}::text").fetchall()
            self._schema: str = schema
            found = self._found(conn)
            if found is None:
                if not self._create:
                    raise NotASynapseDatabaseError(
                        f"{self.path!r} holds no synapse store, and none was created there; "
                        "it was left untouched"
                    )
                if self.read_only or _cannot_write(conn):
                    raise NotASynapseDatabaseError(
                        f"{self.path!r} holds no synapse store, and this connection may not "
                        "create one (read-only): there is nothing to read"
                    )
                # one creator at a time: the others wait here, then find the tables
                conn.execute(f"SELECT pg_advisory_xact_lock({CREATOR_LOCK})")
                if self._found(conn) is None:
                    with refused_if_taken(conn, self.path, "a store's"):
                        self._run(conn, SCHEMA)
            elif found < SCHEMA_VERSION:
                self._migrate(conn, found)
            conn.commit()
            self.read_only = self.read_only or _cannot_write(conn)
            conn.rollback()

    def _run(self, conn: psycopg.Connection[Any], scripts: Sequence[str]) -> None:
        """Run ``scripts`` of :data:`SCHEMA` in ``conn``'s transaction."""
        for script in scripts:
            conn.execute(
                script.format(application_id=APPLICATION_ID, schema_version=SCHEMA_VERSION).encode()
            )

    def _migrate(self, conn: psycopg.Connection[Any], version: int) -> None:
        """Bring a store at schema ``version`` to :data:`SCHEMA_VERSION`, one process at a
        time (the creators' lock). Only the tables' owner may: another role, a read-only
        store or a standby server is refused, with nothing changed."""
        errors = self._psycopg.errors
        refused = (
            f"{self.path!r} has schema version {version}, older than this library's "
            f"{SCHEMA_VERSION}: open it once as the role that owns its tables, not read-only, "
            "to upgrade it; nothing was changed"
        )
        if self.read_only:
            conn.rollback()
            raise NotASynapseDatabaseError(refused)
        conn.execute(f"SELECT pg_advisory_xact_lock({CREATOR_LOCK})")
        version = self._found(conn) or version  # another process may have migrated meanwhile
        try:
            self._run(conn, SCHEMA[version:])
        except (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction) as exc:
            conn.rollback()
            raise ReadOnlyStoreError(f"{refused} ({str(exc).strip()})") from None
        except (errors.DuplicateColumn, errors.DuplicateTable, errors.DuplicateObject) as exc:
            conn.rollback()  # a schema version set back by hand
            raise schema_missing(
                self.path, f"{_primary(exc)}: its schema is not the one its version says"
            ) from None

    def _found(self, conn: psycopg.Connection[Any]) -> int | None:
        """The schema version of the store in ``conn``'s schema; None for an empty schema
        (one whose objects, if any, are named unlike the store's);
        :class:`NotASynapseDatabaseError` for one that holds something else."""
        kinds = dict(  # tables, views and the like: what a name could clash with
            conn.execute(
                f"SELECT relname, relkind FROM pg_class WHERE relnamespace = {SCHEMA_OID} "
                "AND relkind IN ('r', 'p', 'v', 'm', 'f')"
            ).fetchall()
        )
        clashes = name_clashes(conn, OBJECTS)  # a sequence, a type, ... named as ours
        if not kinds and not clashes:
            return None
        foreign = {
            name
            for name, kind in kinds.items()
            if (name not in TABLES and not name.startswith(SHARED_PREFIX)) or kind != "r"
        }
        if kinds and ("meta" not in kinds or foreign):
            shown = ", ".join(sorted(foreign)[:5] or sorted(kinds)[:5])
            raise NotASynapseDatabaseError(
                f"{self.path!r} holds tables or views of another application ({shown}); it "
                "was left untouched: give a database or schema of its own"
            )
        if clashes:
            raise NotASynapseDatabaseError(
                f"{self.path!r} holds objects of another application named as a store's "
                f"({', '.join(clashes[:5])}); it was left untouched: give a database or "
                "schema of its own"
            )
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except (self._psycopg.errors.UndefinedColumn, self._psycopg.errors.DatatypeMismatch):
            conn.rollback()
            raise NotASynapseDatabaseError(
                f"{self.path!r} has a meta table of another application; it was left untouched"
            ) from None
        if meta.get("application_id") != APPLICATION_ID:
            raise NotASynapseDatabaseError(
                f"{self.path!r} has a meta table of another application; it was left untouched"
            )
        version = int(meta.get("schema_version", 0))
        if version > SCHEMA_VERSION:
            raise NotASynapseDatabaseError(
                f"{self.path!r} has schema version {version}, newer than this library's "
                f"{SCHEMA_VERSION}: upgrade synapse-retriever"
            )
        return version

    @property
    def listening(self) -> bool:
        """Whether commits are being signalled to this storage right now."""
        return self._listener is not None and self._listener.listening

    def load(self) -> Changes:
        self._changed.clear()
        with self._connection() as conn:  # a table dropped by hand: schema_missing's error
            return snapshot(conn, lambda: _changes(conn, 0, self._origin))

    def poll(self, since: int, max_node: int, max_namespace: int) -> Changes | None:
        if self.listening and not self._changed.is_set():
            return None  # no commit was signalled: nothing to read, no SQL
        if time.monotonic() < self._unreachable_until:
            return None  # the server did not answer a moment ago: recall goes on from memory
        self._changed.clear()
        # a second at most for a free connection; then two, all told, for the server to
        # answer the check of a pooled connection and the version read (a new connection,
        # if one is needed, gets its connect_timeout, and the two seconds start after it)
        budget = AnswerBudget(ANSWER_TIMEOUT_S)
        try:
            with self._connection(POLL_TIMEOUT_S, budget) as conn:
                with _deadline(conn, budget.left()), conn.pipeline():
                    # a lock held on the store (LOCK TABLE, VACUUM FULL) delays a read a
                    # second at most, a server that stopped answering two: then from memory
                    conn.execute(lock_timeout(POLL_TIMEOUT_S))
                    found = conn.execute(f"SELECT value, {ORIGIN} FROM meta WHERE key = 'version'")
                version = found.fetchone()
                conn.rollback()
                same = version is not None and (version[0], version[1]) == (since, self._origin.oid)
                if same and not self._origin.stale:
                    return None
                return snapshot(conn, lambda: _changes(conn, since, self._origin), POLL_TIMEOUT_S)
        except StorageUnavailableError as exc:
            self._changed.set()  # look again once the back-off is over
            self._unreachable_until = time.monotonic() + UNREACHABLE_BACKOFF_S
            logger.warning(
                "%s; recall goes on from memory, and asks again in %.0f s",
                exc,
                UNREACHABLE_BACKOFF_S,
            )
            return None

    schema_version = SCHEMA_VERSION

    @property
    def keeps_snapshots(self) -> bool:
        return not self.read_only

    def read_snapshot(self) -> StoredSnapshot | None:
        """The stored snapshot and what was committed after it, read in one repeatable-read
        snapshot of the database; None if there is none (or this role may not read it)."""
        self._changed.clear()
        with self._connection() as conn:
            return snapshot(conn, lambda: _stored_snapshot(conn, self._origin))

    def write_snapshot(
        self,
        version: int,
        max_node: int,
        max_namespace: int,
        parts: dict[str, bytes | memoryview],
    ) -> bool:
        """Replace the stored snapshot by ``parts``, taken at ``version``, in one
        transaction; whether it was written. It never waits for a lock: it gives up (False)
        when another process is writing a snapshot or creating the table, when a writer
        holds the version row (it is committing), when the version is no longer
        ``version``, and where this role may not write the table. The parts are written
        before the version row is locked, so writers wait for this commit at most."""
        if not self.keeps_snapshots:
            return False
        errors = self._psycopg.errors
        with (
            typed_write_errors(self.path, self._timeout_s),
            self._pool.connection(self._timeout_s) as conn,
        ):
            try:
                if not _snapshot_table(conn):
                    return False
                conn.execute("LOCK TABLE snapshot IN SHARE ROW EXCLUSIVE MODE NOWAIT")
                current = "SELECT value FROM meta WHERE key = 'version'"
                if conn.execute(current).fetchone() != (version,):  # written meanwhile
                    conn.rollback()
                    return False
                conn.execute("DELETE FROM snapshot")
                conn.cursor().executemany(
                    "INSERT INTO snapshot (part, version, max_node, max_namespace, data) "
                    "VALUES (%s, %s, %s, %s, %b)",
                    snapshot_rows(version, max_node, max_namespace, parts),
                )
                # last, the row every writer locks to commit: held for this commit only
                if conn.execute(f"{current} FOR UPDATE NOWAIT").fetchone() != (version,):
                    conn.rollback()
                    return False
                conn.commit()
            except (errors.LockNotAvailable, errors.InsufficientPrivilege):
                conn.rollback()
                return False
            except BaseException:
                if not conn.broken:
                    conn.rollback()
                raise
        return True

    def would_forget(self, limit: float) -> ForgetCounts:
        """What a repair at ``limit`` would remove (edges, node use times, events): where
        this role may write, ``forget_after`` in a transaction rolled back; where it may
        not (or ``read_only=True``), the same counts read in one read-only snapshot."""
        if not self.read_only:
            return rolled_back_forget(self, limit)
        with self._connection() as conn:
            return snapshot(conn, lambda: _ahead_of(conn, limit))

    def event_ids_before(self, before: float) -> int:
        """How many recorded event ids a sweep's ``forget_event_ids(before)`` would delete,
        read in one read-only snapshot."""
        with self._connection() as conn:
            return snapshot(conn, lambda: _event_ids_before(conn, before))

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self.path!r} is open read-only (read_only=True, a role that may not write "
                "its tables, or a standby server): writes are refused"
            )
        with (
            typed_write_errors(self.path, self._timeout_s) as commit,
            self._pool.connection(self._timeout_s) as conn,
        ):
            try:
                # statements whose results are not read wait and go together with the
                # next that is read: a round trip per read, not per statement
                with conn.pipeline():
                    origin = conn.execute(f"SELECT {ORIGIN}")
                    tx = _PostgresTransaction(conn, self._origin)
                    try:
                        yield tx
                        tx.finish()
                    except Exception:  # ids of tables now gone may be why (an interrupt goes on)
                        self._check_origin(origin)
                        raise
                self._check_origin(origin)
                commit.committing = True
                conn.commit()
                tx.version = tx.committing
            except BaseException:
                if not conn.broken:
                    conn.rollback()
                raise
        self._changed.set()  # the mirror may read this write back (another came first)

    def _check_origin(self, origin: psycopg.Cursor[Any]) -> None:
        """:class:`ReplacedTablesError` if ``origin`` (``SELECT {ORIGIN}``, in the write's
        transaction) found another ``meta`` table than this storage's reads: the ids the
        write took from the store's mirror may name other nodes there. The next poll reads
        the tables whole (the store does, then runs the write again): until one has, every
        write is refused so."""
        found: list[Any] = []
        with contextlib.suppress(Exception):  # no answer (the transaction failed first)
            found = origin.fetchall()
        if len(found) == 1 and self._origin.written(int(found[0][0])):
            self._changed.set()
            raise ReplacedTablesError(
                f"{self.path!r}: the store's tables were restored or made again since "
                "this process read them; nothing was written"
            )

    def close(self) -> None:
        self._release()


@contextmanager
def refused_if_taken(conn: psycopg.Connection[Any], where: str, whose: str) -> Iterator[None]:
    """Create ``whose`` objects in the block: one whose name another application took
    meanwhile (after :func:`name_clashes` looked) rolls it all back and raises
    :class:`NotASynapseDatabaseError` naming it, not PostgreSQL's ``DuplicateTable``."""
    import psycopg

    try:
        yield
    except (psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject) as exc:
        conn.rollback()
        raise NotASynapseDatabaseError(
            f"{where!r} holds an object of another application named as {whose} "
            f"({_primary(exc)}); it was left untouched: give a database or schema of its own"
        ) from None


def _release(listener: Listener | None, pool: Connections) -> None:
    """Stop ``listener`` and close ``pool``: a storage's close, or its finalizer's."""
    if listener is not None:
        listener.close()
    pool.close()


def _cannot_write(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s role may not write the store's tables (or, before they exist,
    create them), or the server is a standby."""
    [(present,)] = conn.execute(f"SELECT {in_schema('edges')} IS NOT NULL").fetchall()
    conn.rollback()
    if present:
        return not may_write(conn, WRITES, ("transactions",))
    setting = conn.execute(
        "SELECT current_setting('transaction_read_only') = 'on' "
        "OR NOT has_schema_privilege(current_schema(), 'CREATE')"
    ).fetchone()
    conn.rollback()
    return bool(setting and setting[0])


def in_schema(table: str) -> str:
    """SQL for ``table``'s oid in the connection's schema, NULL if it has none there (not
    where else the ``search_path`` leads). ``table`` is one of this library's names."""
    return f"to_regclass(format('%I.%I', current_schema(), '{table}'))"


def unreadable(conn: psycopg.Connection[Any], tables: Iterable[str]) -> list[str]:
    """The ``tables`` (this library's names) of the connection's schema that its role may
    not read, sorted; a table the schema does not hold is not one of them."""
    names = sorted(tables)
    [allowed] = conn.execute(
        "SELECT " + ", ".join(f"has_table_privilege({in_schema(t)}, 'SELECT')" for t in names)
    ).fetchall()
    conn.rollback()
    return [name for name, ok in zip(names, allowed, strict=True) if ok is False]


def access_denied(
    conn: psycopg.Connection[Any], where: str, tables: Sequence[str], reader: str
) -> AccessDeniedError:
    """The error for a role of ``conn`` that may not read ``tables``, which ``reader`` (a
    store, a conversation memory) reads; the ``GRANT`` that lets it, named in full."""
    [(schema, role)] = conn.execute(
        "SELECT format('%I', current_schema()), format('%I', current_user)"
    ).fetchall()
    conn.rollback()
    listed = ", ".join(f"{schema}.{table}" for table in tables)
    return AccessDeniedError(
        f"{where!r}: role {role} may not read {', '.join(tables)}, which {reader} reads: "
        f"GRANT SELECT ON {listed} TO {role}"
    )


def may_write(
    conn: psycopg.Connection[Any], rights: dict[str, str], sequences: Sequence[str] = ()
) -> bool:
    """Whether ``conn`` may write: not read-only, not a standby, and its role holds
    ``rights`` (table -> privileges, each checked on its own, on the tables of the
    connection's schema) and the use of ``sequences`` there. The names are this library's."""
    checks = [  # one call per right: a list of them asks for any one of them
        f"has_table_privilege({in_schema(table)}, '{right.strip()}')"
        for table, wanted in rights.items()
        for right in wanted.split(",")
    ]
    checks += [f"has_sequence_privilege({in_schema(name)}, 'USAGE')" for name in sequences]
    [(allowed,)] = conn.execute(
        "SELECT current_setting('transaction_read_only') = 'off' AND NOT pg_is_in_recovery() "
        f"AND {' AND '.join(checks)}"
    ).fetchall()
    conn.rollback()
    return bool(allowed)


def _ahead_of(conn: psycopg.Connection[Any], limit: float) -> ForgetCounts:
    """The edges created or reinforced after ``limit``, the node use times after it, and
    the recent-events entries and event ids after it: what ``forget_after`` deletes."""
    [(edges, uses, events)] = conn.execute(
        "SELECT (SELECT count(*) FROM edges WHERE last_reinforced_at > %(t)s "
        "OR created_at > %(t)s), "
        "(SELECT count(*) FROM node_uses, unnest(recent) AS r (at) WHERE r.at > %(t)s), "
        "(SELECT count(*) FROM recent_uses WHERE at > %(t)s) "
        "+ (SELECT count(*) FROM events WHERE at > %(t)s)",
        {"t": limit},
    ).fetchall()
    return ForgetCounts(edges=int(edges), uses=int(uses), events=int(events))


def _event_ids_before(conn: psycopg.Connection[Any], before: float) -> int:
    """The recorded event ids last seen before ``before``: what ``forget_event_ids``
    deletes."""
    [(count,)] = conn.execute("SELECT count(*) FROM events WHERE seen < %s", (before,)).fetchall()
    return int(count)


def snapshot(
    conn: psycopg.Connection[Any], read: Callable[[], _T], lock_timeout_s: float | None = None
) -> _T:
    """``read()`` in one repeatable-read, read-only transaction on ``conn``, waiting
    ``lock_timeout_s`` at most for each lock (the connection's own bound by default)."""
    conn.rollback()
    with conn.pipeline():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if lock_timeout_s is not None:
            conn.execute(lock_timeout(lock_timeout_s))
    try:
        result = read()
    finally:
        with contextlib.suppress(Exception):
            conn.rollback()
    return result
