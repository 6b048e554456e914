"""The compiled loops of the token-overlap index against scipy and a plain-Python reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from twinspect.code.kernels import prefix_join, shared_column_counts


def _pairs(n: int, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, count)
    b = np.where(rng.random(count) < 0.5, rng.integers(0, n, count), a)  # self pairs too
    return a, b


def test_boolean_rows_count_shared_columns():
    rng = np.random.default_rng(7)
    dense = rng.random((400, 120)) < 0.1
    m = sp.csr_matrix(dense)
    a, b = _pairs(400, 2000, seed=8)
    want = np.asarray(m[a].multiply(m[b]).sum(axis=1)).ravel()
    got = shared_column_counts(m.indptr, m.indices, a, b)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert want.max() > 2  # rows that share several columns


def _reference_join(lo, hi, prefixes, sizes, need, rest, last, theta):
    """The filters of prefix_join, pair by pair in plain Python."""
    out = []
    for a in range(lo, hi):
        for b in range(a + 1, len(prefixes)):
            shared = len(prefixes[a] & prefixes[b])
            if shared == 0 or shared < min(need[a], need[b]):
                continue
            if sizes[a] < theta * sizes[b] - 1e-9:
                continue
            if last[a] <= last[b]:
                bound = shared + min(rest[a], sizes[b] - shared)
            else:
                bound = shared + min(rest[b], sizes[a] - shared)
            if bound >= theta * sizes[b] - 1e-6:
                out.append((a, b))
    return out


@pytest.mark.parametrize("theta", [0.5, 0.55, 0.8])
def test_prefix_join_equals_the_pairwise_filters(theta):
    rng = np.random.default_rng(11)
    n, nitems = 160, 40
    sizes = np.sort(rng.integers(4, 30, n)).astype(np.int64)
    prefixes = [set(rng.choice(nitems, size=max(1, int(s * 0.6)), replace=False).tolist()) for s in sizes]
    need = np.minimum(rng.integers(1, 5, n), [len(p) for p in prefixes]).astype(np.int64)
    rest = (sizes - np.array([len(p) for p in prefixes])).astype(np.int64)
    last = rng.integers(0, nitems, n).astype(np.int64)
    rows = np.repeat(np.arange(n), [len(p) for p in prefixes])
    cols = np.fromiter(itertools.chain.from_iterable(sorted(p) for p in prefixes), dtype=np.int64)
    prefix = sp.csr_matrix((np.ones(len(rows), dtype=bool), (rows, cols)), shape=(n, nitems))
    inverted = prefix.tocsc()
    kept = len(_reference_join(0, n, prefixes, sizes, need, rest, last, theta))
    assert kept > (20 if theta < 0.8 else 0)  # the filters keep some pairs
    for lo, hi in ((0, n), (0, 7), (50, 51), (n - 3, n)):
        a, b = prefix_join(lo, hi, prefix.indptr, prefix.indices, inverted.indptr, inverted.indices,
                           sizes, need, rest, last, theta)
        assert sorted(zip(a.tolist(), b.tolist())) == _reference_join(lo, hi, prefixes, sizes, need, rest, last,
                                                                      theta)
        assert np.all(np.diff(a) >= 0)
