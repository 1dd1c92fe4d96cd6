"""Fixtures every test folder shares (a plugin: `-p store_backends` in pyproject.toml): the
backends a store can run on.

The PostgreSQL tests run against a real server: ``SYNAPSE_TEST_POSTGRES`` (a libpq URL of
a role that may create databases; ``postgresql://postgres@127.0.0.1:5432/postgres`` by
default). The session creates one throwaway database there, each test a schema of its own
in it, and both are dropped afterwards. A server that does not answer fails the tests
(it is never skipped).
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from synapse_retriever.persistence.sqlite import SQLiteStorage

_T = TypeVar("_T")

POSTGRES = os.environ.get("SYNAPSE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def with_database(url: str, database: str, schema: str | None = None) -> str:
    """``url`` pointed at ``database`` (and, given, at ``schema`` as the search path)."""
    parts = urlsplit(url)
    query = parts.query
    if schema is not None:
        query = "&".join(filter(None, [query, urlencode({"options": f"-csearch_path={schema}"})]))
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", query, ""))


MALFORMED_URLS: list[tuple[str, str]] = [
    ("postgresql://me:secret@[::1", 'looking for matching "…" in IPv6 host address'),
    ("postgres://me:secret@db:port/team", "its port is not a number"),
    # libpq's own parse, which psycopg ran only when it connected: its error quoted the
    # password, in a traceback; no token libpq quotes is shown (it may be a password's)
    ("postgresql://me:secret%ZZ@127.0.0.1/team", 'invalid percent-encoded token: "…"'),
    ("postgresql://me:se%00cret@127.0.0.1/team", 'percent-encoded value: "…"'),
    ("postgresql://me@127.0.0.1/team?password=secret%ZZ", 'token: "…"'),
    ("postgresql://me@127.0.0.1/team?pass%77ord=sec%ZZret", 'token: "…"'),
    ("postgresql://me:secret@127.0.0.1/team?sslmod=require", 'parameter: "…"'),
    ("postgresql://me@127.0.0.1/team?password=top&secret", 'separator "…"'),
    # a password libpq or urllib cut at a "/" or a "?": its pieces were named
    ("postgresql://me:Xy7/secret@127.0.0.1/team", "reads an '@' as part of its host"),
    ("postgresql://me:top@secret%ZZ@127.0.0.1/team", 'token: "…"'),
    ("postgresql://me:top@secret@127.0.0.1/team", "reads an '@' as part of its host"),
    # a third review's: the query's user= counted as the URL's own user and password
    ("postgresql://me:5432/secret@127.0.0.1/team?user=me", "reads an '@' as part of"),
]
"""PostgreSQL URLs refused before a connection, with what the one-line refusal says: none of
them may show the password ("secret")."""


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """The URL of a throwaway database on the test server, dropped after the session."""
    name = f"synapse_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"the PostgreSQL server at {POSTGRES!r} does not answer ({exc}); start it, or set "
            "SYNAPSE_TEST_POSTGRES to another server's URL",
            pytrace=False,
        )
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield with_database(POSTGRES, name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def new_schema(database: str) -> Iterator[str]:
    """A store URL of its own: an empty schema in ``database``, dropped on leaving."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield with_database(database, urlsplit(database).path[1:], schema)
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def postgres_url(postgres_database: str) -> Iterator[str]:
    """A store URL of its own: an empty schema in the session's throwaway database."""
    with new_schema(postgres_database) as url:
        yield url


def _where(request: pytest.FixtureRequest, tmp_path: Path, file: str) -> str:
    if request.param == "sqlite":
        return str(tmp_path / file)
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives, on each backend: an SQLite file, then a PostgreSQL schema."""
    return _where(request, tmp_path, "synapses.db")


@pytest.fixture
def sqlite_storage(tmp_path: Path) -> Iterator[SQLiteStorage]:
    """A new store's storage in the file ``tmp_path / "synapses.db"`` (which another storage
    may open too), closed after the test: for tests of what runs inside a store's write."""
    opened = SQLiteStorage(tmp_path / "synapses.db")
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def conversation_where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a conversation memory lives, on each backend: a new SQLite file, then a new
    PostgreSQL schema (``ConversationMemory(conversation_where, user=...)``)."""
    return _where(request, tmp_path, "chat.db")


@contextlib.contextmanager
def holding_writes(where: str) -> Iterator[None]:
    """Another process's write in progress on the conversation tables at ``where`` while
    the block runs: SQLite's write lock (``BEGIN IMMEDIATE``), or on PostgreSQL a lock
    on ``context_turns`` that a new turn waits for (reads go on)."""
    if where.startswith(("postgresql://", "postgres://")):
        with psycopg.connect(where) as conn:
            conn.execute("LOCK TABLE context_turns IN SHARE MODE")
            yield
            conn.rollback()
        return
    db = sqlite3.connect(where, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("COMMIT")
    finally:
        db.close()


def older_conversation_file(path: Path, version: int) -> Path:
    """An SQLite synapse file at ``path`` whose conversation tables are at schema ``version``
    (the migrations before it), holding one turn of the default user: "An old turn about
    pottery." (embedder ``x``, no vector)."""
    from synapse_retriever.persistence.conversation.sqlite import MIGRATIONS

    SQLiteStorage(path).close()  # stamped as a synapse file
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE TABLE context_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.executescript(";".join(MIGRATIONS[:version]))
        db.execute("INSERT INTO context_meta VALUES ('schema_version', ?)", (str(version),))
        db.execute(
            "INSERT INTO context_turns (session, role, text, at, surprise, repeats, embedder, "
            "embedding) VALUES ('default', 'user', 'An old turn about pottery.', 0, 1, 0, "
            "'x', x'')"
        )
        db.commit()
    finally:
        db.close()
    return path


def stored(where: str, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows ``query`` returns from the database at ``where`` (an SQLite file or a
    PostgreSQL URL), read on a connection of its own; ``query`` is SQL both understand
    (``?`` placeholders are rewritten for PostgreSQL). A statement that returns no rows
    is committed."""
    if where.startswith(("postgresql://", "postgres://")):
        with psycopg.connect(where) as conn:
            cursor = conn.execute(query.replace("?", "%s"), params)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
    db = sqlite3.connect(where)
    try:
        with db:
            return [tuple(row) for row in db.execute(query, params).fetchall()]
    finally:
        db.close()


@pytest.fixture(params=["memory", "file", "postgresql"])
def any_store_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives: in memory, in an SQLite file, in a PostgreSQL schema."""
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return ":memory:" if request.param == "memory" else str(tmp_path / "synapses.db")


def connections_to(url: str) -> int:
    """How many connections others hold to the database at ``url`` (this one left out)."""
    [(count,)] = stored(
        url,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    return int(count)


def ended(
    call: Callable[[], _T], unblock: Callable[[], object], timeout_s: float
) -> _T | Exception:
    """``call()``'s result or the exception it raised, run in a thread that must end within
    ``timeout_s``: one still running fails the test (``unblock()`` frees it first, the lock
    or the network it waits on)."""
    done: list[_T | Exception] = []

    def run() -> None:
        try:
            done.append(call())
        except Exception as exc:
            done.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        unblock()
        thread.join(timeout_s)
        pytest.fail(f"still waiting after {timeout_s} s")
    return done[0]


def tool(found: str | None, what: str) -> str:
    """``found``, the path of a tool ``.ci/run`` installs; without it the test skips, or
    fails under CI (``CI`` set), saying it needs ``what`` (and how to install it)."""
    if found is None:
        message = f"needs {what} (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def dump(url: str, path: os.PathLike[str] | str, *, data_only: bool = False) -> None:
    """``pg_dump`` of the schema ``url``'s search path names (a test's own) to ``path``, in
    the custom format, as an administrator's backup is made (the tables, or their rows)."""
    pg_dump = tool(shutil.which("pg_dump"), "pg_dump (postgresql-client)")
    rows = ["--data-only"] if data_only else []
    schema = url.rsplit("search_path%3D", 1)[1]
    subprocess.run([pg_dump, "-Fc", *rows, "-n", schema, "-f", path, "-d", url], check=True)


def restore(url: str, path: os.PathLike[str] | str, *, data_only: bool = False) -> None:
    """``pg_restore`` of :func:`dump`'s ``path`` into ``url``'s database."""
    pg_restore = tool(shutil.which("pg_restore"), "pg_restore (postgresql-client)")
    rows = ["--data-only"] if data_only else []
    subprocess.run([pg_restore, *rows, "-d", url, path], check=True)


class TcpProxy(abc.ABC):
    """A TCP proxy on 127.0.0.1 to the test server at ``url`` (its own ``url`` leads
    through it): each connection accepted is handed to :meth:`serve`, which a test's proxy
    writes (what it forwards, holds back or cuts). Set a subclass's own state before
    calling ``__init__``: connections are accepted from then on."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
        self.closed = False
        self.sockets: list[socket.socket] = []
        """Every connection's sockets, the client's and the server's (not the listener)."""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def upstream(self) -> socket.socket:
        """A connection to the server, closed with the proxy."""
        sock = socket.create_connection(self.target)
        self.sockets.append(sock)
        return sock

    @abc.abstractmethod
    def serve(self, client: socket.socket) -> None:
        """Forward (or hold back, or cut) what passes between ``client`` and the server."""

    def close(self) -> None:
        self.closed = True
        for sock in (self.listener, *self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
