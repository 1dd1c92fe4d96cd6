"""The graph walk, worked by hand: damping, decay, hubs, fan-out, depth, edge types."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever.conversation.graph.hybrid import lift, ranked, spread
from synapse_retriever.conversation.graph.walk import TemporalGraph, graph_search, specificity
from synapse_retriever.conversation.relevance import fuse

DAY = 86_400.0


def chain() -> TemporalGraph:
    """entity e <- turn 1 -> turn 2 -> turn 3 (FOLLOWED_BY), all made at 0."""
    graph = TemporalGraph()
    graph.add_edge("turn:1", "code:e", "MENTIONS", at=0.0)
    graph.add_edge("turn:1", "turn:2", "FOLLOWED_BY", at=0.0)
    graph.add_edge("turn:2", "turn:3", "FOLLOWED_BY", at=0.0)
    return graph


def scores(hits: list) -> dict[int, float]:  # type: ignore[type-arg]
    return {hit.turn_id: hit.score for hit in hits}


def test_each_hop_multiplies_damping_and_strength() -> None:
    # hop 1: 1 × 0.5 × 0.5 = 0.25 (turn 1); hop 2: 0.25 × 0.5 × 0.5 = 0.0625 (turn 2)
    hits = graph_search(chain(), {"code:e": 1.0}, now=0.0, depth=2)
    assert scores(hits) == pytest.approx({1: 0.25, 2: 0.0625})
    # a third hop reaches turn 3: 0.0625 × 0.25
    assert scores(graph_search(chain(), {"code:e": 1.0}, now=0.0, depth=3))[3] == pytest.approx(
        0.015625
    )


def test_old_edges_pass_less_and_reinforced_ones_more() -> None:
    half_life = math.log(2) / 0.05 * DAY
    # one half-life later every edge is at 0.25: 1 × 0.5 × 0.25 = 0.125
    assert scores(graph_search(chain(), {"code:e": 1.0}, now=half_life, depth=1)) == (
        pytest.approx({1: 0.125})
    )
    graph = TemporalGraph()
    graph.add_edge("turn:1", "code:e", "MENTIONS", at=0.0, count=10)  # full strength 1.0
    assert scores(graph_search(graph, {"code:e": 1.0}, now=0.0)) == pytest.approx({1: 0.5})


def test_hubs_are_damped_and_fan_out_is_capped() -> None:
    graph = TemporalGraph()
    for i in range(1, 201):  # an entity 200 turns mention: hf = sqrt(50 / 200) = 0.5
        graph.add_edge(f"turn:{i}", "name:hub", "MENTIONS", at=float(i))
    hits = graph_search(graph, {"name:hub": 1.0}, now=200.0, depth=1, fan_out=20)
    assert len(hits) == 20  # the 20 strongest (the newest) edges only
    assert {hit.turn_id for hit in hits} == set(range(181, 201))
    assert hits[0].score == pytest.approx(0.5 * 0.5 * 0.5, rel=1e-4)  # 1 × 0.5 × hf × ~0.5


def test_paths_never_loop_and_seeds_are_not_their_own_result() -> None:
    graph = chain()
    graph.add_edge("turn:3", "turn:1", "RELATES_TO", at=0.0)  # a cycle 1 -> 2 -> 3 -> 1
    hits = graph_search(graph, {"turn:1": 1.0}, now=0.0, depth=5)
    assert 1 not in scores(hits)
    for hit in hits:
        visited = ["turn:1"]  # the nodes in the order the walk went, whatever each edge's way
        for edge in hit.path:
            here = visited[-1]
            assert here in (edge.source, edge.target)
            visited.append(edge.target if edge.source == here else edge.source)
        assert len(visited) == len(set(visited)), visited
        assert visited[-1] == f"turn:{hit.turn_id}"


_TIED = [  # every edge made at 0: equal strengths, two of them joining turns 2 and 3
    ("turn:1", "code:e", "MENTIONS"),
    ("turn:2", "code:e", "MENTIONS"),
    ("turn:3", "code:e", "MENTIONS"),
    ("turn:2", "turn:3", "FOLLOWED_BY"),
    ("turn:2", "turn:3", "CAUSED_BY"),
    ("turn:1", "turn:4", "FOLLOWED_BY"),
    ("turn:3", "turn:5", "FOLLOWED_BY"),
]


@given(st.permutations(_TIED))
def test_tied_edges_are_followed_in_one_order_however_the_graph_was_loaded(
    edges: list[tuple[str, str, str]],
) -> None:
    # the fan-out kept the tied edges met first: a graph loaded in another order (a reopened
    # memory) reached other turns, by other paths
    graph = TemporalGraph()
    for source, target, type_ in edges:
        graph.add_edge(source, target, type_, at=0.0)
    hits = graph_search(graph, {"code:e": 1.0}, now=0.0, depth=2, fan_out=2)
    walked = [(h.turn_id, [(e.source, e.target, e.type) for e in h.path]) for h in hits]
    assert walked == [  # the two newest turns at hop 1, then each one's newest neighbour
        (3, [("turn:3", "code:e", "MENTIONS")]),
        (2, [("turn:2", "code:e", "MENTIONS")]),
        (5, [("turn:3", "code:e", "MENTIONS"), ("turn:3", "turn:5", "FOLLOWED_BY")]),
    ]


def test_allowed_edge_types_restrict_the_walk() -> None:
    hits = graph_search(chain(), {"code:e": 1.0}, now=0.0, depth=3, allowed=["MENTIONS"])
    assert scores(hits) == pytest.approx({1: 0.25})


def test_unknown_and_zero_seeds_start_nothing() -> None:
    assert graph_search(chain(), {"code:absent": 1.0, "code:e": 0.0}, now=0.0) == []


def test_specificity_worked_by_hand() -> None:
    # 9 turns, 3 mention it: log(10 / 3) / log(10) = 0.52288
    assert specificity(3, 9) == pytest.approx(0.52288, abs=1e-5)
    assert specificity(0, 9) == specificity(3, 0) == 0.0


rankings = st.lists(st.integers(1, 30), unique=True, max_size=20)


@given(rankings, rankings, st.floats(0.1, 4), st.integers(1, 100))
def test_fusion_is_monotone_in_each_rank_and_symmetric_in_the_lists(
    lexical: list[int], dense: list[int], weight: float, k: int
) -> None:
    fused = fuse([lexical, dense], [weight, 1.0], k=k)
    assert set(fused) == set(lexical) | set(dense)
    # a better rank in a list never lowers the fused score, the lists' order is irrelevant
    for better, worse in itertools.pairwise(dense):
        if better not in lexical and worse not in lexical:
            assert fused[better] > fused[worse]
    assert fuse([dense, lexical], [1.0, weight], k=k) == pytest.approx(fused)


@given(
    st.dictionaries(st.integers(1, 30), st.floats(0.001, 1), max_size=20),
    st.dictionaries(st.integers(1, 30), st.lists(st.integers(1, 30), max_size=4), max_size=20),
    st.floats(0, 1),
    st.integers(1, 40),
)
def test_the_graph_only_adds_and_ranked_cuts_to_k_once_each(
    scores: dict[int, float], neighbours: dict[int, list[int]], share: float, k: int
) -> None:
    links = neighbours.get
    spread_out = spread(scores, lambda t: links(t, []), share, depth=2)
    assert all(spread_out[t] >= s for t, s in scores.items())  # never below the fusion
    if share == 0:
        assert spread_out == scores
    one_hop = set(lift(scores, lambda t: links(t, [])))
    assert set(spread(scores, lambda t: links(t, []), share)) - set(scores) <= one_hop
    top = ranked(spread_out, k)
    assert len(top) == len(set(top)) == min(k, len(spread_out))
    assert [spread_out[t] for t in top] == sorted((spread_out[t] for t in top), reverse=True)
