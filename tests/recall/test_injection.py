"""Budget-neutral injection: the published walkthrough, every rule, and the invariants."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever import PublishedRule, SynapseConfig, SynapseStore
from synapse_retriever.mirror.spreading import Activation
from synapse_retriever.recall.hits import Hit, injection_slots
from synapse_retriever.recall.published import RecallPlan, candidates, inject

WALKTHROUGH_HITS = [
    ("verify_token", 0.95),
    ("login", 0.93),
    ("auth_middleware", 0.90),
    ("password_hash", 0.85),
    ("auth_views", 0.80),
    ("oauth_client", 0.74),
    ("session.refresh", 0.70),
    ("auth_docstring_stub", 0.60),
]


def walkthrough_store() -> SynapseStore:
    store = SynapseStore(":memory:", config=SynapseConfig.published())  # the published rule
    for _ in range(3):  # 3 × 0.3 = 0.9 in personal
        store.reinforce(["verify_token", "load_keys"], namespace="personal", at=0)
    for i in range(5):  # load_keys has degree 6: five more personal neighbours at 0.3
        store.reinforce(["load_keys", f"keys_helper_{i}"], namespace="personal", at=0)
    # 0.3 × 5/3 = 0.5 in shared
    store.reinforce(["login", "session.refresh"], strength=5 / 3, namespace="shared", at=0)
    return store


def test_the_published_walkthrough() -> None:
    store = walkthrough_store()
    energy = store.activate(["verify_token", "login", "auth_middleware"], at=0)
    # verify_token -> load_keys: personal 0.9 × factor 1.0 × 0.6 × hf 1.0 = 0.54
    assert energy["load_keys"] == pytest.approx(0.54)
    # login -> session.refresh: shared 0.5 × factor 0.5 × 0.6 = 0.15
    assert energy["session.refresh"] == pytest.approx(0.15)
    # the helpers are two hops out: 0.54 × 0.3 × 0.6 = 0.0972, below 0.15
    assert energy["keys_helper_0"] == pytest.approx(0.0972)

    out = store.recall(WALKTHROUGH_HITS, at=0, active_namespace="personal")
    assert len(out) == 8
    assert [h.id for h in out] == [
        "verify_token",
        "login",
        "auth_middleware",
        "password_hash",
        "auth_views",
        "session.refresh",  # 0.70 + 0.3 × 0.15 = 0.745, re-ranked above 0.74
        "oauth_client",
        "load_keys",  # took the weakest hit's slot and score
    ]
    refreshed = out[5]
    assert refreshed.origin == "boosted"
    assert refreshed.score == pytest.approx(0.745)
    assert refreshed.path == ("login", "session.refresh")
    injected = out[7]
    assert injected == Hit(
        "load_keys",
        0.60,
        "injected",
        injected.energy,
        ("verify_token", "load_keys"),
        "auth_docstring_stub",
    )
    assert injected.energy == pytest.approx(0.54)


BOTH_RULES = pytest.mark.parametrize(
    "config", [SynapseConfig(), SynapseConfig.published()], ids=["default", "published"]
)


@BOTH_RULES
def test_cold_graph_is_the_identity_to_the_byte(config: SynapseConfig) -> None:
    store = SynapseStore(":memory:", config=config)
    out = store.recall(WALKTHROUGH_HITS, at=0)
    assert [(h.id, h.score) for h in out] == WALKTHROUGH_HITS
    assert json.dumps([[h.id, h.score] for h in out]) == json.dumps(WALKTHROUGH_HITS)
    assert all(h.origin == "vector" for h in out)


@BOTH_RULES
def test_disabled_injection_is_the_identity(config: SynapseConfig) -> None:
    store = SynapseStore(":memory:", config=replace(config, injection_enabled=False))
    store.reinforce(["verify_token", "load_keys"], strength=2, at=0)
    assert [(h.id, h.score) for h in store.recall(WALKTHROUGH_HITS, at=0)] == WALKTHROUGH_HITS


def hits(n: int) -> list[tuple[str, float]]:
    return [(f"h{i}", 1.0 - i / 10) for i in range(n)]


def test_three_seeds_mean_k_of_three_never_injects() -> None:
    act = Activation({"x": 1.0}, {"x": ("h0", "x")})
    assert [h.id for h in inject(hits(3), act)] == ["h0", "h1", "h2"]
    assert [h.id for h in inject(hits(4), act)] == ["h0", "h1", "h2", "x"]


def test_at_most_two_injected_strongest_takes_the_better_slot() -> None:
    act = Activation(
        {"x": 0.9, "y": 0.8, "z": 0.7},
        {"x": ("h0", "x"), "y": ("h0", "y"), "z": ("h0", "z")},
    )
    out = inject(hits(6), act)
    # victims: h5 (0.5, weakest) and h4 (0.6); x (strongest) takes h4's slot and score
    assert [(h.id, h.score, h.displaced) for h in out[4:]] == [
        ("x", 0.6, "h4"),
        ("y", 0.5, "h5"),
    ]


@pytest.mark.parametrize(
    ("n", "seeds", "max_inject", "slots"),
    [
        (0, 3, 2, 0),
        (3, 3, 2, 0),  # every hit is a seed
        (4, 3, 2, 1),  # one non-seed
        (5, 3, 2, 2),
        (9, 3, 2, 2),  # capped by max_inject
        (2, 1, 2, 1),
        (1, 1, 2, 0),
        (6, 1, 5, 5),
        (6, 3, 0, 0),  # injection disabled
    ],
)
def test_injection_slots_is_what_inject_fills_with_enough_candidates(
    n: int, seeds: int, max_inject: int, slots: int
) -> None:
    assert injection_slots(n, seeds=seeds, max_inject=max_inject) == slots
    act = Activation({f"x{i}": 0.9 for i in range(9)}, {})
    out = inject(hits(n), act, seeds=seeds, max_inject=max_inject)
    assert sum(hit.origin == "injected" for hit in out) == slots
    plan = RecallPlan(hits(n), act, PublishedRule(seeds=seeds, max_inject=max_inject))
    assert plan.slots == slots
    assert len(plan.candidates) == (9 if slots else 0)


def test_ties_between_victims_take_the_later_position() -> None:
    act = Activation({"x": 0.5}, {"x": ("a", "x")})
    out = inject([("a", 1.0), ("b", 0.5), ("c", 0.5)], act, seeds=1)
    assert [h.id for h in out] == ["a", "b", "x"]


def test_candidates_are_ordered_by_energy_then_id_with_a_tolerance_at_the_threshold() -> None:
    energy = {"b": 0.5, "a": 0.5, "c": 0.15 - 1e-12, "d": 0.149, "present": 0.9}
    assert candidates([("present", 1.0)], energy) == ["a", "b", "c"]


def test_unresolvable_ids_never_cost_a_slot() -> None:
    act = Activation({"x": 0.9, "y": 0.8, "z": 0.7}, {})
    out = inject(hits(6), act, resolvable=lambda node: node != "x")
    assert [h.id for h in out if h.origin == "injected"] == ["y", "z"]
    out = inject(hits(6), act, resolvable={"z"})
    assert [h.id for h in out if h.origin == "injected"] == ["z"]


def test_cost_may_not_raise_the_total() -> None:
    cost = {"h0": 10, "h1": 10, "h2": 10, "h3": 10, "h4": 10, "x": 12, "y": 7, "z": 8}
    act = Activation({"x": 0.9, "y": 0.8, "z": 0.7}, {})
    # input total 50. x costs 12 > victim h4's 10: 52 > 50, skipped.
    # y for h4: 50 − 10 + 7 = 47; z for h3: 47 − 10 + 8 = 45 ≤ 50
    out = inject(hits(5), act, cost=cost.__getitem__)
    assert [h.id for h in out] == ["h0", "h1", "h2", "y", "z"]
    assert sum(cost[h.id] for h in out) == 45


def test_boost_skips_seeds_and_resorts_stably() -> None:
    act = Activation({"h0": 0.0, "h3": 0.5, "h4": 0.5}, {})
    # h3: 0.7 + 0.3 × 0.5 = 0.85 passes h2 (0.8); h4: 0.6 + 0.15 = 0.75 stays below it
    out = inject(hits(5), act)
    assert [(h.id, round(h.score, 6), h.origin) for h in out] == [
        ("h0", 1.0, "vector"),
        ("h1", 0.9, "vector"),
        ("h3", 0.85, "boosted"),
        ("h2", 0.8, "vector"),
        ("h4", 0.75, "boosted"),
    ]


def test_duplicates_are_kept_as_they_are() -> None:
    out = inject([("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.7), ("d", 0.7)], Activation())
    assert [h.id for h in out] == ["a", "b", "c", "d", "d"]


ids = st.text(alphabet="abcdefghij", min_size=1, max_size=2)
hit_lists = st.lists(st.tuples(ids, st.floats(-1e6, 1e6)), max_size=12).map(
    lambda rows: sorted(rows, key=lambda r: -r[1])
)
energies = st.dictionaries(ids, st.floats(0.0, 1.0))


@given(hit_lists, energies, st.integers(1, 4), st.integers(0, 3))
def test_recall_never_grows_the_result_and_keeps_an_original(
    rows: list[tuple[str, float]], energy: dict[str, float], seeds: int, max_inject: int
) -> None:
    out = inject(rows, Activation(energy, {}), seeds=seeds, max_inject=max_inject)
    assert len(out) == len(rows)
    injected = [h for h in out if h.origin == "injected"]
    assert len(injected) <= max_inject
    if rows:
        assert any(h.origin != "injected" for h in out)
        # the seeds are never displaced
        assert {r[0] for r in rows[:seeds]} <= {h.id for h in out}
    assert not {h.id for h in injected} & {r[0] for r in rows}


@given(hit_lists, energies)
def test_at_most_two_injected_with_the_default_config(
    rows: list[tuple[str, float]], energy: dict[str, float]
) -> None:
    out = inject(rows, Activation(energy, {}))
    assert sum(h.origin == "injected" for h in out) <= 2


@given(hit_lists)
def test_cold_graph_is_the_identity(rows: list[tuple[str, float]]) -> None:
    out = inject(rows, Activation())
    assert [(h.id, h.score) for h in out] == rows
    assert all(h.origin == "vector" for h in out)


@given(hit_lists, energies, st.dictionaries(ids, st.integers(0, 50)))
def test_a_cost_bound_is_never_exceeded(
    rows: list[tuple[str, float]], energy: dict[str, float], costs: dict[str, int]
) -> None:
    def cost(node: str) -> int:
        return costs.get(node, 5)

    out = inject(rows, Activation(energy, {}), cost=cost)
    assert sum(cost(h.id) for h in out) <= sum(cost(r[0]) for r in rows)


@pytest.mark.parametrize(
    ("hits", "message"),
    [
        ([("a", 0.5), ("b", 0.9)], "hits must be sorted best first"),
        ([("a", float("nan"))], "non-finite score nan"),
    ],
)
def test_inject_checks_its_hits_as_recall_does(hits: list[tuple[str, float]], message: str) -> None:
    from synapse_retriever.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match=message):
        inject(hits, Activation(energy={"x": 0.9}, paths={"x": ("a", "x")}))


def test_a_hub_degree_below_one_is_refused() -> None:
    from synapse_retriever.errors import InvalidValueError
    from synapse_retriever.mirror.spreading import hub_factor

    with pytest.raises(InvalidValueError, match="hub_degree must be an integer >= 1, got 0"):
        hub_factor(5, hub_degree=0)  # every factor would be 0: no energy past a node


@pytest.mark.parametrize(
    "config", [SynapseConfig(), SynapseConfig.published()], ids=["actr", "pub"]
)
@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (float("nan"), "InvalidValueError", "cost of 'x' must be a finite number, got nan"),
        (None, "InvalidTypeError", "cost of 'x' must be a number .*, got NoneType None"),
        ("10", "InvalidTypeError", "cost of 'x' must be a number"),
        (-1.0, "InvalidValueError", "cost of 'x' must not be negative, got -1.0"),
    ],
)
def test_a_cost_that_is_no_count_is_refused_by_name(
    config: SynapseConfig, bad: object, error: str, message: str
) -> None:
    # a NaN cost turned the budget off: a document of 1M tokens came in for one of 10
    from synapse_retriever import errors

    store = SynapseStore(":memory:", config=config)
    store.reinforce(["a", "big"], at=0)
    hits = [("a", 0.9), ("x", 0.5), ("y", 0.4), ("p", 0.3), ("q", 0.2)]
    tokens: dict[str, object] = {"a": 10, "x": bad, "y": 10, "p": 10, "q": 10, "big": 10**6}
    with pytest.raises(getattr(errors, error), match=message):
        store.recall(hits, at=86_400, cost=tokens.get)
    tokens["x"] = 10
    assert "big" in [h.id for h in store.recall(hits, at=86_400)]
    assert [h.id for h in store.recall(hits, at=86_400, cost=tokens.get)] == list("axypq")


@pytest.mark.parametrize(
    "config", [SynapseConfig(), SynapseConfig.published()], ids=["actr", "pub"]
)
def test_costs_are_checked_with_no_slot_open_under_either_rule(config: SynapseConfig) -> None:
    # the published rule checked them only when a slot was open: one hit (a seed), or
    # max_inject=0, took a NaN cost or a short hit_costs without a word
    from synapse_retriever.errors import InvalidValueError

    store = SynapseStore(":memory:", config=config)
    store.reinforce(["a", "b"], at=0)
    with pytest.raises(InvalidValueError, match="cost of 'a' must be a finite number, got nan"):
        store.recall([("a", 0.9)], at=0, cost=lambda node: float("nan"))
    plan = store.plan([("a", 0.9)], at=0)
    with pytest.raises(InvalidValueError, match="one cost per hit: 2 for 1 hits"):
        plan.inject(cost=len, hit_costs=[1, 2])
    assert plan.inject(cost=len, hit_costs=[1]) == [Hit("a", 0.9)]


def test_a_resolvable_that_is_no_container_is_refused_even_on_a_cold_graph() -> None:
    from synapse_retriever.errors import InvalidTypeError

    with pytest.raises(InvalidTypeError, match=r"resolvable must be None, a callable .* got int 5"):
        SynapseStore(":memory:").recall([("a", 0.9)], resolvable=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "config", [SynapseConfig(), SynapseConfig.published()], ids=["actr", "pub"]
)
def test_a_hit_whose_id_no_store_could_hold_is_a_node_recall_knows_nothing_of(
    config: SynapseConfig,
) -> None:
    store = SynapseStore(":memory:", config=config)
    long, nul, lone = "u" * 3000, "a\x00b", "\ud800"
    hits = [("a", 0.9), (long, 0.8), (nul, 0.7), (lone, 0.6), ("p", 0.5)]
    assert store.recall(hits) == [Hit(node, score) for node, score in hits]  # cold
    store.reinforce(["a", "b"], at=0)
    out = store.recall(hits, at=0)
    assert len(out) == 5 and out[0].id == "a" and "b" in [h.id for h in out]
    from synapse_retriever.errors import InvalidTypeError, InvalidValueError

    with pytest.raises(InvalidValueError, match="node id must be a non-empty string"):
        store.recall([("", 1.0)])
    with pytest.raises(InvalidTypeError, match="node id must be a str, got int 7"):
        store.recall([(7, 1.0)])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "config", [SynapseConfig(), SynapseConfig.published()], ids=["actr", "pub"]
)
def test_a_plans_inject_checks_resolvable_and_cost_as_recall_does(config: SynapseConfig) -> None:
    from synapse_retriever.errors import InvalidTypeError

    store = SynapseStore(":memory:", config=config)
    store.reinforce(["a", "b"], at=0)
    plan = store.plan([("a", 0.9), ("x", 0.5), ("y", 0.4), ("p", 0.3), ("q", 0.2)], at=0)
    with pytest.raises(InvalidTypeError, match="resolvable must be None, a callable"):
        plan.inject(resolvable=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="resolvable must be None, a callable"):
        plan.inject(resolvable="ab")  # a str would take "b" for one of its ids
    with pytest.raises(InvalidTypeError, match="cost must be a callable id -> number, got 5"):
        plan.inject(cost=5)  # type: ignore[arg-type]
