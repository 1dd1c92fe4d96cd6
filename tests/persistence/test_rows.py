"""The rows every backend speaks: edge tables read by column name, and the protocol's named
rows, the same on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from synapse_retriever.persistence import (
    EdgeKey,
    EdgeRow,
    EventRecord,
    ForgetCounts,
    RecentEvent,
    Storage,
    UseColumns,
    UseKey,
    UseRow,
)
from synapse_retriever.persistence.layered import LayeredStorage
from synapse_retriever.persistence.postgres import PostgresStorage
from synapse_retriever.persistence.rows import EDGE_COLUMNS, edge_rows, rows_array
from synapse_retriever.persistence.sqlite import SQLiteStorage

ROW = EdgeRow(
    id=3,
    namespace=1,
    a=7,
    b=8,
    weight=0.3,
    activation_count=2,
    half_life_days=30.0,
    created_at=5.0,
    last_reinforced_at=9.0,
)


def test_each_edge_field_is_read_from_its_named_column() -> None:
    table = rows_array([ROW])
    assert table.shape == (1, len(EdgeRow._fields))
    for name, value in ROW._asdict().items():
        assert table[0, EDGE_COLUMNS.index(name)] == value


def test_use_columns_hold_each_field_of_their_rows() -> None:
    rows = [UseRow(1, 7, 2, 1, 0.0, (0.0, 5.0)), UseRow(2, 8, 1, 0, 5.0, (5.0,))]
    columns = UseColumns.of(rows)
    for name in ("namespace", "node", "uses", "together", "first"):
        assert getattr(columns, name).tolist() == [getattr(row, name) for row in rows]
    assert columns.node.dtype == np.int64
    assert columns.recent.tolist() == [[0.0, 5.0], [5.0, -np.inf]]


@pytest.fixture(params=["sqlite", "postgresql", "layered"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    opened: Storage
    if request.param == "postgresql":
        opened = PostgresStorage(request.getfixturevalue("postgres_url"), listen=False)
    elif request.param == "layered":  # "personal" is the local layer's
        opened = LayeredStorage(SQLiteStorage(tmp_path / "l.db"), SQLiteStorage(tmp_path / "s.db"))
    else:
        opened = SQLiteStorage(tmp_path / "s.db")
    yield opened
    opened.close()


def learn_one_edge(storage: Storage) -> tuple[EdgeKey, list[bool]]:
    """An edge reinforced at 2.0, its two nodes' uses, one recent event and its event id."""
    with storage.write() as tx:
        ns = tx.namespace_id("personal")
        a, b = tx.node_ids(["a", "b"])
        key = EdgeKey(namespace=ns, a=a, b=b)
        locked = edge_rows(tx.lock_edges([key]))  # PostgreSQL locks a new pair: a blank row
        new = ROW._replace(namespace=ns, a=a, b=b, created_at=1.0, last_reinforced_at=2.0)
        if locked:
            tx.update(rows_array([new._replace(id=locked[0].id)]))
        else:
            (placed,) = edge_rows(tx.insert(rows_array([new])))
            assert placed._replace(id=new.id) == new and placed.id > 0
        tx.write_uses([UseRow(ns, node, 1, 1, 2.0, (2.0,)) for node in (a, b)])
        tx.log_recent([RecentEvent(namespace=ns, at=2.0, nodes=[a, b])], keep=10)
        recorded = tx.record_events(
            [EventRecord(event_id="e1", at=2.0, namespace=ns, seen=2.0)] * 2  # the second: a replay
        )
    return key, recorded


def test_a_backend_takes_and_returns_the_protocols_named_rows(storage: Storage) -> None:
    key, recorded = learn_one_edge(storage)
    ns, a, b = key
    assert recorded == [True, False]
    changes = storage.load()
    assert changes.recent == [RecentEvent(namespace=ns, at=2.0, nodes=(a, b))]
    assert isinstance(changes.recent[0], RecentEvent)
    with storage.write() as tx:
        table = tx.lock_edges([key])
        assert table.shape == (1, len(EDGE_COLUMNS))  # an edge table
        (stored,) = edge_rows(table)
        assert (stored.namespace, stored.a, stored.b, stored.weight) == (ns, a, b, 0.3)
        assert [row.node for row in tx.uses_of([UseKey(ns, a), UseKey(ns, b)])] == [a, b]
        counts = tx.forget_after(1.5)  # the edge (reinforced at 2.0), two use times, both events
    assert counts == ForgetCounts(edges=1, uses=2, events=2)
    assert isinstance(counts, ForgetCounts)


def stored_versions(storage: Storage) -> list[int]:
    """The version of each database (a layered storage's own version counts its reads)."""
    layers = storage.layers if isinstance(storage, LayeredStorage) else (storage,)
    return [layer.load().version for layer in layers]


def test_would_forget_counts_what_a_repair_removes_and_writes_nothing(storage: Storage) -> None:
    learn_one_edge(storage)
    before, versions = storage.load(), stored_versions(storage)
    counted = storage.would_forget(1.5)
    assert counted == ForgetCounts(edges=1, uses=2, events=2)
    assert storage.would_forget(2.0) == ForgetCounts(edges=0, uses=0, events=0)  # not after
    after = storage.load()
    assert stored_versions(storage) == versions  # no transaction committed
    assert (after.recent, after.events) == (before.recent, before.events)
    assert np.array_equal(np.asarray(after.rows), np.asarray(before.rows))
    assert after.uses.recent.tolist() == before.uses.recent.tolist()
    with storage.write() as tx:
        assert tx.forget_after(1.5) == counted  # what the repair then removes


def test_would_forget_on_a_read_only_file_counts_on_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writable = SQLiteStorage(path)
    learn_one_edge(writable)
    writable.close()
    written = path.read_bytes()
    storage = SQLiteStorage(path, read_only=True)
    try:
        assert storage.would_forget(1.5) == ForgetCounts(edges=1, uses=2, events=2)
    finally:
        storage.close()
    assert path.read_bytes() == written


def test_a_backend_reads_more_keys_than_one_query_holds_each_stored_row_once(
    storage: Storage,
) -> None:
    """Edge and use keys past one query's 8,000, given in no order, absent ones among them:
    the rows of the stored keys, each once (SQLite reads them in chunks, in the pair index's
    order)."""
    with storage.write() as tx:
        ns = tx.namespace_id("personal")
        nodes = tx.node_ids([f"n{i}" for i in range(300)])
    pairs = [(x, y) for i, x in enumerate(nodes) for y in nodes[i + 1 :]][:20_001]
    stored = pairs[::2]  # every other pair stored: the rest are absent
    rng = np.random.default_rng(0)
    with storage.write() as tx:
        locked = tx.lock_edges([EdgeKey(ns, a, b) for a, b in stored])  # blank rows (PostgreSQL)
        table = rows_array(
            [ROW._replace(id=0, namespace=ns, a=a, b=b, weight=(a + b) / 1000) for a, b in stored]
        )
        if len(locked):  # PostgreSQL's blank rows: written by id, both in (a, b) order
            table = table[np.lexsort((table[:, 3], table[:, 2]))]
            table[:, 0] = locked[np.lexsort((locked[:, 3], locked[:, 2])), 0]
            tx.update(table)
        else:
            tx.insert(table)
        tx.write_uses([UseRow(ns, node, 1, 0, 2.0, (2.0,)) for node in nodes[::2]])
    asked = [EdgeKey(ns, a, b) for a, b in pairs]
    asked = [asked[i] for i in rng.permutation(len(asked))]
    with storage.write() as tx:
        rows = [row for row in edge_rows(tx.lock_edges(asked)) if row.activation_count]
        uses = tx.uses_of([UseKey(ns, node) for node in rng.permutation(nodes).tolist()])
    assert len(rows) == len(stored)  # without PostgreSQL's blank rows of the absent pairs
    assert {(row.a, row.b): row.weight for row in rows} == {
        (a, b): (a + b) / 1000 for a, b in stored
    }
    assert sorted(use.node for use in uses if use.uses) == sorted(nodes[::2])  # not blank
