"""Ranking metrics and their statistics: pure functions over plain lists.

Examples
--------
Two of three relevant files in a top-5, at ranks 1 and 4:

>>> ranked = ["a", "x", "y", "b", "z"]
>>> recall_at_k(ranked, {"a", "b", "c"}, 5), hit_at_k(ranked, {"a", "b", "c"}, 5)
(0.6666666666666666, 1.0)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields

__all__ = [
    "Injections",
    "displace",
    "hit_at_k",
    "injections",
    "mean",
    "ndcg_at_k",
    "oracle_share",
    "paired_bootstrap_ci",
    "recall_at_k",
]


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of ``relevant`` found in the first ``k`` of ``ranked``: |R ∩ top-k| / |R|.

    An empty relevant set scores 0.0 (such queries are left out of the benchmark).

    Examples
    --------
    >>> recall_at_k(["a", "b", "c"], {"c", "d"}, 2), recall_at_k(["a", "b", "c"], {"c", "d"}, 3)
    (0.0, 0.5)
    """
    if not relevant:
        return 0.0
    found = set(ranked[:k]) & set(relevant)
    return len(found) / len(relevant)


def hit_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any of the first ``k`` of ``ranked`` is relevant, else 0.0.

    Examples
    --------
    >>> hit_at_k(["a", "b"], {"b"}, 1), hit_at_k(["a", "b"], {"b"}, 2)
    (0.0, 1.0)
    """
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Normalized discounted cumulative gain with binary gains.

    Notes
    -----
    With rel_i = 1 if the item at rank i (from 1) is relevant::

        DCG@k  = Σ_{i=1..k} rel_i / log2(i + 1)
        IDCG@k = Σ_{i=1..min(|R|, k)} 1 / log2(i + 1)
        nDCG@k = DCG@k / IDCG@k

    Examples
    --------
    Relevant {a, b}, found at ranks 1 and 3: DCG = 1/log2(2) + 1/log2(4) = 1 + 0.5 = 1.5;
    IDCG = 1/log2(2) + 1/log2(3) = 1 + 0.6309 = 1.6309; nDCG = 1.5 / 1.6309 = 0.9197.

    >>> round(ndcg_at_k(["a", "x", "b"], {"a", "b"}, 3), 4)
    0.9197
    """
    if not relevant:
        return 0.0
    wanted = set(relevant)
    dcg = sum(
        1.0 / math.log2(rank + 1) for rank, item in enumerate(ranked[:k], start=1) if item in wanted
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for no values.

    Examples
    --------
    >>> mean([1.0, 0.0, 0.5]), mean([])
    (0.5, 0.0)
    """
    return sum(values) / len(values) if values else 0.0


def paired_bootstrap_ci(
    deltas: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of paired differences.

    ``deltas[i]`` is method minus baseline on query ``i``; queries are resampled with
    replacement ``resamples`` times with a fixed seed, so the interval is reproducible.

    Examples
    --------
    >>> paired_bootstrap_ci([0.5, 0.5, 0.5])  # no spread: the interval is the mean
    (0.5, 0.5)
    >>> low, high = paired_bootstrap_ci([1.0, 0.0, 0.0, 0.0])
    >>> 0.0 <= low < 0.25 < high <= 1.0
    True
    """
    if not deltas:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(rng.choices(deltas, k=n)) / n for _ in range(resamples))
    tail = (1.0 - confidence) / 2.0
    low = means[math.floor(tail * (resamples - 1))]
    high = means[math.ceil((1.0 - tail) * (resamples - 1))]
    return (low, high)


def oracle_share(method: float, baseline: float, oracle: float) -> float | None:
    """Share of the oracle's gain that a method reaches: (method − base) / (oracle − base).

    None when the oracle gains nothing (there is no gain to share).

    Examples
    --------
    >>> oracle_share(0.45, 0.40, 0.60)  # 0.05 of a possible 0.20
    0.25
    >>> oracle_share(0.40, 0.40, 0.40) is None
    True
    """
    gain = oracle - baseline
    if gain <= 0.0:
        return None
    return round((method - baseline) / gain, 12)


def displace(ranked: Sequence[str], newcomers: Sequence[str], *, slots: int = 2) -> list[str]:
    """Put up to ``slots`` newcomers into the weakest (last) positions, one for one.

    The first newcomer takes the better of the displaced slots; at least one original
    item always stays, and the list never grows.

    Examples
    --------
    >>> displace(["a", "b", "c", "d", "e"], ["x", "y", "z"])
    ['a', 'b', 'c', 'x', 'y']
    >>> displace(["a", "b", "c"], ["x"])  # one newcomer takes the weakest slot
    ['a', 'b', 'x']
    >>> displace(["a"], ["x"])
    ['a']
    """
    n = min(len(newcomers), slots, max(0, len(ranked) - 1))
    if n == 0:
        return list(ranked)
    return [*ranked[: len(ranked) - n], *newcomers[:n]]


@dataclass
class Injections:
    """What a row put into queries' top-k that the vector search did not, and what it took
    out; counts, summed over queries with ``+``."""

    queries: int = 0
    """Queries scored."""
    injected: int = 0
    """Ids in the result that were not among the hits."""
    injected_relevant: int = 0
    """Of those, ids of the query's relevant set."""
    displaced: int = 0
    """Hits missing from the result."""
    displaced_relevant: int = 0
    """Of those, ids of the query's relevant set."""
    queries_injected: int = 0
    """Queries given at least one injection."""
    queries_unneeded: int = 0
    """Queries given at least one injection their relevant set did not need."""
    off_topic: int = 0
    """Injections of another project (when projects are known)."""
    queries_off_topic: int = 0
    """Queries given at least one off-topic injection."""

    def __add__(self, other: Injections) -> Injections:
        return Injections(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(Injections))
        )

    def shares(self) -> dict[str, float | None]:
        """The precision columns: ``injected_precision`` (relevant / injected),
        ``displaced_relevant`` (relevant / displaced), ``queries_unneeded``,
        ``queries_off_topic`` (shares of queries) and ``off_topic`` (share of
        injections); None where the denominator is 0.

        Examples
        --------
        >>> Injections(4, 3, 1, 3, 0, 2, 1, 0, 0).shares()["injected_precision"]
        0.3333333333333333
        """

        def share(part: int, whole: int) -> float | None:
            return part / whole if whole else None

        return {
            "injected_precision": share(self.injected_relevant, self.injected),
            "displaced_relevant": share(self.displaced_relevant, self.displaced),
            "queries_unneeded": share(self.queries_unneeded, self.queries),
            "off_topic": share(self.off_topic, self.injected),
            "queries_off_topic": share(self.queries_off_topic, self.queries),
        }


def injections(
    hits: Sequence[str],
    ranked: Sequence[str],
    relevant: Collection[str],
    on_topic: Callable[[str], bool] | None = None,
) -> Injections:
    """Count one query's injections (ids of ``ranked`` not in ``hits``) and displaced hits
    (ids of ``hits`` not in ``ranked``); ``on_topic`` tells an id of the query's own
    project (None: every id is).

    Examples
    --------
    Hits a, b, c; the result swapped c for x (relevant) and b for y (of another project):

    >>> counts = injections(["a", "b", "c"], ["a", "x", "y"], {"a", "x", "c"},
    ...                     on_topic=lambda n: n != "y")
    >>> counts.injected, counts.injected_relevant, counts.displaced, counts.displaced_relevant
    (2, 1, 2, 1)
    >>> counts.queries_unneeded, counts.off_topic, counts.queries_off_topic
    (1, 1, 1)
    """
    present, kept = set(hits), set(ranked)
    new = [node for node in ranked if node not in present]
    gone = [node for node in hits if node not in kept]
    unneeded = sum(node not in relevant for node in new)
    foreign = sum(not on_topic(node) for node in new) if on_topic is not None else 0
    return Injections(
        queries=1,
        injected=len(new),
        injected_relevant=len(new) - unneeded,
        displaced=len(gone),
        displaced_relevant=sum(node in relevant for node in gone),
        queries_injected=int(bool(new)),
        queries_unneeded=int(unneeded > 0),
        off_topic=foreign,
        queries_off_topic=int(foreign > 0),
    )
