"""What a user could write in five lines instead of this memory: the plain methods every
conversation benchmark holds it to.

- ``last_n``: the newest whole turns that fit a budget (LangChain's
  ``trim_messages(strategy="last")``);
- ``vector_top_k``: whole turns by a score (an embedder's similarity, BM25), best first,
  each that still fits;
- ``plain_rankings``: BM25 top-k, dense top-k and their reciprocal-rank fusion (k = 60,
  each list cut at :data:`FUSED_DEPTH`, as LangChain's ``EnsembleRetriever`` fuses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from synapse_retriever.conversation.relevance import fuse

__all__ = ["FUSED_DEPTH", "as_scores", "last_n", "plain_rankings", "vector_top_k"]


def last_n(tokens: Sequence[int], budget: int) -> list[int]:
    """Indices of the newest whole turns whose tokens total at most ``budget``.

    Examples
    --------
    >>> last_n([5, 3, 4, 2], 7)
    [2, 3]
    """
    kept: list[int] = []
    total = 0
    for i in range(len(tokens) - 1, -1, -1):
        if total + tokens[i] > budget:
            break
        kept.append(i)
        total += tokens[i]
    return kept[::-1]


def vector_top_k(similarity: Sequence[float], tokens: Sequence[int], budget: int) -> list[int]:
    """Indices of whole turns by similarity (best first; ties: newer), each that still fits.

    Examples
    --------
    >>> vector_top_k([0.9, 0.1, 0.5], [6, 2, 3], 8)  # 0 (6), 2 does not fit, then 1 (2)
    [0, 1]
    """
    order = sorted(range(len(tokens)), key=lambda i: (-similarity[i], -i))
    kept: list[int] = []
    total = 0
    for i in order:
        if total + tokens[i] <= budget:
            kept.append(i)
            total += tokens[i]
    return sorted(kept)


FUSED_DEPTH = 100
"""How deep each plain list is cut before it is fused (a retriever returns a top-k)."""


def plain_rankings(
    lexical: Sequence[int], similarity: np.ndarray[Any, Any], depth: int
) -> dict[str, list[int]]:
    """What a user could write in five lines, as rows best first: ``lexical`` (BM25's
    rows, given), ``dense`` (the ``depth`` rows most similar, similarity > 0) and
    ``fusion``, their reciprocal-rank fusion with k = 60 (LangChain's
    ``EnsembleRetriever``; :func:`~synapse_retriever.conversation.relevance.fuse`).

    Examples
    --------
    >>> plain_rankings([2, 0], np.array([0.9, 0.0, 0.5]), 10)["fusion"]
    [2, 0]
    """
    later_first = -np.arange(len(similarity))
    dense = [int(i) for i in np.lexsort((later_first, -similarity))[:depth] if similarity[i] > 0]
    fused = fuse([list(lexical), dense], [1.0, 1.0], k=60)
    return {
        "lexical": list(lexical),
        "dense": dense,
        "fusion": sorted(fused, key=lambda row: (-fused[row], -row))[:depth],
    }


def as_scores(ranking: Sequence[int], size: int) -> list[float]:
    """A ranking (best first) as scores for :func:`vector_top_k`.

    Examples
    --------
    >>> as_scores([2, 0], 3)
    [1.0, 0.0, 2.0]
    """
    scores = [0.0] * size
    for position, row in enumerate(ranking):
        scores[row] = float(len(ranking) - position)
    return scores
