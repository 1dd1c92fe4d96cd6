"""A big write's checkpoint runs after its commit, in a thread of its own
(``SQLiteStorage._checkpoint_after``): on a real SQLite file, the log still starts again
after every big write, holds what it did before, and the file holds every write."""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from synapse_retriever import CoActivation, Edge, SynapseStore
from synapse_retriever.persistence import sqlite as storage_module
from synapse_retriever.persistence.sqlite import AUTOCHECKPOINT_PAGES, SQLiteStorage
from synapse_retriever.persistence.transfer import merge_edges


def batch(start: int) -> list[CoActivation]:
    """20 events of 12 new nodes each: 1,320 new pairs, scattered over the file's pages."""
    return [
        CoActivation([f"n{start + 12 * i + k:06d}" for k in range(12)], at=1000.0)
        for i in range(20)
    ]


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "BIG_WRITE", 100)  # each batch here is a big write


def log_bytes(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


def test_the_log_starts_again_after_every_big_write(tmp_path: Path, big: None) -> None:
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce_many(batch(0))
        store._storage._settle()  # type: ignore[attr-defined]
        one = log_bytes(path)
        for start in range(10_000, 50_000, 10_000):
            store.reinforce_many(batch(start))
        store._storage._settle()  # type: ignore[attr-defined]
        # each batch's pages were copied into the file before the next began: the log was
        # written again from its start (without the checkpoint, five batches' pages: the
        # commit checkpoints only past AUTOCHECKPOINT_PAGES)
        assert log_bytes(path) < 2 * one
        db = store._storage._db  # type: ignore[attr-defined]
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == AUTOCHECKPOINT_PAGES
        # read by another connection before this one closes: the file and its log hold
        # every batch
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT count(*) FROM edges").fetchone()[0] == 5 * 1_320


def test_the_log_starts_again_after_big_writes_read_ahead_of_their_transaction(
    tmp_path: Path, big: None
) -> None:
    """Batches of names the store knows read their pairs' rows ahead of their transaction
    (``read_ahead``) and tell it their size (``expect``): their checkpoints run after their
    commits all the same, and the log starts again after each."""
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce_many(batch(0))
        store.reinforce_many(batch(0))  # every name known: read ahead
        store._storage._settle()  # type: ignore[attr-defined]
        one = log_bytes(path)
        for _ in range(4):
            store.reinforce_many(batch(0))
        store._storage._settle()  # type: ignore[attr-defined]
        assert log_bytes(path) < 2 * one


def test_the_file_holds_what_a_store_in_memory_learns(tmp_path: Path, big: None) -> None:
    path = tmp_path / "s.db"
    batches = [batch(0), batch(100), batch(0), batch(200), batch(100)]  # pairs met again
    memory = SynapseStore(":memory:")
    with SynapseStore(path) as store:
        for events in batches:
            store.reinforce_many(events)
            memory.reinforce_many(events)
    names = [f"n{start + k:06d}" for start in (0, 100, 200) for k in range(0, 240, 7)]
    with SynapseStore(path) as reopened:
        pairs = list(itertools.pairwise(names))
        assert sum(memory.edge(a, b) is not None for a, b in pairs) > 20
        for a, b in pairs:
            assert reopened.edge(a, b) == memory.edge(a, b)
    memory.close()


def test_close_and_a_checkpoint_wait_for_the_running_one(tmp_path: Path, big: None) -> None:
    path = tmp_path / "s.db"
    store = SynapseStore(path)
    store.reinforce_many(batch(0))
    store._storage.checkpoint()  # type: ignore[attr-defined]  # TRUNCATE: not refused as busy
    assert log_bytes(path) == 0
    store.reinforce_many(batch(10_000))
    store.close()
    assert not Path(f"{path}-wal").exists()  # the last close copied and removed it
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM edges").fetchone()[0] == 2 * 1_320


def test_a_checkpoint_that_cannot_run_raises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    storage = SQLiteStorage(tmp_path / "s.db")
    storage._db.close()  # its connection gone: the checkpoint's statement fails
    storage._pending = True
    storage._checkpoint_after()
    assert storage._checkpointing is not None
    storage._checkpointing.join()
    assert raised == [] and not storage._pending


class SlowThread(threading.Thread):
    """A checkpoint's thread that starts its work late: whatever comes first runs it."""

    def run(self) -> None:
        time.sleep(0.3)
        super().run()


def slow_and_traced(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SynapseStore, list[str]]:
    """A store on ``path`` whose checkpoint threads start late, and the statements it runs."""
    monkeypatch.setattr(storage_module.threading, "Thread", SlowThread)
    store = SynapseStore(path)
    statements: list[str] = []
    store._storage._db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    return store, statements


def passive_then_begins(statements: list[str]) -> tuple[list[int], list[int]]:
    """Where the checkpoints and the write transactions' begins came, in order."""
    return (
        [i for i, s in enumerate(statements) if s.endswith("wal_checkpoint(PASSIVE)")],
        [i for i, s in enumerate(statements) if s == "BEGIN IMMEDIATE"],
    )


def test_the_next_write_begins_after_the_checkpoint_even_before_its_thread(
    tmp_path: Path, big: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, statements = slow_and_traced(tmp_path / "s.db", monkeypatch)
    store.reinforce_many(batch(0))
    store.reinforce_many(batch(10_000))  # at once: the first's thread is still asleep
    checkpoints, begins = passive_then_begins(statements)
    assert len(begins) == 2 and checkpoints[0] < begins[1]  # the first's, before the second
    thread = store._storage._checkpointing  # type: ignore[attr-defined]
    store.close()
    assert not thread.is_alive()  # close waited for the second's thread
    # each batch's checkpoint ran once: by the second write, then by the second's thread
    passive = [s for s in statements if s.endswith("wal_checkpoint(PASSIVE)")]
    assert len(passive) == 2


def test_a_write_that_waits_for_another_process_runs_the_checkpoint_once(
    tmp_path: Path, big: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    store, statements = slow_and_traced(path, monkeypatch)
    with store:
        store.reinforce_many(batch(0))
        one = log_bytes(path)
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's write, held for a moment
        threading.Timer(0.2, lambda: other.execute("ROLLBACK")).start()
        store.reinforce_many(batch(10_000))  # waits for it, then writes
        other.close()
        checkpoints, begins = passive_then_begins(statements)
        assert len(checkpoints) == 1 and checkpoints[0] < begins[-1]  # once, before it began
        assert log_bytes(path) < 2 * one  # the log started again


def test_a_snapshot_is_written_after_the_checkpoint_too(
    tmp_path: Path, big: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapse_retriever.mirror import mirror as mirror_module

    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 0)  # a snapshot at every close
    store, statements = slow_and_traced(tmp_path / "s.db", monkeypatch)
    store.reinforce_many(batch(0))
    store.close()  # writes the snapshot at once: the thread is still asleep
    checkpoints, begins = passive_then_begins(statements)
    assert any(s.startswith("INSERT INTO snapshot") for s in statements)
    assert len(checkpoints) == 1 and checkpoints[0] < begins[-1]


def test_a_checkpoint_whose_thread_cannot_start_runs_at_once(
    tmp_path: Path, big: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: threading.Thread) -> None:  # as at the interpreter's exit (3.12)
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(storage_module.threading.Thread, "start", refused)
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce_many(batch(0))  # committed, and reported so
        one = log_bytes(path)
        assert not store._storage._pending  # type: ignore[attr-defined]
        store.reinforce_many(batch(10_000))
        assert log_bytes(path) < 2 * one  # the log started again
        assert store.edge("n000000", "n000001") is not None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM edges").fetchone()[0] == 2 * 1_320


def test_writers_in_two_threads_each_begin_after_the_last_checkpoint(
    tmp_path: Path, big: None
) -> None:
    path = tmp_path / "s.db"
    storage = SQLiteStorage(path)

    def edges(seed: int) -> list[Edge]:
        return [
            Edge(f"s{seed}-{i}", f"t{seed}-{i}", "personal", 0.5, 1, 30.0, 1000.0, 1000.0)
            for i in range(1_500)
        ]

    merge_edges(storage, edges(0))
    storage._settle()
    one = log_bytes(path)

    def write(thread: int) -> None:
        for r in range(1, 16):
            merge_edges(storage, edges(1000 * thread + r))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # a writer waiting for the lock as another committed ran that one's checkpoint first:
    # the log holds one write's pages, not two
    assert log_bytes(path) < 1.5 * one
    storage.close()


def test_a_small_write_checkpoints_in_its_commit_as_before(tmp_path: Path) -> None:
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce(["a", "b", "c"], at=0)
        assert store._storage._checkpointing is None  # type: ignore[attr-defined]


KILLED_IN_ITS_CHECKPOINT = """
import os, signal, sys
from synapse_retriever import CoActivation, Edge, SynapseStore
from synapse_retriever.persistence import sqlite
sqlite.BIG_WRITE = 100
store = SynapseStore(sys.argv[1])
def batch(start):
    return [CoActivation([f"n{start + 12 * i + k:06d}" for k in range(12)], at=1000.0)
            for i in range(20)]
store.reinforce_many(batch(0))
store._storage._settle()
def kill(statement):
    if statement.startswith("PRAGMA wal_checkpoint"):  # the thread's, or the next call's
        os.kill(os.getpid(), signal.SIGKILL)
store._storage._db.set_trace_callback(kill)
store.reinforce_many(batch(10_000))
store._storage._settle()
"""


def test_a_process_killed_as_its_checkpoint_starts_keeps_every_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "killed.db"
    result = subprocess.run(
        [sys.executable, "-c", KILLED_IN_ITS_CHECKPOINT, str(path)], check=False
    )
    assert result.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with SynapseStore(path) as store:  # both batches: the second's commit was in the log
        assert store.graph(at=1000.0).number_of_edges() == 2 * 1_320
        store.reinforce_many(batch(20_000))  # and it is writable again
