"""How fast hybrid retrieval is, what adding a turn costs with the graph, what a turn weighs.

A generated conversation (:func:`~synapse_retriever.bench.memory.generate_conversation`)
of each size is stored in a real SQLite file in one transaction, or with ``postgres`` in a
new schema of a PostgreSQL database beside ``users`` other users' memories
(:mod:`~synapse_retriever.bench.places`; each turn with its vector; its surprise and
repeats are placeholders), as a memory written before the graph existed: the first open
links the graph. The second open is timed (reading every turn, rebuilding
the graph mirror, the vector index and the lexical index). Then ``adds`` more turns (1,000
by default) are added one by one with background consolidation, timing every ``add_turn``
at that size (the turn, its vector, its novelty and repeats from the vector index, its
graph edges, one transaction). Then each of the conversation's questions (cycled) is retrieved with
``retrieve(k=10, mode="auto")``, timed one by one, and so are the two channels a fused
retrieval reads: the vector index's ``top(vector, 100)``
(:class:`~synapse_retriever.conversation.TurnIndex`, approximate from
:data:`~synapse_retriever.conversation.embed.EXACT_BELOW` turns) and the lexical index's 100
best turns (the memory's in-process FTS5 index,
:class:`~synapse_retriever.conversation.lexical.LexicalIndex`).

Reported: p50 and p95 (and add_turn's p99) in milliseconds of wall-clock time, the median
CPU time of the calling thread for ``add_turn`` and ``retrieve`` (what a call costs on a
machine with a core to spare; wall time on a loaded machine adds the wait for one), the
open time in seconds, the graph's size and the file's bytes per turn, for each embedder:
``hashing`` (the default :class:`~synapse_retriever.conversation.HashingEmbedder`, 1,024
dimensions) and ``dense-384`` (:class:`DenseHashingEmbedder`: MiniLM's 384 dimensions and
dense vectors, but not MiniLM, so the model's own time is left out).

This is a script, not a timed test; the suite runs it on a tiny input.

Examples
--------
>>> report = run_retrieval_speed(turns=(60,), adds=5, queries=3, embedders=("dense-384",))
>>> [(row["embedder"], row["turns"], row["queries"]) for row in report["rows"]]
[('dense-384', 60, 3)]
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from synapse_retriever.bench.assembly import _ms
from synapse_retriever.bench.memory import Conversation, generate_conversation
from synapse_retriever.bench.places import embed_turns, place, prefill, stored_bytes
from synapse_retriever.bench.plots import save_figure
from synapse_retriever.conversation.embed import (
    Embedder,
    HashingEmbedder,
    Vectors,
    embedded,
    normalized,
)
from synapse_retriever.conversation.memory import ConversationMemory
from synapse_retriever.errors import InvalidValueError

__all__ = [
    "EMBEDDERS",
    "DenseHashingEmbedder",
    "markdown_table",
    "plot_speed",
    "run_retrieval_speed",
]

DEPTH = 100
"""How many turns each channel is asked for (what a fused retrieval reads)."""


class DenseHashingEmbedder:
    """Hashing vectors projected to ``dim`` dense dimensions by a fixed Gaussian matrix.

    For speed measurements at MiniLM's size (384) without the model's time: the vectors
    are dense like a sentence embedder's and deterministic, but they are not MiniLM's
    and carry only the hashing embedder's word overlap.

    Examples
    --------
    >>> embedder = DenseHashingEmbedder()
    >>> vectors = embedder.embed(["staging database host", "lunch"])
    >>> vectors.shape, embedder.name
    ((2, 384), 'dense-hashing-v4-1024-384')
    >>> round(float(np.linalg.norm(vectors[0])), 3)
    1.0
    """

    def __init__(self, dim: int = 384, *, source_dim: int = 1024) -> None:
        self._hashing = HashingEmbedder(source_dim)
        self._dim = dim
        self._projection = np.random.default_rng(0).standard_normal((source_dim, dim))
        self._projection = self._projection.astype(np.float32)

    @property
    def name(self) -> str:
        """``dense-<the hashing embedder's name>-<dim>``: a new hashing space is a new one."""
        return f"dense-{self._hashing.name}-{self._dim}"

    @property
    def dim(self) -> int:
        """The vector length."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit row per text (a zero row for a text with no content terms)."""
        return normalized(self._hashing.embed(texts) @ self._projection, self._dim)


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "hashing": HashingEmbedder,
    "dense-384": DenseHashingEmbedder,
}
"""The embedders the benchmark knows, by name."""


def run_retrieval_speed(
    *,
    turns: Sequence[int] = (10_000, 100_000),
    adds: int = 1000,
    queries: int = 100,
    k: int = 10,
    seed: int = 1,
    embedders: Sequence[str] = ("hashing", "dense-384"),
    progress: Callable[[str], None] | None = None,
    postgres: str | None = None,
    users: int = 100,
    user_turns: int = 1000,
) -> dict[str, Any]:
    """Time opening, ``add_turn``, ``retrieve`` and each channel at each conversation size
    (``adds`` more turns are added to it), for each of ``embedders`` (names in
    :data:`EMBEDDERS`); a JSON-ready report.

    With ``postgres`` (a URL of a database where the role may create a schema), each size
    runs in a new schema there, dropped afterwards, as user ``"bench"``, beside ``users``
    other users' memories of ``user_turns`` turns each (stored and linked first).
    """
    unknown = [name for name in embedders if name not in EMBEDDERS]
    if unknown:
        raise InvalidValueError(f"embedders must be among {sorted(EMBEDDERS)}, got {unknown}")
    if users < 0 or user_turns < 1:
        raise InvalidValueError(
            f"users must be >= 0 and user_turns >= 1, got {users} and {user_turns}"
        )
    others = (users, user_turns) if postgres is not None else (0, 0)
    rows: list[dict[str, Any]] = []
    for name in embedders:
        for size in turns:
            embedder = EMBEDDERS[name]()
            rows.append(
                _one_size(embedder, name, size, adds, queries, k, seed, progress, postgres, *others)
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"rows": rows, "cpus": os.cpu_count(), "load_average_1m": load}


def _conversation(size: int, adds: int, seed: int) -> Conversation:
    """A generated conversation of ``size + adds`` turns, its facts and sessions in
    proportion."""
    return generate_conversation(
        turns=size + adds,
        facts=max(1, min(16, size // 60)),
        sessions=max(1, (size + adds) // 125),
        seed=seed,
    )


def _one_size(
    embedder: Embedder,
    name: str,
    size: int,
    adds: int,
    queries: int,
    k: int,
    seed: int,
    progress: Callable[[str], None] | None,
    postgres: str | None = None,
    users: int = 0,
    user_turns: int = 0,
) -> dict[str, Any]:
    conversation = _conversation(size, adds, seed)
    questions = [q.question for q in conversation.questions]
    now = conversation.turns[-1].at
    user = None if postgres is None else "bench"
    with place(postgres) as path:
        if users:  # other users' memories, each linked by a first open, as the measured one
            others = _conversation(user_turns, 0, seed + 1).turns
            vectors = embed_turns(embedder, others)
            for number in range(users):
                if progress is not None:
                    progress(f"{name}, {size:,} turns: storing user {number + 1} of {users}")
                prefill(path, f"user {number}", embedder.name, others, vectors)
                ConversationMemory(
                    path, embedder=embedder, background=False, user=f"user {number}"
                ).close()
        if progress is not None:
            progress(f"{name}, {size:,} turns: storing")
        mine = conversation.turns[:size]
        prefill(path, user, embedder.name, mine, embed_turns(embedder, mine))
        # the first open links the graph; the second is timed
        ConversationMemory(path, embedder=embedder, background=False, user=user).close()
        start = time.perf_counter()
        memory = ConversationMemory(path, embedder=embedder, background=True, user=user)
        open_s = time.perf_counter() - start
        try:
            added, added_cpu = [], []
            for number, turn in enumerate(conversation.turns[size:]):
                if progress is not None and number % 100 == 0:
                    progress(f"{name}, {size:,} turns: adding turn {size + number + 1:,}")
                start, cpu = time.perf_counter(), time.thread_time()
                memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                added.append(time.perf_counter() - start)
                added_cpu.append(time.thread_time() - cpu)
            memory.wait_for_consolidation()
            if progress is not None:
                progress(f"{name}, {size:,} turns: retrieving")
            times, times_cpu, dense, lexical = [], [], [], []
            for number in range(queries):
                question = questions[number % len(questions)]
                start, cpu = time.perf_counter(), time.thread_time()
                memory.retrieve(question, k=k, at=now)
                times.append(time.perf_counter() - start)
                times_cpu.append(time.thread_time() - cpu)
                vector = embedded(embedder, [question])[0]
                start = time.perf_counter()
                memory._index.top(vector, DEPTH)
                dense.append(time.perf_counter() - start)
                start = time.perf_counter()
                memory._lexical.top(question, DEPTH)
                lexical.append(time.perf_counter() - start)
            approximate = memory._index.approximate
            graph = memory.graph(at=now)
            nodes, edges = graph.number_of_nodes(), graph.number_of_edges()
        finally:
            memory.close()
        size_bytes = stored_bytes(path)
    return {
        "backend": "sqlite" if postgres is None else "postgresql",
        "users": 1 + users,
        "embedder": name,
        "dim": embedder.dim,
        "turns": size,
        "adds": adds,
        "queries": queries,
        "k": k,
        "add_p50_ms": round(_ms(added, 0.5), 3),
        "add_p95_ms": round(_ms(added, 0.95), 3),
        "add_p99_ms": round(_ms(added, 0.99), 3),
        "add_cpu_p50_ms": round(_ms(added_cpu, 0.5), 3),
        "retrieve_p50_ms": round(_ms(times, 0.5), 2),
        "retrieve_p95_ms": round(_ms(times, 0.95), 2),
        "retrieve_cpu_p50_ms": round(_ms(times_cpu, 0.5), 2),
        "dense_p50_ms": round(_ms(dense, 0.5), 3),
        "dense_p95_ms": round(_ms(dense, 0.95), 3),
        "lexical_p50_ms": round(_ms(lexical, 0.5), 3),
        "lexical_p95_ms": round(_ms(lexical, 0.95), 3),
        "approximate": approximate,
        "open_s": round(open_s, 3),
        "nodes": nodes,
        "edges": edges,
        "bytes_per_turn": round(size_bytes / (size + adds + users * user_turns)),
    }


def markdown_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table (times in ms, the open time in seconds).

    Examples
    --------
    >>> row = {"embedder": "hashing", "dim": 1024, "turns": 10, "open_s": 0.01,
    ...     "add_p50_ms": 0.5, "add_p95_ms": 0.8, "add_p99_ms": 0.9, "add_cpu_p50_ms": 0.4,
    ...     "retrieve_p50_ms": 1.0, "retrieve_p95_ms": 2.0, "retrieve_cpu_p50_ms": 0.9,
    ...     "dense_p50_ms": 0.1, "dense_p95_ms": 0.2, "lexical_p50_ms": 0.3,
    ...     "lexical_p95_ms": 0.4, "approximate": False, "nodes": 14, "edges": 20,
    ...     "bytes_per_turn": 4200}
    >>> print(markdown_table({"rows": [row]}).splitlines()[-1])
    | hashing (1024) | 10 | 0.01 | 0.5 | 0.8 | 0.9 | 0.4 | 1.0 | 2.0 | 0.9 | 0.1 (exact) | 0.2 | 0.3 | 0.4 | 14 | 20 | 4,200 |
    >>> row.update(backend="postgresql", users=101)
    >>> print(markdown_table({"rows": [row]}).splitlines()[-1].split(" | ")[0])
    | hashing (1024), PostgreSQL, 101 users
    """  # noqa: E501
    lines = [
        "| embedder | turns | open s | add_turn p50 | p95 | p99 | CPU p50 | retrieve p50 | p95 "
        "| CPU p50 | dense top-100 p50 | p95 | lexical top-100 p50 | p95 | nodes | edges "
        "| bytes / turn |",
        "|" + " --- |" * 17,
    ]
    for row in report["rows"]:
        kind = "IVF" if row["approximate"] else "exact"
        backend = row.get("backend", "sqlite")  # reports saved before PostgreSQL: SQLite
        shared = "" if backend == "sqlite" else f", PostgreSQL, {row['users']} users"
        lines.append(
            f"| {row['embedder']} ({row['dim']}){shared} | {row['turns']:,} | {row['open_s']} "
            f"| {row['add_p50_ms']} | {row['add_p95_ms']} | {row['add_p99_ms']} "
            f"| {row['add_cpu_p50_ms']} | {row['retrieve_p50_ms']} | {row['retrieve_p95_ms']} "
            f"| {row['retrieve_cpu_p50_ms']} | {row['dense_p50_ms']} ({kind}) "
            f"| {row['dense_p95_ms']} | {row['lexical_p50_ms']} | {row['lexical_p95_ms']} "
            f"| {row['nodes']:,} | {row['edges']:,} | {row['bytes_per_turn']:,} |"
        )
    return "\n".join(lines)


def plot_speed(report: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Draw ``retrieve`` and ``add_turn`` against the conversation's size (log-log): the
    median wall-clock time (solid) and the calling thread's median CPU time (dotted), one
    colour per embedder; in the format the path's suffix names (``.svg``, ``.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True, squeeze=False)
    embedders = list(dict.fromkeys(row["embedder"] for row in report["rows"]))
    for panel, call, key in zip(
        axes[0], ("retrieve(k=10)", "add_turn"), ("retrieve", "add"), strict=True
    ):
        for number, name in enumerate(embedders):
            rows = sorted(
                (row for row in report["rows"] if row["embedder"] == name),
                key=lambda row: row["turns"],
            )
            turns = [row["turns"] for row in rows]
            colour = f"C{number}"
            label = f"{name} ({rows[0]['dim']})"
            wall = [row[f"{key}_p50_ms"] for row in rows]
            cpu = [row[f"{key}_cpu_p50_ms"] for row in rows]
            panel.plot(turns, wall, "o-", color=colour, label=f"{label}, wall p50")
            panel.plot(turns, cpu, "s:", color=colour, label=f"{label}, CPU p50")
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel("turns in the conversation")
        panel.set_title(call)
        panel.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("milliseconds")
    axes[0][1].legend(fontsize=7)
    figure.suptitle("synapse-retriever bench retrieve: time against size", fontsize=10)
    figure.tight_layout()
    save_figure(figure, path)
