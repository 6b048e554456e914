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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters._util import check_shape_agrees, choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess, resolve_preprocess
from twinspect.dl.adapters.loaded import PLUMBING_OPS, LoadedModel, NotSupportedError, TensorSpec, Weights, dequantize
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


#: Quantised operators: input index of (weight, weight scale, weight zero point), of (y scale, y zero
#: point) and of the int32 bias (None: no bias input); the bias scale is x scale (input 1) × weight scale.
_QLINEAR: dict[str, tuple[tuple[int, int, int], tuple[int, int], int | None]] = {
    "QLinearConv": ((3, 4, 5), (6, 7), 8),
    "QLinearMatMul": ((3, 4, 5), (6, 7), None),
    "QGemm": ((3, 4, 5), (7, 8), 6),
}

#: Output (scale, zero point) input indices of the other QLinear* operators (element-wise, pooling).
_QLINEAR_OUT = {
    "QLinearAdd": (6, 7),
    "QLinearMul": (6, 7),
    "QLinearAveragePool": (3, 4),
    "QLinearGlobalAveragePool": (3, 4),
    "QLinearSigmoid": (3, 4),
    "QLinearLeakyRelu": (3, 4),
    "QLinearSoftmax": (3, 4),
    "QLinearConcat": (0, 1),
}

#: Element-wise QLinear* operators: (value, scale, zero point) input indices of each operand.
_QOPERANDS = {
    "QLinearAdd": ((0, 1, 2), (3, 4, 5)),
    "QLinearMul": ((0, 1, 2), (3, 4, 5)),
}

#: Operators through which a quantised tensor keeps its scale and zero point.
_QPASS = frozenset(("MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Relu", "Clip", "Concat", "Slice", "Gather"))

#: Quantisation plumbing: never a layer of its own.
_QUANT_OPS = frozenset(("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast", "CastLike"))

#: Integer-arithmetic replacements of float layers (dynamic and static quantisation).
_INT_OPS = frozenset(("ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul"))

#: Which input of an operator is called what (the rest keep their initializer names).
_ROLES = {
    "Conv": ("x", "weight", "bias"),
    "ConvTranspose": ("x", "weight", "bias"),
    "Gemm": ("a", "weight", "bias"),
    "MatMul": ("a", "weight"),
    "BatchNormalization": ("x", "scale", "bias", "mean", "var"),
    "QLinearConv": ("x", "", "", "weight", "", "", "", "", "bias"),
    "QLinearMatMul": ("a", "", "", "weight"),
    "QGemm": ("a", "", "", "weight", "", "", "bias"),
    "ConvInteger": ("x", "weight"),
    "MatMulInteger": ("a", "weight"),
}

#: Ops whose parameters follow a producer chain back to an initializer (weight dequantisation, bias reshape).
_PARAM_PATH = frozenset(("DequantizeLinear", "Reshape", "Cast", "Identity", "Squeeze", "Unsqueeze", "Transpose"))


def _onnx_module():
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError("the onnx package is not installed (pip install 'twinspect[dl]')") from exc
    return onnx


@dataclass
class _Layer:
    """One user-level layer of an ONNX graph: an operator plus the quantisation plumbing around it."""

    name: str
    op: str
    anchor: Any  # NodeProto
    nodes: list[Any]  # anchor first, then the absorbed chain
    value: str  # the tensor holding the layer's output


@dataclass
class _Graph:
    layers: list[_Layer]
    const: set[str]  # tensors that do not depend on the inputs
    aux: set[str]  # const plus runtime quantisation parameters (scales / zero points)
    qparams: dict[str, tuple[str, str]]  # integer tensor -> (scale, zero point) tensor names


def _topological(nodes: Sequence[Any], ready: set[str]) -> list[Any]:
    """Nodes in a dependency order that keeps the file's order wherever it is already one.

    ONNX requires nodes sorted topologically, but converters do not always keep it (ORT's float16
    converter appends its input casts at the end). Each node is emitted after the producers of its
    inputs (a depth-first walk in file order), so a valid file keeps its order exactly — a quantised
    copy then lists its layers in the same order as the float model it came from.
    """
    producer = {o: k for k, node in enumerate(nodes) for o in node.output if o}
    done = [False] * len(nodes)
    out: list[Any] = []
    for k0 in range(len(nodes)):
        stack = [(k0, False)]
        while stack:
            k, expanded = stack.pop()
            if done[k]:
                continue
            if expanded:
                done[k] = True
                out.append(nodes[k])
                continue
            stack.append((k, True))
            for i in reversed(nodes[k].input):
                j = producer.get(i) if i and i not in ready else None
                if j is not None and not done[j] and j != k:
                    stack.append((j, False))
    return out


def _layer_name(anchor: Any, k: int, chain: Sequence[Any]) -> str:
    """The anchor's name with ONNX Runtime's quantiser suffixes removed, so that a quantised layer is
    named like the float layer it replaces: ``<name>_quant`` (dynamic and QOperator quantisation) and
    ``<gemm>_MatMul`` (a Gemm split into MatMul + ``<gemm>_Add``)."""
    name = anchor.name or f"{k}:{anchor.op_type}"
    if (anchor.op_type in _INT_OPS or anchor.op_type.startswith("QLinear")) and name.endswith("_quant"):
        name = name[: -len("_quant")]
    if name.endswith("_MatMul") and any(n.op_type == "Add" and n.name == name[: -len("_MatMul")] + "_Add" for n in chain):
        name = name[: -len("_MatMul")]
    return name


def analyse_graph(graph: Any) -> _Graph:
    """Split an ONNX graph into the layers a user would name.

    A layer is every operator that computes on the input data and is not plumbing (reshapes, casts,
    ``QuantizeLinear``/``DequantizeLinear``/``DynamicQuantizeLinear``, shape arithmetic) nor
    arithmetic on parameters only (bias reshapes, products of quantisation scales). Its output is
    followed through the quantisation plumbing that a quantiser put after it — a ``Cast``, a
    ``QuantizeLinear`` → ``DequantizeLinear`` pair, a lone ``DequantizeLinear``, and, after an integer
    operator (``ConvInteger``/``MatMulInteger``/``QLinear*``), the ``Mul`` by the scales and the
    bias ``Add`` of dynamic quantisation, or the requantised bias ``QLinearAdd`` of QOperator
    quantisation — so the layer's value is the float tensor that the original float layer computed.
    Where a static quantiser fused an activation into the layer (``Conv`` + ``Relu`` in QDQ and
    QOperator graphs), the layer keeps the conv's name and holds the post-activation values, and the
    float model's separate ``Relu`` layer has no namesake.

    Args:
        graph: an ``onnx.GraphProto``.

    Returns:
        The layers in execution order with the constant / auxiliary tensor sets and the integer
        tensors' quantisation parameters.
    """
    inits = {t.name for t in graph.initializer}
    inputs = {i.name for i in graph.input if i.name not in inits}
    nodes = _topological(list(graph.node), inits | inputs)
    const: set[str] = set(inits)
    aux: set[str] = set(inits)
    qparams: dict[str, tuple[str, str]] = {}
    consumers: dict[str, list[Any]] = {}
    for node in nodes:
        for i in node.input:
            if i:
                consumers.setdefault(i, []).append(node)
        ins = [i for i in node.input if i]
        if node.op_type == "Constant" or (ins and all(i in const for i in ins)):
            const.update(node.output)
            aux.update(node.output)
        elif ins and all(i in aux for i in ins):
            aux.update(node.output)
        if node.op_type == "DynamicQuantizeLinear":
            aux.update(o for o in node.output[1:] if o)
        # quantisation parameters of integer tensors
        out0 = node.output[0] if node.output else ""
        if node.op_type == "QuantizeLinear" and len(node.input) > 1:
            qparams[out0] = (node.input[1], node.input[2] if len(node.input) > 2 else "")
        elif node.op_type == "DynamicQuantizeLinear" and len(node.output) > 2:
            qparams[out0] = (node.output[1], node.output[2])
        elif node.op_type in _QLINEAR or node.op_type in _QLINEAR_OUT:
            si, zi = _QLINEAR[node.op_type][1] if node.op_type in _QLINEAR else _QLINEAR_OUT[node.op_type]
            if len(node.input) > si:
                qparams[out0] = (node.input[si], node.input[zi] if len(node.input) > zi else "")
        elif node.op_type in _QPASS and node.input and node.input[0] in qparams:
            qparams[out0] = qparams[node.input[0]]
    graph_outputs = {o.name for o in graph.output}

    def sole_consumer(v: str) -> Any:
        cs = consumers.get(v, [])
        return cs[0] if len(cs) == 1 and v not in graph_outputs else None

    def other_input(node: Any, v: str) -> str:
        rest = [i for i in node.input if i and i != v]
        return rest[0] if len(rest) == 1 else ""

    layers: list[_Layer] = []
    taken: set[int] = set()
    for k, node in enumerate(nodes):
        if id(node) in taken or not node.output or not node.output[0]:
            continue
        op = node.op_type
        if op in _QUANT_OPS or op.lower() in PLUMBING_OPS or op == "Constant" or node.output[0] in aux:
            continue
        chain = [node]
        v = node.output[0]
        integer = op in _INT_OPS
        stage = 0  # after an integer op: 0 = scale Mul allowed, 1 = bias Add allowed, 2 = done
        while True:
            c = sole_consumer(v)
            if c is None or id(c) in taken:
                break
            if c.op_type in ("Cast", "CastLike", "DequantizeLinear") and c.input[0] == v:
                chain.append(c)
                v = c.output[0]
                continue
            if c.op_type == "QuantizeLinear" and c.input[0] == v:
                d = sole_consumer(c.output[0])
                if d is not None and d.op_type == "DequantizeLinear":
                    chain += [c, d]
                    v = d.output[0]
                    continue
                if integer and d is not None and d.op_type == "QLinearAdd" and stage < 2 and len(d.input) > 3:
                    other = d.input[3] if d.input[0] == c.output[0] else d.input[0]
                    if other in const:  # requantised for a QOperator bias add (exporters' MatMul + Add)
                        chain += [c, d]
                        v, stage = d.output[0], 2
                        continue
                break
            if integer and c.op_type == "Mul" and stage == 0 and other_input(c, v) in aux:
                chain.append(c)
                v, stage = c.output[0], 1
                continue
            if (integer or op == "MatMul") and c.op_type == "Add" and stage < 2 and other_input(c, v) in const:
                chain.append(c)
                v, stage = c.output[0], 2
                continue
            if integer and c.op_type == "QLinearAdd" and stage < 2 and len(c.input) > 3:
                other = c.input[3] if c.input[0] == v else c.input[0]
                if other in const:  # QOperator bias add after a QLinearMatMul
                    chain.append(c)
                    v, stage = c.output[0], 2
                    continue
            break
        taken.update(id(n) for n in chain)
        layers.append(_Layer(_layer_name(node, k, chain), op, node, chain, v))
    seen: dict[str, int] = {}
    for lay in layers:  # unique names
        c = seen.get(lay.name, 0)
        seen[lay.name] = c + 1
        if c:
            lay.name = f"{lay.name}:{c}"
    return _Graph(layers, const, aux, qparams)


class ONNXModel(LoadedModel):
    """An ONNX graph (format ``onnx``) run by ONNX Runtime (``onnxruntime``) or by ONNX's own numpy
    reference evaluator (``onnx-reference``).

    Layers (for weights and activations alike) are those of :func:`analyse_graph`: the operators a
    user would name, with the quantisation plumbing around them folded in, named after the float
    layer they replace (ONNX Runtime's ``_quant`` suffix removed), so that a float model and its
    ``quantize_dynamic`` / ``quantize_static`` (QDQ or QOperator) or float16 copy list the same layer
    names where the quantiser kept the layer.

    Weights: each layer's parameters (initializers reached through ``DequantizeLinear``/``Reshape``/
    ``Cast``), dequantised for QDQ graphs, ``QLinearConv``/``QLinearMatMul``/``QGemm`` (int32 bias with
    scale x-scale × w-scale) and dynamic ``ConvInteger``/``MatMulInteger`` (scale found as
    ``<name>_scale``, ORT's naming); scales and zero points are not weights. float16 weights come out
    as float32.

    Activations: the graph is copied with each layer's value added as a graph output and run once by
    the same runtime; integer values (QOperator graphs) are dequantised with their scale and zero
    point (propagated through pooling and reshapes), all returned as float32.

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
        self._graph: _Graph | None = None
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

    def _analysis(self) -> _Graph:
        if self._graph is None:
            self._graph = analyse_graph(self.proto.graph)
        return self._graph

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

    def _param(self, name: str, producers: dict[str, Any]) -> tuple[np.ndarray | None, str]:
        """The float value of a constant tensor followed back to its initializer, and that initializer's
        name; None when the path holds anything but dequantisation, reshapes, transposes and casts."""
        node = producers.get(name)
        if node is None:
            return self._array(name), name
        if node.op_type == "Constant":
            return self._array(name), name
        if node.op_type not in _PARAM_PATH:
            return None, name
        src = node.input[0]
        if node.op_type == "DequantizeLinear":
            q, scale = self._array(src), self._array(node.input[1])
            zp = self._array(node.input[2]) if len(node.input) > 2 and node.input[2] else 0
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            if q is None or scale is None:
                return None, src
            return dequantize(q, scale, 0 if zp is None else zp, axis if np.ndim(scale) else None), src
        arr, base = self._param(src, producers)
        if arr is not None and node.op_type == "Transpose":  # a weight transposed for its consumer
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
            arr = np.transpose(arr, perm) if perm is None or len(perm) == arr.ndim else arr
        return arr, base  # a reshape (bias broadcast) or cast: the parameter's own values

    def _dequantized_operand(self, node: Any, trip: tuple[int, int, int]) -> np.ndarray | None:
        """float32 value of a constant quantised operand ``(value, scale, zero point)`` of ``node``."""
        vi, si, zi = trip
        if len(node.input) <= si:
            return None
        q, s = self._array(node.input[vi]), self._array(node.input[si])
        z = self._array(node.input[zi]) if len(node.input) > zi and node.input[zi] else None
        if q is None or s is None:
            return None
        return dequantize(q, s, 0 if z is None else z, 0 if np.ndim(s) else None)

    def weights(self) -> Weights:
        g = self._analysis()
        producers = {o: node for node in self.proto.graph.node for o in node.output}
        out: Weights = {}
        for lay in g.layers:
            params: dict[str, np.ndarray] = {}
            node = lay.anchor
            roles = _ROLES.get(node.op_type, ())
            qlin = _QLINEAR.get(node.op_type)
            for j, inp in enumerate(node.input):
                if not inp or inp not in g.const:
                    continue
                arr: np.ndarray | None
                if qlin is not None:
                    (wi, wsi, wzi), _, bi = qlin
                    if j == wi:
                        q, s = self._array(inp), self._array(node.input[wsi])
                        z = self._array(node.input[wzi]) if len(node.input) > wzi and node.input[wzi] else None
                        if q is None or s is None:
                            continue
                        axis = 0 if (node.op_type == "QLinearConv" or (node.op_type == "QGemm" and _attr(node, "transB", 0))) else -1
                        arr = dequantize(q, s, 0 if z is None else z, axis if np.ndim(s) else None)
                    elif j == bi:  # int32 bias, scale x_scale * w_scale
                        q, xs_, ws_ = self._array(inp), self._array(node.input[1]), self._array(node.input[wsi])
                        if q is None or xs_ is None or ws_ is None:
                            continue
                        arr = dequantize(q, np.asarray(xs_, np.float64) * np.asarray(ws_, np.float64), 0, 0)
                    else:
                        continue  # activations, scales and zero points
                elif node.op_type in _QOPERANDS:
                    trip = next((t for t in _QOPERANDS[node.op_type] if t[0] == j), None)
                    arr = self._dequantized_operand(node, trip) if trip else None
                    if arr is None:
                        continue  # scales and zero points
                elif node.op_type in ("ConvInteger", "MatMulInteger"):
                    if j != 1:
                        continue  # zero points
                    q = self._array(inp)
                    base = inp[: -len("_quantized")] if inp.endswith("_quantized") else inp
                    s = self._array(base + "_scale")
                    zq = self._array(node.input[3]) if len(node.input) > 3 and node.input[3] else None
                    if q is None or s is None:
                        continue  # scale not findable: not reported rather than reported wrong
                    arr = dequantize(q, s, 0 if zq is None else zq, (0 if node.op_type == "ConvInteger" else -1) if np.ndim(s) else None)
                elif node.op_type.startswith("QLinear") or node.op_type in _INT_OPS:
                    continue  # other quantised operators: their constants are scales and zero points
                else:
                    arr, _ = self._param(inp, producers)
                    if arr is None or arr.dtype.kind != "f":
                        continue  # shapes, indices, axes
                role = roles[j] if j < len(roles) and roles[j] else inp
                params[role] = np.asarray(arr, dtype=np.float32)
            for c in lay.nodes[1:]:  # a bias Add folded into the layer
                if c.op_type == "QLinearAdd":
                    for trip in _QOPERANDS["QLinearAdd"]:
                        if len(c.input) > trip[0] and c.input[trip[0]] in g.const:
                            b = self._dequantized_operand(c, trip)
                            if b is not None:
                                params["bias" if "bias" not in params else c.input[trip[0]]] = b.reshape(-1) if b.ndim > 1 and b.size == max(b.shape) else b
                    continue
                if c.op_type != "Add":
                    continue
                for inp in c.input:
                    if inp in g.const:
                        arr, _ = self._param(inp, producers)
                        if arr is not None and arr.dtype.kind == "f":
                            vec = arr.ndim > 1 and arr.size == max(arr.shape)  # a (1, C, 1, 1) constant: its (C,) values
                            params["bias" if "bias" not in params else inp] = np.asarray(arr.reshape(-1) if vec else arr, dtype=np.float32)
            if params:
                out[lay.name] = params
        return out

    def _canonical(self, layer: str, param: str, w: np.ndarray) -> np.ndarray:
        if param != "weight" and w.ndim > 1 and w.size == max(w.shape):
            return w.reshape(-1)  # a per-channel constant shaped for broadcasting, e.g. (1, C, 1, 1) -> (C,)
        lay = next((x for x in self._analysis().layers if x.name == layer), None)
        op = lay.op if lay is not None else ""
        if w.ndim == 2 and param == "weight":
            trans_b = bool(_attr(lay.anchor, "transB", 0)) if lay is not None else False
            if op in ("MatMul", "MatMulInteger", "QLinearMatMul") or (op in ("Gemm", "QGemm") and not trans_b):
                return np.ascontiguousarray(w.T)
        return w

    def layer_names(self) -> list[str]:
        g = self._analysis()
        if g.layers:
            return [lay.name for lay in g.layers]
        return [o.name for o in self.proto.graph.output]

    def _values(self) -> dict[str, str]:
        g = self._analysis()
        if g.layers:
            return {lay.name: lay.value for lay in g.layers}
        return {o.name: o.name for o in self.proto.graph.output}

    def _activation_runner(self):
        if self._act_runner is None:
            onnx = _onnx_module()
            proto = onnx.ModelProto()
            proto.CopyFrom(self.proto)
            have = {o.name for o in proto.graph.output}
            for v in self._values().values():
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
        names = self._values()
        qparams = self._analysis().qparams
        values = [names[k] for k in layers]
        try:
            outs = run(values, self._feed(xs))
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.runtime} failed computing activations ({exc})", self.path) from exc
        res = {}
        for k, v, a in zip(layers, values, outs):
            a = np.asarray(a)
            if a.dtype.kind in "iu" and v in qparams:
                sn, zn = qparams[v]
                s = self._array(sn)
                z = self._array(zn) if zn else None
                if s is not None:
                    a = dequantize(a, s, 0 if z is None else z, 1 if np.ndim(s) else None)
            res[k] = a.astype(np.float32, copy=False)
        return res


def _attr(node: Any, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)
