"""SynapseStore: reinforcement, time, namespaces, persistence and bad input."""

from __future__ import annotations

import contextlib
import copy
import logging
import pickle
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import faiss
import networkx as nx
import numpy as np
import pytest

from synapse_retriever import (
    ClosedError,
    CoActivation,
    InvalidTypeError,
    InvalidValueError,
    NotASynapseDatabaseError,
    SynapseConfig,
    SynapseStore,
)
from synapse_retriever.persistence.sqlite import SCHEMA_VERSION

DAY = 86_400.0


@pytest.fixture
def store(store_path: str) -> Iterator[SynapseStore]:
    """A new store on each backend (see ``store_path`` in store_backends.py)."""
    with SynapseStore(store_path) as opened:
        yield opened


def test_first_reinforcement_creates_an_edge_at_the_namespace_default(store: SynapseStore) -> None:
    assert store.reinforce(["b", "a", "c"], at=10.0) == 3
    edge = store.edge("b", "a")
    assert edge is not None
    assert (edge.a, edge.b) == ("a", "b")  # canonical order
    assert edge.weight == pytest.approx(0.3)  # 0.30 × 1.0
    assert edge.activation_count == 1
    assert edge.half_life_days == 30.0
    assert edge.created_at == edge.last_reinforced_at == 10.0
    assert store.edge("a", "b", namespace="shared") is None


def test_namespace_defaults(store: SynapseStore) -> None:
    for namespace, days in [("personal", 30), ("branch:x", 30), ("shared", 60), ("ephemeral", 1)]:
        store.reinforce(["a", "b"], namespace=namespace, at=0)
        edge = store.edge("a", "b", namespace=namespace)
        assert edge is not None and edge.half_life_days == days


def test_second_reinforcement_one_day_later(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["a", "b"], at=DAY)
    edge = store.edge("a", "b")
    assert edge is not None
    # decayed with the OLD half-life: 0.3 × 2^(−1/30) = 0.3 × 0.977160 = 0.293148; + 0.3
    assert edge.weight == pytest.approx(0.593148, abs=1e-6)
    assert edge.activation_count == 2
    assert edge.half_life_days == pytest.approx(21.2467, abs=1e-3)  # see test_decay
    assert edge.created_at == 0 and edge.last_reinforced_at == DAY


def test_second_reinforcement_sixty_days_later(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["a", "b"], at=60 * DAY)
    edge = store.edge("a", "b")
    assert edge is not None
    # 0.3 × 2^(−60/30) = 0.075; + 0.3 = 0.375
    assert edge.weight == pytest.approx(0.375)
    assert edge.half_life_days == pytest.approx(27.7605, abs=1e-3)


def test_strength_is_clamped_and_weight_capped(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], strength=5.0, at=0)  # clamp 2: Δw 0.6
    assert store.weight("a", "b", at=0) == pytest.approx(0.6)
    store.reinforce(["a", "b"], strength=2.0, at=0)  # 0.6 + 0.6 capped at 1
    assert store.weight("a", "b", at=0) == 1.0
    assert store.reinforce(["c", "d"], strength=0.0, at=0) == 0
    assert store.reinforce(["c", "d"], strength=-1.0, at=0) == 0  # clamped to 0
    assert store.edge("c", "d") is None


def test_fewer_than_two_distinct_ids_is_a_no_op(store: SynapseStore) -> None:
    assert store.reinforce([], at=0) == 0
    assert store.reinforce(["a"], at=0) == 0
    assert store.reinforce(["a", "a", "a"], at=0) == 0
    assert store.graph().number_of_edges() == 0


def test_a_pruned_edge_starts_afresh(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["a", "b"], at=1.0)
    # 0.6 at a ~30-day half-life is long gone after 1000 days: fresh count 1, default half-life
    store.reinforce(["a", "b"], at=1000 * DAY)
    edge = store.edge("a", "b")
    assert edge is not None
    assert (edge.activation_count, edge.half_life_days, edge.weight) == (1, 30.0, 0.3)
    assert edge.created_at == 1000 * DAY


def test_ltp_floor_through_the_store(store: SynapseStore) -> None:
    for i in range(5):
        store.reinforce(["a", "b"], at=i * DAY)
    assert store.weight("a", "b", at=10_000 * DAY) == 0.2
    for i in range(5):
        store.reinforce(["a", "b"], namespace="ephemeral", at=i * DAY)
    assert store.weight("a", "b", namespace="ephemeral", at=10_000 * DAY) == 0.0


def test_weight_reads_at_a_time_before_the_last_reinforcement_as_age_zero(
    store: SynapseStore,
) -> None:
    store.reinforce(["a", "b"], at=100 * DAY)
    assert store.weight("a", "b", at=0) == pytest.approx(0.3)
    assert store.weight("a", "x", at=0) == 0.0


def test_explicit_time_running_backwards_is_refused_and_nothing_is_written(
    store: SynapseStore,
) -> None:
    store.reinforce(["a", "b"], at=10 * DAY)
    with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
        store.reinforce(["c", "a", "b"], at=5 * DAY)
    assert store.edge("a", "c") is None  # the whole event was rolled back
    edge = store.edge("a", "b")
    assert edge is not None and edge.activation_count == 1


def test_clock_none_never_runs_earlier_than_the_edge(store: SynapseStore) -> None:
    future = datetime.now(UTC) + timedelta(hours=12)  # within max_clock_skew_s
    store.reinforce(["a", "b"], at=future)
    store.reinforce(["a", "b"])  # now < future: taken as the edge's own time, no error
    edge = store.edge("a", "b")
    assert edge is not None and edge.last_reinforced_at == pytest.approx(future.timestamp())
    assert edge.activation_count == 2


def test_datetimes_and_seconds_are_the_same_clock(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=datetime(2026, 1, 1, tzinfo=UTC))
    assert store.weight("a", "b", at=datetime(2026, 1, 31, tzinfo=UTC)) == pytest.approx(0.15)


def test_max_coactivation_keeps_the_first_ids_and_warns(
    store: SynapseStore, caplog: pytest.LogCaptureFixture
) -> None:
    ids = [f"n{i:02d}" for i in range(40)]
    with caplog.at_level(logging.WARNING, logger="synapse_retriever"):
        written = store.reinforce(ids, at=0)
    assert written == 32 * 31 // 2
    assert "40 nodes" in caplog.text
    assert store.edge("n00", "n31") is not None
    assert store.edge("n00", "n32") is None


def test_merged_namespaces_weigh_by_factor_and_cap_at_one(store: SynapseStore) -> None:
    store.reinforce(["s", "m"], strength=2, namespace="personal", at=0)  # 0.6
    store.reinforce(["s", "m"], strength=2, namespace="shared", at=0)  # 0.6
    store.reinforce(["s", "m"], strength=2, namespace="branch:feature", at=0)  # 0.6
    store.reinforce(["s", "e"], strength=2, namespace="ephemeral", at=0)
    store.reinforce(["s", "o"], strength=2, namespace="branch:other", at=0)
    # active personal: 1.0 × 0.6 + 0.5 × 0.6 = 0.9; × 0.6 = 0.54. ephemeral and other branches: 0
    assert store.activate(["s"], at=0) == {"m": pytest.approx(0.54)}
    # active branch:feature: min(1, 0.6 + 0.8 × 0.6 + 0.5 × 0.6) = 1.0; × 0.6 = 0.6
    assert store.activate(["s"], at=0, active_namespace="branch:feature") == {
        "m": pytest.approx(0.6)
    }
    # ephemeral is read when active: 1.0 × 0.6 × 0.6 = 0.36
    assert store.activate(["s"], at=0, active_namespace="ephemeral")["e"] == pytest.approx(0.36)


def test_configured_extra_namespace_weights(store_path: str) -> None:
    config = SynapseConfig(merge_weights={"personal": 0.8, "shared": 0.5, "branch:main": 0.25})
    store = SynapseStore(store_path, config=config)
    store.reinforce(["s", "m"], strength=2, namespace="branch:main", at=0)
    # 0.25 × 0.6 × 0.6 = 0.09
    assert store.activate(["s"], at=0)["m"] == pytest.approx(0.09)


def test_hub_degree_counts_live_merged_neighbours_only(store: SynapseStore) -> None:
    # 200 live neighbours of the hub at t=0; 100 of them in ephemeral die within days
    for i in range(100):
        store.reinforce(["hub", f"p{i}"], strength=2, at=0)
        store.reinforce(["hub", f"e{i}"], strength=2, namespace="ephemeral", at=0)
    store.reinforce(["hub", "q"], strength=2, namespace="shared", at=0)
    store.reinforce(["s", "hub"], strength=2, at=0)
    # active ephemeral: degree 202 (100 p + 100 e + q + s): hf = sqrt(50/202) = 0.497519
    # s–hub is personal 0.6, merged × 0.8 = 0.48; E1[hub] = 0.48 × 0.6 = 0.288
    # reported × hf(hub): 0.288 × 0.497519 = 0.143285
    energy = store.activate(["s"], at=0, active_namespace="ephemeral")
    assert energy["hub"] == pytest.approx(0.143285, abs=1e-6)
    # 30 days later the ephemeral edges are pruned: degree 102 (personal 0.3, shared 0.42)
    later = 30 * DAY
    energy = store.activate(["s"], at=later, active_namespace="ephemeral")
    w = 0.6 * 0.5  # s–hub: one personal half-life, merged factor 0.8 when ephemeral is active
    assert energy["hub"] == pytest.approx(0.8 * w * 0.6 * (50 / 102) ** 0.5)


def test_decay_sweep_prunes_and_is_idempotent(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)  # prunes at 147.2 days
    store.reinforce(["c", "d"], strength=2, at=0)  # 0.6: prunes at 30 × log2(60) = 177.2 days
    report = store.decay(at=150 * DAY)
    assert (report.pruned, report.remaining) == (1, 1)
    assert report.pruned_by_namespace == {"personal": 1}
    assert store.decay(at=150 * DAY).pruned == 0
    assert store.edge("a", "b") is None
    assert store.edge("c", "d") is not None
    assert store.decay(at=0).pruned == 0  # a sweep in the past prunes nothing new


def test_a_big_sweep_deletes_with_a_larger_page_cache_then_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synapse_retriever.persistence import sqlite as storage

    monkeypatch.setattr(storage, "BIG_DELETE", 2)  # 3 deletions count as big here
    path = tmp_path / "big.db"
    with SynapseStore(path) as store:
        store.reinforce(["a", "b", "c"], at=0)  # three pairs, pruned at 147.2 days
        store.reinforce(["x", "y"], strength=2, at=0)  # pruned at 177.2 days
        db = store._storage._db  # type: ignore[attr-defined]
        cache = db.execute("PRAGMA cache_size").fetchone()[0]
        assert store.decay(at=150 * DAY).pruned == 3
        assert db.execute("PRAGMA cache_size").fetchone()[0] == cache
    with SynapseStore(path) as reopened:
        assert reopened.edge("a", "b") is None and reopened.edge("x", "y") is not None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM edges").fetchone()[0] == 1


@pytest.mark.parametrize("where", [":memory:", "file", "file:/synapse-cache-test?vfs=memdb"])
def test_a_big_write_or_sweep_raises_a_files_page_cache_never_one_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # an in-memory store's pages live in memory already: its cache stays small (MEMORY_CACHE_KIB)
    from synapse_retriever.persistence import sqlite as storage

    monkeypatch.setattr(storage, "BIG_WRITE", 2)  # 3 pairs count as big here
    monkeypatch.setattr(storage, "BIG_DELETE", 2)
    # a memdb URI of the user's is in memory too: it kept SQLite's default and raised it
    path = str(tmp_path / "big.db") if where == "file" else where
    with SynapseStore(path) as store:
        db = store._storage._db  # type: ignore[attr-defined]
        cache = db.execute("PRAGMA cache_size").fetchone()[0]
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        store.reinforce(["a", "b", "c"], at=0)  # three pairs, pruned at 147.2 days
        assert store.decay(at=150 * DAY).pruned == 3
        db.set_trace_callback(None)
        raised = [s for s in statements if s.startswith("PRAGMA cache_size = -262144")]
        assert len(raised) == (2 if where == "file" else 0)  # the write, the sweep
        assert db.execute("PRAGMA cache_size").fetchone()[0] == cache
    assert (cache == -storage.MEMORY_CACHE_KIB) is (where != "file")


def _page_size(store: SynapseStore) -> int:
    return int(store._storage._db.execute("PRAGMA page_size").fetchone()[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "where", [":memory:", "file:new?mode=memory&cache=shared", "file", "empty file", "file: URI"]
)
def test_a_new_store_is_made_with_small_pages(tmp_path: Path, where: str) -> None:
    # half the bytes of SQLite's default per page a commit writes (PAGE_SIZE)
    from synapse_retriever.persistence.sqlite import PAGE_SIZE

    path = where if where.startswith((":", "file:new")) else str(tmp_path / "new.db")
    if where == "empty file":
        Path(path).touch()
    with SynapseStore(f"file:{path}" if where == "file: URI" else path) as store:
        store.reinforce(["a", "b", "c"], at=0)
        assert _page_size(store) == PAGE_SIZE == 2048
    if not where.startswith((":", "file:new")):
        with SynapseStore(path) as reopened:
            assert _page_size(reopened) == 2048 and reopened.edge("a", "c") is not None


def test_a_file_sqlite_gave_a_header_keeps_its_pages(tmp_path: Path) -> None:
    # an empty database in WAL mode already has its page size: SQLite ignores another
    path = tmp_path / "made.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA page_size = 8192")
        db.execute("PRAGMA journal_mode = WAL")
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
        assert _page_size(store) == 8192
    with SynapseStore(path) as reopened:
        assert reopened.edge("a", "b") is not None


def test_a_store_made_with_other_pages_is_read_and_written_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a file made at 4 KiB (as before PAGE_SIZE) keeps them: SQLite cannot change them in place
    from synapse_retriever.persistence import sqlite as storage

    path = tmp_path / "old.db"
    with monkeypatch.context() as patch:
        patch.setattr(storage, "PAGE_SIZE", 4096)
        with SynapseStore(path) as store:
            for i in range(300):
                store.reinforce([f"n{i}", f"n{i + 1}", f"m{i % 7}"], at=i)
    with SynapseStore(path) as store:
        assert _page_size(store) == 4096
        store.reinforce(["n0", "n1", "new"], at=400)
        assert store.decay(at=400).pruned == 0
        recalled = store.recall([("n1", 1.0)], at=400)
    with SynapseStore(path) as reopened:  # from the snapshot and the log after it
        assert _page_size(reopened) == 4096
        assert reopened.recall([("n1", 1.0)], at=400) == recalled
        assert reopened.edge("n0", "n1").activation_count == 2  # type: ignore[union-attr]
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_graph_is_networkx_with_decayed_weights(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["a", "c"], namespace="shared", at=0)
    graph = store.graph(at=30 * DAY, namespaces="personal")
    assert isinstance(graph, nx.Graph) and not graph.is_multigraph()
    assert graph["a"]["b"]["weight"] == pytest.approx(0.15)
    assert graph["a"]["b"]["count"] == 1 and graph["a"]["b"]["half_life_days"] == 30.0
    multi = store.graph(at=0)
    assert multi.is_multigraph()
    assert multi["a"]["c"]["shared"]["weight"] == pytest.approx(0.3)
    assert store.graph(at=1000 * DAY).number_of_edges() == 0  # pruned edges are left out


def test_persistence_and_reopen(store_path: str) -> None:
    path = store_path
    with SynapseStore(path) as store:
        store.reinforce(["auth/jwt.py", "config/secrets.py"], at=0)
    with SynapseStore(path) as again:
        edge = again.edge("auth/jwt.py", "config/secrets.py")
        assert edge is not None and edge.weight == pytest.approx(0.3)


def test_a_closed_store_says_so(store: SynapseStore) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(ClosedError, match="closed"):
        store.reinforce(["a", "b"])
    with pytest.raises(ValueError, match="closed"):  # as Python's closed files raise
        store.recall([("a", 1.0)])


@pytest.mark.parametrize("copied", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_store_is_neither_pickled_nor_copied_and_stays_whole(
    store: SynapseStore, copied: Callable[[object], object]
) -> None:
    # a copy shared the store's connection and lock (closing either closed both); a pickle
    # or a deep copy failed on "cannot pickle 'mappingproxy' object", naming nothing of ours
    store.reinforce(["a", "b"], at=0)
    with pytest.raises(InvalidTypeError, match=r"cannot pickle or copy SynapseStore\(.+open da"):
        copied(store)
    assert store.edge("a", "b") is not None


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "error", "message"),
    [
        ("ab", InvalidTypeError, "bare str 'ab'"),
        (b"ab", InvalidTypeError, "bare bytes"),
        (["a", 3], InvalidTypeError, "int 3"),
        (["a", None], InvalidTypeError, "NoneType"),
        (["a", ""], InvalidValueError, "non-empty"),
        (["a", "\ud800"], InvalidValueError, "valid Unicode"),
        (["a", "x" * 5000], InvalidValueError, "at most 2048 bytes of UTF-8, got 5000"),
        (["a", "é" * 1025], InvalidValueError, "at most 2048 bytes of UTF-8, got 2050"),
        (["a", "nul\x00byte"], InvalidValueError, "NUL"),
        (42, InvalidTypeError, "iterable"),
    ],
)
def test_bad_ids_are_refused_by_name(nodes: object, error: type, message: str) -> None:
    store = SynapseStore(":memory:")
    with pytest.raises(error, match=message):
        store.reinforce(nodes, at=0)  # type: ignore[arg-type]
    assert store.graph().number_of_edges() == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"strength": float("nan")}, InvalidValueError, "finite number, got nan"),
        ({"strength": float("inf")}, InvalidValueError, "finite number, got inf"),
        ({"strength": "1"}, InvalidTypeError, "strength must be a number"),
        ({"namespace": "team"}, InvalidValueError, "got 'team'"),
        ({"namespace": "branch:"}, InvalidValueError, "branch namespace"),
        ({"namespace": "branch:a\nb"}, InvalidValueError, "branch namespace"),
        ({"namespace": "branch:\u200b"}, InvalidValueError, "branch namespace"),  # shows nothing
        ({"namespace": "branch:\ufeff\u2060 "}, InvalidValueError, "branch namespace"),
        ({"at": datetime(2026, 1, 1)}, InvalidValueError, "naive"),
        ({"at": float("nan")}, InvalidValueError, "finite"),
        ({"at": "yesterday"}, InvalidTypeError, "at must be"),
        ({"namespace": "branch:" + "x" * 2042}, InvalidValueError, "namespace must be at most"),
        ({"event_id": "e" * 2049}, InvalidValueError, "event_id must be at most 2048 bytes"),
        ({"event_id": "e\udce9"}, InvalidValueError, r"event_id must be valid Unicode.*'e\\udce9'"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    kwargs: dict[str, object], error: type, message: str
) -> None:
    store = SynapseStore(":memory:")
    with pytest.raises(error, match=message):
        store.reinforce(["a", "b"], **kwargs)  # type: ignore[arg-type]
    assert store.edge("a", "b") is None


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda s: s.graph(namespaces=5), "namespaces must be a str, an iterable of str or None"),
        (lambda s: s.graph(namespaces=b"personal"), r"got bytes b'personal'"),
        (lambda s: s.stats(namespace=5), "namespace must be a str, got int"),
    ],
)
def test_a_namespace_of_the_wrong_type_is_refused_in_a_read(
    read: Callable[[SynapseStore], object], message: str
) -> None:
    store = SynapseStore(":memory:")
    with pytest.raises(InvalidTypeError, match=message):
        read(store)


def test_an_event_of_no_node_writes_nothing_not_even_a_version(tmp_path: Path) -> None:
    # a new version makes every other process fetch what changed: nothing did
    path = tmp_path / "s.db"

    def version() -> int:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return int(db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])

    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
        before = version()
        assert store.reinforce([], at=0) == 0
        store.use([], at=0)
        done = store.reinforce_many([[], CoActivation([], at=0), ["a", "b"]])
        assert [r.edges for r in done] == [0, 0, 1]
        assert version() == before + 1  # the one event with nodes


def test_numpy_scalars_are_numbers_for_strength_and_time() -> None:
    store = SynapseStore(":memory:")
    assert store.reinforce(["a", "b"], strength=np.float32(0.5), at=np.int64(0)) == 1
    edge = store.edge("a", "b")
    assert edge is not None and edge.weight == pytest.approx(0.15)
    assert edge.last_reinforced_at == 0.0


def test_bad_hits_are_refused_by_name(store: SynapseStore) -> None:
    with pytest.raises(InvalidTypeError, match="iterable of"):
        store.recall("ab")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="hit 1"):
        store.recall([("a", 1.0), "b"])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError, match=r"hit 0 \('a'\) has a non-finite score nan"):
        store.recall([("a", float("nan"))])
    with pytest.raises(InvalidTypeError, match="score that is not a real number, 'high'"):
        store.recall([("a", "high")])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError, match="namespace"):
        store.recall([("a", 1.0)], active_namespace="nope")
    assert store.recall([]) == []


@pytest.mark.parametrize(
    ("hits", "error", "message"),
    [
        (42, InvalidTypeError, "iterable of \\(id, score\\) pairs, got 42"),
        (b"ab", InvalidTypeError, "iterable of \\(id, score\\) pairs, got b'ab'"),
        ({"a": 0.9}, InvalidTypeError, r"got a dict: pass hits.items\(\)"),
        (
            [("a", True)],
            InvalidTypeError,
            "hit 0 \\('a'\\) has a score that is not a real number, True",
        ),
        ([("a", 1j)], InvalidTypeError, "not a real number, 1j; expected an int, a float"),
        ([("a", None)], InvalidTypeError, "not a real number, None"),
        ([("a", float("inf"))], InvalidValueError, "non-finite score inf"),
        ([("a", 10**400)], InvalidValueError, "hit 0 \\('a'\\) has a score past a float's range"),
        ([("a", 0.9), ("b",)], InvalidTypeError, r"hit 1 must be an \(id, score\) pair"),
        (
            [{"id": "a", "score": 0.9}],
            InvalidTypeError,
            r"hit 0 must be an \(id, score\) pair, got a dict \{'id': 'a', 'score': 0.9\}",
        ),
    ],
)
def test_hits_that_are_not_pairs_of_an_id_and_a_real_score_are_refused(
    store: SynapseStore, hits: object, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        store.recall(hits)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [np.float32, np.float64, np.int64, Fraction, int])
def test_any_real_number_type_is_a_score(kind: type) -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)
    plain = [("a", 9.0), ("x", 8.0), ("y", 7.0), ("z", 6.0)]
    out = store.recall([(node, kind(int(score))) for node, score in plain], at=0)
    assert out == store.recall(plain, at=0)
    assert [type(hit.score) for hit in out] == [float] * 4  # plain floats out, whatever came in


def test_a_decimal_score_is_refused_with_what_to_pass(store: SynapseStore) -> None:
    # Decimal is not a numbers.Real (it does not mix with float arithmetic): convert it
    with pytest.raises(InvalidTypeError, match=r"Decimal\('0.9'\).*float\(score\)"):
        store.recall([("a", Decimal("0.9"))])


def test_any_iterable_of_pairs_is_hits() -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)
    ids, scores = ["a", "x", "y", "z"], [0.9, 0.8, 0.7, 0.6]
    expected = store.recall(list(zip(ids, scores, strict=True)), at=0)
    assert [hit.id for hit in expected] == ["a", "x", "y", "b"]
    pairs = np.array(list(zip(ids, scores, strict=True)), dtype=[("id", "U8"), ("score", "f8")])
    for hits in [
        zip(ids, scores, strict=True),
        ((node, score) for node, score in zip(ids, scores, strict=True)),
        [[node, score] for node, score in zip(ids, scores, strict=True)],
        tuple(zip(ids, scores, strict=True)),
        dict(zip(ids, scores, strict=True)).items(),
        pairs,  # a NumPy structured array: np.str_ ids, np.float64 scores
    ]:
        out = store.recall(hits, at=0)  # type: ignore[arg-type]
        assert out == expected
        assert {type(hit.id) for hit in out} == {str}


def test_unsorted_hits_are_refused_saying_where_and_what_to_pass(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], at=0)
    hits = [("a", 0.1), ("x", 0.9), ("y", 0.8), ("z", 0.7)]  # a last, listed first
    message = (
        r"hits must be sorted best first \(scores non-increasing\): "
        r"hit 1 \('x'\) scores 0.9, above hit 0's 0.1; sort them best first; "
        r"for distances \(e.g. FAISS L2, lower is better\), pass similarities "
        r"\(e.g. the negated distances\)"
    )
    with pytest.raises(InvalidValueError, match=message):
        store.recall(hits, at=0)
    with pytest.raises(InvalidValueError, match=message):
        store.plan(hits, at=0)


def test_tied_scores_are_in_order(store: SynapseStore) -> None:
    hits = [("a", 0.9), ("x", 0.5), ("y", 0.5), ("z", 0.5)]
    assert [(hit.id, hit.score) for hit in store.recall(hits, at=0)] == hits


def test_recall_keeps_a_repeated_id_once_at_its_first_and_best_place() -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)
    hits = [("a", 0.9), ("x", 0.8), ("y", 0.7), ("x", 0.7), ("z", 0.6), ("a", 0.5)]
    out = store.recall(hits, at=0)
    assert [(hit.id, hit.score) for hit in out] == [("a", 0.9), ("x", 0.8), ("y", 0.7), ("b", 0.6)]
    assert out == store.recall([("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)], at=0)


def test_plan_keeps_a_repeated_id_where_it_is(store: SynapseStore) -> None:
    # the adapters map results back to their objects by position (see test_items.py)
    hits = [("a", 0.9), ("x", 0.8), ("x", 0.7), ("z", 0.6)]
    assert list(store.plan(hits, at=0).hits) == hits


def test_faiss_results_are_hits_as_similarities_and_refused_as_distances() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 8)).astype(np.float32)
    store = SynapseStore(":memory:")
    inner = faiss.IndexFlatIP(8)
    inner.add(vectors)
    similarity, found = inner.search(vectors[:1], 5)
    hits = zip([f"doc{i}" for i in found[0]], similarity[0], strict=True)  # np.float32, best first
    assert [hit.id for hit in store.recall(hits)] == [f"doc{i}" for i in found[0]]

    l2 = faiss.IndexFlatL2(8)
    l2.add(vectors)
    distance, found = l2.search(vectors[1:2], 5)  # ascending: the nearest first, at 0.0
    ids = [f"doc{i}" for i in found[0]]
    with pytest.raises(InvalidValueError, match="pass similarities"):
        store.recall(zip(ids, distance[0], strict=True))
    assert [hit.id for hit in store.recall(zip(ids, -distance[0], strict=True))] == ids


def test_hostile_and_unicode_ids_and_branch_names_are_just_data(store_path: str) -> None:
    hostile = "x'); DROP TABLE edges; --"
    branch = "branch:'; DELETE FROM edges WHERE '1'='1"
    ids = [hostile, "Ünïcødé/файл.py", "🧠", 'quote"d', "a b"]
    with SynapseStore(store_path) as store:
        store.reinforce(ids, namespace=branch, at=0)
        assert store.weight(hostile, "🧠", namespace=branch, at=0) == pytest.approx(0.3)
    with SynapseStore(store_path) as store:
        assert store.graph(at=0, namespaces=branch).number_of_edges() == 10
        assert store.edge("🧠", hostile, namespace=branch) is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": 0}, "seeds must be an integer >= 1, got 0"),
        ({"learning_rate": -0.1}, "learning_rate must be a finite number >= 0"),
        ({"spread_rate": 1.5}, r"spread_rate must be a number in \[0, 1\]"),
        ({"inject_threshold": float("nan")}, "inject_threshold must be a number in"),
        ({"prune_threshold": -0.01}, "prune_threshold"),
        ({"half_life_days": {"personal": 30.0}}, "misses"),
        ({"half_life_bounds": (10.0, 5.0)}, "half_life_bounds"),
        ({"merge_weights": {"team": 0.5}}, "got 'team'"),
    ],
)
def test_config_refuses_out_of_range_constants(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        SynapseConfig.published(**kwargs)  # each group checks its own fields on construction
    with pytest.raises(InvalidTypeError, match="max_inject must be an integer >= 0, got True"):
        SynapseConfig.published(max_inject=True)  # no number: a type error


# -- files that are not ours ----------------------------------------------------------


def test_a_file_that_is_not_sqlite_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n")
    with pytest.raises(NotASynapseDatabaseError, match="not an SQLite file"):
        SynapseStore(path)
    assert path.read_bytes() == b"these are my notes, not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_another_applications_sqlite_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE edges (x)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(NotASynapseDatabaseError, match="another application"):
        SynapseStore(path)
    assert path.read_bytes() == before
    assert isinstance(NotASynapseDatabaseError("x"), ValueError)


def test_a_zero_length_file_is_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=0)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == 0x53594E41
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    db.close()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotASynapseDatabaseError, match="directory"):
        SynapseStore(tmp_path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SynapseStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(NotASynapseDatabaseError, match="newer"):
        SynapseStore(path)


def test_event_ids_make_replays_idempotent(store: SynapseStore) -> None:
    assert store.reinforce(["a", "b"], at=0, event_id="git:abc") == 1
    assert store.reinforce(["a", "b"], at=1, event_id="git:abc") == 0
    edge = store.edge("a", "b")
    assert edge is not None and edge.activation_count == 1
    with pytest.raises(InvalidValueError, match="event_id"):
        store.reinforce(["a", "b"], event_id="")


def test_a_finite_fraction_of_huge_terms_is_taken_as_its_value() -> None:
    # a number was printed before it was found finite: a Fraction of terms past 4,300 digits
    # raised a raw ValueError (Python refuses to print them), though its value is 10.0
    big = Fraction(10**5000 + 1, 10**4999)
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], strength=big, at=0)
    assert store.spread(["a"], at=0, report_min=big).energy == {}
    hits = store.recall([("a", 0.9), ("x", 0.5)], at=0, cost=lambda node: big)
    assert [hit.id for hit in hits] == ["a", "b"]
    with pytest.raises(InvalidValueError, match="must be a finite number, got Fraction past"):
        store.reinforce(["a", "b"], strength=Fraction(10**5000, 3), at=0)


@pytest.mark.parametrize(
    ("given", "error", "message"),
    [
        ({"report": "bb"}, InvalidTypeError, "report must be a list of ids, got a bare str"),
        ({"report": [None]}, InvalidTypeError, "report: node id must be a str, got NoneType"),
        ({"report_min": float("nan")}, InvalidValueError, "report_min must be a finite number"),
        ({"report_min": "x"}, InvalidTypeError, "report_min must be a number, got str 'x'"),
        ({"report_min": 10**400}, InvalidValueError, "past a float's range"),  # OverflowError
    ],
)
def test_what_spread_reports_is_checked(
    given: dict[str, object], error: type[Exception], message: str
) -> None:
    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)
    store.reinforce(["b", "bb"], at=0)
    with pytest.raises(error, match=message):
        store.spread(["a"], at=0, **given)  # type: ignore[arg-type]
    assert store.spread(["a"], at=0, report=["bb"], report_min=0.9).energy == {"bb": 0.0324}
    # an id no store could hold reaches nothing and is reported as nothing, not refused
    assert store.activate(["a", "x" * 3000, "n\x00ul"], at=0) == store.activate(["a"], at=0)
    reported = store.spread(["a"], at=0, report=["bb", "\ud800"]).energy
    assert reported == store.spread(["a"], at=0, report=["bb"]).energy


def test_a_flag_that_is_not_a_bool_is_refused_before_anything_is_done(tmp_path: Path) -> None:
    from synapse_retriever.conversation import ConversationMemory

    store = SynapseStore(":memory:")
    store.reinforce(["a", "b"], at=0)
    for call, name in [
        (lambda: store.decay(at=400 * DAY, dry_run="yes"), "dry_run"),  # "yes" reads as True
        (lambda: store.decay(at=400 * DAY, force="no"), "force"),  # "no" reads as True too
        (lambda: store.repair(dry_run=1), "dry_run"),
        (lambda: ConversationMemory(tmp_path / "chat.db", background="no"), "background"),
    ]:
        with pytest.raises(InvalidTypeError, match=f"{name} must be a bool, got "):
            call()
    assert store.edge("a", "b") is not None  # the sweep at 400 days never ran
    assert list(tmp_path.iterdir()) == []  # the memory's file was never made


def test_the_window_of_recent_events_is_the_latest_in_time_open_and_reopened(
    store_path: str,
) -> None:
    # the newest use, then 120 dated earlier: the window held the last 50 written, and a
    # reopened store (its log trimmed by row) agreed only by chance
    config = SynapseConfig.recency()
    hits = [("a", 0.9), ("b", 0.5)]
    with SynapseStore(store_path, config=config) as store:
        store.use(["newest"], at=100 * DAY)
        for i in range(120):
            store.use([f"u{i}"], at=(1 + i) * DAY / 10)
        running = store.recall(hits, at=101 * DAY)
        assert [h.id for h in running] == ["a", "newest"]
    with SynapseStore(store_path, config=config) as reopened:
        assert reopened.recall(hits, at=101 * DAY) == running
