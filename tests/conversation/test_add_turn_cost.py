"""What add_turn does grows with the turn, not with the conversation."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from synapse_retriever.conversation import ContextConfig, ConversationMemory
from synapse_retriever.conversation.assemble import importances
from synapse_retriever.conversation.embed import normalized


def test_turn_times_grow_in_place_not_by_a_copy_per_turn() -> None:
    with ConversationMemory(":memory:", background=False) as memory:
        for at in range(20):
            memory.add_turn(f"turn number {at}", at=at)
        buffer = memory._times
        memory.add_turn("one more", at=20)
        assert memory._times is buffer  # room was left: no copy of every earlier time
        assert memory._times[:21].tolist() == [float(at) for at in range(21)]


@pytest.mark.parametrize("relevance", ["relative", "absolute"])
def test_consolidation_scores_its_window_as_over_every_turn(
    relevance: Literal["absolute", "relative"],
) -> None:
    config = ContextConfig(relevance=relevance)
    topics = ["deploy fridays", "database host", "lunch plans", "release notes"]
    with ConversationMemory(":memory:", config=config, background=False) as memory:
        for at in range(60):
            memory.add_turn(f"{topics[at % 4]} item{at % 7}", at=at * 60)
        low, high = config.consolidation_ages
        first = len(memory) - 1 - high
        query = normalized(memory.embedder.embed([memory._turns[-1].text]), memory.embedder.dim)
        now = memory._turns[-1].at
        every, _ = importances(memory._view(), query[0], config, now=now)
        tail, _ = importances(memory._view(first), query[0], config, now=now)
        assert np.allclose(tail[: len(memory) - low - first], every[first : len(memory) - low])


def test_a_memory_file_commits_without_an_fsync_per_turn(tmp_path: Path) -> None:
    with ConversationMemory(tmp_path / "chat.db") as memory:
        memory.add_turn("hello", at=0)
        level = memory._storage._db.execute("PRAGMA synchronous").fetchone()[0]
    assert level == 1  # NORMAL, as docs/guarantees.md says (the default FULL is 2)
    with sqlite3.connect(tmp_path / "chat.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
