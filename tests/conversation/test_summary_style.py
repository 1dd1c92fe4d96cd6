"""Summaries release 0.1.0 stored, redone at open in today's telegram style, on each backend.

0.1.0's extractive SUMMARY dropped every stopword, negations too ("did not succeed; do not
retry it before Monday" became "succeed; retry Monday"): a memory that release filled kept
summaries saying the opposite of their turns. A memory opened by this release redoes them
once (the ``summary_style`` mark), and leaves a model's summaries as they are.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from synapse_retriever.conversation import ConversationMemory
from synapse_retriever.conversation.summarize import SUMMARY_STYLE
from synapse_retriever.persistence.conversation import open_conversation_storage
from synapse_retriever.persistence.postgres import is_postgres_url

NEGATED = "The migration did not succeed; do not retry it before Monday."
OLD = "migration succeed; retry Monday."  # what 0.1.0 stored for NEGATED
TODAY = "migration not succeed; not retry before Monday."
MODEL = "The migration failed, so retry after Monday."  # a model's summary: kept


def _filled(where: str) -> list[int]:
    """A consolidated memory at ``where``; the ids of its first two turns."""
    with ConversationMemory(where, background=False) as memory:
        first = memory.add_turn(f"Long day. {NEGATED}", at=0)
        second = memory.add_turn("Deploys move to Fridays from now on.", "assistant", at=60)
        for i in range(12):
            memory.add_turn(f"Lunch idea {i}: pasta with coffee.", at=120 + 60 * i)
        memory.consolidate()
    return [first, second]


def _as_stored_by_0_1_0(where: str, summaries: dict[int, str], *, mark: bool = False) -> None:
    """Set turns' summaries by hand and, unless ``mark``, remove the style mark, as a file
    0.1.0 wrote has none."""
    rows = [(summary, turn_id) for turn_id, summary in summaries.items()]
    if is_postgres_url(where):
        with psycopg.connect(where) as conn:
            conn.cursor().executemany("UPDATE context_turns SET summary = %s WHERE id = %s", rows)
            if not mark:
                conn.execute("DELETE FROM context_marks WHERE key = 'summary_style'")
        return
    with contextlib.closing(sqlite3.connect(where)) as db:
        db.executemany("UPDATE context_turns SET summary = ? WHERE id = ?", rows)
        if not mark:
            db.execute("DELETE FROM context_marks WHERE key = 'summary_style'")
        db.commit()


def _stored(where: str) -> tuple[dict[int, str | None], int]:
    """The summaries as the backend holds them, and the style mark."""
    storage = open_conversation_storage(where, user=None, busy_timeout_s=5.0)
    try:
        loaded = storage.load()
    finally:
        storage.close()
    return {turn.id: turn.summary for turn in loaded.turns}, loaded.summary_style


def test_a_summary_0_1_0_stored_is_redone_once_and_a_models_is_kept(store_path: str) -> None:
    first, second = _filled(store_path)
    _as_stored_by_0_1_0(store_path, {first: OLD, second: MODEL})
    assert _stored(store_path)[1] == 0  # no mark, as in a file 0.1.0 wrote

    with ConversationMemory(store_path, background=False) as memory:
        in_memory = {turn.id: turn.summary for turn in memory.turns()}
    summaries, style = _stored(store_path)
    assert (in_memory[first], in_memory[second]) == (TODAY, MODEL)
    assert (summaries[first], summaries[second], style) == (TODAY, MODEL, SUMMARY_STYLE)
    assert summaries == in_memory  # what a context condenses with is what is stored

    # once marked, a summary is not redone again: the mark, not the text, decides
    _as_stored_by_0_1_0(store_path, {first: OLD}, mark=True)
    with ConversationMemory(store_path, background=False) as memory:
        assert {turn.id: turn.summary for turn in memory.turns()}[first] == OLD
    assert _stored(store_path)[0][first] == OLD


def test_a_new_memory_is_marked_at_once_so_its_own_summaries_are_never_redone(
    tmp_path: Path,
) -> None:
    # a review's finding: a memory this release made had no mark until a later open found
    # summaries, and its own were then read as 0.1.0's (one became another sentence's)
    path = str(tmp_path / "chat.db")
    with ConversationMemory(path, background=False) as memory:
        memory.add_turn("Deploys move to Fridays.", at=0)
    assert _stored(path)[1] == SUMMARY_STYLE
    first, _ = _filled(path)
    _as_stored_by_0_1_0(path, {first: OLD}, mark=True)  # as if this release had stored it
    with ConversationMemory(path, background=False) as memory:
        assert {turn.id: turn.summary for turn in memory.turns()}[first] == OLD


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_each_user_is_redone_by_their_own_memory(tmp_path: Path, user: str) -> None:
    path = str(tmp_path / "chat.db")
    ids = {}
    for name in ("alice", "bob"):
        with ConversationMemory(path, user=name, background=False) as memory:
            ids[name] = memory.add_turn(f"Long day. {NEGATED}", at=0)
            for i in range(12):
                memory.add_turn(f"Lunch idea {i}: pasta with coffee.", at=60 + 60 * i)
            memory.consolidate()
    _as_stored_by_0_1_0(path, {ids["alice"]: OLD, ids["bob"]: OLD})
    with ConversationMemory(path, user=user, background=False):
        pass
    other = "bob" if user == "alice" else "alice"
    mine = open_conversation_storage(path, user=user, busy_timeout_s=5.0)
    theirs = open_conversation_storage(path, user=other, busy_timeout_s=5.0)
    try:
        assert {t.id: t.summary for t in mine.load().turns}[ids[user]] == TODAY
        assert {t.id: t.summary for t in theirs.load().turns}[ids[other]] == OLD
        assert (mine.load().summary_style, theirs.load().summary_style) == (SUMMARY_STYLE, 0)
    finally:
        mine.close()
        theirs.close()
