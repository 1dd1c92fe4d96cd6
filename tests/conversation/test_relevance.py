"""Tests for conversation/relevance.py and relevance-first assembly (the default)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_retriever.conversation import ContextConfig, ConversationMemory, HashingEmbedder
from synapse_retriever.conversation.history import HistoryMessage, trim_history
from synapse_retriever.conversation.relevance import rrf_order, select_relevant
from synapse_retriever.errors import InvalidValueError


def words(text: str) -> int:
    return len(text.split())


OLD = "The staging database runs on host db-stg-7 behind the north firewall since March."
FILLER = [
    f"Turn {i}: we chatted about lunch plans, the weather and the weekend football games."
    for i in range(30)
]


def _memory(config: ContextConfig) -> ConversationMemory:
    memory = ConversationMemory(
        ":memory:", words, config, embedder=HashingEmbedder(dim=256), background=False
    )
    memory.add_turn(OLD, at=0)
    for i, text in enumerate(FILLER):
        memory.add_turn(text, role="assistant" if i % 2 else "user", at=60 * (i + 1))
    return memory


def test_the_relevant_old_turn_is_kept_whole_where_the_gradient_keeps_a_summary() -> None:
    # 100 words: the last turn (14 words, working memory) + OLD (14 words) whole fit easily.
    query = "which host runs the staging database?"
    with _memory(ContextConfig.gradient()) as memory:
        gradient = {t.turn_id: t for t in memory.assemble(query, 100, at=10_000)}
    with _memory(ContextConfig()) as memory:
        kept = memory.assemble(query, 100, at=10_000)
    first = {t.turn_id: t for t in kept}
    assert first[1].level == "full" and first[1].text == OLD
    assert gradient.get(1) is None or gradient[1].level != "full"
    assert kept[-1].turn_id == len(FILLER) + 1 and kept[-1].level == "full"  # working memory


def test_a_turn_longer_than_the_room_is_chunked_around_the_query() -> None:
    long_turn = " ".join(["Long day at the office with many meetings."] * 6) + " " + OLD
    with ConversationMemory(
        ":memory:",
        words,
        ContextConfig(),
        embedder=HashingEmbedder(dim=256),
        background=False,
    ) as memory:
        memory.add_turn(long_turn, at=0)
        memory.add_turn("ok.", role="assistant", at=60)
        # 40 words: "ok." (1) in working memory; the 62-word turn does not fit whole.
        kept = memory.assemble("which host runs the staging database?", 40, at=120)
    assert [t.level.value for t in kept] == ["chunks", "full"]
    assert "db-stg-7" in kept[0].text and sum(t.tokens for t in kept) <= 40


@settings(max_examples=25, deadline=None)
@given(budget=st.integers(min_value=20, max_value=400), query=st.sampled_from(["host", "lunch"]))
def test_relevance_first_never_exceeds_the_budget(budget: int, query: str) -> None:
    with _memory(ContextConfig()) as memory:
        kept = memory.assemble(query, budget, at=10_000)
    assert sum(t.tokens for t in kept) <= budget
    assert kept[-1].turn_id == len(FILLER) + 1 and kept[-1].level == "full"


def test_the_default_is_relevance_first_and_the_two_presets_keep_the_gradient() -> None:
    assert ContextConfig().assembly == "relevance"
    assert ContextConfig.published().assembly == ContextConfig.gradient().assembly == "gradient"


def test_the_novelty_rank_lifts_the_turn_that_said_something_new() -> None:
    # One turn says where the staging database is; three later turns repeat one remark
    # about it, as long and with the query's words as often. BM25 ties them all and ranks
    # the most recent first, the embedder prefers the remark; novelty (each turn's
    # surprise when added: the repeats have none) ranks the new fact first, and decides
    # once it weighs more than the other two together.
    same = "Staging database: slow today."
    new = "Staging database: host seven."

    def assemble(config: ContextConfig) -> list[str]:
        # a message list (a memory ranks by its retrieval rule instead): 8 words, "ok."
        # (1, working memory), then room for one 4-word turn.
        history = [HistoryMessage("user", text) for text in [new, same, same, same, "ok."]]
        kept = trim_history(history, "where is the staging database?", 8, config=config,
                            token_counter=words, embedder=HashingEmbedder(dim=256))  # fmt: skip
        return [m.text for m in kept]

    assert assemble(ContextConfig(novelty_weight=0)) == [same, "ok."]
    assert assemble(ContextConfig()) == [same, "ok."]  # BM25 weighs 3, novelty 1
    assert assemble(ContextConfig(novelty_weight=8)) == [new, "ok."]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"assembly": "relevant"}, "assembly must be one of"),
        ({"relevance_share": 1.5}, "relevance_share must be a number in [0, 1]"),
        ({"rrf_k": 0}, "rrf_k must be an integer >= 1"),
        ({"lexical_weight": 0}, "lexical_weight must be a finite number > 0"),
    ],
)
def test_bad_relevance_settings_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ContextConfig(**changes)


def test_rrf_weights_favour_the_weighted_list() -> None:
    # list 0 puts 0 first, list 1 puts 1 first; weight 2 on list 0: 2/61 + 1/62 > 2/62 + 1/61
    assert rrf_order([[2.0, 1.0], [1.0, 2.0]], k=60, weights=[2.0, 1.0]) == [0, 1]
    assert rrf_order([[2.0, 1.0], [1.0, 2.0]], k=60) == [1, 0]  # a tie goes to the later turn


def test_select_relevant_passes_over_what_does_not_fit() -> None:
    picks = select_relevant([0, 1, 2], [50, 30, 20], 60, lambda i, left: ("x", 10))
    # 0 fits whole (50 <= 60); 1 (30) does not fit the 10 left, its 10-token chunk does.
    assert [(p.index, p.full, p.tokens) for p in picks] == [(0, True, 50), (1, False, 10)]
