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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess, resolve_preprocess
from twinspect.dl.adapters.model import PLUMBING_OPS, LoadedModel, NotSupportedError, TensorSpec, Weights, dequantize
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
        d.update(framework=self.framework, path=self.path, format="onnx", runtime="onnxruntime")
        return d

    def _load_model(self) -> ONNXModel:
        return ONNXModel(self.path, name=self.name, session=self._sess)

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> ONNXClassifier:
        """Same as the constructor (for symmetry with the other adapters)."""
        return cls(path, **kwargs)


#: QLinear* operators: input index of (weight, weight scale, weight zero point) and of (y scale, y zero point).
_QLINEAR = {
    "QLinearConv": ((3, 4, 5), (6, 7)),
    "QLinearMatMul": ((3, 4, 5), (6, 7)),
    "QLinearAdd": ((3, 4, 5), (6, 7)),
    "QLinearMul": ((3, 4, 5), (6, 7)),
}

#: Which input of an operator is called what (the rest keep their initializer names).
_ROLES = {
    "Conv": ("x", "weight", "bias"),
    "ConvTranspose": ("x", "weight", "bias"),
    "Gemm": ("a", "weight", "bias"),
    "MatMul": ("a", "weight"),
    "BatchNormalization": ("x", "scale", "bias", "mean", "var"),
    "QLinearConv": ("x", "", "", "weight", "", "", "", "", "bias"),
    "QLinearMatMul": ("a", "", "", "weight"),
    "ConvInteger": ("x", "weight"),
    "MatMulInteger": ("a", "weight"),
}


def _onnx_module():
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError("the onnx package is not installed (pip install 'twinspect[dl]')") from exc
    return onnx


class ONNXModel(LoadedModel):
    """An ONNX graph (format ``onnx``) run by ONNX Runtime (``onnxruntime``) or by ONNX's own numpy
    reference evaluator (``onnx-reference``).

    Weights are the graph's initializers grouped by the node that consumes them (after following
    ``DequantizeLinear``), dequantised for QDQ graphs, ``QLinearConv``/``QLinearMatMul`` and dynamic
    ``ConvInteger``/``MatMulInteger`` (scale found as ``<name>_scale``, ORT's naming). Activations:
    the graph is copied with every non-plumbing node output added as a graph output and run once by
    the same runtime; integer outputs of ``QLinear*`` nodes are dequantised with their output scale.

    Args:
        path: ``.onnx`` file.
        runtime: ``"onnxruntime"`` (default) or ``"onnx-reference"``.
        name: display name (the file name by default).
        threads: ``intra_op_num_threads`` of the ONNX Runtime session.
        session: an existing ONNX Runtime session of the same file to share.

    Raises:
        ModelError: the file is not a valid ONNX model or the runtime cannot load it.
    """

    framework = "onnx"
    format = "onnx"

    def __init__(self, path: str | Path, *, runtime: str = "onnxruntime", name: str | None = None, threads: int = 1, session: Any = None):
        onnx = _onnx_module()
        self.path = str(path)
        self.name = name or Path(path).name
        self.runtime = runtime
        self._threads = int(threads)
        try:
            self.proto = onnx.load(str(path))
        except Exception as exc:  # noqa: BLE001 - protobuf errors
            raise load_error(path, "ONNX", exc) from exc
        self._inits = {t.name: t for t in self.proto.graph.initializer}
        graph_inputs = [i for i in self.proto.graph.input if i.name not in self._inits]
        self.inputs = tuple(self._spec(v) for v in graph_inputs)
        self.outputs = tuple(self._spec(v) for v in self.proto.graph.output)
        self._sess = session
        self._ref: Any = None
        self._act_runner: Any = None
        self._act_names: list[tuple[str, str]] | None = None
        if session is None:
            self._runner()  # fail at load, not at the first call

    @staticmethod
    def _spec(v: Any) -> TensorSpec:
        onnx = _onnx_module()
        tt = v.type.tensor_type
        dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim)
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
        except Exception:  # noqa: BLE001 - undefined element type
            dtype = "float32"
        return TensorSpec(v.name, dims, dtype)

    def _make_runner(self, model_bytes: bytes | None = None):
        if self.runtime == "onnx-reference":
            from onnx.reference import ReferenceEvaluator

            proto = self.proto if model_bytes is None else _onnx_module().load_from_string(model_bytes)
            ref = ReferenceEvaluator(proto)
            return lambda names, feed: ref.run(names, feed)
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        src = model_bytes if model_bytes is not None else self.path
        sess = ort.InferenceSession(src, sess_options=opts, providers=["CPUExecutionProvider"])
        return lambda names, feed: sess.run(names, feed)

    def _runner(self):
        if self._ref is None:
            if self._sess is not None and self.runtime == "onnxruntime":
                sess = self._sess
                self._ref = lambda names, feed: sess.run(names, feed)
            else:
                try:
                    self._ref = self._make_runner()
                except Exception as exc:  # noqa: BLE001
                    raise load_error(self.path, "ONNX", exc) from exc
        return self._ref

    def _feed(self, xs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        self._check_inputs(xs)
        return {s.name: np.asarray(x).astype(s.dtype, copy=False) for s, x in zip(self.inputs, xs)}

    def forward(self, *xs: np.ndarray) -> list[np.ndarray]:
        run = self._runner()
        try:
            return [np.asarray(o) for o in run([s.name for s in self.outputs], self._feed(xs))]
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.runtime} failed on inputs {[np.shape(x) for x in xs]} ({exc})", self.path) from exc

    def _array(self, name: str) -> np.ndarray | None:
        onnx = _onnx_module()
        t = self._inits.get(name)
        if t is not None:
            return onnx.numpy_helper.to_array(t)
        for node in self.proto.graph.node:  # Constant nodes
            if node.op_type == "Constant" and name in node.output:
                for a in node.attribute:
                    if a.name == "value":
                        return onnx.numpy_helper.to_array(a.t)
        return None

    def weights(self) -> Weights:
        graph = self.proto.graph
        dq: dict[str, np.ndarray] = {}  # DequantizeLinear outputs fed by initializers
        for node in graph.node:
            if node.op_type == "DequantizeLinear" and node.input[0] in self._inits:
                q = self._array(node.input[0])
                scale = self._array(node.input[1])
                zp = self._array(node.input[2]) if len(node.input) > 2 and node.input[2] else 0
                axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
                if q is not None and scale is not None:
                    dq[node.output[0]] = dequantize(q, scale, zp, axis if np.ndim(scale) else None)
        out: Weights = {}
        used: set[str] = set()
        for k, node in enumerate(graph.node):
            if node.op_type in ("DequantizeLinear", "QuantizeLinear", "Constant"):
                continue
            roles = _ROLES.get(node.op_type, ())
            params: dict[str, np.ndarray] = {}
            qlin = _QLINEAR.get(node.op_type)
            for j, inp in enumerate(node.input):
                if not inp or inp in used:
                    continue
                if qlin is not None and j in (qlin[0][1], qlin[0][2], *qlin[1], 1, 2):
                    continue  # scales and zero points
                arr: np.ndarray | None
                if inp in dq:
                    arr = dq[inp]
                elif inp in self._inits:
                    arr = self._array(inp)
                    if arr is None:
                        continue
                    if qlin is not None and j == qlin[0][0]:
                        s = self._array(node.input[qlin[0][1]])
                        z = self._array(node.input[qlin[0][2]])
                        if s is None:
                            continue
                        arr = dequantize(arr, s, 0 if z is None else z, 0 if np.ndim(s) else None)
                    elif node.op_type == "QLinearConv" and j == 8:  # int32 bias, scale x_scale * w_scale
                        xs_, ws_ = self._array(node.input[1]), self._array(node.input[4])
                        if xs_ is None or ws_ is None:
                            continue
                        arr = dequantize(arr, np.asarray(xs_, np.float64) * np.asarray(ws_, np.float64), 0, 0)
                    elif node.op_type in ("ConvInteger", "MatMulInteger") and j == 1:
                        base = inp[: -len("_quantized")] if inp.endswith("_quantized") else inp
                        s = self._array(base + "_scale")
                        zq = self._array(node.input[3]) if len(node.input) > 3 and node.input[3] else None
                        if s is None:
                            continue  # scale not findable: not reported rather than reported wrong
                        axis = (0 if node.op_type == "ConvInteger" else -1) if np.ndim(s) else None
                        arr = dequantize(arr, s, 0 if zq is None else zq, axis)
                    elif arr.dtype.kind != "f":
                        continue  # shapes, indices, axes
                else:
                    continue
                used.add(inp)
                role = roles[j] if j < len(roles) and roles[j] else inp
                params[role] = np.asarray(arr, dtype=np.float32)
            if params:
                out[node.name or f"{k}:{node.op_type}"] = params
        return out

    def _canonical(self, layer: str, param: str, w: np.ndarray) -> np.ndarray:
        op = self._layer_ops().get(layer, "")
        if w.ndim == 2 and param == "weight" and (op in ("MatMul", "MatMulInteger", "QLinearMatMul") or (op == "Gemm" and not self._gemm_trans_b(layer))):
            return np.ascontiguousarray(w.T)
        return w

    def _layer_ops(self) -> dict[str, str]:
        return {node.name or f"{k}:{node.op_type}": node.op_type for k, node in enumerate(self.proto.graph.node)}

    def _gemm_trans_b(self, layer: str) -> bool:
        for k, node in enumerate(self.proto.graph.node):
            if (node.name or f"{k}:{node.op_type}") == layer:
                return any(a.name == "transB" and a.i == 1 for a in node.attribute)
        return False

    def _layer_values(self) -> list[tuple[str, str]]:
        """(layer name, value name) of every non-plumbing node output, in graph order."""
        if self._act_names is None:
            res = []
            outputs = {o.name for o in self.proto.graph.output}
            for k, node in enumerate(self.proto.graph.node):
                if node.op_type.lower() in PLUMBING_OPS:
                    continue
                for j, o in enumerate(node.output):
                    if not o:
                        continue
                    base = node.name or f"{k}:{node.op_type}"
                    res.append((base if j == 0 else f"{base}:{j}", o))
            self._act_names = [(n, v) for n, v in res if v not in self._inits] or [(v, v) for v in outputs]
        return self._act_names

    def layer_names(self) -> list[str]:
        return [n for n, _ in self._layer_values()]

    def _activation_runner(self):
        if self._act_runner is None:
            onnx = _onnx_module()
            proto = onnx.ModelProto()
            proto.CopyFrom(self.proto)
            have = {o.name for o in proto.graph.output}
            for _, v in self._layer_values():
                if v not in have:
                    proto.graph.output.append(onnx.ValueInfoProto(name=v))
                    have.add(v)
            try:
                self._act_runner = self._make_runner(proto.SerializeToString())
            except Exception as exc:  # noqa: BLE001
                raise NotSupportedError(f"{self.runtime} cannot expose the intermediate outputs of this graph ({exc})", self.path) from exc
        return self._act_runner

    def _activations(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        run = self._activation_runner()
        names = dict(self._layer_values())
        producers = {o: node for node in self.proto.graph.node for o in node.output}
        values = [names[k] for k in layers]
        try:
            outs = run(values, self._feed(xs))
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.runtime} failed computing activations ({exc})", self.path) from exc
        res = {}
        for k, v, a in zip(layers, values, outs):
            a = np.asarray(a)
            node = producers.get(v)
            if a.dtype.kind in "iu" and node is not None:
                q = _QLINEAR.get(node.op_type)
                idx = q[1] if q else ((1, 2) if node.op_type == "QuantizeLinear" else None)
                if idx is not None and len(node.input) > idx[1]:
                    s = self._array(node.input[idx[0]])
                    z = self._array(node.input[idx[1]])
                    if s is not None:
                        a = dequantize(a, s, 0 if z is None else z)
            res[k] = a.astype(np.float32, copy=False)
        return res
