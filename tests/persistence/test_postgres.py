"""PostgreSQL: a team's shared store against a real server (see store_backends.py for which).

Concurrent writers lose nothing and never deadlock; a killed backend leaves no partial
event; other writers' commits reach a reader through LISTEN/NOTIFY or polling; a database
of another application, a newer schema and a role that may not write are refused
plainly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from store_backends import (
    MALFORMED_URLS,
    POSTGRES,
    TcpProxy,
    connections_to,
    dump,
    ended,
    new_schema,
    restore,
    with_database,
)

from synapse_retriever import (
    AccessDeniedError,
    CoActivation,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    Operations,
    ReadOnlyStoreError,
    RepairReport,
    StorageUnavailableError,
    SynapseConfig,
    SynapseStore,
    WriteConflictError,
)
from synapse_retriever.cli import main
from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.mirror import mirror as mirror_module
from synapse_retriever.mirror.snapshot import encode
from synapse_retriever.persistence import postgres
from synapse_retriever.persistence.conversation import postgres as conversation_postgres
from synapse_retriever.persistence.conversation.postgres import PostgresConversationStorage
from synapse_retriever.persistence.postgres import PostgresStorage
from synapse_retriever.persistence.rows import EventRecord

HANG_S = 20.0
"""A call still running this long after it was blocked waits without bound."""
DAY = 86_400.0
NODES = [f"src/module_{i}.py" for i in range(24)]
PROCESSES, EVENTS = 8, 125  # 1,000 contended transactions over a few shared nodes


def _events(seed: int, count: int) -> list[list[str]]:
    """``count`` events of 2 to 5 nodes drawn from a small, shared set (heavy overlap)."""
    rng = random.Random(seed)
    return [rng.sample(NODES, rng.randint(2, 5)) for _ in range(count)]


def _write(url: str, seed: int, batch: int, start: Any) -> None:
    """One writer process: its events one by one (``batch`` 1) or in batches."""
    start.wait()
    with SynapseStore(url) as store:
        events = _events(seed, EVENTS)
        if batch == 1:
            for nodes in events:
                store.reinforce(nodes, namespace="shared")
        else:
            for at in range(0, len(events), batch):
                store.reinforce_many(
                    [CoActivation(nodes, namespace="shared") for nodes in events[at : at + batch]]
                )


@pytest.mark.parametrize("batch", [1, 50])
def test_concurrent_writers_lose_no_update(postgres_url: str, batch: int) -> None:
    SynapseStore(postgres_url).close()  # the schema, before the race
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    writers = [
        context.Process(target=_write, args=(postgres_url, seed, batch, start))
        for seed in range(PROCESSES)
    ]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(timeout=300)
    assert [writer.exitcode for writer in writers] == [0] * PROCESSES
    expected: Counter[tuple[str, str]] = Counter()
    used: Counter[str] = Counter()
    for seed in range(PROCESSES):
        for nodes in _events(seed, EVENTS):
            expected.update(itertools.combinations(sorted(nodes), 2))
            used.update(nodes)
    with SynapseStore(postgres_url) as store:
        counts = {
            (a, b): data["count"]
            for a, b, data in store.graph(at=time.time(), namespaces="shared").edges(data=True)
        }
        assert {tuple(sorted(pair)): n for pair, n in counts.items()} == dict(expected)
    with psycopg.connect(postgres_url) as conn:
        uses = dict(
            conn.execute("SELECT n.name, u.uses FROM node_uses u JOIN nodes n ON n.id = u.node")
        )
        events = conn.execute("SELECT events FROM namespace_events").fetchone()
        versions = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    assert uses == dict(used)
    assert events == (PROCESSES * EVENTS,)
    assert versions is not None and versions[0] >= PROCESSES * EVENTS // batch


def test_two_first_uses_of_one_node_at_once_both_count(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SynapseStore(postgres_url) as setup:  # the names exist: no name insert serialises
        setup.reinforce(["n", "a", "b"], namespace="personal", at=0)
        setup.reinforce(["x", "y"], namespace="shared", at=0)
    original = postgres._PostgresTransaction.uses_of

    def slow_for_the_first(self: Any, keys: Any) -> Any:
        rows = original(self, keys)
        if threading.current_thread().name == "first":
            time.sleep(0.5)  # the second writer runs its whole event meanwhile, if it can
        return rows

    monkeypatch.setattr(postgres._PostgresTransaction, "uses_of", slow_for_the_first)
    stores = [SynapseStore(postgres_url), SynapseStore(postgres_url)]
    threads = [
        threading.Thread(
            target=store.reinforce, args=(["n", other],), kwargs={"namespace": "shared", "at": 1},
            name=name,
        )
        for store, other, name in zip(stores, ["a", "b"], ["first", "second"], strict=True)
    ]  # fmt: skip
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        uses = conn.execute(
            "SELECT u.uses, u.together, cardinality(u.recent) FROM node_uses u "
            "JOIN nodes n ON n.id = u.node JOIN namespaces s ON s.id = u.namespace "
            "WHERE n.name = 'n' AND s.name = 'shared'"
        ).fetchone()
    assert uses == (2, 2, 2)


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_backend_killed_mid_transaction_leaves_no_partial_event_and_is_retried(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SynapseStore(postgres_url)
    store.reinforce(["a", "b"], at=0)
    killed: list[int] = []
    original = postgres._PostgresTransaction.uses_of

    def uses_of_then_die(self: Any, keys: Any) -> Any:
        rows = original(self, keys)  # the edges are written by now, uncommitted
        if not killed:
            pid = self._conn.info.backend_pid
            _terminate(postgres_url, pid)
            killed.append(pid)
        return rows

    monkeypatch.setattr(postgres._PostgresTransaction, "uses_of", uses_of_then_die)
    assert store.reinforce(["a", "b", "c"], at=DAY) == 3  # retried on a new connection
    assert killed
    edge = store.edge("a", "b")
    assert edge is not None and edge.activation_count == 2  # once, not twice
    with SynapseStore(postgres_url) as other:
        again = other.edge("a", "b")
        assert again is not None and again.activation_count == 2
        assert other.edge("a", "c") is not None
    store.close()


def test_conflicts_are_retried_then_raised_typed_and_nothing_is_written(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[int] = []
    original = postgres._PostgresTransaction.lock_edges

    def deadlocked(self: Any, keys: Any) -> Any:
        attempts.append(1)
        if len(attempts) <= failures:
            raise psycopg.errors.DeadlockDetected("deadlock detected (as the server says it)")
        return original(self, keys)

    monkeypatch.setattr(postgres._PostgresTransaction, "lock_edges", deadlocked)
    with SynapseStore(postgres_url, config=SynapseConfig.actr(write_retries=2)) as store:
        failures = 2  # the third attempt succeeds
        assert store.reinforce(["a", "b"], at=0) == 1
        assert len(attempts) == 3
        attempts.clear()
        failures = 3  # one more than the retries
        with pytest.raises(WriteConflictError, match=r"failed 3 times.*deadlock"):
            store.reinforce(["a", "c"], at=0)
        assert len(attempts) == 3
    with SynapseStore(postgres_url) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 1
        assert again.edge("a", "c") is None


def test_the_store_reconnects_after_its_connections_are_killed(postgres_url: str) -> None:
    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            database = admin.info.dbname
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )
        assert store.reinforce(["a", "b"], at=DAY) == 1
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 2


class PrivateServer:
    """A PostgreSQL server of this test module's own, in a temporary folder, that a test
    may restart (the shared server is never touched)."""

    def __init__(self, folder: Path) -> None:
        self.bin = Path(_run(["pg_config", "--bindir"]).strip())
        self.data, self.port = folder / "data", _free_port()
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_owner:
            shutil.chown(folder, "postgres")
        _run([*self.as_owner, str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
              "-U", "postgres", "--no-sync", "-E", "UTF8"])  # fmt: skip
        self.options = f"-p {self.port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.pg_ctl("start")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *command: str) -> None:
        _run([*self.as_owner, str(self.bin / "pg_ctl"), "-D", str(self.data), "-o",
              self.options, "-w", "-l", str(self.data / "server.log"), *command])  # fmt: skip

    def restart(self) -> None:
        self.pg_ctl("restart", "-m", "fast")


def _run(command: list[str]) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def private_server() -> Iterator[PrivateServer]:
    folder = Path(tempfile.mkdtemp(prefix="synapse-postgres-"))  # the server's user reaches it
    try:
        server = PrivateServer(folder)
        try:
            yield server
        finally:
            server.pg_ctl("stop", "-m", "immediate")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_server_restart_is_survived(private_server: PrivateServer) -> None:
    url = private_server.url
    with SynapseStore(url) as store:
        store.reinforce(["a", "b"], at=0)
        private_server.restart()
        assert store.reinforce(["a", "b"], at=DAY) == 1
        assert [h.id for h in store.recall([("a", 1.0), ("x", 0.5)], at=DAY)] == ["a", "b"]
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 2


def test_a_stopped_server_leaves_recall_working_and_writes_refused_typed(
    private_server: PrivateServer,
) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0, busy_timeout_s=2.0, write_retries=1)
    with SynapseStore(private_server.url, config=config) as store:
        store.reinforce(["p", "q"], at=0)
        private_server.pg_ctl("stop", "-m", "fast")
        try:
            for _ in range(3):  # from memory; the first read notices, the others back off
                assert [h.id for h in store.recall([("p", 1.0), ("x", 0.5)], at=0)] == ["p", "q"]
            with pytest.raises(StorageUnavailableError, match="cannot be reached"):
                store.reinforce(["p", "r"], at=0)
        finally:
            private_server.pg_ctl("start")
        deadline = time.monotonic() + 60
        while True:  # back: writes go through again, once the pool has reconnected
            try:
                assert store.reinforce(["p", "r"], at=0) == 1
                break
            except StorageUnavailableError:
                assert time.monotonic() < deadline, "the store never reconnected"
                time.sleep(0.2)
        assert store.edge("p", "q") is not None and store.edge("p", "r") is not None


def test_another_writers_commit_reaches_a_reader_by_notification(postgres_url: str) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    with SynapseStore(postgres_url, config=config) as reader, SynapseStore(postgres_url) as writer:
        storage = reader._storage
        assert isinstance(storage, PostgresStorage)
        _wait(lambda: storage.listening)
        reader.edge("a", "b")  # caught up: nothing signalled since
        _wait(lambda: storage.poll(reader._mirror.version, 0, 0) is None)
        assert not storage._changed.is_set()  # a read now runs no SQL
        writer.reinforce(["a", "b"], namespace="shared", at=0)
        _wait(lambda: reader.edge("a", "b", namespace="shared") is not None)
        edge = reader.edge("a", "b", namespace="shared")
        assert edge is not None and edge.activation_count == 1


def test_a_probe_not_heard_once_is_tried_again_and_the_store_listens(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one probe missed (a server busy for 2 s) stopped the listener for the process's life
    hears = postgres.Listener._hears_itself
    missed: list[bool] = []

    def first_missed(listener: postgres.Listener, conn: Any) -> bool:
        if not missed:
            missed.append(True)
            return False
        return hears(listener, conn)

    monkeypatch.setattr(postgres.Listener, "_hears_itself", first_missed)
    with SynapseStore(postgres_url) as store:
        storage = store._storage
        assert isinstance(storage, PostgresStorage)
        _wait(lambda: storage.listening)
    assert missed == [True]


def test_without_notifications_a_reader_polls(postgres_url: str) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(postgres_url, listen=False)
    with SynapseStore(storage=storage, config=config) as reader, SynapseStore(postgres_url) as w:
        assert not storage.listening
        w.reinforce(["a", "b"], at=0)
        w.reinforce(["b", "c"], at=0)
        assert reader.edge("b", "c") is not None  # the next read polls
        w.decay(at=200 * DAY, force=True)
        assert reader.edge("b", "c") is None  # deletions travel too


@pytest.mark.parametrize("table", ["recent_uses", "node_uses", "versions"])
def test_a_schema_missing_a_table_is_refused_as_damaged(postgres_url: str, table: str) -> None:
    # a table dropped by hand gave a raw psycopg UndefinedTable at open

    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
    with pytest.raises(CorruptDatabaseError, match="misses part of a synapse store's schema"):
        SynapseStore(postgres_url)


def test_a_schema_dropped_under_an_open_store_is_damage_not_a_raw_error(
    postgres_url: str,
) -> None:
    # a recall then raised psycopg's UndefinedTable, and a write said the server refused it
    from synapse_retriever import CorruptDatabaseError

    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(postgres_url, listen=False)  # each read looks for changes
    with SynapseStore(storage=storage, config=config) as store:
        store.reinforce(["a", "b"], at=0)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            [(schema,)] = conn.execute("SELECT current_schema()").fetchall()
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        missing = "misses part of a synapse store's schema"
        with pytest.raises(CorruptDatabaseError, match=f'{missing} \\(relation "meta"'):
            store.recall([("a", 0.9), ("c", 0.5)], at=DAY)
        with pytest.raises(CorruptDatabaseError, match=missing):
            store.reinforce(["a", "c"], at=DAY)
        assert "c" not in store._mirror.graph.index  # nothing learned, in memory either
    with psycopg.connect(postgres_url) as conn:
        made = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    assert made == [(0,)]  # nothing made again in the emptied schema


@pytest.mark.parametrize("flag", ["read_only", "listen", "create"])
def test_a_flag_given_as_a_word_is_refused_before_a_connection(
    postgres_url: str, flag: str
) -> None:
    with pytest.raises(InvalidTypeError, match=f"{flag} must be a bool, got str 'no'"):
        PostgresStorage(postgres_url, **{flag: "no"})
    with pytest.raises(InvalidTypeError, match="listen must be a bool, got str 'no'"):
        PostgresConversationStorage(postgres_url, user="alice", listen="no")  # type: ignore[arg-type]


def test_trimmed_logs_send_a_late_reader_back_to_everything(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "LOG_VERSIONS", 4)
    monkeypatch.setattr(postgres, "LOG_TRIM_EVERY", 2)
    monkeypatch.setattr(postgres, "TRIM_RECENT_EVERY", 2)
    config = SynapseConfig.actr(refresh_interval_s=0.0, recent_events=3)
    storage = PostgresStorage(postgres_url, listen=False)
    with (
        SynapseStore(storage=storage, config=config) as late,
        SynapseStore(postgres_url, config=config) as writer,
    ):
        late.edge("a", "b")
        for n in range(30):
            writer.reinforce(["a", f"n{n % 7}"], at=n * 60.0)
        writer.decay(at=30 * DAY, force=True)  # deletions, then more writes
        writer.reinforce(["a", "b"], at=31 * DAY)
        changes = storage.poll(1, 0, 0)  # version 1 is long out of the logs
        assert changes is not None and changes.full
        fresh = SynapseStore(postgres_url, config=config)
        for store in (late, writer):
            assert sorted(store.graph(at=31 * DAY).edges(data="count")) == sorted(
                fresh.graph(at=31 * DAY).edges(data="count")
            )
            assert store.recall(HITS, at=31 * DAY) == fresh.recall(HITS, at=31 * DAY)
        fresh.close()
    with psycopg.connect(postgres_url) as conn:
        logged = conn.execute("SELECT count(*) FROM versions").fetchone()
        recent = conn.execute("SELECT count(*) FROM recent_uses").fetchone()
    assert logged is not None and logged[0] <= 4 + 2 + 1  # the trims keep the logs bounded
    assert recent is not None and recent[0] <= 2 * 3 + 2


HITS = [("a", 0.9), ("x", 0.5), ("y", 0.4), ("z", 0.3)]


def _wait(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("opener", [SynapseStore, PostgresConversationStorage])
def test_a_schema_of_another_application_is_refused_and_untouched(
    postgres_url: str, opener: Callable[[str], object]
) -> None:
    # a store and a conversation memory refuse it alike
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(NotASynapseDatabaseError, match=r"another application.*invoices"):
        opener(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        assert [row[0] for row in tables] == ["invoices"]


def _relations(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND relkind IN ('r', 'v', 'm') ORDER BY 1"
        )
        return [(name, kind) for name, kind in rows]


@pytest.mark.parametrize(
    "objects",
    [
        "CREATE VIEW meta AS SELECT 'schema_version'::text AS key, 1 AS value",
        "CREATE TABLE meta (name text, value int); CREATE VIEW edges AS SELECT 1 AS id",
        "CREATE MATERIALIZED VIEW edges AS SELECT 1 AS id",
        "CREATE VIEW report AS SELECT 1 AS id",
        "CREATE TABLE meta (name text, value int)",
        "CREATE VIEW context_users AS SELECT 1 AS id",
    ],
    ids=[
        "meta view",
        "edges view",
        "edges materialized",
        "a view only",
        "foreign meta",
        "ctx view",
    ],
)
@pytest.mark.parametrize("opener", [SynapseStore, PostgresConversationStorage])
def test_views_and_a_foreign_meta_are_another_applications_and_left_untouched(
    postgres_url: str, opener: Callable[[str], object], objects: str
) -> None:
    # raw DuplicateTable / UndefinedColumn / UndefinedTable, or a store made beside a view
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(objects)
    before = _relations(postgres_url)
    with pytest.raises(NotASynapseDatabaseError, match=r"another application|does not know"):
        opener(postgres_url)
    assert _relations(postgres_url) == before


def _objects(url: str) -> list[tuple[str, str]]:
    """Every relation (with its kind) and every type (``T``) of ``url``'s schema."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, relkind::text FROM pg_class WHERE relnamespace = "
            "current_schema()::regnamespace UNION ALL SELECT typname, 'T' FROM pg_type "
            "WHERE typnamespace = current_schema()::regnamespace ORDER BY 1, 2"
        )
        return [(name, kind) for name, kind in rows]


@pytest.mark.parametrize(
    ("opener", "objects", "named"),
    [
        *[
            (opener, objects, named)
            for opener in (SynapseStore, PostgresConversationStorage)
            for objects, named in [
                ("CREATE SEQUENCE transactions", "sequence transactions"),
                ("CREATE TYPE nodes AS (x int)", "composite type nodes"),
                ("CREATE TYPE edges AS ENUM ('a')", "type edges"),
                ("CREATE DOMAIN meta AS int", "type meta"),
                ("CREATE SEQUENCE versions_by_tx", "sequence versions_by_tx"),
            ]
        ],
        (PostgresConversationStorage, "CREATE TYPE context_users AS (x int)", "context_users"),
        (PostgresConversationStorage, "CREATE DOMAIN context_marks AS int", "type context_marks"),
    ],
)
def test_a_sequence_or_type_named_as_ours_is_another_applications_and_left_untouched(
    postgres_url: str, opener: Callable[[str], object], objects: str, named: str
) -> None:
    # no table, so the schema was taken for empty: a raw DuplicateTable or DuplicateObject,
    # and a memory made the store's 12 tables there before its own failed
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(objects)
    before = _objects(postgres_url)
    with pytest.raises(NotASynapseDatabaseError, match=rf"another application.*{named}\)"):
        opener(postgres_url)
    assert _objects(postgres_url) == before


def test_a_name_taken_between_the_look_and_the_create_is_refused_typed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # another application creating its sequence, or its type, after the schema was looked at
    monkeypatch.setattr(postgres, "name_clashes", lambda conn, objects: [], raising=False)
    monkeypatch.setattr(
        conversation_postgres, "name_clashes", lambda conn, objects: [], raising=False
    )
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE transactions")
    before = _objects(postgres_url)
    with pytest.raises(NotASynapseDatabaseError, match=r"another application.*transactions"):
        SynapseStore(postgres_url)
    assert _objects(postgres_url) == before
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP SEQUENCE transactions")
    SynapseStore(postgres_url).close()  # a store: the memory's tables are made after it
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TYPE context_edges AS ENUM ('a')")
    before = _objects(postgres_url)
    with pytest.raises(NotASynapseDatabaseError, match=r"another application.*context_edges"):
        PostgresConversationStorage(postgres_url)
    assert _objects(postgres_url) == before


def test_a_memory_refuses_a_store_schema_with_an_unknown_context_table_creating_nothing(
    postgres_url: str,
) -> None:
    # it created its six tables, then said it had left the schema untouched
    SynapseStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE context_notes (id int)")
    before = _relations(postgres_url)
    with pytest.raises(NotASynapseDatabaseError, match=r"does not know \(context_notes\)"):
        PostgresConversationStorage(postgres_url, user="a")
    assert _relations(postgres_url) == before


@pytest.fixture
def snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store keeps a snapshot of its mirror, however small (from 100,000 edges else)."""
    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 0)


def _snapshotted(url: str) -> None:
    """A store with a snapshot at ``url``, and a write after it."""
    with SynapseStore(url) as store:
        store.reinforce(["a", "b", "c"], at=0)
        store.reinforce(["a", "x"], at=DAY, namespace="shared")
    with SynapseStore(url) as store:
        assert store._mirror.snapshot_version is not None
        store.reinforce(["a", "y"], at=2 * DAY)


def _edges(store: SynapseStore) -> list[Any]:
    return sorted(store.graph(at=3 * DAY).edges(keys=True, data=True))


def test_a_snapshot_and_the_changes_after_it_are_read_in_one_snapshot(
    postgres_url: str, snapshots: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _snapshotted(postgres_url)
    with SynapseStore(postgres_url) as rows:  # the state the first snapshot holds, and after
        expected = _edges(rows)
        taken = rows._mirror.snapshot_version
    original = postgres._changes
    meanwhile: list[int] = []

    def another_writer_first(conn: Any, since: int, origin: postgres.Origin) -> Any:
        if not meanwhile:  # another process writes, and replaces the snapshot, mid-read
            meanwhile.append(0)
            with monkeypatch.context() as patch:
                patch.setattr(postgres, "_changes", original)
                patch.setattr(mirror_module, "SNAPSHOT_STALE_VERSIONS", 1)
                with SynapseStore(postgres_url) as other:
                    other.reinforce(["a", "z"], at=3 * DAY)
                    meanwhile[0] = other._mirror.version
        return original(conn, since, origin)

    monkeypatch.setattr(postgres, "_changes", another_writer_first)
    with SynapseStore(postgres_url, config=SynapseConfig.actr(refresh_interval_s=3600)) as store:
        # the parts, their stamp and the changes as they were when the read began
        assert store._mirror.snapshot_version == taken
        assert store._mirror.version < meanwhile[0]
        assert _edges(store) == expected
    with SynapseStore(postgres_url) as store:  # the newer one, written meanwhile
        assert store._mirror.snapshot_version == meanwhile[0]
        assert store.edge("a", "z") is not None


def test_another_snapshot_writer_is_not_waited_for(postgres_url: str, snapshots: None) -> None:
    _snapshotted(postgres_url)
    storage = PostgresStorage(postgres_url, timeout_s=600.0)
    store = SynapseStore(storage=storage)
    mirror = store._mirror
    parts = encode(mirror.graph, mirror.uses, mirror.version, schema=storage.schema_version)
    stamp = (mirror.version, mirror.graph.max_node, mirror.graph.max_namespace)
    with psycopg.connect(postgres_url) as other:
        other.execute("LOCK TABLE snapshot IN SHARE ROW EXCLUSIVE MODE")  # writing one
        written = ended(lambda: storage.write_snapshot(*stamp, parts), other.rollback, HANG_S)
    assert written is False
    assert storage.write_snapshot(*stamp, parts)  # the lock released
    store.close()


def test_a_read_only_role_opens_from_a_snapshot_and_writes_none(
    postgres_url: str, reader_url: str, snapshots: None
) -> None:
    PostgresStorage(postgres_url).close()  # the store's tables, and no snapshot
    _grant_select(postgres_url, reader_url)  # before the snapshot's table exists
    _snapshotted(postgres_url)
    with SynapseStore(reader_url) as reader:  # it may not read that table: from the rows
        assert reader.read_only and reader._mirror.snapshot_version is None
        expected = _edges(reader)
    _grant_select(postgres_url, reader_url)
    with SynapseStore(reader_url) as reader:
        assert reader._mirror.snapshot_version is not None
        assert _edges(reader) == expected
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE snapshot SET data = '\\x00' WHERE part = 'edge.a'")  # damaged
    with SynapseStore(reader_url) as reader:
        assert reader._mirror.snapshot_version is None
        assert _edges(reader) == expected
    with SynapseStore(postgres_url) as store:  # none was written by the reader
        assert store._mirror.snapshot_version is None


def test_a_snapshot_beside_a_conversation_memorys_tables(
    postgres_url: str, snapshots: None
) -> None:
    PostgresConversationStorage(postgres_url).close()  # its context_* tables, first
    _snapshotted(postgres_url)
    with SynapseStore(postgres_url) as store:
        assert store._mirror.snapshot_version is not None
        assert store.edge("a", "y") is not None
    PostgresConversationStorage(postgres_url).close()  # and it opens beside the snapshot


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    SynapseStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'")
    with pytest.raises(NotASynapseDatabaseError, match="schema version 99, newer"):
        SynapseStore(postgres_url)


def test_an_unreachable_server_is_a_typed_error_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="cannot connect"):
        SynapseStore("postgresql://nobody@127.0.0.1:1/none")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("url", "problem"),
    MALFORMED_URLS,
)
def test_a_malformed_url_is_a_typed_error_without_its_password(url: str, problem: str) -> None:
    openings = (
        lambda: PostgresStorage(url),
        lambda: SynapseStore(url),
        lambda: ConversationMemory(url, user="u"),
    )
    for opening in openings:
        with pytest.raises(InvalidValueError, match="is not a valid PostgreSQL URL") as caught:
            opening()
        assert caught.value.__context__ is None  # libpq's error, quoting the password
        assert problem in str(caught.value) and "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "where"),
    [
        # urllib split these at the "?", "#" or "/" in the password: its first piece was
        # shown as the host or the port, in a message or the store's name
        ("postgresql://me:Sx?cret@127.0.0.1/team", "127.0.0.1/team"),
        ("postgresql://postgres:4711?s3cret@127.0.0.1/team", "127.0.0.1/team"),
        ("postgresql://me:a#secret@db:5433/team", "db:5433/team"),
        ("postgresql://h1:5432,h2:5433/team", "h1,h2:5432,5433/team"),  # urllib refused it
        ("postgresql:///team?host=/tmp", "/tmp/team"),
        # a second review's: refused, or a password's piece named
        ("postgresql://h1,h2/team", "h1,h2/team"),  # libpq's port ","
        ("postgresql://h/team%40prod", "h/team@prod"),
        ("postgresql:///team?host=/tmp/a%40b", "/tmp/a@b/team"),
        ("postgresql://me:pw@/team?host=/tmp/a%40b", "/tmp/a@b/team"),
        ("postgresql://me:5432/SECRETX?application_name=q@h/db", "postgresql://…"),
    ],
)
def test_a_store_is_named_by_the_host_and_database_libpq_reads(url: str, where: str) -> None:
    assert postgres.split_url(url) == (url, where)


@pytest.fixture
def reader_url(postgres_url: str) -> Iterator[str]:
    """``postgres_url`` as a role that may only read (created, then dropped)."""
    role = f"reader_{random.randrange(1 << 30)}"
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(schema), sql.Identifier(role)
            )
        )
    url = postgres_url.replace("postgres@", f"{role}@", 1)
    yield url
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_read_only_role_recalls_and_its_writes_raise(postgres_url: str, reader_url: str) -> None:
    with pytest.raises(NotASynapseDatabaseError, match="holds no synapse store"):
        SynapseStore(reader_url)  # nothing to read yet, and it may not create it
    with SynapseStore(postgres_url) as writer:
        writer.reinforce(["a", "b"], at=0)
    role = reader_url.split("//", 1)[1].split("@", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                sql.Identifier(postgres_url.rsplit("search_path%3D", 1)[1]), sql.Identifier(role)
            )
        )
    with SynapseStore(reader_url) as reader:
        assert [h.id for h in reader.recall([("a", 1.0), ("x", 0.5)], at=0)] == ["a", "b"]
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            reader.reinforce(["a", "b"], at=DAY)
        with pytest.raises(ReadOnlyStoreError):
            reader.decay(at=0)
    with SynapseStore(postgres_url, read_only=True) as chosen, pytest.raises(ReadOnlyStoreError):
        chosen.reinforce(["a", "c"], at=DAY)
    with SynapseStore(postgres_url) as writer:
        edge = writer.edge("a", "b")
        assert edge is not None and edge.activation_count == 1 and writer.edge("a", "c") is None


@pytest.mark.parametrize(
    ("missing", "writes"),
    [
        ("INSERT ON {}.edges", False),
        ("DELETE ON {}.edges", False),
        ("UPDATE ON {}.meta", False),
        ("INSERT ON {}.nodes", False),
        ("INSERT ON {}.versions", False),
        ("DELETE ON {}.edge_log", False),
        ("USAGE ON SEQUENCE {}.transactions", False),
        ("DELETE ON {}.events", False),  # a repair's, a dry run's where it may write
        ("UPDATE ON {}.events", False),  # a replay's: its id seen again
        ("USAGE ON SEQUENCE {}.edges_id_seq", True),  # an identity column needs no right
    ],
)
def test_a_role_missing_one_right_of_a_writer_opens_read_only(
    postgres_url: str, reader_url: str, missing: str, writes: bool
) -> None:
    # has_table_privilege('edges', 'INSERT, UPDATE, DELETE') is true if any one is held:
    # such a role opened as a writer, and its first write failed on the server
    with SynapseStore(postgres_url) as writer:
        writer.reinforce(["a", "b"], at=0)
    role = sql.Identifier(reader_url.split("//", 1)[1].split("@", 1)[0])
    schema = sql.Identifier(postgres_url.rsplit("search_path%3D", 1)[1])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {0} TO {1}; "
                "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {0} TO {1}"
            ).format(schema, role)
        )
        conn.execute(sql.SQL(f"REVOKE {missing} FROM {{}}").format(schema, role))
    with SynapseStore(reader_url) as reader:
        assert reader.read_only is not writes
        if writes:
            assert reader.reinforce(["new", "c"], at=DAY) == 1
        else:
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                reader.reinforce(["a", "c"], at=DAY)


def _as_schema_one(url: str) -> None:
    """The store at ``url`` as schema 1 left it: no column of when an event id was seen."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DROP COLUMN seen")
        conn.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")


def _schema_version(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        [(version,)] = conn.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'"
        ).fetchall()
    return int(version)


def test_a_store_of_schema_one_is_migrated_by_its_owner_only(
    postgres_url: str, reader_url: str
) -> None:
    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0, event_id="commit:1")
    _as_schema_one(postgres_url)
    role = sql.Identifier(reader_url.split("//", 1)[1].split("@", 1)[0])
    schema = sql.Identifier(postgres_url.rsplit("search_path%3D", 1)[1])
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # every right but owning
        conn.execute(
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {0} TO {1}; "
                "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {0} TO {1}"
            ).format(schema, role)
        )
    owner = "open it once as the role that owns its tables"
    with pytest.raises(ReadOnlyStoreError, match=f"schema version 1, older .* 2: {owner}"):
        SynapseStore(reader_url)
    with pytest.raises(NotASynapseDatabaseError, match=f"older than this library's 2: {owner}"):
        SynapseStore(postgres_url, read_only=True)
    assert _schema_version(postgres_url) == 1  # nothing changed
    migrated = time.time()
    window = SynapseConfig().replace(event_ids_kept_days=30)
    with SynapseStore(postgres_url, config=window) as store:
        assert store.reinforce(["a", "b"], at=0, event_id="commit:1") == 0  # still a replay
        assert store.decay(at=migrated + 29 * DAY, force=True).event_ids == 0  # seen at it
    assert _schema_version(postgres_url) == 2
    with SynapseStore(reader_url) as teammate:  # migrated: every writer opens it
        assert teammate.reinforce(["a", "c"], at=DAY, event_id="commit:2") == 1
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        rows = conn.execute("SELECT id, at, seen FROM events ORDER BY id").fetchall()
    assert [(i, at) for i, at, _ in rows] == [("commit:1", 0.0), ("commit:2", DAY)]
    assert all(seen > migrated - 60 for _, _, seen in rows)  # the server's clock, and ours


def test_two_processes_that_migrate_at_once_migrate_once(postgres_url: str) -> None:
    # both read schema 1, then wait for the creators' lock (held here): the second to take
    # it must find the schema migrated, not add the column again
    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0, event_id="commit:1")
    _as_schema_one(postgres_url)
    with psycopg.connect(postgres_url) as holder:
        holder.execute(f"SELECT pg_advisory_xact_lock({postgres.CREATOR_LOCK})")
        with ThreadPoolExecutor(2) as pool:
            opening = [pool.submit(lambda: PostgresStorage(postgres_url).close()) for _ in "ab"]
            for _ in range(3000):
                [(waiting,)] = holder.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchall()
                if waiting == 2:
                    break
                time.sleep(0.01)
            assert waiting == 2
            holder.rollback()  # the lock goes: one migrates, then the other opens
            assert [future.result(30) for future in opening] == [None, None]
    assert _schema_version(postgres_url) == 2


def _waiting(conn: psycopg.Connection[Any], count: int) -> None:
    """Wait until ``count`` transactions wait for a row lock (the first waiter of a row
    waits for its holder's transaction, the next ones for the row's tuple lock)."""
    for _ in range(3000):
        [(waiting,)] = conn.execute(
            "SELECT count(*) FROM pg_locks "
            "WHERE locktype IN ('transactionid', 'tuple') AND NOT granted"
        ).fetchall()
        if waiting >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} transactions never came to wait")


def test_a_sweep_and_a_replay_lock_event_ids_in_one_order(postgres_url: str) -> None:
    # the sweep meets the ids stored b, x, a; a replay of [a, x] locks a, then x. Were the
    # sweep to lock them as stored, it would hold x and wait for a while the replay holds
    # a and waits for x: a deadlock, which the server breaks after a second
    storage = PostgresStorage(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for event_id in "bxa":  # stored in this order
            conn.execute("INSERT INTO events (id, at, seen) VALUES (%s, 0, 1)", (event_id,))
    outcome: dict[str, object] = {}

    def sweep() -> None:
        with storage.write() as tx:
            outcome["sweep"] = tx.forget_event_ids(100.0)

    def replay() -> None:
        with storage.write() as tx:
            outcome["replay"] = tx.record_events(
                [EventRecord(i, 0.0, 1, 200.0) for i in ("a", "x")]
            )

    with psycopg.connect(postgres_url) as holder, ThreadPoolExecutor(2) as pool:
        holder.execute("SELECT id FROM events WHERE id = 'x' FOR UPDATE")  # x held
        swept = pool.submit(sweep)
        _waiting(holder, 1)  # the sweep waits for x
        replayed = pool.submit(replay)
        _waiting(holder, 2)  # the replay waits too
        holder.rollback()
        swept.result(30), replayed.result(30)
    storage.close()
    assert outcome == {"sweep": 3, "replay": [True, True]}  # forgotten, then learned again


def test_a_schema_version_set_back_by_hand_is_a_typed_error(postgres_url: str) -> None:
    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0, event_id="commit:1")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")
    with pytest.raises(CorruptDatabaseError, match="its schema is not the one its version says"):
        SynapseStore(postgres_url)
    assert _schema_version(postgres_url) == 1  # nothing changed


def test_a_role_that_may_not_read_the_tables_gets_a_typed_error_naming_them(
    postgres_url: str, reader_url: str
) -> None:
    # a conversation memory's role (SELECT on meta only) opening a store got a raw
    # InsufficientPrivilege from the load
    with SynapseStore(postgres_url) as writer:
        writer.reinforce(["a", "b"], at=0)
    role = sql.Identifier(reader_url.split("//", 1)[1].split("@", 1)[0])
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    with pytest.raises(AccessDeniedError, match=r"may not read .*meta") as caught:
        SynapseStore(reader_url)
    assert isinstance(caught.value, PermissionError)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("GRANT SELECT ON {}.meta TO {}").format(sql.Identifier(schema), role))
    with pytest.raises(AccessDeniedError) as caught:
        SynapseStore(reader_url)
    message = str(caught.value)
    assert "may not read edge_log, edges, events, name_log" in message
    grant = message.split(": ", 2)[-1]
    assert grant.startswith("GRANT SELECT ON ") and "meta" not in grant
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(grant.encode())  # the GRANT the message names is enough
    polling = SynapseConfig(operations=Operations(refresh_interval_s=0.0))
    with SynapseStore(reader_url, config=polling) as reader:
        hits = reader.recall([("a", 1.0), ("x", 0.5)], at=0)
        assert reader.read_only and [h.id for h in hits] == ["a", "b"]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("REVOKE SELECT ON {}.edge_log FROM {}").format(
                sql.Identifier(schema), role))  # fmt: skip
        with SynapseStore(postgres_url) as writer:
            writer.reinforce(["a", "c"], at=0)
        with pytest.raises(AccessDeniedError, match="may not read edge_log, which a store"):
            reader.recall([("a", 1.0)], at=0)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("GRANT SELECT ON {}.edge_log TO {}; REVOKE SELECT ON {}.events "
                                 "FROM {}").format(sql.Identifier(schema), role,
                                                   sql.Identifier(schema), role))  # fmt: skip
        with pytest.raises(AccessDeniedError, match="may not read events, which a store"):
            reader.repair(dry_run=True)  # counts what a repair would forget


def _grant_select(postgres_url: str, reader_url: str) -> None:
    role = reader_url.split("//", 1)[1].split("@", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                sql.Identifier(postgres_url.rsplit("search_path%3D", 1)[1]), sql.Identifier(role)
            )
        )


def test_a_dry_run_repair_as_a_read_only_role_only_reads(
    postgres_url: str, reader_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with SynapseStore(postgres_url, config=SynapseConfig.actr(max_clock_skew_s=1e15)) as writer:
        writer.reinforce(["jwt", "keys"], at=0)
        writer.reinforce(["jwt", "ms"], at=time.time() * 1000)  # as older releases let through
    _grant_select(postgres_url, reader_url)
    with SynapseStore(reader_url) as reader:
        assert reader.read_only
        assert reader.repair(dry_run=True) == RepairReport(1, 2, 1, dry_run=True)
        assert reader.edge("jwt", "ms") is not None  # still there: it only counted
        with pytest.raises(ReadOnlyStoreError):
            reader.repair()
    with SynapseStore(postgres_url, read_only=True) as chosen:
        assert chosen.repair(dry_run=True) == RepairReport(1, 2, 1, dry_run=True)
    assert main(["repair", reader_url, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["edges"] == 1
    with SynapseStore(postgres_url) as writer:  # what it counted is what a repair removes
        assert writer.repair(dry_run=True) == RepairReport(1, 2, 1, dry_run=True)
        assert writer.repair() == RepairReport(1, 2, 1)
        assert writer.edge("jwt", "ms") is None and writer.edge("jwt", "keys") is not None


def test_schemas_with_capitals_a_dot_or_a_lowercase_twin_are_each_a_store_of_their_own(
    postgres_database: str,
) -> None:
    # current_schema()::regnamespace read "Ops" as ops: the store refused "Upper" (schema
    # "upper" does not exist) and "team.v2", and "Ops" took its lowercase twin's locks
    from synapse_retriever.conversation import ConversationMemory

    tag = uuid.uuid4().hex[:8]
    names = [f"Upper{tag}", f"team.v2{tag}", f"Ops{tag}", f"ops{tag}"]
    database = urlsplit(postgres_database).path[1:]
    urls = [with_database(postgres_database, database, f'"{name}"') for name in names]
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        for name, url in zip(names, urls, strict=True):
            with SynapseStore(url) as store:
                store.reinforce([name, "b.py"], at=0)
            with ConversationMemory(url, user="carol", background=False) as memory:
                memory.add_turn(f"The deploy of {name} moved to Fridays.")
        for name, url in zip(names, urls, strict=True):
            with SynapseStore(url) as store:
                assert [other for other, _, _ in store.neighbours("b.py", at=0)] == [name]
        upper = ConversationMemory(urls[2], user="carol", background=False)
        lower = ConversationMemory(urls[3], user="carol", background=False)
        with upper, lower, lower._storage.consolidation_turn():  # ops's carol consolidates
            assert upper.consolidate()  # "Ops"'s carol is another user's memory
    finally:
        with psycopg.connect(postgres_database, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_a_search_path_naming_no_schema_is_refused_typed_and_creates_nothing(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from synapse_retriever.conversation import ConversationMemory

    missing = _with_option(postgres_url, "-csearch_path=not_there_yet")
    for open_it in (SynapseStore, lambda url: ConversationMemory(url, user="a")):
        with pytest.raises(NotASynapseDatabaseError, match=r"names no schema that exists"):
            open_it(missing)
    assert main(["stats", missing]) == 2
    assert "CREATE SCHEMA" in capsys.readouterr().err


@pytest.mark.parametrize("encoding", ["SQL_ASCII", "LATIN1"])
def test_a_database_of_another_encoding_holds_a_store_or_refuses_typed(encoding: str) -> None:
    # SQL_ASCII: text came back as bytes (a new store reported "corrupt", then a TypeError);
    # LATIN1: a name outside it was a raw UnicodeEncodeError
    from synapse_retriever.conversation import ConversationMemory

    admin_url = POSTGRES
    name = f"synapse_enc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING {} TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
            ).format(sql.Identifier(name), sql.Literal(encoding))
        )
    url = with_database(admin_url, name)
    try:
        with SynapseStore(url) as store:
            store.reinforce(["café.py", "b.py"], at=0)
            if encoding == "SQL_ASCII":
                store.reinforce(["李.py", "b.py"], at=0)
            else:
                with pytest.raises(InvalidValueError):
                    store.reinforce(["李.py", "b.py"], at=0)
        with SynapseStore(url) as again:
            assert again.edge("café.py", "b.py") is not None
        with ConversationMemory(url, user="ann", background=False) as memory:
            memory.add_turn("The café deploy moved to Fridays.")
            assert [turn.text for turn in memory.turns()] == ["The café deploy moved to Fridays."]
        if encoding == "LATIN1":  # a user's name it cannot hold: refused as a turn's text is
            with pytest.raises(InvalidValueError, match="PostgreSQL refused a value"):
                ConversationMemory(url, user="李")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _with_option(url: str, option: str) -> str:
    """``url`` with a server setting (``-c name=value``) added to its ``options``."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} {option}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@pytest.mark.parametrize(
    "default",
    [None, "repeatable\\ read", "serializable"],
    ids=["server default", "repeatable read", "serializable"],
)
def test_concurrent_creators_of_one_store_all_open_it(
    postgres_url: str, default: str | None
) -> None:
    # a server whose default isolation is stricter made 3 of 4 creators fail (DuplicateTable):
    # the writes' locking is argued for READ COMMITTED, which every connection now sets
    if default is not None:
        postgres_url = _with_option(postgres_url, f"-cdefault_transaction_isolation={default}")
    errors: list[BaseException] = []

    def open_and_write(n: int) -> None:
        try:
            with SynapseStore(postgres_url) as store:
                store.reinforce(["a", f"n{n}"], at=0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with SynapseStore(postgres_url) as store:
        assert len(store.neighbours("a", at=0)) == 6


def test_deadlines_share_one_thread_and_cut_a_query_that_runs_past_its_own(
    postgres_url: str,
) -> None:
    # each block started a timer thread of its own: 0.1 to 0.5 ms, at every pooled
    # connection's health check and every poll
    with psycopg.connect(postgres_url) as first, psycopg.connect(postgres_url) as second:
        before = threading.active_count()
        with postgres._deadline(first, 5.0), postgres._deadline(second, 5.0):
            during = threading.active_count()
            first.execute("SELECT 1")
        assert during - before <= 1  # the shared thread, if it was not running yet
        assert not first.closed
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError), postgres._deadline(first, 0.2):
            first.execute("SELECT pg_sleep(5)")
        assert time.monotonic() - started < 4 and first.closed


def test_a_deadline_whose_connection_closed_meanwhile_leaves_the_others_running(
    postgres_url: str,
) -> None:
    # its action raised (the closed connection has no socket) and ended the thread that
    # serves every deadline: another block's query then ran its whole length
    with psycopg.connect(postgres_url) as closing, psycopg.connect(postgres_url) as slow:

        def close_within() -> None:
            with postgres._deadline(closing, 0.1):
                closing.close()
                time.sleep(0.3)  # its deadline comes due on a closed connection

        thread = threading.Thread(target=close_within)
        thread.start()
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError), postgres._deadline(slow, 0.5):
            slow.execute("SELECT pg_sleep(5)")
        thread.join()
        assert time.monotonic() - started < 4


class FreezingProxy(TcpProxy):
    """A TCP proxy on 127.0.0.1 to the test server that can stop forwarding, as a stalled
    network does: connections stay open and nothing passes either way; new ones are
    accepted and get no answer."""

    def __init__(self, url: str) -> None:
        self.flowing = threading.Event()
        self.flowing.set()
        self.answer_delay_s = 0.0
        """How long a new connection's first answer from the server is held (a slow login)."""
        super().__init__(url)

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    def _wait_flowing(self) -> bool:
        while not self.flowing.wait(0.05):
            if self.closed:
                return False
        return not self.closed

    def serve(self, client: socket.socket) -> None:
        if not self._wait_flowing():
            return
        upstream = self.upstream()
        delay = self.answer_delay_s
        threading.Thread(target=self._pump, args=(upstream, client, delay), daemon=True).start()
        self._pump(client, upstream)

    def drop(self) -> None:
        """Cut every connection through it (a restarted server, a pooler's idle kill)."""
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _pump(self, source: socket.socket, sink: socket.socket, delay_s: float = 0.0) -> None:
        try:
            while data := source.recv(65536):
                if not self._wait_flowing():
                    return
                time.sleep(delay_s)
                delay_s = 0.0
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[FreezingProxy]:
    server = FreezingProxy(postgres_url)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("table", ["meta", "edges"])
def test_a_lock_held_on_the_store_leaves_recall_working_from_memory(
    postgres_url: str, table: str
) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(postgres_url, listen=False)  # every read polls
    with SynapseStore(storage=storage, config=config) as reader, SynapseStore(postgres_url) as w:
        w.reinforce(["a", "b"], at=0)
        assert reader.edge("a", "b") is not None
        w.reinforce(["a", "c"], at=0)  # the reader has something to read
        with psycopg.connect(postgres_url) as locker:
            locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # as VACUUM FULL
            hits = ended(
                lambda: reader.recall([("a", 1.0), ("x", 0.5)], at=0), locker.rollback, HANG_S
            )
            assert [h.id for h in hits] == ["a", "b"]  # from memory: the lock is still held
        assert reader.edge("a", "c") is None  # backing off: from memory still
        storage._unreachable_until = 0.0  # the back-off over
        assert reader.edge("a", "c") is not None


def test_a_write_waits_busy_timeout_s_at_most_for_a_lock_and_writes_nothing(
    postgres_url: str,
) -> None:
    config = SynapseConfig.actr(busy_timeout_s=0.5)
    with SynapseStore(postgres_url, config=config) as store:
        store.reinforce(["a", "b"], at=0)
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE edges IN ACCESS EXCLUSIVE MODE")
            error = ended(lambda: store.reinforce(["a", "b"], at=DAY), locker.rollback, HANG_S)
        assert isinstance(error, WriteConflictError), error
        assert "busy_timeout_s (0.5 s)" in str(error) and "nothing was written" in str(error)
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 1
        assert store.reinforce(["a", "b"], at=DAY) == 1  # the lock released: written, once
    with SynapseStore(postgres_url) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 2


def test_a_lock_held_past_busy_timeout_s_while_opening_is_named_not_an_outage(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # it was "cannot be reached: canceling statement due to lock timeout": the server answered
    config = SynapseConfig.actr(busy_timeout_s=0.5, refresh_interval_s=0.0)
    SynapseStore(postgres_url).close()
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")  # as VACUUM FULL
        error = ended(lambda: SynapseStore(postgres_url, config=config), locker.rollback, HANG_S)
    assert type(error) is StorageUnavailableError, error
    assert "not released within 0.5 s" in str(error) and "cannot be reached" not in str(error)
    storage = PostgresStorage(postgres_url, listen=False)  # every read polls
    with (
        SynapseStore(storage=storage, config=config) as reader,
        psycopg.connect(postgres_url) as locker,
        caplog.at_level(logging.WARNING),
    ):
        locker.execute("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")
        ended(lambda: reader.edge("a", "b"), locker.rollback, HANG_S)
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert f"not released within {postgres.POLL_TIMEOUT_S:g} s" in warned, warned
    assert "cannot be reached" not in warned


def test_a_stalled_network_leaves_recall_working_and_writes_refused_then_recovers(
    postgres_url: str, proxy: FreezingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "UNREACHABLE_BACKOFF_S", 0.0)  # ask again at every read
    # the waits for an answer and a connection, shorter than shipped: the same paths, sooner
    monkeypatch.setattr(postgres, "ANSWER_TIMEOUT_S", 1.0)
    monkeypatch.setitem(postgres.CONNECTION_OPTIONS, "connect_timeout", 2)
    config = SynapseConfig.actr(refresh_interval_s=0.0, busy_timeout_s=5.0, write_retries=1)
    storage = PostgresStorage(proxy.url, listen=False, timeout_s=config.operations.busy_timeout_s)
    with SynapseStore(storage=storage, config=config) as store, SynapseStore(postgres_url) as w:
        store.reinforce(["a", "b"], at=0)
        w.reinforce(["a", "c"], at=0)  # something to read
        proxy.freeze()
        hits = ended(lambda: store.recall([("a", 1.0), ("x", 0.5)], at=0), proxy.close, HANG_S)
        assert [h.id for h in hits] == ["a", "b"]  # from memory
        error = ended(lambda: store.reinforce(["a", "d"], at=0), proxy.close, HANG_S)
        assert isinstance(error, StorageUnavailableError), error
        assert "cannot connect" in str(error)  # the connect timeout: no answer through the proxy
        proxy.thaw()
        assert store.reinforce(["a", "d"], at=0) == 1  # a new connection at once
        assert store.edge("a", "c") is not None  # and reads again
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 1


def test_a_stalled_network_delays_a_recall_one_check_or_one_connect_at_most(
    postgres_url: str, proxy: FreezingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the shipped waits (a check of ANSWER_TIMEOUT_S = 2 s, connect_timeout = 5 s): a recall
    # waited the check, then a whole connect (7 s); a check unanswered now leaves the read
    # to memory at once, and a read with no pooled connection left waits one connect
    monkeypatch.setattr(postgres, "UNREACHABLE_BACKOFF_S", 0.0)  # ask again at every read
    connect_s = float(postgres.CONNECTION_OPTIONS["connect_timeout"])
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(proxy.url, listen=False)  # every read polls
    with SynapseStore(storage=storage, config=config) as store, SynapseStore(postgres_url) as w:
        store.reinforce(["a", "b"], at=0)  # a pooled connection, through the proxy
        w.reinforce(["a", "c"], at=0)  # something to read
        proxy.freeze()
        for what, bound in (
            ("the pooled connection's check", postgres.ANSWER_TIMEOUT_S),
            ("a new connection", connect_s),
        ):
            bound += 1.0  # for a busy machine
            started = time.monotonic()
            hits = ended(lambda: store.recall([("a", 1.0), ("x", 0.5)], at=0), proxy.close, HANG_S)
            waited = time.monotonic() - started
            assert not isinstance(hits, Exception), hits
            assert [h.id for h in hits] == ["a", "b"]  # from memory
            assert waited <= bound, f"{what}: the recall waited {waited:.1f} s"
        proxy.thaw()
        assert store.edge("a", "c") is not None  # read again at once


def test_a_server_slow_to_accept_a_connection_is_read_again_after_a_lost_one(
    postgres_url: str, proxy: FreezingProxy
) -> None:
    # a read's new connection had what was left of 2 s: a server taking 2.5 s to log in
    # (TLS, LDAP, a busy pooler) was never read again by a process that only reads
    proxy.answer_delay_s = 2.5  # under connect_timeout (5 s), over the 2 s answer budget
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(proxy.url, listen=False)  # every read polls
    with SynapseStore(storage=storage, config=config) as reader, SynapseStore(postgres_url) as w:
        proxy.drop()  # the pooled connections are lost
        w.reinforce(["a", "c"], at=0)
        assert reader.edge("a", "c") is not None  # one slow connect, then read


def with_statement_timeout(url: str, ms: int) -> str:
    """``url`` whose sessions run with ``statement_timeout = ms`` (as a DBA's ``ALTER ROLE
    ... SET statement_timeout`` gives them)."""
    return url.replace("options=", f"options=-cstatement_timeout%3D{ms}%20", 1)


STATEMENT_TIMEOUT = r"statement_timeout \(200ms, set for .*nothing was written"
"""How an error names a statement cut by a ``statement_timeout`` of 200 ms."""


def test_a_statement_cut_by_the_servers_statement_timeout_is_named_so(postgres_url: str) -> None:
    # a write cut after 200 ms was "a lock was held ... longer than busy_timeout_s (5 s)",
    # and an open "cannot be reached": the server answered, and 5 s never went by
    timed = with_statement_timeout(postgres_url, 200)
    config = SynapseConfig.actr(busy_timeout_s=5.0)
    with SynapseStore(postgres_url) as first:
        first.reinforce(["a", "b"], at=0)
    with SynapseStore(timed, config=config) as store:
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE edges IN SHARE MODE")  # a write waits past 200 ms
            started = time.monotonic()
            error = ended(lambda: store.reinforce(["a", "b"], at=DAY), locker.rollback, HANG_S)
            assert time.monotonic() - started < 5  # not busy_timeout_s
        assert type(error) is StorageUnavailableError, error  # not retried: it would run as long
        assert re.search(STATEMENT_TIMEOUT, str(error)), error
        assert "ALTER ROLE" in str(error)  # what to do
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 1
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")  # the open's read waits
        error = ended(lambda: SynapseStore(timed, config=config), locker.rollback, HANG_S)
    assert type(error) is StorageUnavailableError, error
    assert re.search(STATEMENT_TIMEOUT, str(error)) and "cannot be reached" not in str(error)
    with SynapseStore(postgres_url) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 1  # nothing written


def test_a_write_after_killed_connections_reconnects_at_once(postgres_url: str) -> None:
    name = f"killed_{random.randrange(1 << 30)}"
    url = f"{postgres_url}&application_name={name}"
    stop = threading.Event()

    def kill_idle_connections() -> None:  # every 0.2 s, as an overloaded pooler or a DBA does
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            while not stop.wait(0.2):
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND state = 'idle' "
                    "AND state_change < now() - interval '100 milliseconds'",  # pooled, not opening
                    (name,),
                )

    # a pool that backs off 1, 2, ... s after a dead connection runs past a 3 s timeout
    config = SynapseConfig.actr(busy_timeout_s=3.0)
    storage = PostgresStorage(url, listen=False, timeout_s=config.operations.busy_timeout_s)
    killer = threading.Thread(target=kill_idle_connections, daemon=True)
    with SynapseStore(storage=storage, config=config) as store:
        killer.start()
        try:
            for day in range(10):
                time.sleep(0.25)  # the idle connection is killed meanwhile
                assert store.reinforce(["a", "b"], at=day * DAY) == 1
        finally:
            stop.set()
            killer.join()
    with SynapseStore(postgres_url) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 10  # each write once


def test_a_value_too_large_for_an_index_is_refused_typed_and_never_retried(
    postgres_url: str,
) -> None:
    storage = PostgresStorage(postgres_url, listen=False)
    refused = pytest.raises(InvalidValueError, match=r"exceeds btree.*nothing was written")
    try:  # below the store's own check (2048 bytes), as an older client would write it
        with refused, storage.write() as tx:  # not TransientWriteError (a lost connection)
            tx.node_ids([os.urandom(1400).hex()])
    finally:
        storage.close()


def test_importing_an_export_with_an_id_over_the_limit_is_refused_typed(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = os.urandom(1400).hex()  # an SQLite store of an older release accepted it
    with SynapseStore(tmp_path / "old.db") as old:
        old.reinforce(["a", "b"], namespace="shared", at=0)
        old.reinforce(["a", "placeholder"], namespace="shared", at=0)
    export = tmp_path / "old.json"
    assert main(["export", str(tmp_path / "old.db"), str(export), "--at", "0"]) == 0
    export.write_text(export.read_text().replace("placeholder", long))
    capsys.readouterr()
    assert main(["import", postgres_url, str(export)]) == 2
    err = capsys.readouterr().err
    assert "node id must be at most 2048 bytes of UTF-8, got 2800" in err
    assert len(err.splitlines()) == 1
    with SynapseStore(postgres_url) as team:  # nothing of the import was written
        assert team.edge("a", "b", "shared") is None


def test_writers_with_their_own_clocks_interleave_and_every_event_counts(
    postgres_url: str,
) -> None:
    SynapseStore(postgres_url).close()  # the schema, before the race
    start = 1_700_000_000.0
    errors: list[BaseException] = []

    def write(behind_s: float) -> None:  # an agent whose clock is behind the other's
        try:
            with SynapseStore(postgres_url) as store:
                for i in range(40):
                    store.reinforce(["a", "b"], namespace="shared", at=start + i - behind_s)
        except BaseException as exc:  # reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(behind,)) for behind in (0.0, 5.0)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    with SynapseStore(postgres_url) as store:
        edge = store.edge("a", "b", "shared")
        assert edge is not None and edge.activation_count == 80  # every event, once
        assert edge.last_reinforced_at == start + 39


@pytest.mark.parametrize("alone", [True, False])
def test_a_long_write_with_megabytes_queued_behind_it_keeps_its_connection(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    # While the server runs a long statement it reads nothing more, and the bytes queued
    # behind it in the pipeline wait in a send window it keeps shut; past tcp_user_timeout
    # (1 s here, 10 s in CONNECTION_OPTIONS) the connection is dropped. A write of 1M edges
    # in one transaction lost its connection so: a write of more than ALONE_ROWS rows now
    # runs on its own (write_rows), in the store's and the conversation memory's writes.
    monkeypatch.setattr(postgres, "ALONE_ROWS", 1 if alone else 10**9)
    queued = bytes(64 * 2**20)  # more than both ends' socket buffers hold
    with contextlib.ExitStack() as stack:
        if not alone:  # as before: the setting reproduces the lost connection
            stack.enter_context(pytest.raises(psycopg.OperationalError))
        with psycopg.connect(postgres_url, tcp_user_timeout=1_000) as conn, conn.pipeline():
            postgres.write_rows(conn, "SELECT pg_sleep(3)", (), 2)  # the server busy 3 s
            [(size,)] = conn.execute("SELECT length(%b)", (queued,)).fetchall()
            assert size == len(queued)


def test_stores_dropped_without_close_give_their_connections_and_listener_back(
    postgres_url: str,
) -> None:
    # the listener's thread kept the storage alive: 20 dropped stores held 40 connections
    import gc

    def listeners() -> int:
        return sum(thread.name.startswith("synapse listen") for thread in threading.enumerate())

    SynapseStore(postgres_url).close()  # the schema, made once
    gc.collect()
    before, listening = connections_to(postgres_url), listeners()
    for n in range(10):
        store = SynapseStore(postgres_url)
        store.reinforce(["a", f"b{n}"], at=0)
    assert listeners() > listening
    del store
    gc.collect()
    deadline = time.monotonic() + 10
    while (
        connections_to(postgres_url) > before or listeners() > listening
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections_to(postgres_url) <= before and listeners() <= listening  # none left
    with SynapseStore(postgres_url) as again:  # what they wrote is there
        assert len(again.neighbours("a", at=0)) == 10


def test_a_store_hears_the_commits_of_its_own_schema_only(postgres_database: str) -> None:
    # every commit of any schema woke every store of the database, and each read ran SQL
    with new_schema(postgres_database) as one, new_schema(postgres_database) as other:
        reader = PostgresStorage(one)
        try:
            with SynapseStore(other) as elsewhere, SynapseStore(one) as here:
                deadline = time.monotonic() + 10
                while not reader.listening and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert reader.listening
                reader._changed.clear()
                elsewhere.reinforce(["a", "b"], at=0)
                time.sleep(0.5)  # a notification arrives in milliseconds
                assert not reader._changed.is_set()
                here.reinforce(["a", "b"], at=0)
                assert reader._changed.wait(10)
        finally:
            reader.close()


def _edges_seen(store: SynapseStore) -> dict[tuple[str, str], int]:
    graph = store.graph(at=3 * DAY, namespaces="personal")
    return {tuple(sorted((a, b))): count for a, b, count in graph.edges(data="count")}


@pytest.mark.parametrize("how", ["made again", "restored"])
def test_a_store_open_across_a_reset_or_a_restore_reads_the_tables_anew(
    postgres_url: str, tmp_path: Path, how: str
) -> None:
    # a new user's probe: the mirror followed the store by its version and node numbers; a
    # schema made again or restored from a backup gave the numbers to other names, and the
    # open store showed (and injected) a teammate's x-y edge as a-b, or edges the restore undid
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    storage = PostgresStorage(postgres_url, listen=False)  # each read looks for changes
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    backup = tmp_path / "store.dump"
    with SynapseStore(storage=storage, config=config) as agent:
        agent.reinforce(["a", "b"], at=0)
        if how == "restored":
            dump(postgres_url, backup)
            for _ in range(3):
                agent.reinforce(["c", "d"], at=DAY)  # undone by the restore
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            if how == "made again":
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        if how == "restored":
            restore(postgres_url, backup)
        teammate = SynapseStore(postgres_url, config=config)
        for pair in (["x", "y"], ["a", "x"], ["p", "q"], ["p", "q"], ["p", "q"]):
            teammate.reinforce(pair, at=2 * DAY)
            query = [("a", 0.9), ("q", 0.5)]
            with SynapseStore(postgres_url, config=config) as fresh:
                truth = _edges_seen(fresh)
                hits = [(h.id, h.origin) for h in fresh.recall(query, at=3 * DAY)]
            # each read of the agent's sees what a store opened now sees, as versions go by
            # (a restore's below the agent's at first)
            assert _edges_seen(agent) == truth
            assert [(h.id, h.origin) for h in agent.recall(query, at=3 * DAY)] == hits
        teammate.close()
        assert ("c", "d") not in truth and truth[("p", "q")] == 3
        assert (("a", "b") in truth) == (how == "restored")
        agent.reinforce(["a", "y"], at=3 * DAY)  # written by name, read back as written
        edge = agent.edge("x", "y")
        assert agent.edge("a", "y") is not None and edge is not None and edge.activation_count == 1


def test_a_layered_store_open_across_a_restore_of_its_shared_layer_writes_by_name(
    postgres_url: str, tmp_path: Path
) -> None:
    # a review's finding: the layered store kept the shared layer's ids of names the restore
    # undid, so writing a-c asked the database for a-x (x had c's old id): refused for good
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    backup = tmp_path / "team.dump"
    agent = SynapseStore.layered(local=tmp_path / "me.db", shared=postgres_url, config=config)
    try:
        agent.reinforce(["a", "b"], namespace="shared", at=0)
        dump(postgres_url, backup)
        agent.reinforce(["c", "d"], namespace="shared", at=DAY)  # undone by the restore
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        restore(postgres_url, backup)
        with SynapseStore(postgres_url, config=config) as teammate:
            teammate.reinforce(["x", "y"], namespace="shared", at=2 * DAY)  # c's and d's ids
        agent.reinforce(["a", "c"], namespace="shared", at=3 * DAY)
        seen = agent.graph(at=3 * DAY, namespaces="shared")
        assert sorted(tuple(sorted(edge)) for edge in seen.edges()) == [
            ("a", "b"), ("a", "c"), ("x", "y")
        ]  # fmt: skip
    finally:
        agent.close()
    with SynapseStore(postgres_url, config=config) as fresh:
        held = fresh.graph(at=3 * DAY, namespaces="shared")
        assert sorted(tuple(sorted(edge)) for edge in held.edges()) == [
            ("a", "b"), ("a", "c"), ("x", "y")
        ]  # fmt: skip


def test_a_write_before_any_read_after_a_restore_goes_to_the_names_it_was_given(
    postgres_url: str, tmp_path: Path
) -> None:
    # a review's finding: a store that wrote before reading after a restore took c's id from
    # its mirror, which the restored tables had given to x: a-c was stored as a-x
    config = SynapseConfig.actr(refresh_interval_s=3600.0)  # no read looks for changes
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    backup = tmp_path / "team.dump"
    with SynapseStore(postgres_url, config=config) as agent:
        agent.reinforce(["a", "b"], at=0)
        dump(postgres_url, backup)
        agent.reinforce(["c", "d"], at=DAY)  # undone by the restore
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        restore(postgres_url, backup)
        with SynapseStore(postgres_url, config=config) as teammate:
            teammate.reinforce(["x", "y"], at=2 * DAY)  # c's and d's ids
        agent.reinforce(["a", "c"], at=3 * DAY)
        assert agent.edge("a", "x") is None and agent.edge("c", "d") is None
    with SynapseStore(postgres_url, config=config) as fresh:
        held = fresh.graph(at=3 * DAY, namespaces="personal")
        assert sorted(tuple(sorted(edge)) for edge in held.edges()) == [
            ("a", "b"), ("a", "c"), ("x", "y")
        ]  # fmt: skip


def _made_again_with(postgres_url: str, config: SynapseConfig) -> None:
    """The store's schema dropped and made again; a teammate's store writes x-y in it."""
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with SynapseStore(postgres_url, config=config) as teammate:
        teammate.reinforce(["x", "y"], at=DAY)


def test_replaced_tables_leave_an_interrupt_as_it_is_and_need_no_retry_budget(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a review's findings: a Ctrl-C in a write after the tables were replaced became a
    # ReplacedTablesError and the write ran again; with write_retries=0 it was refused
    from synapse_retriever.store import write as write_module

    config = SynapseConfig.actr(refresh_interval_s=3600.0).replace(write_retries=0)
    with SynapseStore(postgres_url, config=config) as agent:
        agent.reinforce(["a", "b"], at=0)
        _made_again_with(postgres_url, config)
        original = write_module.record_uses

        def interrupted(*args: Any, **kwargs: Any) -> Any:
            raise KeyboardInterrupt

        monkeypatch.setattr(write_module, "record_uses", interrupted)
        with pytest.raises(KeyboardInterrupt):
            agent.reinforce(["a", "c"], at=2 * DAY)
        monkeypatch.setattr(write_module, "record_uses", original)
        agent.reinforce(["a", "c"], at=2 * DAY)  # once more, outside the budget of none
        assert agent.edge("a", "c") is not None and agent.edge("x", "y") is not None


def test_an_import_into_a_storage_whose_tables_were_replaced_goes_through(
    postgres_url: str,
) -> None:
    # a review's finding: merge_edges, which writes by name, was refused for good
    from synapse_retriever.persistence.transfer import merge_edges

    config = SynapseConfig.actr()
    storage = PostgresStorage(postgres_url, listen=False)
    try:
        storage.load()
        _made_again_with(postgres_url, config)
        with SynapseStore(postgres_url, config=config) as other:
            edge = other.edge("x", "y")
        assert edge is not None
        report = merge_edges(storage, [dataclasses.replace(edge, a="a", b="c")])
        assert report.inserted == 1
    finally:
        storage.close()
    with SynapseStore(postgres_url, config=config) as fresh:
        assert fresh.edge("a", "c") is not None and fresh.edge("x", "y") is not None


def test_a_write_after_replaced_tables_waits_for_them_to_be_read(postgres_url: str) -> None:
    # a review's finding: with the store's re-read held back (the 5 s after the server did not
    # answer), the write ran again with the old ids, and a-b was counted on the new x-y
    config = SynapseConfig.actr(refresh_interval_s=3600.0)
    with SynapseStore(postgres_url, config=config) as agent:
        agent.reinforce(["a", "b"], at=0)
        _made_again_with(postgres_url, config)
        agent._storage._unreachable_until = time.monotonic() + 60  # type: ignore[attr-defined]
        with pytest.raises(WriteConflictError, match="restored or made again"):
            agent.reinforce(["a", "b"], at=2 * DAY)
        agent._storage._unreachable_until = 0.0  # type: ignore[attr-defined]
        agent.reinforce(["a", "b"], at=2 * DAY)
    with SynapseStore(postgres_url, config=config) as fresh:
        edge = fresh.edge("x", "y")
        assert edge is not None and edge.activation_count == 1
        assert fresh.edge("a", "b") is not None
