"""Systems under test, each run in its own long-lived worker process (NNSmith-style ``backends/<system>.py``).

:func:`make_backend` is the factory: ``keras-tensorflow``, ``keras-jax``, ``keras-torch`` and
``onnxruntime`` (the ``.keras`` model exported to ONNX under Keras' TensorFlow backend, then run by ONNX
Runtime). Short names ``tensorflow``, ``jax``, ``torch`` are accepted.
"""

from __future__ import annotations

import importlib.util

from twinspect.dl.fuzz.backends.worker import Worker, WorkerResult
from twinspect.errors import InputError

#: system name -> (worker module, modules that must be importable)
SYSTEMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "keras-tensorflow": ("twinspect.dl.fuzz.backends.keras_backend", ("keras", "tensorflow")),
    "keras-jax": ("twinspect.dl.fuzz.backends.keras_backend", ("keras", "jax")),
    "keras-torch": ("twinspect.dl.fuzz.backends.keras_backend", ("keras", "torch")),
    "onnxruntime": ("twinspect.dl.fuzz.backends.onnxruntime", ("keras", "tensorflow", "onnxruntime", "tf2onnx")),
}
SHORT = {"tensorflow": "keras-tensorflow", "tf": "keras-tensorflow", "jax": "keras-jax", "torch": "keras-torch",
         "ort": "onnxruntime"}


def canonical(name: str) -> str:
    """Full system name of ``name`` (short names resolved).

    Raises:
        InputError: unknown backend name.
    """
    full = SHORT.get(name.strip(), name.strip())
    if full not in SYSTEMS:
        raise InputError(f"unknown backend {name!r}; choose from {', '.join(list(SYSTEMS) + list(SHORT))}")
    return full


def available(name: str) -> str | None:
    """None when system ``name`` can run here, else the reason (a missing module)."""
    for mod in SYSTEMS[canonical(name)][1]:
        if importlib.util.find_spec(mod) is None:
            return f"module {mod!r} is not installed"
    return None


def make_backend(name: str, timeout_s: float = 60.0) -> Worker:
    """Start (lazily) the worker process of system ``name``.

    Args:
        name: system name or short name.
        timeout_s: per-model time limit in seconds; a worker over it is killed and restarted.

    Raises:
        InputError: unknown backend name.
    """
    full = canonical(name)
    module = SYSTEMS[full][0]
    return Worker(full, [module, full], timeout_s=timeout_s)


__all__ = ["SYSTEMS", "Worker", "WorkerResult", "available", "canonical", "make_backend"]
