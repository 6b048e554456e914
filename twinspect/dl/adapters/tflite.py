"""TensorFlow Lite adapter (``.tflite`` / ``.lite``), run by the LiteRT interpreter (``ai-edge-litert``).

One :class:`Interpreter` per classifier. A call sets the input tensor, invokes and reads the output;
when the batch size changes the input is resized with ``resize_tensor_input`` and the tensors are
re-allocated, and the last allocated size is kept, so a run of single-image queries (DFlare's hot
path) pays no re-allocation. Models whose batch dimension cannot be resized are run one image at a
time. Integer-quantised inputs/outputs (int8/uint8) are (de)quantised with the tensor's scale and
zero point; the DFlare models have float input and output.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess
from twinspect.dl.adapters.loaded import PLUMBING_OPS, LoadedModel, NotSupportedError, TensorSpec, Weights, dequantize
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
        d.update(framework=self.framework, path=self.path, format="tflite", runtime="litert")
        return d

    def _load_model(self) -> TFLiteModel:
        return TFLiteModel(self.path, name=self.name)

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> TFLiteClassifier:
        """Same as the constructor (for symmetry with the other adapters)."""
        return cls(path, **kwargs)


class TFLiteModel(LoadedModel):
    """A TensorFlow Lite flatbuffer run by the LiteRT interpreter (format ``tflite``, runtime ``litert``).

    Any number of inputs/outputs of any rank. In hybrid models (float activations, 8-bit weights, as the
    DFlare ``*-quan.lite`` files) the weight tensors are typed uint8 with zero point 0 but the LiteRT
    hybrid kernels read their bytes as symmetric int8; :meth:`weights` does the same. Integer-quantised inputs/outputs are (de)quantised with
    the tensor's scale and zero point, so :meth:`forward` takes and returns float arrays. Weights are
    the constant tensors the operators read, dequantised (per channel along the tensor's
    ``quantized_dimension``). Activations come from a second interpreter created on first use with
    ``experimental_preserve_all_tensors=True`` and without the XNNPACK delegate (whose fused
    sub-graphs would hide intermediate tensors): one entry per operator output, named after the
    tensor (``"block1_conv1/Relu"``).

    Args:
        path: ``.tflite`` / ``.lite`` file.
        name: display name (the file name by default).
        num_threads: interpreter threads.

    Raises:
        ModelError: the file is not a TensorFlow Lite model.
    """

    framework = "tflite"
    format = "tflite"
    runtime = "litert"

    def __init__(self, path: str | Path, *, name: str | None = None, num_threads: int = 1, interpreter: Any = None):
        self.path = str(path)
        self.name = name or Path(path).name
        self._threads = int(num_threads)
        if interpreter is None:
            Interpreter = _interpreter_class()
            try:
                interpreter = Interpreter(model_path=str(path), num_threads=self._threads)
                interpreter.allocate_tensors()
            except Exception as exc:  # noqa: BLE001 - flatbuffer / schema errors
                raise load_error(path, "TensorFlow Lite", exc) from exc
        self._interp = interpreter
        self._in_details = interpreter.get_input_details()
        self._out_details = interpreter.get_output_details()
        self.inputs = tuple(self._spec(d, i) for i, d in enumerate(self._in_details))
        self.outputs = tuple(self._spec(d, i) for i, d in enumerate(self._out_details))
        self._debug: Any = None
        self._alloc_shapes: tuple | None = None

    @staticmethod
    def _spec(d: dict, i: int) -> TensorSpec:
        sig = TFLiteClassifier._signature(d)
        shape = tuple(None if s < 0 else int(s) for s in sig)
        if shape:
            shape = (None, *shape[1:])
        return TensorSpec(str(d.get("name") or f"input_{i}"), shape, np.dtype(d["dtype"]).name)

    def _run(self, interp: Any, xs: Sequence[np.ndarray], realloc_key: list | None = None) -> None:
        details = interp.get_input_details()
        shapes = tuple(tuple(np.shape(x)) for x in xs)
        if realloc_key is None or realloc_key[0] != shapes:
            for d, x in zip(details, xs):
                interp.resize_tensor_input(int(d["index"]), list(np.shape(x)), strict=False)
            interp.allocate_tensors()
            if realloc_key is not None:
                realloc_key[0] = shapes
        for d, x in zip(details, xs):
            dtype = np.dtype(d["dtype"])
            q = TFLiteClassifier._quant(d)
            x = np.asarray(x)
            if q is not None:
                info = np.iinfo(dtype)
                x = np.clip(np.round(x / q[0] + q[1]), info.min, info.max)
            interp.set_tensor(int(d["index"]), np.ascontiguousarray(x.astype(dtype, copy=False)))
        interp.invoke()

    def _read(self, interp: Any, d: dict) -> np.ndarray:
        out = interp.get_tensor(int(d["index"]))
        q = TFLiteClassifier._quant(d)
        if q is not None:
            return (out.astype(np.float32) - q[1]) * np.float32(q[0])
        return np.array(out)

    def forward(self, *xs: np.ndarray) -> list[np.ndarray]:
        self._check_inputs(xs)
        key = [getattr(self, "_alloc_shapes", None)]
        try:
            self._run(self._interp, xs, key)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"TensorFlow Lite failed on inputs {[np.shape(x) for x in xs]} ({exc})", self.path) from exc
        self._alloc_shapes = key[0]
        return [self._read(self._interp, d) for d in self._out_details]

    def _ops(self, interp: Any) -> list[dict]:
        return [op for op in interp._get_ops_details() if op.get("op_name") != "DELEGATE"]

    def weights(self) -> Weights:
        interp = self._interp
        details = {int(t["index"]): t for t in interp.get_tensor_details()}
        ops = self._ops(interp)
        produced = {int(i) for op in ops for i in op["outputs"]}
        graph_inputs = {int(d["index"]) for d in self._in_details}

        def constant(i: int, hybrid: bool) -> np.ndarray | None:
            """A constant tensor's float value (dequantised), or None for data, scratch and index tensors."""
            if i < 0 or i in produced or i in graph_inputs or i not in details:
                return None
            t = details[i]
            try:
                arr = np.array(interp.get_tensor(i))
            except Exception:  # noqa: BLE001 - tensors without data (scratch buffers)
                return None
            if arr.size == 0:
                return None
            qp = t.get("quantization_parameters") or {}
            scales = np.asarray(qp.get("scales", []))
            zps = np.asarray(qp.get("zero_points", [0]))
            if hybrid and arr.dtype == np.uint8 and scales.size and not np.any(zps):
                # hybrid (float-activation) kernels read uint8-typed weights as symmetric int8
                arr = arr.view(np.int8)
            if arr.dtype.kind in "iu" and scales.size:
                arr = dequantize(arr, scales, qp.get("zero_points", [0]), qp.get("quantized_dimension", 0))
            elif arr.dtype.kind != "f":
                return None  # integer shape/index constants
            return arr.astype(np.float32)

        # DEQUANTIZE of a constant (float16 weights, or int8 weights of some converters): the value
        # belongs to the operator that reads it, not to a layer of its own
        folded: dict[int, tuple[str, np.ndarray]] = {}
        for op in ops:
            if op["op_name"] == "DEQUANTIZE" and len(op["inputs"]) == 1 and len(op["outputs"]) == 1:
                src = int(op["inputs"][0])
                arr = constant(src, False)
                if arr is not None:
                    folded[int(op["outputs"][0])] = (str(details[src]["name"] or f"tensor_{src}"), arr)
        out: Weights = {}
        for op in ops:
            if op["op_name"] == "DEQUANTIZE" and int(op["outputs"][0]) in folded:
                continue
            params: dict[str, np.ndarray] = {}
            first = int(op["inputs"][0]) if len(op["inputs"]) else -1
            hybrid = first in details and np.dtype(details[first]["dtype"]).kind == "f"
            for i in (int(i) for i in op["inputs"]):
                if i in folded:
                    params[folded[i][0]] = folded[i][1]
                    continue
                arr = constant(i, hybrid)
                if arr is not None:
                    params[str(details[i]["name"] or f"tensor_{i}")] = arr
            if params:
                outs = [details[int(o)]["name"] for o in op["outputs"] if int(o) in details]
                layer = f"{op['index']}:{op['op_name'].lower()}" + (f":{outs[0]}" if outs and outs[0] else "")
                out[layer] = params
        return out

    def _canonical(self, layer: str, param: str, w: np.ndarray) -> np.ndarray:
        if w.ndim == 4:
            if "depthwise" in layer:  # (1, H, W, O) → (O, 1, H, W)
                return np.ascontiguousarray(w.transpose(3, 0, 1, 2))
            return np.ascontiguousarray(w.transpose(0, 3, 1, 2))  # (O, H, W, I) → (O, I, H, W)
        return w

    def _debug_interp(self) -> Any:
        if self._debug is None:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType

            try:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._debug = Interpreter(
                        model_path=self.path,
                        num_threads=self._threads,
                        experimental_preserve_all_tensors=True,
                        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                    )
                self._debug.allocate_tensors()
            except Exception as exc:  # noqa: BLE001
                raise NotSupportedError(f"cannot open a tensor-preserving TensorFlow Lite interpreter ({exc})", self.path) from exc
        return self._debug

    def _layer_tensors(self) -> list[tuple[str, dict]]:
        interp = self._debug_interp()
        details = {int(t["index"]): t for t in interp.get_tensor_details()}
        seen: set[str] = set()
        res = []
        ops = self._ops(interp)
        readers: dict[int, list[dict]] = {}
        for op in ops:
            for i in op["inputs"]:
                readers.setdefault(int(i), []).append(op)
        for op in ops:
            if op["op_name"].lower().replace("_", "") in PLUMBING_OPS or op["op_name"] in ("RESHAPE", "QUANTIZE", "DEQUANTIZE"):
                continue
            for o in op["outputs"]:
                t = details.get(int(o))
                if t is None:
                    continue
                nm = str(t["name"] or f"{op['index']}:{op['op_name'].lower()}")
                rd = readers.get(int(o), [])
                if len(rd) == 1 and rd[0]["op_name"] == "DEQUANTIZE" and int(rd[0]["outputs"][0]) in details:
                    nm = str(details[int(rd[0]["outputs"][0])]["name"] or nm)  # named as the float tensor it stands for
                if nm in seen:
                    nm = f"{nm}#{op['index']}"
                seen.add(nm)
                res.append((nm, t))
        return res

    def layer_names(self) -> list[str]:
        return [n for n, _ in self._layer_tensors()]

    def _activations(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        interp = self._debug_interp()
        tensors = dict(self._layer_tensors())
        n = int(np.shape(xs[0])[0])
        acts: dict[str, list[np.ndarray]] = {k: [] for k in layers}
        key: list = [None]
        for i in range(n):  # one sample at a time: the graph may fix its batch size inside
            self._run(interp, [x[i : i + 1] for x in xs], key)
            for k in layers:
                acts[k].append(self._read(interp, tensors[k]).astype(np.float32))
        return {k: np.concatenate(v, axis=0) for k, v in acts.items()}
