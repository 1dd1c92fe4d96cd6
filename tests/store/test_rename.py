"""SynapseStore.rename: a node moves with its edges and uses, in every namespace, on every
backend; a rename that would merge two nodes is refused and writes nothing. Then the stages of
synapse_retriever/store/rename.py, each on a real SQLite file and a real mirror."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mirrors import loaded, state

from synapse_retriever import InvalidValueError, SynapseConfig, SynapseStore, WriteConflictError
from synapse_retriever.mirror.graph import Edge
from synapse_retriever.mirror.mirror import Mirror
from synapse_retriever.persistence.protocols import TransientWriteError, WriteTransaction
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.store.rename import (
    MergeRefusedError,
    lock_edges_to_move,
    lock_uses,
    move_edges,
    namespaces_to_move,
    refuse_merge,
    rename_node,
)
from synapse_retriever.store.write import Event, write_events

DAY = 86_400.0
T0 = 1_600_000_000.0
HITS = [("keys.py", 0.9), ("docs/a.md", 0.8), ("docs/b.md", 0.7), ("docs/c.md", 0.6)]


@pytest.fixture
def store(any_store_path: str) -> Iterator[SynapseStore]:
    with SynapseStore(any_store_path) as opened:
        yield opened


def learn(store: SynapseStore) -> None:
    """pkg/jwt.py used with keys.py three times (personal) and with login.py (shared)."""
    for day in range(3):
        store.reinforce(["pkg/jwt.py", "keys.py"], at=T0 + day * DAY)
    store.reinforce(["pkg/jwt.py", "login.py"], 2.0, "shared", T0 + 3 * DAY)
    store.reinforce(["keys.py", "zeta.py"], at=T0 + 3 * DAY)  # an edge the rename leaves alone


def moved(edge: Edge | None, a: str, b: str) -> Edge:
    """An edge's state with its ends renamed (for comparing before and after)."""
    assert edge is not None
    return dataclasses.replace(edge, a=a, b=b)


def test_a_rename_moves_every_edge_and_use_unchanged(store: SynapseStore) -> None:
    learn(store)
    at = T0 + 4 * DAY
    keys = store.edge("pkg/jwt.py", "keys.py")
    login = store.edge("pkg/jwt.py", "login.py", "shared")
    before = store.recall(HITS, at=at)  # the old name is injected, with its energy
    assert next(h.id for h in before if h.origin == "injected") == "pkg/jwt.py"

    assert store.rename("pkg/jwt.py", "lib/jwt.py") == 2

    # "keys.py" < "lib/jwt.py" < "pkg/...": the stored order of each pair follows the names
    assert store.edge("lib/jwt.py", "keys.py") == moved(keys, "keys.py", "lib/jwt.py")
    assert store.edge("lib/jwt.py", "login.py", "shared") == moved(login, "lib/jwt.py", "login.py")
    assert store.edge("pkg/jwt.py", "keys.py") is None
    assert store.neighbours("pkg/jwt.py", at=at) == []
    assert store.edge("keys.py", "zeta.py") is not None
    after = store.recall(HITS, at=at)  # the same recall, under the new name
    assert [h._replace(id=h.id.replace("pkg/", "lib/"), path=()) for h in before] == [
        h._replace(path=()) for h in after
    ]
    assert "pkg/jwt.py" not in [h.id for h in store.recall(HITS, at=at + DAY)]


def test_what_another_store_on_the_same_file_sees(store_path: str) -> None:
    path = store_path  # an SQLite file, a PostgreSQL schema: what two stores can share
    with SynapseStore(path) as writer, SynapseStore(path) as reader:
        learn(writer)
        reader.recall(HITS, at=T0 + 4 * DAY)  # the reader's mirror is current
        writer.rename("pkg/jwt.py", "lib/jwt.py")
        deadline = time.monotonic() + 30
        while reader.edge("lib/jwt.py", "keys.py") is None:  # within its refresh interval
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert reader.edge("pkg/jwt.py", "keys.py") is None
        assert reader.recall(HITS, at=T0 + 4 * DAY) == writer.recall(HITS, at=T0 + 4 * DAY)
    with SynapseStore(path) as reopened:
        assert reopened.edge("lib/jwt.py", "keys.py") is not None
        assert reopened.neighbours("pkg/jwt.py", at=T0 + 4 * DAY) == []


def test_a_rename_sees_what_another_writer_committed_just_before(store_path: str) -> None:
    # within the other store's refresh interval: nothing may be left behind or merged
    with SynapseStore(store_path) as writer, SynapseStore(store_path) as other:
        learn(writer)
        writer.recall(HITS, at=T0 + 4 * DAY)  # the writer's mirror was current a moment ago
        other.reinforce(["pkg/jwt.py", "late.py"], at=T0 + 4 * DAY)
        assert writer.rename("pkg/jwt.py", "lib/jwt.py") == 3  # the late edge moved too
        assert writer.edge("pkg/jwt.py", "late.py") is None
        other.reinforce(["api.py", "zeta.py"], at=T0 + 4 * DAY)
        with pytest.raises(InvalidValueError, match="already has associations"):
            writer.rename("lib/jwt.py", "api.py")  # api.py has a past now: never merged
    with SynapseStore(store_path) as reopened:
        assert reopened.edge("lib/jwt.py", "late.py") is not None
        assert reopened.edge("api.py", "keys.py") is None


def test_renaming_back_and_forth_restores_the_store(store: SynapseStore) -> None:
    learn(store)
    edges = sorted(store.graph(at=T0 + 4 * DAY).edges(keys=True, data="stored_weight"))
    store.rename("pkg/jwt.py", "lib/jwt.py")
    store.rename("lib/jwt.py", "pkg/jwt.py")  # its old name has no associations left
    assert sorted(store.graph(at=T0 + 4 * DAY).edges(keys=True, data="stored_weight")) == edges


def test_a_rename_that_would_merge_two_nodes_is_refused_and_writes_nothing(
    store: SynapseStore,
) -> None:
    learn(store)
    before = sorted(store.graph(at=T0 + 4 * DAY).edges(keys=True, data="stored_weight"))
    with pytest.raises(InvalidValueError, match=r"'keys\.py' already has associations"):
        store.rename("pkg/jwt.py", "keys.py")
    store.use(["solo.py"], at=T0)  # a node with uses and no edge has associations too
    with pytest.raises(InvalidValueError, match=r"'solo\.py' already has associations"):
        store.rename("pkg/jwt.py", "solo.py")
    assert sorted(store.graph(at=T0 + 4 * DAY).edges(keys=True, data="stored_weight")) == before


def test_bad_renames_are_refused_and_an_unknown_node_moves_nothing(store: SynapseStore) -> None:
    learn(store)
    with pytest.raises(InvalidValueError, match="itself"):
        store.rename("keys.py", "keys.py")
    with pytest.raises(InvalidValueError):
        store.rename("keys.py", "")
    with pytest.raises(InvalidValueError):
        store.rename("keys.py", "a\x00b")
    assert store.rename("never/seen.py", "other.py") == 0
    assert store.edge("keys.py", "pkg/jwt.py") is not None


def test_a_rename_with_an_event_id_moves_once_and_a_refused_one_is_refused_for_good(
    store: SynapseStore, any_store_path: str
) -> None:
    learn(store)
    assert store.rename("pkg/jwt.py", "lib/jwt.py", "personal", event_id="git:1#0") == 1
    store.reinforce(["pkg/jwt.py", "admin.py"], at=T0 + 4 * DAY)  # another file of that name
    assert store.rename("pkg/jwt.py", "lib/jwt.py", "personal", event_id="git:1#0") == 0
    assert store.edge("pkg/jwt.py", "admin.py") is not None
    assert store.edge("lib/jwt.py", "admin.py") is None
    # refused (the new name has a past): nothing moved, the id recorded; met again, even
    # once the new name is free, it moves nothing (a re-run sees what the first run saw)
    before = sorted(store.graph(at=T0 + 5 * DAY).edges(keys=True, data="stored_weight"))
    with pytest.raises(MergeRefusedError, match="already has associations"):
        store.rename("pkg/jwt.py", "keys.py", "personal", event_id="git:2#0")
    assert sorted(store.graph(at=T0 + 5 * DAY).edges(keys=True, data="stored_weight")) == before
    assert store.rename("pkg/jwt.py", "keys.py", "personal", event_id="git:2#0") == 0
    assert store.rename("pkg/jwt.py", "fresh.py", "personal", event_id="git:5#0") == 1
    # an id recorded for a node never learned: a later node of that name is not moved
    assert store.rename("ghost.py", "spirit.py", "shared", event_id="git:3#0") == 0
    store.reinforce(["ghost.py", "login.py"], namespace="shared", at=T0 + 5 * DAY)
    assert store.rename("ghost.py", "spirit.py", "shared", event_id="git:3#0") == 0
    assert store.rename("ghost.py", "spirit.py", "branch:new", event_id="git:4#0") == 0
    if any_store_path == ":memory:":
        return
    with SynapseStore(any_store_path) as reopened:  # recorded in the file, not the process
        assert reopened.rename("pkg/jwt.py", "lib/jwt.py", "personal", event_id="git:1#0") == 0
        assert reopened.edge("ghost.py", "login.py", "shared") is not None


def test_an_event_id_needs_one_namespace_and_a_usable_id(store: SynapseStore) -> None:
    learn(store)
    for namespaces in (None, ["personal", "shared"], []):
        with pytest.raises(InvalidValueError, match="one namespace"):
            store.rename("pkg/jwt.py", "lib/jwt.py", namespaces, event_id="git:1#0")
    for bad, refused in (("", InvalidValueError), ("a\x00b", InvalidValueError), (5, TypeError)):
        with pytest.raises(refused):
            store.rename("pkg/jwt.py", "lib/jwt.py", "personal", event_id=bad)  # type: ignore[arg-type]
    assert store.edge("pkg/jwt.py", "keys.py") is not None


NODES = ["a", "b", "c", "d", "e"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(NODES), min_size=1, max_size=4),
            st.sampled_from(["personal", "shared", "branch:x"]),
            st.floats(0.0, 20.0),
        ),
        max_size=12,
    ),
    st.sampled_from(NODES),
    st.sampled_from(["0-first", "c2", "zz-last"]),  # the new name sorts anywhere
)
def test_after_a_rename_the_store_is_the_same_store_under_the_new_name(
    history: list[tuple[list[str], str, float]], old: str, new: str
) -> None:
    with SynapseStore(":memory:") as store:
        at = T0
        for nodes, namespace, gap in history:
            at += gap * DAY
            store.reinforce(nodes, namespace=namespace, at=at)
        at += DAY
        hits = [(node, 1.0 - i / 10) for i, node in enumerate([*NODES, "x", "y"])]

        def named(graph_edges: list[tuple[str, str, str, object]]) -> list[tuple[object, ...]]:
            swap = {old: new}
            return sorted(
                (*sorted((swap.get(u, u), swap.get(v, v))), k, d) for u, v, k, d in graph_edges
            )

        edges = named(list(store.graph(at=at).edges(keys=True, data="stored_weight")))
        before = {
            ns: store.recall(hits, at=at, active_namespace=ns) for ns in ("personal", "shared")
        }
        store.rename(old, new)
        renamed = [(h[0] if h[0] != old else new, h[1]) for h in hits]
        assert named(list(store.graph(at=at).edges(keys=True, data="stored_weight"))) == edges
        for ns, hits_before in before.items():
            after = store.recall(renamed, at=at, active_namespace=ns)
            mapped = [
                h._replace(
                    id=new if h.id == old else h.id,
                    path=tuple(new if p == old else p for p in h.path),
                    displaced=new if h.displaced == old else h.displaced,
                )
                for h in hits_before
            ]
            assert after == mapped


def test_a_rename_in_one_namespace_leaves_the_others(store: SynapseStore) -> None:
    learn(store)
    assert store.rename("pkg/jwt.py", "lib/jwt.py", namespaces="shared") == 1
    assert store.edge("lib/jwt.py", "login.py", "shared") is not None
    assert store.edge("pkg/jwt.py", "keys.py") is not None  # personal: untouched
    assert store.edge("lib/jwt.py", "keys.py") is None
    assert store.rename("pkg/jwt.py", "lib/jwt.py", namespaces=["branch:x"]) == 0
    with pytest.raises(InvalidValueError, match="namespace"):
        store.rename("pkg/jwt.py", "lib/jwt.py", namespaces="Bad Space")


def test_two_renames_onto_one_name_at_once_never_merge(store_path: str) -> None:
    with SynapseStore(store_path) as first, SynapseStore(store_path) as second:
        first.reinforce(["a.py", "x.py"], at=T0)
        first.reinforce(["b.py", "y.py"], namespace="shared", at=T0)
        second.edge("b.py", "y.py")  # both mirrors current
        start, out = threading.Barrier(2), {}

        def run(store: SynapseStore, old: str) -> None:
            start.wait()
            try:
                out[old] = store.rename(old, "c.py")
            except InvalidValueError:
                out[old] = -1

        threads = [
            threading.Thread(target=run, args=(first, "a.py")),
            threading.Thread(target=run, args=(second, "b.py")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert sorted(out.values()) == [-1, 1]  # one moved, the other refused
    with SynapseStore(store_path) as reopened:
        assert len(reopened.neighbours("c.py", at=T0)) == 1


# -- the stages ----------------------------------------------------------------------------

CONFIG = SynapseConfig()


def written(sqlite_storage: SQLiteStorage, mirror: Mirror, *events: Event) -> None:
    write_events(sqlite_storage, mirror, CONFIG, list(events), "skew")


def pair(a: str, b: str, namespace: str = "personal", delta: float = 0.3) -> Event:
    return Event([a, b], namespace, T0, None, delta)


def test_a_renamed_node_leaves_the_mirror_as_a_fresh_load_of_the_storage(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    written(sqlite_storage, mirror, pair("old", "x"), pair("old", "y", "shared"), pair("x", "y"))
    assert rename_node(sqlite_storage, mirror, "old", "new", None) == 2
    assert state(mirror) == state(loaded(sqlite_storage))
    graph, old = mirror.graph, mirror.graph.index["old"]
    assert graph.incident(old).size == 0  # its uses are blank rows: no use, no edge
    assert all(row.uses == 0 for ns in graph.ns_names for row in mirror.uses.rows(ns, [old]))


def test_the_namespaces_to_move_are_those_of_the_edges_and_of_the_uses(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    written(sqlite_storage, mirror, pair("old", "x"), Event(["old"], "shared", T0, None, 0.0))
    graph = mirror.graph
    old = graph.index["old"]
    edges = graph.incident(old)
    personal, shared = graph.ns_index["personal"], graph.ns_index["shared"]
    assert namespaces_to_move(mirror, old, edges, None) == sorted([personal, shared])
    assert namespaces_to_move(mirror, old, edges, {"shared", "branch:x"}) == [shared]


def test_a_use_the_mirror_missed_starts_the_rename_again_and_writes_nothing(
    sqlite_storage: SQLiteStorage, tmp_path: Path
) -> None:
    mirror = loaded(sqlite_storage)
    written(sqlite_storage, mirror, pair("old", "x"))
    with closing(SQLiteStorage(tmp_path / "synapses.db")) as other:  # another process, say
        written(other, loaded(other), Event(["old"], "personal", T0 + DAY, None, 0.0))
    before = state(loaded(sqlite_storage))
    graph = mirror.graph
    old, spaces = graph.index["old"], [graph.ns_index["personal"]]
    with pytest.raises(TransientWriteError, match="slipped in"), sqlite_storage.write() as tx:
        new = tx.node_ids(["new"])[0]
        lock_uses(tx, mirror, old, new, spaces, spaces)  # the mirror was not caught up
    assert state(loaded(sqlite_storage)) == before  # rolled back: not even the new name's id
    assert "new" not in loaded(sqlite_storage).graph.index
    assert rename_node(sqlite_storage, mirror, "old", "new", None) == 1  # caught up: it moves
    assert state(mirror) == state(loaded(sqlite_storage))


def test_a_node_with_a_past_in_the_namespaces_checked_is_not_merged_into(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    written(sqlite_storage, mirror, pair("old", "x"), pair("new", "y", "shared"))
    graph = mirror.graph
    old, new = graph.index["old"], graph.index["new"]
    personal, shared = graph.ns_index["personal"], graph.ns_index["shared"]
    refuse_merge(mirror, "old", "new", new, [personal], graph.incident(old))  # shared only
    with pytest.raises(InvalidValueError, match="'new' already has associations"):
        refuse_merge(mirror, "old", "new", new, [personal, shared], graph.incident(old))


def test_an_edge_written_under_the_new_name_meanwhile_starts_the_rename_again(
    sqlite_storage: SQLiteStorage, tmp_path: Path
) -> None:
    mirror = loaded(sqlite_storage)
    written(sqlite_storage, mirror, pair("old", "x"))
    with closing(SQLiteStorage(tmp_path / "synapses.db")) as other:
        written(other, loaded(other), pair("new", "x"))
    before = state(loaded(sqlite_storage))
    graph = mirror.graph
    old, spaces = graph.index["old"], [graph.ns_index["personal"]]
    with (
        pytest.raises(TransientWriteError, match="written meanwhile"),
        sqlite_storage.write() as tx,
    ):
        new = tx.node_ids(["new"])[0]
        rows, moved, blanks = lock_edges_to_move(
            tx, graph, graph.incident(old), spaces, old, new, "new"
        )
        move_edges(tx, rows, moved, blanks)
    assert state(loaded(sqlite_storage)) == before


class _LockOrder(SQLiteStorage):
    """A real SQLite store whose write transactions note each call that locks rows, in order:
    "edges" (read by pair or by id) and "uses"."""

    calls: list[str]

    @contextlib.contextmanager
    def write(self) -> Iterator[WriteTransaction]:
        with super().write() as tx:
            yield _Noting(tx, self.calls)


class _Noting:
    LOCKS: ClassVar[dict[str, str]] = {
        "lock_edges": "edges",
        "edges_by_id": "edges",
        "uses_of": "uses",
    }

    def __init__(self, tx: WriteTransaction, calls: list[str]) -> None:
        self._tx, self._calls = tx, calls

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._tx, name)
        if name not in self.LOCKS:
            return found

        def noted(*args: Any) -> Any:
            self._calls.append(self.LOCKS[name])
            return found(*args)

        return noted


def test_a_rename_locks_edges_before_uses_as_every_write_does(tmp_path: Path) -> None:
    # a rename that locked the use rows first waited on a writer holding an edge of the
    # node, which waited on those use rows: a deadlock PostgreSQL broke after a second
    storage = _LockOrder(tmp_path / "s.db")
    storage.calls = []
    with SynapseStore(storage=storage) as store:
        learn(store)
        storage.calls.clear()
        store.reinforce(["pkg/jwt.py", "keys.py"], at=T0 + 4 * DAY)
        writes = list(dict.fromkeys(storage.calls))
        storage.calls.clear()
        store.rename("pkg/jwt.py", "lib/jwt.py")
        renames = list(dict.fromkeys(storage.calls))
    assert writes == renames == ["edges", "uses"]


def test_renames_and_writers_at_once_meet_no_deadlock(postgres_url: str) -> None:
    import psycopg

    nodes = [f"n{i}.py" for i in range(10)]
    with SynapseStore(postgres_url) as store:
        store.reinforce(nodes, namespace="shared")
    stop = threading.Event()

    def write(seed: int) -> None:
        rng = random.Random(seed)
        with SynapseStore(postgres_url) as writer:
            while not stop.is_set():
                writer.reinforce(rng.sample(nodes, 3), namespace="shared")

    def deadlocks() -> int:
        with psycopg.connect(postgres_url, autocommit=True) as db:
            row = db.execute(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        return int(row[0]) if row else 0

    before = deadlocks()
    writers = [threading.Thread(target=write, args=(seed,)) for seed in range(3)]
    for thread in writers:
        thread.start()
    try:
        with SynapseStore(postgres_url) as renamer:
            for i in range(15):
                with contextlib.suppress(WriteConflictError):  # writers came first every retry
                    renamer.rename(random.Random(i).choice(nodes), f"moved-{i}.py")
    finally:
        stop.set()
        for thread in writers:
            thread.join(timeout=60)
    time.sleep(1.1)  # a backend's counts reach pg_stat_database within a second
    assert deadlocks() == before
