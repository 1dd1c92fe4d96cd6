"""How fast hybrid retrieval is, what adding a turn costs with the graph, what a turn weighs.

A generated conversation (:func:`~synapse_retriever.bench.memory.generate_conversation`)
of each size is added turn by turn to a :class:`~synapse_retriever.context.ConversationMemory`
in a real SQLite file, with background consolidation, timing every ``add_turn`` (the
turn, its vector, its novelty and repeats from the vector index, its graph edges from the
deterministic extractor, one transaction). Then each of the conversation's questions
(cycled) is retrieved with ``retrieve(k=10, mode="auto")``, timed one by one, and so are
the two sublinear channels a retrieval reads: the vector index's ``top(vector, 100)``
(:class:`~synapse_retriever.context.TurnIndex`, approximate from
:data:`~synapse_retriever.context.embed.EXACT_BELOW` turns) and the lexical index's 100
best turns (SQLite FTS5). Last, the memory is closed and opened again, timed (reading
every turn, rebuilding the graph mirror and the vector index).

Reported: p50 and p95 (and add_turn's p99) in milliseconds, the open time in seconds,
the graph's size and the file's bytes per turn, for each embedder: ``hashing`` (the
default :class:`~synapse_retriever.context.HashingEmbedder`, 1,024 dimensions) and
``dense-384`` (:class:`DenseHashingEmbedder`: MiniLM's 384 dimensions and dense vectors,
but not MiniLM, so the model's own time is left out).

This is a script, not a timed test; the suite runs it on a tiny input.

Examples
--------
>>> report = run_retrieval_speed(turns=(60,), queries=3, embedders=("dense-384",))
>>> [(row["embedder"], row["turns"], row["queries"]) for row in report["rows"]]
[('dense-384', 60, 3)]
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from synapse_retriever.bench.assembly import _ms
from synapse_retriever.bench.memory import generate_conversation
from synapse_retriever.context.embed import Embedder, HashingEmbedder, Vectors, normalized
from synapse_retriever.context.memory import ConversationMemory
from synapse_retriever.errors import InvalidValueError

__all__ = ["EMBEDDERS", "DenseHashingEmbedder", "markdown_table", "run_retrieval_speed"]

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
    ((2, 384), 'dense-hashing-v1-384')
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
        """``dense-hashing-v1-<dim>``."""
        return f"dense-hashing-v1-{self._dim}"

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
    queries: int = 100,
    k: int = 10,
    seed: int = 1,
    embedders: Sequence[str] = ("hashing", "dense-384"),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time ``add_turn``, ``retrieve``, each channel and opening, at each conversation
    size, for each of ``embedders`` (names in :data:`EMBEDDERS`); a JSON-ready report."""
    unknown = [name for name in embedders if name not in EMBEDDERS]
    if unknown:
        raise InvalidValueError(f"embedders must be among {sorted(EMBEDDERS)}, got {unknown}")
    rows: list[dict[str, Any]] = []
    for name in embedders:
        for size in turns:
            rows.append(_one_size(EMBEDDERS[name](), name, size, queries, k, seed, progress))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"rows": rows, "cpus": os.cpu_count(), "load_average_1m": load}


def _one_size(
    embedder: Embedder,
    name: str,
    size: int,
    queries: int,
    k: int,
    seed: int,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    conversation = generate_conversation(
        turns=size, facts=max(1, min(16, size // 60)), sessions=max(1, size // 125), seed=seed
    )
    questions = [q.question for q in conversation.questions]
    now = conversation.turns[-1].at
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "memory.db")
        memory = ConversationMemory(path, embedder=embedder, background=True)
        try:
            adds = []
            for number, turn in enumerate(conversation.turns):
                if progress is not None and number % 1000 == 0:
                    progress(f"{name}, {size:,} turns: adding turn {number + 1:,}")
                start = time.perf_counter()
                memory.add_turn(turn.text, role=turn.role, at=turn.at, session=turn.session)
                adds.append(time.perf_counter() - start)
            memory.wait_for_consolidation()
            if progress is not None:
                progress(f"{name}, {size:,} turns: retrieving")
            times, dense, lexical = [], [], []
            for number in range(queries):
                question = questions[number % len(questions)]
                start = time.perf_counter()
                memory.retrieve(question, k=k, at=now)
                times.append(time.perf_counter() - start)
                vector = normalized(embedder.embed([question]), embedder.dim)[0]
                start = time.perf_counter()
                memory._index.top(vector, DEPTH)
                dense.append(time.perf_counter() - start)
                start = time.perf_counter()
                memory._storage.lexical(question, DEPTH)
                lexical.append(time.perf_counter() - start)
            approximate = memory._index.approximate
            graph = memory.graph(at=now)
            nodes, edges = graph.number_of_nodes(), graph.number_of_edges()
        finally:
            memory.close()
        if progress is not None:
            progress(f"{name}, {size:,} turns: opening")
        start = time.perf_counter()
        ConversationMemory(path, embedder=embedder).close()
        open_s = time.perf_counter() - start
        size_bytes = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    return {
        "embedder": name,
        "dim": embedder.dim,
        "turns": size,
        "queries": queries,
        "k": k,
        "add_p50_ms": round(_ms(adds, 0.5), 3),
        "add_p95_ms": round(_ms(adds, 0.95), 3),
        "add_p99_ms": round(_ms(adds, 0.99), 3),
        "retrieve_p50_ms": round(_ms(times, 0.5), 2),
        "retrieve_p95_ms": round(_ms(times, 0.95), 2),
        "dense_p50_ms": round(_ms(dense, 0.5), 3),
        "dense_p95_ms": round(_ms(dense, 0.95), 3),
        "lexical_p50_ms": round(_ms(lexical, 0.5), 3),
        "lexical_p95_ms": round(_ms(lexical, 0.95), 3),
        "approximate": approximate,
        "open_s": round(open_s, 3),
        "nodes": nodes,
        "edges": edges,
        "bytes_per_turn": round(size_bytes / size),
    }


def markdown_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table (times in ms, the open time in seconds).

    Examples
    --------
    >>> print(markdown_table({"rows": [{"embedder": "hashing", "dim": 1024, "turns": 10,
    ...     "add_p50_ms": 0.5, "add_p95_ms": 0.8, "add_p99_ms": 0.9, "retrieve_p50_ms": 1.0,
    ...     "retrieve_p95_ms": 2.0, "dense_p50_ms": 0.1, "dense_p95_ms": 0.2,
    ...     "lexical_p50_ms": 0.3, "lexical_p95_ms": 0.4, "approximate": False, "open_s": 0.01,
    ...     "nodes": 14, "edges": 20, "bytes_per_turn": 4200}]}))  # doctest: +NORMALIZE_WHITESPACE
    | embedder | turns | add_turn p50 | p95 | p99 | retrieve p50 | p95 | dense top-100 p50 \
| p95 | lexical top-100 p50 | p95 | open s | nodes | edges | bytes / turn |
    | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
    | hashing (1024) | 10 | 0.5 | 0.8 | 0.9 | 1.0 | 2.0 | 0.1 (exact) | 0.2 | 0.3 | 0.4 \
| 0.01 | 14 | 20 | 4,200 |
    """
    lines = [
        "| embedder | turns | add_turn p50 | p95 | p99 | retrieve p50 | p95 | dense top-100 p50 "
        "| p95 | lexical top-100 p50 | p95 | open s | nodes | edges | bytes / turn |",
        "|" + " --- |" * 15,
    ]
    for row in report["rows"]:
        kind = "IVF" if row["approximate"] else "exact"
        lines.append(
            f"| {row['embedder']} ({row['dim']}) | {row['turns']:,} | {row['add_p50_ms']} "
            f"| {row['add_p95_ms']} | {row['add_p99_ms']} | {row['retrieve_p50_ms']} "
            f"| {row['retrieve_p95_ms']} | {row['dense_p50_ms']} ({kind}) | {row['dense_p95_ms']} "
            f"| {row['lexical_p50_ms']} | {row['lexical_p95_ms']} | {row['open_s']} "
            f"| {row['nodes']:,} | {row['edges']:,} | {row['bytes_per_turn']:,} |"
        )
    return "\n".join(lines)
