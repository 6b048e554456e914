"""Where a campaign's model executions run: local worker processes (default) or a Ray cluster.

An executor takes one saved model (``.keras``) and its inputs (``.npz`` with array ``x``) and runs them on
every system under test, returning per system the result dict the oracles read: the fields of
:class:`~twinspect.dl.fuzz.backends.WorkerResult` (``status``, ``error_type``, ``message``, ``frames``,
``seconds``, ``out``) plus ``outputs`` (list of arrays, the model's outputs in order) when ``status ==
"ok"``. Both executors write each system's outputs to ``<model dir>/out-<system>.npz`` (arrays ``o0``,
``o1``, ...) and put that path in ``out``, so campaign state, findings and reports do not depend on the
executor.

* :class:`LocalExecutor` (``--executor local``): one long-lived worker process per system on this
  machine, systems run one after another, or up to ``--jobs N`` of them at the same time.
* :class:`RayExecutor` (``--executor ray [--address ADDR]``): one Ray actor per system (placed with Ray's
  ``SPREAD`` strategy, one logical CPU each), each owning the same kind of worker process on its node, so a
  library segfault, abort or hang still kills only that worker, which the actor restarts on the next
  request. The model and input *bytes* are shipped through Ray's object store (once per model, shared by
  all actors) and the outputs come back as bytes, so the nodes need twinspect and the backends' libraries
  installed but no shared file system. The systems of one model run concurrently. An actor that dies
  itself (node lost, Ray's memory monitor) is recorded as a ``crash`` with ``error_type`` of the Ray
  exception and replaced by a fresh actor on the next request. Without ``address`` a local Ray instance is
  started (``num_cpus`` logical CPUs, no dashboard, Ray's logs not forwarded) and shut down by
  :meth:`RayExecutor.close`; with an address (``"auto"``, ``"HOST:6379"`` or ``"ray://HOST:10001"``) the
  existing cluster is joined and left running. Ray is the optional ``ray`` extra.

Start-up and shutdown (issue 20: Ray's start-up tax). :meth:`Executor.start` is called with all systems
before the first model. :class:`RayExecutor` then creates every actor at once and waits for all of them
together, and each actor starts its worker process in its constructor, so the libraries' imports (Keras,
TensorFlow, JAX, torch, ONNX Runtime) run in parallel in the workers while the driver goes on (importing
Keras, building the warm-up model); the campaign's warm-up request then finds them imported or nearly so.
The workers stay up for the whole run, so a library is imported once per actor and run, never per model.
:meth:`Executor.close` stops all workers at once (Ray: every actor's ``close`` is sent before any answer is
awaited; the workers are killed, not asked to exit, as they hold no state). Both executors record where
their own time went in ``timings`` (seconds): ``init_s`` (Ray: starting or joining the cluster),
``actors_s`` (Ray: creating the actors until all answered), ``close_s`` (stopping workers, actors and a Ray
instance this executor started); :func:`twinspect.dl.fuzz.campaign.run_campaign` copies them into the run
record as ``executor_start_s`` (``init_s + actors_s``) and ``executor_close_s``.
"""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from twinspect._io import atomic_path
from twinspect.dl.fuzz import backends as bk
from twinspect.errors import InputError
from twinspect.ray_cluster import INSTALL_HINT

#: executor names accepted by :func:`make_executor` and ``twinspect fuzz run --executor``
EXECUTORS = ("local", "ray")


class Executor(Protocol):
    """What a campaign needs from an executor."""

    name: str

    def start(self, systems: list[str]) -> None:
        """Get ``systems`` ready before the first model (see the module docstring); idempotent."""

    def unavailable(self, system: str) -> str | None:
        """None when ``system`` can run on this executor, else the reason."""

    def run(self, systems: list[str], model: Path, inputs: Path) -> dict[str, dict]:
        """Run ``model`` on ``inputs`` on each of ``systems``; never raises for a backend failure."""

    def close(self) -> None:
        """Release workers (and a Ray instance this executor started)."""


def load_outputs(path: Path) -> list[np.ndarray]:
    """A worker's saved outputs (``o0``, ``o1``, ... of an .npz, in output order) as a list of arrays.

    Raises:
        OSError / ValueError: the file is missing or not an .npz.
    """
    with np.load(path) as z:
        return [z[f"o{i}"] for i in range(len(z.files))]


class LocalExecutor:
    """Each system in its own long-lived local worker process; systems run one after another (the default), or
    up to ``jobs`` of them at the same time.

    Args:
        timeout_s: per-model time limit of a worker in seconds (a worker over it is killed and restarted).
        jobs: how many systems of one model may run at the same time (each in its own worker process, so up
            to ``jobs`` busy processes); the systems that took longest so far start first. Results and their
            order do not depend on it.

    Raises:
        InputError: ``jobs < 1``.
    """

    name = "local"

    def __init__(self, timeout_s: float = 60.0, jobs: int = 1):
        if jobs < 1:
            raise InputError(f"jobs {jobs} must be >= 1")
        self.timeout_s = timeout_s
        self.jobs = int(jobs)
        self.workers: dict[str, bk.Worker] = {}
        #: system -> [runs, seconds]: what it took so far (longest first when ``jobs > 1``)
        self.spent: dict[str, list[float]] = {}
        #: seconds spent by this executor itself: ``close_s`` (see the module docstring)
        self.timings: dict[str, float] = {"init_s": 0.0, "actors_s": 0.0, "close_s": 0.0}

    def start(self, systems: list[str]) -> None:
        """Nothing: a local worker starts on its system's first model (the campaign's warm-up request)."""

    def unavailable(self, system: str) -> str | None:
        """None when ``system``'s modules are importable here, else the missing module."""
        return bk.available(system)

    def _run_one(self, system: str, model: Path, inputs: Path) -> dict:
        out = Path(model).parent / f"out-{system}.npz"
        r = self.workers[system].run(model, inputs, out)
        d = r.to_json()
        if r.status == "ok":
            d["outputs"] = load_outputs(out)
        return d

    def run(self, systems: list[str], model: Path, inputs: Path) -> dict[str, dict]:
        """Run ``model`` on ``inputs`` on each system (in turn, or ``jobs`` at a time); result dicts (see the
        module docstring) in the order of ``systems``."""
        for s in systems:
            if s not in self.workers:
                self.workers[s] = bk.make_backend(s, timeout_s=self.timeout_s)
        if self.jobs == 1 or len(systems) < 2:
            res = {s: self._run_one(s, model, inputs) for s in systems}
        else:
            def mean_s(s: str) -> float:
                n, sec = self.spent.get(s, [0, 0.0])
                return sec / n if n else 0.0

            with ThreadPoolExecutor(min(self.jobs, len(systems))) as pool:
                futures = {s: pool.submit(self._run_one, s, model, inputs) for s in sorted(systems, key=mean_s, reverse=True)}
                res = {s: futures[s].result() for s in systems}
        for s, d in res.items():
            n, sec = self.spent.get(s, [0, 0.0])
            self.spent[s] = [n + 1, sec + float(d.get("seconds") or 0.0)]
        return res

    def close(self) -> None:
        """Stop all worker processes (all at once: each may take seconds to exit); adds the seconds to
        ``timings["close_s"]``."""
        t0 = time.perf_counter()
        if self.workers:
            with ThreadPoolExecutor(len(self.workers)) as pool:
                list(pool.map(lambda w: w.close(), self.workers.values()))
        self.workers.clear()
        self.timings["close_s"] = round(self.timings["close_s"] + time.perf_counter() - t0, 2)


class BackendActor:
    """Body of the Ray actor of one system: owns a local worker process and a scratch directory on its node.

    Not used directly; :class:`RayExecutor` wraps it with ``ray.remote``. The worker process is started
    here (when the system's modules are importable on this node), so its library imports begin as soon as
    the actor exists instead of on the first request; a worker that dies later restarts on the next request.

    Args:
        system: full system name.
        timeout_s: per-model time limit of the worker, seconds.
        argv: worker command (``python -m`` module and arguments) instead of the backend factory's.
    """

    def __init__(self, system: str, timeout_s: float, argv: list[str] | None = None):
        self.system = system
        self.custom = argv is not None
        self.dir = Path(tempfile.mkdtemp(prefix=f"twinspect-ray-{system}-"))
        self.worker = bk.Worker(system, argv, timeout_s=timeout_s) if argv else bk.make_backend(system, timeout_s=timeout_s)
        if self.unavailable() is None:
            self.worker._start()  # imports begin now; the first request still gets the worker's startup_s

    def unavailable(self) -> str | None:
        """None when the system's modules are importable on this actor's node (or a custom worker), else the reason."""
        return None if self.custom else bk.available(self.system)

    def where(self) -> dict:
        """``{"node": Ray node id, "pid": actor process id, "host": hostname, "worker_pid": worker process id
        (None when the system cannot run on this node), "worker_restarts": worker restarts so far}``."""
        import socket

        import ray

        proc = self.worker.proc
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(), "host": socket.gethostname(),
                "worker_pid": proc.pid if proc is not None else None, "worker_restarts": self.worker.restarts}

    def run(self, model_name: str, model_bytes: bytes, inputs_bytes: bytes) -> tuple[dict, bytes | None]:
        """Write the files into the scratch directory, run the worker, return (result dict, outputs ``.npz`` bytes).

        Files are replaced (new inode) so the worker's model cache never serves a stale model.
        """
        model, inputs, out = self.dir / model_name, self.dir / "inputs.npz", self.dir / "out.npz"
        for path, blob in ((model, model_bytes), (inputs, inputs_bytes)):
            tmp = path.with_name(path.name + ".part")
            tmp.write_bytes(blob)
            os.replace(tmp, path)
        out.unlink(missing_ok=True)
        r = self.worker.run(model, inputs, out)
        data = out.read_bytes() if r.status == "ok" else None
        return r.to_json(), data

    def close(self) -> None:
        """Kill the worker (it holds no state; a graceful exit of TensorFlow or torch takes seconds) and remove
        its stderr file and the scratch directory."""
        import shutil

        self.worker.kill()
        self.worker.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RayExecutor:
    """One Ray actor per system; a model's systems run concurrently on the cluster (see the module docstring).

    Args:
        timeout_s: per-model time limit of each worker, seconds.
        address: Ray cluster address to join; None starts a local Ray instance.
        num_cpus: logical CPUs of a local instance (one per actor is reserved; default: one per known system).
        startup_s: extra seconds a worker may take for its library imports on its first request (the
            actor's answer is awaited at most ``timeout_s + startup_s + 60`` seconds).
        argv: per-system worker command (``python -m`` module and arguments) replacing the backend
            factory's, e.g. a deliberately crashing test worker; systems not in it use the factory.

    Attributes:
        stats: system -> ``{"runs", "actor_deaths", "node", "pid", "host", "worker_pid", "worker_restarts",
            "created_s", "ready_s"}``: where the system's actor ran, and when (seconds since this executor
            was made) its current actor was created and first answered.
        timings: ``init_s``, ``actors_s``, ``close_s`` (see the module docstring) and ``first_run_s`` (seconds
            since this executor was made at which :meth:`run` was first called; None before).

    Raises:
        InputError: Ray is not installed, or the cluster cannot be started or joined.
    """

    name = "ray"

    def __init__(self, timeout_s: float = 60.0, address: str | None = None, num_cpus: int | None = None,
                 startup_s: float = 120.0, argv: dict[str, list[str]] | None = None):
        from twinspect import ray_cluster

        self._t0 = time.perf_counter()
        self._ray = ray_cluster.require_ray()
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.address = address
        self.argv = dict(argv or {})
        self.actors: dict[str, Any] = {}
        self.stats: dict[str, dict] = {}
        self.timings: dict[str, Any] = {"init_s": 0.0, "actors_s": 0.0, "close_s": 0.0, "first_run_s": None}
        self._owns = ray_cluster.connect(address, num_cpus=num_cpus or len(bk.SYSTEMS),
                                         object_store_memory=200 * 2**20)
        self.timings["init_s"] = round(time.perf_counter() - self._t0, 2)

    def _since(self) -> float:
        return round(time.perf_counter() - self._t0, 2)

    def start(self, systems: list[str]) -> None:
        """Create the actors of ``systems`` that do not exist yet, all at once, and wait until every one has
        answered (its worker process is then starting: see :class:`BackendActor`); adds the seconds to
        ``timings["actors_s"]``.

        Raises:
            ray.exceptions.GetTimeoutError: an actor did not answer within ``startup_s + 60`` seconds.
            ray.exceptions.RayError: an actor could not be created.
        """
        ray = self._ray
        new = [s for s in dict.fromkeys(systems) if s not in self.actors]
        if not new:
            return
        t0 = time.perf_counter()
        cls = ray.remote(BackendActor).options(num_cpus=1, scheduling_strategy="SPREAD", max_restarts=0)
        for s in new:
            self.actors[s] = cls.remote(s, self.timeout_s, self.argv.get(s))
            self.stats.setdefault(s, {"runs": 0, "actor_deaths": 0})["created_s"] = self._since()
        pending = {self.actors[s].where.remote(): s for s in new}
        deadline = time.perf_counter() + self.startup_s + 60
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, deadline - time.perf_counter()))
            if not done:
                raise ray.exceptions.GetTimeoutError(f"Ray actors of {', '.join(pending.values())} did not "
                                                     f"answer within {self.startup_s + 60:.0f} s")
            for ref in done:
                st = self.stats[pending.pop(ref)]
                st.update(ray.get(ref))
                st["ready_s"] = self._since()
        self.timings["actors_s"] = round(self.timings["actors_s"] + time.perf_counter() - t0, 2)

    def _actor(self, system: str) -> Any:
        if system not in self.actors:
            self.start([system])
        return self.actors[system]

    def where(self, system: str) -> dict:
        """Where ``system``'s actor runs now (see :meth:`BackendActor.where`; starts the actor if needed)."""
        return self._ray.get(self._actor(system).where.remote(), timeout=self.startup_s + 60)

    def _drop(self, system: str) -> None:
        actor = self.actors.pop(system, None)
        if actor is not None:
            self._ray.kill(actor, no_restart=True)

    def unavailable(self, system: str) -> str | None:
        """None when ``system``'s modules are importable on its actor's node, else the reason."""
        return self._ray.get(self._actor(system).unavailable.remote(), timeout=self.startup_s + 60)

    def run(self, systems: list[str], model: Path, inputs: Path) -> dict[str, dict]:
        """Run ``model`` on ``inputs`` on all systems concurrently (result dicts: see the module docstring)."""
        ray = self._ray
        if self.timings["first_run_s"] is None:
            self.timings["first_run_s"] = self._since()
        model, inputs = Path(model), Path(inputs)
        mref, iref = ray.put(model.read_bytes()), ray.put(inputs.read_bytes())
        self.start(systems)  # replaces actors dropped after a death or timeout, all at once
        refs = {s: self.actors[s].run.remote(model.name, mref, iref) for s in systems}
        limit = self.timeout_s + self.startup_s + 60.0
        res: dict[str, dict] = {}
        for s, ref in refs.items():
            self.stats[s]["runs"] += 1
            try:
                d, data = ray.get(ref, timeout=limit)
            except ray.exceptions.GetTimeoutError:
                self._drop(s)
                res[s] = {"status": "timeout", "error_type": "Timeout", "message": f"no answer from the Ray actor "
                          f"within {limit:.0f} s", "frames": [], "seconds": limit, "out": None}
                continue
            except ray.exceptions.RayError as exc:  # the actor itself died; the next request gets a new one
                self._drop(s)
                self.stats[s]["actor_deaths"] += 1
                res[s] = {"status": "crash", "error_type": type(exc).__name__, "message": str(exc)[-2000:],
                          "frames": [], "seconds": 0.0, "out": None}
                continue
            if data is not None:
                out = model.parent / f"out-{s}.npz"
                with atomic_path(out) as tmp:
                    Path(tmp).write_bytes(data)
                d["out"] = str(out)
                d["outputs"] = load_outputs(out)
            res[s] = d
        return res

    def close(self) -> None:
        """Stop the actors' workers and the actors, all at once; shut Ray down when this executor started it.
        Adds the seconds to ``timings["close_s"]``."""
        ray = self._ray
        t0 = time.perf_counter()
        refs = []
        for actor in self.actors.values():
            try:
                refs.append(actor.close.remote())
            except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
                pass
        if refs:
            try:
                ray.wait(refs, num_returns=len(refs), timeout=30)
            except Exception:  # noqa: BLE001 - as above
                pass
        for s in list(self.actors):
            self._drop(s)
        if self._owns and ray.is_initialized():
            ray.shutdown()
            self._owns = False
        self.timings["close_s"] = round(self.timings["close_s"] + time.perf_counter() - t0, 2)


def check(name: str, address: str | None = None, jobs: int = 1) -> None:
    """Validate an executor choice before a campaign starts (cheap: imports nothing heavy).

    Raises:
        InputError: unknown executor name, ``address`` given for the local executor, ``jobs`` < 1 or ``jobs``
            other than 1 for Ray (its actors run a model's systems at the same time anyway), or Ray not installed.
    """
    import importlib.util

    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    if name == "local" and address:
        raise InputError("--address only applies to --executor ray")
    if jobs < 1:
        raise InputError(f"--jobs {jobs} must be >= 1")
    if name == "ray" and jobs != 1:
        raise InputError("--jobs only applies to --executor local (Ray runs a model's systems at the same time)")
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError(f"executor 'ray' needs Ray, which is not installed: {INSTALL_HINT}")


def make_executor(name: str = "local", timeout_s: float = 60.0, address: str | None = None,
                  jobs: int = 1) -> LocalExecutor | RayExecutor:
    """The executor called ``name`` (``"local"`` or ``"ray"``).

    Args:
        name: executor name.
        timeout_s: per-model time limit of each backend worker, seconds.
        address: Ray cluster to join (``ray`` only); None starts a local Ray instance.
        jobs: systems of one model run at the same time (``local`` only; see :class:`LocalExecutor`).

    Raises:
        InputError: see :func:`check`; also a Ray cluster that cannot be started or joined.
    """
    check(name, address, jobs)
    if name == "ray":
        return RayExecutor(timeout_s=timeout_s, address=address)
    return LocalExecutor(timeout_s=timeout_s, jobs=jobs)


__all__ = ["EXECUTORS", "BackendActor", "Executor", "LocalExecutor", "RayExecutor", "check", "make_executor"]
