"""Forgetting: exponential decay at a half-life learned per edge, LTP floor, pruning.

Pure functions over floats or NumPy arrays (element-wise); the store calls them on
whole batches of edges, users who keep their own graph on single values.

References
----------
D. O. Hebb, *The Organization of Behavior*, Wiley, 1949 (cells that fire together wire
together: the reinforcement of co-activated pairs).
T. V. P. Bliss and T. Lømo, "Long-lasting potentiation of synaptic transmission in the
dentate area of the anaesthetized rabbit", *Journal of Physiology* 232(2), 331-356, 1973
(long-term potentiation: the floor of proven associations).
"Budget-Neutral Synaptic Recall: Displacement Injection with Learned Per-Edge Decay for
AI Agent Context Retrieval" (the method as published: Δw = 0.3 × strength, namespace
half-lives, the half-life learned per edge, the LTP floor, pruning below 0.01).

Examples
--------
A personal edge reinforced twice, one day apart, learns a 21.25-day half-life:

>>> round(learned_half_life(count=2, gap_days=1.0, default_days=30.0), 2)
21.25
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from synapse_retriever.clock import SECONDS_PER_DAY
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.persistence.rows import EdgeRow

if TYPE_CHECKING:
    from synapse_retriever.config import SynapseConfig

logger = logging.getLogger("synapse_retriever")

__all__ = [
    "decayed_weight",
    "effective_weight",
    "learned_half_life",
    "pruned_at",
    "reinforce_edges",
    "reinforced_weight",
]

LN2 = math.log(2.0)

Array = npt.NDArray[np.float64]
ArrayLike = float | npt.NDArray[np.floating] | npt.NDArray[np.integer]


@overload
def _result(value: Array, *inputs: float) -> float: ...
@overload
def _result(value: Array, *inputs: ArrayLike) -> float | Array: ...
def _result(value: Array, *inputs: ArrayLike) -> float | Array:
    """Plain floats in, a plain float out; arrays in, an array out."""
    if all(np.ndim(x) == 0 for x in inputs):
        return float(value)
    return value


def decayed_weight(w0: ArrayLike, half_life_days: ArrayLike, age_days: ArrayLike) -> float | Array:
    """Plain exponential decay: w0 × exp(−ln2 / half_life × age); a negative age counts as 0.

    References
    ----------
    Hebb (1949) for the reinforcement; Bliss and Lømo (1973) for the LTP floor; the method as
    published for the constants (see the module docstring).

    Examples
    --------
    >>> decayed_weight(0.8, 30.0, 30.0)  # one half-life: 0.8 / 2
    0.4
    """
    value = np.multiply(w0, np.exp(-LN2 / np.asarray(half_life_days) * np.maximum(0.0, age_days)))
    return _result(value, w0, half_life_days, age_days)


def effective_weight(
    w0: ArrayLike,
    half_life_days: ArrayLike,
    age_days: ArrayLike,
    *,
    count: ArrayLike,
    ltp: bool | npt.NDArray[np.bool_] = True,
    ltp_min_count: int = 5,
    ltp_floor: float = 0.20,
    prune_threshold: float = 0.01,
) -> float | Array:
    """The weight every read sees: decay, then the LTP floor, then pruning to 0.0.

    Notes
    -----
    Long-term potentiation floors the weight at ``ltp_floor`` when ``ltp`` is allowed
    (every namespace but ``ephemeral``), ``count >= ltp_min_count`` and
    ``w0 >= ltp_floor``. A weight below ``prune_threshold`` is pruned: 0.0.

    References
    ----------
    Hebb (1949) for the reinforcement; Bliss and Lømo (1973) for the LTP floor; the method as
    published for the constants (see the module docstring).

    Examples
    --------
    w0 = 0.3 at a 30-day half-life reaches 0.01 at 30 × log2(30) = 147.2 days:

    >>> effective_weight(0.3, 30.0, 147.0, count=1) > 0
    True
    >>> effective_weight(0.3, 30.0, 147.5, count=1)
    0.0

    Reinforced 5 times, the same edge is floored at 0.20 instead:

    >>> effective_weight(0.3, 30.0, 147.5, count=5)
    0.2
    """
    weight = np.asarray(decayed_weight(w0, half_life_days, age_days))
    floored = _floored(w0, count, ltp, ltp_min_count, ltp_floor)
    weight = np.where(floored, np.maximum(weight, ltp_floor), weight)
    value = np.where(weight >= prune_threshold, weight, 0.0)
    return _result(value, w0, half_life_days, age_days, count)


def pruned_at(
    w0: ArrayLike,
    half_life_days: ArrayLike,
    last_s: ArrayLike,
    *,
    count: ArrayLike,
    ltp: bool | npt.NDArray[np.bool_] = True,
    ltp_min_count: int = 5,
    ltp_floor: float = 0.20,
    prune_threshold: float = 0.01,
) -> float | Array:
    """When :func:`effective_weight` reaches 0.0, in seconds: from then on the edge is pruned.

    Notes
    -----
    The decayed weight w0 × 2^(−age / half_life) falls below ``prune_threshold`` after
    half_life × log2(w0 / prune_threshold) days. An edge the LTP floor holds at or above
    the threshold is never pruned (+inf); one already below it always is (−inf). The
    closed form can differ from :func:`effective_weight` by rounding within a few
    microseconds of the boundary: callers that need the exact verdict there recompute it.

    References
    ----------
    Hebb (1949) for the reinforcement; Bliss and Lømo (1973) for the LTP floor; the method as
    published for the constants (see the module docstring).

    Examples
    --------
    w0 = 0.3 at a 30-day half-life, last reinforced at 0: 30 × log2(30) = 147.2 days.

    >>> round(pruned_at(0.3, 30.0, 0.0, count=1) / 86400, 1)
    147.2
    >>> pruned_at(0.3, 30.0, 0.0, count=5)  # floored at 0.20: never pruned
    inf
    """
    w0 = np.asarray(w0, np.float64)
    with np.errstate(divide="ignore"):
        life_days = np.asarray(half_life_days) * np.log2(w0 / prune_threshold)
    at = np.where(w0 >= prune_threshold, np.add(last_s, life_days * SECONDS_PER_DAY), -np.inf)
    floored = _floored(w0, count, ltp, ltp_min_count, ltp_floor)
    value = np.where(np.logical_and(floored, ltp_floor >= prune_threshold), np.inf, at)
    return _result(value, w0, half_life_days, last_s, count)


def _floored(
    w0: ArrayLike,
    count: ArrayLike,
    ltp: bool | npt.NDArray[np.bool_],
    ltp_min_count: int,
    ltp_floor: float,
) -> npt.NDArray[np.bool_]:
    """Whether long-term potentiation holds each edge at ``ltp_floor``."""
    proven = np.logical_and(np.greater_equal(count, ltp_min_count), np.greater_equal(w0, ltp_floor))
    return np.asarray(np.logical_and(ltp, proven))


def reinforced_weight(current: ArrayLike, delta: float) -> float | Array:
    """Hebbian update: min(1, current + delta).

    References
    ----------
    Hebb (1949) for the reinforcement; Bliss and Lømo (1973) for the LTP floor; the method as
    published for the constants (see the module docstring).

    Examples
    --------
    >>> reinforced_weight(0.9, 0.3)
    1.0
    """
    return _result(np.minimum(1.0, np.add(current, delta)), current)


def learned_half_life(
    count: ArrayLike,
    gap_days: ArrayLike,
    default_days: ArrayLike,
    *,
    bounds: tuple[float, float] = (3.0, 120.0),
    scale: float = 10.0,
) -> float | Array:
    """Half-life learned from how often (``count``) and how recently (``gap_days``) an edge fired.

    Notes
    -----
    With ``count`` the activation count after this reinforcement (so
    freq × age_days = count, with no division by an age that may be 0)::

        ratio      = log1p(count / scale)
        learned    = lo + (hi − lo) × ratio / (1 + ratio)
        confidence = exp(−ln2 × gap_days / default_days)
        half_life  = (1 − confidence) × default_days + confidence × learned

    clamped to ``bounds`` widened to include ``default_days``. ``gap_days`` is the time
    since the previous reinforcement: a long-idle edge falls back toward the default.

    References
    ----------
    Hebb (1949) for the reinforcement; Bliss and Lømo (1973) for the LTP floor; the method as
    published for the constants (see the module docstring).

    Examples
    --------
    Twice, 60 days apart: confidence 0.25, so mostly the 30-day default.

    >>> round(learned_half_life(count=2, gap_days=60.0, default_days=30.0), 2)
    27.76
    """
    low, high = bounds
    ratio = np.log1p(np.divide(count, scale))
    learned = low + (high - low) * ratio / (1.0 + ratio)
    confidence = np.exp(-LN2 * np.maximum(0.0, gap_days) / np.asarray(default_days))
    half_life = (1.0 - confidence) * default_days + confidence * learned
    clamped = np.minimum(
        np.maximum(half_life, np.minimum(low, default_days)), np.maximum(high, default_days)
    )
    return _result(clamped, count, gap_days, default_days)


def reinforce_edges(
    stored: Sequence[EdgeRow],
    names: list[str],
    node_ids: list[int],
    ns: str,
    ns_id: int,
    now: float,
    explicit: float | None,
    delta: float,
    config: SynapseConfig,
) -> tuple[list[EdgeRow], list[EdgeRow]]:
    """New states of every pair of one co-activation event, vectorised over its pairs.

    ``stored`` are the event's edges as read inside its transaction; ``names`` and
    ``node_ids`` its nodes; ``now`` its time (``explicit`` if the caller gave one);
    ``delta`` = learning_rate × clamped strength. For each pair: decay the stored weight
    to ``now`` with its old half-life and count (:func:`effective_weight`; an edge
    already pruned starts afresh: count 1, the namespace default half-life); add
    ``delta``, capped at 1; count += 1; learn the half-life from the gap since the
    previous reinforcement (:func:`learned_half_life`). Returns the new edges (id 0)
    and the updated ones.

    Raises
    ------
    InvalidValueError
        ``explicit`` is earlier than a stored edge's last reinforcement.

    Examples
    --------
    A new edge, then the same pair one day later (0.3 decays to 0.293 over a day at a
    30-day half-life; + 0.3; the half-life learned from a one-day gap at count 2):

    >>> from synapse_retriever import SynapseConfig
    >>> config = SynapseConfig()
    >>> (new,), () = reinforce_edges([], ["a", "b"], [1, 2], "personal", 1, 0.0, 0.0, 0.3,
    ...                              config)
    >>> new.weight, new.activation_count, new.half_life_days
    (0.3, 1, 30.0)
    >>> (), (again,) = reinforce_edges([new], ["a", "b"], [1, 2], "personal", 1, 86400.0,
    ...                                86400.0, 0.3, config)
    >>> round(again.weight, 3), again.activation_count, round(again.half_life_days, 2)
    (0.593, 2, 21.25)
    """
    rows = {(row.a, row.b): row for row in stored}
    pairs = [
        (x, y) if names[i] < names[j] else (y, x)
        for i, x in enumerate(node_ids)
        for j, y in enumerate(node_ids[i + 1 :], start=i + 1)
    ]
    old = [rows.get(pair) for pair in pairs]
    if explicit is not None:
        for row in old:
            if row is not None and explicit < row.last_reinforced_at:
                a, b = names[node_ids.index(row.a)], names[node_ids.index(row.b)]
                future = row.last_reinforced_at > time.time() + config.max_clock_skew_s
                raise InvalidValueError(
                    f"at={explicit} is earlier than the last reinforcement of {a!r}-{b!r} "
                    f"in {ns!r} ({row.last_reinforced_at}): time must not run backwards"
                    + (
                        "; that time lies in the future: store.repair() (synapse repair) "
                        "removes what was written ahead of the clock"
                        if future
                        else ""
                    )
                )
    blank = EdgeRow(0, ns_id, 0, 0, 0.0, 0, 1.0, now, now)
    state = np.asarray([row or blank for row in old], dtype=np.float64)
    w0, count, half_life, created, last = (state[:, k] for k in (4, 5, 6, 7, 8))
    when = np.maximum(now, last)
    if float(last.max(initial=-math.inf)) > time.time() + config.max_clock_skew_s:
        logger.warning(
            "%d edge(s) of this event were last reinforced ahead of the clock (up to %s): "
            "the event is placed after them; store.repair() (synapse repair) removes them",
            int(np.count_nonzero(last > time.time() + config.max_clock_skew_s)),
            float(last.max()),
        )
    gap = (when - last) / SECONDS_PER_DAY
    current = np.asarray(
        effective_weight(
            w0,
            half_life,
            gap,
            count=count,
            ltp=config.is_ltp_namespace(ns),
            ltp_min_count=config.ltp_min_count,
            ltp_floor=config.ltp_floor,
            prune_threshold=config.prune_threshold,
        )
    )
    fresh = current == 0.0  # absent, or already pruned: starts afresh
    default = config.default_half_life(ns)
    count = np.where(fresh, 1, count + 1)
    learned = learned_half_life(
        count, gap, default, bounds=config.half_life_bounds, scale=config.learned_scale
    )
    weight = np.minimum(1.0, current + delta)
    half_life = np.where(fresh, default, learned)
    created = np.where(fresh, when, created)
    inserted: list[EdgeRow] = []
    updated: list[EdgeRow] = []
    for k, (pair, row) in enumerate(zip(pairs, old, strict=True)):
        new = EdgeRow(
            0 if row is None else row.id,
            ns_id,
            *pair,
            float(weight[k]),
            int(count[k]),
            float(half_life[k]),
            float(created[k]),
            float(when[k]),
        )
        (inserted if row is None else updated).append(new)
    return inserted, updated
