"""The sort-based set operations agree with NumPy's own."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever._arrays import (
    SAMPLE_STRIDE,
    group_sums,
    lengthen,
    lower_bounds,
    nth_largest,
    unique_ids,
)

ints = st.lists(st.integers(-(2**40), 2**40), max_size=60)


@given(ints)
def test_unique_ids_are_numpys_unique(values: list[int]) -> None:
    array = np.asarray(values, np.int64)
    assert unique_ids(array).tolist() == np.unique(array).tolist()


@given(st.lists(st.tuples(st.integers(0, 8), st.floats(-1e6, 1e6)), max_size=60))
def test_group_sums_are_a_bincount_by_key(pairs: list[tuple[int, float]]) -> None:
    keys = np.asarray([k for k, _ in pairs], np.int64)
    weights = np.asarray([w for _, w in pairs], np.float64)
    got_keys, got_sums = group_sums(keys, weights)
    want_keys = sorted(set(keys.tolist()))
    # each key's weights added smallest first, from 0.0, as bincount adds them
    want_sums = [sum(sorted(w for k, w in pairs if k == key), 0.0) for key in want_keys]
    assert got_keys.tolist() == want_keys
    assert got_sums.tolist() == want_sums


@given(
    st.lists(st.tuples(st.integers(0, 5), st.floats(0.0, 1e3, allow_nan=False)), min_size=1),
    st.randoms(use_true_random=False),
)
def test_group_sums_do_not_depend_on_the_input_order(
    pairs: list[tuple[int, float]], random: Any
) -> None:
    # a store that numbered its edges otherwise meets a pair's namespaces in another order
    shuffled = list(pairs)
    random.shuffle(shuffled)
    keys, sums = group_sums(np.array([k for k, _ in pairs]), np.array([w for _, w in pairs]))
    again = group_sums(np.array([k for k, _ in shuffled]), np.array([w for _, w in shuffled]))
    assert keys.tolist() == again[0].tolist()
    assert sums.tobytes() == again[1].tobytes()


@given(st.integers(1, 8 * SAMPLE_STRIDE), st.integers(1, 6), st.integers(0, 2**32 - 1), st.data())
def test_nth_largest_is_the_nth_value_of_a_descending_sort(
    size: int, distinct: int, seed: int, data: Any
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(-3, distinct, size) * 0.5  # few values: mostly ties
    n = data.draw(st.integers(1, size))
    assert nth_largest(values, n) == np.sort(values)[::-1][n - 1]


@given(st.lists(st.integers(-(2**40), 2**40), max_size=30), st.integers(0, 40))
def test_a_lengthened_array_keeps_its_values_and_adds_zeros(values: list[int], more: int) -> None:
    held = {"x": np.array(values, np.int64)}
    lengthen(held, "x", len(values) + more)
    assert held["x"].tolist() == values + [0] * more


def test_an_array_held_once_grows_in_place_and_a_viewed_one_is_copied() -> None:
    held = {"x": np.arange(5_000_000, dtype=np.int64)}  # 40 MB: a block of its own
    address = id(held["x"])
    lengthen(held, "x", 6_000_000)
    assert id(held["x"]) == address  # the same array: no copy (a copy is made while it lives)
    assert held["x"][4_999_999] == 4_999_999 and held["x"][5_000_000] == 0
    view = held["x"][:10]
    lengthen(held, "x", 7_000_000)
    assert held["x"].size == 7_000_000 and view.base is not held["x"]  # a view lived: copied
    assert view.tolist() == list(range(10)) and held["x"][:5_000_000].tolist() == list(
        range(5_000_000)
    )


@given(
    st.lists(st.lists(st.integers(-5, 5), max_size=12), max_size=8),
    st.lists(st.tuples(st.integers(0, 7), st.integers(-6, 6)), max_size=20),
)
def test_lower_bounds_are_bisect_left_in_each_range(
    rows: list[list[int]], searches: list[tuple[int, int]]
) -> None:
    """Ranges of ascending values side by side, searched at once: each answer is Python's
    ``bisect_left`` in its own range."""
    rows = [sorted(row) for row in rows] or [[]]
    values = np.asarray([v for row in rows for v in row], np.int64)
    ends = np.cumsum([0, *map(len, rows)])
    which = [r % len(rows) for r, _ in searches]
    start, stop = ends[which], ends[[w + 1 for w in which]]
    targets = np.asarray([t for _, t in searches], np.int64)
    expected = [
        ends[w] + bisect.bisect_left(rows[w], t) for w, (_, t) in zip(which, searches, strict=True)
    ]
    assert lower_bounds(values, start, stop, targets).tolist() == expected
