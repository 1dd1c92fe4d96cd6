"""A store opened from its snapshot is the store opened from its rows, to the bit; a snapshot
that is stale, truncated, damaged or of another version is rebuilt, never trusted."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import SynapseConfig, SynapseStore
from synapse_retriever.mirror import mirror as mirror_module
from synapse_retriever.mirror.snapshot import FORMAT, HEADER

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


def without_snapshot(path: Path) -> Path:
    """A copy of the store at ``path`` with no snapshot in it."""
    copy = path.with_name(f"plain-{path.name}")
    shutil.copyfile(path, copy)
    with sqlite3.connect(copy) as db:
        db.execute("DELETE FROM snapshot")
    return copy


def same_as_without(path: Path, config: SynapseConfig | None, at: float) -> SynapseStore:
    """Open ``path`` (from its snapshot, if sound) and the same store without its snapshot:
    the same state. Returns the first, open."""
    plain = without_snapshot(path)
    with SynapseStore(plain, config=config) as rows:
        expected = state(rows, at)
    store = SynapseStore(path, config=config)
    assert state(store, at) == expected
    return store


@settings(max_examples=40, deadline=None)
@given(steps, steps, st.sampled_from([SynapseConfig(), SynapseConfig.published()]))
def test_a_store_opened_from_its_snapshot_recalls_what_its_rows_give(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]], config: SynapseConfig
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.db"
        with SynapseStore(path, config=config) as store:
            at = play(store, before, T0)
        # written at close; then more writes, logged after it, and no newer snapshot
        with SynapseStore(path, config=config) as store:
            assert store._mirror.snapshot_version is not None
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(mirror_module, "SNAPSHOT_STALE_VERSIONS", 10**9)
                at = play(store, after, at)
        store = same_as_without(path, config, at + DAY)
        assert store._mirror.snapshot_version is not None  # it was read, not rebuilt
        store.close()


# -- snapshots that must not be trusted ---------------------------------------------------


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Path]:
    """A file store of a few namespaces with a snapshot, and a write after it."""
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        play(store, [("reinforce", NODES[:5], 1.0, ns, 1.0) for ns in NAMESPACES], T0)
    with SynapseStore(path) as store:
        assert store._mirror.snapshot_version is not None
        store.reinforce(["n0", "n6", "n7"], at=T0 + 10 * DAY)
    yield path


def edit(path: Path, change: Callable[[sqlite3.Connection], object]) -> None:
    with sqlite3.connect(path) as db:
        change(db)


def header_edit(key: str, value: object) -> Callable[[sqlite3.Connection], object]:
    def change(db: sqlite3.Connection) -> None:
        (raw,) = db.execute("SELECT data FROM snapshot WHERE part = ?", (HEADER,)).fetchone()
        header = json.loads(raw)
        header[key] = value
        db.execute(
            "UPDATE snapshot SET data = ? WHERE part = ?", (json.dumps(header).encode(), HEADER)
        )

    return change


def first_bytes_flipped(db: sqlite3.Connection) -> None:
    (data,) = db.execute("SELECT data FROM snapshot WHERE part = 'edge.w0'").fetchone()
    damaged = bytes([data[0] ^ 0xFF]) + data[1:]
    db.execute("UPDATE snapshot SET data = ? WHERE part = 'edge.w0'", (damaged,))


BAD = {
    "stale: the change logs no longer reach back to it": lambda db: db.execute(
        "UPDATE meta SET value = (SELECT value FROM meta WHERE key = 'version') "
        "WHERE key = 'log_horizon'"
    ),
    "ahead of the store's version": lambda db: db.execute(
        "UPDATE snapshot SET version = version + 5"
    ),
    "truncated": lambda db: db.execute(
        "UPDATE snapshot SET data = substr(data, 1, length(data) - 8) WHERE part = 'edge.last'"
    ),
    "a part missing": lambda db: db.execute("DELETE FROM snapshot WHERE part = 'adjacency.other'"),
    "damaged": first_bytes_flipped,
    "parts of two versions": lambda db: db.execute(
        "UPDATE snapshot SET version = version - 1 WHERE part = 'log'"
    ),
    "another snapshot format": header_edit("format", FORMAT + 1),
    "another schema version": header_edit("schema", 99),
    "a header that is not JSON": lambda db: db.execute(
        "UPDATE snapshot SET data = x'00ff' WHERE part = ?", (HEADER,)
    ),
    "a stamp that differs from its rows'": lambda db: db.execute(
        "UPDATE snapshot SET max_node = max_node + 1"
    ),
}


@pytest.mark.parametrize("damage", list(BAD), ids=list(BAD))
def test_a_snapshot_that_cannot_be_trusted_is_rebuilt(stored: Path, damage: str) -> None:
    edit(stored, BAD[damage])
    store = same_as_without(stored, None, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is None  # loaded from the rows
    store.close()  # ... and a sound snapshot written instead
    store = same_as_without(stored, None, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is not None
    store.close()


def test_a_snapshot_of_another_use_history_is_rebuilt(stored: Path) -> None:
    config = SynapseConfig.actr(use_history=3)
    store = same_as_without(stored, config, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is None
    store.close()


def test_another_decay_recomputes_only_the_prune_times(stored: Path) -> None:
    config = SynapseConfig.actr(prune_threshold=0.2)  # most edges are pruned earlier
    store = same_as_without(stored, config, T0 + 20 * DAY)
    assert store._mirror.snapshot_version is not None
    store.close()


def test_a_small_store_keeps_no_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirror_module, "SNAPSHOT_MIN_EDGES", 100_000)
    path = tmp_path / "s.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=T0)
    with sqlite3.connect(path) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'snapshot'").fetchone()


def test_a_snapshot_is_not_rewritten_until_it_is_stale(stored: Path) -> None:
    with SynapseStore(stored) as store:
        taken = store._mirror.snapshot_version
        store.reinforce(["n1", "n2"], at=T0 + 30 * DAY)
    with SynapseStore(stored) as store:  # one version later: the same snapshot, and the log
        assert store._mirror.snapshot_version == taken


def test_closing_waits_for_no_lock_to_write_a_snapshot(stored: Path) -> None:
    edit(stored, BAD["damaged"])  # so that closing wants to write one
    store = SynapseStore(stored)
    other = sqlite3.connect(stored, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        store.close()  # at once: the snapshot is skipped
    finally:
        other.execute("ROLLBACK")
        other.close()
    with SynapseStore(stored) as again:
        assert again._mirror.snapshot_version is None


def test_a_read_only_store_reads_a_snapshot_and_writes_none(stored: Path) -> None:
    with SynapseStore(stored, read_only=True) as store:
        assert store._mirror.snapshot_version is not None
    edit(stored, BAD["damaged"])
    with SynapseStore(stored, read_only=True) as store:
        assert store._mirror.snapshot_version is None
    with SynapseStore(stored) as store:
        assert store._mirror.snapshot_version is None  # none was written by the reader
