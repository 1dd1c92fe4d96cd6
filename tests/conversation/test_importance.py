"""Tests for conversation/importance.py and the importance a memory computes, worked by hand."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from synapse_retriever.conversation import ContextConfig, ConversationMemory
from synapse_retriever.conversation.importance import habituation, importance, recency, surprise

PUBLISHED = ContextConfig.published()


def test_recency_halves_every_half_life() -> None:
    assert recency(0, 20.0) == 1.0
    assert recency(10, 20.0) == pytest.approx(0.707107, abs=1e-6)  # 2^(−10/20) = 1/√2
    assert recency(40, 20.0) == pytest.approx(0.25)  # two half-lives


def test_recency_can_also_decay_with_wall_clock_age() -> None:
    # 20 turns (0.5) and 3.5 days at a 7-day half-life (1/√2): 0.5 × 0.707107
    assert recency(20, 20.0, age_days=3.5, half_life_days=7.0) == pytest.approx(0.353553, 1e-5)


def test_surprise_is_one_minus_the_closest_similarity() -> None:
    assert surprise(0.0) == 1.0
    assert surprise(0.3) == pytest.approx(0.7)
    assert surprise(1.2) == 0.0  # clipped


def test_habituation_halves_novelty_at_each_repeat() -> None:
    assert [habituation(n, 1.0) for n in (0, 1, 2, 3)] == [0.0, 0.5, 0.75, 0.875]
    assert habituation(2, 2.0) == pytest.approx(0.5)  # one half-count


def test_importance_with_the_published_weights_worked_by_hand() -> None:
    # recency 2^(−10/20) = 0.707107, surprise 0.5, relevance 0.25, one repeat (0.5):
    # 0.4 × 0.707107 + 0.3 × 0.5 + 0.2 × 0.25 + 0.1 × (1 − 0.5)
    # = 0.282843 + 0.15 + 0.05 + 0.05 = 0.532843
    signals = (recency(10, 20.0), 0.5, 0.25, habituation(1, 1.0))
    assert importance(*signals) == pytest.approx(0.532843, abs=1e-6)
    # analytical mode (× 1.3): 0.692696; creative (× 0.8): 0.426274
    assert importance(*signals, temperature=1.3) == pytest.approx(0.692696, abs=1e-6)
    assert importance(*signals, temperature=0.8) == pytest.approx(0.426274, abs=1e-6)


def test_importance_adds_the_replay_boost_after_the_temperature_and_clips() -> None:
    # (0.4 × 0 + 0.3 × 0 + 0.2 × 0.5 + 0.1 × 1) × 0.8 + 0.2 = 0.16 + 0.2 = 0.36
    assert importance(0.0, 0.0, 0.5, 0.0, temperature=0.8, boost=0.2) == pytest.approx(0.36)
    assert importance(1.0, 1.0, 1.0, 0.0, boost=0.2) == 1.0
    assert importance(0.0, 0.0, 0.0, 1.0) == 0.0


def test_importance_is_element_wise_over_arrays() -> None:
    values = importance(np.array([1.0, 0.0]), np.array([1.0, 0.0]), 0.0, 0.0)
    assert isinstance(values, np.ndarray)
    assert values.tolist() == pytest.approx([0.8, 0.1])  # 0.4 + 0.3 + 0.1; 0.1


class TableEmbedder:
    """Fixed unit vectors per text: similarities known in advance."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = table

    @property
    def name(self) -> str:
        return "table"

    @property
    def dim(self) -> int:
        return 3

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.table[text] for text in texts], dtype=np.float32)


def test_a_memory_computes_the_published_importance_worked_by_hand() -> None:
    table = {
        "alpha": (1, 0, 0),
        "beta": (0, 1, 0),
        "alpha again": (1, 0, 0),
        "about alpha?": (1, 0, 0),
    }
    config = PUBLISHED.replace(working_memory=0)
    memory = ConversationMemory(":memory:", config=config, embedder=TableEmbedder(table))
    for text in ("alpha", "beta", "alpha again"):
        memory.add_turn(text, at=0)
    assembled = memory.assemble("about alpha?", 1000, at=0)
    # ages 2, 1, 0 at a 20-turn half-life: recency 0.9330330, 0.9659363, 1
    # alpha:       0.4 × 0.9330330 + 0.3 × 1 (first turn) + 0.2 × 1 + 0.1 × 1 = 0.9732132 FULL
    # beta:        0.4 × 0.9659363 + 0.3 × 1 (orthogonal)  + 0.2 × 0 + 0.1 × 1 = 0.7863745 FULL
    # alpha again: 0.4 × 1 + 0.3 × 0 (a repeat) + 0.2 × 1 + 0.1 × (1 − 0.5)   = 0.65 CHUNKS
    expected = [0.9732132, 0.7863745, 0.65]
    assert [t.importance for t in assembled] == pytest.approx(expected, abs=1e-7)
    assert [t.level for t in assembled] == ["full", "full", "full"]  # one sentence: CHUNKS = FULL
    records = memory.turns()
    assert [(r.surprise, r.repeats) for r in records] == [(1.0, 0), (1.0, 0), (0.0, 1)]
    # the same in analytical mode (× 1.3), clipped: 1.0, 1.0, 0.845
    analytical = memory.assemble("about alpha?", 1000, at=0, mode="analytical")
    assert [round(t.importance, 6) for t in analytical] == [1.0, 1.0, 0.845]
    memory.close()


def test_relative_relevance_gives_the_best_match_relevance_one() -> None:
    # query (1, 0, 1)/√2: similarity 0.707107 to "alpha", 0 to "beta"; relative: 1 and 0.
    table = {"alpha": (1, 0, 0), "beta": (0, 1, 0), "q": (1, 0, 1)}
    absolute = PUBLISHED.replace(working_memory=0)
    relative = absolute.replace(relevance="relative")
    scores = {}
    for name, config in (("absolute", absolute), ("relative", relative)):
        memory = ConversationMemory(":memory:", config=config, embedder=TableEmbedder(table))
        memory.add_turn("alpha", at=0)
        memory.add_turn("beta", at=0)
        scores[name] = [round(t.importance, 6) for t in memory.assemble("q", 100, at=0)]
        memory.close()
    # alpha, age 1: 0.4 × 0.9659363 + 0.3 + 0.1 = 0.7863745, plus 0.2 × relevance
    assert scores["absolute"][0] == pytest.approx(0.7863745 + 0.2 * 0.7071068, abs=1e-6)
    assert scores["relative"][0] == pytest.approx(0.9863745, abs=1e-6)
    assert scores["absolute"][1] == scores["relative"][1] == 0.8  # beta: 0.4 + 0.3 + 0 + 0.1
