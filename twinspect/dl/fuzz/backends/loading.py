"""Loading a saved ``.keras`` model in a backend worker without computing initial weights it then discards.

``keras.saving.load_model`` rebuilds the model from its config, which creates every weight with its
initializer (Glorot/He random draws, orthogonal QR decompositions, ...), and then overwrites every one of
them with the weights stored in the file. Under JAX each initializer call is compiled per weight shape, and
a mutant brings new shapes, so in a campaign this discarded work was the largest single cost of the
``keras-jax`` worker (issue 20: 43 of its 48 s of model loading in a 4-minute MEMO campaign on the ten
seeds; ``benchmarks/results/fuzz_issue20_speed.md``).

:func:`load_model` loads with every :class:`keras.initializers.Initializer` returning numpy zeros instead.
This changes no loaded value: ``load_model`` assigns each layer's stored variables and raises when a layer's
stored variables do not match (Keras' ``_raise_loading_failure`` is not ``warn_only`` there), so a weight
left at its stand-in zeros would be a load error, not a model. Initial values that are not
:class:`~keras.initializers.Initializer` objects (a random layer's seed-generator state is a plain function)
are computed as before. ``tests/dl/fuzz/test_worker_loading.py`` checks that every variable and every output
of models from the whole catalogue equals that of a plain ``load_model``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _initializer_classes(keras: Any) -> list[type]:
    """Every subclass of ``keras.initializers.Initializer`` (itself included) that defines ``__call__``."""
    out, seen, stack = [], set(), [keras.initializers.Initializer]
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        if "__call__" in cls.__dict__:
            out.append(cls)
    return out


@contextlib.contextmanager
def initializers_skipped(keras: Any) -> Iterator[None]:
    """While active, every Keras initializer object returns ``numpy.zeros(shape, dtype)`` (dtype standardised
    by Keras; ``floatx`` when None) instead of its initial values; a dtype numpy cannot make (e.g.
    ``bfloat16`` without ml_dtypes) falls back to the real initializer. Only for code that overwrites every
    weight afterwards, such as :func:`load_model`. Not thread-safe (it patches the initializer classes).

    Args:
        keras: the imported ``keras`` module of the worker's backend.
    """
    import numpy as np

    classes = _initializer_classes(keras)
    saved = {cls: cls.__dict__["__call__"] for cls in classes}

    def stand_in(cls: type):
        real = saved[cls]

        def zeros(self, shape, dtype=None, **kwargs):
            try:
                dt = np.dtype(keras.backend.standardize_dtype(dtype or keras.config.floatx()))
            except TypeError:
                return real(self, shape, dtype=dtype, **kwargs)
            return np.zeros(tuple(int(d) for d in shape), dtype=dt)

        return zeros

    try:
        for cls in classes:
            cls.__call__ = stand_in(cls)  # type: ignore[method-assign]
        yield
    finally:
        for cls, call in saved.items():
            cls.__call__ = call  # type: ignore[method-assign]


def load_model(path: str) -> Any:
    """``keras.saving.load_model(path, compile=False)`` without computing the discarded initial weights (see
    the module docstring); the loaded model's weights and outputs are those of the plain call.

    Args:
        path: a ``.keras`` file.

    Returns:
        The ``keras.Model``.

    Raises:
        Exception: whatever ``keras.saving.load_model`` raises for the file (the worker reports it as the
            system's error).
    """
    import keras

    with initializers_skipped(keras):
        return keras.saving.load_model(path, compile=False)


__all__ = ["initializers_skipped", "load_model"]
