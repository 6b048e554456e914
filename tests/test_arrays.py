"""numpy helpers (twinspect._arrays) against numpy's own results."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect._arrays import chunk_bounds, concatenate_consumed, index_dtype, shrink, unique_sorted


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


def test_concatenate_consumed_equals_np_concatenate_and_empties_the_list():
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 9, n) for n in (0, 5, 1, 17)] + [np.arange(3, dtype=np.int32)]
    want = np.concatenate(parts)
    got = concatenate_consumed(parts)
    assert parts == [] and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert concatenate_consumed([np.ones(2)], np.float32).dtype == np.float32
    assert len(concatenate_consumed([])) == 0
    # each part transformed as it is copied in (as the trigram counts map codes to columns)
    vocab = np.array([2, 5, 9, 40])
    parts = [np.array([9, 2]), np.array([], dtype=np.int64), np.array([40, 5, 5])]
    got = concatenate_consumed(parts, np.int32, transform=lambda p: np.searchsorted(vocab, p))
    assert parts == [] and got.dtype == np.int32
    np.testing.assert_array_equal(got, [2, 0, 3, 1, 1])


def test_concatenate_consumed_holds_about_one_copy():
    """Resident peak while concatenating 160 MB of heap-allocated parts: near one copy, where
    np.concatenate holds two (run in a fresh interpreter: the allocator's state is part of it)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import re, sys, numpy as np
        from twinspect._arrays import concatenate_consumed
        def hwm():  # this process's resident peak (VmHWM: not inherited across fork and exec, ru_maxrss is)
            return int(re.search(r"VmHWM:\\s*(\\d+)", open("/proc/self/status").read()).group(1)) * 1024
        x = np.ones(4 << 20); del x  # a freed 32 MB block raises glibc's mmap threshold, as in a long run
        parts = [np.full(1 << 19, i, dtype=np.int64) for i in range(40)]  # 40 x 4 MB on the heap
        total = sum(p.nbytes for p in parts)
        before = hwm()
        out = concatenate_consumed(parts) if sys.argv[1] == "consumed" else np.concatenate(parts)
        assert (out[::1 << 19] == np.arange(40)).all()
        print((hwm() - before) / total)
    """)
    rise = {mode: float(subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                                       check=True).stdout) for mode in ("consumed", "plain")}
    assert rise["plain"] > 0.9  # the measurement sees a second copy where there is one
    assert rise["consumed"] < 0.3


def test_shrink_keeps_the_leading_values_in_place_or_copies_a_view():
    values = np.arange(10, dtype=np.int32)
    got = shrink(values, 4)
    assert got is values and got.tolist() == [0, 1, 2, 3]
    base = np.arange(10.0)
    view = base[2:]
    got = shrink(view, 3)
    assert got.tolist() == [2.0, 3.0, 4.0] and not np.shares_memory(got, base)
    assert base.tolist() == list(np.arange(10.0))  # the viewed array is left alone
    assert len(shrink(np.arange(5), 0)) == 0 and len(shrink(np.arange(5), 5)) == 5
    for bad in (-1, 6):
        with pytest.raises(ValueError, match="cannot keep"):
            shrink(np.arange(5), bad)
    with pytest.raises(ValueError, match="cannot keep"):
        shrink(np.zeros((2, 2)), 1)


def test_shrink_gives_the_tail_back():
    """A 200 MB array cut to a tenth uses about a tenth resident afterwards, without a second copy
    at any time (fresh interpreter: the resident figures are the process's own)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import re, numpy as np
        from twinspect._arrays import shrink
        def status(key):
            return int(re.search(key + r":\\s*(\\d+)", open("/proc/self/status").read()).group(1)) * 1024
        x = np.arange(25 << 20, dtype=np.int64)  # 200 MB, every page written
        full = status("VmRSS")
        x = shrink(x, 5 << 20)
        assert x[-1] == (5 << 20) - 1
        print(full - status("VmRSS"), status("VmHWM") - full)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    freed, rise = map(int, out.split())
    assert freed > 150 << 20  # the 160 MB tail went back
    assert rise < 20 << 20  # and no copy of the kept 40 MB was made beside it


@pytest.mark.parametrize("max_total,max_count", [(1, None), (10, None), (10, 2), (1000, None), (1000, 3)])
def test_chunk_bounds_cover_the_items_in_order_within_the_bounds(max_total, max_count):
    sizes = np.array([3, 0, 7, 12, 1, 1, 0, 0, 9, 4])  # 12 alone is over the bound of 10
    chunks = chunk_bounds(sizes, max_total, max_count)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(sizes)
    assert all(hi > lo for lo, hi in chunks) and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    for lo, hi in chunks:
        total = int(sizes[lo:hi].sum())
        assert hi - lo == 1 or total <= max_total  # an item over the bound is a chunk of its own
        assert max_count is None or hi - lo <= max_count
        # greedy: the next item would have broken a bound
        if hi < len(sizes):
            assert total + sizes[hi] > max_total or (max_count is not None and hi - lo == max_count)
    assert chunk_bounds(np.zeros(0, dtype=np.int64), 5) == []
    with pytest.raises(ValueError, match="at least 1"):
        chunk_bounds(sizes, 0)
