"""A store opened from its snapshot is the store opened from its rows, to the bit; a snapshot
that is stale, truncated, damaged or of another version is rebuilt, never trusted. On an
SQLite file and in a PostgreSQL schema alike (see store_backends.py for the server)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from store_backends import new_schema, stored

from synapse_retriever import RepairReport, SynapseConfig, SynapseStore
from synapse_retriever.mirror import mirror as mirror_module
from synapse_retriever.mirror import snapshot
from synapse_retriever.mirror.snapshot import FORMAT, HEADER
from synapse_retriever.persistence.postgres import is_postgres_url
from synapse_retriever.persistence.protocols import SnapshotStorage

DAY = 86_400.0
T0 = 1_600_000_000.0
NAMESPACES = ["personal", "shared", "ephemeral", "branch:x"]
NODES = [f"n{i}" for i in range(8)]
HITS = [
    [("n0", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)],
    [("n3", 0.9), ("n1", 0.85), ("x", 0.5), ("y", 0.4), ("z", 0.1)],
    [("n7", 1.0), ("u0", 0.5), ("x", 0.2)],
]

steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("reinforce"),
            st.lists(st.sampled_from(NODES), min_size=2, max_size=5),
            st.floats(0.1, 2.0),
            st.sampled_from(NAMESPACES),
            st.sampled_from([0.0, 0.0, 0.5, 3.0, 45.0]),  # days after the previous step
        ),
        st.tuples(st.just("decay"), st.floats(0.0, 200.0)),
        st.tuples(st.just("use"), st.lists(st.sampled_from(["n0", "u0", "u1"]), min_size=1)),
        st.tuples(st.just("rename"), st.sampled_from(NODES), st.sampled_from(["r0", "r1"])),
    ),
    max_size=14,
)


@pytest.fixture(autouse=True)
def snapshots_of_any_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store keeps a snapshot, however small (the threshold is 100,000 edges)."""
    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 0)


def play(store: SynapseStore, history: list[tuple[Any, ...]], at: float) -> float:
    for step in history:
        if step[0] == "reinforce":
            _, ids, strength, namespace, gap = step
            at += gap * DAY
            store.reinforce(ids, strength=strength, namespace=namespace, at=at)
        elif step[0] == "decay":
            store.decay(at=at + step[1] * DAY, force=True)
        elif step[0] == "use":
            store.use(step[1], at=at)
        elif step[1] in store._mirror.graph.index and step[2] not in store._mirror.graph.index:
            store.rename(step[1], step[2])
    return at


def state(store: SynapseStore, at: float) -> tuple[Any, ...]:
    """Recalls from every namespace's view, spreads, and every stored edge: compared with ==,
    so every float to the bit."""
    recalls = [
        store.recall(hits, at=at, active_namespace=ns)
        for hits in HITS
        for ns in ("personal", "shared", "branch:x")
    ]
    spreads = [store.spread(["n0", "n3"], at=at, active_namespace=ns) for ns in NAMESPACES]
    edges = sorted(store.graph(at=at).edges(keys=True, data=True))
    return recalls, spreads, edges, store.stats(at=at, name="s")


@contextlib.contextmanager
def without_snapshot(where: str) -> Iterator[str]:
    """A copy of the store at ``where`` with no snapshot in it (a file beside it, or a
    schema beside it of copies of its tables), removed on leaving."""
    if not is_postgres_url(where):
        copy = Path(where).with_name(f"plain-{Path(where).name}")
        shutil.copyfile(where, copy)
        with sqlite3.connect(copy) as db:
            db.execute("DELETE FROM snapshot")
        yield str(copy)
        copy.unlink()
        return
    with psycopg.connect(where, autocommit=True) as conn:
        [(schema,)] = conn.execute("SELECT current_schema()").fetchall()
        plain = f"{schema}_plain"
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(plain)))
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename <> 'snapshot'"
        ).fetchall()
        for (table,) in tables:
            conn.execute(
                sql.SQL("CREATE TABLE {}.{} AS TABLE {}.{}").format(
                    *map(sql.Identifier, (plain, table, schema, table))
                )
            )
        try:
            yield where.replace(f"search_path%3D{schema}", f"search_path%3D{plain}")
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(plain)))


def same_as_without(where: str, config: SynapseConfig | None, at: float) -> SynapseStore:
    """Open ``where`` (from its snapshot, if sound) and the same store without its snapshot:
    the same state. Returns the first, open."""
    with without_snapshot(where) as plain, SynapseStore(plain, config=config) as rows:
        assert rows._mirror.snapshot_version is None
        expected = state(rows, at)
    store = SynapseStore(where, config=config)
    assert state(store, at) == expected
    return store


def opened_from_its_snapshot(
    where: str, before: list[tuple[Any, ...]], after: list[tuple[Any, ...]], config: SynapseConfig
) -> None:
    """``before`` played, a snapshot written at close, then ``after`` played, logged after
    it: the store opened from them is the store opened from its rows."""
    with SynapseStore(where, config=config) as store:
        # one write first: PostgreSQL reads every row for a snapshot of version 0 (empty)
        at = play(store, [("reinforce", ["n0", "n1"], 1.0, "personal", 0.0), *before], T0)
    # written at close; then more writes, logged after it, and no newer snapshot
    with SynapseStore(where, config=config) as store:
        assert store._mirror.snapshot_version is not None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mirror_module, "SNAPSHOT_STALE_VERSIONS", 10**9)
            at = play(store, after, at)
    store = same_as_without(where, config, at + DAY)
    assert store._mirror.snapshot_version is not None  # it was read, not rebuilt
    store.close()


@settings(max_examples=40, deadline=None)
@given(steps, steps, st.sampled_from([SynapseConfig(), SynapseConfig.published()]))
def test_a_store_opened_from_its_snapshot_recalls_what_its_rows_give(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]], config: SynapseConfig
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        opened_from_its_snapshot(str(Path(folder) / "s.db"), before, after, config)


@settings(max_examples=8, deadline=None)  # a schema each: a few seconds
@given(steps, steps, st.sampled_from([SynapseConfig(), SynapseConfig.published()]))
def test_a_postgres_store_opened_from_its_snapshot_recalls_what_its_rows_give(
    postgres_database: str,
    before: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
    config: SynapseConfig,
) -> None:
    with new_schema(postgres_database) as url:
        opened_from_its_snapshot(url, before, after, config)


def test_another_processes_writes_after_the_snapshot_are_read_on_open(store_path: str) -> None:
    with SynapseStore(store_path) as other:  # open, as another process, while it is written
        with SynapseStore(store_path) as store:
            play(store, [("reinforce", NODES[:5], 1.0, ns, 1.0) for ns in NAMESPACES], T0)
        other.reinforce(["n0", "n6"], at=T0 + 2 * DAY, namespace="shared")
        other.decay(at=T0 + 200 * DAY, force=True)  # deletions after it too
        other.reinforce(["n1", "n7", "new"], at=T0 + 201 * DAY)
    store = same_as_without(store_path, None, T0 + 202 * DAY)
    assert store._mirror.snapshot_version is not None
    assert store.edge("n1", "new") is not None
    store.close()


# -- snapshots that must not be trusted ---------------------------------------------------


@pytest.fixture
def snapshotted(store_path: str) -> str:
    """A store of a few namespaces with a snapshot, and a write after it (in a file, then
    in a PostgreSQL schema)."""
    with SynapseStore(store_path) as store:
        play(store, [("reinforce", NODES[:5], 1.0, ns, 1.0) for ns in NAMESPACES], T0)
    with SynapseStore(store_path) as store:
        assert store._mirror.snapshot_version is not None
        store.reinforce(["n0", "n6", "n7"], at=T0 + 10 * DAY)
    return store_path


def header_changed(edit: Callable[[dict[str, Any]], object]) -> Callable[[str], object]:
    """A damage: ``edit`` applied to the snapshot's header, in place (it has no checksum)."""

    def change(where: str) -> None:
        [(raw,)] = stored(where, "SELECT data FROM snapshot WHERE part = ?", (HEADER,))
        header = json.loads(raw)
        edit(header)
        stored(
            where,
            "UPDATE snapshot SET data = ? WHERE part = ?",
            (json.dumps(header).encode(), HEADER),
        )

    return change


def header_edit(key: str, value: object) -> Callable[[str], object]:
    return header_changed(lambda header: header.__setitem__(key, value))


def first_bytes_flipped(where: str) -> None:
    [(data,)] = stored(where, "SELECT data FROM snapshot WHERE part = 'edge.w0'")
    damaged = bytes([data[0] ^ 0xFF]) + data[1:]
    stored(where, "UPDATE snapshot SET data = ? WHERE part = 'edge.w0'", (damaged,))


BAD: dict[str, Callable[[str], object]] = {
    "stale: the change logs no longer reach back to it": lambda where: stored(
        where,
        "UPDATE meta SET value = (SELECT value FROM meta WHERE key = 'version') "
        "WHERE key = 'log_horizon'",
    ),
    "ahead of the store's version": lambda where: stored(
        where, "UPDATE snapshot SET version = version + 5"
    ),
    "truncated": lambda where: stored(
        where,
        "UPDATE snapshot SET data = substr(data, 1, length(data) - 8) WHERE part = 'edge.last'",
    ),
    "a part missing": lambda where: stored(
        where, "DELETE FROM snapshot WHERE part = 'adjacency.other'"
    ),
    "damaged": first_bytes_flipped,
    "parts of two versions": lambda where: stored(
        where, "UPDATE snapshot SET version = version - 1 WHERE part = 'log'"
    ),
    "another snapshot format": header_edit("format", FORMAT + 1),
    "another schema version": header_edit("schema", 99),
    "a header that is not JSON": lambda where: stored(
        where, "UPDATE snapshot SET data = ? WHERE part = ?", (b"\x00\xff", HEADER)
    ),
    "a stamp that differs from its rows'": lambda where: stored(
        where, "UPDATE snapshot SET max_node = max_node + 1"
    ),
    # each was a MemoryError at open (17 TiB asked for), the store not opened at all; a
    # size of 10**8 took 11 s and 6 GB to be found out
    "a header that says more edges than its parts hold": header_changed(
        lambda header: header["graph"].__setitem__("size", 10**12)
    ),
    "a header whose namespace id is past its largest": header_changed(
        lambda header: header["graph"]["namespaces"][0].__setitem__(0, 10**12)
    ),
    # two damaged digits: the header's largest namespace id as large as the namespace's
    "a header whose namespace ids and largest agree, not its rows'": header_changed(
        lambda header: (
            header["graph"]["namespaces"][0].__setitem__(0, 10**12),
            header.__setitem__("max_namespace", 10**12),
        )
    ),
}


@pytest.mark.parametrize("damage", list(BAD), ids=list(BAD))
def test_a_snapshot_that_cannot_be_trusted_is_rebuilt(snapshotted: str, damage: str) -> None:
    BAD[damage](snapshotted)
    store = same_as_without(snapshotted, None, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is None  # loaded from the rows
    store.close()  # ... and a sound snapshot written instead
    store = same_as_without(snapshotted, None, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is not None
    store.close()


def test_a_stale_snapshots_parts_are_never_read(snapshotted: str) -> None:
    # SQLite read every part (95 MB at 1M edges) before finding the logs no longer reached
    # back to them, then read every row as well
    BAD["stale: the change logs no longer reach back to it"](snapshotted)
    with SynapseStore(snapshotted) as store:
        found = store._storage.read_snapshot()
    assert found is not None and found.changes.full and found.parts == {}


def test_a_snapshot_of_another_use_history_is_rebuilt(snapshotted: str) -> None:
    config = SynapseConfig.actr(use_history=3)
    store = same_as_without(snapshotted, config, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is None
    store.close()


def test_another_decay_recomputes_only_the_prune_times(snapshotted: str) -> None:
    config = SynapseConfig.actr(prune_threshold=0.2)  # most edges are pruned earlier
    store = same_as_without(snapshotted, config, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is not None
    store.close()


def has_snapshot_table(where: str) -> bool:
    if is_postgres_url(where):
        query = "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
    else:
        query = "SELECT 1 FROM sqlite_master WHERE name = ?"
    return bool(stored(where, query, ("snapshot",)))


def test_a_repaired_store_writes_a_new_snapshot_at_close(snapshotted: str) -> None:
    import time

    with SynapseStore(snapshotted) as store:
        taken = store._mirror.snapshot_version
        store.config = SynapseConfig.actr(max_clock_skew_s=1e15)  # as older releases did
        store.reinforce(["n1", "n8"], at=time.time() * 1000)  # milliseconds: far ahead
        store.config = SynapseConfig()
        assert store.repair().edges == 1  # every reader reloads: the snapshot is stale
    store = same_as_without(snapshotted, None, T0 + 20 * DAY)
    assert taken is not None and store._mirror.snapshot_version is not None
    assert store._mirror.snapshot_version > taken  # a new one, written at close
    store.close()


def test_a_repair_that_finds_nothing_keeps_the_snapshot(snapshotted: str) -> None:
    # a routine repair that found nothing ahead of the clock still told every reader to
    # load everything again, and made the snapshot stale: the next open read every row
    with SynapseStore(snapshotted) as store:
        taken = store._mirror.snapshot_version
        assert store.repair() == RepairReport(edges=0, uses=0, events=0, dry_run=False)
        assert store._mirror.snapshot_version == taken
    store = same_as_without(snapshotted, None, T0 + 20 * DAY)
    assert taken is not None and store._mirror.snapshot_version == taken
    store.close()


def test_a_small_store_keeps_no_snapshot(store_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 100_000)
    with SynapseStore(store_path) as store:
        store.reinforce(["a", "b"], at=T0)
    assert not has_snapshot_table(store_path)


def test_a_snapshot_is_not_rewritten_until_it_is_stale(snapshotted: str) -> None:
    with SynapseStore(snapshotted) as store:
        taken = store._mirror.snapshot_version
        store.reinforce(["n1", "n2"], at=T0 + 30 * DAY)
    with SynapseStore(snapshotted) as store:  # one version later: the same snapshot, and the log
        assert store._mirror.snapshot_version == taken


@contextlib.contextmanager
def write_lock_held(where: str) -> Iterator[None]:
    """Another process holding what writers lock while the block runs: SQLite's write lock,
    or PostgreSQL's version row (which every writer locks to commit)."""
    if is_postgres_url(where):
        with psycopg.connect(where) as conn:
            conn.execute("SELECT value FROM meta WHERE key = 'version' FOR UPDATE")
            yield
            conn.rollback()
        return
    other = sqlite3.connect(where, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def ends_without_waiting(call: Callable[[], object]) -> None:
    """``call()`` ends in a thread while its caller waits (its store waits 10 minutes for a
    lock): a call that waits for the lock fails the test after 20 s."""
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(20.0)
    assert not thread.is_alive(), "it waited for the lock"


def test_closing_waits_for_no_lock_to_write_a_snapshot(snapshotted: str) -> None:
    first_bytes_flipped(snapshotted)  # so that closing wants to write one
    store = SynapseStore(snapshotted, config=SynapseConfig.actr(busy_timeout_s=600.0))
    with write_lock_held(snapshotted):
        ends_without_waiting(store.close)  # at once: the snapshot is skipped
    with SynapseStore(snapshotted) as again:
        assert again._mirror.snapshot_version is None


def test_a_snapshot_is_written_only_at_the_storage_version(snapshotted: str) -> None:
    first_bytes_flipped(snapshotted)
    with SynapseStore(snapshotted) as store:
        mirror, storage = store._mirror, store._storage
        assert isinstance(storage, SnapshotStorage)
        parts = snapshot.encode(
            mirror.graph, mirror.uses, mirror.version, schema=storage.schema_version
        )
        stamp = (mirror.graph.max_node, mirror.graph.max_namespace)
        assert not storage.write_snapshot(mirror.version - 1, *stamp, parts)
        with write_lock_held(snapshotted):
            assert not storage.write_snapshot(mirror.version, *stamp, parts)
        assert storage.write_snapshot(mirror.version, *stamp, parts)
        mirror.snapshot_version = mirror.version  # not written again at close
    store = same_as_without(snapshotted, None, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is not None
    store.close()


def test_a_read_only_store_reads_a_snapshot_and_writes_none(snapshotted: str) -> None:
    with SynapseStore(snapshotted, read_only=True) as store:
        assert store._mirror.snapshot_version is not None
    first_bytes_flipped(snapshotted)
    with SynapseStore(snapshotted, read_only=True) as store:
        assert store._mirror.snapshot_version is None
    with SynapseStore(snapshotted) as store:
        assert store._mirror.snapshot_version is None  # none was written by the reader


KILLED_WHILE_SNAPSHOTTING = """
import os, signal, sys
from synapse_retriever import SynapseStore
from synapse_retriever.mirror import mirror
from synapse_retriever.persistence import postgres, sqlite

mirror.SNAPSHOT_MIN_EDGES = 0
mirror.SNAPSHOT_STALE_VERSIONS = 1           # closing rewrites a snapshot one version old

def some_parts_then_killed(*args):
    for written, row in enumerate(rows(*args)):
        if written == 3:                      # three parts inserted, not committed
            os.kill(os.getpid(), signal.SIGKILL)
        yield row
rows = sqlite.snapshot_rows
sqlite.snapshot_rows = postgres.snapshot_rows = some_parts_then_killed

store = SynapseStore(sys.argv[1])
store.reinforce(["n0", "n6", "x"], at=float(sys.argv[2]))  # committed, after the old snapshot
store.close()                                              # killed writing the new one
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_a_process_killed_while_writing_a_snapshot_leaves_the_one_before(
    snapshotted: str,
) -> None:
    taken = stored(snapshotted, "SELECT part, version, data FROM snapshot ORDER BY part")
    at = T0 + 11 * DAY
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_SNAPSHOTTING, snapshotted, str(at)], check=False
    )
    assert killed.returncode == -signal.SIGKILL
    # the half-written snapshot rolled back: the one before, whole, and the write after it
    assert stored(snapshotted, "SELECT part, version, data FROM snapshot ORDER BY part") == taken
    store = same_as_without(snapshotted, None, at + DAY)
    assert store._mirror.snapshot_version == taken[0][1]  # read, not rebuilt
    assert store.edge("n6", "x") is not None
    store.close()
