"""numpy helpers (twinspect._arrays) against numpy's own results."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect._arrays import unique_sorted


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
