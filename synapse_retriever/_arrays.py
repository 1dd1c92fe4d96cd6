"""Set operations and selection on arrays, for the per-query paths.

``np.unique`` on integers hashes in NumPy 2.x: about 10 times slower than a sort on
the few thousand ids a query handles (measured: 200 µs against 20 µs on 2,000 ids),
and 1.3 ms on the 40,000 edges of a hub. :func:`unique_ids` and :func:`group_sums` give
the same results by sorting. NumPy's selection (``np.partition``) is slow on many tied
values, as a hub's co-use counts are: :func:`nth_largest` selects among a few.
:func:`lengthen` grows a column without copying it where it can.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import numpy as np
import numpy.typing as npt

from synapse_retriever._types import FloatArray, IntArray

__all__ = ["SAMPLE_STRIDE", "group_sums", "lengthen", "lower_bounds", "nth_largest", "unique_ids"]

SAMPLE_STRIDE = 16
""":func:`nth_largest` bounds its answer from every 16th value first."""


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


def lengthen(holder: MutableMapping[str, npt.NDArray[Any]], key: str, size: int) -> None:
    """Make ``holder[key]`` (one dimension) ``size`` long: its values kept, the new ones zero.

    In place where ``holder`` holds the array's only reference: ``realloc``, which for a
    large block moves its pages rather than copying them (``mremap`` with glibc), so neither
    the copy nor the first touch of a whole new block is paid. Otherwise (a view of it, or
    another name for it, is alive) ``holder[key]`` becomes a copy, and those stay as they
    were. If the memory cannot be had, ``MemoryError`` leaves ``holder[key]`` as it was.

    Examples
    --------
    >>> columns = {"w": np.array([1, 2])}
    >>> lengthen(columns, "w", 4)
    >>> columns["w"].tolist()
    [1, 2, 0, 0]
    >>> kept = columns["w"]  # another name for it: copied
    >>> lengthen(columns, "w", 5)
    >>> columns["w"].tolist(), kept.tolist(), columns["w"] is kept
    ([1, 2, 0, 0, 0], [1, 2, 0, 0], False)
    """
    try:
        holder[key].resize(size, refcheck=True)
    except ValueError:  # referred to elsewhere: resizing would free memory still in use
        array = holder[key]
        copy = np.zeros(size, array.dtype)
        copy[: array.size] = array
        holder[key] = copy


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


def nth_largest(values: FloatArray | IntArray | npt.NDArray[np.int32], n: int) -> float:
    """The ``n``-th largest of ``values`` (not NaN; 1 <= ``n`` <= their number).

    Selected among the values at or above the ``n``-th largest of every
    ``SAMPLE_STRIDE``-th value: those are values too, so at least ``n`` values reach that
    bound, and the answer is among them. A hub's co-use row holds tens of thousands of
    small integer counts, mostly tied, and NumPy's selection is slow on those (measured
    at 1M edges, a hub of 39,731 neighbours: 0.99 ms to select from the low end as
    ``np.partition(values, size - n)``, 0.30 ms from the high end, 0.10 ms here).

    Examples
    --------
    >>> nth_largest(np.array([3.0, 1.0, 3.0, 2.0]), 3)
    2.0
    """
    sample = values[::SAMPLE_STRIDE]
    if sample.size > n:  # a bound first: the candidates are the values at or above it
        values = values[values >= -np.partition(-sample, n - 1)[n - 1]]
    return float(-np.partition(-values, n - 1)[n - 1])


def lower_bounds(
    values: npt.NDArray[np.integer[Any]],
    start: npt.NDArray[np.integer[Any]],
    stop: npt.NDArray[np.integer[Any]],
    targets: IntArray,
) -> IntArray:
    """For each i, the first position in ``values[start[i]:stop[i]]`` (ascending there)
    whose value is not below ``targets[i]``, or ``stop[i]``: a binary search of every
    range at once, one NumPy step per halving of the longest, over the searches still open.

    Examples
    --------
    >>> values = np.array([1, 4, 9, 2, 3])  # two ranges: 0:3 and 3:5
    >>> lower_bounds(values, np.array([0, 0, 3]), np.array([3, 3, 5]), np.array([4, 10, 3]))
    array([1, 3, 4])
    """
    lo, hi = start.astype(np.int64), stop.astype(np.int64)
    open_ = np.flatnonzero(lo < hi)  # the searches still going: fewer at each step
    while open_.size:
        low, high = lo[open_], hi[open_]
        mid = (low + high) >> 1  # below high, so within values
        below = values[mid] < targets[open_]
        low = np.where(below, mid + 1, low)
        high = np.where(below, high, mid)
        lo[open_], hi[open_] = low, high
        open_ = open_[low < high]
    return lo
