"""A layered store: personal and branch namespaces in a local file, the team's in PostgreSQL.

It must learn and recall exactly as one store holding every namespace would, write each
namespace only to its own backend, and see teammates' shared writes (and only those).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_backends import new_schema

from synapse_retriever import CoActivation, ReadOnlyStoreError, SynapseConfig, SynapseStore
from synapse_retriever.persistence.layered import LayeredStorage

DAY = 86_400.0
HITS = [("a", 0.9), ("b", 0.8), ("x", 0.7), ("y", 0.6)]
NAMESPACES = ["personal", "shared", "branch:main", "ephemeral"]

histories = st.lists(
    st.tuples(
        st.lists(st.sampled_from(list("abcdefg")), min_size=1, max_size=4),
        st.sampled_from(NAMESPACES),
        st.floats(0.0, 20.0),  # days after the previous event
        st.booleans(),  # in a batch with the next one
    ),
    max_size=14,
)


def _learn(store: SynapseStore, history: list[tuple[list[str], str, float, bool]]) -> float:
    now, batch = 0.0, []
    for nodes, namespace, gap, together in history:
        now += gap * DAY
        batch.append(CoActivation(nodes, namespace=namespace, at=now))
        if not together:
            store.reinforce_many(batch)
            batch = []
    store.reinforce_many(batch)
    return now


def _state(store: SynapseStore, at: float) -> tuple[object, ...]:
    edges = sorted(
        (u, v, k, round(d["stored_weight"], 12), d["count"], d["half_life_days"])
        for u, v, k, d in store.graph(at=at).edges(keys=True, data=True)
    )  # u, v in either order: sort each pair
    pairs = sorted((min(u, v), max(u, v), *rest) for u, v, *rest in edges)
    recalls = [
        [(h.id, round(h.score, 12), h.origin, round(h.energy, 9)) for h in
         store.recall(HITS, at=at + DAY, active_namespace=ns)]
        for ns in ("personal", "shared")
    ]  # fmt: skip
    return tuple(pairs), tuple(map(tuple, recalls))


@settings(max_examples=40, deadline=None)
@given(histories)
def test_a_layered_store_learns_and_recalls_as_one_store(
    history: list[tuple[list[str], str, float, bool]],
) -> None:
    single = SynapseStore(":memory:")
    layered = SynapseStore.layered(local=":memory:", shared=":memory:")
    now = _learn(single, history)
    _learn(layered, history)
    assert _state(layered, now) == _state(single, now)
    assert layered.decay(at=now + 100 * DAY).pruned == single.decay(at=now + 100 * DAY).pruned
    assert _state(layered, now + 100 * DAY) == _state(single, now + 100 * DAY)


EDGES_BY_NAME = (
    "SELECT s.name, x.name, y.name FROM edges e JOIN namespaces s ON s.id = e.namespace "
    "JOIN nodes x ON x.id = e.a JOIN nodes y ON y.id = e.b ORDER BY 1, 2, 3"
)


def _edges_in_sqlite(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute(EDGES_BY_NAME).fetchall()


def _edges_in_postgres(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(EDGES_BY_NAME).fetchall()


def test_each_namespace_is_written_to_its_own_backend(tmp_path: Path, postgres_url: str) -> None:
    local = tmp_path / "me.db"
    with SynapseStore.layered(local=local, shared=postgres_url) as store:
        store.reinforce(["jwt.py", "keys.py"], namespace="shared", at=0)
        store.reinforce(["jwt.py", "todo.md"], at=0)
        store.reinforce(["jwt.py", "wip.py"], namespace="branch:feature", at=0)
        assert store.path.startswith(str(local)) and "127.0.0.1" in store.path
    assert _edges_in_sqlite(local) == [
        ("branch:feature", "jwt.py", "wip.py"),
        ("personal", "jwt.py", "todo.md"),
    ]
    assert _edges_in_postgres(postgres_url) == [("shared", "jwt.py", "keys.py")]
    with SynapseStore.layered(local=local, shared=postgres_url) as again:  # reopened: both
        assert sorted(o for o, _, _ in again.neighbours("jwt.py", at=0)) == [
            "keys.py",
            "todo.md",
            "wip.py",
        ]


def test_teammates_share_the_shared_namespace_only(tmp_path: Path, postgres_url: str) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    alice = SynapseStore.layered(local=tmp_path / "alice.db", shared=postgres_url, config=config)
    bob = SynapseStore.layered(local=tmp_path / "bob.db", shared=postgres_url, config=config)
    with alice, bob:
        alice.reinforce(["jwt.py", "keys.py"], namespace="shared", at=0, event_id="commit:1")
        alice.reinforce(["jwt.py", "diary.md"], at=0)  # Alice's own
        deadline = time.monotonic() + 10
        while bob.edge("jwt.py", "keys.py", "shared") is None:
            assert time.monotonic() < deadline, "Bob never saw Alice's shared edge"
            time.sleep(0.01)
        assert bob.edge("jwt.py", "diary.md") is None
        # the same commit replayed by Bob counts once: its id is the team's
        assert bob.reinforce(["jwt.py", "keys.py"], namespace="shared", at=0,
                             event_id="commit:1") == 0  # fmt: skip
        bob.reinforce(["jwt.py", "keys.py"], namespace="shared", at=DAY)
        edge = bob.edge("jwt.py", "keys.py", "shared")
        assert edge is not None and edge.activation_count == 2
        hits = [h.id for h in bob.recall([("jwt.py", 1.0), ("x", 0.5)], at=DAY)]
        assert hits == ["jwt.py", "keys.py"]


def test_one_postgresql_schema_under_two_urls_is_refused_as_layers(
    postgres_url: str, postgres_database: str
) -> None:
    # localhost and 127.0.0.1, postgres:// and postgresql://: one schema, whose two writes
    # locked each other out until busy_timeout_s, then WriteConflictError after every retry
    from synapse_retriever import InvalidValueError

    assert "127.0.0.1" in postgres_url
    for other in (
        postgres_url.replace("127.0.0.1", "localhost", 1),
        postgres_url.replace("postgresql://", "postgres://", 1),
    ):
        with pytest.raises(InvalidValueError, match="one database"):
            SynapseStore.layered(local=postgres_url, shared=other)
    with (
        new_schema(postgres_database) as elsewhere,  # another schema: another store
        SynapseStore.layered(local=postgres_url, shared=elsewhere) as store,
    ):
        store.reinforce_many(
            [CoActivation(["a", "b"]), CoActivation(["a", "b"], namespace="shared")]
        )
        assert store.edge("a", "b", "shared") is not None


def test_a_read_only_shared_layer_refuses_shared_writes_only(
    tmp_path: Path, postgres_url: str
) -> None:
    SynapseStore(postgres_url).close()
    with SynapseStore.layered(
        local=tmp_path / "me.db", shared=postgres_url, read_only_shared=True
    ) as store:
        assert store.reinforce(["a", "b"], at=0) == 1
        with pytest.raises(ReadOnlyStoreError):
            store.reinforce(["a", "b"], namespace="shared", at=0)
        assert store.edge("a", "b") is not None and store.edge("a", "b", "shared") is None


def test_a_failed_write_leaves_no_ids_behind_and_a_retried_batch_counts_once(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapse_retriever import InvalidValueError
    from synapse_retriever.persistence import postgres

    local = tmp_path / "me.db"
    store = SynapseStore.layered(local=local, shared=postgres_url)
    store.reinforce(["a", "b"], namespace="shared", at=10)
    with pytest.raises(InvalidValueError, match="backwards"):  # rolled back in both layers
        store.reinforce_many(
            [
                CoActivation(["new1", "new2"], at=20),
                CoActivation(["new3", "x"], namespace="shared", at=20),
                CoActivation(["a", "b"], namespace="shared", at=5),
            ],
            late="raise",
        )
    store.reinforce(["kk", "c"], at=30)  # new names after a rollback get ids of their own
    store.reinforce(["kk", "z"], namespace="shared", at=30)
    finish = postgres._PostgresTransaction.finish
    failures = [psycopg.errors.DeadlockDetected("deadlock detected")]

    def deadlock_once(self: object) -> None:
        if failures:
            raise failures.pop()
        finish(self)  # type: ignore[arg-type]

    monkeypatch.setattr(postgres._PostgresTransaction, "finish", deadlock_once)
    store.reinforce_many(
        [CoActivation(["c", "d"], at=40), CoActivation(["c", "d"], namespace="shared", at=40)]
    )  # the shared part fails first: the local part rolls back, and the whole runs again
    assert not failures
    store.close()
    with SynapseStore.layered(local=local, shared=postgres_url) as again:
        assert again.edge("kk", "c") is not None and again.edge("kk", "z", "shared") is not None
        for namespace in ("personal", "shared"):
            edge = again.edge("c", "d", namespace)
            assert edge is not None and edge.activation_count == 1
        assert again.edge("new1", "new2") is None and again.edge("new3", "x", "shared") is None
    assert ("personal", "c", "kk") in _edges_in_sqlite(local)
    assert ("shared", "kk", "z") in _edges_in_postgres(postgres_url)


def test_the_view_stays_current_after_a_teammate_writes_in_between(
    tmp_path: Path, postgres_url: str
) -> None:
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    local = tmp_path / "me.db"
    with SynapseStore(postgres_url) as first:  # the team's store holds something already
        first.reinforce(["t", "u"], namespace="shared", at=0)
    mine = SynapseStore.layered(local=local, shared=postgres_url, config=config)
    with mine, SynapseStore(postgres_url) as teammate:
        for step in range(4):
            teammate.reinforce(["t", f"u{step}"], namespace="shared", at=step)
            mine.reinforce_many(  # both layers, each time after the teammate's commit
                [
                    CoActivation(["a", f"p{step}"], at=step),
                    CoActivation(["a", f"s{step}"], namespace="shared", at=step),
                ]
            )
            mine.reinforce(["a", f"q{step}"], at=step)
        hits = [("a", 0.9), ("x", 0.5), ("y", 0.4), ("z", 0.3)]
        mine.edge("a", "b")  # a read catches up with both layers
        storage = mine._storage
        assert isinstance(storage, LayeredStorage)
        with sqlite3.connect(local) as db:
            version = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
        assert storage.cursors[0] == version  # the local layer is not left behind
        with SynapseStore.layered(local=local, shared=postgres_url, config=config) as fresh:
            for namespace in ("personal", "shared"):
                assert mine.recall(hits, at=10, active_namespace=namespace) == fresh.recall(
                    hits, at=10, active_namespace=namespace
                )
            assert sorted(mine.graph(at=10).edges(keys=True)) == sorted(
                fresh.graph(at=10).edges(keys=True)
            )


def test_a_sweep_with_a_read_only_shared_layer_sweeps_the_local_one(
    tmp_path: Path, postgres_url: str
) -> None:
    with SynapseStore.layered(local=tmp_path / "me.db", shared=postgres_url) as writer:
        writer.reinforce(["a", "b"], namespace="shared", at=0)
        writer.reinforce(["a", "c"], at=0)
    with SynapseStore.layered(
        local=tmp_path / "me.db", shared=postgres_url, read_only_shared=True
    ) as reader:
        assert reader.decay(at=400 * DAY, force=True).pruned == 1  # the local edge only
        assert reader.repair(dry_run=True).edges == 0  # reads; the shared layer left alone
        assert reader.repair().edges == 0
        assert reader.edge("a", "c") is None
        assert reader.edge("a", "b", "shared") is not None  # left to the team's writers
    assert _edges_in_postgres(postgres_url) == [("shared", "a", "b")]


def test_a_rename_moves_a_node_in_both_layers(tmp_path: Path, postgres_url: str) -> None:
    local = tmp_path / "me.db"
    with SynapseStore.layered(local=local, shared=postgres_url) as store:
        store.reinforce(["pkg/jwt.py", "keys.py"], at=0)
        store.reinforce(["pkg/jwt.py", "login.py"], namespace="shared", at=0)
        assert store.rename("pkg/jwt.py", "lib/jwt.py") == 2
    assert _edges_in_sqlite(local) == [("personal", "keys.py", "lib/jwt.py")]
    assert _edges_in_postgres(postgres_url) == [("shared", "lib/jwt.py", "login.py")]
    with SynapseStore.layered(local=local, shared=postgres_url) as store:
        assert store.neighbours("pkg/jwt.py", at=0) == []
        assert [other for other, _, _ in store.neighbours("lib/jwt.py", at=0)] == [
            "keys.py",
            "login.py",
        ]


def _both_events(store: SynapseStore, batch: bool) -> None:
    events = [
        CoActivation(["a", "b"], namespace="personal", at=0, event_id="commit:1"),
        CoActivation(["a", "c"], namespace="shared", at=0, event_id="commit:1"),
    ]
    if batch:
        store.reinforce_many(events)
    else:
        for event in events:
            store.reinforce_many([event])


@pytest.mark.parametrize("batch", [True, False])
def test_one_event_id_in_both_layers_writes_both_events_in_a_batch_or_not(
    tmp_path: Path, postgres_url: str, batch: bool
) -> None:
    with SynapseStore.layered(tmp_path / "local.db", postgres_url) as store:
        _both_events(store, batch)
        _both_events(store, batch)  # a replay: nothing more
        for other, namespace in (("b", "personal"), ("c", "shared")):
            edge = store.edge("a", other, namespace)
            assert edge is not None and edge.activation_count == 1, namespace
    with SynapseStore(postgres_url) as team:  # the id is recorded with its edges
        edge = team.edge("a", "c", "shared")
        assert edge is not None and edge.activation_count == 1


def test_a_lock_held_too_long_in_the_shared_layer_is_a_typed_error(
    tmp_path: Path, postgres_url: str
) -> None:
    # an error inside the shared layer's transaction was typed by that layer, then dropped:
    # the raw psycopg error reached the caller, and a transient one was never retried
    from synapse_retriever import WriteConflictError

    config = SynapseConfig().replace(busy_timeout_s=0.5)
    store = SynapseStore.layered(local=tmp_path / "me.db", shared=postgres_url, config=config)
    store.reinforce(["a", "b"], namespace="shared", at=10)
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute("SELECT * FROM edges FOR UPDATE")  # held past busy_timeout_s
        with pytest.raises(WriteConflictError, match="longer than busy_timeout_s"):
            store.reinforce(["a", "b"], namespace="shared", at=20)
    assert store.edge("a", "b", "shared").activation_count == 1
    store.close()


def test_a_shared_write_whose_connection_is_killed_runs_again(
    tmp_path: Path, postgres_url: str
) -> None:
    store = SynapseStore.layered(local=tmp_path / "me.db", shared=postgres_url)
    store.reinforce(["a", "b"], namespace="shared", at=10)
    with psycopg.connect(postgres_url) as blocker, psycopg.connect(postgres_url) as admin:
        admin.autocommit = True
        blocker.execute("SELECT * FROM edges FOR UPDATE")  # the write waits inside its transaction

        def kill_the_waiting_writer() -> None:
            for _ in range(500):
                waiting = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> %s",
                    (blocker.info.backend_pid,),
                ).fetchall()
                if waiting:
                    for (pid,) in waiting:
                        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    blocker.rollback()
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_the_waiting_writer)
        killer.start()
        store.reinforce(["a", "b"], namespace="shared", at=20)
        killer.join()
    assert store.edge("a", "b", "shared").activation_count == 2  # run again, once
    store.close()


def test_a_namespace_a_layer_does_not_keep_is_left_out_of_the_view(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the laptop's file kept the 'shared' edges a bootstrap wrote before team mode (an
    # export moves them, it does not delete them), and a teammate's plain store wrote its
    # default 'personal' namespace into the team's database: both were read into the view
    # beside the layers that keep those namespaces, each pair twice (stats counted 4 edges,
    # the graph 3), a write met only one of the two, and a rename kept failing
    local = tmp_path / "me.db"
    with SynapseStore(local) as before:
        before.reinforce(["a", "b"], namespace="shared", at=0)
        before.reinforce(["a", "c"], namespace="shared", at=0)
        before.reinforce(["a", "x"], at=0)
    with SynapseStore(postgres_url) as teammate:
        teammate.reinforce(["a", "b"], namespace="shared", at=0)
        teammate.reinforce(["a", "b"], namespace="shared", at=DAY)
        teammate.reinforce(["a", "p"], at=0)  # personal: the teammate's own
    with (
        caplog.at_level(logging.WARNING, logger="synapse_retriever.persistence.layered"),
        SynapseStore.layered(local=local, shared=postgres_url) as store,
    ):
        said = [record.getMessage() for record in caplog.records]
        assert len(said) == 1, said  # the local copies are said; a teammate's rows are not
        assert "(the local layer) holds 'shared' (2 edges)" in said[0]
        store.repair()  # a full reload: said once for the storage's life
        assert len(caplog.records) == 1
        neighbours = store.neighbours("a", at=DAY)
        assert sorted((o, e.namespace, e.activation_count) for o, e, _ in neighbours) == [
            ("b", "shared", 2),  # the team's, once
            ("x", "personal", 1),
        ]
        assert store.stats(at=DAY)["edges"] == 2
        store.reinforce(["a", "c"], namespace="shared", at=2 * DAY)
        store.reinforce(["a", "p"], at=2 * DAY)
        assert store.rename("a", "z") == 4
        seen = _state(store, 2 * DAY)
        assert sorted(
            (*sorted((u, v)), k) for u, v, k in store.graph(at=2 * DAY).edges(keys=True)
        ) == [
            ("b", "z", "shared"),
            ("c", "z", "shared"),
            ("p", "z", "personal"),
            ("x", "z", "personal"),
        ]
    with SynapseStore.layered(local=local, shared=postgres_url) as fresh:
        assert _state(fresh, 2 * DAY) == seen
    # the rows of the namespaces each layer does not keep are left as they were
    assert [e for e in _edges_in_sqlite(local) if e[0] == "shared"] == [
        ("shared", "a", "b"),
        ("shared", "a", "c"),
    ]
    assert [e for e in _edges_in_postgres(postgres_url) if e[0] == "personal"] == [
        ("personal", "a", "p")
    ]


def test_layers_that_name_one_database_are_refused_before_anything_is_made(
    tmp_path: Path,
) -> None:
    # two connections to one file: a batch over both layers began the shared one's write,
    # found the lock held (by its own local part), rolled back, found it free, and again,
    # for ever (busy_timeout_s never ran out: each wait found the lock free)
    from synapse_retriever import InvalidValueError

    path = tmp_path / "me.db"
    for shared in (path, tmp_path / "." / "me.db", str(path)):
        with pytest.raises(InvalidValueError, match="one database"):
            SynapseStore.layered(local=path, shared=shared)
    assert not path.exists()  # refused before a file is made
    SynapseStore(path).close()
    (tmp_path / "link.db").hardlink_to(path)
    with pytest.raises(InvalidValueError, match="one database"):
        SynapseStore.layered(local=path, shared=tmp_path / "link.db")
    for spelling in (f"file:{path}", f"file://{path}?mode=rwc"):  # a URI of the same file
        with pytest.raises(InvalidValueError, match="one database"):
            SynapseStore.layered(local=path, shared=spelling)
    memdb = "file:/synapse-layers-test?vfs=memdb"  # SQLite shares a memdb name begun by "/"
    for spelling in (memdb, "file:///synapse-layers-test?vfs=memdb", f"{memdb}#x",
                     "file://localhost/synapse-layers-%74est?vfs=memdb&"):  # fmt: skip
        with pytest.raises(InvalidValueError, match="one database"):
            SynapseStore.layered(local=memdb, shared=spelling)  # a write then waited for ever
    private = "file:synapse-layers-test?vfs=memdb"  # one database per connection: two here
    SynapseStore.layered(local=private, shared=private).close()  # refused as one file before
    with SynapseStore.layered(local=":memory:", shared=":memory:") as store:  # two databases
        store.reinforce_many(
            [CoActivation(["a", "b"]), CoActivation(["a", "b"], namespace="shared")]
        )
        assert store.edge("a", "b", "shared") is not None
