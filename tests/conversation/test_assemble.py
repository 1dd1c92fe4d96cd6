"""The assembly's steps (conversation/assemble.py), each with numbers worked by hand.

Costs are (FULL, CHUNKS, SUMMARY) tokens; the thresholds are the defaults, 0.7, 0.4, 0.2.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

from synapse_retriever.conversation import (
    ContextBudgetError,
    ContextConfig,
    ConversationMemory,
    HashingEmbedder,
    Level,
    TurnIndex,
)
from synapse_retriever.conversation.assemble import (
    Candidate,
    TurnsView,
    candidates,
    decide,
    plan_context,
    texts_and_costs,
)
from synapse_retriever.conversation.embed import normalized
from synapse_retriever.conversation.summarize import Condensed


def words(text: str) -> int:
    """A token counter a reader can check: one token per word."""
    return len(text.split())


# -- candidates ---------------------------------------------------------------------------


def test_candidates_walk_the_optional_turns_most_important_first() -> None:
    costs = {i: (100, 30, 10) for i in range(5)}
    importance = [0.9, 0.1, 0.5, 0.3, 0.0]
    # Turn 4 must stay: 100. Turn 1 (0.1 <= 0.2) is out by threshold. Walked: turn 0,
    # 100 + 10 = 110; turn 2, 120 > 115: the last one in; turn 3 (0.3) is out.
    kept = candidates(
        importance, costs.__getitem__, 115, must=[4], groups=[None] * 5, summary_threshold=0.2
    )
    assert kept == [0, 2, 4]
    # At 130 the walk (110, 120, 130) never passes the budget: every turn above 0.2 is in.
    kept = candidates(
        importance, costs.__getitem__, 130, must=[4], groups=[None] * 5, summary_threshold=0.2
    )
    assert kept == [0, 2, 3, 4]


def test_candidates_count_the_groups_of_the_turns_that_must_stay() -> None:
    costs = {0: (50, 20, 5), 1: (100, 30, 10), 2: (100, 30, 10), 3: (40, 40, 40)}
    # Turn 3 must stay (40) and shares group 7 with turn 0 (0.0, kept for its group, at
    # its cheapest 5): 45. Walked: turn 1 (0.6), 45 + 10 = 55 > 50: the last one in;
    # turn 2 (0.5) is out.
    kept = candidates(
        [0.0, 0.6, 0.5, 0.0],
        costs.__getitem__,
        50,
        must=[3],
        groups=[7, None, None, 7],
        summary_threshold=0.2,
    )
    assert kept == [0, 1, 3]


def test_candidates_keep_every_turn_above_the_threshold_when_the_must_stay_turns_overflow() -> None:
    costs = {i: (100, 30, 10) for i in range(4)}
    # Turns 2 and 3 must stay: 200 > 150, so working memory may shrink; nothing is walked
    # out, only turn 1 (0.2, not above the threshold).
    kept = candidates(
        [0.3, 0.2, 0.0, 0.0],
        costs.__getitem__,
        150,
        must=[2, 3],
        groups=[None] * 4,
        summary_threshold=0.2,
    )
    assert kept == [0, 2, 3]


def test_candidates_cost_only_the_turns_they_need() -> None:
    asked: list[int] = []

    def cost(i: int) -> tuple[int, int, int]:
        asked.append(i)
        return (100, 30, 10)

    # Must: turn 3 (100). Walked: turn 0 (0.9): 110 > 105, the last one in; turns 1 and 2
    # are never condensed.
    kept = candidates(
        [0.9, 0.5, 0.3, 0.0], cost, 105, must=[3], groups=[None] * 4, summary_threshold=0.2
    )
    assert kept == [0, 3]
    assert asked == [3, 0]


# -- texts and costs ------------------------------------------------------------------------


def test_texts_and_costs_count_the_condensed_texts_with_their_fixed_tokens() -> None:
    condensed = Condensed("deploys move to Fridays", "deploys Fridays")
    texts, costs = texts_and_costs(
        "deploys move to Fridays, coffee first", condensed, whole=9, fixed=3, token_counter=words
    )
    assert texts == ("deploys move to Fridays, coffee first", *condensed)
    assert costs == (9, 4 + 3, 2 + 3)  # FULL as given; 4 words + 3 fixed; 2 words + 3 fixed


def test_texts_and_costs_without_a_condensation_keep_the_turn_whole() -> None:
    texts, costs = texts_and_costs("an image", None, whole=40, fixed=0, token_counter=words)
    assert texts == ("an image",) * 3
    assert costs == (40, 40, 40)


# -- decide ---------------------------------------------------------------------------------


def three_turns(importance: list[float]) -> list[Candidate]:
    return [
        Candidate(i, x, (f"full {i}", f"chunks {i}", f"summary {i}"), (100, 30, 10))
        for i, x in enumerate(importance)
    ]


@pytest.mark.parametrize(
    ("demotion", "expected"),
    [
        # 100 (FULL, 0.9) + 30 (CHUNKS, 0.5) + 100 (working memory) = 230 > 150.
        # importance: turn 1 to SUMMARY (210), dropped (200); turn 0 to CHUNKS (130).
        ("importance", [(0, Level.CHUNKS, 30), (2, Level.FULL, 100)]),
        # fade: turn 1 to SUMMARY (210), turn 0 to CHUNKS (140); 10 left gives nothing back.
        ("fade", [(0, Level.CHUNKS, 30), (1, Level.SUMMARY, 10), (2, Level.FULL, 100)]),
    ],
)
def test_decide_demotes_until_the_budget_holds(
    demotion: Literal["importance", "fade"], expected: list[tuple[int, Level, int]]
) -> None:
    config = ContextConfig(demotion=demotion)
    decisions = decide(three_turns([0.9, 0.5, 0.0]), 150, working_memory=1, config=config)
    assert [(d.index, d.level, d.tokens) for d in decisions] == expected
    assert decisions[0].text == "chunks 0"


def test_decide_keeps_a_picked_turn_at_its_level_and_leaves_out_fixed_tokens() -> None:
    picked = Candidate(0, 0.1, ("cut",) * 3, (7,) * 3, fixed=2, pinned=True, picked=Level.CHUNKS)
    newest = Candidate(1, 0.0, ("newest",) * 3, (12,) * 3, fixed=2)
    # Both stay: 7 + 12 = 19 <= 20. The picked turn is CHUNKS, 7 - 2 = 5 tokens of text.
    decisions = decide([picked, newest], 20, working_memory=1, config=ContextConfig())
    assert [(d.index, d.level, d.text, d.tokens) for d in decisions] == [
        (0, Level.CHUNKS, "cut", 5),
        (1, Level.FULL, "newest", 10),
    ]


def test_decide_raises_when_working_memory_alone_exceeds_the_budget() -> None:
    with pytest.raises(ContextBudgetError) as error:
        decide(three_turns([0.0, 0.0, 0.0]), 250, working_memory=3, config=ContextConfig())
    assert (error.value.needed, error.value.budget) == (300, 250)


# -- plan_context, end to end ---------------------------------------------------------------

TEXTS = [
    "We moved the production deploy to Fridays after the outage review last week",
    "The vet for the cat is Doctor Ines at the clinic on the corner",
    "Bread is baking and the kitchen smells wonderful this morning",
    "Can you check the build",
]
CONDENSED = {
    text: Condensed(" ".join(text.split()[:6]), " ".join(text.split()[:2])) for text in TEXTS
}


def view(boost: list[float]) -> TurnsView:
    """Four turns whose importance is their boost (every signal's weight is 0 below)."""
    embedder = HashingEmbedder()
    index = TurnIndex(embedder.dim)
    index.add(normalized(embedder.embed(TEXTS), embedder.dim))
    n = len(TEXTS)
    return TurnsView(
        texts=TEXTS,
        index=index,
        surprise=np.zeros(n),
        repeats=np.zeros(n),
        boost=np.array(boost),
        at=np.zeros(n),
        condensed=lambda i: None,
        pinned=[False] * n,
        groups=[None] * n,
        degradable=[True] * n,
        fixed_tokens=[0] * n,
        full_tokens=[words(text) for text in TEXTS],
    )


@pytest.mark.parametrize(
    ("demotion", "expected"),
    [
        # At their thresholds: turn 0 FULL (13), turn 1 CHUNKS (6), turn 2 SUMMARY (2),
        # turn 3 working memory (5): 26 > 20. importance: turn 2 dropped (24), turn 1 to
        # SUMMARY (20).
        ("importance", [(0, "full"), (1, "summary"), (3, "full")]),
        # fade: turn 1 to SUMMARY (22), turn 0 to CHUNKS (15); 5 left bring turn 1 back to
        # CHUNKS (19).
        ("fade", [(0, "chunks"), (1, "chunks"), (2, "summary"), (3, "full")]),
    ],
)
def test_plan_context_levels_by_hand(
    demotion: Literal["importance", "fade"], expected: list[tuple[int, str]]
) -> None:
    config = ContextConfig(
        recency_weight=0,
        surprise_weight=0,
        relevance_weight=0,
        habituation_weight=0,
        working_memory=1,
        working_share=1.0,
        assembly="gradient",
        demotion=demotion,
    )
    decisions = plan_context(
        view([0.9, 0.5, 0.3, 0.0]),
        None,
        20,
        config=config,
        embedder=HashingEmbedder(),
        token_counter=words,
        fallback=CONDENSED.__getitem__,
        now=0.0,
    )
    assert [(d.index, d.level.value) for d in decisions] == expected
    assert sum(d.tokens for d in decisions) <= 20
    assert [d.importance for d in decisions] == [[0.9, 0.5, 0.3, 0.0][d.index] for d in decisions]


def test_the_view_is_built_whole() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        for i in range(3):
            memory.add_turn(f"turn number {i}", at=60 * i)
        built = memory._view(turn_overhead=4, ranking=[2, 0])
    assert (built.pinned, built.groups, built.degradable) == ([False] * 3, [None] * 3, [True] * 3)
    assert (built.fixed_tokens, built.ranking) == ([4] * 3, [2, 0])
    assert len(built.full_tokens) == 3
