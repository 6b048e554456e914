"""TensorFlow Lite adapter (``.tflite`` / ``.lite``), run by the LiteRT interpreter (``ai-edge-litert``).

One :class:`Interpreter` per classifier. A call sets the input tensor, invokes and reads the output;
when the batch size changes the input is resized with ``resize_tensor_input`` and the tensors are
re-allocated, and the last allocated size is kept, so a run of single-image queries (DFlare's hot
path) pays no re-allocation. Models whose batch dimension cannot be resized are run one image at a
time. Integer-quantised inputs/outputs (int8/uint8) are (de)quantised with the tensor's scale and
zero point; the DFlare models have float input and output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess
from twinspect.errors import ModelError


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError("ai-edge-litert is not installed (pip install 'twinspect[dl]')") from exc
    return Interpreter


class TFLiteClassifier(Classifier):
    """A TensorFlow Lite model with one (N, H, W, C) input and one (N, K) output.

    Args:
        path: ``.tflite`` / ``.lite`` file.
        preprocess: preset name, dict or :class:`Preprocess` (default ``"unit"``).
        output: ``"auto"`` probes the model once at load time.
        name: display name (file name by default).
        input_shape: (H, W, C) when the model's are dynamic; must agree with the model otherwise.
        num_classes: K, checked against the model's output.
        num_threads: interpreter threads (1 was fastest for the DFlare models on 2 cores).

    Raises:
        ModelError: the file is not a TFLite model, has several inputs/outputs, or its output is not
            a (N, K) score vector.
    """

    framework = "tflite"

    def __init__(
        self,
        path: str | Path,
        *,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str | None = None,
        input_shape: Sequence[int] | None = None,
        num_classes: int | None = None,
        num_threads: int = 1,
    ):
        Interpreter = _interpreter_class()
        self.path = str(path)
        try:
            interp = Interpreter(model_path=str(path), num_threads=int(num_threads))
            inputs = interp.get_input_details()
            outputs = interp.get_output_details()
        except Exception as exc:  # noqa: BLE001 - flatbuffer / schema errors
            raise load_error(path, "TensorFlow Lite", exc) from exc
        if len(inputs) != 1 or len(outputs) != 1:
            raise ModelError(
                f"model has {len(inputs)} inputs and {len(outputs)} outputs; one image input and one "
                "class-score output are required",
                path,
            )
        self._interp = interp
        self._in = inputs[0]
        self._out = outputs[0]
        sig = self._signature(self._in)
        if len(sig) != 4:
            raise ModelError(f"model input has shape {tuple(sig)}; an image batch (N, H, W, C) is required", path)
        out_sig = self._signature(self._out)
        if len(out_sig) != 2 or (out_sig[1] > 0 and out_sig[1] < 2):
            raise ModelError(f"model output has shape {tuple(out_sig)}: not a probability or logit vector", path)
        shape = check_shape_agrees(sig[1:], input_shape, "input shape", path)
        self._in_index = int(self._in["index"])
        self._out_index = int(self._out["index"])
        self._in_dtype = np.dtype(self._in["dtype"])
        self._out_dtype = np.dtype(self._out["dtype"])
        self._in_q = self._quant(self._in)
        self._out_q = self._quant(self._out)
        self._alloc_n = -1
        self._loop = False  # True when the batch dimension cannot be resized
        pre = choose_preprocess(preprocess, "NHWC", isinstance(preprocess, str) or preprocess is None)
        k = out_sig[1] if out_sig[1] > 0 else (num_classes or 2)
        super().__init__(shape, k, pre, output, name or Path(path).name)
        try:
            self._allocate(1)
        except Exception as exc:  # noqa: BLE001
            raise load_error(path, "TensorFlow Lite", exc) from exc
        finish_load(self, num_classes, path)

    @staticmethod
    def _signature(detail: dict) -> list[int]:
        """Declared tensor shape, -1 for dynamic dimensions."""
        sig = detail.get("shape_signature")
        if sig is None or len(sig) == 0:
            sig = detail["shape"]
        return [int(s) for s in sig]

    @staticmethod
    def _quant(detail: dict) -> tuple[float, int] | None:
        if np.dtype(detail["dtype"]).kind not in "iu":
            return None
        scale, zero = detail.get("quantization", (0.0, 0))
        if not scale:
            return None
        return float(scale), int(zero)

    def _allocate(self, n: int) -> None:
        if n == self._alloc_n:
            return
        self._interp.resize_tensor_input(self._in_index, [n, *self.input_shape], strict=False)
        self._interp.allocate_tensors()
        self._alloc_n = n

    def _to_input(self, batch: np.ndarray) -> np.ndarray:
        if self._in_q is not None:
            scale, zero = self._in_q
            info = np.iinfo(self._in_dtype)
            return np.clip(np.round(batch / scale + zero), info.min, info.max).astype(self._in_dtype)
        if batch.dtype != self._in_dtype:
            return batch.astype(self._in_dtype)
        return batch

    def _from_output(self, out: np.ndarray) -> np.ndarray:
        if self._out_q is not None:
            scale, zero = self._out_q
            return (out.astype(np.float32) - zero) * np.float32(scale)
        return out

    def _run(self, batch: np.ndarray) -> np.ndarray:
        self._allocate(batch.shape[0])
        self._interp.set_tensor(self._in_index, self._to_input(batch))
        self._interp.invoke()
        return self._interp.get_tensor(self._out_index)

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        n = batch.shape[0]
        if n > 1 and not self._loop:
            try:
                out = self._run(batch)
                if out.shape[0] == n:
                    return self._from_output(out)
            except Exception:  # noqa: BLE001 - a batch dimension fixed inside the graph
                pass
            self._loop = True  # from now on: one image at a time
            self._alloc_n = -1
        outs = [self._run(batch[i : i + 1]) for i in range(n)]
        return self._from_output(np.concatenate(outs, axis=0))

    def describe(self) -> dict:
        d = super().describe()
        d.update(framework=self.framework, path=self.path)
        return d

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> "TFLiteClassifier":
        """Same as the constructor (for symmetry with the other adapters)."""
        return cls(path, **kwargs)
