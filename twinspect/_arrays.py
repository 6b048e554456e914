"""numpy helpers shared by the pipelines.

``np.unique`` in numpy ≥ 2.3 finds the distinct values of a plain 1-D array with a hash table
and sorts them afterwards; on the clone pipeline's pair keys (tens of millions of distinct int64)
that took 26 s for 17 M keys on this project's 2-core machine, where a sort and a neighbour
comparison take 1.5–2 s. :func:`unique_sorted` is the sort-based form.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt


def index_dtype(largest: int) -> np.dtype:
    """The smaller signed integer dtype that holds every value in ``[-1, largest]``: int32 up to
    ``2**31 - 1``, else int64. For positions, counts and ranks held by the million (4 bytes an
    entry where they suffice, 8 where they do not).

    Args:
        largest: the largest value the array will hold (e.g. ``n`` for counts of ``n`` items,
            ``n - 1`` or ``n`` for positions into ``n`` items).

    Returns:
        ``np.dtype('int32')`` or ``np.dtype('int64')``.
    """
    return np.dtype(np.int32 if largest <= np.iinfo(np.int32).max else np.int64)


def unique_sorted(values: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """The distinct values of a 1-D array in ascending order (``np.unique`` without its hash table).

    Args:
        values: any 1-D array; not modified unless ``overwrite``.
        overwrite: sort ``values`` in place (a 1-D array the caller no longer needs) instead of a
            copy: one array of the keys less at the peak.

    Returns:
        A new 1-D array of the same dtype (with ``overwrite`` and fewer than two values, ``values``
        itself).
    """
    if overwrite and isinstance(values, np.ndarray) and values.ndim == 1:
        values.sort()
        out = values
    else:
        out = np.sort(np.asarray(values).ravel())
    if len(out) < 2:
        return out
    keep = np.empty(len(out), dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def concatenate_consumed(parts: list[np.ndarray], dtype: npt.DTypeLike | None = None,
                         transform: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """``np.concatenate(parts)`` of 1-D arrays that empties ``parts`` as it copies them.

    ``np.concatenate`` holds every part and the whole result at once: twice the data at the peak.
    Here the result is allocated uninitialised (a large block is mapped lazily: its pages use memory
    once written) and the parts are copied in one by one and dropped, the C heap's freed pages
    handed back every 64 MB (:func:`twinspect._memory.trim`), so resident memory stays near one copy
    when the caller holds no other reference to the parts.

    Args:
        parts: 1-D arrays; the list is emptied.
        dtype: the result's dtype (default: the parts' common type, as ``np.concatenate``).
        transform: applied to each part as it is copied in (it must keep the part's length), e.g.
            mapping codes to columns; the part is dropped once transformed.

    Returns:
        A new 1-D array of ``sum(len(p) for p in parts)`` values.
    """
    from twinspect._memory import trim

    if dtype is None:
        dtype = np.result_type(*parts) if parts else np.float64
    out = np.empty(sum(len(p) for p in parts), dtype=dtype)
    parts.reverse()
    pos = freed = 0
    while parts:
        p = parts.pop()
        out[pos:pos + len(p)] = p if transform is None else transform(p)
        pos += len(p)
        freed += p.nbytes
        del p
        if freed >= 1 << 26:
            trim()
            freed = 0
    trim()
    return out


def shrink(values: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` values of a 1-D array, its tail's memory given back without a copy.

    An array that owns its buffer is resized in place: the C library's ``realloc`` shrinks a large
    mapped block where it lies, so the tail stops using memory and no second array exists at any
    time. **No view of ``values`` may exist** (a view would point into freed memory); the caller
    hands the array over and uses only the result. Any other array (a view, non-contiguous) is
    copied: ``values[:n].copy()``.

    Args:
        values: 1-D array, handed over.
        n: how many leading values to keep, ``0 <= n <= len(values)``.

    Returns:
        A 1-D array of the first ``n`` values (``values`` itself when resized in place).

    Raises:
        ValueError: ``values`` not 1-D, or ``n`` outside ``[0, len(values)]``.
    """
    if values.ndim != 1 or not 0 <= n <= len(values):
        raise ValueError(f"cannot keep {n} values of an array of shape {values.shape}")
    if values.flags.owndata and values.flags.c_contiguous:
        values.resize(n, refcheck=False)
        return values
    return values[:n].copy()


def chunk_bounds(sizes: np.ndarray, max_total: int, max_count: int | None = None) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` ranges of items whose ``sizes`` sum to at most ``max_total`` each.

    For passes over many variable-length lists (a fragment's tokens, a row's entries) whose
    temporaries grow with the entries, not the lists: a range holds as many whole lists as fit, and a
    list longer than ``max_total`` is a range of its own.

    Args:
        sizes: int (N,) non-negative sizes, in the order the items are visited.
        max_total: the most entries in a range (≥ 1).
        max_count: the most items in a range (None: no bound).

    Returns:
        Ranges covering ``0..N`` in order, each non-empty; ``[]`` for N = 0.

    Raises:
        ValueError: ``max_total`` or ``max_count`` below 1.
    """
    if max_total < 1 or (max_count is not None and max_count < 1):
        raise ValueError(f"chunk bounds must be at least 1, got {max_total} entries, {max_count} items")
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    n = len(ends)
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < n:
        base = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + max_total, side="right")))
        if max_count is not None:
            hi = min(hi, lo + max_count)
        out.append((lo, min(hi, n)))
        lo = out[-1][1]
    return out
