"""Where the clone pipeline's sharded stages run: this process, local worker processes, or a Ray cluster.

``twinspect clones`` splits its costly stages into independent *shards* — runs of files to parse, row
ranges of the SourcererCC token-overlap index, rows of the exact neighbour search, chunks of candidate
pairs to align — and maps one module-level function over them with :meth:`ShardExecutor.map`. The
shared, read-only inputs of a stage (the token-bag matrices, the vectors, the aligned token strings)
travel once per worker (a pool initialiser) or once per cluster (Ray's object store), not once per
shard. Results come back in shard order, so a report does not depend on the executor: the same pairs
with ``--executor local`` and ``--executor ray`` (tested on a local Ray instance).

* :class:`InProcess` — ``workers=1``: the shards run here, one after another (no pickling).
* :class:`LocalPool` — worker processes on this machine (``forkserver`` start method where available).
* :class:`RayPool` — Ray tasks (``--executor ray [--address ADDR]``): without an address a local Ray
  instance with ``workers`` CPUs is started and stopped by :meth:`RayPool.close`; with one, the cluster is
  joined (see :mod:`twinspect.ray_cluster`). Parsing tasks read the files by path, so on a real cluster the
  scanned tree must be at the same path on every node (a shared or replicated file system); the other
  stages ship everything they need through the object store. At most ``2 × workers`` shards are in
  flight, which bounds the memory their results hold.

Stage functions take ``(shared, shard)`` and must be importable by name (module-level) so that worker
processes and Ray workers can run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from twinspect.errors import InputError

S = TypeVar("S")
R = TypeVar("R")

#: executor names accepted by :func:`make_shard_executor` and ``twinspect clones --executor``
EXECUTORS = ("local", "ray")


class ShardExecutor(Protocol):
    """What the clone pipeline needs from an executor."""

    name: str
    #: processes (or Ray CPUs) the shards are spread over
    workers: int

    def map(self, fn: Callable[[Any, S], R], shards: Sequence[S], shared: Any = None) -> Iterator[R]:
        """``fn(shared, shard)`` for every shard, yielded in shard order."""

    def close(self) -> None:
        """Release worker processes (and a Ray instance this executor started)."""


class InProcess:
    """Runs every shard in this process (``workers == 1``)."""

    name = "local"
    workers = 1

    def map(self, fn: Callable[[Any, S], R], shards: Sequence[S], shared: Any = None) -> Iterator[R]:
        """``fn(shared, shard)`` for every shard, in order, in this process."""
        for shard in shards:
            yield fn(shared, shard)

    def close(self) -> None:
        """Nothing to release."""


_WORKER_SHARED: Any = None


def _set_shared(shared: Any) -> None:
    global _WORKER_SHARED
    _WORKER_SHARED = shared


_SHARED_PREFIX = "twinspect-shared-"


def _remove_stale_shared_files() -> int:
    """Remove the shared-input files left in the temporary directory by killed runs (their process id,
    which the file name holds, is gone); returns how many were removed."""
    import glob
    import tempfile

    removed = 0
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{_SHARED_PREFIX}*-*.pickle")):
        try:
            pid = int(os.path.basename(path)[len(_SHARED_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # no such process: the run that wrote it was killed
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
        except OSError:  # the process exists (another user's): leave its file alone
            pass
    return removed


def _load_shared(path: str) -> None:
    """A worker's initialiser: ``shared`` read from the file :meth:`LocalPool.map` pickled it to."""
    import pickle

    with open(path, "rb") as fh:
        _set_shared(pickle.load(fh))


def _call_with_shared(fn: Callable[[Any, Any], Any], shard: Any) -> Any:
    return fn(_WORKER_SHARED, shard)


class LocalPool:
    """Worker processes on this machine; a fresh pool per :meth:`map` call receives ``shared`` once.

    ``shared`` is pickled once, straight to a temporary file that each worker reads in its
    initialiser (removed when the map ends; a killed run's file, named after its process id, by the
    next map), not handed to the pool as initialiser arguments: those are pickled into an in-memory
    buffer per worker start, which for the token-overlap index's matrices of a 13-MLOC tree held
    about 1 GB in this process at its memory peak. Once the file is written the map holds no
    reference to ``shared``, so a caller that drops its own frees it while the shards run.

    Args:
        workers: number of processes (≥ 2; use :class:`InProcess` for one).

    Raises:
        InputError: ``workers < 2``.
    """

    name = "local"

    def __init__(self, workers: int):
        if workers < 2:
            raise InputError(f"a local pool needs at least 2 workers, got {workers}")
        self.workers = int(workers)

    def map(self, fn: Callable[[Any, S], R], shards: Sequence[S], shared: Any = None) -> Iterator[R]:
        """``fn(shared, shard)`` for every shard in worker processes, yielded in shard order."""
        from collections import deque
        from concurrent.futures import ProcessPoolExecutor

        from twinspect._mp import guarded_initializer, mp_context

        if not shards:
            return
        import pickle
        import tempfile

        _remove_stale_shared_files()
        fd, path = tempfile.mkstemp(prefix=f"{_SHARED_PREFIX}{os.getpid()}-", suffix=".pickle")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(shared, fh, protocol=pickle.HIGHEST_PROTOCOL)
            del shared  # the workers read it from the file: the caller may let go of it
            init, initargs = guarded_initializer(_load_shared, (path,))  # workers exit if this process is killed
            with ProcessPoolExecutor(max_workers=min(self.workers, len(shards)), mp_context=mp_context(),
                                     initializer=init, initargs=initargs) as pool:
                futures = deque(pool.submit(_call_with_shared, fn, shard) for shard in shards)
                while futures:  # a result is dropped here once yielded (a list of futures would hold them all)
                    yield futures.popleft().result()
        finally:
            os.unlink(path)

    def close(self) -> None:
        """Nothing to release (each map call closes its pool)."""


def _ray_call(fn: Callable[[Any, Any], Any], shared: Any, shard: Any) -> Any:
    return fn(shared, shard)


class RayPool:
    """Ray tasks, one per shard, ``shared`` placed once in the object store per :meth:`map` call.

    Args:
        address: Ray cluster to join; None starts a local instance with ``workers`` CPUs.
        workers: CPUs of a local instance, and the in-flight bound (2 × workers shards); when joining a
            cluster, None means the cluster's CPU count.
        object_store_bytes: object store size of a local instance (None: Ray's default, 30 % of RAM).

    Raises:
        InputError: Ray is missing or cannot start or join the cluster.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 object_store_bytes: int | None = None):
        from twinspect import ray_cluster

        self._ray = ray_cluster.require_ray()
        self.address = address
        self._owns = ray_cluster.connect(address, num_cpus=workers if not address else None,
                                         object_store_memory=object_store_bytes)
        cpus = int(self._ray.cluster_resources().get("CPU", 1))
        self.workers = int(workers) if workers else max(1, cpus)
        self._remote = self._ray.remote(_ray_call).options(num_cpus=1, max_retries=1)

    def map(self, fn: Callable[[Any, S], R], shards: Sequence[S], shared: Any = None) -> Iterator[R]:
        """``fn(shared, shard)`` as Ray tasks, at most ``2 × workers`` in flight, yielded in shard order.

        Raises:
            RuntimeError: a task failed (its exception is chained), e.g. a worker died twice.
        """
        ray = self._ray
        if not shards:
            return
        shared_ref = ray.put(shared)
        fn_ref = ray.put(fn)
        window = max(2, 2 * self.workers)
        pending: list[Any] = []
        it = iter(shards)
        for shard in it:
            pending.append(self._remote.remote(fn_ref, shared_ref, shard))
            if len(pending) >= window:
                break
        while pending:
            ref = pending.pop(0)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise RuntimeError(f"a Ray task of the clone pipeline failed: {type(exc).__name__}: "
                                   f"{str(exc)[-500:]}") from exc
            nxt = next(it, None)
            if nxt is not None:
                pending.append(self._remote.remote(fn_ref, shared_ref, nxt))
            yield result
        del shared_ref

    def close(self) -> None:
        """Shut Ray down when this executor started or joined it."""
        if self._owns:
            from twinspect import ray_cluster

            ray_cluster.shutdown()
            self._owns = False


def default_workers() -> int:
    """Worker processes of a local run: ``min(2, os.cpu_count())`` (this machine's measured sweet spot)."""
    return max(1, min(2, os.cpu_count() or 1))


def check_executor(name: str, address: str | None = None, workers: int | None = None) -> None:
    """Validate an executor choice before any work starts (imports nothing heavy).

    Raises:
        InputError: unknown name, ``address`` with the local executor, ``workers < 1``, or Ray missing.
    """
    import importlib.util

    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    if name == "local" and address:
        raise InputError("--address only applies to --executor ray")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if name == "ray" and importlib.util.find_spec("ray") is None:
        from twinspect.ray_cluster import INSTALL_HINT

        raise InputError(f"executor 'ray' needs Ray, which is not installed: {INSTALL_HINT}")


def make_shard_executor(name: str = "local", *, address: str | None = None,
                        workers: int | None = None) -> ShardExecutor:
    """The executor called ``name``.

    Args:
        name: ``"local"`` (this process when ``workers == 1``, else a local pool) or ``"ray"``.
        address: Ray cluster to join (``ray`` only); None starts a local Ray instance.
        workers: processes / Ray CPUs; None = :func:`default_workers` locally, the cluster's CPUs on Ray.

    Returns:
        A :class:`ShardExecutor`; call ``close()`` when done.

    Raises:
        InputError: see :func:`check_executor`; Ray cannot start or join.
    """
    check_executor(name, address, workers)
    if name == "ray":
        return RayPool(address, workers if workers is not None else (None if address else default_workers()))
    n = default_workers() if workers is None else workers
    return InProcess() if n == 1 else LocalPool(n)
