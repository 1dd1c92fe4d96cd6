"""How fast hybrid retrieval is, what adding a turn costs with the graph, what a turn weighs.

A generated conversation (:func:`~synapse_retriever.bench.memory.generate_conversation`)
of each size is added turn by turn to a :class:`~synapse_retriever.context.ConversationMemory`
in a real SQLite file, with background consolidation, timing every ``add_turn`` (the
turn, its vector and its graph edges from the deterministic extractor, one transaction).
Then each of the conversation's questions (cycled) is retrieved with
``retrieve(k=10, mode="auto")``, timed one by one. Reported: p50 and p95 in
milliseconds, the graph's size, and the file's bytes per turn, with the hashing embedder.

This is a script, not a timed test; the suite runs it on a tiny input.

Examples
--------
>>> report = run_retrieval_speed(turns=(60,), queries=3)
>>> [(row["turns"], row["queries"]) for row in report["rows"]]
[(60, 3)]
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever.bench.assembly import _ms
from synapse_retriever.bench.memory import generate_conversation
from synapse_retriever.context.memory import ConversationMemory

__all__ = ["markdown_table", "run_retrieval_speed"]


def run_retrieval_speed(
    *,
    turns: Sequence[int] = (10_000, 100_000),
    queries: int = 100,
    k: int = 10,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time ``add_turn`` and ``retrieve`` at each conversation size; a JSON-ready report."""
    rows: list[dict[str, Any]] = []
    for size in turns:
        conversation = generate_conversation(
            turns=size, facts=max(1, min(16, size // 60)), sessions=max(1, size // 125), seed=seed
        )
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "memory.db")
            memory = ConversationMemory(path, background=True)
            try:
                adds = []
                for number, turn in enumerate(conversation.turns):
                    if progress is not None and number % 1000 == 0:
                        progress(f"{size:,} turns: adding turn {number + 1:,}")
                    start = time.perf_counter()
                    memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                    adds.append(time.perf_counter() - start)
                memory.wait_for_consolidation()
                questions = [q.question for q in conversation.questions]
                now = conversation.turns[-1].at
                times = []
                if progress is not None:
                    progress(f"{size:,} turns: retrieving")
                for number in range(queries):
                    start = time.perf_counter()
                    memory.retrieve(questions[number % len(questions)], k=k, at=now)
                    times.append(time.perf_counter() - start)
                graph = memory.graph(at=now)
                nodes, edges = graph.number_of_nodes(), graph.number_of_edges()
            finally:
                memory.close()
            size_bytes = sum(
                os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
            )
        rows.append(
            {
                "turns": size,
                "queries": queries,
                "k": k,
                "add_p50_ms": round(_ms(adds, 0.5), 3),
                "add_p99_ms": round(_ms(adds, 0.99), 3),
                "retrieve_p50_ms": round(_ms(times, 0.5), 2),
                "retrieve_p95_ms": round(_ms(times, 0.95), 2),
                "nodes": nodes,
                "edges": edges,
                "bytes_per_turn": round(size_bytes / size),
            }
        )
    return {"embedder": "hashing", "rows": rows}


def markdown_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table.

    Examples
    --------
    >>> print(markdown_table({"rows": [{"turns": 10, "queries": 2, "k": 10, "add_p50_ms": 0.5,
    ...     "add_p99_ms": 0.9, "retrieve_p50_ms": 1.0, "retrieve_p95_ms": 2.0, "nodes": 14,
    ...     "edges": 20, "bytes_per_turn": 4200}]}))
    | turns | add_turn p50 ms | p99 ms | retrieve p50 ms | p95 ms | nodes | edges | bytes / turn |
    | --- | --- | --- | --- | --- | --- | --- | --- |
    | 10 | 0.5 | 0.9 | 1.0 | 2.0 | 14 | 20 | 4,200 |
    """
    lines = [
        "| turns | add_turn p50 ms | p99 ms | retrieve p50 ms | p95 ms | nodes | edges "
        "| bytes / turn |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['turns']:,} | {row['add_p50_ms']} | {row['add_p99_ms']} "
            f"| {row['retrieve_p50_ms']} | {row['retrieve_p95_ms']} | {row['nodes']:,} "
            f"| {row['edges']:,} | {row['bytes_per_turn']:,} |"
        )
    return "\n".join(lines)
