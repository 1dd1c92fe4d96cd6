"""How fast conversation memory assembles a context, and what adding a turn costs.

A generated conversation (:func:`~synapse_retriever.bench.memory.generate_conversation`)
of each size is added turn by turn to a :class:`~synapse_retriever.conversation.ConversationMemory`
with background consolidation (as an application runs it: ``add_turn`` returns while a
worker condenses), timing every ``add_turn``. Once the worker is idle, each of the
conversation's questions is assembled at each budget, timed one by one. Reported:
medians (p50), p90 and the largest, in milliseconds, with the hashing embedder and the
default :class:`~synapse_retriever.conversation.ContextConfig`.

This is a script, not a timed test; the suite runs it on a tiny input.

Examples
--------
>>> report = run_assembly_speed(turns=(60,), budgets=(200,), queries=2)
>>> [(row["turns"], row["budget"], row["queries"]) for row in report["rows"]]
[(60, 200, 2)]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever.bench.memory import generate_conversation
from synapse_retriever.conversation.config import ContextConfig
from synapse_retriever.conversation.memory import ConversationMemory
from synapse_retriever.tokens import approximate_tokens

__all__ = ["markdown_table", "run_assembly_speed"]


def _ms(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return 1000.0 * ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_assembly_speed(
    *,
    turns: Sequence[int] = (1000, 10_000),
    budgets: Sequence[int] = (1000, 4000),
    queries: int = 50,
    seed: int = 1,
    config: ContextConfig | None = None,
    token_counter: Callable[[str], int] = approximate_tokens,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time ``add_turn`` and ``assemble`` on conversations of each size; a JSON-ready report.

    ``queries`` questions per size and budget (the conversation's own, cycled).
    """
    config = config or ContextConfig()
    rows: list[dict[str, Any]] = []
    adds: list[dict[str, Any]] = []
    for size in turns:
        conversation = generate_conversation(
            turns=size, facts=max(1, min(16, size // 60)), sessions=max(1, size // 125), seed=seed
        )
        memory = ConversationMemory(":memory:", token_counter, config, background=True)
        try:
            seconds = []
            for number, turn in enumerate(conversation.turns):
                if progress is not None and number % 500 == 0:
                    progress(f"{size} turns: adding turn {number + 1}")
                start = time.perf_counter()
                memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                seconds.append(time.perf_counter() - start)
            memory.wait_for_consolidation()  # assembling is timed alone
            adds.append(
                {
                    "turns": size,
                    "add_p50_ms": round(_ms(seconds, 0.5), 3),
                    "add_p99_ms": round(_ms(seconds, 0.99), 3),
                }
            )
            questions = [q.question for q in conversation.questions]
            now = conversation.turns[-1].at
            for budget in budgets:
                if progress is not None:
                    progress(f"{size} turns: assembling at {budget} tokens")
                times = []
                for number in range(queries):
                    start = time.perf_counter()
                    memory.assemble(questions[number % len(questions)], budget, at=now)
                    times.append(time.perf_counter() - start)
                rows.append(
                    {
                        "turns": size,
                        "budget": budget,
                        "queries": queries,
                        "p50_ms": round(statistics.median(times) * 1000.0, 2),
                        "p90_ms": round(_ms(times, 0.9), 2),
                        "max_ms": round(max(times) * 1000.0, 2),
                    }
                )
        finally:
            memory.close()
    return {"embedder": "hashing", "rows": rows, "add_turn": adds}


def markdown_table(report: dict[str, Any]) -> str:
    """The report as Markdown: assembling, then adding a turn.

    Examples
    --------
    >>> print(markdown_table({"rows": [{"turns": 10, "budget": 50, "queries": 2, "p50_ms": 1.0,
    ...     "p90_ms": 2.0, "max_ms": 3.0}], "add_turn": [{"turns": 10, "add_p50_ms": 0.5,
    ...     "add_p99_ms": 0.9}]}))
    | turns | budget (tokens) | queries | assemble p50 ms | p90 ms | max ms |
    | --- | --- | --- | --- | --- | --- |
    | 10 | 50 | 2 | 1.0 | 2.0 | 3.0 |
    <BLANKLINE>
    | turns | add_turn p50 ms | p99 ms |
    | --- | --- | --- |
    | 10 | 0.5 | 0.9 |
    """
    lines = [
        "| turns | budget (tokens) | queries | assemble p50 ms | p90 ms | max ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['turns']:,} | {row['budget']:,} | {row['queries']} | {row['p50_ms']} "
            f"| {row['p90_ms']} | {row['max_ms']} |"
        )
    lines += ["", "| turns | add_turn p50 ms | p99 ms |", "| --- | --- | --- |"]
    for add in report["add_turn"]:
        lines.append(f"| {add['turns']:,} | {add['add_p50_ms']} | {add['add_p99_ms']} |")
    return "\n".join(lines)
