"""The cyclic garbage collector paused while a big write holds its locks
(synapse_retriever/store/collector.py): left as it was found, across nesting, threads, forks and
failures; paused for a big batch and a sweep on a real SQLite store once it holds the write lock,
not for a single event, not while waiting for the lock, never on PostgreSQL, and never with
``pause_collector=False``."""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from synapse_retriever import (
    CoActivation,
    InvalidTypeError,
    InvalidValueError,
    Operations,
    SynapseConfig,
    SynapseStore,
)
from synapse_retriever.persistence import WriteTransaction
from synapse_retriever.persistence.rows import EdgeTable
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.store.collector import PAUSE_PAIRS, collector_paused

BATCH = [  # 300 ten-node events: 13,500 pairs, far above PAUSE_PAIRS
    CoActivation([f"doc{(i * 7 + k) % 97}" for k in range(10)], at=i) for i in range(300)
]


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_paused_inside_and_enabled_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_collector_comes_back_after_a_failure_inside() -> None:
    with pytest.raises(ZeroDivisionError), collector_paused():
        _ = 1 / 0
    assert gc.isenabled()


@contextmanager
def another_threads_pause() -> Iterator[None]:
    """A pause held by another thread for as long as the body runs."""
    inside, release = threading.Event(), threading.Event()

    def other_write() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_write)
    thread.start()
    assert inside.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join(10)


def test_nested_and_concurrent_pauses_resume_when_the_last_one_ends() -> None:
    with another_threads_pause():
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread's write is still running
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_child_forked_during_another_threads_pause_collects(tmp_path: Path) -> None:
    with another_threads_pause():
        child = os.fork()
        if child == 0:  # the child: the pausing thread is not here, its pause must not last
            code = 1
            try:
                enabled_at_start = gc.isenabled()
                with SynapseStore(tmp_path / "child.db") as store:
                    store.reinforce_many(BATCH[:150])
                code = 0 if enabled_at_start and gc.isenabled() else 2
            finally:
                os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_child_forked_inside_its_own_pause_resumes_when_that_pause_ends() -> None:
    with collector_paused():
        child = os.fork()
        if child == 0:
            paused_in_child = not gc.isenabled()
    if child == 0:
        os._exit(0 if paused_in_child and gc.isenabled() else 3)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert gc.isenabled()


class Observed(SQLiteStorage):
    """A real SQLite store whose transactions note whether the collector runs when they write
    the edges (a write: wherever their rows were read from) or delete them (a sweep), and
    whether one ran inside them."""

    collecting: list[bool]
    collections: int
    inside: bool

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        with super().write() as tx:
            self.inside = True
            try:
                yield _Noted(tx, self)
            finally:
                self.inside = False


class _Noted:
    def __init__(self, tx: WriteTransaction, storage: Observed) -> None:
        self._tx, self._storage = tx, storage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def insert(self, table: EdgeTable) -> EdgeTable:
        self._storage.collecting.append(gc.isenabled())
        return self._tx.insert(table)

    def delete(self, ids: Sequence[int]) -> None:
        self._storage.collecting.append(gc.isenabled())
        self._tx.delete(ids)


@contextmanager
def observed(
    path: Path, config: SynapseConfig | None = None
) -> Iterator[tuple[SynapseStore, Observed]]:
    storage = Observed(path)
    storage.collecting, storage.collections, storage.inside = [], 0, False

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and storage.inside:
            storage.collections += 1

    gc.callbacks.append(count)
    try:
        with SynapseStore(storage=storage, config=config) as store:
            yield store, storage
    finally:
        gc.callbacks.remove(count)


def test_a_big_batch_and_a_sweep_run_paused_a_single_event_does_not(tmp_path: Path) -> None:
    with observed(tmp_path / "s.db") as (store, storage):
        store.reinforce(["a", "b"], at=0.0)  # one pair: not worth a pause
        store.reinforce_many(BATCH)
        store.reinforce_many(BATCH[:22])  # 990 pairs, just below PAUSE_PAIRS
        store.decay(at=400 * 86_400.0, force=True)  # a sweep that prunes the edges
        assert gc.isenabled()
    assert 22 * 45 < PAUSE_PAIRS <= 23 * 45
    assert storage.collecting == [True, False, True, False]


def test_no_collection_runs_inside_a_big_batchs_transaction(tmp_path: Path) -> None:
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 10, 10)  # collections far more often than by default
    try:
        with observed(tmp_path / "paused.db") as (store, paused):
            store.reinforce_many(BATCH)
        config = SynapseConfig(operations=Operations(pause_collector=False))
        with observed(tmp_path / "unpaused.db", config) as (store, unpaused):
            store.reinforce_many(BATCH)
    finally:
        gc.set_threshold(*thresholds)
    assert (paused.collections, unpaused.collections > 10) == (0, True)
    assert unpaused.collecting == [True]


def test_pause_collector_must_be_a_bool() -> None:
    with pytest.raises(InvalidTypeError, match="pause_collector must be a bool, got str 'no'"):
        Operations(pause_collector="no")  # type: ignore[arg-type]
    assert SynapseConfig.actr(pause_collector=False).operations.pause_collector is False


def test_a_write_that_fails_leaves_the_collector_enabled(tmp_path: Path) -> None:
    early = [CoActivation(event.nodes, at=0.5) for event in BATCH]  # before most of BATCH
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce_many(BATCH)
        with pytest.raises(InvalidValueError, match="time must not run backwards"):
            store.reinforce_many(early, late="raise")
    assert gc.isenabled()


def test_a_write_waiting_for_another_writers_lock_is_not_paused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0.0)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write lock
        writing = threading.Thread(target=store.reinforce_many, args=(BATCH,))
        writing.start()
        try:
            time.sleep(0.5)  # the batch waits for the lock meanwhile
            assert writing.is_alive() and gc.isenabled()
        finally:
            other.execute("COMMIT")
            other.close()
        writing.join(30)
        assert store.edge("doc0", "doc1") is not None
    assert gc.isenabled()


def test_a_postgresql_write_is_never_paused(postgres_url: str) -> None:
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 10, 10)
    try:
        with SynapseStore(postgres_url) as store:
            assert collections_during(lambda: store.reinforce_many(BATCH[:100])) > 10
    finally:
        gc.set_threshold(*thresholds)


def collections_during(action: Callable[[], object]) -> int:
    """How many collections started while ``action()`` ran."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(count)
    try:
        action()
    finally:
        gc.callbacks.remove(count)
    return len(started)
