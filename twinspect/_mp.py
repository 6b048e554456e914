"""The multiprocessing start method of every worker pool in twinspect, chosen in one place."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
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


def exit_with_parent(parent_pid: int, interval_s: float = 1.0) -> None:
    """In a worker process: exit as soon as process ``parent_pid`` (the driver) no longer exists.

    A driver killed from outside (SIGTERM, SIGKILL, an out-of-memory kill) cannot stop its pool; its
    workers would otherwise wait forever to send a result nobody reads, each holding its share of the
    scan in memory (seen here: four workers of two killed large-tree scans, 2.6 GB, alive an hour
    later). A daemon thread checks every ``interval_s`` seconds with ``os.kill(parent_pid, 0)``.

    Args:
        parent_pid: the driver's process id (``os.getpid()`` in the driver).
        interval_s: seconds between checks.
    """
    import os
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive, owned by someone else (cannot happen for our own driver)
                pass

    threading.Thread(target=watch, name="twinspect-parent-watch", daemon=True).start()


def _guarded_init(parent_pid: int, initializer: Callable[..., object] | None, initargs: tuple) -> None:
    exit_with_parent(parent_pid)
    if initializer is not None:
        initializer(*initargs)


def guarded_initializer(
    initializer: Callable[..., object] | None = None, initargs: tuple = ()
) -> tuple[Callable[..., None], tuple]:
    """``(initializer, initargs)`` for a worker pool whose workers exit with this process.

    Wraps a pool's own initializer (None for none) so that each worker first starts
    :func:`exit_with_parent` with this process's id.

    Returns:
        The ``initializer`` and ``initargs`` to pass to ``ProcessPoolExecutor`` or ``Pool``.
    """
    import os

    return _guarded_init, (os.getpid(), initializer, initargs)
