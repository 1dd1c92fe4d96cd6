"""Hybrid retrieval: the lexical and dense channels fused, the temporal graph on top.

Notes
-----
1. **Channels.** The lexical channel ranks turns by BM25 (:mod:`~..lexical`, SQLite
   FTS5); the dense channel by the embedder's cosine to the query. Each gives its best
   ``depth`` turns (100, or 2k if larger).
2. **Fusion** (:func:`fuse`): weighted reciprocal-rank fusion,
   ``fused(i) = w_lex / (k + rank_lex(i)) + w_dense / (k + rank_dense(i))``, ranks from 1,
   a channel adding nothing for a turn it did not rank; k = 60 and ``w_lex`` = 1,
   ``w_dense`` = 0.5 by default (``ContextConfig.rrf_k``, ``retrieval_weights``): on
   both conversation sets BM25 alone beats dense top-k by far, and equal weights fuse
   below BM25 alone.
3. **Graph** (:func:`spread`): a turn's time neighbours in the temporal graph (the turns
   FOLLOWED_BY links to it, before and after, in its session, and typed relations
   between turns) are its context: the question's evidence is often the answer after
   the turn that matched it, or the question before. Each turn gains ``share`` × the
   best fused score among its neighbours, ``score(i) = fused(i) + share ×
   max_j fused(j)``. ``share`` is the mode's graph weight
   (:data:`~.modes.MODE_WEIGHTS`) × ``ContextConfig.neighbour_share``, so an analytical
   question leans on the graph most. A turn is reached by the graph alone when no
   channel ranked it.
4. Best first, ties to the newer turn, cut to ``k``.

References
----------
Cormack, Clarke and Büttcher (2009), Reciprocal rank fusion outperforms Condorcet and
individual rank learning methods, SIGIR. The conversation-memory design (hybrid
retrieval with biomimetic weighting; processing modes).

Examples
--------
Turn 3 is first by BM25 and third by the embedder, turn 1 first by the embedder only:

>>> fused = fuse([[3, 2], [1, 2, 3]], [1.0, 0.5], k=60)
>>> sorted(fused, key=fused.get, reverse=True)
[3, 2, 1]
>>> spread({1: 0.2, 2: 0.1}, {1: [2], 2: [1, 3]}, 0.5)  # 3 only by its neighbour 2
{1: 0.25, 2: 0.2, 3: 0.05}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Retrieval", "fuse", "lift", "ranked", "spread"]


def fuse(rankings: Sequence[Sequence[int]], weights: Sequence[float], *, k: int) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of ranked lists of turns (best first).

    ``fused(i) = Σ_lists w / (k + rank(i))`` with ranks from 1; a list adds nothing for a
    turn it does not hold.

    Examples
    --------
    Turn 7 is 1st in the first list and 2nd in the second: 1 / 61 + 0.5 / 62.

    >>> round(fuse([[7], [9, 7]], [1.0, 0.5], k=60)[7], 6) == round(1 / 61 + 0.5 / 62, 6)
    True
    >>> fuse([], [], k=60)
    {}
    """
    fused: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, turn in enumerate(ranking, start=1):
            fused[turn] = fused.get(turn, 0.0) + weight / (k + rank)
    return fused


def lift(scores: Mapping[int, float], neighbours: Mapping[int, Iterable[int]]) -> dict[int, float]:
    """Each turn's best neighbour score: ``max_j scores[j]`` over ``neighbours[i]``.

    ``neighbours[i]`` are the turns linked to ``i`` (either way); a neighbour without a
    score adds nothing, and a turn none of whose neighbours is scored is left out.

    Examples
    --------
    >>> lift({1: 0.2, 2: 0.1}, {2: [1, 3], 3: [2], 4: [5]})
    {2: 0.2, 3: 0.1}
    """
    out: dict[int, float] = {}
    for turn, linked in neighbours.items():
        best = max((scores.get(other, 0.0) for other in linked), default=0.0)
        if best > 0:
            out[turn] = best
    return out


def spread(
    scores: Mapping[int, float], neighbours: Mapping[int, Iterable[int]], share: float
) -> dict[int, float]:
    """Each turn's score plus ``share`` × its best neighbour's (:func:`lift`); a turn
    with no score of its own but a scored neighbour enters with that share alone.

    Examples
    --------
    Turn 2's neighbours 1 (0.2) and 3 (none): 0.1 + 0.5 × 0.2.

    >>> spread({1: 0.2, 2: 0.1}, {2: [1, 3]}, 0.5)
    {1: 0.2, 2: 0.2}
    >>> spread({1: 0.2}, {1: [2]}, 0.0)
    {1: 0.2}
    """
    out = dict(scores)
    if share > 0:
        for turn, best in lift(scores, neighbours).items():
            out[turn] = out.get(turn, 0.0) + share * best
    return out


def ranked(scores: Mapping[int, float], k: int) -> list[int]:
    """The ``k`` best turns of ``scores``, best first, ties to the newer (higher id).

    Examples
    --------
    >>> ranked({1: 0.5, 2: 0.5, 3: 0.9}, 2)
    [3, 2]
    """
    return sorted(scores, key=lambda turn: (-scores[turn], -turn))[:k]


@dataclass(frozen=True)
class Retrieval:
    """A turn :meth:`~synapse_retriever.context.ConversationMemory.retrieve` returns.

    ``origin`` says how it was found: ``"lexical"`` (BM25 only), ``"vector"`` (the
    embedder only), ``"both"`` (both channels) or ``"graph"`` (only as the neighbour of
    a turn they found); ``mode`` the mode used; ``path`` the typed edges ``(source,
    type, target)`` through which the graph raised it (empty if it did not), from the
    neighbour to the turn.
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
