"""Recall over objects: what both adapters share."""

from __future__ import annotations

import pytest

from synapse_retriever import InvalidValueError, SynapseStore
from synapse_retriever.items import plan_items, rank_scores, usable_scores


@pytest.fixture
def store() -> SynapseStore:
    store = SynapseStore(":memory:")
    store.reinforce(["jwt", "keys"], strength=2.0, at=0)  # 0.6: E(keys) = 0.36
    store.reinforce(["jwt", "faq"], strength=1.0, at=0)  # 0.3: E(faq) = 0.18, present → boost
    return store


def test_rank_scores_are_one_minus_rank_over_n() -> None:
    assert rank_scores(5) == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    assert rank_scores(0) == []


@pytest.mark.parametrize(
    ("scores", "usable"),
    [
        ([0.9, 0.5, 0.5], True),
        ([], True),
        ([0.5, 0.9], False),  # after a reranker: not sorted
        ([0.9, None], False),
        ([0.9, float("nan")], False),
    ],
)
def test_usable_scores(scores: list[float | None], usable: bool) -> None:
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
    assert [item for item, _ in out] == ["D-jwt", "D-a", "D-b", "D-faq", "D-keys"]
    assert [hit.origin for _, hit in out] == ["vector", "vector", "vector", "boosted", "injected"]
    assert out[3][1].score == pytest.approx(0.454)


def test_unresolved_candidates_never_displace(store: SynapseStore) -> None:
    items = ["D-jwt", "D-a", "D-b", "D-c"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "c"], scores=[0.9, 0.8, 0.7, 0.6])
    assert recall.scored
    assert [item for item, _ in recall.finish({})] == items
    assert [item for item, _ in recall.finish(None)] == items


def test_duplicates_map_back_to_their_own_objects(store: SynapseStore) -> None:
    items = ["first", "second", "third", "dup-1", "dup-2"]
    recall = plan_items(store, items, ids=["x", "y", "z", "d", "d"], scores=[None] * 5, at=0)
    assert [item for item, _ in recall.finish({})] == items


def test_a_strict_cost_keeps_a_longer_document_out(store: SynapseStore) -> None:
    items = ["jwt", "aaaa", "bbbb", "cc"]
    recall = plan_items(store, items, ids=["jwt", "a", "b", "c"], scores=[None] * 4, at=0)
    # keys' text is 5 long, the victim "cc" 2 long: 4 + 4 + 4 + 2 → 4 + 4 + 4 + 5 grows the total
    assert [i for i, _ in recall.finish({"keys": "kkkkk"}, cost=len)] == items
    assert [i for i, _ in recall.finish({"keys": "k"}, cost=len)] == ["jwt", "aaaa", "bbbb", "k"]


def test_lengths_must_agree(store: SynapseStore) -> None:
    with pytest.raises(InvalidValueError, match="differ in length: 2, 1, 2"):
        plan_items(store, ["a", "b"], ids=["a"], scores=[None, None])
