"""How much a turn matters for a query: four signals, weighted, scaled by temperature.

Pure functions over floats or NumPy arrays (element-wise), like
:mod:`synapse_retriever.learning.decay`, whose
:func:`~synapse_retriever.learning.decay.decayed_weight` gives both the recency gradient
and the habituation curve.

Notes
-----
::

    recency     = 2^(−age_turns / half_life_turns) [× 2^(−age_days / half_life_days)]
    surprise    = 1 − max similarity to any earlier turn
    relevance   = similarity to the query (optionally relative to the best match)
    habituation = 1 − 2^(−repeats / half_count)
    importance  = clip((w_r × recency + w_s × surprise + w_q × relevance
                        + w_h × (1 − habituation)) × temperature + boost, 0, 1)

``boost`` is the replay reinforcement, added after the temperature (it is a fixed
amount, not a signal the mode should scale).

Examples
--------
With the published weights (0.4, 0.3, 0.2, 0.1), a turn 20 turns old at a 20-turn
half-life (recency 0.5), surprise 0.6, relevance 0.5, never repeated:
0.4 × 0.5 + 0.3 × 0.6 + 0.2 × 0.5 + 0.1 × 1 = 0.58.

>>> round(importance(recency(20, 20.0), 0.6, 0.5, habituation(0, 1.0)), 6)
0.58
"""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt

from synapse_retriever._numbers import numeric
from synapse_retriever.errors import InvalidValueError, shown
from synapse_retriever.learning.decay import decayed_weight

__all__ = ["Weights", "habituation", "importance", "recency", "surprise"]

Array = npt.NDArray[np.float64]
ArrayLike = float | npt.NDArray[np.floating] | npt.NDArray[np.integer]
Weights = tuple[float, float, float, float]
"""(recency, surprise, relevance, habituation) weights."""

PUBLISHED_WEIGHTS: Weights = (0.4, 0.3, 0.2, 0.1)


@overload
def _out(value: Array, *inputs: float) -> float: ...
@overload
def _out(value: Array, *inputs: ArrayLike) -> float | Array: ...
def _out(value: Array, *inputs: ArrayLike) -> float | Array:
    if all(np.ndim(x) == 0 for x in inputs):
        return float(value)
    return np.asarray(value, dtype=np.float64)


@numeric
def recency(
    age_turns: ArrayLike,
    half_life_turns: float,
    age_days: ArrayLike | None = None,
    half_life_days: float | None = None,
) -> float | Array:
    """Exponential decay in turn age, optionally times decay in wall-clock age.

    Both factors are :func:`~synapse_retriever.learning.decay.decayed_weight` of 1.0.

    Examples
    --------
    >>> recency(0, 20.0)  # the newest turn
    1.0
    >>> recency(40, 20.0)  # two half-lives: 1/4
    0.25
    >>> recency(20, 20.0, age_days=7.0, half_life_days=7.0)  # 0.5 × 0.5
    0.25
    """
    value = decayed_weight(1.0, half_life_turns, age_turns)
    if half_life_days is not None and age_days is not None:
        value = np.multiply(value, decayed_weight(1.0, half_life_days, age_days))
        return _out(np.asarray(value), age_turns, age_days)
    return _out(np.asarray(value), age_turns)


@numeric
def surprise(max_similarity: ArrayLike) -> float | Array:
    """Novelty against earlier turns: 1 − the highest similarity, clipped to [0, 1].

    Examples
    --------
    >>> surprise(0.25)  # its closest earlier turn is 0.25 similar
    0.75
    """
    return _out(1.0 - np.clip(max_similarity, 0.0, 1.0), max_similarity)


@numeric
def habituation(repeats: ArrayLike, half_count: float) -> float | Array:
    """Habituation after ``repeats`` near-identical earlier turns: 1 − 2^(−repeats / half_count).

    Each ``half_count`` repeats halve what is left of the novelty, the same curve as
    decay (:func:`~synapse_retriever.learning.decay.decayed_weight`) with repeats for time.

    Examples
    --------
    >>> habituation(0, 1.0), habituation(1, 1.0), habituation(2, 1.0)
    (0.0, 0.5, 0.75)
    """
    return _out(1.0 - np.asarray(decayed_weight(1.0, half_count, repeats)), repeats)


@numeric
def importance(
    recency: ArrayLike,
    surprise: ArrayLike,
    relevance: ArrayLike,
    habituation: ArrayLike,
    *,
    weights: Weights = PUBLISHED_WEIGHTS,
    temperature: float = 1.0,
    boost: ArrayLike = 0.0,
) -> float | Array:
    """Weighted signals × temperature + boost, clipped to [0, 1].

    Examples
    --------
    The newest turn, fully novel, irrelevant to the query, in analytical mode (1.3):
    (0.4 × 1 + 0.3 × 1 + 0.2 × 0 + 0.1 × 1) × 1.3 = 1.04, clipped to 1.

    >>> importance(1.0, 1.0, 0.0, 0.0, temperature=1.3)
    1.0

    An old, habituated turn (recency 0, surprise 0.1, relevance 0.1, habituation 0.75),
    boosted once by replay (+0.2): 0.03 + 0.02 + 0.025 + 0.2 = 0.275.

    >>> round(importance(0.0, 0.1, 0.1, 0.75, boost=0.2), 6)
    0.275
    """
    if len(weights) != 4:  # unpacked below: a raw "not enough values to unpack"
        raise InvalidValueError(
            "weights must be (recency, surprise, relevance, habituation): four numbers, "
            f"got {shown(weights)}"
        )
    w_recency, w_surprise, w_relevance, w_habituation = weights
    base = (
        np.multiply(w_recency, recency)
        + np.multiply(w_surprise, surprise)
        + np.multiply(w_relevance, relevance)
        + np.multiply(w_habituation, np.subtract(1.0, habituation))
    )
    value = np.clip(base * temperature + np.asarray(boost), 0.0, 1.0)
    return _out(value, recency, surprise, relevance, habituation, boost)
