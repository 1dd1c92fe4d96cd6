"""PostgreSQL conversation storage against a real server (see store_backends.py for which).

Every protocol method for one user; users kept apart whatever the arguments, with hostile
names; concurrent writers in processes; one consolidation per user across processes, and
a killed one leaves nothing half-written and its lock free; a terminated backend, a lock
held too long, an unreachable server, a read-only role, a newer schema, each typed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest
from psycopg import sql
from store_backends import TcpProxy, connections_to, dump, restore, stored, tool

from synapse_retriever import SynapseStore
from synapse_retriever.errors import (
    AccessDeniedError,
    CorruptDatabaseError,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    ReadOnlyStoreError,
    StorageUnavailableError,
    WriteConflictError,
)
from synapse_retriever.persistence.conversation import postgres
from synapse_retriever.persistence.conversation.postgres import (
    POOL_SIZE,
    PostgresConversationStorage,
    lock_key,
)
from synapse_retriever.persistence.conversation.protocol import (
    MAX_USER_LENGTH,
    ConversationStorage,
    EntityRow,
    TurnRecord,
    TypedEdgeRow,
)

ROOT = Path(__file__).resolve().parents[3]


def turn(text: str, at: float = 0.0, session: str = "s", speaker: str | None = None) -> TurnRecord:
    return TurnRecord(0, session, "user", text, at, 1.0, 0, 0.0, None, None, speaker)


def mentions(turn_id: int, key: str) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
    """A turn's links as a memory makes them: the turn mentions entity ``key``."""
    node = f"topic:{key}"
    return [EntityRow(node, "topic", key)], [TypedEdgeRow(f"turn:{turn_id}", node, "MENTIONS", 0)]


@pytest.fixture
def open_storage(postgres_url: str) -> Iterator[Any]:
    """Open storages on the test schema, closed after the test."""
    opened: list[PostgresConversationStorage] = []

    def opener(user: str | None = None, **options: Any) -> PostgresConversationStorage:
        opened.append(PostgresConversationStorage(postgres_url, user=user, **options))
        return opened[-1]

    yield opener
    for storage in opened:
        storage.close()


def test_it_is_a_conversation_storage(open_storage: Any) -> None:
    storage: ConversationStorage = open_storage("alice")
    assert storage.user == "alice" and "secret" not in storage.where


def test_turns_vectors_graph_and_marks_come_back_as_stored(open_storage: Any) -> None:
    storage = open_storage("alice")
    vector = np.random.default_rng(0).standard_normal(1536).astype(np.float32).tobytes()
    first = storage.insert(turn("Deploys move to Fridays.", at=10, speaker="Caroline"), "e", vector,
                           lambda i: mentions(i, "deploy"))  # fmt: skip
    second = storage.insert(turn("Noted.", at=20), "e", b"", after=first)
    loaded = storage.load()
    assert [t.id for t in loaded.turns] == [first, second] and first < second
    assert loaded.turns[0] == TurnRecord(first, "s", "user", "Deploys move to Fridays.", 10.0,
                                         1.0, 0, 0.0, None, None, "Caroline")  # fmt: skip
    assert loaded.embeddings == [vector, b""] and loaded.embedders == ["e", "e"]
    assert loaded.entities == [EntityRow("topic:deploy", "topic", "deploy")]
    assert loaded.edges == [TypedEdgeRow(f"turn:{first}", "topic:deploy", "MENTIONS", 0.0)]
    assert loaded.graph_through == first  # the second came without links
    later = storage.load(after=first)
    assert [t.id for t in later.turns] == [second] and later.edges == later.entities == []


def test_load_after_brings_the_graph_rows_that_touch_the_new_turns_only(
    open_storage: Any,
) -> None:
    storage = open_storage("alice")
    old = storage.insert(turn("The deploy."), "e", b"", lambda i: mentions(i, "deploy"))
    new = storage.insert(turn("The retro."), "e", b"", lambda i: mentions(i, "retro"))
    storage.add_graph([], [TypedEdgeRow(f"turn:{old}", f"turn:{new}", "FOLLOWED_BY", 1)], new)
    loaded = storage.load(after=old)
    assert {(e.source, e.target) for e in loaded.edges} == {
        (f"turn:{new}", "topic:retro"),
        (f"turn:{old}", f"turn:{new}"),
    }
    assert loaded.entities == [EntityRow("topic:retro", "topic", "retro")]


def test_edges_reinforced_and_vectors_replaced_are_stored(open_storage: Any) -> None:
    storage = open_storage("alice")
    turn_id = storage.insert(turn("The deploy."), "old", b"\x01", lambda i: mentions(i, "deploy"))
    key = (f"turn:{turn_id}", "topic:deploy", "MENTIONS")
    stepped = storage.traverse_edges(
        [key, ("turn:0", "x", "y")],
        lambda e: e._replace(at=5, reinforcements=e.reinforcements + 2, traversals=1),
    )
    assert stepped == [TypedEdgeRow(*key, 5, 2, 1)]  # the edge not stored: skipped
    storage.replace_embeddings("new", [(turn_id, b"\x02\x03")])
    loaded = storage.load()
    assert loaded.edges == [TypedEdgeRow(*key, 5, 2, 1)]
    assert (loaded.embedders, loaded.embeddings) == (["new"], [b"\x02\x03"])


def test_a_consolidation_is_written_once_and_one_covering_as_much_writes_nothing(
    open_storage: Any,
) -> None:
    storage, other = open_storage("alice"), open_storage("alice")  # two processes, say
    ids = [storage.insert(turn(f"turn {n}"), "e", b"") for n in range(3)]
    relations = ([EntityRow("person:ann", "person", "Ann")],
                 [TypedEdgeRow(f"turn:{ids[0]}", "person:ann", "MENTIONS", 0)], ids[2])  # fmt: skip
    assert storage.consolidate([(ids[0], "chunks", "summary")], [(ids[1], 0.25)], ["deploy"], 3,
                               graph=relations)  # fmt: skip
    assert not other.consolidate([(ids[0], "other", "other")], [(ids[1], 0.9)], ["x"], 3)
    assert not other.consolidate([(ids[0], "other", "other")], [], ["x"], 2)  # covers less
    loaded = other.load()
    assert (loaded.turns[0].chunks, loaded.turns[0].summary) == ("chunks", "summary")
    assert loaded.turns[1].boost == 0.25 and loaded.consolidated_through == 3
    assert loaded.relations_through == ids[2] and EntityRow("person:ann", "person", "Ann") in (
        loaded.entities
    )
    assert other.themes() == [(3, ["deploy"])]
    storage.insert(turn("turn 3"), "e", b"")
    assert other.consolidate([], [], ["later"], 4) and storage.themes() == [
        (3, ["deploy"]),
        (4, ["later"]),
    ]


def test_concurrent_consolidations_of_one_user_write_once(open_storage: Any) -> None:
    storages = [open_storage("alice") for _ in range(6)]
    turn_id = storages[0].insert(turn("The deploy."), "e", b"")
    results: list[bool] = []
    start = threading.Barrier(len(storages))

    def consolidate(storage: PostgresConversationStorage, n: int) -> None:
        start.wait()
        results.append(storage.consolidate([(turn_id, f"c{n}", f"s{n}")], [], [f"t{n}"], 1))

    threads = [threading.Thread(target=consolidate, args=(s, n)) for n, s in enumerate(storages)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 5 + [True]
    [(covered, [theme])] = storages[0].themes()
    assert covered == 1
    assert storages[0].load().turns[0].chunks == f"c{theme[1:]}"  # the winner's, whole


def test_marks_only_grow(open_storage: Any) -> None:
    storage = open_storage("alice")
    storage.add_graph([], [], 7)
    storage.add_graph([], [], 5)  # a late writer that covered less
    assert storage.load().graph_through == 7


def test_an_insert_after_a_turn_the_caller_has_not_seen_stores_nothing(open_storage: Any) -> None:
    alice, again, bob = open_storage("alice"), open_storage("alice"), open_storage("bob")
    first = alice.insert(turn("one"), "e", b"", after=0)
    assert again.insert(turn("two"), "e", b"", after=0) is None  # it has not seen "one"
    assert bob.insert(turn("bob's first"), "e", b"", after=0) is not None  # per user
    second = again.insert(turn("two"), "e", b"", after=first)
    assert [t.text for t in alice.load().turns] == ["one", "two"] and second is not None


def test_no_call_on_one_users_memory_reads_or_writes_anothers(open_storage: Any) -> None:
    alice, bob = open_storage("alice"), open_storage("bob")
    mine = alice.insert(turn("Alice's secret plan."), "e", b"a", lambda i: mentions(i, "plan"))
    theirs = bob.insert(turn("Bob's turn."), "e", b"b", lambda i: mentions(i, "plan"))
    alice.consolidate([(mine, "c", "s")], [], ["alice theme"], 1)
    # bob's calls name alice's turn and edge: nothing of hers changes
    assert bob.consolidate([(mine, "bob's chunks", "bob's summary")], [(mine, 1.0)], ["b"], 1)
    bob.replace_embeddings("bob", [(mine, b"overwritten")])
    assert (
        bob.traverse_edges(
            [(f"turn:{mine}", "topic:plan", "MENTIONS")], lambda e: e._replace(reinforcements=9)
        )
        == []
    )
    hers = alice.load()
    assert [(t.id, t.text, t.chunks, t.boost) for t in hers.turns] == [
        (mine, "Alice's secret plan.", "c", 0.0)
    ]
    assert hers.embeddings == [b"a"] and hers.embedders == ["e"]
    assert hers.edges == [TypedEdgeRow(f"turn:{mine}", "topic:plan", "MENTIONS", 0.0)]
    assert alice.themes() == [(1, ["alice theme"])] and bob.themes() == [(1, ["b"])]
    his = bob.load()
    assert [t.text for t in his.turns] == ["Bob's turn."] and his.consolidated_through == 1
    assert his.edges == [TypedEdgeRow(f"turn:{theirs}", "topic:plan", "MENTIONS", 0.0)]
    assert alice.load(after=mine).turns == []  # bob's later id is not hers


HOSTILE = [
    "O'Brien",
    'say "hi"',
    "'; DROP TABLE context_turns; --",
    "Robert'); DELETE FROM context_users; --",
    "%s %(u)s {user} $1 \\ \\x00",
    "ユーザー 🧠 é",
    "e\u0301",  # e + combining accent: another user than "é"
    "x" * MAX_USER_LENGTH,
]


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_user_name_is_stored_as_plain_data(
    open_storage: Any, postgres_url: str, name: str
) -> None:
    hostile, plain = open_storage(name), open_storage("alice")
    plain.insert(turn("Alice's turn."), "e", b"")
    hostile.insert(turn(f"{name}'s turn."), "e", b"", lambda i: mentions(i, name))
    again = open_storage(name)  # the same user, found again by name
    assert [t.text for t in again.load().turns] == [f"{name}'s turn."]
    assert [t.text for t in plain.load().turns] == ["Alice's turn."]
    with psycopg.connect(postgres_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM context_users ORDER BY id")]
        assert names == [name, "alice"] and conn.execute(  # every table still there
            "SELECT count(*) FROM context_turns"
        ).fetchone() == (2,)


@pytest.mark.parametrize(
    ("user", "error", "message"),
    [
        ("a\x00b", InvalidValueError, "control character"),
        ("line\nbreak", InvalidValueError, "control character"),
        ("a\ud800b", InvalidValueError, "lone surrogate"),
        ("x" * (MAX_USER_LENGTH + 1), InvalidValueError, "more than 256"),
        ("", InvalidValueError, "must not be empty"),
        (7, InvalidTypeError, "got int"),
    ],
)
def test_a_user_name_that_cannot_be_one_is_refused_before_anything_is_stored(
    postgres_url: str, user: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PostgresConversationStorage(postgres_url, user=user)
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()")
        assert tables.fetchone() == (0,)  # refused before the schema was touched


def test_the_default_user_is_a_user_of_its_own(open_storage: Any) -> None:
    default, alice = open_storage(None), open_storage("alice")
    default.insert(turn("nobody's"), "e", b"")
    assert default.user == "" and alice.load().turns == []


def _write_turns(url: str, users: list[str], count: int, worker: int, start: Any) -> None:
    """One writer process: ``count`` turns spread over ``users``, each stored after the
    last turn of its user that it has seen (as a memory does), retried when another
    process came first."""
    storages = {user: PostgresConversationStorage(url, user=user) for user in users}
    seen = {user: (0, 0.0) for user in users}
    start.wait()
    for n in range(count):
        user = users[(n + worker) % len(users)]
        while True:
            for record in storages[user].load(after=seen[user][0]).turns:
                seen[user] = (record.id, record.at)
            at = max(time.time(), seen[user][1])  # never before the last turn in view
            stored = storages[user].insert(
                turn(f"{user}|{worker}|{n}", at=at), "e", b"", after=seen[user][0]
            )
            if stored is not None:
                seen[user] = (stored, at)
                break
    for storage in storages.values():
        storage.close()


def check_writers(url: str, users: list[str], expected: dict[str, set[str]]) -> None:
    """Every user holds exactly its expected turns, once, with times in id order."""
    for user in users:
        storage = PostgresConversationStorage(url, user=user)
        turns = storage.load().turns
        storage.close()
        texts = [t.text for t in turns]
        assert len(texts) == len(set(texts)) == len(expected[user])  # none lost, none twice
        assert set(texts) == expected[user]  # and no other user's
        assert [t.at for t in turns] == sorted(t.at for t in turns)  # ids in time order


def test_concurrent_writer_processes_lose_no_turn_and_keep_users_apart(postgres_url: str) -> None:
    """4 processes x 60 turns over 2 users (tests/bench/conversation_writers.py runs the
    issue's 8 x 500 over 4 users, through ConversationMemory)."""
    processes, count, users = 4, 60, ["alice", "bob's"]
    PostgresConversationStorage(postgres_url).close()  # the schema, before the race
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(processes)
    workers = [
        context.Process(target=_write_turns, args=(postgres_url, users, count, w, start))
        for w in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0] * processes
    expected: dict[str, set[str]] = {user: set() for user in users}
    for w in range(processes):
        for n in range(count):
            user = users[(n + w) % len(users)]
            expected[user].add(f"{user}|{w}|{n}")
    check_writers(postgres_url, users, expected)


HOLDER = """
import sys, time
from synapse_retriever.persistence.conversation.postgres import PostgresConversationStorage
storage = PostgresConversationStorage(sys.argv[1], user=sys.argv[2])
with storage.consolidation_turn() as mine:
    print(mine, flush=True)
    if sys.argv[3] == "consolidate":
        storage.consolidate([(1, "chunks", "summary")], [(1, 0.5)], ["theme"], 1)
    time.sleep(600)
"""


def _spawn(url: str, user: str, what: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, user, what], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "True"  # it holds its user's consolidation
    return child


def _eventually(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)


def test_one_consolidation_per_user_across_processes_and_a_killed_one_frees_its_lock(
    postgres_url: str, open_storage: Any
) -> None:
    alice, bob = open_storage("alice"), open_storage("bob")
    child = _spawn(postgres_url, "alice", "hold")
    try:
        with alice.consolidation_turn() as mine, bob.consolidation_turn() as bobs:
            assert (mine, bobs) == (False, True)  # alice's is taken, bob's is his own
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()

    def free() -> bool:
        with alice.consolidation_turn() as mine:
            return mine

    _eventually(free)  # the server released it with the dead process's connection
    with alice.consolidation_turn() as first, alice.consolidation_turn() as second:
        assert (first, second) == (True, False)  # one at a time, within a process too
    with alice.consolidation_turn() as mine:
        assert mine  # released at the block's end


def test_a_consolidation_keeps_its_lock_past_a_servers_idle_transaction_timeout(
    postgres_url: str,
) -> None:
    # its lock's transaction idles while a summarizer runs: a server that ends idle
    # transactions ended it, and another process consolidated the same user at once
    url = postgres_url.replace(
        "options=-csearch_path%3D", "options=-cidle_in_transaction_session_timeout%3D200%20"
        "-csearch_path%3D"
    )  # fmt: skip
    first, second = (PostgresConversationStorage(url, user="alice") for _ in range(2))
    try:
        with first.consolidation_turn() as mine:
            assert mine
            time.sleep(0.6)  # three times the server's bound
            with second.consolidation_turn() as theirs:
                assert not theirs
        with second.consolidation_turn() as theirs:
            assert theirs
    finally:
        first.close()
        second.close()


def _keepalive_s(url: str, port: int) -> float | None:
    """The seconds until the server's next keepalive probe on its socket to the client port
    ``port`` (``ss``), None while its timer shows something else (data unacknowledged)."""
    server = urlsplit(url).port or 5432
    shown = subprocess.run(
        ["ss", "-tno", "state", "established", f"( sport = :{server} and dport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"timer:\(keepalive,(?:(\d+)min)?(?:(\d+)sec)?(?:(\d+)ms)?", shown)
    if found is None:
        return None
    minutes, seconds, ms = (int(part or 0) for part in found.groups())
    return minutes * 60 + seconds + ms / 1000


def test_a_consolidation_lock_of_a_machine_gone_silent_is_freed_within_seconds(
    postgres_url: str, open_storage: Any
) -> None:
    # the lock's transaction is never ended for idling (a summarizer may take minutes): a
    # holder whose machine vanished (no FIN, no RST) kept it until the server's keepalives
    # gave up on the socket, the kernel's 2 h 11 min, and every process skipped the user's
    # consolidation that long; the lock's connection now asks the server to probe it as
    # the client probes the server (5 + 3 x 2 s of quiet, 10 s unacknowledged)
    host = urlsplit(postgres_url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip("reads the server's socket with ss: a server on this machine only")
    tool(shutil.which("ss"), "ss (apt-get install -y iproute2)")
    alice = open_storage("alice")
    with alice.consolidation_turn() as mine, psycopg.connect(postgres_url) as admin:
        assert mine
        [(port,)] = admin.execute(
            "SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
        ).fetchall()
        found: list[float | None] = []

        def probed() -> bool:
            found.append(_keepalive_s(postgres_url, port))
            return found[-1] is not None

        _eventually(probed, timeout_s=60)
        assert found[-1] is not None and found[-1] <= 5
        [(timeout,)] = admin.execute("SHOW tcp_keepalives_idle").fetchall()
        assert timeout != "5"  # the lock's transaction only: nothing else changed


def _waiting_on(conn: psycopg.Connection[Any], table: str) -> bool:
    """Whether a transaction waits for a lock on ``table``."""
    found = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted", (table,)
    ).fetchone()
    return found == (1,)


def test_a_consolidation_killed_mid_transaction_writes_nothing_and_frees_its_lock(
    postgres_url: str, open_storage: Any
) -> None:
    alice = open_storage("alice")
    turn_id = alice.insert(turn("The deploy."), "e", b"")
    assert turn_id == 1  # the child names it
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE context_replays IN SHARE MODE")  # the replay row waits
        child = _spawn(postgres_url, "alice", "consolidate")
        try:
            # its turn updates are made, uncommitted; it waits on the lock
            _eventually(lambda: _waiting_on(locker, "context_replays"))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        locker.rollback()

    def free() -> bool:
        with alice.consolidation_turn() as mine:
            return mine

    _eventually(free)
    loaded = alice.load()
    assert (loaded.turns[0].chunks, loaded.turns[0].boost) == (None, 0.0)
    assert loaded.consolidated_through == 0 and alice.themes() == []
    assert alice.consolidate([(turn_id, "c", "s")], [], ["theme"], 1)  # the next one runs


def _terminate_writers(url: str) -> int:
    """Terminate the backends holding an advisory lock in the test database: a storage's
    write transaction, mid-way."""
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a "
            "USING (pid) WHERE l.locktype = 'advisory' AND a.datname = current_database() "
            "AND l.pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_a_backend_terminated_during_an_insert_is_retried_and_the_turn_stored_once(
    postgres_url: str, open_storage: Any
) -> None:
    storage = open_storage("alice")
    calls: list[int] = []

    def links(turn_id: int) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
        calls.append(turn_id)
        if len(calls) == 1:  # the turn is inserted, uncommitted: kill its backend
            assert _terminate_writers(postgres_url) == 1
        return mentions(turn_id, "deploy")

    stored = storage.insert(turn("The deploy."), "e", b"v", links, after=0)
    assert len(calls) == 2 and stored == calls[1]  # the second attempt's id
    loaded = open_storage("alice").load()
    assert [(t.id, t.text) for t in loaded.turns] == [(stored, "The deploy.")]
    assert loaded.edges == [TypedEdgeRow(f"turn:{stored}", "topic:deploy", "MENTIONS", 0)]


def test_a_connection_lost_at_every_attempt_is_a_typed_error_and_nothing_is_written(
    postgres_url: str, open_storage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "WRITE_RETRIES", 2)
    storage = open_storage("alice")
    calls: list[int] = []

    def links(turn_id: int) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
        calls.append(turn_id)
        _terminate_writers(postgres_url)
        return [], []

    with pytest.raises(StorageUnavailableError, match=r"(?s)lost 3 times.*nothing was written"):
        storage.insert(turn("The deploy."), "e", b"", links)
    assert len(calls) == 3 and storage.load().turns == []
    assert storage.insert(turn("The deploy."), "e", b"") is not None  # then it writes again


class CommitCutter(TcpProxy):
    """A TCP proxy on 127.0.0.1 to the test server. Once :meth:`arm` is called, the next
    connection that sends a turn's insert and then ``COMMIT`` has its ``COMMIT`` forwarded,
    and the server's answer (the transaction is committed) dropped with the connection:
    the client cannot know whether its turn was stored."""

    def __init__(self, url: str) -> None:
        self.armed = threading.Event()
        self.cut = threading.Event()
        super().__init__(url)

    def arm(self) -> None:
        self.armed.set()

    def serve(self, client: socket.socket) -> None:
        upstream = self.upstream()
        cutting = threading.Event()

        def answers() -> None:
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    if cutting.is_set():  # the COMMIT's answer: committed, never told
                        self.cut.set()
                        break
                    client.sendall(data)
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=answers, daemon=True).start()
        inserting = False
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                inserting = inserting or b"INSERT INTO context_turns" in data
                if inserting and b"COMMIT\x00" in data and self.armed.is_set():
                    self.armed.clear()
                    cutting.set()
                upstream.sendall(data)


@pytest.mark.parametrize("listen", [True, False])
def test_a_turn_whose_commit_went_unanswered_is_taken_in_at_the_next_read(
    postgres_url: str, listen: bool
) -> None:
    # the error said "a memory takes the turn in at its next catch-up if it was"; a memory
    # that listened heard its own write's NOTIFY, took it for no news, and went on without
    # the turn (len 1, retrieve blind to it) while every other memory showed it
    from synapse_retriever.conversation import ConversationMemory

    proxy = CommitCutter(postgres_url)
    try:
        with (
            ConversationMemory(proxy.url, user="alice", listen=listen) as memory,
            ConversationMemory(postgres_url, user="alice") as other,
        ):
            memory.add_turn("The deploy moves to Friday.", at=0)
            if listen:
                _eventually(lambda: memory._storage.listening, timeout_s=60)
            proxy.arm()
            with pytest.raises(StorageUnavailableError, match="whether the write was committed"):
                memory.add_turn("The release note is due on Thursday.", at=1)
            assert proxy.cut.is_set()  # committed; the answer never came
            assert [t.text for t in other.turns()] == [
                "The deploy moves to Friday.",
                "The release note is due on Thursday.",
            ]
            assert len(memory) == 2 and memory.turns() == other.turns()
            found = memory.retrieve("release note Thursday", k=1)
            assert [r.text for r in found] == ["The release note is due on Thursday."]
            assert memory.add_turn("Noted.", at=2) == 3  # after it, once
        with ConversationMemory(postgres_url, user="alice") as reopened:
            assert [t.id for t in reopened.turns()] == [1, 2, 3]
    finally:
        proxy.close()


def test_a_keyed_turn_retried_after_its_commit_went_unanswered_is_stored_once(
    postgres_url: str,
) -> None:
    # without a key, the caller could not tell whether to add the turn again: a retry
    # stored it twice
    from synapse_retriever.conversation import ConversationMemory

    proxy = CommitCutter(postgres_url)
    try:
        with ConversationMemory(proxy.url, user="alice") as memory:
            memory.add_turn("The deploy moves to Friday.", at=0, key="m1")
            proxy.arm()
            with pytest.raises(StorageUnavailableError, match="whether the write was committed"):
                memory.add_turn("The release note is due on Thursday.", at=1, key="m2")
            assert proxy.cut.is_set()
            assert memory.add_turn("The release note is due on Thursday.", at=1, key="m2") == 2
            assert memory.add_turn("Noted.", at=2, key="m3") == 3
        with ConversationMemory(postgres_url, user="alice") as reopened:
            assert [(t.id, t.key) for t in reopened.turns()] == [(1, "m1"), (2, "m2"), (3, "m3")]
    finally:
        proxy.close()


def test_a_lock_held_longer_than_timeout_s_is_a_typed_error_and_nothing_is_written(
    postgres_url: str, open_storage: Any
) -> None:
    alice, bob = open_storage("alice", timeout_s=0.5), open_storage("bob", timeout_s=0.5)
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE context_turns IN SHARE MODE")
        started = time.monotonic()
        with pytest.raises(WriteConflictError, match=r"busy_timeout_s \(0.5 s\).*nothing"):
            alice.insert(turn("The deploy."), "e", b"")
        assert time.monotonic() - started < 5
        locker.rollback()
        [(schema,)] = locker.execute("SELECT current_schema()::regnamespace::oid").fetchall()
        [(number,)] = locker.execute("SELECT id FROM context_users WHERE name = 'alice'")
        # another process in alice's write transaction: alice waits, bob does not
        locker.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("write", schema, number),))
        with pytest.raises(WriteConflictError, match="lock timeout"):
            alice.insert(turn("The deploy."), "e", b"")
        assert bob.insert(turn("Bob's turn."), "e", b"") is not None
        locker.rollback()
    assert alice.load().turns == []
    assert alice.insert(turn("The deploy."), "e", b"") is not None


def test_a_statement_cut_by_the_servers_statement_timeout_is_named_so(postgres_url: str) -> None:
    # a write cut after 200 ms was "a lock was held ... longer than busy_timeout_s (5 s)", and
    # an open "a lock was held longer than 5 s": the setting named neither time
    PostgresConversationStorage(postgres_url).close()
    timed = postgres_url.replace("options=", "options=-cstatement_timeout%3D200%20", 1)
    named = r"statement_timeout \(200ms, set for .*nothing was written"
    with PostgresConversationStorage(timed, user="alice", timeout_s=5.0) as alice:
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE context_turns IN SHARE MODE")  # a write waits past it
            started = time.monotonic()
            with pytest.raises(StorageUnavailableError, match=named):
                alice.insert(turn("The deploy."), "e", b"")
            assert time.monotonic() - started < 5
        assert alice.load().turns == []
    with psycopg.connect(postgres_url) as locker:
        locker.execute("LOCK TABLE context_users IN ACCESS EXCLUSIVE MODE")  # the open waits
        with pytest.raises(StorageUnavailableError, match=named):
            PostgresConversationStorage(timed, user="bob", timeout_s=5.0)


def test_an_unreachable_server_is_a_typed_error_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="cannot connect"):
        PostgresConversationStorage("postgresql://nobody:secret@127.0.0.1:1/none", user="a")
    assert time.monotonic() - started < 10


@pytest.fixture
def role(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A login role of its own and ``postgres_url`` as that role (dropped after)."""
    name = f"chat_{random.randrange(1 << 30)}"
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(schema), sql.Identifier(name)
            )
        )
    yield name, postgres_url.replace("postgres@", f"{name}@", 1)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


WRITER = (
    "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {schema} TO {role}; "
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
)
"""Every right a memory's role needs (for :func:`_grant`)."""


def _grant(postgres_url: str, role: str, what: str) -> None:
    schema = sql.Identifier(postgres_url.rsplit("search_path%3D", 1)[1])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL(what).format(schema=schema, role=sql.Identifier(role)))


def test_a_read_only_role_is_refused_at_open_and_a_revoked_write_is_typed(
    postgres_url: str, role: tuple[str, str]
) -> None:
    name, url = role
    with PostgresConversationStorage(postgres_url, user="alice") as _:
        pass
    _grant(postgres_url, name, WRITER)
    _grant(postgres_url, name, "ALTER ROLE {role} SET default_transaction_read_only = on")
    with pytest.raises(ReadOnlyStoreError, match="cannot be written by this role"):
        PostgresConversationStorage(url, user="alice")
    _grant(postgres_url, name, "ALTER ROLE {role} RESET default_transaction_read_only")
    storage = PostgresConversationStorage(url, user="alice")
    try:
        assert storage.insert(turn("written"), "e", b"") is not None
        _grant(postgres_url, name, "REVOKE INSERT ON {schema}.context_turns FROM {role}")
        with pytest.raises(ReadOnlyStoreError, match="permission denied"):
            storage.insert(turn("refused"), "e", b"")
        assert [t.text for t in storage.load().turns] == ["written"]
    finally:
        storage.close()


def _back_to_schema_1(postgres_url: str) -> None:
    """The conversation tables as the first release made them: no turn keys."""
    PostgresConversationStorage(postgres_url, user="alice").close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP INDEX context_turns_by_key")
        conn.execute("ALTER TABLE context_turns DROP COLUMN key")
        conn.execute("UPDATE meta SET value = 1 WHERE key = 'conversation_schema_version'")


def test_tables_of_schema_1_are_migrated_to_keys_at_open(postgres_url: str) -> None:
    from synapse_retriever.conversation import ConversationMemory

    _back_to_schema_1(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO context_turns (user_id, session, role, text, at, surprise, repeats, "
            "embedder, embedding) SELECT id, 'default', 'user', 'An old turn.', 0, 1, 0, 'x', "
            "'' FROM context_users WHERE name = 'alice'"
        )
    with ConversationMemory(postgres_url, user="alice", background=False) as memory:
        assert [(t.text, t.key) for t in memory.turns()] == [("An old turn.", None)]
        assert memory.add_turn("A new one.", at=60, key="m") == memory.add_turn(
            "A new one.", key="m"
        )
        assert len(memory) == 2


def test_a_role_that_may_write_but_not_migrate_is_told_to_open_as_the_owner(
    postgres_url: str, role: tuple[str, str]
) -> None:
    # it was told to grant INSERT and UPDATE, which it had: adding a column takes the owner
    name, url = role
    _back_to_schema_1(postgres_url)
    _grant(postgres_url, name, WRITER)
    with pytest.raises(ReadOnlyStoreError, match="only their owner may migrate them"):
        PostgresConversationStorage(url, user="alice")
    with psycopg.connect(postgres_url) as conn:
        [(version,)] = conn.execute(
            "SELECT value FROM meta WHERE key = 'conversation_schema_version'"
        ).fetchall()
    assert version == 1  # nothing changed
    PostgresConversationStorage(postgres_url, user="alice").close()  # the owner migrates
    PostgresConversationStorage(url, user="alice").close()


@pytest.mark.parametrize("table", sorted(postgres.WRITES))
def test_a_role_missing_a_right_a_memory_needs_is_refused_at_open(
    postgres_url: str, role: tuple[str, str], table: str
) -> None:
    # without INSERT on context_entities or context_replays it opened, then every turn
    # naming a file, or every consolidation, raised ReadOnlyStoreError
    name, url = role
    PostgresConversationStorage(postgres_url).close()
    _grant(postgres_url, name, WRITER)
    _grant(postgres_url, name, f"REVOKE INSERT ON {{schema}}.{table} FROM {{role}}")
    with pytest.raises(ReadOnlyStoreError, match="cannot be written by this role"):
        PostgresConversationStorage(url, user="alice")


@pytest.mark.parametrize("table", sorted(postgres.TABLES | {"meta"}))
def test_a_role_that_may_not_read_a_table_a_memory_reads_is_refused_at_open(
    postgres_url: str, role: tuple[str, str], table: str
) -> None:
    # it opened, and its first read raised ReadOnlyStoreError: "cannot be written"
    name, url = role
    PostgresConversationStorage(postgres_url).close()
    _grant(postgres_url, name, WRITER)
    _grant(postgres_url, name, f"REVOKE SELECT ON {{schema}}.{table} FROM {{role}}")
    with pytest.raises(AccessDeniedError, match=f"may not read {table}, which a conv") as caught:
        PostgresConversationStorage(url, user="alice")  # meta: not the store's tables
    _grant(postgres_url, name, caught.value.args[0].rsplit(": ", 1)[1].replace(name, "{role}"))
    PostgresConversationStorage(url, user="alice").close()


def test_a_read_right_revoked_after_opening_is_access_denied_not_read_only(
    postgres_url: str, role: tuple[str, str]
) -> None:
    name, url = role
    PostgresConversationStorage(postgres_url).close()
    _grant(postgres_url, name, WRITER)
    with PostgresConversationStorage(url, user="alice") as storage:
        storage.insert(turn("written"), "e", b"")
        _grant(postgres_url, name, "REVOKE SELECT ON {schema}.context_turns FROM {role}")
        with pytest.raises(AccessDeniedError, match="may not read context_turns, which a conv"):
            storage.load()


def test_the_rights_the_team_memory_page_lists_are_enough(
    postgres_url: str, role: tuple[str, str]
) -> None:
    name, url = role
    PostgresConversationStorage(postgres_url).close()  # created once, by the schema's owner
    grants = (ROOT / "docs" / "how-to" / "team-memory.md").read_text(encoding="utf-8")
    block = grants.split("```sql\n", 1)[1].split("```", 1)[0]
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(block.replace("synapse", schema).replace("assistant", name).encode())
    with PostgresConversationStorage(url, user="alice") as storage:
        turn_id = storage.insert(turn("The deploy."), "e", b"", lambda i: mentions(i, "deploy"))
        with storage.consolidation_turn() as mine:
            assert mine and storage.consolidate([(turn_id, "c", "s")], [(turn_id, 0.5)], ["t"], 1)
        assert storage.traverse_edges(
            [(f"turn:{turn_id}", "topic:deploy", "MENTIONS")], lambda e: e._replace(traversals=1)
        )
        storage.replace_embeddings("other", [(turn_id, b"v")])
        assert storage.load().turns[0].summary == "s" and storage.themes() == [(1, ["t"])]


def _sql_blocks(page: str) -> list[str]:
    text = (ROOT / "docs" / "how-to" / page).read_text(encoding="utf-8")
    return [part.split("```", 1)[0] for part in text.split("```sql\n")[1:]]


def test_row_level_security_from_the_page_keeps_users_apart_in_the_database(
    postgres_url: str,
) -> None:
    # with the rights alone, any login opened any user's memory: the page's policies make
    # the database refuse it, and the library still works for each login's own user
    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    tag = random.randrange(1 << 30)
    group, alice, bob = (f"chat_{who}_{tag}" for who in ("assistant", "alice", "bob"))
    admin = psycopg.connect(postgres_url, autocommit=True)
    try:
        with PostgresConversationStorage(postgres_url, user=alice) as storage:
            storage.insert(turn("My locker code is 4711."), "e", b"")
        admin.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(group)))
        for person in (alice, bob):
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                    sql.Identifier(person), sql.Identifier(group)
                )
            )
        for block in _sql_blocks("team-memory.md")[:2]:  # the rights, then the policies
            admin.execute(block.replace("synapse", schema).replace("assistant", group).encode())
        as_alice, as_bob = (postgres_url.replace("postgres@", f"{p}@", 1) for p in (alice, bob))
        with PostgresConversationStorage(as_alice, user=alice) as storage:
            turn_id = storage.insert(turn("And my bike lock is 1234."), "e", b"")
            with storage.consolidation_turn() as mine:
                assert mine and storage.consolidate([(turn_id, "c", "s")], [], ["t"], 2)
            assert len(storage.load().turns) == 2
        with PostgresConversationStorage(as_bob, user=bob) as storage:
            assert storage.insert(turn("Bob's own turn."), "e", b"") is not None
            assert [t.text for t in storage.load().turns] == ["Bob's own turn."]
        with pytest.raises(AccessDeniedError, match=f"user {alice!r}"):
            PostgresConversationStorage(as_bob, user=alice)
        with psycopg.connect(as_bob) as raw:
            seen = raw.execute("SELECT text FROM context_turns ORDER BY id").fetchall()
        assert seen == [("Bob's own turn.",)]
    finally:
        admin.execute(
            sql.SQL("DROP OWNED BY {}, {}, {}").format(
                sql.Identifier(group), sql.Identifier(alice), sql.Identifier(bob)
            )
        )
        for name in (alice, bob, group):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        admin.close()


def test_a_newer_conversation_schema_is_refused(postgres_url: str) -> None:
    PostgresConversationStorage(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = 99 WHERE key = 'conversation_schema_version'")
    with pytest.raises(NotASynapseDatabaseError, match="schema version 99, newer than"):
        PostgresConversationStorage(postgres_url)


def test_a_table_dropped_under_an_open_memory_is_damage_not_a_raw_error(
    open_storage: Any, postgres_url: str
) -> None:
    # each read and write raised psycopg's UndefinedTable
    storage = open_storage("alice", listen=False)
    storage.insert(turn("The deploy."), "e", b"")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE context_turns CASCADE")
    missing = 'misses part of a synapse store\'s schema \\(relation "context_turns"'
    with pytest.raises(CorruptDatabaseError, match=missing):
        storage.load()
    with pytest.raises(CorruptDatabaseError, match=missing):
        storage.insert(turn("The rollback."), "e", b"")


def test_an_unknown_context_table_is_refused(postgres_url: str) -> None:
    PostgresConversationStorage(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE context_future (id int)")
    with pytest.raises(NotASynapseDatabaseError, match="context_future"):
        PostgresConversationStorage(postgres_url)


def test_a_store_and_conversation_memories_share_one_schema(postgres_url: str) -> None:
    with SynapseStore(postgres_url) as store:
        store.reinforce(["a", "b"], at=0)
    with PostgresConversationStorage(postgres_url, user="alice") as storage:
        storage.insert(turn("The deploy."), "e", b"")
    with SynapseStore(postgres_url) as store:  # the context_* tables are not foreign to it
        store.reinforce(["a", "b"], at=1)
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 2


def test_concurrent_openers_of_an_empty_schema_all_open_it(postgres_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_and_write(n: int) -> None:
        try:
            start.wait()
            with PostgresConversationStorage(f"{postgres_url}&application_name=o{n}",
                                             user=f"u{n % 2}") as storage:  # fmt: skip
                storage.insert(turn(f"turn {n}"), "e", b"")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with PostgresConversationStorage(postgres_url, user="u0") as storage:
        assert len(storage.load().turns) == 3


@pytest.mark.parametrize("listen", [True, False])
def test_changed_says_when_another_storage_wrote_its_users_rows_only(
    postgres_url: str, open_storage: Any, listen: bool
) -> None:
    alice = open_storage("alice", listen=listen)
    sentinel = open_storage("carol", listen=listen)  # heard after bob: his came first
    elsewhere = f"{postgres_url}&application_name=elsewhere"  # another process's connections
    writers = {u: PostgresConversationStorage(elsewhere, user=u) for u in ("alice", "bob", "carol")}
    try:
        if listen:
            _eventually(lambda: alice.listening)
        else:
            assert not alice.listening
        assert alice.changed() and not alice.changed()  # the first call is True
        assert sentinel.changed() and not sentinel.changed()
        alice.insert(turn("alice's own"), "e", b"")
        writers["bob"].insert(turn("bob's"), "e", b"")
        writers["carol"].insert(turn("carol's"), "e", b"")
        _eventually(sentinel.changed)
        assert not alice.changed()  # neither its own write nor bob's is news to alice
        writers["alice"].insert(turn("alice's elsewhere"), "e", b"")
        _eventually(alice.changed)
        assert not alice.changed()
        same_process = open_storage("alice", listen=listen)
        same_process.changed()
        same_process.insert(turn("alice's in this process"), "e", b"")
        assert alice.changed()  # at once: no wait for the notification
    finally:
        for writer in writers.values():
            writer.close()


def test_storages_of_one_process_share_their_connections(
    postgres_url: str, open_storage: Any
) -> None:
    before = connections_to(postgres_url)
    storages = [open_storage(f"user {n}") for n in range(40)]
    for storage in storages:
        storage.insert(turn("hello"), "e", b"")
        storage.load()
    assert connections_to(postgres_url) - before <= POOL_SIZE + 1  # the pool and a listener
    for storage in storages:
        storage.close()
    _eventually(lambda: connections_to(postgres_url) <= before)


def test_a_closed_storage_says_so_and_closes_once(open_storage: Any) -> None:
    storage = open_storage("alice")
    storage.close()
    storage.close()
    with pytest.raises(StorageUnavailableError, match="closed"):
        storage.insert(turn("late"), "e", b"")


# -- through ConversationMemory --------------------------------------------------------

BLOCKED = """
import sys, time
from synapse_retriever.conversation import Condensed, ContextConfig, ConversationMemory

class Stuck:
    def condense(self, text, *, chunks_ratio, summary_ratio):
        print("condensing", flush=True)  # the consolidation lock is held
        time.sleep(600)

config = ContextConfig(consolidation_interval=1000, consolidation_ages=(0, 100))
with ConversationMemory(sys.argv[1], user="alice", config=config, summarizer=Stuck(),
                        background=False) as memory:
    memory.consolidate()
"""


def test_a_consolidation_killed_midway_leaves_the_memory_whole_and_the_next_one_runs(
    postgres_url: str,
) -> None:
    from synapse_retriever.conversation import ContextConfig, ConversationMemory

    config = ContextConfig(consolidation_interval=1000, consolidation_ages=(0, 100))
    with ConversationMemory(postgres_url, user="alice", config=config) as memory:
        for n in range(12):
            memory.add_turn(f"Turn {n}: the deploy moves to Friday, says the release note.")
        before = memory.turns()
    child = subprocess.Popen(
        [sys.executable, "-c", BLOCKED, postgres_url], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "condensing"
        with ConversationMemory(postgres_url, user="alice", config=config) as other:
            assert other.consolidate() is False  # one consolidation per user at a time
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with ConversationMemory(postgres_url, user="alice", config=config) as memory:
        assert memory.turns() == before and memory.replays() == []  # nothing half-written

        def ran() -> bool:  # the dead process's lock goes with its connection
            return memory.consolidate()

        _eventually(ran)
        assert len(memory.replays()) == 1 and any(t.chunks for t in memory.turns())


def test_a_turn_naming_hundreds_of_people_is_stored_as_on_sqlite(
    postgres_url: str, tmp_path: Path
) -> None:
    # one name of all the lines was a key past PostgreSQL's index row (2,704 bytes)
    from synapse_retriever.conversation import ConversationMemory

    rng = random.Random(4)
    word = lambda: rng.choice("BDFGKLMPRST") + "".join(rng.choices("aeiou", k=6))  # noqa: E731
    listed = "Attendees:\n" + "\n".join(f"{word()} {word()}" for _ in range(300))
    blob = "see " + "_".join(["part"] * 800)  # one identifier of 4,000 characters
    for where in (postgres_url, str(tmp_path / "chat.db")):
        with ConversationMemory(where, user="alice", background=False) as memory:
            memory.add_turn(listed)
            memory.add_turn(blob)
            assert len(memory.turns()) == 2
            assert memory.retrieve(listed.split("\n")[7], k=1)[0].text == listed


def test_memories_of_two_users_in_one_database_never_see_each_other(postgres_url: str) -> None:
    from synapse_retriever.conversation import ConversationMemory

    with (
        ConversationMemory(postgres_url, user="alice") as alice,
        ConversationMemory(postgres_url, user="bob") as bob,
    ):
        alice.add_turn("My locker code is 4711; the deploy moves to Friday.", session="s")
        bob.add_turn("Bob's deploy moves to Monday.", session="s")
        assert [t.text for t in bob.turns()] == ["Bob's deploy moves to Monday."]
        found = bob.retrieve("locker code deploy Friday", k=10)
        assert [r.text for r in found] == ["Bob's deploy moves to Monday."]
        assert all(t.text.startswith("Bob") for t in bob.assemble("locker code", 1000))
        assert len(alice) == len(bob) == 1
        assert "turn:1" not in bob.graph() and "turn:2" not in alice.graph()


def test_concurrent_memories_of_four_users_lose_nothing_and_mix_nothing(postgres_url: str) -> None:
    """The issue's run (8 processes x 500 turns, 4 users) is `synapse-retriever bench
    writers --postgres URL`; here 4 x 40 over 2 users, through the same code."""
    from synapse_retriever.bench.conversation_writers import run_writers

    report = run_writers(postgres_url, processes=4, turns=40, users=2)
    assert report["failed_processes"] == 0 and report["replays"] > 0
    assert (report["lost"], report["duplicated"], report["out_of_order"]) == (0, 0, 0)
    assert report["cross_user"] == 0


def replay(where: str, turns: int, seed: int, user: str | None = None) -> list[list[Any]]:
    """A generated benchmark conversation stored in a memory at ``where`` as the bench
    replays one (consolidating as it goes), then each question asked where it is asked:
    ``retrieve`` in each mode and ``assemble``, as (turn id, score or level) lists, and
    again from a memory opened afresh (built from what the database holds)."""
    from synapse_retriever.bench.memory import generate_conversation
    from synapse_retriever.conversation import ConversationMemory

    conversation = generate_conversation(turns=turns, facts=4, sessions=4, seed=seed)
    asked = {q.asked_after: q.question for q in conversation.questions}
    found: list[list[Any]] = []

    def ask(memory: ConversationMemory, question: str, now: float) -> None:
        # turns by their place in the user's memory: ids also count other users' turns
        place = {t.id: n for n, t in enumerate(memory.turns())}
        node = {f"turn:{turn_id}": f"turn #{n}" for turn_id, n in place.items()}
        for mode in ("analytical", "conversational", "auto"):
            results = memory.retrieve(question, k=10, mode=mode, at=now)
            paths = [[(node.get(a, a), kind, node.get(b, b)) for a, kind, b in r.path]
                     for r in results]  # fmt: skip
            pairs = zip(results, paths, strict=True)
            found.append([(place[r.turn_id], r.score, r.origin, path) for r, path in pairs])
        context = memory.assemble(question, 300, at=now)
        found.append([(place[t.turn_id], t.level.value, t.text) for t in context])

    with ConversationMemory(where, user=user, background=False) as memory:
        for number, turn in enumerate(conversation.turns):
            if number in asked:
                ask(memory, asked[number], turn.at)
            memory.add_turn(turn.text, role=turn.role, session=turn.session, at=turn.at)
    now = conversation.turns[-1].at
    with ConversationMemory(where, user=user, background=False) as reopened:
        for question in asked.values():
            ask(reopened, question, now)
        found.append([(t.chunks, t.summary, t.boost) for t in reopened.turns()])
        found.append(reopened.replays())
    return found


def test_sqlite_and_postgresql_give_the_same_rankings_to_the_last_bit(
    postgres_url: str, tmp_path: Path
) -> None:
    """Ranking runs in the process on both (BM25 and the vector index are built from the
    user's turns), and the graph loads in one order: the result lists are identical, ids
    and scores, as the memory answers and after a reopen."""
    on_sqlite = replay(str(tmp_path / "chat.db"), 240, seed=3)
    on_postgres = replay(postgres_url, 240, seed=3, user="alice")
    assert len(on_sqlite) == len(on_postgres) > 20
    assert on_sqlite == on_postgres


def test_a_server_printing_floats_to_15_digits_changes_no_time_nor_strength(
    postgres_url: str, tmp_path: Path
) -> None:
    """``extra_float_digits = 0`` (a server's, a database's or a role's setting, or the
    client's ``PGOPTIONS``) prints a float8 to 15 digits: read back, two turns 1 µs apart
    had one time, a reopened memory showed other times and strengths than the live one,
    and another process refused a turn after the last as "earlier" than its rounded time."""
    from synapse_retriever.conversation import ConversationMemory

    rounding = postgres_url.replace("options=", "options=-cextra_float_digits%3D0%20", 1)
    assert stored(rounding, "SHOW extra_float_digits") == [("0",)]
    at = 1_700_000_000.123_456_7

    def chat(where: str) -> list[Any]:
        with ConversationMemory(where, background=False) as memory:
            memory.add_turn("The deploy of app.py moved to Fridays.", at=at)
            memory.add_turn("Noted: app.py deploys on Fridays.", role="assistant", at=at + 1e-6)
            live = [memory.turns(), sorted(memory.graph(at=at + 86_400).edges(data=True))]
            with ConversationMemory(where, background=False) as other:  # as in another process
                assert [other.turns(), sorted(other.graph(at=at + 86_400).edges(data=True))] == live
                other.add_turn("And the build of app.py?", at=at + 2e-6)
        with ConversationMemory(where, background=False) as reopened:
            turns = reopened.turns()
            assert turns[:2] == live[0] and len({t.at for t in turns}) == 3
            found = reopened.retrieve("when does app.py deploy?", k=3, at=at + 60)
            return [turns, sorted(reopened.graph(at=at + 86_400).edges(data=True)), found]

    assert chat(rounding) == chat(str(tmp_path / "chat.db"))


@pytest.mark.parametrize("field", ["text", "session", "speaker"])
def test_a_nul_character_is_refused_naming_its_field(open_storage: Any, field: str) -> None:
    storage = open_storage("alice")
    record = turn("Deploys move to Fridays.")
    setattr(record, field, "a\x00b")
    with pytest.raises(InvalidValueError, match=rf"^{field} holds a NUL character \(U\+0000\)"):
        storage.insert(record, "e", b"")
    assert storage.load().turns == []  # nothing was written


def test_a_memory_never_shows_the_password_of_its_url(postgres_url: str) -> None:
    # repr and .path echoed "postgresql://postgres:hunter2@...", and so did the adapters'
    from synapse_retriever.conversation import ConversationMemory

    secret = postgres_url.replace("postgres@", "postgres:hunter2@", 1)
    assert "hunter2" in secret
    with ConversationMemory(secret, user="alice", background=False) as memory:
        assert "hunter2" not in repr(memory) and "hunter2" not in memory.path
        assert "127.0.0.1" in memory.path
        with SynapseStore(secret) as store:
            assert store.path == memory.path  # shown the same way


def test_many_users_consolidating_at_once_hold_a_bounded_number_of_connections(
    postgres_url: str,
) -> None:
    # each consolidation held a connection of its own for its summarizer's calls: 110 users of
    # one process with a model of 2 s took 96 of the server's 100 connections
    from synapse_retriever.conversation import Condensed, ContextConfig, ConversationMemory

    release = threading.Event()
    inside: list[str] = []

    class Model:
        def condense(self, text: str, *, chunks_ratio: float, summary_ratio: float) -> Condensed:
            inside.append(text)
            release.wait(30)  # a model call, held until the connections are counted
            return Condensed(text, text[:20])

    config = ContextConfig(consolidation_interval=1000, consolidation_ages=(0, 100))
    users = 12
    memories = [
        ConversationMemory(
            postgres_url, user=f"u{n}", config=config, summarizer=Model(), background=False
        )
        for n in range(users)
    ]
    try:
        for memory in memories:
            for n in range(8):
                memory.add_turn(f"Turn {n}: the deploy of service{n}.py moves to Friday.")
        before = connections_to(postgres_url)
        ran: list[bool] = []
        threads = [
            threading.Thread(target=lambda m=m: ran.append(m.consolidate())) for m in memories
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        while len(inside) < postgres.CONSOLIDATION_CONNECTIONS and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # any consolidation beyond the bound would have its connection by now
        during = connections_to(postgres_url)
        release.set()
        for thread in threads:
            thread.join(60)
        assert during - before <= postgres.CONSOLIDATION_CONNECTIONS
        assert ran == [True] * users  # the others waited for a connection, then ran
    finally:
        release.set()
        for memory in memories:
            memory.close()


def _made_again(postgres_url: str) -> None:
    """The schema dropped and made again, empty, as a reset or a restore into it does."""
    _grant(postgres_url, "", "DROP SCHEMA {schema} CASCADE; CREATE SCHEMA {schema}")


def test_a_memory_open_across_a_reset_never_reads_or_writes_another_users_rows(
    postgres_url: str,
) -> None:
    # a new user's probe: a memory read its user's number once, at open; tables restored or
    # made again meanwhile gave that number to a new user, whose memory then held its turns
    from synapse_retriever.conversation import ConversationMemory

    with ConversationMemory(postgres_url, user="alice", background=False) as alice:
        alice.add_turn("alice: hi")
    carol = ConversationMemory(postgres_url, user="carol", background=False)  # number 2
    try:
        carol.add_turn("carol: my diagnosis is X")
        _made_again(postgres_url)
        # the same process opens the schema anew (its tables were gone: it refused to open)
        for name in ("dave", "erin"):  # erin is given number 2
            with ConversationMemory(postgres_url, user=name, background=False) as memory:
                memory.add_turn(f"{name}: hello")
        says = "the conversation tables were restored or made again while this memory"
        with pytest.raises(StorageUnavailableError, match=f"{says}.*nothing was (read|written)"):
            carol.add_turn("carol: my new medication is Y")
        with pytest.raises(StorageUnavailableError, match=says):
            carol.retrieve("diagnosis")
    finally:
        carol.close()
    with ConversationMemory(postgres_url, user="erin", background=False) as erin:
        assert [turn.text for turn in erin.turns()] == ["erin: hello"]
    with ConversationMemory(postgres_url, user="carol", background=False) as carol:
        assert carol.turns() == []  # open again: the reset emptied carol's memory


def test_a_write_under_a_number_given_to_another_user_is_refused(postgres_url: str) -> None:
    carol = PostgresConversationStorage(postgres_url, user="carol")
    try:
        _made_again(postgres_url)
        with PostgresConversationStorage(postgres_url, user="dave", timeout_s=4.0) as dave:
            dave.insert(turn("dave: hello"), "e", b"")  # dave has carol's number now
            with pytest.raises(StorageUnavailableError, match="nothing was written"):
                carol.insert(turn("carol: secret"), "e", b"")
            with pytest.raises(StorageUnavailableError, match="nothing was read"):
                carol.themes()
            assert [t.text for t in dave.load().turns] == ["dave: hello"]
    finally:
        carol.close()


def test_a_memory_open_across_a_restore_of_its_own_rows_says_so(
    postgres_url: str, tmp_path: Path
) -> None:
    # the restore keeps the user's number but not the turns added since the backup: the
    # memory, holding them, was refused as if another process's turn came first, 3 times
    from synapse_retriever.conversation import ConversationMemory

    backup = tmp_path / "memory.dump"
    with ConversationMemory(postgres_url, user="carol", background=False) as carol:
        carol.add_turn("carol: before the backup")
        dump(postgres_url, backup)
        carol.add_turn("carol: after the backup")
        _made_again(postgres_url)
        _grant(postgres_url, "", "DROP SCHEMA {schema}")
        restore(postgres_url, backup)
        with pytest.raises(StorageUnavailableError, match="restored or made again"):
            carol.add_turn("carol: after the restore")
    with ConversationMemory(postgres_url, user="carol", background=False) as carol:
        assert [turn.text for turn in carol.turns()] == ["carol: before the backup"]


def test_a_data_only_restore_under_an_open_memory_is_found_at_its_next_write(
    postgres_url: str, tmp_path: Path
) -> None:
    # a review's finding: a restore into the same tables keeps the user's number and the
    # tables' oid; the memory, holding turns the restore undid, was refused 3 times as if
    # another process had written first
    from synapse_retriever.conversation import ConversationMemory

    schema = postgres_url.rsplit("search_path%3D", 1)[1]
    backup = tmp_path / "data.dump"
    with ConversationMemory(postgres_url, user="bob", background=False) as bob:
        for i in range(3):
            bob.add_turn(f"fact {i}: service {i} deploys on Fridays.", at=i)
        dump(postgres_url, backup, data_only=True)
        for i in range(3, 6):
            bob.add_turn(f"fact {i}: service {i} deploys on Fridays.", at=i)  # undone
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            tables = [
                sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))
                for (name,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
                )
            ]
            conn.execute(
                sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(sql.SQL(", ").join(tables))
            )
        restore(postgres_url, backup, data_only=True)
        with pytest.raises(StorageUnavailableError, match=r"the last is 3, not 6.*open it again"):
            bob.add_turn("after the restore", at=10)
    with ConversationMemory(postgres_url, user="bob", background=False) as bob:
        assert len(bob) == 3


def test_a_write_whose_user_number_is_gone_says_to_open_the_memory_again(
    postgres_url: str,
) -> None:
    # a review's finding: a write failing on the foreign key of a user number that no longer
    # exists said only that the server refused it
    zed = PostgresConversationStorage(postgres_url, user="zed")
    bob = PostgresConversationStorage(postgres_url, user="bob")  # number 2
    try:
        _made_again(postgres_url)
        with PostgresConversationStorage(postgres_url, user="alice", timeout_s=4.0):
            pass  # number 1: bob's is no one's
        with pytest.raises(StorageUnavailableError, match=r"restored or made again.*open it"):
            bob.consolidate([], [], ["deploys"], through=1)
    finally:
        bob.close()
        zed.close()
