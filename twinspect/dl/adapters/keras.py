"""Keras adapter: legacy Keras 2 ``.h5`` files and Keras 3 ``.keras`` files, run under Keras 3.

Keras 3 reads ``KERAS_BACKEND`` once, when it is first imported; :func:`import_keras` sets it to
``"torch"`` (the only backend installed with twinspect) unless the caller chose another one before.
The model is called directly, never through ``Model.predict`` (whose per-call set-up costs more than
the forward pass of these small models). Calling ``model(x, training=False)`` still pays Keras'
per-layer bookkeeping (milliseconds per layer on the torch backend), so by default the model's torch
operations are recorded once with ``torch.jit.trace`` and replayed; the trace is checked against the
eager Keras output at load time and dropped if it differs (see :meth:`KerasClassifier._trace`).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess
from twinspect.dl.adapters.loaded import LoadedModel, NotSupportedError, TensorSpec, Weights
from twinspect.errors import ModelError


def import_keras():
    """Import keras with ``KERAS_BACKEND`` defaulting to ``"torch"``; return the module.

    Raises:
        ModelError: keras is not installed.
    """
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError("keras is not installed (pip install 'twinspect[dl]')") from exc
    return keras


def _activation_name(act: Any) -> str | None:
    if act is None:
        return None
    if isinstance(act, str):
        return act
    if isinstance(act, dict):  # serialised form {"class_name": ..., "config": {"name": ...}}
        return act.get("config", {}).get("name") or act.get("class_name")
    return getattr(act, "__name__", None)


def _output_layer(model: Any) -> Any:
    outputs = getattr(model, "outputs", None) or []
    if len(outputs) == 1:
        hist = getattr(outputs[0], "_keras_history", None)
        op = getattr(hist, "operation", None) if hist is not None else None
        if op is not None:
            return op
    layers = getattr(model, "layers", None) or []
    return layers[-1] if layers else None


def keras_output_kind(model: Any) -> OutputKind:
    """Decide from the model config whether the model ends in a softmax.

    Returns:
        ``"probabilities"`` when the output layer is a ``Softmax`` layer or has a softmax activation,
        ``"logits"`` when it has a linear activation, ``"auto"`` (probe) otherwise.
    """
    layer = _output_layer(model)
    for _ in range(8):  # descend into nested models (a Sequential ending in a sub-model)
        if layer is None:
            return "auto"
        if getattr(layer, "layers", None) and hasattr(layer, "outputs"):
            layer = _output_layer(layer)
            continue
        break
    if layer is None:
        return "auto"
    if type(layer).__name__ == "Softmax":
        return "probabilities"
    try:
        act = _activation_name(layer.get_config().get("activation"))
    except Exception:  # noqa: BLE001 - custom layers without a config
        act = None
    if act in ("softmax",):
        return "probabilities"
    if act == "linear" and type(layer).__name__ in ("Dense", "Activation", "Conv2D", "EinsumDense"):
        return "logits"
    return "auto"


class KerasClassifier(Classifier):
    """A Keras 3 model (channels-last input) behind :class:`Classifier`.

    Args:
        model: a built ``keras.Model`` with one (N, H, W, C) input and one (N, K) output.
        preprocess: preset name, dict or :class:`Preprocess` (default ``"unit"`` = x/255).
        output: ``"auto"`` decides from the model config (softmax last → probabilities, linear →
            logits; probing only when the config does not say).
        name: display name.
        input_shape: (H, W, C) when the model does not declare it; must agree when it does.
        num_classes: K, checked against the model's output.
        path: file the model came from (named in errors).
        trace: run a ``torch.jit.trace`` of the model (verified against eager Keras at load; see
            :meth:`_trace`) instead of calling Keras layer by layer. ``describe()["engine"]`` says
            which one is used.

    Raises:
        ModelError: several inputs/outputs, an output that is not (N, K) with K >= 2, a declared
            shape that disagrees with the model.
    """

    framework = "keras"

    def __init__(
        self,
        model: Any,
        *,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str = "keras-model",
        input_shape: Sequence[int] | None = None,
        num_classes: int | None = None,
        path: str | Path | None = None,
        trace: bool = True,
    ):
        keras = import_keras()
        self.model = model
        self.path = None if path is None else str(path)
        self._backend = keras.backend.backend()
        model_in = getattr(model, "input_shape", None)
        if isinstance(model_in, list):
            if len(model_in) != 1:
                raise ModelError(f"model has {len(model_in)} inputs; one image input is required", path)
            model_in = model_in[0]
        if model_in is not None and len(model_in) != 4:
            raise ModelError(f"model input has shape {tuple(model_in)}; an image batch (N, H, W, C) is required", path)
        shape = check_shape_agrees(None if model_in is None else model_in[1:], input_shape, "input shape", path)
        model_out = getattr(model, "output_shape", None)
        if isinstance(model_out, list):
            if len(model_out) != 1:
                raise ModelError(f"model has {len(model_out)} outputs; one class-score output is required", path)
            model_out = model_out[0]
        if model_out is not None and (len(model_out) != 2 or (model_out[1] is not None and model_out[1] < 2)):
            raise ModelError(
                f"model output has shape {tuple(model_out)}: not a probability or logit vector", path
            )
        if output == "auto":
            output = keras_output_kind(model)
        pre = choose_preprocess(preprocess, "NHWC", isinstance(preprocess, str) or preprocess is None)
        k = model_out[1] if model_out is not None and model_out[1] is not None else (num_classes or 2)
        super().__init__(shape, k, pre, output, name)
        self._traced = None
        self.engine = "keras-eager"
        if self._backend == "torch":
            import torch

            from twinspect.dl.adapters.torch import ensure_threads

            ensure_threads()
            self._torch: Any = torch
            if trace:
                self._traced = self._trace()
                if self._traced is not None:
                    self.engine = "torchscript-trace"
        else:  # pragma: no cover - only the torch backend is installed with twinspect
            self._torch = None
        finish_load(self, num_classes, path)

    def _eager(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.no_grad():
            out = self.model(torch.from_numpy(batch), training=False)
        if isinstance(out, (list, tuple)):
            out = out[0]
        return out.detach().cpu().numpy()

    def _trace(self):
        """Record the model's torch ops once (``torch.jit.trace``) to skip Keras' per-layer overhead.

        Keras 3 on the torch backend spends milliseconds per layer in ``Layer.__call__`` bookkeeping
        (LeNet-1: ~26 ms per single-image call on the loaded 2-core machine, vs ~4 ms traced). The
        trace is accepted only when it reproduces the eager Keras output on random batches of 1, 2
        and 3 images (max abs difference <= 1e-5); otherwise the model is called eagerly.
        """
        import warnings

        torch = self._torch

        class _Wrapped(torch.nn.Module):  # type: ignore[name-defined]  # torch is a runtime handle
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, x):
                out = self.model(x, training=False)
                return out[0] if isinstance(out, (list, tuple)) else out

        rng = np.random.default_rng(7)
        batches = [
            self.preprocess(rng.uniform(0, 255, size=(n, *self.input_shape)).astype(np.float32)) for n in (2, 1, 3)
        ]
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(_Wrapped(self.model).eval(), torch.from_numpy(batches[0]), check_trace=False)
                for b in batches:
                    want = self._eager(b)
                    got = traced(torch.from_numpy(b)).detach().cpu().numpy()
                    if got.shape != want.shape or not np.allclose(got, want, rtol=0, atol=1e-5, equal_nan=True):
                        return None
        except Exception:  # noqa: BLE001 - untraceable models run eagerly
            return None
        return traced

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> KerasClassifier:
        """Load a ``.h5`` (Keras 2 / 3 HDF5) or ``.keras`` file without compiling it.

        Raises:
            ModelError: the file is not a loadable Keras model (the message names the file).
        """
        model = read_keras_file(path)
        kwargs.setdefault("name", Path(path).name)
        return cls(model, path=path, **kwargs)

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        if self._traced is not None:
            with self._torch.inference_mode():
                return self._traced(self._torch.from_numpy(batch)).cpu().numpy()
        if self._torch is not None:
            return self._eager(batch)
        import keras  # pragma: no cover

        return keras.ops.convert_to_numpy(self.model(batch, training=False))  # pragma: no cover

    def describe(self) -> dict:
        d = super().describe()
        fmt = "keras-h5" if self.path and Path(self.path).suffix.lower() in (".h5", ".hdf5") else "keras"
        runtime = "torch-trace" if self._traced is not None else "keras"
        d.update(framework=self.framework, path=self.path, backend=self._backend, engine=self.engine, format=fmt, runtime=runtime)
        return d

    def _load_model(self) -> KerasModel:
        d = self.describe()
        return KerasModel(self.model, runtime=d["runtime"], name=self.name, path=self.path, fmt=d["format"], traced=self._traced)


def _flat_layers(model: Any) -> list[Any]:
    """Layers of a Keras model in order, nested models expanded."""
    res = []
    for layer in getattr(model, "layers", []):
        if getattr(layer, "layers", None) and hasattr(layer, "outputs"):
            res.extend(_flat_layers(layer))
        else:
            res.append(layer)
    return res


class KerasModel(LoadedModel):
    """A Keras 3 model (formats ``keras-h5`` / ``keras``) run layer by layer by Keras (runtime
    ``keras``) or replayed from a ``torch.jit.trace`` of its torch operations (``torch-trace``,
    recorded on the first batch and checked against eager Keras on it; the check falling through
    leaves the model on ``keras``, and :attr:`runtime` says so).

    Weights: every layer's variables, named by the variable's name (``kernel``, ``bias``, ...).
    Activations: a Keras sub-model returning every layer's output (input, dropout, flatten and reshape
    layers left out), run eagerly.

    Args:
        model: a built ``keras.Model``.
        runtime: ``"torch-trace"`` (default) or ``"keras"``.
        name: display name.
        path: source file, if any.
        fmt: format name (``"keras"`` or ``"keras-h5"``).
    """

    framework = "keras"

    def __init__(self, model: Any, *, runtime: str = "torch-trace", name: str = "keras-model", path: str | Path | None = None, fmt: str = "keras", traced: Any = None):
        keras = import_keras()
        self.model = model
        self.name = name
        self.path = None if path is None else str(path)
        self.format = fmt
        self.runtime = runtime
        self._keras = keras
        self._traced = traced
        self._trace_tried = traced is not None
        self._sub: Any = None
        self.inputs = tuple(
            TensorSpec(str(getattr(t, "name", f"input_{i}")), (None, *[None if d is None else int(d) for d in tuple(t.shape)[1:]]), str(getattr(t, "dtype", "float32")))
            for i, t in enumerate(getattr(model, "inputs", None) or [])
        )
        self.outputs = tuple(
            TensorSpec(str(getattr(t, "name", f"output_{i}")), (None, *[None if d is None else int(d) for d in tuple(t.shape)[1:]]), str(getattr(t, "dtype", "float32")))
            for i, t in enumerate(getattr(model, "outputs", None) or [])
        )

    @classmethod
    def load(cls, path: str | Path, *, runtime: str = "torch-trace", name: str | None = None) -> KerasModel:
        """Read a ``.h5``/``.hdf5``/``.keras`` file (not compiled).

        Raises:
            ModelError: not a loadable Keras model.
        """
        model = read_keras_file(path)
        fmt = "keras" if Path(path).suffix.lower() == ".keras" else "keras-h5"
        return cls(model, runtime=runtime, name=name or Path(path).name, path=path, fmt=fmt)

    def _eager(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        keras = self._keras
        args = [keras.ops.convert_to_tensor(np.asarray(x)) for x in xs]
        if keras.backend.backend() == "torch":
            import torch

            with torch.no_grad():
                out = self.model(args[0] if len(args) == 1 else args, training=False)
        else:  # pragma: no cover - only the torch backend is installed with twinspect
            out = self.model(args[0] if len(args) == 1 else args, training=False)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(keras.ops.convert_to_numpy(o)) for o in outs]

    def forward(self, *xs: np.ndarray) -> list[np.ndarray]:
        self._check_inputs(xs)
        if self.runtime == "torch-trace" and self._keras.backend.backend() == "torch":
            import torch

            if not self._trace_tried:
                self._trace_tried = True
                want = self._eager(xs)
                self._traced = trace_keras(self.model, xs, want)
                if self._traced is None:
                    self.runtime = "keras"
                return want
            if self._traced is not None:
                with torch.inference_mode():
                    out = self._traced(*[torch.from_numpy(np.ascontiguousarray(x)) for x in xs])
                outs = list(out) if isinstance(out, (list, tuple)) else [out]
                return [o.cpu().numpy() for o in outs]
        return self._eager(xs)

    def weights(self) -> Weights:
        keras = self._keras
        out: Weights = {}
        for layer in _flat_layers(self.model):
            params = {}
            for v in layer.weights:
                nm = str(getattr(v, "name", "w"))
                if nm in params:
                    nm = str(getattr(v, "path", nm))
                params[nm] = np.asarray(keras.ops.convert_to_numpy(v.value if hasattr(v, "value") else v), dtype=np.float32)
            if params:
                out[layer.name] = params
        return out

    def _canonical(self, layer: str, param: str, w: np.ndarray) -> np.ndarray:
        if w.ndim == 4 and param in ("kernel", "depthwise_kernel"):
            if param == "depthwise_kernel":  # (H, W, I, mult) → (I*mult, 1, H, W)
                h, k, i, m = w.shape
                return np.ascontiguousarray(w.reshape(h, k, i * m).transpose(2, 0, 1)[:, None])
            return np.ascontiguousarray(w.transpose(3, 2, 0, 1))
        if w.ndim == 2 and param == "kernel":
            return np.ascontiguousarray(w.T)
        return w

    def _act_layers(self) -> list[Any]:
        skip = ("InputLayer", "Dropout", "Flatten", "Reshape", "SpatialDropout2D", "GaussianNoise")
        return [layer for layer in _flat_layers(self.model) if type(layer).__name__ not in skip]

    def layer_names(self) -> list[str]:
        if not getattr(self.model, "inputs", None):
            raise NotSupportedError("a subclassed Keras model has no symbolic graph to read activations from", self.path)
        return [layer.name for layer in self._act_layers()]

    def _activations(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        keras = self._keras
        if self._sub is None:
            try:
                layer_objs = self._act_layers()
                self._sub = (keras.Model(self.model.inputs, [lay.output for lay in layer_objs]), [lay.name for lay in layer_objs])
            except Exception as exc:  # noqa: BLE001 - nested models whose layers have no single output
                raise NotSupportedError(f"cannot build a Keras sub-model over the layer outputs ({type(exc).__name__}: {exc})", self.path) from exc
        sub, names = self._sub
        args = [keras.ops.convert_to_tensor(np.asarray(x)) for x in xs]
        import torch

        with torch.no_grad():
            outs = sub(args[0] if len(args) == 1 else args, training=False)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        want = set(layers)
        return {n: np.asarray(keras.ops.convert_to_numpy(o), dtype=np.float32) for n, o in zip(names, outs) if n in want}


def read_keras_file(path: str | Path) -> Any:
    """Load a ``.h5`` (Keras 2/3 HDF5) or ``.keras`` file with Keras 3, not compiled.

    Raises:
        ModelError: not a loadable Keras model (the message names the file).
    """
    keras = import_keras()
    if Path(path).suffix.lower() == ".keras" and not zipfile.is_zipfile(path):
        raise ModelError("not a Keras 3 .keras archive (not a zip file); the file is corrupt", path)
    try:
        return keras.models.load_model(str(path), compile=False)
    except Exception as exc:  # noqa: BLE001 - h5py/zip/deserialisation errors of every kind
        raise load_error(path, "Keras", exc) from exc


def trace_keras(model: Any, xs: Sequence[np.ndarray], want: Sequence[np.ndarray], atol: float = 1e-5) -> Any:
    """``torch.jit.trace`` of a Keras model on ``xs``, or None if it fails or its output differs from
    ``want`` (the eager Keras outputs) by more than ``atol``."""
    import warnings

    import torch

    class _Wrapped(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            out = self.m(args[0] if len(args) == 1 else list(args), training=False)
            return tuple(out) if isinstance(out, (list, tuple)) else out

    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            tx = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in xs)
            traced = torch.jit.trace(_Wrapped(model).eval(), tx, check_trace=False)
            got = traced(*tx)
        got_l = list(got) if isinstance(got, (list, tuple)) else [got]
        for g, w in zip(got_l, want):
            g = g.detach().cpu().numpy()
            if g.shape != w.shape or not np.allclose(g, w, rtol=0, atol=atol, equal_nan=True):
                return None
    except Exception:  # noqa: BLE001 - untraceable models run eagerly
        return None
    return traced
