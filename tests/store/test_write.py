"""The write path's stages (synapse_retriever/store/write.py), each on a real SQLite file and
a real mirror: what each stage writes, and that a failure in any stage leaves nothing behind.
The store-level behaviour (replays, late=, concurrency, kill -9) is tested through
SynapseStore in tests/store/test_facade.py, tests/store/test_reinforce_many.py and
tests/store/test_concurrency.py."""

from __future__ import annotations

import pytest
from mirrors import loaded, state

from synapse_retriever import InvalidValueError, SynapseConfig
from synapse_retriever.learning.decay import MAX_COUNT
from synapse_retriever.persistence import UseRow
from synapse_retriever.persistence.rows import (
    EdgeKey,
    EdgeRow,
    RecentEvent,
    edge_rows,
    rows_array,
)
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.store.write import (
    Event,
    Late,
    Reinforced,
    drop_replays,
    namespace_ids,
    node_ids,
    record_uses,
    step_edges,
    write_events,
)

DAY = 86_400.0
CONFIG = SynapseConfig()


def event(ids: list[str], at: float | None = 0.0, event_id: str | None = None) -> Event:
    return Event(ids, "personal", at, event_id, CONFIG.learning.learning_rate)


def test_a_batch_leaves_the_mirror_as_a_fresh_load_of_the_storage(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    done = write_events(
        sqlite_storage,
        mirror,
        CONFIG,
        [
            event(["a", "b", "c"], at=0.0, event_id="commit:1"),
            Event(["a", "d"], "shared", DAY, None, 0.6),
            Event(["readme"], "personal", DAY, None, 0.0),  # a use: no edge
        ],
        "skew",
    )
    assert done == [Reinforced(3, 0.0), Reinforced(1, DAY), Reinforced(0, DAY)]
    assert state(mirror) == state(loaded(sqlite_storage))
    assert mirror.graph.edge("shared", "a", "d") is not None


def test_an_edge_at_the_largest_count_stays_there_in_storage_and_mirror(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    write_events(sqlite_storage, mirror, CONFIG, [event(["a", "b"])], "skew")
    graph = mirror.graph
    key = EdgeKey(graph.ns_index["personal"], graph.index["a"], graph.index["b"])
    with sqlite_storage.write() as tx:  # as two billion reinforcements would leave it
        (row,) = edge_rows(tx.lock_edges([key]))
        tx.update(rows_array([row._replace(activation_count=MAX_COUNT)]))
    mirror = loaded(sqlite_storage)
    write_events(sqlite_storage, mirror, CONFIG, [event(["a", "b"], at=DAY)], "skew")
    assert mirror.graph.edge("personal", "a", "b").activation_count == MAX_COUNT  # not wrapped
    assert state(mirror) == state(loaded(sqlite_storage))


def test_namespaces_are_created_in_sorted_order_and_then_read_from_the_mirror(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    with sqlite_storage.write() as tx:
        ids = namespace_ids(tx, mirror.graph, ["shared", "branch:b", "shared"])
    assert list(ids) == ["shared", "branch:b"]  # the order asked for, each once
    assert ids["branch:b"] < ids["shared"]  # created sorted, as every writer creates them
    write_events(
        sqlite_storage, mirror, CONFIG, [Event(["x", "y"], "branch:b", 0.0, None, 0.3)], "skew"
    )
    with sqlite_storage.write() as tx:
        assert namespace_ids(tx, mirror.graph, ["branch:b"]) == {"branch:b": ids["branch:b"]}


def test_node_ids_are_the_storages_whether_known_or_new(sqlite_storage: SQLiteStorage) -> None:
    mirror = loaded(sqlite_storage)
    write_events(sqlite_storage, mirror, CONFIG, [event(["a", "b"])], "skew")
    with sqlite_storage.write() as tx:
        known = node_ids(tx, mirror.graph, ["b", "a"])
        mixed = node_ids(tx, mirror.graph, ["a", "new"])
    assert known == {"b": mirror.graph.index["b"], "a": mirror.graph.index["a"]}
    assert mixed["a"] == known["a"] and mixed["new"] not in known.values()


def test_new_edges_get_ids_in_the_pair_index_order_and_come_back_in_the_given_order(
    sqlite_storage: SQLiteStorage,
) -> None:
    keys = [(1, 3, 4), (2, 1, 2), (1, 1, 2), (1, 2, 3)]  # (namespace, a, b)
    table = rows_array([EdgeRow(0, ns, a, b, 0.1 * a, b, 30.0, 0.0, 0.0) for ns, a, b in keys])
    with sqlite_storage.write() as tx:
        assert [tx.namespace_id("personal"), tx.namespace_id("shared")] == [1, 2]
        assert tx.node_ids(["a", "b", "c", "d"]) == [1, 2, 3, 4]
        placed = tx.insert(table)
    assert placed[:, 1:].tolist() == table[:, 1:].tolist()  # the rows as given, in order
    # ids follow (a, b, namespace), the index's order: (1, 2, 1) (1, 2, 2) (2, 3, 1) (3, 4, 1)
    assert placed[:, 0].tolist() == [4, 2, 1, 3]
    with sqlite_storage.write() as tx:
        stored = tx.edges_by_id([1, 2, 3, 4])
    assert sorted(stored) == sorted(edge_rows(placed))


def test_a_recorded_event_id_is_a_replay_once_committed_only(sqlite_storage: SQLiteStorage) -> None:
    events = [event(["a", "b"], event_id="e1"), event(["a", "c"]), event(["a"], event_id="e1")]
    times = [0.0, 0.0, 0.0]
    graph = loaded(sqlite_storage).graph
    with pytest.raises(RuntimeError), sqlite_storage.write() as tx:
        spaces = namespace_ids(tx, graph, ["personal"])
        assert drop_replays(tx, events, times, spaces, 5.0) == [True, True, False]  # e1 twice
        raise RuntimeError("the transaction fails after the ids were recorded")
    with sqlite_storage.write() as tx:  # rolled back: e1 is no replay
        assert drop_replays(tx, events[:1], times[:1], spaces, 5.0) == [True]
    with sqlite_storage.write() as tx:
        assert drop_replays(tx, events, times, spaces, 5.0) == [False, True, False]


def test_an_event_without_ids_records_no_event_id(sqlite_storage: SQLiteStorage) -> None:
    empty = Event([], "personal", 0.0, "e1", 0.3)  # nothing to learn: its id is not spent
    with sqlite_storage.write() as tx:
        assert drop_replays(tx, [empty], [0.0], {}, 5.0) == [True]
    graph = loaded(sqlite_storage).graph
    with sqlite_storage.write() as tx:
        spaces = namespace_ids(tx, graph, ["personal"])
        assert drop_replays(tx, [event(["a", "b"], event_id="e1")], [0.0], spaces, 5.0) == [True]


@pytest.mark.parametrize(
    ("late", "at", "written_at"),
    [
        ("skew", DAY - 5.0, DAY),  # 5 s late, within max_clock_skew_s: moved forward
        ("clamp", 0.5 * DAY, DAY),  # half a day late: moved however much
        ("skew", 2 * DAY, 2 * DAY),  # in order: kept
    ],
)
def test_a_late_event_is_moved_to_its_edges_last_reinforcement(
    sqlite_storage: SQLiteStorage, late: Late, at: float, written_at: float
) -> None:
    mirror = loaded(sqlite_storage)
    write_events(sqlite_storage, mirror, CONFIG, [event(["a", "b"], at=DAY)], "skew")
    with sqlite_storage.write() as tx:
        spaces = namespace_ids(tx, mirror.graph, ["personal"])
        nodes = node_ids(tx, mirror.graph, ["a", "b", "c"])
        ids_of = {0: [nodes["a"], nodes["b"]], 1: [nodes["c"]]}
        events = [event(["a", "b"], at=at), event(["c"], at=at)]
        edges = step_edges(tx, mirror.graph, CONFIG, events, ids_of, spaces, [at, at], late)
    assert edges.counts == {0: 1}  # one node: no pair
    assert edges.times == [written_at, at]  # an event without edges keeps its time
    (updated,) = edge_rows(edges.updated)
    assert updated.activation_count == 2 and not len(edges.inserted)
    assert updated.last_reinforced_at == written_at


@pytest.mark.parametrize(("late", "behind_s"), [("raise", 1.0), ("skew", 3 * DAY)])
def test_a_refused_late_event_writes_nothing_and_leaves_the_mirror(
    sqlite_storage: SQLiteStorage, late: Late, behind_s: float
) -> None:
    mirror = loaded(sqlite_storage)
    write_events(sqlite_storage, mirror, CONFIG, [event(["a", "b"], at=4 * DAY)], "skew")
    before = state(mirror)
    batch = [event(["x", "y"], at=4 * DAY, event_id="e2"), event(["a", "b"], at=4 * DAY - behind_s)]
    with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
        write_events(sqlite_storage, mirror, CONFIG, batch, late)
    assert state(mirror) == before == state(loaded(sqlite_storage))  # not x, y, nor e2
    done = write_events(sqlite_storage, mirror, CONFIG, batch[:1], "skew")
    assert done == [Reinforced(1, 4 * DAY)]  # e2 was never recorded


def test_uses_count_once_per_event_and_together_for_two_nodes_or_more(
    sqlite_storage: SQLiteStorage,
) -> None:
    mirror = loaded(sqlite_storage)
    with sqlite_storage.write() as tx:
        ns = namespace_ids(tx, mirror.graph, ["personal"])["personal"]
        ids = node_ids(tx, mirror.graph, ["a", "b"])
        a, b = ids["a"], ids["b"]
        uses, together = record_uses(
            tx, CONFIG, [RecentEvent(ns, 0.0, [a, b]), RecentEvent(ns, DAY, [a])]
        )
    assert together == {ns: 1}  # the event of one node is a use, not a co-activation
    assert sorted(uses) == [
        UseRow(namespace=ns, node=a, uses=2, together=1, first=0.0, recent=(0.0, DAY)),
        UseRow(namespace=ns, node=b, uses=1, together=1, first=0.0, recent=(0.0,)),
    ]
    fresh = loaded(sqlite_storage)
    assert fresh.uses.rows(ns, [a, b]) == sorted(uses)
    assert len(fresh.uses) == 2
