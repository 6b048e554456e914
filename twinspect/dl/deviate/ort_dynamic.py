"""A differentiable stand-in for an ONNX Runtime dynamic-int8 model (``quantize_dynamic``), for the pair's direction.

The guided search's pair direction (:mod:`twinspect.dl.deviate.guided`, ``pair_gradient``) needs an
input gradient of the compressed model g. A model made by ONNX Runtime's
``onnxruntime.quantization.quantize_dynamic`` gives none (its integer kernels run in ONNX Runtime),
and a float model with only its weights rounded to int8 does not behave like it: most of its error
comes from the *activations*, which ONNX Runtime quantises to uint8 at run time, per tensor, from
each tensor's own minimum and maximum. This module reads the quantised ONNX graph itself and runs it
in torch, operator by operator, with ONNX's semantics:

- ``DynamicQuantizeLinear(x) -> (y, y_scale, y_zero_point)`` (ONNX operator spec, opset 11; ONNX
  Runtime's ``GetQuantizationParameter``): ``x_min = min(0, min(x))``, ``x_max = max(0, max(x))``
  over the *whole tensor* (batch included, as ONNX Runtime computes it), ``y_scale = (x_max − x_min) / 255``
  (1 when ``x_max = x_min``), ``y_zero_point = clip(round(−x_min / y_scale), 0, 255)``,
  ``y = clip(round(x / y_scale) + y_zero_point, 0, 255)``, round half to even;
- ``ConvInteger`` / ``MatMulInteger``: the convolution / matrix product of ``(a − a_zero_point)`` and
  ``(b − b_zero_point)``, exact integers (held in float32: exact up to 2²⁴, which the suite's layers
  stay near; a larger sum differs from ONNX Runtime's int32 by float32 rounding only). **Except where the
  runtime itself is not exact:** on x86 CPUs without AVX-VNNI, ONNX Runtime's uint8 × int8 ``MatMulInteger``
  kernel (MLAS, AVX2 ``vpmaddubsw``) adds the raw products of each pair of adjacent reduction indices
  (2i, 2i + 1) in int16 with saturation (255·127 + 255·127 gives 32767), then sums the pairs in int32 and
  corrects for the zero points: ``Σ_i sat16(a_2i·b_2i + a_2i+1·b_2i+1) − a_zp·Σ_k b_k − b_zp·Σ_k a_k +
  K·a_zp·b_zp``. :func:`ort_saturates_u8s8_pairs` asks this machine's ONNX Runtime once (a two-element product),
  and the stand-in computes ``MatMulInteger`` that way when it does (``saturate``; the saturation passes the
  gradient straight through). Measured on an AVX2-only AMD EPYC with ONNX Runtime 1.31.1 against random
  operands (K 7–1,024, zero points 0–255): equal to ONNX Runtime in every element; ``ConvInteger`` (int8
  weights × uint8 activations) is exact there, as ONNX defines it;
- the float operators ``quantize_dynamic`` leaves around them (Cast, Mul, Add, Reshape, Relu, pooling,
  Gemm, …) as ONNX defines them. The weights are the file's own int8 values and scales (int8,
  symmetric, per tensor by ``quantize_dynamic``'s default).

Gradients use the straight-through estimator (Bengio, Léonard, Courville, "Estimating or
propagating gradients through stochastic neurons for conditional computation", 2013; as in
quantisation-aware training): the rounding and clipping of ``DynamicQuantizeLinear`` pass the
gradient through unchanged, the scale and zero point are constants of the forward pass. So the
gradient is the float graph's, evaluated at the quantised activations the int8 model computes.

Differences from ONNX Runtime that remain: float32 summation order in the integer products (exact
below 2²⁴) and ONNX Runtime's fused kernels (``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``),
which compute the same values. ``tests/dl/test_deviate_ort_dynamic.py`` measures the agreement.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.adapters.differentiable import LogitFn, with_preprocess
from twinspect.errors import ModelError

#: The operator that marks a graph as ONNX Runtime dynamic quantisation's (``quantize_dynamic``).
DYNAMIC_OP = "DynamicQuantizeLinear"


def _onnx_path(clf: Classifier) -> str | None:
    """The ``.onnx`` file behind an ONNX Runtime classifier, or None for other formats."""
    if getattr(clf, "framework", None) != "onnx":
        return None
    path = getattr(clf, "path", None)
    return str(path) if path else None


def is_dynamic_int8(clf: Classifier) -> bool:
    """Whether ``clf`` is an ONNX model whose graph quantises activations at run time (``DynamicQuantizeLinear``)."""
    path = _onnx_path(clf)
    if path is None:
        return False
    import onnx

    try:
        graph = onnx.load(path, load_external_data=False).graph
    except Exception:  # noqa: BLE001 - an unreadable file is simply not one
        return False
    return any(n.op_type == DYNAMIC_OP for n in graph.node)


@functools.cache
def ort_saturates_u8s8_pairs() -> bool:
    """Whether this machine's ONNX Runtime computes ``MatMulInteger`` (uint8 × int8) with int16-saturated sums of
    adjacent products (its AVX2 kernel on CPUs without AVX-VNNI; see the module docstring).

    One two-element product is run once per process (255·127 + 255·127: 64770 exactly, 32767 saturated) and the
    answer kept.

    Returns:
        True when the sum comes out saturated.
    """
    import onnxruntime as ort
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                          [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2]),
                           helper.make_tensor_value_info("b", TensorProto.INT8, [2, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"a": np.array([[255, 255]], np.uint8), "b": np.array([[127], [127]], np.int8)})[0]
    return int(np.asarray(y).ravel()[0]) != 255 * 127 * 2


def saturated_pair_matmul(a: Any, b: Any, a_zp: Any = 0.0, b_zp: Any = 0.0) -> Any:
    """ONNX Runtime's uint8 × int8 ``MatMulInteger`` on CPUs without AVX-VNNI (see the module docstring).

    Args:
        a: raw uint8 values (0–255) held in a float torch tensor, (..., K).
        b: raw int8 values (−128–127) held in a float torch tensor, (K, N).
        a_zp, b_zp: the zero points (scalars, or tensors broadcastable to a scalar).

    Returns:
        (..., N) float tensor: ``Σ_i sat16(a_2i·b_2i + a_2i+1·b_2i+1) − a_zp·Σ_k b_k − b_zp·Σ_k a_k + K·a_zp·b_zp``,
        an odd K padded with a zero product; the saturation (to −32768…32767) passes the gradient straight
        through. Memory: one (..., K, N) product tensor.
    """
    import torch

    k = a.shape[-1]
    prod = a[..., :, None] * b  # (..., K, N)
    if k % 2:
        prod = torch.cat([prod, torch.zeros_like(prod[..., :1, :])], dim=-2)
    pairs = prod.reshape(*prod.shape[:-2], -1, 2, prod.shape[-1]).sum(dim=-2)
    pairs = pairs + (pairs.clamp(-32768.0, 32767.0) - pairs).detach()
    return pairs.sum(dim=-2) - a_zp * b.sum(dim=0) - b_zp * a.sum(dim=-1, keepdim=True) + k * a_zp * b_zp


def _attrs(node: Any) -> dict:
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _ste_round(v: Any) -> Any:
    """``round(v)`` (half to even) forward, identity backward (the straight-through estimator)."""
    return v + (v.round() - v).detach()


def dynamic_quantize_linear(x: Any) -> tuple[Any, Any, Any]:
    """ONNX ``DynamicQuantizeLinear`` of a float tensor, differentiable by the straight-through estimator.

    Args:
        x: float32 torch tensor of any shape (one scale for the whole tensor, batch included).

    Returns:
        ``(y, y_scale, y_zero_point)``: ``y`` the uint8 values held in a float32 tensor of ``x``'s
        shape (integers 0–255 forward; gradient 1/``y_scale`` backward), ``y_scale`` a float32 scalar
        tensor, ``y_zero_point`` a float32 scalar tensor holding an integer 0–255 (both constants for
        the gradient).
    """
    import torch

    with torch.no_grad():
        lo = torch.clamp(x.min(), max=0.0)
        hi = torch.clamp(x.max(), min=0.0)
        scale = (hi - lo) / 255.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zp = torch.clamp(torch.round(-lo / scale), 0.0, 255.0)
    v = x / scale
    y = _ste_round(v) + zp
    y = y + (y.clamp(0.0, 255.0) - y).detach()  # saturation, also straight-through
    return y, scale, zp


def _pads(pads: list[int], nd: int) -> tuple[bool, list[int]]:
    """ONNX pads ``[b1, b2, …, e1, e2, …]`` → (symmetric?, torch padding)."""
    if not pads:
        return True, [0] * nd
    begin, end = pads[:nd], pads[nd:]
    if begin == end:
        return True, list(begin)
    flat: list[int] = []
    for b, e in zip(reversed(begin), reversed(end)):  # F.pad: last dimension first
        flat += [int(b), int(e)]
    return False, flat


class DynamicInt8StandIn:
    """The quantised ONNX graph of an ONNX Runtime dynamic-int8 model, run in torch (see the module docstring).

    Args:
        path: the ``.onnx`` file (one input, one output; as ``quantize_dynamic`` writes it).
        saturate: compute uint8 × int8 ``MatMulInteger`` with ONNX Runtime's int16-saturated pair sums
            (:func:`saturated_pair_matmul`); None (the default) = when this machine's ONNX Runtime does
            (:func:`ort_saturates_u8s8_pairs`), False = ONNX's exact definition.

    Calling it: ``standin(x)`` with ``x`` a float32 torch tensor in the model's own input layout and
    scale (as fed to ONNX Runtime, e.g. (N, C, H, W) normalised pixels) returns the model's output,
    a float32 (N, K) tensor, differentiable in ``x``. The activation scales are per tensor over the
    whole batch, as ONNX Runtime's: an image's output depends on the batch it is in (call it on one
    image to get ONNX Runtime's answer for that image alone).

    Raises:
        ModelError: the file cannot be read, has several inputs or outputs, or holds an operator
            this stand-in does not run (the message names it), or an attribute it does not support.
    """

    #: the operators it runs
    OPS = ("DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul",
           "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
           "Flatten", "Reshape", "Identity", "Cast", "Constant", "Softmax", "LogSoftmax", "Transpose", "Concat",
           "BatchNormalization", "Dropout", "Squeeze", "Unsqueeze")

    def __init__(self, path: str | Path, saturate: bool | None = None):
        import onnx
        import torch
        from onnx import numpy_helper

        try:
            model = onnx.load(str(path))
        except Exception as exc:  # noqa: BLE001 - protobuf errors
            raise ModelError(f"cannot read the ONNX model for its stand-in: {exc}", str(path)) from exc
        graph = model.graph
        inits = {t.name for t in graph.initializer}
        inputs = [v.name for v in graph.input if v.name not in inits]
        if len(inputs) != 1 or len(graph.output) != 1:
            raise ModelError(f"the stand-in needs one input and one output, the graph has {len(inputs)} and "
                             f"{len(graph.output)}", str(path))
        for node in graph.node:
            if node.op_type not in self.OPS or (node.domain not in ("", "ai.onnx")):
                raise ModelError(f"the ONNX Runtime stand-in does not run operator {node.domain or 'ai.onnx'}."
                                 f"{node.op_type} (node {node.name!r})", str(path))
            if _attrs(node).get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise ModelError(f"the ONNX Runtime stand-in does not support auto_pad (node {node.name!r})", str(path))
        # every initialiser as float32 (integer weights and zero points keep their integer values)
        self._consts: dict[str, Any] = {
            t.name: torch.from_numpy(np.asarray(numpy_helper.to_array(t)).astype(np.float32)) for t in graph.initializer}
        self._shapes: dict[str, list[int]] = {
            t.name: [int(v) for v in np.asarray(numpy_helper.to_array(t)).reshape(-1)]
            for t in graph.initializer if t.data_type == onnx.TensorProto.INT64}
        self._nodes = [(n.op_type, list(n.input), list(n.output), _attrs(n), n.name) for n in graph.node]
        self.input_name = inputs[0]
        self.output_name = graph.output[0].name
        self.path = str(path)
        # int8 initialisers (weights, zero points): the operand the saturating kernel pairs with uint8 activations
        self._int8 = {t.name for t in graph.initializer if t.data_type == onnx.TensorProto.INT8}
        self.saturate = ort_saturates_u8s8_pairs() if saturate is None else bool(saturate)

    def __call__(self, x: Any) -> Any:
        import torch
        import torch.nn.functional as F

        env: dict[str, Any] = dict(self._consts)
        env[self.input_name] = x
        ints: dict[str, list[int]] = dict(self._shapes)  # int64 tensors (shapes, axes) as Python lists

        def get(name: str) -> Any:
            return env[name] if name else None

        for op, ins, outs, at, name in self._nodes:
            a = [get(i) for i in ins]
            if op == "DynamicQuantizeLinear":
                y, s, z = dynamic_quantize_linear(a[0])
                env[outs[0]], env[outs[1]], env[outs[2]] = y, s, z
                continue
            if op in ("ConvInteger", "Conv"):
                if op == "ConvInteger":
                    xa = a[0] - (a[2] if len(a) > 2 and a[2] is not None else 0.0)
                    w = a[1] - (a[3].reshape(-1, *([1] * (a[1].dim() - 1))) if len(a) > 3 and a[3] is not None else 0.0)
                    bias = None
                else:
                    xa, w, bias = a[0], a[1], (a[2] if len(a) > 2 else None)
                nd = w.dim() - 2
                sym, pad = _pads(list(at.get("pads", [])), nd)
                if not sym:
                    xa, pad = F.pad(xa, pad), [0] * nd
                conv = F.conv2d if nd == 2 else F.conv1d
                out = conv(xa, w, bias, stride=list(at.get("strides", [1] * nd)), padding=pad,
                           dilation=list(at.get("dilations", [1] * nd)), groups=int(at.get("group", 1)))
            elif op == "MatMulInteger":
                a_zp = a[2] if len(a) > 2 and a[2] is not None else 0.0
                b_zp = a[3] if len(a) > 3 and a[3] is not None else 0.0
                if self.saturate and ins[1] in self._int8 and a[1].dim() == 2:
                    out = saturated_pair_matmul(a[0], a[1], a_zp, b_zp)
                else:
                    out = torch.matmul(a[0] - a_zp, a[1] - b_zp)
            elif op == "MatMul":
                out = torch.matmul(a[0], a[1])
            elif op == "Gemm":
                m1 = a[0].t() if at.get("transA", 0) else a[0]
                m2 = a[1].t() if at.get("transB", 0) else a[1]
                out = float(at.get("alpha", 1.0)) * torch.matmul(m1, m2)
                if len(a) > 2 and a[2] is not None:
                    out = out + float(at.get("beta", 1.0)) * a[2]
            elif op == "Add":
                out = a[0] + a[1]
            elif op == "Sub":
                out = a[0] - a[1]
            elif op == "Mul":
                out = a[0] * a[1]
            elif op == "Div":
                out = a[0] / a[1]
            elif op == "Relu":
                out = F.relu(a[0])
            elif op == "LeakyRelu":
                out = F.leaky_relu(a[0], float(at.get("alpha", 0.01)))
            elif op == "Sigmoid":
                out = torch.sigmoid(a[0])
            elif op == "Tanh":
                out = torch.tanh(a[0])
            elif op == "Clip":
                lo = a[1] if len(a) > 1 and a[1] is not None else at.get("min")
                hi = a[2] if len(a) > 2 and a[2] is not None else at.get("max")
                out = torch.clamp(a[0], min=None if lo is None else float(lo), max=None if hi is None else float(hi))
            elif op in ("MaxPool", "AveragePool"):
                k = list(at["kernel_shape"])
                sym, pad = _pads(list(at.get("pads", [])), len(k))
                xa = a[0]
                if not sym:
                    xa = F.pad(xa, pad, value=float("-inf") if op == "MaxPool" else 0.0)
                    pad = [0] * len(k)
                stride = list(at.get("strides", [1] * len(k)))
                ceil = bool(at.get("ceil_mode", 0))
                if op == "MaxPool":
                    out = F.max_pool2d(xa, k, stride, pad, dilation=list(at.get("dilations", [1] * len(k))), ceil_mode=ceil)
                else:
                    out = F.avg_pool2d(xa, k, stride, pad, ceil_mode=ceil,
                                       count_include_pad=bool(at.get("count_include_pad", 0)))
            elif op == "GlobalAveragePool":
                out = a[0].mean(dim=tuple(range(2, a[0].dim())), keepdim=True)
            elif op == "Flatten":
                ax = int(at.get("axis", 1))
                ax = ax if ax >= 0 else a[0].dim() + ax
                out = a[0].reshape(int(np.prod(a[0].shape[:ax])), -1)
            elif op == "Reshape":
                shape = ints.get(ins[1])
                if shape is None:
                    shape = [int(v) for v in a[1].reshape(-1).tolist()]
                shape = [a[0].shape[i] if s == 0 and not at.get("allowzero", 0) else s for i, s in enumerate(shape)]
                out = a[0].reshape(shape)
            elif op in ("Identity", "Dropout"):
                out = a[0]
            elif op == "Cast":
                out = a[0].float()  # every value here is held as float32 (integers exactly)
            elif op == "Constant":
                from onnx import numpy_helper

                val = at.get("value")
                if val is None:
                    raise ModelError(f"the stand-in supports Constant nodes with a tensor value only (node {name!r})",
                                     self.path)
                arr = np.asarray(numpy_helper.to_array(val))
                if arr.dtype == np.int64:
                    ints[outs[0]] = [int(v) for v in arr.reshape(-1)]
                out = torch.from_numpy(arr.astype(np.float32))
            elif op == "Softmax":
                out = torch.softmax(a[0], dim=int(at.get("axis", -1)))
            elif op == "LogSoftmax":
                out = torch.log_softmax(a[0], dim=int(at.get("axis", -1)))
            elif op == "Transpose":
                out = a[0].permute(*[int(p) for p in at["perm"]]) if "perm" in at else a[0].permute(
                    *reversed(range(a[0].dim())))
            elif op == "Concat":
                out = torch.cat([t for t in a if t is not None], dim=int(at["axis"]))
            elif op == "BatchNormalization":
                shape = [1, -1] + [1] * (a[0].dim() - 2)
                out = ((a[0] - a[3].reshape(shape)) / torch.sqrt(a[4].reshape(shape) + float(at.get("epsilon", 1e-5)))
                       * a[1].reshape(shape) + a[2].reshape(shape))
            elif op in ("Squeeze", "Unsqueeze"):
                axes = at.get("axes")
                if axes is None and len(ins) > 1:
                    axes = ints.get(ins[1]) or [int(v) for v in a[1].reshape(-1).tolist()]
                out = a[0]
                if op == "Squeeze":
                    out = out.squeeze() if not axes else out.squeeze(tuple(int(v) for v in axes))
                else:
                    for ax in sorted(int(v) for v in axes or []):
                        out = out.unsqueeze(ax)
            else:  # pragma: no cover - rejected in __init__
                raise ModelError(f"the ONNX Runtime stand-in does not run operator {op}", self.path)
            env[outs[0]] = out
        return env[self.output_name]


def standin_logit_fn(clf: Classifier) -> tuple[LogitFn | None, str | None]:
    """A differentiable forward pass of an ONNX Runtime dynamic-int8 classifier, from unit-scale pixels.

    Args:
        clf: a classifier (only an ONNX model whose graph has ``DynamicQuantizeLinear`` gets one).

    Returns:
        ``(f, None)`` with ``f`` as :data:`~twinspect.dl.adapters.differentiable.LogitFn` ((N, H, W, C)
        float32 torch tensor in [0, 1] → (N, K) logits, or log-probabilities when the model outputs
        probabilities; the model's preprocessing applied inside), or ``(None, reason)`` when ``clf``
        is not such a model or its graph holds an operator the stand-in does not run.
    """
    if not is_dynamic_int8(clf):
        return None, "not an ONNX Runtime dynamic-int8 model (no DynamicQuantizeLinear in its graph)"
    try:
        standin = DynamicInt8StandIn(_onnx_path(clf) or "")
    except ModelError as exc:
        return None, str(exc)
    return with_preprocess(clf, standin), None


__all__ = ["DYNAMIC_OP", "DynamicInt8StandIn", "dynamic_quantize_linear", "is_dynamic_int8", "ort_saturates_u8s8_pairs",
           "saturated_pair_matmul", "standin_logit_fn"]
