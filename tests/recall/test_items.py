"""Recall over objects: what both adapters share (scores, batched resolution, annotations, ids).

The worked numbers are the published rule's (boosts, energies, candidates above the 0.15
threshold, batches of 2 × max_inject = 4), so those stores pin ``SynapseConfig.published()``;
tests of the default rule (ACT-R) say so in their names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever import InvalidTypeError, InvalidValueError, SynapseConfig, SynapseStore
from synapse_retriever.recall.hits import Hit
from synapse_retriever.recall.items import (
    annotate,
    plan_items,
    rank_scores,
    usable_scores,
    usage_ids,
)

PUBLISHED = SynapseConfig.published()


@pytest.fixture
def store() -> SynapseStore:
    store = SynapseStore(":memory:", config=PUBLISHED)
    store.reinforce(["jwt", "keys"], strength=2.0, at=0)  # 0.6: E(keys) = 0.36
    store.reinforce(["jwt", "faq"], strength=1.0, at=0)  # 0.3: E(faq) = 0.18, present → boost
    return store


@pytest.fixture
def wide() -> SynapseStore:
    """jwt used once with each of k0 … k9: ten candidates of energy 0.3 × 0.6 = 0.18."""
    store = SynapseStore(":memory:", config=PUBLISHED)
    for i in range(10):
        store.reinforce(["jwt", f"k{i}"], at=0)
    return store


FIVE = ["jwt", "a", "b", "c", "d"]  # 3 seeds + 2 slots


def test_rank_scores_are_one_minus_rank_over_n() -> None:
    assert rank_scores(5) == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    assert rank_scores(0) == []


@pytest.mark.parametrize(
    ("scores", "usable"),
    [
        ([0.9, 0.5, 0.5], True),
        ([1, 0.5], True),  # an int is a number
        ([], True),
        ([0.5, 0.9], False),  # after a reranker: not sorted
        ([0.9, None], False),
        ([0.9, float("nan")], False),
        ([0.9, "0.5"], False),  # a metadata value that is not a number
        ([True, False], False),
    ],
)
def test_usable_scores(scores: list[object], usable: bool) -> None:
    assert usable_scores(scores) is usable


def test_objects_come_back_in_the_new_order_with_injected_ones_resolved(
    store: SynapseStore,
) -> None:
    items = ["D-jwt", "D-a", "D-b", "D-faq", "D-c"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "faq", "c"], scores=[None] * 5, at=0)
    assert not recall.scored  # rank scores 1.0, 0.8, 0.6, 0.4, 0.2
    assert recall.candidates == ["keys"]
    out = recall.finish({"keys": "D-keys"})
    # faq: 0.4 + 0.3 × 0.18 = 0.454 stays 4th; keys takes c's slot (the weakest, 0.2)
    assert [r.item for r in out] == ["D-jwt", "D-a", "D-b", "D-faq", "D-keys"]
    assert [r.hit.origin for r in out] == ["vector", "vector", "vector", "boosted", "injected"]
    assert out[3].hit.score == pytest.approx(0.454)
    assert [r.score for r in out] == [None] * 5  # the input's scores, None stays None


def test_unresolved_candidates_never_displace(store: SynapseStore) -> None:
    items = ["D-jwt", "D-a", "D-b", "D-c"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "c"], scores=[0.9, 0.8, 0.7, 0.6])
    assert recall.scored
    assert [r.item for r in recall.finish({})] == items
    assert [r.item for r in recall.finish(None)] == items
    assert [r.item for r in recall.finish({"keys": None})] == items  # None: not found


def test_duplicates_map_back_to_their_own_objects(store: SynapseStore) -> None:
    items = ["first", "second", "third", "dup-1", "dup-2"]
    recall = plan_items(store, items, ids=["x", "y", "z", "d", "d"], scores=[None] * 5, at=0)
    assert [r.item for r in recall.finish({})] == items


def test_a_strict_cost_keeps_a_longer_document_out(store: SynapseStore) -> None:
    items = ["jwt", "aaaa", "bbbb", "cc"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "c"], scores=[None] * 4, at=0)
    # keys' text is 5 long, the victim "cc" 2 long: 4 + 4 + 4 + 2 → 4 + 4 + 4 + 5 grows the total
    assert [r.item for r in recall.finish({"keys": "kkkkk"}, cost=len)] == items
    assert [r.item for r in recall.finish({"keys": "k"}, cost=len)] == ["jwt", "aaaa", "bbbb", "k"]


def test_a_strict_cost_weighs_each_victim_at_its_own_cost_where_copies_share_an_id(
    store: SynapseStore,
) -> None:
    # two chunks of one document "d", 1 and 9 long, are the two weakest slots. keys (9 long)
    # takes the last one's (9 for 9) and faq (3) may not take the 1-long chunk's (3 > 1).
    # Weighed by id, both chunks cost 9 and faq came in: 3 + 4 + 4 + 1 + 9 = 21 tokens became
    # 3 + 4 + 4 + 3 + 9 = 23.
    items = ["jwt", "aaaa", "bbbb", "d", "d" * 9]
    ids = ["jwt", "a", "b", "d", "d"]
    recall = plan_items(store, items, ids=ids, scores=[None] * 5, at=0)
    out = recall.finish({"keys": "k" * 9, "faq": "fff"}, cost=len)
    assert [r.item for r in out] == ["jwt", "aaaa", "bbbb", "d", "k" * 9]


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 9), min_size=5, max_size=5),
    found=st.lists(st.integers(0, 9), min_size=2, max_size=2),
    ids=st.lists(st.sampled_from(["a", "b", "d"]), min_size=4, max_size=4),
    config=st.sampled_from([PUBLISHED, SynapseConfig.actr()]),
)
def test_a_strict_cost_never_raises_the_total_whatever_ids_the_objects_share(
    lengths: list[int], found: list[int], ids: list[str], config: SynapseConfig
) -> None:
    store = SynapseStore(":memory:", config=config)
    for node in ("keys", "faq"):  # each used with jwt, the first hit, a day before the query
        store.reinforce(["jwt", node], strength=2.0, at=0)
    items = [f"{i}" * n for i, n in enumerate(lengths)]  # objects of their own, any length
    recall = plan_items(store, items, ids=["jwt", *ids], scores=[None] * 5, at=86_400)
    objects = {"keys": "k" * found[0], "faq": "f" * found[1]}
    out = recall.resolve(lambda asked: {node: objects[node] for node in asked}, cost=len)
    assert len(out) == len(items)
    assert sum(len(r.item) for r in out) <= sum(map(len, items))


def test_lengths_must_agree(store: SynapseStore) -> None:
    with pytest.raises(InvalidValueError, match="differ in length: 2, 1, 2"):
        plan_items(store, ["a", "b"], ids=["a"], scores=[None, None])


# -- the score each object shows -------------------------------------------------------------


def test_usable_scores_show_the_methods_scores(store: SynapseStore) -> None:
    ids = ["jwt", "a", "b", "faq", "c"]
    recall = plan_items(store, ids, ids=ids, scores=[0.9, 0.8, 0.7, 0.6, 0.5], at=0)
    out = recall.finish({"keys": "keys"})
    assert [r.item for r in out] == ["jwt", "a", "b", "faq", "keys"]
    # faq: 0.6 + 0.3 × 0.18 = 0.654; keys takes c's slot and its score 0.5
    assert [r.score for r in out] == pytest.approx([0.9, 0.8, 0.7, 0.654, 0.5])


def test_unusable_scores_are_kept_and_an_injected_object_shows_its_victims() -> None:
    store = SynapseStore(":memory:", config=PUBLISHED)
    store.reinforce(["jwt", "faq"], strength=2.0, at=0)
    store.reinforce(["a", "faq"], strength=2.0, at=0)  # E(faq) = 0.36 + 0.36 = 0.72
    store.reinforce(["jwt", "keys"], strength=2.0, at=0)  # E(keys) = 0.36
    ids = ["jwt", "a", "b", "c", "faq", "d"]
    recall = plan_items(store, ids, ids=ids, scores=[0.2, None, 0.9, 0.5, 0.7, 0.1], at=0)
    out = recall.finish({"keys": "keys"})
    # rank scores 1, .833, .667, .5, .333, .167: faq .333 + 0.3 × 0.72 = .549 passes c (.5);
    # keys takes the weakest slot, d's, and shows d's 0.1.
    assert [r.item for r in out] == ["jwt", "a", "b", "faq", "c", "keys"]
    assert [r.score for r in out] == [0.2, None, 0.9, 0.7, 0.5, 0.1]


def test_victims_with_the_same_id_give_their_scores_in_order(store: SynapseStore) -> None:
    ids = ["jwt", "a", "b", "d", "d"]
    recall = plan_items(store, ids, ids=ids, scores=[None, 0.3, None, 0.2, 0.1], at=0)
    out = recall.finish({"keys": "keys", "faq": "faq"})
    # both d's are displaced: keys (0.36) the better slot, faq (0.18) the last one
    assert [(r.item, r.hit.displaced, r.score) for r in out[3:]] == [
        ("keys", "d", 0.2),
        ("faq", "d", 0.1),
    ]


# -- resolving candidates in batches ----------------------------------------------------------


def test_candidates_are_asked_for_a_batch_at_a_time_until_the_slots_are_filled(
    wide: SynapseStore,
) -> None:
    recall = plan_items(wide, FIVE, ids=FIVE, scores=[None] * 5, at=0)
    assert len(recall.candidates) == 10 and recall.batch_size == 4  # 2 × max_inject
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> dict[str, str]:
        asked.append(ids)
        return {node: node.upper() for node in ids if node in {"k5", "k6", "k7"}}

    out = recall.resolve(fetch)
    assert [r.item for r in out] == ["jwt", "a", "b", "K5", "K6"]  # k5 takes c's (better) slot
    assert asked == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"]]  # k8, k9 never asked


def test_by_default_candidates_come_by_activation_in_batches_of_twice_max_inject() -> None:
    day = 86400.0
    store = SynapseStore(":memory:")  # the default: the ACT-R rule, 2 slots, 1 fixed hit
    for i in range(10):  # jwt used with k0 on day 0, ..., with k9 on day 9
        store.reinforce(["jwt", f"k{i}"], at=i * day)
    recall = plan_items(store, FIVE, ids=FIVE, scores=[None] * 5, at=10 * day)
    # k_i: one use, 10 − i days ago: B = ln (10 − i)^−0.5, from 0 (k9) down to −1.151 (k0);
    # association none: c = 1, N = 10, n_jwt = 10, n_k = 1, ln(1 × 10 / 10) = 0.
    # a, b, c, d were never used: −6 + 3 (keep bonus) = −3, below every k_i
    assert recall.candidates == [f"k{i}" for i in range(9, -1, -1)]
    assert recall.batch_size == 4  # 2 × max_inject
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> dict[str, str]:
        asked.append(ids)
        return {node: node.upper() for node in ids if node in {"k2", "k3", "k8"}}

    # victims d, c (ties: the later position first); k8, the strongest found, takes the
    # better of their slots, c's; k2, resolved in the same batch, is not needed; k1, k0 never asked
    assert [r.item for r in recall.resolve(fetch)] == ["jwt", "a", "b", "K8", "K3"]
    assert asked == [["k9", "k8", "k7", "k6"], ["k5", "k4", "k3", "k2"]]


def test_a_candidate_the_budget_refuses_lets_the_next_batch_in(wide: SynapseStore) -> None:
    texts = ["jwt", "aaaa", "bbbb", "cc", "dd"]
    recall = plan_items(wide, texts, ids=FIVE, scores=[None] * 5, at=0)
    asked: list[list[str]] = []
    counted: Counter[str] = Counter()

    def fetch(ids: list[str]) -> dict[str, str]:
        asked.append(ids)  # k0 … k3 are 10 characters long, k4 … k9 2: as long as the victims
        return {node: node * 5 if node < "k4" else node.upper() for node in ids}

    def cost(text: str) -> int:
        counted[text] += 1
        return len(text)

    out = recall.resolve(fetch, cost)
    assert [r.item for r in out] == ["jwt", "aaaa", "bbbb", "K4", "K5"]
    assert asked == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"]]
    assert set(counted.values()) == {1}  # each object counted once over both batches


def test_without_candidates_or_without_fetch_nothing_is_asked(store: SynapseStore) -> None:
    def fetch(ids: list[str]) -> dict[str, str]:
        raise AssertionError(f"asked for {ids}")

    cold = plan_items(SynapseStore(":memory:"), FIVE, ids=FIVE, scores=[None] * 5, at=0)
    assert [r.item for r in cold.resolve(fetch)] == FIVE
    ids = ["jwt", "a", "b", "faq", "c"]
    warm = plan_items(store, ids, ids=ids, scores=[None] * 5, at=0)
    assert [r.hit.origin for r in warm.resolve(None)] == [r.hit.origin for r in warm.finish()]


@pytest.mark.asyncio
async def test_async_resolution_asks_and_returns_the_same(wide: SynapseStore) -> None:
    recall = plan_items(wide, FIVE, ids=FIVE, scores=[None] * 5, at=0)
    asked: list[list[str]] = []

    async def fetch(ids: list[str]) -> dict[str, str]:
        asked.append(ids)
        return {node: node.upper() for node in ids if node in {"k5", "k6", "k7"}}

    out = await recall.aresolve(fetch)
    assert [r.item for r in out] == ["jwt", "a", "b", "K5", "K6"]
    assert asked == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"]]
    assert [r.item for r in await recall.aresolve(None)] == FIVE


class Down(ConnectionError):
    pass


@pytest.mark.asyncio
async def test_a_failing_fetch_propagates_unless_on_error_takes_it(wide: SynapseStore) -> None:
    recall = plan_items(wide, FIVE, ids=FIVE, scores=[None] * 5, at=0)
    error = Down("docstore unreachable")
    asked: list[list[str]] = []
    reported: list[tuple[Exception, list[str]]] = []

    def fetch(ids: list[str]) -> dict[str, str]:
        asked.append(ids)
        if len(asked) > 1:
            raise error
        return {"k3": "K3"}  # one of the two slots filled by the first batch

    async def afetch(ids: list[str]) -> dict[str, str]:
        return fetch(ids)

    with pytest.raises(Down) as caught:
        recall.resolve(fetch)
    assert caught.value is error
    asked.clear()
    out = recall.resolve(fetch, on_error=lambda exc, ids: reported.append((exc, ids)))
    assert [r.item for r in out] == ["jwt", "a", "b", "c", "K3"]  # k3 took d's slot
    assert asked == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"]]  # no third call
    assert reported == [(error, ["k4", "k5", "k6", "k7"])]
    asked.clear()
    out = await recall.aresolve(afetch, on_error=lambda exc, ids: None)
    assert [r.item for r in out] == ["jwt", "a", "b", "c", "K3"]
    assert len(asked) == 2
    with pytest.raises(Down):
        await recall.aresolve(afetch)


@settings(max_examples=80, deadline=None)
@given(
    found=st.sets(st.sampled_from([f"k{i}" for i in range(10)])),
    lengths=st.lists(st.integers(1, 6), min_size=10, max_size=10),
    strict=st.booleans(),
    config=st.sampled_from([PUBLISHED, SynapseConfig.actr()]),
)
def test_resolving_in_batches_gives_what_resolving_everything_at_once_gives(
    found: set[str], lengths: list[int], strict: bool, config: SynapseConfig
) -> None:
    wide = SynapseStore(":memory:", config=config)
    for i in range(10):
        wide.reinforce(["jwt", f"k{i}"], strength=1.0 + i / 10, at=0)  # k9 the strongest
    texts = ["jwt", "aaa", "bbb", "ccc", "ddd"]
    recall = plan_items(wide, texts, ids=FIVE, scores=[None] * 5, at=0)
    objects = {f"k{i}": "k" * lengths[i] for i in range(10) if f"k{i}" in found}
    asked: list[str] = []

    def fetch(ids: list[str]) -> Mapping[str, str]:
        assert len(ids) <= recall.batch_size
        asked.extend(ids)
        return {node: objects[node] for node in ids if node in objects}

    cost = len if strict else None
    batched = recall.resolve(fetch, cost)
    assert batched == recall.finish(objects, cost)
    assert len(asked) == len(set(asked))  # no id asked twice
    assert asked == recall.candidates[: len(asked)]  # strongest first


# -- annotations and the ids of used objects ----------------------------------------------------


def test_annotate_returns_new_metadata_without_stale_annotations() -> None:
    metadata = {"source": "b.py", "synapse_displaced": "e", "synapse_origin": "injected"}
    before = dict(metadata)
    boosted = annotate(metadata, Hit("b", 0.7, "boosted", 0.18, ("a", "b")))
    assert boosted == {
        "source": "b.py",
        "synapse_origin": "boosted",
        "synapse_energy": 0.18,
        "synapse_path": "a -> b",
    }
    assert metadata == before
    assert annotate(metadata, Hit("b", 0.7)) == {"source": "b.py"}  # a plain hit: no notes


def test_usage_ids_maps_objects_and_keeps_ids() -> None:
    assert usage_ids(["a", 2, "c"], lambda n: f"n{n}", int) == ["a", "n2", "c"]
    assert usage_ids(iter([3]), str, (int, float)) == ["3"]


@pytest.mark.parametrize(
    ("used", "message"),
    [
        ("ab", "must be a list of ids or int objects, got 'ab'"),  # not the ids 'a' and 'b'
        (b"ab", "must be a list of ids or int objects"),
        (7, "must be a list of ids or int objects, got 7"),  # a single object
        (["a", 2.5], "expected an id or a int, got float 2.5"),
    ],
)
def test_usage_ids_refuses_what_would_be_misread(used: object, message: str) -> None:
    with pytest.raises(InvalidTypeError, match=message):
        usage_ids(used, str, int)  # type: ignore[arg-type]


def test_a_cost_of_an_object_that_is_no_count_is_refused_by_name(store: SynapseStore) -> None:
    items = ["jwt", "aaaa", "bbbb", "cc"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "c"], scores=[None] * 4, at=0)
    with pytest.raises(InvalidValueError, match="cost of 'a' must be a finite number, got nan"):
        recall.finish({"keys": "k"}, cost=lambda doc: float("nan") if doc == "aaaa" else len(doc))


def test_a_plan_of_its_own_without_hit_costs_still_injects_without_a_budget() -> None:
    # every inject was handed hit_costs=None: a Plan written to the protocol before it had the
    # keyword raised TypeError though no budget was kept
    from synapse_retriever import Activation, PublishedRule, RecallPlan
    from synapse_retriever.recall.items import ItemRecall

    class OldPlan:
        def __init__(self, plan: RecallPlan) -> None:
            self._plan = plan

        def __getattr__(self, name: str) -> object:  # the rest of the protocol: the plan's
            return getattr(self._plan, name)

        def inject(self, resolvable: object = None, cost: object = None) -> list[Hit]:
            return self._plan.inject(resolvable, cost)  # type: ignore[arg-type]

    plan = RecallPlan(
        [("a", 0.9), ("b", 0.5)], Activation({"x": 0.3}, {"x": ("a", "x")}), PublishedRule(seeds=1)
    )
    recall = ItemRecall(OldPlan(plan), ["doc a", "doc b"], ["a", "b"], [None, None], scored=False)  # type: ignore[arg-type]
    assert [r.item for r in recall.resolve(lambda ids: {"x": "doc x"})] == ["doc a", "doc x"]
