"""Retrieval on real conversations: does ``retrieve`` find what a question needs, against
what a user could write in five lines?

The replay of :mod:`~synapse_retriever.bench.realmem` (every turn before a query in
memory, fed in order at its own time), scored on
:meth:`~synapse_retriever.conversation.ConversationMemory.retrieve` instead of an assembled
context, for RealMem or LoCoMo (:mod:`~synapse_retriever.bench.locomo`): for each query
and each ``k`` (5, 10, 20), the share of its gold sessions one of the ``k`` retrieved
turns holds with at least half of the session's key words (RealMem), or the share of its
evidence turns among them (LoCoMo) (:func:`~synapse_retriever.bench.realmem.score_query`).

Rows, all with one embedder: ``retrieve(mode="auto")``, each fixed mode, ``no graph``
(weights ``(1, 0)``: the lexical and dense channels fused, the graph left out) and
``graph only`` (``(0, 1)``); then the plain methods a user would otherwise pick:
``BM25 top-k`` (SQLite FTS5's ``bm25()`` with the memory's own tokenizer, in a
:class:`~synapse_retriever.conversation.lexical.LexicalIndex` of its own), ``dense top-k``
(the embedder's cosine) and ``fusion top-k``, their reciprocal-rank fusion (k = 60,
each list cut at 100, as LangChain's ``EnsembleRetriever`` fuses), the baseline of the
paired intervals.

Examples
--------
>>> ROWS[0], BASELINE
('auto', 'fusion top-k')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from synapse_retriever.bench.plain import FUSED_DEPTH, plain_rankings
from synapse_retriever.bench.realmem import (
    Item,
    Persona,
    _CachedEmbedder,
    _key,
    _query_entry,
    _tables,
    feed,
    query_time,
    score_query,
)
from synapse_retriever.conversation.embed import Embedder, HashingEmbedder
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.memory import ConversationMemory

__all__ = ["BASELINE", "KS", "ROWS", "run_realmem_retrieval"]

KS = (5, 10, 20)
"""How many turns each row retrieves."""

BASELINE = "fusion top-k"
"""The strongest plain method: the row every other is compared with."""

ROWS = (
    "auto",
    "analytical",
    "creative",
    "conversational",
    "no graph",
    "graph only",
    "BM25 top-k",
    "dense top-k",
    BASELINE,
)
"""The rows: a mode (``auto`` detects it per query), one side of the blend alone, and the
plain methods."""

_SETTINGS: dict[str, tuple[str, tuple[float, float] | None]] = {
    "auto": ("auto", None),
    "analytical": ("analytical", None),
    "creative": ("creative", None),
    "conversational": ("conversational", None),
    "no graph": ("auto", (1.0, 0.0)),
    "graph only": ("auto", (0.0, 1.0)),
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
    similar = _CachedEmbedder(embedder if embedder is not None else HashingEmbedder())
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    started = time.perf_counter()
    modes: dict[str, int] = {}
    depth = max(max(ks), FUSED_DEPTH)
    for persona in personas:
        begun = time.perf_counter()
        queries = persona.queries[:max_queries] if max_queries is not None else persona.queries
        vectors = similar.embed([t.text for t in persona.turns[: max(q.index for q in queries)]])
        memory = ConversationMemory(":memory:", embedder=similar, background=False)
        lexical = LexicalIndex()
        try:
            added = 0
            for number, query in enumerate(queries):
                if progress is not None:
                    progress(f"{persona.name}: query {number + 1}/{len(queries)}")
                feed([memory], lexical, persona.turns[added : query.index])
                added = max(added, query.index)
                at = query_time(persona, query)
                entry = _query_entry(persona, query, added)
                similarity = vectors[:added] @ similar.embed([query.text])[0]
                plain = plain_rankings(
                    [row for row, _ in lexical.top(query.text, depth)], similarity, depth
                )
                found: dict[str, list[int]] = {
                    "BM25 top-k": plain["lexical"],
                    "dense top-k": plain["dense"],
                    BASELINE: plain["fusion"],
                }
                for row, (mode, weights) in _SETTINGS.items():
                    got = memory.retrieve(query.text, k=max(ks), mode=mode, at=at, weights=weights)
                    if row == "auto" and got:
                        modes[got[0].mode] = modes.get(got[0].mode, 0) + 1
                    found[row] = [r.turn_id - 1 for r in got]  # ids count from 1, in order
                for row in ROWS:
                    entry["scores"][row] = {}
                    for k in ks:
                        items = [
                            Item(persona.turns[i].session, "full", persona.turns[i].text, 0,
                                 _key(persona, i))
                            for i in found[row][:k]
                        ]  # fmt: skip
                        recall, share = score_query(items, query)
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
        "baseline": BASELINE,
        "embedder": similar.name,
        "notes": [*notes, f"embedder {similar.name}; modes detected by auto: {detected}."],
        "personas": summary,
        "seconds": round(time.perf_counter() - started, 1),
        "queries": results,
        "tables": _tables(results, rows, BASELINE, list(ks)),
    }
