"""numpy helpers (twinspect._arrays) against numpy's own results."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect._arrays import index_dtype, unique_sorted


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_unique_sorted_equals_np_unique(n):
    values = np.random.default_rng(n).integers(-20, 20, n)
    got = unique_sorted(values)
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got, np.unique(values))


def test_unique_sorted_leaves_input_alone():
    values = np.array([3, 1, 3, 2])
    unique_sorted(values)
    np.testing.assert_array_equal(values, [3, 1, 3, 2])


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_unique_sorted_overwrite_sorts_in_place_with_the_same_result(n):
    values = np.random.default_rng(n).integers(-20, 20, n)
    want = np.unique(values)
    got = unique_sorted(values, overwrite=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(values, np.sort(values))  # the input is the sort's buffer
    if n >= 2:
        assert not np.shares_memory(got, values)  # the result is its own array (a compressed copy)


def test_index_dtype_is_int32_exactly_while_int32_holds_the_largest_value():
    top = np.iinfo(np.int32).max
    assert index_dtype(0) == index_dtype(top) == np.int32
    assert index_dtype(top + 1) == index_dtype(2**40) == np.int64
    # the largest value and -1 (a padding or "before the first" rank) survive the cast
    values = np.array([-1, top], dtype=np.int64).astype(index_dtype(top))
    np.testing.assert_array_equal(values, [-1, top])
