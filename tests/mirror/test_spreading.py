"""Spreading activation: hand-worked energies, hub normalization, invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever.errors import InvalidTypeError
from synapse_retriever.mirror.spreading import hub_factor, spread_activation


def star(center: str, degree: int, weight: float = 1.0) -> dict[str, dict[str, float]]:
    graph: dict[str, dict[str, float]] = {center: {}}
    for i in range(degree):
        leaf = f"{center}-leaf{i}"
        graph[center][leaf] = weight
        graph[leaf] = {center: weight}
    return graph


def test_hub_factor_worked_values() -> None:
    assert hub_factor(200) == 0.5  # sqrt(50 / 200) = sqrt(0.25)
    assert hub_factor(5000) == pytest.approx(0.1)  # sqrt(50 / 5000) = sqrt(0.01)
    assert hub_factor(50) == 1.0  # at the threshold: no damping
    assert hub_factor(0) == 1.0


def test_one_hop_is_weight_times_rate() -> None:
    # verify_token -> load_keys 0.9: 1.0 × 0.9 × 0.6 × hf 1.0 = 0.54
    graph = {"verify_token": {"load_keys": 0.9}, "load_keys": {"verify_token": 0.9}}
    assert spread_activation(graph, ["verify_token"]).energy == {"load_keys": pytest.approx(0.54)}


def test_two_hops_and_the_paths_that_carried_them() -> None:
    # s -> a 0.5 -> b 0.8:  E1[a] = 0.5 × 0.6 = 0.3;  E2[b] = 0.3 × 0.8 × 0.6 = 0.144
    # b gets no third hop: c stays dark
    graph = {
        "s": {"a": 0.5},
        "a": {"s": 0.5, "b": 0.8},
        "b": {"a": 0.8, "c": 1.0},
        "c": {"b": 1.0},
    }
    act = spread_activation(graph, ["s"])
    assert act.energy == {"a": pytest.approx(0.3), "b": pytest.approx(0.144)}
    assert act.paths == {"a": ("s", "a"), "b": ("s", "a", "b")}


def test_energy_sums_over_seeds_and_hops_then_caps_at_one() -> None:
    # seeds s1, s2 both -> m at 1.0: E1[m] = min(1, 0.6 + 0.6) = 1.0
    # m -> n 1.0: E2[n] = 1.0 × 1.0 × 0.6 = 0.6; s1 -> n 0.9: E1[n] = 0.54
    # E[n] = min(1, 0.54 + 0.6) = 1.0
    graph = {
        "s1": {"m": 1.0, "n": 0.9},
        "s2": {"m": 1.0},
        "m": {"s1": 1.0, "s2": 1.0, "n": 1.0},
        "n": {"m": 1.0, "s1": 0.9},
    }
    energy = spread_activation(graph, ["s1", "s2"]).energy
    assert energy["m"] == 1.0
    assert energy["n"] == 1.0


def test_energy_never_flows_into_a_seed() -> None:
    graph = {"s1": {"s2": 1.0}, "s2": {"s1": 1.0}}
    assert spread_activation(graph, ["s1", "s2"]).energy == {}


def test_a_hub_seed_propagates_at_its_hub_factor() -> None:
    # hub of degree 200: hf 0.5; each leaf gets 1.0 × 1.0 × 0.6 × 0.5 = 0.3
    graph = star("hub", 200)
    energy = spread_activation(graph, ["hub"]).energy
    assert energy["hub-leaf0"] == pytest.approx(0.3)
    assert len(energy) == 200


def test_a_hub_target_is_damped_by_its_own_hub_factor() -> None:
    # s -> hub 1.0: E[hub] = 0.6, returned × hf(hub) = 0.6 × 0.5 = 0.3 (degree 200 + s = 201:
    # hf = sqrt(50 / 201) = 0.498755 → 0.299253)
    graph = star("hub", 200)
    graph["s"] = {"hub": 1.0}
    graph["hub"]["s"] = 1.0
    energy = spread_activation(graph, ["s"]).energy
    assert energy["hub"] == pytest.approx(0.6 * (50 / 201) ** 0.5)
    # the leaves still receive the unscaled E1 through the hub, damped once by hf(hub):
    # 0.6 × 1.0 × 0.6 × 0.498755 = 0.179552
    assert energy["hub-leaf7"] == pytest.approx(0.6 * 0.6 * (50 / 201) ** 0.5)


def test_unknown_seeds_spread_nothing() -> None:
    assert spread_activation({}, ["nowhere"]).energy == {}


weights = st.floats(0.0, 1.0)
graphs = st.dictionaries(
    st.tuples(st.sampled_from("abcdefgh"), st.sampled_from("abcdefgh")).filter(
        lambda p: p[0] < p[1]
    ),
    weights,
)


def as_adjacency(edges: dict[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    graph: dict[str, dict[str, float]] = {}
    for (a, b), w in edges.items():
        graph.setdefault(a, {})[b] = w
        graph.setdefault(b, {})[a] = w
    return graph


@given(edges=graphs, seeds=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=3))
def test_energies_are_in_unit_interval_and_seeds_stay_dark(
    edges: dict[tuple[str, str], float], seeds: list[str]
) -> None:
    act = spread_activation(as_adjacency(edges), seeds)
    assert all(0.0 < e <= 1.0 for e in act.energy.values())
    assert not set(seeds) & set(act.energy)
    assert set(act.paths) == set(act.energy)
    for node, path in act.paths.items():
        assert path[0] in seeds and path[-1] == node and len(path) in (2, 3)


def test_seeds_are_read_once_and_a_bare_str_is_refused() -> None:
    graph = {"ab": {"x": 0.5}, "a": {"y": 0.9}}
    assert spread_activation(graph, (n for n in ["ab"])).energy == {"x": 0.3}  # a generator
    with pytest.raises(InvalidTypeError, match="got a bare str 'ab'"):
        spread_activation(graph, "ab")  # would read as the seeds 'a' and 'b'
