"""The multiprocessing start method of every worker pool in twinspect, chosen in one place."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext


def mp_context() -> BaseContext:
    """``forkserver`` where the platform has it, else ``spawn`` (never ``fork``: the parent may hold
    threads — progress bars, BLAS, a second candidate source — that a forked child would inherit
    mid-state).

    Returns:
        A multiprocessing context for ``ProcessPoolExecutor(mp_context=...)`` or ``Pool``.
    """
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
