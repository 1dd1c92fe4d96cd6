"""Several processes on one conversation-memory file: one consolidation per user at a time,
a consolidation killed mid-write leaves the memory whole, writers of several users lose
nothing and see nothing of each other (multiprocessing, "spawn": fresh interpreters)."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from synapse_retriever.conversation import ContextConfig, ConversationMemory, TfidfThemes
from synapse_retriever.conversation.graph.relations import Relation
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.persistence.conversation import sqlite as backend

QUIET = ContextConfig(consolidation_interval=10_000)  # consolidations only when asked
TURNS = 30
SPAWN = mp.get_context("spawn")


def prefill(path: Path, user: str = "alice") -> None:
    with ConversationMemory(path, config=QUIET, background=False, user=user) as memory:
        for i in range(TURNS):
            memory.add_turn(f"Turn {i}: the deploy of app.py and the friday build {i}.", at=i)


class SlowThemes:
    """TF-IDF themes, after ``delay`` seconds (a consolidation that takes a while)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self._themes = TfidfThemes()

    def themes(self, texts: Sequence[str]) -> list[str]:
        self.calls += 1
        time.sleep(self.delay)
        return self._themes.themes(texts)


def _consolidate_once(path: str, start: Any, results: Any) -> None:
    themes = SlowThemes(0.5)
    memory = ConversationMemory(path, config=QUIET, background=False, user="alice", themes=themes)
    with memory:
        start.wait(60)  # both processes are open: now both ask at once
        results.put((memory.consolidate(), themes.calls))


def test_two_processes_consolidate_a_window_once(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    prefill(path)
    start, results = SPAWN.Barrier(2), SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_consolidate_once, args=(str(path), start, results)) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    # one ran; the other found the lease taken, or (if it came later) the window covered,
    # and did not even start: one replay computed, not two
    assert sorted([results.get(timeout=5), results.get(timeout=5)]) == [(False, 0), (True, 1)]
    db = sqlite3.connect(path)
    try:
        replays = db.execute("SELECT turns FROM context_replays WHERE user = 'alice'").fetchall()
        marks = dict(db.execute("SELECT key, value FROM context_marks WHERE user = 'alice'"))
    finally:
        db.close()
    assert replays == [(TURNS,)]  # one consolidation of the window, not two
    assert marks["consolidated_through"] == str(TURNS)
    assert "consolidation_lease" not in marks  # released


class LinkFirstTwo:
    """A relation extractor: turn 1 RELATES_TO turn 2 (so the consolidation writes edges)."""

    def relations(self, turns: Sequence[tuple[int, str, str]]) -> list[Relation]:
        return [Relation(1, "RELATES_TO", 2)]


def _die_mid_consolidation(path: str, lease_s: float, writing: Any) -> None:
    backend.CONSOLIDATION_LEASE_S = lease_s
    real_link = backend.SQLiteConversationStorage._link

    def link_then_hang(
        self: Any, db: Any, entities: Any, edges: Any, through: int, key: str = "graph_through"
    ) -> None:
        real_link(self, db, entities, edges, through, key)
        if key == "relations_through":  # inside consolidate's transaction, half written
            writing.set()
            time.sleep(600)  # killed here

    backend.SQLiteConversationStorage._link = link_then_hang  # type: ignore[method-assign]
    memory = ConversationMemory(
        path, config=QUIET, background=False, user="alice", relations=LinkFirstTwo()
    )
    memory.consolidate()


def test_a_consolidation_killed_mid_write_leaves_the_memory_whole_and_its_lease_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.db"
    prefill(path)
    lease_s = 4.0
    writing = SPAWN.Event()
    worker = SPAWN.Process(target=_die_mid_consolidation, args=(str(path), lease_s, writing))
    worker.start()
    try:
        assert writing.wait(60), "the worker never reached the consolidation's write"
        taken_at = time.time()
        os.kill(worker.pid or 0, signal.SIGKILL)
    finally:
        worker.join(30)
    assert worker.exitcode == -signal.SIGKILL
    monkeypatch.setattr(backend, "CONSOLIDATION_LEASE_S", lease_s)
    with ConversationMemory(path, config=QUIET, background=False, user="alice") as memory:
        turns = memory.turns()
        assert [t.text for t in turns] == [
            f"Turn {i}: the deploy of app.py and the friday build {i}." for i in range(TURNS)
        ]
        assert all(t.chunks is None and t.boost == 0 for t in turns)  # nothing of it stored
        assert not memory.graph().has_edge("turn:1", "turn:2", key="RELATES_TO")
        assert memory.replays() == []
        assert time.time() - taken_at < lease_s  # still held by the dead process:
        assert not memory.consolidate()  # skipped
        time.sleep(max(0.0, taken_at + lease_s + 0.2 - time.time()))
        assert memory.consolidate()  # expired: taken, and the window consolidated
        assert [covered for covered, _ in memory.replays()] == [TURNS]
    with ConversationMemory(path, config=QUIET, background=False, user="alice") as memory:
        assert memory.add_turn("After the crash.", at=TURNS) == TURNS + 1


def _add_turns(path: str, worker: int, users: int, turns: int, start: Any, report: Any) -> None:
    user = f"user{worker % users}"
    retries = 0
    config = ContextConfig(consolidation_interval=50)  # consolidations race too
    with ConversationMemory(path, config=config, user=user, busy_timeout_s=60) as memory:
        start.wait(120)
        for i in range(turns):
            text = f"{user} w{worker} turn {i}: the deploy of app.py w{worker}x{i}"
            while True:
                try:  # a time earlier than the user's last turn is refused: read the clock again
                    memory.add_turn(text, at=time.time(), session=f"w{worker}")
                    break
                except InvalidValueError as exc:
                    assert "earlier than the previous turn" in str(exc)
                    retries += 1
        memory.wait_for_consolidation(120)
        assert memory.consolidation_error is None, memory.consolidation_error
    report.put((worker, retries))


def run_writers(path: Path, processes: int, users: int, turns: int) -> dict[int, int]:
    """``processes`` processes add ``turns`` turns each, user ``worker % users``; returns each
    worker's retries (its explicit time refused as earlier than another's turn)."""
    ConversationMemory(path).close()
    start, report = SPAWN.Barrier(processes), SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_add_turns, args=(str(path), w, users, turns, start, report))
        for w in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(600)
    assert [worker.exitcode for worker in workers] == [0] * processes
    return dict(report.get(timeout=5) for _ in workers)


def check_users_apart(path: Path, processes: int, users: int, turns: int) -> None:
    """Each user's memory holds exactly its writers' turns, none lost or doubled, ids and
    times in one order, each writer's turns in its order; no result names another user."""
    word = re.compile(r"^(user\d+) w(\d+) turn (\d+):")
    for u in range(users):
        user = f"user{u}"
        writers = [w for w in range(processes) if w % users == u]
        with ConversationMemory(path, user=user, background=False) as memory:
            stored = memory.turns()
            assert len(memory) == len(stored) == len(writers) * turns
            ids, times = [t.id for t in stored], [t.at for t in stored]
            assert ids == sorted(set(ids)) and times == sorted(times)
            seen = [word.match(t.text) for t in stored]
            assert all(m is not None and m.group(1) == user for m in seen)
            for w in writers:
                order = [int(m.group(3)) for m in seen if m is not None and int(m.group(2)) == w]
                assert order == list(range(turns))  # all of them, once, in order
            for other in range(processes):
                query = f"w{other}x{turns // 2} deploy app.py"
                found = memory.retrieve(query, k=20)
                assert all(r.text.startswith(f"{user} ") for r in found)
                assert all(t.text.startswith(f"{user} ") for t in memory.assemble(query, 500))
            assert all(
                d["text"].startswith(f"{user} ")
                for _, d in memory.graph().nodes(data=True)
                if d["kind"] == "turn"
            )
    db = sqlite3.connect(path)
    try:
        total = db.execute("SELECT count(*) FROM context_turns").fetchone()[0]
        leases = db.execute(
            "SELECT count(*) FROM context_marks WHERE key = 'consolidation_lease'"
        ).fetchone()[0]
    finally:
        db.close()
    assert (total, leases) == (processes * turns, 0)


def test_writers_of_several_users_at_once_lose_nothing_and_see_only_their_own(
    tmp_path: Path,
) -> None:
    # the size: about 15 s here (2 cores); two writers per user race for its turns
    processes, users, turns = 8, 4, 500
    path = tmp_path / "team.db"
    run_writers(path, processes, users, turns)
    check_users_apart(path, processes, users, turns)
