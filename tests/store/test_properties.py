"""Store-level invariants under random histories (hypothesis), and threads sharing a store."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import SynapseConfig, SynapseStore

DAY = 86_400.0
nodes = st.sampled_from(["a", "b", "c", "d", "e"])
events = st.lists(
    st.tuples(
        st.lists(nodes, min_size=2, max_size=4),
        st.floats(0.0, 2.0),
        st.sampled_from(["personal", "shared", "ephemeral", "branch:x"]),
        st.floats(0.0, 90.0),  # days after the previous event
    ),
    max_size=12,
)


def replay(
    history: list[tuple[list[str], float, str, float]], config: SynapseConfig | None = None
) -> tuple[SynapseStore, float]:
    store = SynapseStore(":memory:", config=config)
    now = 0.0
    for ids, strength, namespace, gap in history:
        now += gap * DAY
        store.reinforce(ids, strength=strength, namespace=namespace, at=now)
    return store, now


@settings(max_examples=60, deadline=None)
@given(events, st.floats(0.0, 400.0), st.floats(0.0, 400.0))
def test_decay_is_idempotent_and_sweeps_compose(
    history: list[tuple[list[str], float, str, float]], first: float, second: float
) -> None:
    store, now = replay(history)
    t1, t2 = now + min(first, second) * DAY, now + max(first, second) * DAY
    before = {
        (u, v, k): d["weight"] for u, v, k, d in store.graph(at=t2).edges(keys=True, data=True)
    }
    store.decay(at=t1)
    assert store.decay(at=t1).pruned == 0  # idempotent
    store.decay(at=t2)
    after = {
        (u, v, k): d["weight"] for u, v, k, d in store.graph(at=t2).edges(keys=True, data=True)
    }
    # two sweeps leave exactly what one sweep at t2 leaves, with unchanged weights
    assert after == before


@settings(max_examples=60, deadline=None)
@given(events)
def test_weights_stay_in_unit_interval_and_counts_only_grow(
    history: list[tuple[list[str], float, str, float]],
) -> None:
    store, now = replay(history)
    for _, _, _, data in store.graph(at=now).edges(keys=True, data=True):
        assert 0.01 <= data["weight"] <= 1.0
        assert data["count"] >= 1
        assert 1.0 <= data["half_life_days"] <= 120.0


hit_lists = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "x", "y"]), st.floats(-1.0, 1.0)),
    max_size=10,
).map(lambda rows: sorted(rows, key=lambda row: -row[1]))  # best first, repeats likely


@settings(max_examples=60, deadline=None)
@given(events, hit_lists, st.sampled_from([SynapseConfig(), SynapseConfig.published()]))
def test_recall_returns_each_id_once_and_one_hit_per_distinct_input_id(
    history: list[tuple[list[str], float, str, float]],
    hits: list[tuple[str, float]],
    config: SynapseConfig,
) -> None:
    store, now = replay(history, config)
    out = [hit.id for hit in store.recall(hits, at=now)]
    assert len(out) == len(set(out))  # never an id twice
    assert len(out) == len({node for node, _ in hits})  # never more hits than distinct ids


def test_threads_can_share_one_store() -> None:
    store = SynapseStore(":memory:")
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for i in range(200):
                store.reinforce(["hub", f"t{worker}-{i}"], at=0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(200):
                store.recall([("hub", 1.0), ("x", 0.5), ("y", 0.4), ("z", 0.3)], at=0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.graph(at=0).number_of_edges() == 600
