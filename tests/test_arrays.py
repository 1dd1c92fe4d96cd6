"""The sort-based set operations agree with NumPy's own."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever._arrays import group_sums, unique_ids

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
    want_keys, inverse = np.unique(keys, return_inverse=True)
    want_sums = np.bincount(inverse, weights, want_keys.size)
    assert got_keys.tolist() == want_keys.tolist()
    assert got_sums.tolist() == want_sums.tolist()  # the same order of addition: equal sums
