"""SynapseStore.reinforce_many: a batch learns exactly what one reinforce() per event learns,
all or nothing, with event ids honoured and late events refused or clamped (SQLite)."""

from __future__ import annotations

import contextlib
import itertools
import math
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import (
    CoActivation,
    InvalidTypeError,
    InvalidValueError,
    Reinforced,
    SynapseConfig,
    SynapseStore,
)
from synapse_retriever.mirror.graph import Edge, MemoryGraph
from synapse_retriever.persistence import EdgeKey
from synapse_retriever.persistence.rows import edge_rows
from synapse_retriever.persistence.sqlite import SQLiteStorage
from synapse_retriever.persistence.sqlite import _SQLiteTransaction as SQLiteTransaction
from synapse_retriever.persistence.transfer import merge_edges
from synapse_retriever.recall.hits import Hit
from synapse_retriever.store import write as write_module

DAY = 86_400.0
T0 = 1_600_000_000.0  # an explicit time in the past (September 2020)
NODES = ["a", "b", "c", "d", "e"]
NAMESPACES = ["personal", "shared", "ephemeral", "branch:x"]
HIT_LISTS = [
    [("a", 0.9), ("x", 0.8), ("y", 0.7), ("z", 0.6)],
    [("c", 0.9), ("b", 0.85), ("x", 0.5), ("y", 0.4), ("z", 0.1)],
    [("e", 1.0), ("x", 0.2)],
]


@pytest.fixture
def store(any_store_path: str) -> Iterator[SynapseStore]:
    with SynapseStore(any_store_path) as opened:
        yield opened


def edges(store: SynapseStore) -> dict[tuple[str, str, str], Edge | None]:
    """Every pair of the alphabet in every namespace (None where there is no edge)."""
    return {
        (a, b, ns): store.edge(a, b, ns)
        for a, b in itertools.combinations(NODES, 2)
        for ns in NAMESPACES
    }


def recalls(store: SynapseStore, at: float) -> list[list[Hit]]:
    """The recall of a few hit lists, from each namespace's point of view."""
    return [
        store.recall(hits, at=at, active_namespace=ns)
        for hits in HIT_LISTS
        for ns in ("personal", "shared", "branch:x")
    ]


def snapshot(store: SynapseStore, at: float) -> tuple[Any, ...]:
    return edges(store), recalls(store, at)


# -- random histories: one reinforce() per event against batches -------------------------

Event = tuple[list[str], float, str, float, str | None]  # nodes, strength, namespace, gap, id

event_strategy = st.tuples(
    st.lists(st.sampled_from(NODES), min_size=0, max_size=4),  # repeats and single nodes
    st.one_of(st.just(0.0), st.just(1.0), st.just(2.0), st.floats(0.0, 2.0)),
    st.sampled_from(NAMESPACES),
    st.one_of(st.just(0.0), st.floats(0.0, 30.0)),  # days after the previous event: some equal
    st.one_of(st.none(), st.sampled_from(["e1", "e2", "e3"])),  # ids that repeat
)
histories = st.lists(event_strategy, max_size=14)


def explicit(history: Sequence[Event]) -> list[CoActivation]:
    """The events at increasing explicit times from T0."""
    out, at = [], T0
    for nodes, strength, namespace, gap, event_id in history:
        at += gap * DAY
        out.append(CoActivation(nodes, strength, namespace, at, event_id))
    return out


def one_by_one(store: SynapseStore, events: Sequence[CoActivation]) -> list[int]:
    return [
        store.reinforce(e.nodes, e.strength, e.namespace, e.at, event_id=e.event_id) for e in events
    ]


def in_chunks(
    store: SynapseStore, events: Sequence[CoActivation], cuts: Sequence[int]
) -> list[Reinforced]:
    """``events`` through reinforce_many, split after the positions in ``cuts``."""
    bounds = [0, *sorted({c % (len(events) + 1) for c in cuts}), len(events)]
    done: list[Reinforced] = []
    for start, stop in itertools.pairwise(bounds):
        done += store.reinforce_many(events[start:stop])
    return done


def check_same(events: list[CoActivation], cuts: list[int], folder: str | None) -> None:
    """Store A learns ``events`` one by one, store B in chunks: the same state, also reopened."""
    paths = (":memory:", ":memory:") if folder is None else (f"{folder}/a.db", f"{folder}/b.db")
    until = (max((float(e.at) for e in events if e.at is not None), default=T0)) + DAY
    with SynapseStore(paths[0]) as a, SynapseStore(paths[1]) as b:
        counts = one_by_one(a, events)
        done = in_chunks(b, events, cuts)
        assert [r.edges for r in done] == counts
        assert [r.at for r in done] == [float(e.at) for e in events if e.at is not None]
        assert snapshot(b, until) == snapshot(a, until)
    if folder is not None:
        with SynapseStore(paths[0]) as a, SynapseStore(paths[1]) as b:
            assert snapshot(b, until) == snapshot(a, until)


@settings(max_examples=150, deadline=None)
@given(histories, st.lists(st.integers(0, 20), max_size=4))
def test_a_batch_learns_what_one_reinforce_per_event_learns(
    history: list[Event], cuts: list[int]
) -> None:
    check_same(explicit(history), cuts, None)


@settings(max_examples=25, deadline=None)
@given(histories, st.lists(st.integers(0, 20), max_size=4))
def test_the_same_after_reopening_the_files(history: list[Event], cuts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        check_same(explicit(history), cuts, folder)


def close(ours: Edge | None, theirs: Edge | None) -> bool:
    """The same edge, up to the milliseconds between one clock reading and the next."""
    if ours is None or theirs is None:
        return ours is theirs
    return (
        (ours.a, ours.b, ours.namespace, ours.activation_count)
        == (theirs.a, theirs.b, theirs.namespace, theirs.activation_count)
        and math.isclose(ours.weight, theirs.weight, rel_tol=1e-6)
        and math.isclose(ours.half_life_days, theirs.half_life_days, rel_tol=1e-6)
        and abs(ours.created_at - theirs.created_at) < 60
        and abs(ours.last_reinforced_at - theirs.last_reinforced_at) < 60
    )


@settings(max_examples=40, deadline=None)
@given(histories, histories, st.lists(st.integers(0, 30), max_size=4))
def test_events_at_the_clock_too(history: list[Event], later: list[Event], cuts: list[int]) -> None:
    # explicit times first (in the past), then events whose time is read from the clock
    events = explicit(history) + [
        CoActivation(nodes, strength, namespace, None, event_id)
        for nodes, strength, namespace, _, event_id in later
    ]
    with SynapseStore(":memory:") as a, SynapseStore(":memory:") as b:
        started = time.time()
        counts = one_by_one(a, events)
        done = in_chunks(b, events, cuts)
        finished = time.time()
        assert [r.edges for r in done] == counts
        assert all(started <= r.at <= finished for r in done[len(history) :])
        ours, theirs = edges(b), edges(a)
        assert all(close(ours[key], theirs[key]) for key in ours), (ours, theirs)
        at = finished + DAY
        # one reinforce() per event reads the clock once each, a batch once: nodes used in
        # one batch tie where they follow each other by microseconds, and a tie may be
        # broken either way, so the hits are compared as what they hold
        for mine, other in zip(recalls(b, at), recalls(a, at), strict=True):
            assert sorted(h.origin for h in mine) == sorted(h.origin for h in other)
            assert sorted(h.energy for h in mine) == pytest.approx(
                sorted(h.energy for h in other), rel=1e-4, abs=1e-4
            )


# -- worked examples -------------------------------------------------------------------


def test_two_events_on_one_pair_in_one_batch_are_two_reinforcements(store: SynapseStore) -> None:
    done = store.reinforce_many(
        [CoActivation(["a", "b"], at=T0), CoActivation(["b", "a"], at=T0 + DAY)]
    )
    assert done == [Reinforced(1, T0), Reinforced(1, T0 + DAY)]
    edge = store.edge("a", "b")
    assert edge is not None
    # 0.3 decays over a day at a 30-day half-life to 0.293, + 0.3; half-life learned at count 2
    assert (edge.activation_count, round(edge.weight, 3), round(edge.half_life_days, 2)) == (
        2,
        0.593,
        21.25,
    )
    assert (edge.created_at, edge.last_reinforced_at) == (T0, T0 + DAY)
    with SynapseStore(":memory:") as manual:
        manual.reinforce(["a", "b"], at=T0)
        manual.reinforce(["a", "b"], at=T0 + DAY)
        assert manual.edge("a", "b") == edge


def test_plain_lists_of_ids_are_events_now_in_personal(store: SynapseStore) -> None:
    before = time.time()
    done = store.reinforce_many([["a", "b"], ("b", "c", "d"), iter(["e"])])
    assert [r.edges for r in done] == [1, 3, 0]
    assert all(before <= r.at <= time.time() and not r.replayed for r in done)
    edge = store.edge("c", "d", "personal")
    assert edge is not None and edge.activation_count == 1
    assert store.reinforce_many([]) == []


def test_a_repeated_event_id_in_one_batch_counts_once(store: SynapseStore) -> None:
    done = store.reinforce_many(
        [
            CoActivation(["a", "b", "c"], at=T0, event_id="commit:1"),
            CoActivation(["a", "b"], at=T0 + 10, event_id="commit:1"),
            CoActivation(["a", "b"], at=T0 + 20, event_id="commit:2"),
        ]
    )
    assert done == [
        Reinforced(3, T0),
        Reinforced(0, T0 + 10, replayed=True),
        Reinforced(1, T0 + 20),
    ]
    edge = store.edge("a", "b")
    assert edge is not None and (edge.activation_count, edge.last_reinforced_at) == (2, T0 + 20)
    # ids recorded by an earlier batch, or by reinforce(), are replays too
    store.reinforce(["d", "e"], at=T0 + 30, event_id="chat:9")
    again = store.reinforce_many(
        [
            CoActivation(["a", "b"], at=T0 + 40, event_id="commit:2"),
            CoActivation(["d", "e"], at=T0 + 40, event_id="chat:9"),
        ]
    )
    assert [r.replayed for r in again] == [True, True]
    assert store.reinforce(["a", "b"], at=T0 + 50, event_id="commit:1") == 0


def test_a_zero_strength_event_writes_nothing_as_in_reinforce(store: SynapseStore) -> None:
    # reinforce(strength=0) is a no-op: no edge, no use, no event id recorded
    done = store.reinforce_many(
        [
            CoActivation(["a", "b"], strength=0, at=T0, event_id="z"),
            CoActivation(["c"], strength=0.0, at=T0),
        ]
    )
    assert [(r.edges, r.replayed) for r in done] == [(0, False), (0, False)]
    with SynapseStore(":memory:") as fresh:
        assert snapshot(store, T0 + DAY) == snapshot(fresh, T0 + DAY)
    assert store.reinforce_many([CoActivation(["a", "b"], at=T0, event_id="z")])[0].edges == 1


def test_an_event_id_belongs_to_the_store_not_to_a_namespace(store: SynapseStore) -> None:
    done = store.reinforce_many(
        [
            CoActivation(["a", "b"], namespace="shared", at=T0, event_id="x"),
            CoActivation(["a", "b"], namespace="personal", at=T0, event_id="x"),
        ]
    )
    assert [r.replayed for r in done] == [False, True]
    assert store.edge("a", "b", "personal") is None


LONG = "0f" * 1400  # 2,800 bytes, as os.urandom(1400).hex()

GOOD = [
    CoActivation(["a", "b"], at=T0, event_id="g1"),
    CoActivation(["b", "c"], namespace="shared", at=T0 + 1, event_id="g2"),
]


@pytest.mark.parametrize(
    ("bad", "error", "reason"),
    [
        (CoActivation(["a", "b"], strength=math.nan), InvalidValueError, "strength must be a"),
        (CoActivation(["a", "b"], strength="1"), InvalidTypeError, "strength must be a number"),  # type: ignore[arg-type]
        (CoActivation(["a", ""]), InvalidValueError, "node id must be a non-empty"),
        (CoActivation(["a", 7]), InvalidTypeError, "node id must be a str"),  # type: ignore[list-item]
        (CoActivation("ab"), InvalidTypeError, "nodes must be a list of ids"),
        (CoActivation(["a", "b"], namespace="team"), InvalidValueError, "namespace"),
        (CoActivation(["a", "b"], at=time.time() * 1000), InvalidValueError, "in milliseconds"),
        (CoActivation(["a", "b"], at=math.inf), InvalidValueError, "finite"),
        (CoActivation(["a", "b"], at="today"), InvalidTypeError, "at must be"),  # type: ignore[arg-type]
        (CoActivation(["a", "b"], event_id=""), InvalidValueError, "event_id must be"),
        (CoActivation(["a", "b"], event_id=5), InvalidTypeError, "event_id must be .+ got 5"),  # type: ignore[arg-type]
        (CoActivation(["a", "b"], event_id="e\udce9"), InvalidValueError, "event_id must be valid"),
        # over PostgreSQL's largest index entry: refused up front, alike on every backend
        (CoActivation(["a", "b"], event_id=LONG), InvalidValueError, "event_id must be at most"),
        (CoActivation(["a", LONG]), InvalidValueError, "node id must be at most 2048 bytes"),
        (CoActivation(["a", "b"], namespace=f"branch:{LONG}"), InvalidValueError, "at most"),
        ("ab", InvalidTypeError, "nodes must be a list of ids, got a bare str"),
        (5, InvalidTypeError, "nodes must be an iterable"),
    ],
)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_bad_event_is_named_and_nothing_is_written(
    any_store_path: str, bad: Any, error: type[Exception], reason: str, position: int
) -> None:
    path = any_store_path
    events: list[Any] = [*GOOD]
    events.insert(position, bad)
    with SynapseStore(path) as store:
        store.reinforce(["x", "y"], at=T0 - DAY, event_id="before")
        state = snapshot(store, T0 + DAY)
        with pytest.raises(error, match=f"^event {position}: .*{reason}"):
            store.reinforce_many(events)
        assert snapshot(store, T0 + DAY) == state
        # the good events' ids were not recorded: a retry writes them
        assert store.reinforce_many(GOOD) == [Reinforced(1, T0), Reinforced(1, T0 + 1)]
    if path != ":memory:":
        with SynapseStore(path) as reopened:
            assert reopened.reinforce_many(GOOD)[1].replayed


@pytest.mark.parametrize("backwards_in_batch", [False, True])
def test_late_raise_refuses_an_event_earlier_than_an_edge_and_writes_nothing(
    any_store_path: str, backwards_in_batch: bool
) -> None:
    path = any_store_path
    with SynapseStore(path) as store:
        store.reinforce(["a", "b"], at=T0 + 100)
        state = snapshot(store, T0 + DAY)
        batch = [
            CoActivation(["c", "d"], at=T0 + 200, event_id="first"),  # fine on its own
            CoActivation(["a", "e"], namespace="shared", at=T0 + 300),
            CoActivation(["e", "a"], namespace="shared", at=T0 + 250)  # before the one above
            if backwards_in_batch
            else CoActivation(["b", "a", "c"], at=T0 + 50),  # before the stored a-b
        ]
        with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
            store.reinforce_many(batch, late="raise")
        assert snapshot(store, T0 + DAY) == state
        assert store.reinforce_many(batch[:1]) == [Reinforced(1, T0 + 200)]  # id not recorded
    if path != ":memory:":
        with SynapseStore(path) as reopened:
            assert reopened.edge("a", "e", "shared") is None
            edge = reopened.edge("a", "b")
            assert edge is not None and edge.activation_count == 1


def test_late_clamp_moves_an_event_to_its_newest_edge(store: SynapseStore) -> None:
    store.reinforce(["a", "b"], namespace="shared", at=T0 + 100)
    done = store.reinforce_many(
        [
            CoActivation(["a", "b", "c"], namespace="shared", at=T0 + 50),  # a-b: at 100
            CoActivation(["a", "c"], namespace="personal", at=T0 + 50),  # another namespace
            CoActivation(["d", "e"], namespace="shared", at=T0 + 400),
            CoActivation(["e", "d", "c"], namespace="shared", at=T0 + 300),  # d-e of this batch
            CoActivation(["c", "b"], namespace="shared", at=T0 + 60),  # b-c: at 100 above
        ],
        late="clamp",
    )
    assert [r.at for r in done] == [T0 + 100, T0 + 50, T0 + 400, T0 + 400, T0 + 100]
    assert [r.edges for r in done] == [3, 1, 1, 3, 1]
    ab, bc, ce = (store.edge(*pair, "shared") for pair in [("a", "b"), ("b", "c"), ("c", "e")])
    assert ab is not None and (ab.activation_count, ab.last_reinforced_at) == (2, T0 + 100)
    assert bc is not None and (bc.activation_count, bc.created_at) == (2, T0 + 100)
    assert ce is not None and ce.last_reinforced_at == T0 + 400
    # exactly what reinforce() leaves with the clamped times
    with SynapseStore(":memory:") as manual:
        manual.reinforce(["a", "b"], namespace="shared", at=T0 + 100)
        for nodes, namespace, at in [
            (["a", "b", "c"], "shared", T0 + 100),
            (["a", "c"], "personal", T0 + 50),
            (["d", "e"], "shared", T0 + 400),
            (["e", "d", "c"], "shared", T0 + 400),
            (["c", "b"], "shared", T0 + 100),
        ]:
            manual.reinforce(nodes, namespace=namespace, at=at)
        assert snapshot(manual, T0 + DAY) == snapshot(store, T0 + DAY)


def test_late_clamp_leaves_events_in_order_alone(store: SynapseStore) -> None:
    events = [CoActivation(["a", "b"], at=T0 + t) for t in (0, 10, 10, 20)]
    assert [r.at for r in store.reinforce_many(events, late="clamp")] == [
        T0,
        T0 + 10,
        T0 + 10,
        T0 + 20,
    ]


@pytest.mark.parametrize(
    ("late", "refused"),
    [("ignore", InvalidValueError), ("", InvalidValueError), (None, TypeError), (True, TypeError)],
)
def test_a_bad_late_is_refused(store: SynapseStore, late: Any, refused: type[Exception]) -> None:
    with pytest.raises(refused, match="late must be 'skew', 'raise' or 'clamp'"):
        store.reinforce_many([["a", "b"]], late=late)
    assert store.edge("a", "b") is None


@pytest.mark.parametrize("events", ["ab", b"ab", CoActivation(["a", "b"])])
def test_a_bare_string_or_a_single_event_is_refused(store: SynapseStore, events: Any) -> None:
    with pytest.raises(InvalidTypeError, match="events must be an iterable of events, got a bare"):
        store.reinforce_many(events)
    assert store.edge("a", "b") is None


def test_events_that_are_not_iterable_are_refused(store: SynapseStore) -> None:
    with pytest.raises(InvalidTypeError, match="events must be an iterable"):
        store.reinforce_many(5)  # type: ignore[arg-type]


def test_a_late_event_is_counted_within_the_clock_skew_and_refused_beyond(
    any_store_path: str,
) -> None:
    skew = SynapseConfig().operations.max_clock_skew_s  # one day
    with SynapseStore(any_store_path) as store:
        store.reinforce(["a", "b"], at=T0 + 100)
        assert store.reinforce(["a", "b", "c"], at=T0 + 50) == 3  # another writer came first
        assert store.reinforce_many([CoActivation(["b", "a"], at=T0 + 90)]) == [
            Reinforced(1, T0 + 100)  # at the edge's time, as if observed then
        ]
        edge = store.edge("a", "b")
        assert edge is not None and (edge.activation_count, edge.last_reinforced_at) == (
            3,
            T0 + 100,
        )
        ac = store.edge("a", "c")  # the whole event at one time
        assert ac is not None and ac.created_at == T0 + 100
        state = snapshot(store, T0 + DAY)
        with pytest.raises(InvalidValueError, match=r"earlier than .* by more than 86400 s"):
            store.reinforce(["a", "b"], at=T0 + 99 - skew)
        with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
            store.reinforce(["a", "b"], at=T0 + 99, late="raise")  # refused however little
        assert snapshot(store, T0 + DAY) == state
        assert store.reinforce(["a", "b"], at=T0 - 10 * DAY, late="clamp") == 1
        edge = store.edge("a", "b")
        assert edge is not None and edge.activation_count == 4
    with SynapseStore(any_store_path, config=SynapseConfig.actr(max_clock_skew_s=0.0)) as strict:
        strict.reinforce(["a", "b"], at=T0 + 100)  # (in memory: a new store)
        with pytest.raises(InvalidValueError, match="earlier than the last reinforcement"):
            strict.reinforce(["a", "b"], at=T0 + 99)  # no skew allowed: as late="raise"


@settings(max_examples=40, deadline=None)
@given(histories, st.lists(st.integers(0, 20), max_size=4), st.lists(st.booleans(), max_size=5))
def test_rows_read_from_the_mirror_write_what_rows_read_by_query_write(
    history: list[Event], cuts: list[int], between: list[bool]
) -> None:
    """Where writers take turns, a big batch reads its pairs' rows from the mirror (here
    every batch: ``MIRROR_READ_PAIRS`` 1) instead of by SQLite's query (here none): the same
    results and the same file, row for row. A second store on the file writes, between
    batches, the pairs the next one reinforces, so the mirror must catch up under the write
    lock before it is read."""
    events = explicit(history)
    bounds = [0, *sorted({c % (len(events) + 1) for c in cuts}), len(events)]
    outcomes = []
    with tempfile.TemporaryDirectory() as folder:
        for threshold in (1, 10**9):
            path = f"{folder}/{threshold}.db"
            with (
                mock.patch.object(write_module, "MIRROR_READ_PAIRS", threshold),
                SynapseStore(path) as mine,
                SynapseStore(path) as theirs,
            ):
                done: list[Reinforced] = []
                for step, (start, stop) in enumerate(itertools.pairwise(bounds)):
                    if step < len(between) and between[step] and start < stop:
                        # the next event's pairs, at the latest time so far
                        at = max([T0, *(float(e.at) for e in events[:start] if e.at)])
                        theirs.reinforce(events[start].nodes, namespace=events[start].namespace,
                                         at=at)  # fmt: skip
                    done += mine.reinforce_many(events[start:stop])
                until = max([T0, *(float(e.at) for e in events if e.at)]) + DAY
                outcomes.append((done, snapshot(mine, until)))
            with contextlib.closing(sqlite3.connect(path)) as db:
                outcomes.append(db.execute("SELECT * FROM edges ORDER BY id").fetchall())
    assert outcomes[0] == outcomes[2] and outcomes[1] == outcomes[3]


def test_a_replay_in_a_batch_read_ahead_writes_nothing(tmp_path: Any) -> None:
    """A batch whose pairs and rows were read before its transaction (every name known, the
    writer's turn: ``read_ahead``) and which holds a replay: the replay writes nothing, the
    rest what it would write alone."""
    with (
        mock.patch.object(write_module, "MIRROR_READ_PAIRS", 1),
        SynapseStore(tmp_path / "s.db") as store,
    ):
        store.reinforce_many([CoActivation(["a", "b", "c"], at=T0, event_id="e1")])
        done = store.reinforce_many(
            [
                CoActivation(["a", "b"], at=T0 + DAY, event_id="e1"),  # a replay
                CoActivation(["a", "c"], at=T0 + DAY),
            ]
        )
        assert [(r.edges, r.replayed) for r in done] == [(0, True), (1, False)]
        counts = {pair: store.edge(*pair).activation_count for pair in [("a", "b"), ("a", "c")]}
        assert counts == {("a", "b"): 1, ("a", "c"): 2}


@pytest.mark.parametrize("below", [True, False])
@pytest.mark.parametrize("ahead", [True, False])
def test_a_batch_reads_its_rows_by_query_below_the_threshold_and_from_the_mirror_at_it(
    tmp_path: Any, below: bool, ahead: bool
) -> None:
    """``MIRROR_READ_PAIRS`` distinct pairs or more: the rows from the mirror, read ahead of
    the transaction after a write of as many rows, else under its lock (after a use, which
    writes none); one fewer: by SQLite's query. The same rows either way."""
    size = write_module.MIRROR_READ_PAIRS - below
    with (
        SynapseStore(tmp_path / "s.db") as store,
        mock.patch.object(write_module, "read_ahead", wraps=write_module.read_ahead) as early,
        mock.patch.object(
            MemoryGraph, "rows", autospec=True, side_effect=MemoryGraph.rows
        ) as mirror,
    ):
        store.reinforce_many([CoActivation([f"a{i}", f"b{i}"], at=T0) for i in range(size)])
        if not ahead:
            store.use(["a0"], at=T0)
        early.reset_mock()
        mirror.reset_mock()
        with mock.patch.object(
            SQLiteTransaction, "lock_edges", autospec=True, side_effect=SQLiteTransaction.lock_edges
        ) as query:
            store.reinforce_many([CoActivation([f"a{i}", f"b{i}"], at=T0) for i in range(size)])
        assert (query.called, mirror.called) == (below, not below)
        assert early.called == (ahead and not below)
        assert {store.edge(f"a{i}", f"b{i}").activation_count for i in range(size)} == {2}


def test_a_batch_reads_ahead_only_after_a_write_of_as_many_rows(tmp_path: Any) -> None:
    """A batch of ``MIRROR_READ_PAIRS`` pairs or more reads its rows ahead of its
    transaction only after a write of as many rows or more: a history imported again (every
    event a replay, writing nothing) reads ahead once, not batch after batch, and a batch
    after a write of one row fewer does not read ahead."""
    size = write_module.MIRROR_READ_PAIRS

    def batch(first: int, count: int = size) -> list[CoActivation]:
        return [
            CoActivation([f"a{i}", f"b{i}"], at=T0, event_id=f"e{first + i}") for i in range(count)
        ]

    read = []
    with (
        SynapseStore(tmp_path / "s.db") as store,
        mock.patch.object(write_module, "read_ahead", wraps=write_module.read_ahead) as ahead,
    ):
        store.use(["a0"], at=T0)  # the first write: after it, this store's writers take turns
        history = [batch(0), batch(0), batch(0), batch(size), batch(2 * size)]
        for events in [*history, batch(3 * size, size - 1), batch(4 * size)]:
            ahead.reset_mock()
            done = store.reinforce_many(events)
            read.append((ahead.called, sum(r.edges for r in done)))
    assert read == [
        (False, size),  # after a use: no row written
        (True, 0),  # replays, after a write of size rows: read ahead for nothing, once
        (False, 0),
        (False, size),
        (True, size),
        (False, size - 1),  # too few pairs to read ahead
        (False, size),  # after a write of size - 1 rows
    ]


def test_a_use_of_many_nodes_reads_nothing_ahead(tmp_path: Any) -> None:
    """A use reinforces no pair: however many nodes it names, it reads no rows ahead."""
    size = write_module.MIRROR_READ_PAIRS
    nodes = [f"a{i}" for i in range(32)]  # 496 node pairs
    with SynapseStore(tmp_path / "s.db") as store:
        store.reinforce_many([CoActivation([f"a{i}", f"b{i}"], at=T0) for i in range(size)])
        with mock.patch.object(write_module, "read_ahead", wraps=write_module.read_ahead) as ahead:
            store.use(nodes, at=T0 + DAY)
        assert not ahead.called
        assert store.edge("a0", "a1") is None


NODES_60 = [f"n{i:02d}" for i in range(60)]
BIG = [NODES_60[0:30], NODES_60[30:60], NODES_60[15:45]]  # about 1,100 distinct pairs


def big_batch(at: float) -> list[CoActivation]:
    return [CoActivation(nodes, at=at) for nodes in BIG]


def stored_count(storage: SQLiteStorage, a: str, b: str) -> int:
    with storage.write() as tx:  # as the file holds it, not as a mirror does
        (row,) = edge_rows(tx.lock_edges([EdgeKey(1, *tx.node_ids([a, b]))]))
    return row.activation_count


def test_an_import_into_an_in_memory_storage_is_counted_by_the_next_big_batch() -> None:
    """A private in-memory storage keeps no change logs: what another writer commits there
    (here an import) is read whole by the store's next write, whose rows then come from its
    caught-up mirror."""
    storage = SQLiteStorage(":memory:")
    store = SynapseStore(storage=storage)
    store.reinforce_many(big_batch(T0))
    store.reinforce_many([CoActivation(NODES_60[:2], at=T0)])
    merge_edges(storage, [Edge("n00", "n01", "personal", 0.9, 7, 30.0, T0, T0 + 10)])
    store.reinforce_many(big_batch(T0 + 20))  # n00-n01 once more
    assert stored_count(storage, "n00", "n01") == 8  # 7 imported, and this batch's


def test_two_stores_on_one_in_memory_storage_lose_no_update() -> None:
    storage = SQLiteStorage(":memory:")
    a, b = SynapseStore(storage=storage), SynapseStore(storage=storage)
    b.reinforce_many(big_batch(T0))
    b.reinforce_many(big_batch(T0 + 1))
    a.reinforce_many(big_batch(T0 + 2))
    b.reinforce_many(big_batch(T0 + 3))
    assert stored_count(storage, "n00", "n01") == 4


@pytest.mark.parametrize("between", ["commit", "rollback", "sweep", "rename"])
def test_a_write_between_reading_ahead_and_the_transaction_is_read_again(
    tmp_path: Any, between: str
) -> None:
    """Another connection writes (or rolls back) after a batch read its rows ahead, before
    its transaction: the file is what the same history writes with every row read by query."""
    real = write_module.read_ahead
    outcomes = []
    for threshold in (1, 10**9):
        path = tmp_path / f"{threshold}.db"
        with (
            mock.patch.object(write_module, "MIRROR_READ_PAIRS", threshold),
            SynapseStore(path) as mine,
            SynapseStore(path) as theirs,
        ):
            mine.reinforce_many(big_batch(T0))
            mine.reinforce_many(big_batch(T0 + 1))

            def interfere() -> None:
                if between == "commit":
                    theirs.reinforce_many(big_batch(T0 + 2))
                elif between == "rollback":  # the version number is free again
                    with contextlib.suppress(RuntimeError), theirs._storage.write() as tx:
                        tx.delete(list(range(1, 500)))
                        raise RuntimeError
                elif between == "sweep":
                    theirs.decay(at=T0 + 400 * DAY, force=True)
                else:
                    theirs.rename("n00", "zz")

            def ahead(mirror: Any, events: Any, armed: list[bool] = [threshold == 1]) -> Any:  # noqa: B006
                found = real(mirror, events)
                if armed and armed.pop():  # the first read ahead only
                    interfere()
                return found

            if threshold != 1:
                interfere()
            with mock.patch.object(write_module, "read_ahead", ahead):
                done = mine.reinforce_many(big_batch(T0 + 3))
        with contextlib.closing(sqlite3.connect(path)) as db:
            rows = db.execute("SELECT * FROM edges ORDER BY id").fetchall()
        outcomes.append(([(r.edges, r.at) for r in done], rows))
    assert outcomes[0] == outcomes[1]


def test_a_store_sees_what_another_store_writes_into_their_in_memory_storage() -> None:
    storage = SQLiteStorage(":memory:")
    config = SynapseConfig.actr(refresh_interval_s=0.0)
    mine, theirs = SynapseStore(storage=storage, config=config), SynapseStore(storage=storage)
    mine.reinforce(["x", "y"], at=T0)
    theirs.reinforce(["x", "y"], at=T0 + 1)
    edge = mine.edge("x", "y")
    assert edge is not None and edge.activation_count == 2
