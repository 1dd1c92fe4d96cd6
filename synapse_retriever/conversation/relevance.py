"""Relevance-first assembly (the default): the turns a question needs first, then the gradient.

The importance gradient alone spreads a budget thin (many one-line summaries); a real
question usually needs a few old turns in full. ``ContextConfig(assembly="relevance")``.

Notes
-----
1. Working memory and pinned turns are FULL, as in :func:`~.levels.plan_levels`;
   working memory is the newest turn, then older ones (up to ``working_memory`` turns)
   while they fit ``working_share`` of the budget
   (:func:`~synapse_retriever.conversation.assemble.working_span`). The ``room`` left is
   ``budget`` minus their tokens.
2. Every other turn is ranked by weighted reciprocal-rank fusion (Cormack et al., 2009)
   of its BM25 rank over the turns (the lexical index, :mod:`~.lexical`), its rank by the
   embedder's similarity to the query and its rank by novelty (its surprise when added,
   1 − its greatest similarity to an earlier turn):
   ``rrf(i) = w_lex / (k + rank_bm25(i)) + 1 / (k + rank_embedder(i))
   + w_nov / (k + rank_novelty(i))`` (ranks from 1; by default ``w_lex`` = 1,
   ``w_nov`` = 0.5, k = 60). A :class:`~synapse_retriever.conversation.ConversationMemory`
   fuses the same three over its stored turns (BM25 from its FTS5 index, the embedder
   from its vector index) and raises the turns of the speakers and the time the question
   names (:mod:`~.graph.cues`); it does not lift the graph's time neighbours into a
   budget, as ``retrieve`` does (they cost the tokens the answer needs). BM25 finds the
   words a question shares with its evidence, the embedder its paraphrases, novelty the
   turn that said something new rather than one of many that mention the topic.
3. In that order, up to ``relevance_share × room`` tokens, a turn goes in FULL if it
   fits. The first turn that does not fit is cut around the query to what is left: its
   sentences that match it (CHUNKS), else its best one (SUMMARY). Other turns that do not
   fit are passed over (a shorter one further down may still fit whole).
4. The rest of the budget goes to the importance gradient over the remaining turns.

References
----------
Cormack, Clarke and Büttcher (2009), Reciprocal rank fusion outperforms Condorcet and
individual rank learning methods, SIGIR. Robertson and Zaragoza (2009), The
probabilistic relevance framework: BM25 and beyond.

Examples
--------
>>> rrf_order([[3.0, 1.0, 0.0], [0.1, 0.9, 0.5]], k=60)
[1, 0, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from synapse_retriever.conversation.config import ContextConfig

__all__ = ["Pick", "fuse", "rrf_order", "select_relevant"]


def fuse(
    rankings: Sequence[Sequence[int]], weights: Sequence[float], *, k: int
) -> dict[int, float]:
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


def rrf_order(
    rankings: Sequence[Sequence[float]],
    *,
    k: int = ContextConfig.rrf_k,
    weights: Sequence[float] | None = None,
) -> list[int]:
    """Indices by reciprocal-rank fusion of several score lists, best first.

    Each list ranks the indices by score (ties: the later index first, the more recent
    turn); ``rrf(i) = Σ w / (k + rank(i))`` (``weights``: one ``w`` per list, default
    1) over the lists where ``i`` scores above 0: a list does not vote for what it did
    not find (a turn sharing no word with the query gets nothing from BM25). Ties in the
    fused score go to the later index.

    Examples
    --------
    Index 1 is 2nd and 1st: 1/62 + 1/61; index 0 is 1st and 3rd: 1/61 + 1/63 (less).

    >>> rrf_order([[3.0, 1.0, 0.0], [0.1, 0.9, 0.5]], k=60)
    [1, 0, 2]

    Indices 0 and 1 tie in the first list: the later, 1, ranks 1st there and 0 2nd.

    >>> rrf_order([[2.0, 2.0, 0.0], [0.9, 0.5, 0.1]], k=60)
    [1, 0, 2]

    Only the second list found index 0; it still ranks after 1, found by both:

    >>> rrf_order([[0.0, 1.0], [0.9, 0.5]], k=60)
    [1, 0]
    """
    n = len(rankings[0]) if rankings else 0
    later_first = -np.arange(n)
    lists = []
    for scores in rankings:
        values = np.asarray(scores, dtype=np.float64)
        lists.append([int(i) for i in np.lexsort((later_first, -values)) if values[i] > 0])
    fused = fuse(lists, weights or [1.0] * len(rankings), k=k)
    total = np.array([fused.get(i, 0.0) for i in range(n)], dtype=np.float64)
    return [int(i) for i in np.lexsort((later_first, -total))]


@dataclass(frozen=True)
class Pick:
    """A turn the relevance pass keeps: ``full`` (whole) or not (chunked), and its tokens."""

    index: int
    full: bool
    tokens: int


def select_relevant(
    order: Sequence[int],
    full_tokens: Sequence[int],
    room: int,
    chunk: Callable[[int, int], tuple[str, int] | None],
    *,
    condense: int = 1,
) -> list[Pick]:
    """Walk ``order`` (best first) and keep what fits in ``room`` tokens.

    A turn is kept whole if its ``full_tokens`` fit what is left; else, for the first
    ``condense`` turns that do not fit, ``chunk(index, left)`` may return a condensation
    ``(text, tokens)`` that fits (or None); other turns that do not fit are passed over,
    and a shorter turn further down may still fit whole.

    Examples
    --------
    Room 250: turn 2 (100 tokens) whole, turn 0 (300) does not fit and has no chunk, turn
    1 (120) whole; 30 tokens are left.

    >>> picks = select_relevant([2, 0, 1], [300, 120, 100], 250, lambda i, left: None)
    >>> [(p.index, p.full, p.tokens) for p in picks]
    [(2, True, 100), (1, True, 120)]

    Room 150: turn 0 does not fit and is chunked to 40 tokens; turn 1 fits whole, turn 2
    does not and is not chunked (one condensation by default):

    >>> picks = select_relevant([0, 1, 2], [300, 100, 200], 150, lambda i, left: ("...", 40))
    >>> [(p.index, p.full, p.tokens) for p in picks]
    [(0, False, 40), (1, True, 100)]
    """
    picks: list[Pick] = []
    left = room
    tries = condense
    for i in order:
        if left <= 0:
            break
        if full_tokens[i] <= left:
            picks.append(Pick(i, True, int(full_tokens[i])))
            left -= int(full_tokens[i])
            continue
        if tries <= 0:
            continue
        tries -= 1
        condensed = chunk(i, left)
        if condensed is not None and 0 < condensed[1] <= left:
            picks.append(Pick(i, False, int(condensed[1])))
            left -= int(condensed[1])
    return picks
