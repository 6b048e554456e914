"""Timing helper shared by the benchmark scripts (imported as a sibling module)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 5) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``runs`` calls, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)
