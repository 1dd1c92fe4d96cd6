"""RealMem for hybrid retrieval: does the temporal graph find the sessions a question needs?

The replay of :mod:`~synapse_retriever.bench.realmem` (every turn before a query in
memory, fed in order at its own time), scored on
:meth:`~synapse_retriever.context.ConversationMemory.retrieve` instead of an assembled
context: for each query and each ``k`` (5, 10, 20), the share of its gold sessions that
one of the ``k`` retrieved turns holds with at least half of the session's key words
(:func:`~synapse_retriever.bench.realmem.score_context`, every turn whole).

Rows: ``retrieve(mode="auto")``, each fixed mode, the graph alone (weights ``(0, 1)``)
and vector recall alone (``(1, 0)``, the baseline of the paired intervals), all with
one embedder.

Examples
--------
>>> ROWS[0], ROWS[-1]
('auto', 'vector only')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever.bench.realmem import (
    Item,
    Persona,
    _query_entry,
    _tables,
    score_context,
)
from synapse_retriever.context.embed import Embedder, HashingEmbedder
from synapse_retriever.context.memory import ConversationMemory

__all__ = ["KS", "ROWS", "run_realmem_retrieval"]

KS = (5, 10, 20)
"""How many turns each row retrieves."""

ROWS = ("auto", "analytical", "creative", "conversational", "graph only", "vector only")
"""The rows: a mode (``auto`` detects it per query) or one side of the blend alone."""

_SETTINGS: dict[str, tuple[str, tuple[float, float] | None]] = {
    "auto": ("auto", None),
    "analytical": ("analytical", None),
    "creative": ("creative", None),
    "conversational": ("conversational", None),
    "graph only": ("auto", (0.0, 1.0)),
    "vector only": ("auto", (1.0, 0.0)),
}


def run_realmem_retrieval(
    personas: Sequence[Persona],
    ks: Sequence[int] = KS,
    *,
    embedder: Embedder | None = None,
    max_queries: int | None = None,
    notes: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Replay every persona and score each row at each ``k``; a JSON-ready report.

    The report has the shape of :func:`~synapse_retriever.bench.realmem.run_realmem`'s
    (``budgets`` holds the ``k`` values, ``unit`` is ``"k"``), so
    :func:`~synapse_retriever.bench.realmem.markdown_tables` prints it.
    """
    similar = embedder if embedder is not None else HashingEmbedder()
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    started = time.perf_counter()
    modes: dict[str, int] = {}
    for persona in personas:
        begun = time.perf_counter()
        queries = persona.queries[:max_queries] if max_queries is not None else persona.queries
        memory = ConversationMemory(":memory:", embedder=similar, background=False)
        try:
            added = 0
            for number, query in enumerate(queries):
                if progress is not None:
                    progress(f"{persona.name}: query {number + 1}/{len(queries)}")
                for turn in persona.turns[added : query.index]:
                    memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                added = max(added, query.index)
                at = persona.turns[query.index].at
                entry = _query_entry(persona, query, added)
                for row in ROWS:
                    mode, weights = _SETTINGS[row]
                    found = memory.retrieve(
                        query.text, k=max(ks), mode=mode, at=at, weights=weights
                    )
                    if row == "auto" and found:
                        modes[found[0].mode] = modes.get(found[0].mode, 0) + 1
                    entry["scores"][row] = {}
                    for k in ks:
                        items = [Item(r.session, "full", r.text, 0) for r in found[:k]]
                        recall, share = score_context(items, query.gold)
                        entry["scores"][row][str(k)] = {
                            "recall": recall,
                            "words": share,
                            "tokens": len(items),
                            "levels": {"full": len(items), "chunks": 0, "summary": 0},
                        }
                results.append(entry)
        finally:
            memory.close()
        summary.append(
            {
                "name": persona.name,
                "turns": len(persona.turns),
                "tokens": 0,
                "queries": len(queries),
                "seconds": round(time.perf_counter() - begun, 1),
            }
        )
    rows = list(ROWS)
    detected = ", ".join(f"{mode} {count}" for mode, count in sorted(modes.items()))
    return {
        "budgets": list(ks),
        "unit": "k",
        "rows": rows,
        "baseline": "vector only",
        "embedder": similar.name,
        "notes": [*notes, f"embedder {similar.name}; modes detected by auto: {detected}."],
        "personas": summary,
        "seconds": round(time.perf_counter() - started, 1),
        "queries": results,
        "tables": _tables(results, rows, "vector only", list(ks)),
    }
