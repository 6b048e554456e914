"""ONNX adapter (``.onnx``), run by one ONNX Runtime ``InferenceSession`` on the CPU.

The input layout is read from the graph's input shape where it is unambiguous (``[N, C, H, W]`` with
C in {1, 3, 4} and W not, or the reverse); otherwise the preprocessing's ``layout`` (from metadata or
the caller) decides. A model whose batch dimension is fixed (e.g. exported with batch 1) is run in
chunks of that size. The session uses few threads (``intra_op_num_threads=1`` by default): the models
are small and the single-image queries of a search gain nothing from more (LeNet-5-sized CNN on the
loaded 2-core machine: 1 thread 0.087 ms per single query and 0.11 ms per image in a batch of 64;
2 threads 0.092 and 0.28 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess, resolve_preprocess
from twinspect.errors import ModelError

_CHANNELS = (1, 3, 4)

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8,
}


def _dim(d: Any) -> int | None:
    return int(d) if isinstance(d, (int, np.integer)) and int(d) > 0 else None


def detect_layout(dims: Sequence[int | None]) -> str | None:
    """``"NCHW"`` / ``"NHWC"`` from the three non-batch dimensions of an image input, or None.

    Unambiguous only when exactly one of the first and last dimensions is a channel count (1, 3, 4).
    """
    first, last = dims[0], dims[2]
    first_c = first in _CHANNELS
    last_c = last in _CHANNELS
    if first_c and not last_c:
        return "NCHW"
    if last_c and not first_c:
        return "NHWC"
    return None


class ONNXClassifier(Classifier):
    """An ONNX model with one image input and one (N, K) output.

    Args:
        path: ``.onnx`` file.
        preprocess: preset name, dict or :class:`Preprocess` (default ``"unit"``). A preset's layout
            is replaced by the layout read from the graph.
        output: ``"auto"`` probes the model once at load time.
        name: display name (file name by default).
        input_shape: (H, W, C) when the graph's dimensions are symbolic.
        num_classes: K, checked against the model's output.
        threads: ``intra_op_num_threads`` of the session.

    Raises:
        ModelError: the file is not a valid ONNX model, has several inputs/outputs, an input that is
            not a 4-D image batch, or an output that is not a (N, K) score vector.
    """

    framework = "onnx"

    def __init__(
        self,
        path: str | Path,
        *,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str | None = None,
        input_shape: Sequence[int] | None = None,
        num_classes: int | None = None,
        threads: int = 1,
    ):
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelError("onnxruntime is not installed (pip install 'twinspect[dl]')") from exc
        self.path = str(path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - protobuf / graph errors
            raise load_error(path, "ONNX", exc) from exc
        inputs, outputs = sess.get_inputs(), sess.get_outputs()
        if len(inputs) != 1 or len(outputs) != 1:
            raise ModelError(
                f"model has {len(inputs)} inputs and {len(outputs)} outputs; one image input and one "
                "class-score output are required",
                path,
            )
        self._sess = sess
        self._in_name = inputs[0].name
        self._out_name = outputs[0].name
        self._in_dtype = np.dtype(_ORT_TYPES.get(inputs[0].type, np.float32))
        in_dims = list(inputs[0].shape)
        if len(in_dims) != 4:
            raise ModelError(f"model input has shape {tuple(in_dims)}; an image batch of rank 4 is required", path)
        out_dims = list(outputs[0].shape)
        k_model = _dim(out_dims[-1]) if out_dims else None
        if len(out_dims) != 2 or (k_model is not None and k_model < 2):
            raise ModelError(f"model output has shape {tuple(out_dims)}: not a probability or logit vector", path)
        self._batch = _dim(in_dims[0])  # None: dynamic
        dims = [_dim(d) for d in in_dims[1:]]
        layout_free = isinstance(preprocess, str) or preprocess is None
        layout = detect_layout(dims)
        if layout is None:
            layout = resolve_preprocess(preprocess).layout
        pre = choose_preprocess(preprocess, layout, True)
        if not layout_free and resolve_preprocess(preprocess).layout != layout:
            raise ModelError(
                f"the model takes {layout} input {tuple(in_dims)}, but the preprocessing says layout "
                f"{resolve_preprocess(preprocess).layout}",
                path,
            )
        hwc = dims if layout == "NHWC" else [dims[1], dims[2], dims[0]]
        shape = check_shape_agrees(hwc, input_shape, "input shape", path)
        super().__init__(shape, k_model or num_classes or 2, pre, output, name or Path(path).name)
        finish_load(self, num_classes, path)

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        if batch.dtype != self._in_dtype:
            batch = batch.astype(self._in_dtype)
        b = self._batch
        n = batch.shape[0]
        if b is None or b == n:
            return self._sess.run([self._out_name], {self._in_name: batch})[0]
        outs = []
        for start in range(0, n, b):  # fixed batch size: run in chunks, padding the last one
            chunk = batch[start : start + b]
            m = chunk.shape[0]
            if m < b:
                chunk = np.concatenate([chunk, np.zeros((b - m, *chunk.shape[1:]), dtype=chunk.dtype)])
            outs.append(self._sess.run([self._out_name], {self._in_name: chunk})[0][:m])
        return np.concatenate(outs, axis=0)

    def describe(self) -> dict:
        d = super().describe()
        d.update(framework=self.framework, path=self.path)
        return d

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> "ONNXClassifier":
        """Same as the constructor (for symmetry with the other adapters)."""
        return cls(path, **kwargs)
