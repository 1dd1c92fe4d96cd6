"""Event ids kept for a window: a sweep forgets those recorded more than
``Operations.event_ids_kept_days`` before it, dated by the later of the event's time and
when it was written; None keeps them for good (every backend)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synapse_retriever import CoActivation, SynapseConfig, SynapseStore
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.persistence.sqlite import _SQLiteTransaction as SQLiteTransaction

DAY = 86_400.0
KEPT = 30.0
WINDOW = SynapseConfig().replace(event_ids_kept_days=KEPT)


def _send(store: SynapseStore, events: list[tuple[str, float | None]]) -> list[bool]:
    """Send one event per ``(event_id, at)`` (a pair of its own each); whether each was
    learned (False: a replay)."""
    done = store.reinforce_many(
        [CoActivation(["hub", f"n{i}"], at=at, event_id=event_id)
         for i, (event_id, at) in enumerate(events)]
    )  # fmt: skip
    return [not d.replayed for d in done]


@pytest.mark.parametrize("any_store_path", ["memory", "file", "postgresql"], indirect=True)
def test_an_id_is_kept_for_the_window_from_when_it_was_recorded(any_store_path: str) -> None:
    now = time.time()
    events = [("today", None), ("last-week", now - 7 * DAY), ("commit-2020", 1_600_000_000.0)]
    with SynapseStore(any_store_path, config=WINDOW) as store:
        assert _send(store, events) == [True, True, True]
        inside = store.decay(at=now + (KEPT - 1) * DAY, force=True)
        assert inside.event_ids == 0  # however old the events: recorded today
        assert _send(store, events) == [False, False, False]
        assert store.decay(at=now + (KEPT + 1) * DAY, dry_run=True).event_ids == 3
        assert _send(store, events) == [False, False, False]  # a dry run forgets nothing
        after = store.decay(at=now + (KEPT + 1) * DAY, force=True)
        assert after.event_ids == 3
        assert _send(store, events) == [True, True, True]  # learned again
        edge = store.edge("hub", "n0")
        assert edge is not None and edge.activation_count == 2


@pytest.mark.parametrize("any_store_path", ["memory", "file", "postgresql"], indirect=True)
def test_without_a_window_every_id_is_kept_for_good(any_store_path: str) -> None:
    with SynapseStore(any_store_path) as store:
        assert _send(store, [("a", None), ("b", 0.0)]) == [True, True]
        report = store.decay(at=time.time() + 3650 * DAY, force=True)
        assert report.event_ids == 0 and report.pruned == 2
        assert _send(store, [("a", None), ("b", 0.0)]) == [False, False]


def test_an_event_dated_ahead_of_the_clock_is_kept_from_its_own_time(tmp_path: Path) -> None:
    # within the clock skew allowed (a day): dated by its time, the later of the two
    ahead = time.time() + 12 * 3600
    with SynapseStore(tmp_path / "s.db", config=WINDOW) as store:
        assert _send(store, [("ahead", ahead)]) == [True]
        assert store.decay(at=ahead + KEPT * DAY - 60, force=True).event_ids == 0
        assert store.decay(at=ahead + KEPT * DAY + 60, force=True).event_ids == 1
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM events").fetchone() == (0,)


def test_a_failing_sweep_forgets_no_id(tmp_path: Path) -> None:
    with SynapseStore(tmp_path / "s.db", config=WINDOW) as store:
        _send(store, [("a", None)])
        with (
            mock.patch.object(SQLiteTransaction, "delete", side_effect=sqlite3.OperationalError),
            pytest.raises(sqlite3.OperationalError),
        ):
            store.decay(at=time.time() + 365 * DAY, force=True)
        assert _send(store, [("a", None)]) == [False]  # the sweep rolled back whole


def test_a_read_only_store_counts_them_in_a_dry_run(tmp_path: Path) -> None:
    with SynapseStore(tmp_path / "s.db") as store:
        _send(store, [("a", None), ("b", None)])
    (tmp_path / "s.db").chmod(0o444)
    try:
        with SynapseStore(tmp_path / "s.db", config=WINDOW, read_only=True) as reader:
            later = time.time() + (KEPT + 1) * DAY
            assert reader.decay(at=later, dry_run=True).event_ids == 2
    finally:
        (tmp_path / "s.db").chmod(0o644)


def test_a_layered_store_forgets_them_in_each_writable_layer(
    tmp_path: Path, postgres_url: str
) -> None:
    later = time.time() + (KEPT + 1) * DAY
    with SynapseStore.layered(local=tmp_path / "me.db", shared=postgres_url) as writer:
        writer.reinforce(["a", "b"], event_id="mine")
        writer.reinforce(["a", "b"], namespace="shared", event_id="team")
    with SynapseStore.layered(
        local=tmp_path / "me.db", shared=postgres_url, read_only_shared=True, config=WINDOW
    ) as reader:  # the shared layer is swept by its writers
        assert reader.decay(at=later, dry_run=True).event_ids == 1
        assert reader.decay(at=later, force=True).event_ids == 1
    with SynapseStore.layered(
        local=tmp_path / "me.db", shared=postgres_url, config=WINDOW
    ) as writer:
        assert writer.reinforce(["a", "b"], event_id="mine") == 1  # forgotten: learned again
        assert writer.reinforce(["a", "b"], namespace="shared", event_id="team") == 0
        assert writer.decay(at=later, force=True).event_ids == 2  # "mine" again, and "team"


def test_the_storage_dates_an_id_as_it_was_recorded() -> None:
    storage = SQLiteStorage(":memory:")
    store = SynapseStore(storage=storage)
    before = time.time()
    _send(store, [("old", 0.0)])
    after = time.time()
    recorded = storage._db.execute("SELECT at FROM events").fetchone()[0]
    store.close()
    assert before <= recorded <= after


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ages=st.lists(st.integers(-3, 400), min_size=1, max_size=12),
    kept=st.integers(1, 90),
    sweep=st.integers(0, 120),
)
def test_a_sweep_forgets_exactly_the_ids_recorded_before_its_window(
    ages: list[int], kept: int, sweep: int
) -> None:
    # ages: each event's time, in days before now (negative: hours ahead, within the skew);
    # ids are recorded now, so one is dated by its time only when that is ahead
    now = time.time()
    times = [now - age * DAY if age >= 0 else now - age * 3600 for age in ages]
    config = SynapseConfig().replace(event_ids_kept_days=kept)
    with SynapseStore(config=config) as store:
        events = [(f"e{i}", at) for i, at in enumerate(times)]
        assert all(_send(store, events))
        at = now + sweep * DAY + 60  # a minute past the day: no id on the edge
        dated = [max(t, now) for t in times]
        report = store.decay(at=at, force=True)
        forgotten = [d < at - kept * DAY for d in dated]
        assert report.event_ids == sum(forgotten)
        assert _send(store, events) == forgotten
