"""Compiled loops of the clone pipeline's candidate search (numba), behind numpy signatures.

Two inner loops of :mod:`twinspect.code.candidates` and :mod:`twinspect.code.vectors` do little
work per element but run billions of times on a 10-MLOC tree, where scipy's general sparse
routines spend most of their time building intermediate matrices:

* :func:`sparse_pair_dots` — the dot product of rows ``a[i]`` and ``b[i]`` of one CSR matrix, for
  millions of pairs: a merge of the two rows' sorted column indices. scipy's
  ``m[a].multiply(m[b]).sum(axis=1)`` builds two gathered matrices and their product first (about
  10× slower on the lexical encoder's vectors).
* :func:`prefix_join` — the probe loop of SourcererCC's prefix-filter index (see
  :func:`twinspect.code.candidates.overlap_pairs`): each probe row walks the inverted lists of its
  prefix items and counts, per later row, how many prefix items the two share. The sparse product
  it replaces materialised every (row, partner) count, 99 % of which miss the extended prefix
  filter.

Every function is compiled on first use and cached on disk by numba (``cache=True``: the
package's ``__pycache__``, or numba's user-wide cache directory when that is not writable), and
releases the GIL (``nogil=True``) so that threads can run them side by side.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _float_dots(indptr: Any, indices: Any, data: Any, a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    for i in range(a.shape[0]):
        p, pe = indptr[a[i]], indptr[a[i] + 1]
        q, qe = indptr[b[i]], indptr[b[i] + 1]
        acc = out[i]
        while p < pe and q < qe:
            x, y = indices[p], indices[q]
            if x == y:
                acc += data[p] * data[q]
                p += 1
                q += 1
            elif x < y:
                p += 1
            else:
                q += 1
        out[i] = acc


@njit(cache=True, nogil=True)
def _common_counts(indptr: Any, indices: Any, a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    for i in range(a.shape[0]):
        p, pe = indptr[a[i]], indptr[a[i] + 1]
        q, qe = indptr[b[i]], indptr[b[i] + 1]
        c = 0
        while p < pe and q < qe:
            x, y = indices[p], indices[q]
            if x == y:
                c += 1
                p += 1
                q += 1
            elif x < y:
                p += 1
            else:
                q += 1
        out[i] = c


def sparse_pair_dots(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray | None,
                     a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dot products of row pairs of one CSR matrix whose column indices are sorted within each row.

    Args:
        indptr, indices: the CSR structure (int32 or int64); ``indices`` ascending within each row
            (scipy's ``has_sorted_indices``) and without duplicates — not checked here.
        data: the stored values (float32 or float64), or None for a boolean matrix (every stored
            entry counts 1).
        a, b: int64 (P,) row ids.

    Returns:
        (P,) array: with ``data``, of ``data``'s dtype, each product summed in ascending column
        order in that dtype (the order and precision of scipy's sparse matrix product ``m @ m.T``
        on sorted indices, so the values are the same bits); without, int64 counts of the columns
        the two rows share.
    """
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    if data is None:
        counts = np.zeros(len(a), dtype=np.int64)
        _common_counts(indptr, indices, a, b, counts)
        return counts
    out = np.zeros(len(a), dtype=data.dtype)
    _float_dots(indptr, indices, data, a, b, out)
    return out


@njit(cache=True, nogil=True)
def _min_sums(indptr: Any, indices: Any, data: Any, a: Any, b: Any, inter: Any, sum_a: Any,
              sum_b: Any) -> None:  # pragma: no cover - compiled
    for i in range(a.shape[0]):
        p, pe = indptr[a[i]], indptr[a[i] + 1]
        q, qe = indptr[b[i]], indptr[b[i] + 1]
        shared, total_a, total_b = inter[i], sum_a[i], sum_b[i]
        for k in range(p, pe):
            total_a += data[k]
        for k in range(q, qe):
            total_b += data[k]
        while p < pe and q < qe:
            x, y = indices[p], indices[q]
            if x == y:
                shared += min(data[p], data[q])
                p += 1
                q += 1
            elif x < y:
                p += 1
            else:
                q += 1
        inter[i], sum_a[i], sum_b[i] = shared, total_a, total_b


def sparse_pair_min_sums(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, a: np.ndarray,
                         b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multiset intersection and sizes of row pairs of one count matrix (CSR, sorted column indices).

    Args:
        indptr, indices, data: the CSR arrays; ``indices`` ascending within each row, no duplicates
            (not checked here); ``data`` non-negative counts (any numeric dtype).
        a, b: int64 (P,) row ids.

    Returns:
        ``(inter, size_a, size_b)``, each (P,) of ``data``'s dtype, summed in ascending column
        order: ``Σ_j min(A_j, B_j)``, ``Σ_j A_j`` and ``Σ_j B_j`` (exact for integer counts below
        2**24 in float32).
    """
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    inter = np.zeros(len(a), dtype=data.dtype)
    sum_a = np.zeros(len(a), dtype=data.dtype)
    sum_b = np.zeros(len(a), dtype=data.dtype)
    _min_sums(indptr, indices, data, a, b, inter, sum_a, sum_b)
    return inter, sum_a, sum_b


@njit(cache=True, nogil=True)
def _prefix_join(lo: int, hi: int, p_indptr: Any, p_items: Any, inv_indptr: Any, inv_rows: Any, sizes: Any,
                 need: Any, rest: Any, last: Any, theta: float) -> Any:  # pragma: no cover - compiled
    n = sizes.shape[0]
    count = np.zeros(n, np.int32)
    touched = np.empty(n, np.int64)
    room = 1 << 12
    out_a = np.empty(room, np.int64)
    out_b = np.empty(room, np.int64)
    m = 0
    for a in range(lo, hi):
        size_a = sizes[a]
        largest = size_a / theta + 1e-9
        nt = 0
        for k in range(p_indptr[a], p_indptr[a + 1]):
            item = p_items[k]
            s0, s1 = inv_indptr[item], inv_indptr[item + 1]
            # the first row after a in the item's list (rows ascend)
            left, right = s0, s1
            while left < right:
                mid = (left + right) >> 1
                if inv_rows[mid] <= a:
                    left = mid + 1
                else:
                    right = mid
            for j in range(left, s1):
                b = inv_rows[j]
                if sizes[b] > largest:  # rows ascend in size: no later row passes the size filter
                    break
                if count[b] == 0:
                    touched[nt] = b
                    nt += 1
                count[b] += 1
        need_a = need[a]
        for t in range(nt):
            b = touched[t]
            shared = count[b]
            count[b] = 0
            if shared < min(need_a, need[b]):
                continue
            size_b = sizes[b]
            if size_a < theta * size_b - 1e-9:
                continue
            if last[a] <= last[b]:
                bound = shared + min(rest[a], size_b - shared)
            else:
                bound = shared + min(rest[b], size_a - shared)
            if bound < theta * size_b - 1e-6:
                continue
            if m == room:
                room *= 2
                grown = np.empty(room, np.int64)
                grown[:m] = out_a[:m]
                out_a = grown
                grown = np.empty(room, np.int64)
                grown[:m] = out_b[:m]
                out_b = grown
            out_a[m] = a
            out_b[m] = b
            m += 1
    return out_a[:m].copy(), out_b[:m].copy()


def prefix_join(lo: int, hi: int, p_indptr: np.ndarray, p_items: np.ndarray, inv_indptr: np.ndarray,
                inv_rows: np.ndarray, sizes: np.ndarray, need: np.ndarray, rest: np.ndarray, last: np.ndarray,
                theta: float) -> tuple[np.ndarray, np.ndarray]:
    """The candidate pairs of probe rows ``lo..hi − 1`` of the token-overlap index.

    Rows are bags in ascending size order (SourcererCC's order); each row's *prefix* is a set of
    item ids. A pair ``(a, b)``, ``lo ≤ a < hi``, ``a < b``, is returned when it passes, in this
    order, the filters of :func:`twinspect.code.candidates.overlap_pairs`: its prefixes share at
    least ``min(need[a], need[b])`` items (the extended prefix filter), ``sizes[a] ≥ theta ·
    sizes[b]`` (the size filter), and ``shared + min(rest, other size − shared) ≥ theta ·
    sizes[b]``, where ``rest`` is the suffix length of the row whose prefix ends first in the
    global order (``last`` = rank of a prefix's last item; the suffix bound).

    Args:
        lo, hi: the probe rows.
        p_indptr, p_items: the prefixes as CSR (N + 1,) / (nnz,) arrays (row → item ids).
        inv_indptr, inv_rows: the inverted index, CSC of the same matrix (item → rows, each list
            ascending).
        sizes: int64 (N,) bag sizes, ascending.
        need: int64 (N,) shared prefix items each row asks of a partner.
        rest: int64 (N,) suffix length (size − prefix length) of each row.
        last: int64 (N,) global rank of each prefix's last item.
        theta: the overlap threshold, in (0, 1].

    Returns:
        ``(a, b)``: int64 (P,) row pairs, ``a`` ascending, not yet checked for overlapping spans
        or the exact overlap.
    """
    return _prefix_join(int(lo), int(hi), p_indptr, p_items, inv_indptr, inv_rows, sizes, need, rest, last,
                        float(theta))
