"""Many processes adding turns to many users' conversation memories in one database at once.

``processes`` writer processes (``multiprocessing`` spawn) each open one
:class:`~synapse_retriever.conversation.ConversationMemory` per user on the same database
(a ``postgresql://`` URL, or an SQLite file), wait for each other, then add ``turns``
turns each, spread over the ``users`` in turn, with background consolidation on (so
consolidations of one user race across processes too). Then each user's memory is opened
afresh and checked:

- ``lost``: turns a writer added that the user's memory does not hold; ``duplicated``:
  turns it holds more than once;
- ``out_of_order``: turns whose time is earlier than the turn before them (ids follow
  time within a user);
- ``cross_user``: turns of another user in the memory's turns, or in what ``retrieve``
  returns for a query that every turn of every user matches (``k`` = all of them);
- ``replays``: the consolidations stored, one per covered count (``out_of_order`` also
  counts a replay covering fewer turns than the one before it).

The issue's run is 8 processes x 500 turns over 4 users on PostgreSQL
(``synapse-retriever bench writers URL``); the test suite runs a smaller one.

Examples
--------
>>> writer_text("alice", 3, 41)
'alice|3|41: the deploy note'
>>> owner("alice|3|41: the deploy note")
'alice'
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from synapse_retriever.errors import InvalidValueError

__all__ = ["markdown_table", "owner", "run_writers", "writer_text"]

START_TIMEOUT_S = 300.0
"""How long the writers wait for each other to open their memories."""
QUERY = "deploy note"
"""What every turn says: a retrieval for it may return any turn of the memory's user."""


def writer_text(user: str, process: int, number: int) -> str:
    """The text of turn ``number`` of writer ``process`` for ``user`` (unique, names its
    user first)."""
    return f"{user}|{process}|{number}: the deploy note"


def owner(text: str) -> str:
    """The user a turn's text names (:func:`writer_text`)."""
    return text.split("|", 1)[0]


def _user_of(users: Sequence[str], process: int, number: int) -> str:
    return users[(number + process) % len(users)]


def _write(where: str, users: list[str], turns: int, process: int, start: Any) -> None:
    """One writer process: a memory per user, then ``turns`` turns over the users."""
    from synapse_retriever.conversation.memory import ConversationMemory

    memories = {user: ConversationMemory(where, user=user) for user in users}
    try:
        start.wait(timeout=START_TIMEOUT_S)
        for number in range(turns):
            user = _user_of(users, process, number)
            memories[user].add_turn(writer_text(user, process, number), session=f"w{process}")
    finally:
        for memory in memories.values():
            memory.close()


def run_writers(
    where: str, *, processes: int = 8, turns: int = 500, users: int = 4
) -> dict[str, Any]:
    """Run the writers on ``where`` (an empty database: a fresh schema or file), check
    every user's memory, and report (JSON-ready)."""
    from synapse_retriever.conversation.memory import ConversationMemory

    if min(processes, turns, users) < 1:
        raise InvalidValueError(
            f"processes, turns and users must be at least 1, got {processes}, {turns}, {users}"
        )
    names = [f"user {n}'s" for n in range(users)]  # a quote in every name, on purpose
    ConversationMemory(where, user=names[0]).close()  # the tables, before the race
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(processes + 1)
    workers = [
        context.Process(target=_write, args=(where, names, turns, process, start))
        for process in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        start.wait(timeout=START_TIMEOUT_S)  # a writer that failed to open breaks it
    except threading.BrokenBarrierError:
        for worker in workers:
            worker.terminate()
        raise
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    expected: dict[str, set[str]] = {name: set() for name in names}
    for process in range(processes):
        for number in range(turns):
            user = _user_of(names, process, number)
            expected[user].add(writer_text(user, process, number))
    report: dict[str, Any] = {
        "processes": processes,
        "turns_per_process": turns,
        "users": users,
        "failed_processes": len(failed),
        "seconds": round(seconds, 2),
        "turns_per_second": round(processes * turns / seconds, 1),
        "lost": 0,
        "duplicated": 0,
        "out_of_order": 0,
        "cross_user": 0,
        "replays": 0,
    }
    for name in names:
        with ConversationMemory(where, user=name, background=False) as memory:
            held = memory.turns()
            texts = [turn.text for turn in held]
            found = memory.retrieve(QUERY, k=max(1, len(held)))
            replays = memory.replays()
        report["lost"] += len(expected[name] - set(texts))
        report["duplicated"] += len(texts) - len(set(texts))
        report["out_of_order"] += sum(a.at > b.at for a, b in itertools.pairwise(held))
        report["cross_user"] += sum(owner(text) != name for text in texts)
        report["cross_user"] += sum(owner(result.text) != name for result in found)
        report["replays"] += len(replays)
        covered = [count for count, _ in replays]
        report["out_of_order"] += sum(a >= b for a, b in itertools.pairwise(covered))
    report["load_average_1m"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return report


def markdown_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table.

    Examples
    --------
    >>> report = {"processes": 8, "turns_per_process": 500, "users": 4, "seconds": 38.0,
    ...     "turns_per_second": 105.3, "lost": 0, "duplicated": 0, "out_of_order": 0,
    ...     "cross_user": 0, "replays": 391, "failed_processes": 0}
    >>> print(markdown_table(report).splitlines()[-1])
    | 8 x 500 | 4 | 38.0 | 105.3 | 0 | 0 | 0 | 0 | 391 | 0 |
    """
    return "\n".join(
        [
            "| processes x turns | users | seconds | turns / s | lost | duplicated "
            "| out of order | cross-user | replays | failed processes |",
            "|" + " --- |" * 10,
            f"| {report['processes']} x {report['turns_per_process']} | {report['users']} "
            f"| {report['seconds']} | {report['turns_per_second']} | {report['lost']} "
            f"| {report['duplicated']} | {report['out_of_order']} | {report['cross_user']} "
            f"| {report['replays']} | {report['failed_processes']} |",
        ]
    )
