"""twinspect._memory: handing freed heap pages back to the system."""

from __future__ import annotations

import sys

import pytest

from twinspect._memory import release


def _rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and needs glibc's malloc_trim")
def test_release_gives_freed_small_allocations_back():
    """200,000 byte strings of ~1 KB (malloc'd, not in CPython's arenas) held then dropped: the resident set
    falls back by most of their size only after release()."""
    blocks = [bytes(1000) + i.to_bytes(4, "little") for i in range(200_000)]
    keep = blocks[::1000]  # a few survivors scattered through the heap, as a real scan leaves
    held = _rss_kib()
    del blocks
    release()
    after = _rss_kib()
    assert held - after > 100_000, (held, after)  # of ~200 MB, most is given back
    assert len(keep) == 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and needs glibc's malloc_trim")
def test_trim_gives_freed_numpy_blocks_back():
    """Once a 20 MB array is freed, glibc raises its mmap threshold to 20 MB and serves smaller blocks from
    its heap: 60 blocks of 4 MB held then dropped (one small survivor between each two) stay resident
    until trim(). Run in a fresh interpreter: the allocator's state after other tests (its threshold, what
    lies at the top of the heap) would decide how much a plain ``del`` already gives back."""
    import json
    import subprocess

    code = """
import json
import numpy as np
from twinspect._memory import trim

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))

big = np.ones(20 << 20, dtype=np.uint8)
del big  # raises glibc's mmap threshold above the blocks below
blocks, keep = [], []
for _ in range(60):
    blocks.append(np.ones(4 << 20, dtype=np.uint8))
    keep.append(np.ones(1 << 10, dtype=np.uint8))
held = rss()
del blocks
freed = rss()
trim()
print(json.dumps([held, freed, rss(), len(keep)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    held, freed, after, kept = json.loads(out.stdout)
    assert freed - after > 100_000, (held, freed, after)  # of ~240 MB, most comes back only at trim()
    assert kept == 60
