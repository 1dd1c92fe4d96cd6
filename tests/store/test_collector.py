"""The cyclic garbage collector paused while a write runs (synapse_retriever/store/collector.py):
left as it was found, across nesting, threads and failures, and paused for a whole batch."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from synapse_retriever import CoActivation, InvalidValueError, SynapseStore
from synapse_retriever.persistence import WriteTransaction
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.store.collector import collector_paused


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


def test_nested_and_concurrent_pauses_resume_when_the_last_one_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def other_write() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_write)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's write is still running
    release.set()
    thread.join(10)
    assert gc.isenabled()


def collections_during(action: object) -> int:
    """How many collections ran while ``action()`` ran."""
    ran: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            ran.append(info["generation"])

    gc.callbacks.append(count)
    try:
        action()  # type: ignore[operator]
    finally:
        gc.callbacks.remove(count)
    return len(ran)


def test_a_batch_runs_its_transaction_with_the_collector_paused(tmp_path: Path) -> None:
    events = [CoActivation([f"doc{(i * 7 + k) % 97}" for k in range(10)], at=i) for i in range(300)]
    with SynapseStore(tmp_path / "paused.db") as store:
        gc.collect()
        paused = collections_during(lambda: store.reinforce_many(events))
    with SynapseStore(tmp_path / "unpaused.db") as store, collector_paused():
        gc.enable()  # the write's own pause, nested in this one, leaves it enabled
        gc.collect()
        unpaused = collections_during(lambda: store.reinforce_many(events))
    # paused: what validating the events and the first allocations after set off
    assert (paused, unpaused > 30) == (min(paused, 3), True), (paused, unpaused)


def test_a_write_that_fails_leaves_the_collector_enabled(tmp_path: Path) -> None:
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce(["a", "b"], at=100.0)
        with pytest.raises(InvalidValueError):
            store.reinforce(["a", "b"], at=0.0, late="raise")
    assert gc.isenabled()


class Observed(SQLiteStorage):
    """A real SQLite store that notes whether the collector runs as each transaction opens."""

    collecting: list[bool]

    @contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        self.collecting.append(gc.isenabled())
        with super().write() as tx:
            yield tx


def test_every_kind_of_write_runs_with_the_collector_paused(tmp_path: Path) -> None:
    storage = Observed(tmp_path / "s.db")
    storage.collecting = []
    with SynapseStore(storage=storage) as store:
        store.reinforce(["a", "b"], at=0.0)
        store.reinforce_many([CoActivation(["b", "c"], at=1.0)])
        store.use(["a"], at=2.0)
        store.decay(at=400 * 86_400.0, force=True)  # a sweep that prunes the edges
        assert gc.isenabled()
        assert storage.collecting == [False] * 4
