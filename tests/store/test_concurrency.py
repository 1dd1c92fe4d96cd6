"""Several processes on one file: no lost update, no torn write, shared learning is seen."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from synapse_retriever import (
    ClosedError,
    CoActivation,
    SynapseConfig,
    SynapseStore,
    WriteConflictError,
)
from synapse_retriever.persistence.sqlite import SQLiteStorage

ROUNDS = 60
DAY = 86_400.0


def _hammer(path: str, worker: int, start: Any) -> None:
    with SynapseStore(path) as store:
        start.wait(30)  # both processes are up and open: now race
        for i in range(ROUNDS):
            # the shared pair races; the private pair proves each event committed whole
            store.reinforce(["shared/a", "shared/b", f"w{worker}/{i}"], strength=0.05)


def test_two_processes_reinforcing_at_once_lose_no_update(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    SynapseStore(path).close()
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(2)
    workers = [ctx.Process(target=_hammer, args=(path, w, start)) for w in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    with SynapseStore(path) as store:
        edge = store.edge("shared/a", "shared/b")
        assert edge is not None
        assert edge.activation_count == 2 * ROUNDS
        for w in (1, 2):
            for i in range(ROUNDS):
                assert store.edge("shared/a", f"w{w}/{i}") is not None


BATCH_NODES = [f"n{i:02d}" for i in range(60)]


def _batch_events() -> list[list[str]]:
    """40 events of 10 of 60 nodes: about 1,100 distinct pairs, a big batch that reads its
    pairs' rows from the mirror, ahead of its transaction once every name is known."""
    rng = random.Random(7)
    return [rng.sample(BATCH_NODES, 10) for _ in range(40)]


def _batches(path: str, start: Any, rounds: int) -> None:
    with SynapseStore(path) as store:
        start.wait(30)
        for _ in range(rounds):
            store.reinforce_many([CoActivation(nodes) for nodes in _batch_events()])


def test_two_processes_writing_big_batches_at_once_lose_no_update(tmp_path: Path) -> None:
    """Big batches of two processes on the same pairs, at once: each reads its rows from its
    mirror, before its transaction or inside it after the other's commits, and every
    reinforcement counts."""
    path = str(tmp_path / "batches.db")
    SynapseStore(path).close()
    rounds = 12
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(2)
    workers = [ctx.Process(target=_batches, args=(path, start, rounds)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    met = Counter(
        tuple(sorted(pair))
        for nodes in _batch_events()
        for pair in itertools.combinations(nodes, 2)
    )
    assert len(met) > 1_000
    with SynapseStore(path) as store:
        counts = {pair: store.edge(*pair) for pair in met}
    assert {pair: edge.activation_count if edge else 0 for pair, edge in counts.items()} == {
        pair: 2 * rounds * n for pair, n in met.items()
    }


def test_a_long_running_store_sees_another_process_learn(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader = SynapseStore(path, config=SynapseConfig.actr(refresh_interval_s=0.0))
    assert reader.activate(["jwt"]) == {}
    script = textwrap.dedent(
        f"""
        from synapse_retriever import SynapseStore
        with SynapseStore({str(path)!r}) as s:
            s.reinforce(["jwt", "keys"], strength=2.0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert set(reader.activate(["jwt"])) == {"keys"}
    # and its own next write builds on the other process's row, read inside the transaction
    reader.reinforce(["jwt", "keys"], strength=1.0)
    edge = reader.edge("jwt", "keys")
    assert edge is not None and edge.activation_count == 2
    reader.close()


def test_a_read_looks_for_other_commits_at_most_every_refresh_interval_a_write_always(
    tmp_path: Path,
) -> None:
    # as docs/guarantees.md says: a read may miss the last refresh_interval_s of commits
    path = tmp_path / "shared.db"
    with SynapseStore(path, config=SynapseConfig.actr(refresh_interval_s=3600.0)) as reader:
        assert reader.edge("jwt", "keys") is None  # it looked at open
        with SynapseStore(path) as other:
            other.reinforce(["jwt", "keys"])
        assert reader.edge("jwt", "keys") is None  # within the interval: not looked again
        reader.reinforce(["a", "b"])  # a write catches up first
        edge = reader.edge("jwt", "keys")
        assert edge is not None and edge.activation_count == 1


@pytest.mark.parametrize(
    "config",
    [SynapseConfig.actr(refresh_interval_s=0.0), SynapseConfig.published(refresh_interval_s=0.0)],
    ids=["default", "published"],
)
def test_a_long_running_store_recalls_what_another_process_learned(
    tmp_path: Path, config: SynapseConfig
) -> None:
    path = tmp_path / "shared.db"
    reader = SynapseStore(path, config=config)
    hits = [("jwt", 0.9), ("login", 0.8), ("views", 0.7), ("docs", 0.6)]
    assert [h.id for h in reader.recall(hits)] == [node for node, _ in hits]  # cold
    script = textwrap.dedent(
        f"""
        from synapse_retriever import SynapseStore
        with SynapseStore({str(path)!r}) as s:
            s.reinforce(["jwt", "keys"], strength=2.0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    # published: keys gets 0.6 × 0.6 = 0.36 >= 0.15 from the seed jwt; by default, its base
    # level (used just now, 5.68) beats docs, never used (−6 + 3): keys takes docs's slot
    assert [h.id for h in reader.recall(hits)] == ["jwt", "login", "views", "keys"]
    reader.close()


KILLER = """
import os, signal, sys
from synapse_retriever import SynapseStore
from synapse_retriever.persistence import sqlite as storage

store = SynapseStore(sys.argv[1])
store.reinforce(["a", "b"], at=0)          # committed before the crash

real_update = storage._SQLiteTransaction.update
def update_then_die(self, rows):
    real_update(self, rows)                 # new and updated rows are written, not committed
    os.kill(os.getpid(), signal.SIGKILL)
storage._SQLiteTransaction.update = update_then_die
store.reinforce(["a", "b", "c", "d"], at=86400)
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_a_process_killed_mid_reinforce_leaves_the_database_as_before(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    result = subprocess.run([sys.executable, "-c", KILLER, str(path)], check=False)
    assert result.returncode == -signal.SIGKILL
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    with SynapseStore(path) as store:
        edge = store.edge("a", "b")
        assert edge is not None
        assert (edge.activation_count, edge.last_reinforced_at) == (1, 0.0)
        assert store.edge("a", "c") is None
        assert store.graph(at=0).number_of_edges() == 1
        store.reinforce(["a", "b"], at=86400)  # and it is writable again


def test_a_sweep_by_another_process_removes_the_edges_here_too(tmp_path: Path) -> None:
    path = tmp_path / "swept.db"
    reader = SynapseStore(path, config=SynapseConfig.actr(refresh_interval_s=0.0))
    reader.reinforce(["a", "b"], at=0)
    assert set(reader.activate(["a"], at=0)) == {"b"}
    script = textwrap.dedent(
        f"""
        from synapse_retriever import SynapseStore
        with SynapseStore({str(path)!r}) as s:
            assert s.decay(at=200 * 86400).pruned == 1
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    # read at t=0, before the sweep's time: only the tombstone can tell the edge is gone
    assert reader.activate(["a"], at=0) == {}
    assert reader.edge("a", "b") is None
    reader.close()


@pytest.mark.parametrize("when", ["opening from its snapshot", "a later look"])
def test_a_commit_made_as_a_read_ends_is_seen_by_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    from synapse_retriever.mirror import mirror as mirror_module

    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 0)  # a snapshot, however small
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    with SynapseStore(path, config=config) as first:
        first.reinforce(["a", "b"], at=0)  # and a snapshot at close
    writer = SynapseStore(path, config=config)
    writer.reinforce(["c", "d"], at=DAY)  # after the snapshot: read from the log

    storage = SQLiteStorage(path)
    late: list[int] = []

    def commit_as_the_read_ends(statement: str) -> None:
        # SQLite calls this as the reader's statement starts: another connection's commit
        # lands after the reader's read, before its read transaction ends
        if statement == "COMMIT" and not late:
            late.append(writer.reinforce(["e", "f"], at=2 * DAY))

    if when == "opening from its snapshot":
        storage._db.set_trace_callback(commit_as_the_read_ends)
        reader = SynapseStore(config=config, storage=storage)
        assert reader._mirror.snapshot_version is not None
    else:
        reader = SynapseStore(config=config, storage=storage)
        writer.reinforce(["c", "g"], at=DAY)
        storage._db.set_trace_callback(commit_as_the_read_ends)
        assert reader.edge("c", "g") is not None  # the look that reads it
    storage._db.set_trace_callback(None)
    assert late == [1]  # committed while the reader's read ended
    assert reader.edge("c", "d") is not None
    # no commit after it: the next look alone must find it (it was taken as read already)
    assert reader.edge("e", "f") is not None
    with SynapseStore(path, config=config) as fresh:
        hits = [("a", 0.9), ("e", 0.5), ("q", 0.4)]
        assert reader.recall(hits, at=3 * DAY) == fresh.recall(hits, at=3 * DAY)
    reader.close()
    writer.close()


def test_a_failed_write_does_not_hide_another_stores_next_commit(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    mine, theirs = SynapseStore(path, config=config), SynapseStore(path, config=config)
    mine.reinforce(["x", "y"], at=0)
    theirs.reinforce(["x", "y"], at=100)  # not seen here yet
    with pytest.raises(ValueError, match="earlier"):
        mine.reinforce(["x", "y"], at=50, late="raise")  # caught up in its transaction: rolled back
    theirs.reinforce(["c", "d"], at=200)  # takes the version number the rollback freed
    theirs.use(["u"], at=200)
    assert mine.edge("c", "d") is not None
    with SynapseStore(path, config=config) as fresh:
        hits = [("c", 0.9), ("q", 0.5)]
        assert mine.recall(hits, at=300) == fresh.recall(hits, at=300)
    mine.close()
    theirs.close()


def test_a_store_that_looked_before_the_logs_begin_reloads_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapse_retriever.persistence import sqlite as storage

    monkeypatch.setattr(storage, "LOG_VERSIONS", 3)  # keep the changes of 3 versions
    monkeypatch.setattr(storage, "LOG_TRIM_EVERY", 1)  # trimmed at every write
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    idle, busy = SynapseStore(path, config=config), SynapseStore(path, config=config)
    idle.reinforce(["a", "b", "c"], at=0)
    busy.reinforce(["a", "b"], at=DAY)  # seen by idle only through a full reload...
    for i in range(6):
        busy.reinforce([f"x{i}", f"y{i}"], at=DAY)
    busy.decay(at=160 * DAY)  # ...and so is the sweep: a-c and b-c are gone, a-b is not
    db = sqlite3.connect(path)
    assert db.execute("SELECT min(version) FROM edge_log").fetchone()[0] > 2  # trimmed
    db.close()
    with SynapseStore(path, config=config) as fresh:
        hits = [("a", 0.9), ("c", 0.5), ("q", 0.4)]
        assert idle.recall(hits, at=160 * DAY) == fresh.recall(hits, at=160 * DAY)
        assert idle.edge("a", "c") is None and idle.edge("a", "b") == fresh.edge("a", "b")
        assert idle.graph(at=160 * DAY).edges == fresh.graph(at=160 * DAY).edges
    idle.close()
    busy.close()


def test_a_file_of_schema_2_moves_its_change_tracking_to_logs(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
        store.decay(at=200 * DAY)
        store.reinforce(["c", "d"], at=200 * DAY)
    db = sqlite3.connect(path)  # back to what version 2 of the schema wrote
    db.executescript(
        "DROP TRIGGER events_seen; ALTER TABLE events DROP COLUMN seen; "
        "DROP TRIGGER edges_log_insert; DROP TRIGGER edges_log_update; "
        "DROP TRIGGER edges_log_delete; DROP TRIGGER uses_log_insert; "
        "DROP TRIGGER uses_log_update; "
        "DROP TABLE edge_log; DROP TABLE use_log; DELETE FROM meta WHERE key = 'log_horizon'; "
        "CREATE INDEX edges_by_version ON edges (version); "
        "CREATE INDEX node_uses_by_version ON node_uses (version); "
        "CREATE TABLE removed (version INTEGER NOT NULL, id INTEGER NOT NULL, "
        "PRIMARY KEY (version, id)) WITHOUT ROWID; PRAGMA user_version = 2;"
    )
    db.close()
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    with SynapseStore(path, config=config) as reader, SynapseStore(path) as writer:
        assert reader.edge("a", "b") is None and reader.edge("c", "d") is not None
        writer.reinforce(["c", "e"], at=201 * DAY)  # logged, and seen by the other store
        assert reader.edge("c", "e") is not None
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert {"edge_log", "use_log"} <= names and not {"removed", "edges_by_version"} & names
    db.close()


def test_a_sweep_that_reloads_everything_sweeps_the_reloaded_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapse_retriever.persistence import sqlite as storage

    monkeypatch.setattr(storage, "LOG_VERSIONS", 3)
    monkeypatch.setattr(storage, "LOG_TRIM_EVERY", 1)
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    idle, busy = SynapseStore(path, config=config), SynapseStore(path, config=config)
    idle.reinforce(["a", "b"], at=0)
    for i in range(6):  # more writes than the logs keep: idle's sweep reloads everything first
        busy.reinforce(["c", f"d{i}"], at=0)
    report = idle.decay(at=200 * DAY)
    assert (report.pruned, report.remaining) == (7, 0)
    assert idle.edge("a", "b") is None
    with SynapseStore(path, config=config) as fresh:
        assert fresh.edge("c", "d0") is None
    idle.close()
    busy.close()


def test_a_writer_of_an_older_release_is_still_seen_after_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    reader = SynapseStore(path, config=config)
    reader.reinforce(["a", "b"], at=0)
    db = sqlite3.connect(path, isolation_level=None)  # as the previous release wrote an edge
    db.execute("BEGIN IMMEDIATE")
    version = db.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value"
    ).fetchone()[0]
    db.executemany("INSERT INTO nodes (name, id) VALUES (?, ?)", [("x", 100), ("y", 101)])
    ids = (100, 101)
    db.execute(
        "INSERT INTO edges (namespace, a, b, weight, activation_count, half_life_days, "
        "created_at, last_reinforced_at, version) VALUES (1, ?, ?, 0.3, 1, 30.0, 0, 0, ?)",
        (*ids, version),
    )
    db.execute("COMMIT")
    db.close()
    assert reader.edge("x", "y") is not None  # the triggers logged it for the other stores
    reader.close()


def test_a_write_waits_busy_timeout_s_at_most_for_the_lock_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held.db"
    with SynapseStore(path, config=SynapseConfig.actr(busy_timeout_s=0.2)) as store:
        store.reinforce(["a", "b"], at=0)
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            with pytest.raises(WriteConflictError) as caught:
                store.reinforce(["a", "b", "c"], at=DAY)
        finally:
            locker.close()
        message = str(caught.value)
        assert "held.db" in message and "busy_timeout_s (0.2 s)" in message
        assert "nothing was written" in message
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 1 and store.edge("a", "c") is None
        assert store.reinforce(["a", "b"], at=DAY) == 1  # the lock released: written, once
    with SynapseStore(path) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 2


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _writing(store: SynapseStore, ids: list[str]) -> tuple[threading.Thread, list[BaseException]]:
    """A thread started on ``store.reinforce(ids)``, and the list that gets what it raises."""
    failed: list[BaseException] = []

    def write() -> None:
        try:
            store.reinforce(ids, at=0)
        except BaseException as exc:  # the test reads what it was
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    return writer, failed


def test_a_store_closed_while_its_write_waits_for_the_lock_says_so_typed(tmp_path: Path) -> None:
    # close() no longer waits behind the write, and the write's next look at the lock met a
    # closed connection: a raw sqlite3.ProgrammingError
    path = tmp_path / "s.db"
    store = SynapseStore(path, config=SynapseConfig.actr(busy_timeout_s=5.0))
    store.reinforce(["a", "b"], at=0)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    writer, failed = _writing(store, ["a", "c"])
    try:
        time.sleep(0.3)
        assert writer.is_alive()
        store.close()
        writer.join(5)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert not writer.is_alive() and len(failed) == 1
    assert isinstance(failed[0], ClosedError), repr(failed[0])
    with SynapseStore(path) as again:
        assert again.edge("a", "c") is None


def test_reads_go_on_while_a_write_waits_for_another_process_lock(tmp_path: Path) -> None:
    # the waiting write held the store's lock (and the storage's) for the whole busy wait:
    # every read of the store in other threads waited as long as the foreign lock was held
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(busy_timeout_s=5.0, refresh_interval_s=0.0)
    with SynapseStore(path, config=config) as store:
        store.reinforce(["a", "b"], at=0)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock for 2 s
        writing = threading.Thread(target=store.reinforce, args=(["c", "d"],), kwargs={"at": 0})
        writing.start()
        try:
            time.sleep(0.3)  # the write waits for the lock meanwhile
            assert writing.is_alive()
            waited = max(
                _timed(lambda: store.recall([("a", 0.9)], at=0)),
                _timed(lambda: store.edge("a", "b")),
                _timed(lambda: store.neighbours("a", at=0)),
                _timed(lambda: store.stats(at=0)),
            )
            assert waited < 0.5
            assert writing.is_alive()
            time.sleep(1.7)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        writing.join(10)
        assert not writing.is_alive()
        edge = store.edge("c", "d")
        assert edge is not None and edge.activation_count == 1  # written once
    with SynapseStore(path) as again:
        edge = again.edge("c", "d")
        assert edge is not None and edge.activation_count == 1


def test_a_write_waiting_for_the_lock_reads_what_was_written_meanwhile(tmp_path: Path) -> None:
    # the write starts again from the top once the lock is free: no lost update
    path = tmp_path / "s.db"
    config = SynapseConfig.actr(busy_timeout_s=30.0)
    with SynapseStore(path, config=config) as store, SynapseStore(path, config=config) as other:
        store.reinforce(["a", "b"], at=0)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        writing = threading.Thread(target=store.reinforce, args=(["a", "b"],), kwargs={"at": 1})
        writing.start()
        time.sleep(0.3)
        locker.execute("ROLLBACK")
        locker.close()
        other.reinforce(["a", "b"], at=1)  # may come before or after the waiting write
        writing.join(10)
        assert not writing.is_alive()
    with SynapseStore(path) as again:
        edge = again.edge("a", "b")
        assert edge is not None and edge.activation_count == 3


def test_a_write_never_given_the_lock_fails_within_busy_timeout_s_reads_meanwhile(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SynapseStore(path, config=SynapseConfig.actr(busy_timeout_s=1.0)) as store:
        store.reinforce(["a", "b"], at=0)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        start = time.perf_counter()
        writing, failed = _writing(store, ["c", "d"])
        try:
            time.sleep(0.2)
            assert _timed(lambda: store.edge("a", "b")) < 0.5
            writing.join(10)
            elapsed = time.perf_counter() - start
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert len(failed) == 1 and isinstance(failed[0], WriteConflictError), failed
        assert "busy_timeout_s (1 s)" in str(failed[0])
        assert "nothing was written" in str(failed[0])
        assert 0.9 < elapsed < 3.0
        assert store.edge("c", "d") is None
    with SynapseStore(path) as again:
        assert again.edge("c", "d") is None
