"""Timing helper shared by the benchmark scripts (imported as a sibling module)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable

import numpy as np

TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"


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


def gnu_time(cmd: list[str], timeout_s: float) -> tuple[subprocess.CompletedProcess, float, float | None]:
    """Run ``cmd`` under GNU time (``/usr/bin/time -f maxrss_kb=%M``).

    Returns:
        ``(completed process, wall seconds, peak RSS of the command in MiB or None)``; the process's
        stderr still holds GNU time's line.
    """
    t = time.perf_counter()
    proc = subprocess.run([TIME, "-f", "maxrss_kb=%M", *cmd], capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t
    kb = [int(x.split("=", 1)[1]) for x in proc.stderr.splitlines() if x.startswith("maxrss_kb=")]
    return proc, wall, kb[-1] / 1024 if kb else None
