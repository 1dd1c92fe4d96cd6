"""Hybrid retrieval: the lexical and dense channels fused, the temporal graph on top.

Notes
-----
1. **Channels.** The lexical channel ranks turns by BM25 (:mod:`~..lexical`, SQLite
   FTS5); the dense channel by the embedder's cosine to the query. Each gives its best
   ``depth`` turns (100, or 2k if larger).
2. **Fusion** (:func:`~..relevance.fuse`): weighted reciprocal-rank fusion,
   ``fused(i) = w_lex / (k + rank_lex(i)) + w_dense / (k + rank_dense(i))``, ranks from 1,
   a channel adding nothing for a turn it did not rank; by default k = 30 and BM25
   weighs three times the embedder (``ContextConfig.retrieval_rrf_k``,
   ``retrieval_lexical_weight``): on both conversation sets BM25 alone beats dense top-k
   by far, and LangChain's equal-weight fusion at k = 60 falls below BM25 alone.
3. **Speakers and dates** (:mod:`~.cues`): a fused score is raised for a turn said by a
   speaker the question names, or in the time it names.
4. **Graph** (:func:`spread`): a turn's time neighbours in the temporal graph (the turns
   FOLLOWED_BY links to it, before and after, in its session, and typed relations
   between turns) are its context: the question's evidence is often the answer after
   the turn that matched it, or the question before. Each turn gains ``share`` × the
   best fused score among its neighbours, ``score(i) = fused(i) + share ×
   max_j fused(j)``. ``share`` is the mode's graph weight
   (:data:`~.modes.MODE_WEIGHTS`) × ``ContextConfig.neighbour_share`` (0.6), so an
   analytical question leans on the graph most (0.42; conversational 0.3, creative
   0.18). A turn is reached by the graph alone when no channel ranked it; it passes the
   same share on, up to ``graph_depth`` steps.
5. Best first, ties to the newer turn, cut to ``k``.

How the constants were chosen (MiniLM; recall at k = 5 / 10 / 20; the tables are on the
conversation-memory benchmark page): RealMem, judged by gold session, is flat within
about a point across BM25 weights 2 to 4, k 30 to 60 and shares up to 0.3, except that
a share costs up to 1.4 points at k = 5 (a second turn of a session already found adds
nothing there). LoCoMo, judged by evidence turn, is not flat: these settings add
2.4 / 4.8 / 3.5 points over BM25 alone, and the graph adds 4.4 / 4.3 / 3.0 over the
same fusion without it (3.9 / 2.2 / 2.7 once speakers and dates raise the fused
turns). So the constants were chosen on LoCoMo and confirmed on RealMem, where they are
level with plain fusion.

References
----------
Cormack, Clarke and Büttcher (2009), Reciprocal rank fusion outperforms Condorcet and
individual rank learning methods, SIGIR. The conversation-memory design (hybrid
retrieval with biomimetic weighting; processing modes).

Examples
--------
Turns 1, 2 and 3 follow one another; 1 and 2 were found: each gains half its best
neighbour's score, and turn 3 is reached only as turn 2's neighbour:

>>> links = {1: [2], 2: [1, 3], 3: [2]}
>>> spread({1: 0.2, 2: 0.1}, lambda turn: links.get(turn, []), 0.5)
{1: 0.25, 2: 0.2, 3: 0.05}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Retrieval", "lift", "ranked", "spread"]


def lift(
    scores: Mapping[int, float], neighbours: Callable[[int], Iterable[int]]
) -> dict[int, float]:
    """The best score each neighbour of a scored turn gets from them: ``max_j scores[j]``
    over the scored turns ``j`` linked to it (``neighbours(j)``: the turns linked to
    ``j``, either way).

    Examples
    --------
    >>> links = {1: [2], 2: [1, 3], 3: [2]}
    >>> lift({1: 0.2, 2: 0.1}, lambda t: links.get(t, []))
    {2: 0.2, 1: 0.1, 3: 0.1}
    """
    out: dict[int, float] = {}
    for turn, score in scores.items():
        if score <= 0:
            continue
        for other in neighbours(turn):
            if score > out.get(other, 0.0):
                out[other] = score
    return out


def spread(
    scores: Mapping[int, float],
    neighbours: Callable[[int], Iterable[int]],
    share: float,
    *,
    depth: int = 1,
) -> dict[int, float]:
    """Each turn's score plus ``share`` × its best neighbour's (:func:`lift`); then, for
    ``depth`` > 1, the turns reached only through the graph pass ``share`` of what they
    gained on to their own neighbours that have nothing yet, hop by hop.

    Examples
    --------
    Turn 2: 0.1 + 0.5 × 0.2 (from 1); turn 3: 0.5 × 0.1 (from 2); turn 4, two hops from
    2 through 3: 0.5 × 0.05.

    >>> links = {1: [2], 2: [1, 3], 3: [2, 4], 4: [3]}
    >>> spread({1: 0.2, 2: 0.1}, lambda t: links.get(t, []), 0.5, depth=2)
    {1: 0.25, 2: 0.2, 3: 0.05, 4: 0.025}
    >>> spread({1: 0.2}, lambda t: links.get(t, []), 0.0)
    {1: 0.2}
    """
    out = dict(scores)
    if share <= 0:
        return out
    frontier: Mapping[int, float] = scores
    for hop in range(depth):
        gained = {t: share * best for t, best in lift(frontier, neighbours).items()}
        if hop > 0:
            gained = {t: g for t, g in gained.items() if t not in out}
        for turn, gain in gained.items():
            out[turn] = out.get(turn, 0.0) + gain
        frontier = {t: g for t, g in gained.items() if t not in scores}
        if not frontier:
            break
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
    """A turn :meth:`~synapse_retriever.conversation.ConversationMemory.retrieve` returns.

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
