"""Compiled loops of the token-overlap index (numba), behind numpy signatures.

The candidate search's SourcererCC index (:func:`twinspect.code.candidates.overlap_pairs`) does
little work per element but billions of times on a 10-MLOC tree, where scipy's general sparse
routines spent most of their time building intermediate matrices:

* :func:`prefix_join` — the probe loop of the prefix-filter index: each probe row walks the
  inverted lists of its prefix items and counts, per later row, how many prefix items the two
  share. The sparse product it replaces materialised every (row, partner) count, 99 % of which miss
  the extended prefix filter.
* :func:`shared_column_counts` — the exact overlap of the pairs that pass: how many columns two
  rows of a boolean CSR matrix share, a merge of their sorted column indices (scipy's
  ``m[a].multiply(m[b]).sum(axis=1)`` built two gathered matrices and their product first).

Both are compiled on first use and cached on disk by numba (``cache=True``: the package's
``__pycache__``, or numba's user-wide cache directory when that is not writable) and release the
GIL (``nogil=True``). The clone pipeline calls them in its worker processes (the index's row
chunks, :mod:`twinspect.code.executors`), or in the driver when it runs without workers: loading
numba costs a process about 115 MB, which the driver of a large scan, whose memory is the scan's
bound, does not pay.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


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


def shared_column_counts(indptr: np.ndarray, indices: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many columns rows ``a[i]`` and ``b[i]`` of one boolean CSR matrix share, for each i.

    Args:
        indptr, indices: the CSR structure (int32 or int64); ``indices`` ascending within each row
            and without duplicates (not checked here).
        a, b: int (P,) row ids.

    Returns:
        int64 (P,) counts.
    """
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    counts = np.zeros(len(a), dtype=np.int64)
    _common_counts(indptr, indices, a, b, counts)
    return counts


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
