"""Sort-based set operations on integer arrays, for the per-query paths.

``np.unique`` on integers hashes in NumPy 2.x: about 10 times slower than a sort on
the few thousand ids a query handles (measured: 200 µs against 20 µs on 2,000 ids),
and 1.3 ms on the 40,000 edges of a hub. These give the same results by sorting.
"""

from __future__ import annotations

import numpy as np

from synapse_retriever._types import FloatArray, IntArray

__all__ = ["group_sums", "unique_ids"]


def unique_ids(values: IntArray) -> IntArray:
    """The distinct values, ascending (``np.unique`` without hashing).

    Examples
    --------
    >>> unique_ids(np.array([3, 1, 3, 2, 1])).tolist()
    [1, 2, 3]
    """
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def group_sums(keys: IntArray, weights: FloatArray) -> tuple[IntArray, FloatArray]:
    """The distinct keys, ascending, and the sum of the weights of each.

    Within a key the weights are added in ascending order, so the sums do not depend on
    the order of the input (ids a store assigned in another order give the same bits).

    Examples
    --------
    >>> keys, sums = group_sums(np.array([7, 2, 7, 5]), np.array([1.0, 2.0, 0.5, 4.0]))
    >>> keys.tolist(), sums.tolist()
    ([2, 5, 7], [2.0, 4.0, 1.5])
    """
    weights = np.asarray(weights, np.float64)
    order = np.lexsort((weights, keys))  # by key, then by weight
    ordered = keys[order]
    if ordered.size == 0:
        return ordered, np.zeros(0)
    first = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    group = np.cumsum(first) - 1  # np.bincount adds in the order it is given
    sums = np.asarray(np.bincount(group, weights[order]), np.float64)
    return ordered[first], sums
