"""The general loaded-model interface: any tensors in, any tensors out, weights and activations.

:class:`LoadedModel` is what a model *file* becomes once a format reader has read it and a runtime
executes it (see :mod:`twinspect.dl.adapters.formats` for the two notions, after NNSmith's split of
``materialize/`` from ``backends/``). It does not assume an image classifier: it declares its input
and output :class:`TensorSpec`\\ s, runs arrays already in the model's own layout and scale
(:meth:`LoadedModel.forward`, :meth:`LoadedModel.predict`), lists its weights per layer
(:meth:`LoadedModel.weights`, dequantised, pruned zeros kept) and, where the format allows it,
returns intermediate outputs (:meth:`LoadedModel.activations`). Where it does not, the method raises
:class:`NotSupportedError`, which callers catch to report a measure as skipped.

The image-classifier view used by the deviation search,
:class:`~twinspect.dl.adapters.base.Classifier`, sits on top: it owns the pixel preprocessing and
the probability conversion and runs its :class:`LoadedModel` (``Classifier.loaded``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinspect.errors import InputError, ModelError


class NotSupportedError(ModelError):
    """The model's format or runtime cannot do what was asked (e.g. intermediate activations of a
    ``torch.export`` program without module structure). Also a :class:`ModelError` / ``ValueError``.

    Attributes:
        reason: the message without the file name, fit for a report's ``skipped`` entry.
    """

    def __init__(self, message: str, path: str | Path | None = None, hint: str | None = None):
        super().__init__(message, path, hint)
        self.reason = message


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model.

    Attributes:
        name: the tensor's name in the model (``"input_0"`` when the format has none).
        shape: dimensions, batch first; ``None`` for a dimension the model leaves open.
        dtype: numpy dtype name of what the model takes/returns (``"float32"``, ``"int8"``, ...).
    """

    name: str
    shape: tuple[int | None, ...]
    dtype: str = "float32"

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


#: Per-layer weights: layer name → {parameter name → float array}, in the model's execution order.
Weights = dict[str, dict[str, np.ndarray]]


class LoadedModel(ABC):
    """A model read from a file (or built in memory), ready to run.

    Subclasses (one per framework module) set the attributes and implement :meth:`forward`,
    :meth:`weights`, and, where possible, :meth:`layer_names` / :meth:`_activations`.

    Attributes:
        name: display name (the file name by default).
        path: the file it was read from, or None.
        format: the file format's name (a key of :data:`~twinspect.dl.adapters.formats.FORMATS`).
        runtime: the runtime executing it (a key of :data:`~twinspect.dl.adapters.formats.RUNTIMES`).
        framework: the adapter module (``"keras"``, ``"tflite"``, ``"onnx"``, ``"torch"``).
        inputs: input specs (batch dimension first).
        outputs: output specs; None shapes when the format does not declare them.
    """

    name: str = "model"
    path: str | None = None
    format: str = "unknown"
    runtime: str = "unknown"
    framework: str = "unknown"
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()

    # -- to implement -------------------------------------------------------------------------
    @abstractmethod
    def forward(self, *xs: np.ndarray) -> list[np.ndarray]:
        """Run the model on one array per input (already in the model's layout, scale and dtype).

        Args:
            xs: arrays (N, ...) matching :attr:`inputs`.

        Returns:
            One numpy array per output (batch first).

        Raises:
            InputError: wrong number of inputs.
            ModelError: the runtime failed on the batch.
        """

    @abstractmethod
    def weights(self) -> Weights:
        """Every trained parameter, grouped by layer, as float arrays.

        Quantised weights (int8/uint8 TFLite, ONNX ``DequantizeLinear``/``QLinear*``, quantised torch
        modules) are dequantised with their scale and zero point (``(q - zero_point) * scale``, per
        channel where the format says so); zeros left by pruning are kept as zeros.

        Returns:
            ``{layer: {param: ndarray float32}}`` in execution (or declaration) order.
        """

    def layer_names(self) -> list[str]:
        """Names accepted by :meth:`activations`, in execution order.

        Raises:
            NotSupportedError: the format gives no access to intermediate outputs.
        """
        raise NotSupportedError(f"intermediate activations are not available for {self.format} models", self.path)

    def _activations(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        raise NotSupportedError(f"intermediate activations are not available for {self.format} models", self.path)

    # -- public API ---------------------------------------------------------------------------
    def predict(self, *xs: np.ndarray) -> np.ndarray:
        """The first output of :meth:`forward` (a convenience for single-output models)."""
        return self.forward(*xs)[0]

    def activations(self, x: np.ndarray | Sequence[np.ndarray], layers: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Intermediate outputs of the model on a batch.

        Args:
            x: one array (N, ...) for a single-input model, or a list/tuple with one per input, in the
                model's own layout and scale (as for :meth:`forward`).
            layers: names from :meth:`layer_names` (default: all of them).

        Returns:
            ``{layer: ndarray (N, ...) float32}`` in execution order, one entry per requested layer.

        Raises:
            NotSupportedError: the format or runtime cannot expose intermediate outputs.
            InputError: an unknown layer name (the message lists a few known ones).
        """
        xs: list[np.ndarray] = list(x) if isinstance(x, (list, tuple)) else [np.asarray(x)]
        known = self.layer_names()
        if layers is None:
            wanted = list(known)
        else:
            wanted = list(layers)
            unknown = [n for n in wanted if n not in known]
            if unknown:
                raise InputError(
                    f"unknown layer(s) {', '.join(map(repr, unknown[:3]))} of model {self.name!r}; "
                    f"known: {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}"
                )
        if not wanted:
            return {}
        return self._activations(xs, wanted)

    def _canonical(self, layer: str, param: str, w: np.ndarray) -> np.ndarray:
        """``w`` in PyTorch's layout (conv ``(O, I, H, W)``, dense ``(O, I)``); adapters override."""
        return w

    def canonical_weights(self) -> Weights:
        """:meth:`weights` with every array in PyTorch's layout (conv kernels ``(O, I, H, W)``, depthwise
        ``(O, 1, H, W)``, dense ``(O, I)``), so that the same architecture saved by different
        frameworks lines up array for array. (The input order of a dense layer after a flatten still
        follows the framework's own NHWC/NCHW flattening.)"""
        return {
            layer: {p: self._canonical(layer, p, w) for p, w in ps.items()} for layer, ps in self.weights().items()
        }

    def flat_weights(self) -> dict[str, np.ndarray]:
        """:meth:`weights` flattened to ``{"layer/param": ndarray}`` (same order)."""
        return {f"{layer}/{p}": w for layer, ps in self.weights().items() for p, w in ps.items()}

    def num_params(self) -> int:
        """Number of scalar weights (after dequantisation; pruned zeros counted)."""
        return int(sum(w.size for ps in self.weights().values() for w in ps.values()))

    def describe(self) -> dict:
        """Metadata for reports: name, path, format, runtime, framework, input and output specs."""
        return {
            "name": self.name,
            "path": self.path,
            "format": self.format,
            "runtime": self.runtime,
            "framework": self.framework,
            "inputs": [s.to_dict() for s in self.inputs],
            "outputs": [s.to_dict() for s in self.outputs],
        }

    def _check_inputs(self, xs: Sequence[np.ndarray]) -> None:
        if self.inputs and len(xs) != len(self.inputs):
            raise InputError(f"model {self.name!r} takes {len(self.inputs)} input(s), {len(xs)} given")

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}{tuple(s.shape)}" for s in self.inputs)
        return f"{type(self).__name__}(name={self.name!r}, format={self.format!r}, runtime={self.runtime!r}, inputs=[{ins}])"


def dequantize(q: np.ndarray, scale, zero_point, axis: int | None = None) -> np.ndarray:
    """``(q - zero_point) * scale`` in float32, per tensor or per channel along ``axis``.

    Args:
        q: integer array (int8/uint8/int32).
        scale: scalar or (C,) float scales.
        zero_point: scalar or (C,) integer zero points.
        axis: the channel axis of per-channel parameters (ignored for scalars).

    Returns:
        float32 array of ``q``'s shape.
    """
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    zp = np.asarray(zero_point, dtype=np.float64).reshape(-1)
    qf = np.asarray(q).astype(np.float64)
    if scale.size <= 1 and zp.size <= 1:
        s = float(scale[0]) if scale.size else 1.0
        z = float(zp[0]) if zp.size else 0.0
        return ((qf - z) * s).astype(np.float32)
    ax = 0 if axis is None else int(axis) % qf.ndim
    shape = [1] * qf.ndim
    shape[ax] = -1
    if zp.size <= 1:
        zp = np.full(scale.size, float(zp[0]) if zp.size else 0.0)
    return ((qf - zp.reshape(shape)) * scale.reshape(shape)).astype(np.float32)


#: Layer-free operations left out of activation lists (reshapes, casts, shape arithmetic).
PLUMBING_OPS = frozenset(
    s.lower()
    for s in (
        "view", "reshape", "flatten", "size", "contiguous", "to", "dropout", "detach", "select", "slice",
        "t", "transpose", "permute", "unsqueeze", "squeeze", "shape", "gather", "constant", "cast",
        "constantofshape", "identity", "unsqueeze", "concat", "numtotensor", "int", "floor_divide",
        "quantizelinear", "dequantizelinear", "quantize_per_tensor", "dequantize", "clone", "expand",
        "copy", "type_as", "scalarimplicit", "zeros", "ones", "arange", "empty", "full", "range",
    )
)
