"""The compiled kernels of the candidate search against scipy and a plain-Python reference."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from twinspect.code.kernels import prefix_join, sparse_pair_dots, sparse_pair_min_sums
from twinspect.code.vectors import _normalised_csr, rowdot

EXAMPLES = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"


@pytest.fixture(scope="module")
def lexical_matrix() -> sp.csr_matrix:
    """The lexical encoder's sparse vectors of the bundled example's functions (real code)."""
    from twinspect.code.encoders.lexical import LexicalEncoder
    from twinspect.code.fragments import mine

    frags, _ = mine([str(EXAMPLES)], min_lines=3)
    assert len(frags) > 10
    return LexicalEncoder().encode_sparse(frags).tocsr()


def _pairs(n: int, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, count)
    b = np.where(rng.random(count) < 0.5, rng.integers(0, n, count), a)  # self pairs too
    return a, b


def test_float_dots_are_the_bits_of_the_matrix_product(lexical_matrix):
    m = _normalised_csr(lexical_matrix)
    assert m.has_sorted_indices
    a, b = _pairs(m.shape[0], 3000)
    got = rowdot(m, a, b)
    assert got.dtype == np.float32
    assert np.array_equal(got, (m @ m.T).toarray()[a, b])  # same sums, same order, same precision
    self_dots = rowdot(m, np.arange(m.shape[0]), np.arange(m.shape[0]))
    assert np.allclose(self_dots[np.diff(m.indptr) > 0], 1.0, atol=1e-5)  # normalised rows


def test_float64_and_integer_matrices_keep_their_precision():
    rng = np.random.default_rng(3)
    m64 = sp.random(300, 50, density=0.3, format="csr", dtype=np.float64, random_state=4)
    a, b = _pairs(300, 500, seed=5)
    got = rowdot(m64, a, b)
    assert got.dtype == np.float64
    assert np.allclose(got, np.einsum("ij,ij->i", m64.toarray()[a], m64.toarray()[b]), rtol=1e-12)
    mi = sp.csr_matrix(rng.integers(0, 3, (200, 40)).astype(np.int32))
    a, b = _pairs(200, 400, seed=6)
    got = rowdot(mi, a, b)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.einsum("ij,ij->i", mi.toarray()[a].astype(np.int64), mi.toarray()[b]))


def test_boolean_rows_count_shared_columns():
    rng = np.random.default_rng(7)
    dense = rng.random((400, 120)) < 0.1
    m = sp.csr_matrix(dense)
    a, b = _pairs(400, 2000, seed=8)
    want = np.asarray(m[a].multiply(m[b]).sum(axis=1)).ravel()
    got = rowdot(m, a, b)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.array_equal(sparse_pair_dots(m.indptr, m.indices, None, a, b), want)


def test_unsorted_indices_are_sorted_in_place_first():
    dense = np.array([[0.5, 0.0, 2.0, 1.0], [1.0, 3.0, 0.0, 4.0]], dtype=np.float32)
    m = sp.csr_matrix(dense)
    # the same matrix with each row's entries stored in reverse column order
    rev = sp.csr_matrix((np.concatenate([m.data[s:e][::-1] for s, e in zip(m.indptr[:-1], m.indptr[1:])]),
                         np.concatenate([m.indices[s:e][::-1] for s, e in zip(m.indptr[:-1], m.indptr[1:])]),
                         m.indptr.copy()), shape=m.shape)
    assert not rev.has_sorted_indices
    got = rowdot(rev, np.array([0, 0, 1]), np.array([1, 0, 1]))
    assert rev.has_sorted_indices
    assert np.array_equal(got, np.array([0.5 + 4.0, 0.25 + 4.0 + 1.0, 1.0 + 9.0 + 16.0], dtype=np.float32))


def test_min_sums_are_the_multiset_intersection_and_sizes():
    rng = np.random.default_rng(9)
    counts = rng.integers(0, 4, (300, 60)) * (rng.random((300, 60)) < 0.3)
    m = sp.csr_matrix(counts.astype(np.float32))
    a, b = _pairs(300, 1500, seed=10)
    inter, sa, sb = sparse_pair_min_sums(m.indptr, m.indices, m.data, a, b)
    assert inter.dtype == np.float32
    assert np.array_equal(inter, np.minimum(counts[a], counts[b]).sum(axis=1).astype(np.float32))
    assert np.array_equal(sa, counts[a].sum(axis=1).astype(np.float32))
    assert np.array_equal(sb, counts[b].sum(axis=1).astype(np.float32))


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
