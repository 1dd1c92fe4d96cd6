"""Hybrid retrieval: associative (vector) and relational (graph) recall blended by mode.

Notes
-----
1. Each list is scored by its own relevance × the turn's importance: a vector result by
   its similarity to the query, a graph result by the activation that reached it.
2. Each list is divided by its best score, so that the weights compare like with like
   (a similarity near 0.8 and an activation near 0.1 would otherwise not mix).
3. ``score = w_vector × vector + w_graph × graph`` (a turn absent from a list gets 0
   there), with the weights of the mode (:data:`~.modes.MODE_WEIGHTS`); a turn in both
   lists has origin ``"both"``. Best first, ties to the newer turn, cut to ``k``.

References
----------
The conversation-memory design (hybrid retrieval with biomimetic weighting).

Examples
--------
>>> blended = blend({1: 0.8, 2: 0.4}, {2: 0.2, 3: 0.1}, (0.3, 0.7), k=3)
>>> [(b.turn_id, round(b.score, 2), b.origin) for b in blended]
[(2, 0.85, 'both'), (3, 0.35, 'graph'), (1, 0.3, 'vector')]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Blended", "Retrieval", "blend"]


@dataclass(frozen=True)
class Blended:
    """One blended result: the turn, its score and where it came from."""

    turn_id: int
    score: float
    origin: str


def blend(
    vector: Mapping[int, float],
    graph: Mapping[int, float],
    weights: tuple[float, float],
    *,
    k: int,
) -> list[Blended]:
    """Merge two scored lists of turns (see the module notes); at most ``k`` results.

    Examples
    --------
    Turn 2: 0.3 × 0.4 / 0.8 + 0.7 × 0.2 / 0.2 = 0.15 + 0.7 = 0.85; turn 3: 0.7 × 0.5;
    turn 1: 0.3 × 1.

    >>> [b.turn_id for b in blend({1: 0.8, 2: 0.4}, {2: 0.2, 3: 0.1}, (0.3, 0.7), k=2)]
    [2, 3]
    >>> blend({}, {}, (0.5, 0.5), k=5)
    []
    """
    top_vector = max(vector.values(), default=0.0)
    top_graph = max(graph.values(), default=0.0)
    w_vector, w_graph = weights
    merged: list[Blended] = []
    for turn_id in vector.keys() | graph.keys():
        score = 0.0
        if turn_id in vector and top_vector > 0:
            score += w_vector * vector[turn_id] / top_vector
        if turn_id in graph and top_graph > 0:
            score += w_graph * graph[turn_id] / top_graph
        origin = (
            "both" if turn_id in vector and turn_id in graph
            else "vector" if turn_id in vector
            else "graph"
        )  # fmt: skip
        merged.append(Blended(turn_id, score, origin))
    merged.sort(key=lambda b: (-b.score, -b.turn_id))
    return merged[:k]


@dataclass(frozen=True)
class Retrieval:
    """A turn :meth:`~synapse_retriever.context.ConversationMemory.retrieve` returns.

    ``origin`` is ``"vector"``, ``"graph"`` or ``"both"``; ``mode`` the mode used;
    ``path`` the typed edges ``(source, type, target)`` that reached the turn (empty for
    a vector-only result), from the seed to the turn.
    """

    turn_id: int
    session: str
    score: float
    origin: str
    mode: str
    path: tuple[tuple[str, str, str], ...]
    text: str
    role: str
    at: float
