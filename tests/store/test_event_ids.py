"""Event ids kept for a window: a sweep forgets those not seen (recorded, or sent again) for
``Operations.event_ids_kept_days`` before it; None keeps them for good (every backend). A
repair reads the events' own times, apart."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from unittest import mock

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import CoActivation, SynapseConfig, SynapseStore
from synapse_retriever.persistence.sqlite import SCHEMA_VERSION, SQLiteStorage
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
def test_an_id_is_kept_for_the_window_from_when_it_was_seen(any_store_path: str) -> None:
    now = time.time()
    events = [("today", None), ("last-week", now - 7 * DAY), ("commit-2020", 1_600_000_000.0)]
    with SynapseStore(any_store_path, config=WINDOW) as store:
        assert _send(store, events) == [True, True, True]
        inside = store.decay(at=now + (KEPT - 1) * DAY, force=True)
        assert inside.event_ids == 0  # however old the events: seen today
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


class Clock:
    """The wall clock as a test sets it (``time.time`` patched process-wide)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("any_store_path", ["memory", "postgresql"], indirect=True)
def test_an_id_sent_again_is_seen_again(any_store_path: str) -> None:
    # a nightly re-run of an import keeps its ids: each replay is seen anew
    clock = Clock(time.time())
    start = clock.now
    with mock.patch("time.time", clock), SynapseStore(any_store_path, config=WINDOW) as store:
        assert _send(store, [("commit:1", 0.0)]) == [True]
        clock.now = start + 20 * DAY
        assert _send(store, [("commit:1", 0.0)]) == [False]
        clock.now = start + (20 + KEPT - 1) * DAY
        assert store.decay().event_ids == 0  # 50 days after it was recorded, 29 after seen
        clock.now = start + (20 + KEPT + 1) * DAY
        assert store.decay().event_ids == 1


@pytest.mark.parametrize("any_store_path", ["memory", "postgresql"], indirect=True)
def test_a_repair_keeps_the_id_of_an_old_event_written_under_a_fast_clock(
    any_store_path: str,
) -> None:
    # a machine whose clock ran days ahead sends an event of a past time: its edge is kept
    # by a repair, and so is its id, which only the event's time decides
    now = time.time()
    with SynapseStore(any_store_path, config=WINDOW) as store:
        with mock.patch("time.time", Clock(now + 3 * DAY)):
            assert _send(store, [("old", now - DAY)]) == [True]
        assert store.repair(dry_run=True).events == 0
        assert store.repair().edges == 0
        assert _send(store, [("old", now - DAY)]) == [False]
        with mock.patch("time.time", Clock(now + 3 * DAY)):  # a time that clock allows
            assert store.reinforce(["x", "y"], at=now + 2.5 * DAY, event_id="ahead") == 1
        report = store.repair()  # ahead of this clock: its edge and its id go
        assert report.edges == 1 and report.events >= 1
        assert store.reinforce(["x", "y"], at=now, event_id="ahead") == 1  # learned again


@pytest.mark.parametrize("any_store_path", ["memory", "postgresql"], indirect=True)
def test_a_replay_under_a_clock_set_back_keeps_the_later_time_seen(any_store_path: str) -> None:
    clock = Clock(time.time())
    start = clock.now
    with mock.patch("time.time", clock), SynapseStore(any_store_path, config=WINDOW) as store:
        assert _send(store, [("a", 0.0)]) == [True]
        clock.now = start - 10 * DAY  # another machine's clock, or one set back
        assert _send(store, [("a", 0.0)]) == [False]
        clock.now = start + (KEPT - 5) * DAY
        assert store.decay().event_ids == 0  # seen at start, not ten days before it
        clock.now = start + (KEPT + 1) * DAY
        assert store.decay().event_ids == 1


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
        shared_version = _version(postgres_url)
        assert writer.decay(force=True).event_ids == 0  # none to forget: the team's left alone
        assert _version(postgres_url) == shared_version
        assert writer.decay(at=later, force=True).event_ids == 2  # "mine" again, and "team"
        assert _version(postgres_url) == shared_version + 1


def _version(url: str) -> int:
    """The version of the store at PostgreSQL ``url``: one more at each commit."""
    with psycopg.connect(url, autocommit=True) as conn:
        [(version,)] = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchall()
    return int(version)


def test_the_storage_keeps_the_events_time_and_when_it_was_seen() -> None:
    storage = SQLiteStorage(":memory:")
    store = SynapseStore(storage=storage)
    before = time.time()
    _send(store, [("old", 5.0)])
    after = time.time()
    [(at, seen)] = storage._db.execute("SELECT at, seen FROM events").fetchall()
    store.close()
    assert at == 5.0 and before <= seen <= after


def test_the_ids_of_an_older_file_count_as_seen_at_its_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SynapseStore(path) as store:
        _send(store, [("commit:1", 1_600_000_000.0), ("commit:2", 0.0)])
    with sqlite3.connect(path) as db:  # as schema 3 left it: no column of when it was seen
        db.executescript("DROP TRIGGER events_seen; ALTER TABLE events DROP COLUMN seen")
        db.execute("PRAGMA user_version = 3")
    migrated = time.time()
    with SynapseStore(path, config=WINDOW) as store:
        assert store.decay(at=migrated + (KEPT - 1) * DAY, force=True).event_ids == 0
        assert _send(store, [("commit:1", 1_600_000_000.0)]) == [False]
        assert store.decay(at=migrated + (KEPT + 1) * DAY, dry_run=True).event_ids == 2
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT min(at) FROM events").fetchone() == (0.0,)  # kept apart


@pytest.mark.parametrize("any_store_path", ["file", "postgresql"], indirect=True)
def test_an_id_an_older_release_records_counts_as_seen_then(any_store_path: str) -> None:
    # a process of the previous release, still running after the migration, writes no seen
    with SynapseStore(any_store_path) as store:
        _send(store, [("new", None)])
    before = time.time()
    insert = "INSERT INTO events (id, at) VALUES ('old-release', 0.0)"
    if any_store_path.startswith("postgresql"):
        with psycopg.connect(any_store_path, autocommit=True) as conn:
            conn.execute(insert)
    else:
        with contextlib.closing(sqlite3.connect(any_store_path)) as db, db:
            db.execute(insert)
    with SynapseStore(any_store_path, config=WINDOW) as store:
        assert store.decay(at=before + (KEPT - 1) * DAY, force=True).event_ids == 0
        assert _send(store, [("old-release", 0.0)]) == [False]


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 40), st.booleans(), st.sets(st.integers(0, 5), max_size=4)),
        min_size=1,
        max_size=12,
    ),
    kept=st.integers(1, 60),
)
def test_a_sweep_forgets_exactly_the_ids_not_seen_within_its_window(
    steps: list[tuple[int, bool, set[int]]], kept: int
) -> None:
    # a timeline of days: each step waits, then sends some ids (each replay seen anew) or
    # sweeps; a model of when each id was last seen predicts every replay and every count
    clock = Clock(1_700_000_000.0)
    seen: dict[str, float] = {}
    config = SynapseConfig().replace(event_ids_kept_days=kept)
    with mock.patch("time.time", clock), SynapseStore(config=config) as store:
        for wait, sweep, ids in steps:
            clock.now += wait * DAY + 1.0  # a second past the day: no id on the edge
            if sweep:
                gone = {i for i, at in seen.items() if at < clock.now - kept * DAY}
                assert store.decay().event_ids == len(gone)
                seen = {i: at for i, at in seen.items() if i not in gone}
            else:
                names = [f"e{i}" for i in sorted(ids)]
                expected = [name not in seen for name in names]
                assert _send(store, [(name, clock.now - 400 * DAY) for name in names]) == expected
                seen.update(dict.fromkeys(names, clock.now))
