"""PostgreSQL behind a connection pooler in transaction mode (PgBouncer, ``pool_mode =
transaction``): each transaction may run on another server backend, shared with the
pooler's other clients.

A real PgBouncer runs on a free port in a temporary directory, in front of the test server
(store_backends.py), with a database of its own (it passes no ``options``, so no
``search_path``: the stores live in ``public``). A write through it still fails within
``busy_timeout_s`` while another connection holds a lock, nothing the library sets stays on
a backend for the pooler's other clients, and a store and a conversation memory write,
reopen and recall through it, each transaction on a new backend.

``.ci/run`` installs pgbouncer where it is missing. Elsewhere the tests skip and say how to
install it, except under CI (``CI`` set), where a missing pgbouncer fails them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from store_backends import POSTGRES, ended, tool, with_database

from synapse_retriever import Operations, SynapseConfig, SynapseStore, WriteConflictError
from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.mirror import mirror as mirror_module
from synapse_retriever.persistence import postgres as postgres_module
from synapse_retriever.persistence.conversation.postgres import PostgresConversationStorage
from synapse_retriever.persistence.conversation.protocol import TurnRecord
from synapse_retriever.persistence.postgres import PROBE_MISSES, Listener, PostgresStorage

_T = TypeVar("_T")
DAY = 86_400.0
BUSY_TIMEOUT_S = 0.5
HANG_S = 10.0
"""A call still running this long after a lock was taken waits without bound."""
SERVERS = 2
"""Server connections the pooler keeps to the test database (``default_pool_size``)."""
SEEDS = [("a", 1.0), ("x", 0.5)]
"""A recall's seeds: ``x`` is not in the graph, ``a``'s neighbour takes its place."""


def _pgbouncer() -> str:
    # Debian installs it in /usr/sbin, on root's PATH but not always on others'
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")
    return tool(found, "pgbouncer: apt-get install -y pgbouncer")


@pytest.fixture
def database() -> Iterator[str]:
    """A throwaway database of the test server (its name), dropped afterwards."""
    name = f"synapse_pooled_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=10) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield name
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def _pooler(database: str, directory: Path, **settings: object) -> Iterator[str]:
    """A PgBouncer in transaction mode in ``directory``, in front of ``database`` on the test
    server with :data:`SERVERS` server connections at most; the URL of ``database`` through
    it. Stopped on leaving."""
    binary = _pgbouncer()
    server = urlsplit(POSTGRES)
    user = server.username or "postgres"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = f"host={server.hostname or '127.0.0.1'} port={server.port or 5432} dbname={database}"
    if server.password:
        target += f" password={server.password}"
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    ini = directory / "pgbouncer.ini"
    ini.write_text(
        "\n".join(
            [
                "[databases]",
                f"{database} = {target}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {directory / 'userlist.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {SERVERS}",
                "max_client_conn = 100",
                *(f"{key} = {value}" for key, value in settings.items()),
            ]
        )
        + "\n"
    )
    # it refuses to run as root (a container, CI): then it reads its files and drops to nobody
    command = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(ini)]
    log = directory / "pgbouncer.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = urlunsplit(("postgresql", f"{user}@127.0.0.1:{port}", f"/{database}", "", ""))
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not start:\n{log.read_text()}")
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def pooler(database: str, tmp_path: Path) -> Iterator[str]:
    """The URL of ``database`` through a pooler that keeps its server connections."""
    with _pooler(database, tmp_path) as url:
        yield url


@pytest.fixture
def fresh_backends(database: str, tmp_path: Path) -> Iterator[str]:
    """The URL of ``database`` through a pooler that closes each server connection after one
    transaction (``server_lifetime = 0``): every transaction runs on a backend that ran
    nothing before, what a pooler's clients get at any time, here at every transaction."""
    with _pooler(database, tmp_path, server_lifetime=0) as url:
        yield url


def _turn(text: str, at: float = 0.0) -> TurnRecord:
    return TurnRecord(0, "s", "user", text, at, 1.0, 0, 0.0, None, None, None)


def test_a_store_write_through_the_pooler_fails_within_busy_timeout_s_on_a_held_lock(
    fresh_backends: str, database: str
) -> None:
    config = SynapseConfig(operations=Operations(busy_timeout_s=BUSY_TIMEOUT_S))
    storage = PostgresStorage(fresh_backends, listen=False, timeout_s=BUSY_TIMEOUT_S)
    with SynapseStore(storage=storage, config=config) as store:
        store.reinforce(["a", "b"], at=0)
        with psycopg.connect(with_database(POSTGRES, database)) as locker:
            locker.execute("LOCK TABLE edges IN ACCESS EXCLUSIVE MODE")  # as VACUUM FULL
            error = ended(lambda: store.reinforce(["a", "b"], at=DAY), locker.rollback, HANG_S)
        assert isinstance(error, WriteConflictError), error
        assert "nothing was written" in str(error)
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 1
        assert store.reinforce(["a", "b"], at=DAY) == 1  # the lock released: written


def test_a_conversation_write_through_the_pooler_fails_within_busy_timeout_s_on_a_held_lock(
    fresh_backends: str, database: str
) -> None:
    storage = PostgresConversationStorage(
        fresh_backends, user="alice", timeout_s=BUSY_TIMEOUT_S, listen=False
    )
    try:
        assert storage.insert(_turn("The deploy."), "e", b"") is not None
        with psycopg.connect(with_database(POSTGRES, database)) as locker:
            locker.execute("LOCK TABLE context_turns IN ACCESS EXCLUSIVE MODE")
            error = ended(
                lambda: storage.insert(_turn("Fridays."), "e", b""), locker.rollback, HANG_S
            )
        assert isinstance(error, WriteConflictError), error
        assert [t.text for t in storage.load().turns] == ["The deploy."]
    finally:
        storage.close()


def test_one_consolidation_per_user_at_a_time_through_the_pooler(fresh_backends: str) -> None:
    # a session's advisory lock, taken in autocommit, stayed on the backend the pooler
    # handed out for that statement (here closed at once): the second turn got it too
    first, second = (
        PostgresConversationStorage(fresh_backends, user="alice", listen=False) for _ in range(2)
    )
    try:
        with first.consolidation_turn() as mine:
            assert mine
            with second.consolidation_turn() as theirs:
                assert not theirs
        with second.consolidation_turn() as theirs:  # released at the block's end
            assert theirs
    finally:
        first.close()
        second.close()


def test_a_memory_that_polls_sees_another_processs_turns_through_the_pooler(pooler: str) -> None:
    # a LISTEN through the pooler lands on a backend it hands to others and hears nothing:
    # listen=False reads the user's writes mark instead
    with ConversationMemory(pooler, background=False, user="alice", listen=False) as memory:
        memory.add_turn("I moved the deploy to Fridays.", at=0)
        assert [t.text for t in memory.turns()] == ["I moved the deploy to Fridays."]
        subprocess.run(
            [sys.executable, "-c", _ANOTHER_PROCESS, pooler], check=True, timeout=60, env=os.environ
        )
        assert [t.text for t in memory.turns()][-1] == "Noted: Fridays."


@pytest.fixture(autouse=True)
def _short_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes of half a second: a listener gives up on the pooler in 2 s, not 6."""
    monkeypatch.setattr(postgres_module, "PROBE_S", 0.5)


def _decided(listener: Listener | None) -> None:
    """Wait until ``listener`` has heard its probe or given up."""
    assert listener is not None
    deadline = time.monotonic() + PROBE_MISSES * (postgres_module.PROBE_S + 5) + 10
    while not listener.listening and listener._thread.is_alive():
        assert time.monotonic() < deadline, "the listener neither listens nor gave up"
        time.sleep(0.02)


def test_a_store_that_listens_through_the_pooler_polls_and_sees_another_writer(
    pooler: str, caplog: pytest.LogCaptureFixture
) -> None:
    # its LISTEN went to a backend the pooler hands to others: it heard nothing, and recall
    # kept what the store held when it opened, however long the wait
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    with SynapseStore(pooler, config=config) as reader, SynapseStore(pooler) as writer:
        _decided(reader._storage._listener)  # type: ignore[attr-defined]
        assert not reader._storage.listening  # type: ignore[attr-defined]
        assert "a LISTEN hears nothing here" in caplog.text
        writer.reinforce(["a", "b"], at=0)
        assert reader.weight("a", "b", at=0) == pytest.approx(0.3)


def test_a_memory_that_listens_through_the_pooler_polls_and_sees_another_processs_turns(
    pooler: str,
) -> None:
    with ConversationMemory(pooler, background=False, user="alice") as memory:
        memory.add_turn("I moved the deploy to Fridays.", at=0)
        _decided(memory._storage._database.listener)  # type: ignore[attr-defined]
        subprocess.run(
            [sys.executable, "-c", _ANOTHER_PROCESS, pooler], check=True, timeout=60, env=os.environ
        )
        assert [t.text for t in memory.turns()][-1] == "Noted: Fridays."


_ANOTHER_PROCESS = """
import sys
from synapse_retriever.conversation import ConversationMemory
with ConversationMemory(sys.argv[1], background=False, user="alice", listen=False) as memory:
    memory.add_turn("Noted: Fridays.", role="assistant", at=60)
"""


def _use_everything(url: str) -> None:
    """A store and a conversation memory opened, written and read through ``url``."""
    storage = PostgresStorage(url, listen=False)
    with SynapseStore(storage=storage, config=SynapseConfig.actr(refresh_interval_s=0.0)) as store:
        store.reinforce(["a", "b", "c"], at=0)
        hits = [h.id for h in store.recall(SEEDS, at=0)]
        assert hits[0] == "a" and hits[1] in {"b", "c"}  # a neighbour, from the graph
    memory = ConversationMemory(url, background=False, user="alice", listen=False)
    with memory:
        memory.add_turn("I moved the deploy to Fridays.", at=0)
        assert memory.retrieve("deploy?")


def test_nothing_the_library_sets_stays_on_the_pooler_backends(pooler: str) -> None:
    _use_everything(pooler)
    with contextlib.ExitStack() as stack:  # every server connection at once: one per client
        clients = [stack.enter_context(psycopg.connect(pooler)) for _ in range(SERVERS)]
        seen = [
            client.execute("SELECT pg_backend_pid(), current_setting('lock_timeout')").fetchone()
            for client in clients
        ]
    assert len({pid for pid, _ in seen}) == SERVERS  # each backend the library may have used
    assert [setting for _, setting in seen] == ["0"] * SERVERS


def test_a_store_and_a_conversation_memory_write_reopen_and_recall_through_the_pooler(
    fresh_backends: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 0)  # a snapshot, however small

    def opened() -> SynapseStore:
        storage = PostgresStorage(fresh_backends, listen=False)
        return SynapseStore(storage=storage, config=SynapseConfig.actr(refresh_interval_s=0.0))

    with opened() as store:  # from the rows
        assert store._mirror.snapshot_version is None
        store.reinforce(["a", "b", "c"], at=0)
        store.reinforce(["a", "b"], at=DAY, namespace="shared")
        expected = [h.id for h in store.recall(SEEDS, at=DAY)]
        assert expected[0] == "a" and "b" in expected  # b from the graph
    with opened() as store:  # from the snapshot written at the close
        assert store._mirror.snapshot_version is not None
        assert [h.id for h in store.recall(SEEDS, at=DAY)] == expected
        store.reinforce(["b", "d"], at=DAY)
    with SynapseStore(with_database(POSTGRES, database)) as direct:  # written, really
        assert direct.edge("b", "d") is not None
        edge = direct.edge("a", "b", namespace="shared")
        assert edge is not None and edge.activation_count == 1

    with ConversationMemory(fresh_backends, background=False, user="alice", listen=False) as memory:
        memory.add_turn("I moved the deploy to Fridays.", at=0)
        memory.add_turn("Noted: Fridays.", role="assistant", at=60)
    with ConversationMemory(fresh_backends, background=False, user="alice", listen=False) as memory:
        assert [t.text for t in memory.turns()] == [
            "I moved the deploy to Fridays.",
            "Noted: Fridays.",
        ]
        assert "Fridays" in memory.retrieve("deploy?")[0].text


def test_skips_only_without_pgbouncer_and_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="needs pgbouncer"):
        _pgbouncer()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="needs pgbouncer"):
        _pgbouncer()
