"""Where a campaign's model executions run: local worker processes (default) or a Ray cluster.

An executor takes one saved model (``.keras``) and its inputs (``.npz`` with array ``x``) and runs them on
every system under test, returning per system the result dict the oracles read: the fields of
:class:`~twinspect.dl.fuzz.backends.WorkerResult` (``status``, ``error_type``, ``message``, ``frames``,
``seconds``, ``out``) plus ``outputs`` (list of arrays, the model's outputs in order) when ``status ==
"ok"``. Both executors write each system's outputs to ``<model dir>/out-<system>.npz`` (arrays ``o0``,
``o1``, ...) and put that path in ``out``, so campaign state, findings and reports do not depend on the
executor.

* :class:`LocalExecutor` (``--executor local``): one long-lived worker process per system on this
  machine, systems run one after another.
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
"""

from __future__ import annotations

import os
import tempfile
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
    """Each system in its own long-lived local worker process, systems run one after another (the default).

    Args:
        timeout_s: per-model time limit of a worker in seconds (a worker over it is killed and restarted).
    """

    name = "local"

    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.workers: dict[str, bk.Worker] = {}

    def unavailable(self, system: str) -> str | None:
        """None when ``system``'s modules are importable here, else the missing module."""
        return bk.available(system)

    def run(self, systems: list[str], model: Path, inputs: Path) -> dict[str, dict]:
        """Run ``model`` on ``inputs`` on each system in turn (result dicts: see the module docstring)."""
        res: dict[str, dict] = {}
        for s in systems:
            if s not in self.workers:
                self.workers[s] = bk.make_backend(s, timeout_s=self.timeout_s)
            out = Path(model).parent / f"out-{s}.npz"
            r = self.workers[s].run(model, inputs, out)
            d = r.to_json()
            if r.status == "ok":
                d["outputs"] = load_outputs(out)
            res[s] = d
        return res

    def close(self) -> None:
        """Stop all worker processes."""
        for w in self.workers.values():
            w.close()
        self.workers.clear()


class BackendActor:
    """Body of the Ray actor of one system: owns a local worker process and a scratch directory on its node.

    Not used directly; :class:`RayExecutor` wraps it with ``ray.remote``.

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

    def unavailable(self) -> str | None:
        """None when the system's modules are importable on this actor's node (or a custom worker), else the reason."""
        return None if self.custom else bk.available(self.system)

    def where(self) -> dict:
        """``{"node": Ray node id, "pid": actor process id, "host": hostname, "worker_pid": worker process id
        or None before the first request, "worker_restarts": worker restarts so far}``."""
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
        """Stop the worker and remove the scratch directory."""
        import shutil

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

    Raises:
        InputError: Ray is not installed, or the cluster cannot be started or joined.
    """

    name = "ray"

    def __init__(self, timeout_s: float = 60.0, address: str | None = None, num_cpus: int | None = None,
                 startup_s: float = 120.0, argv: dict[str, list[str]] | None = None):
        from twinspect import ray_cluster

        self._ray = ray_cluster.require_ray()
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.address = address
        self.argv = dict(argv or {})
        self.actors: dict[str, Any] = {}
        #: system -> {"runs", "actor_deaths", "node", "pid", "host"} (where each system's actor ran)
        self.stats: dict[str, dict] = {}
        self._owns = ray_cluster.connect(address, num_cpus=num_cpus or len(bk.SYSTEMS),
                                         object_store_memory=200 * 2**20)

    def _actor(self, system: str) -> Any:
        if system not in self.actors:
            cls = self._ray.remote(BackendActor).options(num_cpus=1, scheduling_strategy="SPREAD", max_restarts=0)
            self.actors[system] = cls.remote(system, self.timeout_s, self.argv.get(system))
            st = self.stats.setdefault(system, {"runs": 0, "actor_deaths": 0})
            st.update(self._ray.get(self.actors[system].where.remote(), timeout=self.startup_s + 60))
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
        model, inputs = Path(model), Path(inputs)
        mref, iref = ray.put(model.read_bytes()), ray.put(inputs.read_bytes())
        refs = {s: self._actor(s).run.remote(model.name, mref, iref) for s in systems}
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
        """Stop the actors' workers and the actors; shut Ray down when this executor started it."""
        ray = self._ray
        for s in list(self.actors):
            try:
                ray.get(self.actors[s].close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
                pass
            self._drop(s)
        if self._owns and ray.is_initialized():
            ray.shutdown()
            self._owns = False


def check(name: str, address: str | None = None) -> None:
    """Validate an executor choice before a campaign starts (cheap: imports nothing heavy).

    Raises:
        InputError: unknown executor name, ``address`` given for the local executor, or Ray not installed.
    """
    import importlib.util

    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    if name == "local" and address:
        raise InputError("--address only applies to --executor ray")
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError(f"executor 'ray' needs Ray, which is not installed: {INSTALL_HINT}")


def make_executor(name: str = "local", timeout_s: float = 60.0, address: str | None = None) -> LocalExecutor | RayExecutor:
    """The executor called ``name`` (``"local"`` or ``"ray"``).

    Args:
        name: executor name.
        timeout_s: per-model time limit of each backend worker, seconds.
        address: Ray cluster to join (``ray`` only); None starts a local Ray instance.

    Raises:
        InputError: see :func:`check`; also a Ray cluster that cannot be started or joined.
    """
    check(name, address)
    if name == "ray":
        return RayExecutor(timeout_s=timeout_s, address=address)
    return LocalExecutor(timeout_s=timeout_s)


__all__ = ["EXECUTORS", "BackendActor", "Executor", "LocalExecutor", "RayExecutor", "check", "make_executor"]
