"""Handing freed memory back to the operating system, chosen in one place.

CPython frees a small object into its own arenas (which go back to the system only when wholly
empty) and a larger one through the C library's ``malloc``, which keeps freed pages of its main heap
mapped until something asks for them back. A scan that drops a large structure late (the per-fragment
token caches before the sub-function pass of a 10-MLOC tree: about 700 MB) would otherwise hold its
pages to the end: the process's resident set, which is what a user's machine runs out of, stays at
its high-water mark. :func:`release` collects garbage and, on glibc, calls ``malloc_trim(0)``, which
returns every free page of the heap (not only its top) to the system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """glibc's ``malloc_trim``, or None on a C library without it (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release() -> bool:
    """Collect garbage, then return the C heap's free pages to the system where the C library can.

    Costs one full garbage collection plus a walk of the heap's free lists (well under a second on a
    multi-GB heap); call it after dropping large structures, not in a loop.

    Returns:
        True when ``malloc_trim`` ran and gave memory back, False otherwise (nothing to give back, or
        a C library without ``malloc_trim``).
    """
    gc.collect()
    return trim()


def trim() -> bool:
    """Return the C heap's free pages to the system where the C library can (no garbage collection).

    For after a phase that freed large numpy temporaries: glibc serves allocations below its dynamic
    mmap threshold (which grows to 32 MB once such a block is freed) from its heaps, and keeps their
    freed pages mapped, so a loop over blocks of a few tens of MB leaves them resident. Cheap: a walk
    of the heaps' free lists, no Python objects visited.

    Returns:
        True when ``malloc_trim`` ran and gave memory back, False otherwise.
    """
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False
