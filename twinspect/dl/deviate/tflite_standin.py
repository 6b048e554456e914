"""A differentiable stand-in for a quantised TensorFlow Lite model, for the guided search's pair direction.

The pair direction of the guided search (:mod:`twinspect.dl.deviate.guided`, ``pair_gradient``)
needs an input gradient of the compressed model g. A TensorFlow Lite model gives none (LiteRT runs
its kernels in C++). A float model carrying g's dequantised weights does not stand in for it
either: on DFlare's dynamic-range LeNet-1 and ResNet-20 it closes only a small part of the output
gap between original and compressed model (mean L1 distance of the probabilities on 300 test images,
noise 0–64 levels: 0.0029 → 0.0018 and 0.028 → 0.027), because most of the error comes from the
*activations*, which the int8 kernels quantise. This module reads the ``.tflite`` flatbuffer (the
schema shipped with LiteRT, ``ai_edge_litert.schema_py_generated``) and runs its graph in torch,
operator by operator, with TensorFlow Lite's semantics (NHWC, ``SAME``/``VALID`` padding, fused
activations):

- **Weights** are the file's own values, dequantised: ``(q − zero_point) · scale`` per tensor or per
  channel (``quantized_dimension``); float16 constants through ``DEQUANTIZE``. A hybrid kernel's
  uint8-typed weights with zero points 0 are read as symmetric int8, as the kernels read them (and as
  :meth:`twinspect.dl.adapters.tflite.TFLiteModel.weights` does).
- **Dynamic-range ("hybrid") kernels** — ``CONV_2D``, ``DEPTHWISE_CONV_2D`` and ``FULLY_CONNECTED``
  with a float input and int8 weights (``tf.lite.Optimize.DEFAULT`` without a representative dataset,
  and DFlare's ``*-quan.lite`` models) — quantise their input at run time, per batch element. How
  depends on the kernel LiteRT picks, which the weights' type decides: weights typed *uint8* (older
  converters, DFlare's files) run in TensorFlow Lite's builtin hybrid kernels, which quantise
  symmetrically, ``s = max|x| / 127``, ``x̂ = s · clip(round(x / s), −127, 127)``
  (``tensor_utils::SymmetricQuantizeFloats``); weights typed *int8* (today's converter) run in
  XNNPACK's dynamically quantised kernels, which quantise asymmetrically, ``s = (max − min) / 255``
  over the range extended to 0, with a zero point (as does ``FULLY_CONNECTED``'s
  ``asymmetric_quantize_inputs`` option). Measured on TinyCNN converted today, the asymmetric form
  gives a maximal logit difference to LiteRT of 0.004 against 0.08 for the symmetric one; on DFlare's
  LeNet-1 the symmetric form is exact. The product is then exact in float32 (integers up to 2²⁴).
- **Full-integer models** (int8/uint8 activations with a scale and zero point: ``QUANTIZE`` at the
  input, integer kernels throughout): every quantised activation tensor is held as its dequantised
  float value, and each operator's result is re-quantised to its output tensor's scale and zero point
  (round half away from zero, clip to the type's range), i.e. fake quantisation. TensorFlow Lite's
  fixed-point output multipliers differ from this float rescaling by at most one step of the output
  scale.

Rounding and clipping pass the gradient unchanged (the straight-through estimator; Bengio, Léonard,
Courville 2013, as in quantisation-aware training), so the gradient is the float graph's at the
quantised values the model computes — the same construction as the ONNX Runtime stand-in
(:mod:`twinspect.dl.deviate.ort_dynamic`). ``tests/dl/deviate/test_tflite_standin.py`` measures the
agreement with LiteRT on real models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.adapters.differentiable import LogitFn, with_preprocess
from twinspect.errors import ModelError

#: TensorFlow Lite ``TensorType`` codes of the schema → numpy dtypes (the ones a stand-in reads).
_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16,
           9: np.int8, 10: np.float64}
#: Integer types whose quantised activations are fake-quantised, with their ranges.
_QRANGE = {3: (0, 255), 9: (-128, 127), 7: (-32768, 32767)}
#: Operators the stand-in runs (``BuiltinOperator`` names).
OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D", "ADD", "SUB", "MUL",
       "MEAN", "RESHAPE", "SOFTMAX", "RELU", "RELU6", "LOGISTIC", "TANH", "QUANTIZE", "DEQUANTIZE", "CONCATENATION",
       "PAD", "SQUEEZE", "LEAKY_RELU", "HARD_SWISH", "SHAPE", "STRIDED_SLICE", "PACK")


def _tflite_path(clf: Classifier) -> str | None:
    """The ``.tflite`` file behind a TensorFlow Lite classifier, or None for other formats."""
    if clf.describe().get("format") != "tflite":
        return None
    path = getattr(clf, "path", None)
    return str(path) if path else None


def _ste(v: Any, target: Any) -> Any:
    """``target`` forward, the gradient of ``v`` backward (the straight-through estimator)."""
    return v + (target - v).detach()


def _round_away(v: Any) -> Any:
    """Round half away from zero (TensorFlow Lite's ``std::round``)."""
    import torch

    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def symmetric_quantize_inputs(x: Any) -> Any:
    """A hybrid kernel's run-time input quantisation, per batch element, symmetric int8, straight-through.

    Args:
        x: float32 torch tensor (N, ...).

    Returns:
        float32 tensor of ``x``'s shape: ``s · clip(round(x / s), −127, 127)`` with ``s = max|x_n| / 127``
        over each batch element (1 where it is all zeros); gradient 1 (straight-through).
    """
    import torch

    with torch.no_grad():
        m = x.detach().abs().reshape(len(x), -1).amax(dim=1)
        s = torch.where(m > 0, m / 127.0, torch.ones_like(m)).reshape(-1, *([1] * (x.dim() - 1)))
    return _ste(x, s * torch.clamp(_round_away(x.detach() / s), -127.0, 127.0))


def asymmetric_quantize_inputs(x: Any) -> Any:
    """The asymmetric form (``asymmetric_quantize_inputs``): per batch element, ``s = (max − min) / 255`` over
    the range extended to include 0, zero point ``−128 − round(min / s)``, int8; straight-through. Shapes as
    :func:`symmetric_quantize_inputs`."""
    import torch

    with torch.no_grad():
        flat = x.detach().reshape(len(x), -1)
        lo = torch.clamp(flat.amin(dim=1), max=0.0)
        hi = torch.clamp(flat.amax(dim=1), min=0.0)
        s = torch.where(hi > lo, (hi - lo) / 255.0, torch.ones_like(hi))
        zp = -128.0 - _round_away(lo / s)
        shape = (-1, *([1] * (x.dim() - 1)))
        s, zp = s.reshape(shape), zp.reshape(shape)
    q = torch.clamp(_round_away(x.detach() / s) + zp, -128.0, 127.0)
    return _ste(x, (q - zp) * s)


def _same_pads(size: int, k: int, stride: int, dil: int) -> tuple[int, int]:
    """TensorFlow's ``SAME`` padding of one spatial axis: (before, after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dil + 1 - size, 0)
    return total // 2, total - total // 2


def _act(x: Any, code: int) -> Any:
    """A fused activation (``ActivationFunctionType``): NONE 0, RELU 1, RELU_N1_TO_1 2, RELU6 3, TANH 4."""
    import torch

    if code == 0:
        return x
    if code == 1:
        return torch.relu(x)
    if code == 2:
        return torch.clamp(x, -1.0, 1.0)
    if code == 3:
        return torch.clamp(x, 0.0, 6.0)
    if code == 4:
        return torch.tanh(x)
    raise ModelError(f"the TensorFlow Lite stand-in does not support fused activation {code}")


class TFLiteStandIn:
    """The graph of a quantised ``.tflite`` model run in torch (see the module docstring).

    Args:
        path: the ``.tflite`` file (one subgraph used: the first; one input, one output).

    Calling it: ``standin(x)`` with ``x`` a float32 torch tensor in the model's input layout and scale
    (as the classifier feeds LiteRT, e.g. (N, H, W, C) normalised pixels) returns the model's output, a
    float32 (N, K) tensor (dequantised), differentiable in ``x``. Hybrid kernels quantise each batch
    element on its own, as LiteRT does, so an image's output does not depend on its batch.

    Attributes:
        hybrid: number of hybrid (dynamic-range) kernels; ``integer``: whether activations are
            quantised (a full-integer model). A float model has neither.

    Raises:
        ModelError: the file cannot be read, has several inputs or outputs, or holds an operator or
            option this stand-in does not run (the message names it).
    """

    def __init__(self, path: str | Path):
        import torch
        from ai_edge_litert import schema_py_generated as schema

        self.path = str(path)
        try:
            buf = Path(path).read_bytes()
            model = schema.ModelT.InitFromPackedBuf(bytearray(buf), 0)
        except Exception as exc:  # noqa: BLE001 - flatbuffer errors of every kind
            raise ModelError(f"cannot read the TensorFlow Lite model for its stand-in: {exc}", self.path) from exc
        names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        sg = model.subgraphs[0]
        if len(sg.inputs) != 1 or len(sg.outputs) != 1:
            raise ModelError(f"the stand-in needs one input and one output, the graph has {len(sg.inputs)} and "
                             f"{len(sg.outputs)}", self.path)
        self._tensors = []
        self._consts: dict[int, Any] = {}
        for i, t in enumerate(sg.tensors):
            q = t.quantization
            scale = None if q is None or q.scale is None or len(q.scale) == 0 else np.asarray(q.scale, np.float64)
            zp = None if scale is None or q.zeroPoint is None else np.asarray(q.zeroPoint, np.float64)
            axis = 0 if q is None else int(q.quantizedDimension)
            self._tensors.append((int(t.type), scale, zp, axis, [int(v) for v in (t.shape if t.shape is not None else [])]))
            data = model.buffers[t.buffer].data if 0 < t.buffer < len(model.buffers) else None
            if data is not None and len(data):
                dtype = _DTYPES.get(int(t.type))
                if dtype is None:
                    raise ModelError(f"the TensorFlow Lite stand-in cannot read constant tensor {i} of type {t.type}",
                                     self.path)
                arr: np.ndarray = np.frombuffer(np.asarray(data, dtype=np.uint8).tobytes(), dtype=dtype)
                self._consts[i] = arr.reshape(self._tensors[i][4] or -1)
        self._ops: list[tuple[str, list[int], list[int], Any]] = []
        for op in sg.operators:
            oc = model.operatorCodes[op.opcodeIndex]
            code = max(int(oc.builtinCode), int(oc.deprecatedBuiltinCode))
            name = names.get(code, str(code))
            if name not in OPS:
                raise ModelError(f"the TensorFlow Lite stand-in does not run operator {name}", self.path)
            self._ops.append((name, [int(v) for v in op.inputs], [int(v) for v in op.outputs], op.builtinOptions))
        self.input_index, self.output_index = int(sg.inputs[0]), int(sg.outputs[0])
        self._weights: dict[tuple[int, bool], Any] = {}
        self.hybrid = 0
        for name, ins, _, _ in self._ops:
            if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") and self._is_hybrid(ins):
                self.hybrid += 1
        self.integer = any(self._quantised(o) for _, _, outs, _ in self._ops for o in outs)
        self._torch = torch

    # -- tensors -------------------------------------------------------------------------------------
    def _quantised(self, i: int) -> bool:
        typ, scale, _, _, _ = self._tensors[i]
        return typ in _QRANGE and scale is not None

    def _is_hybrid(self, ins: list[int]) -> bool:
        """A kernel whose input is float and whose weights are integers: a dynamic-range kernel."""
        return (len(ins) > 1 and ins[1] in self._consts and self._consts[ins[1]].dtype.kind in "iu"
                and not self._quantised(ins[0]) and self._tensors[ins[0]][0] == 0)

    def _quantize_inputs(self, x: Any, ins: list[int], opt: Any) -> Any:
        """A hybrid kernel's run-time input quantisation: asymmetric for int8-typed weights (XNNPACK's kernels)
        or the ``asymmetric_quantize_inputs`` option, symmetric for uint8-typed ones (the builtin kernels)."""
        if self._tensors[ins[1]][0] == 9 or getattr(opt, "asymmetricQuantizeInputs", False):
            return asymmetric_quantize_inputs(x)
        return symmetric_quantize_inputs(x)

    def _const(self, i: int, hybrid: bool = False) -> Any:
        """Constant tensor ``i`` as a float32 torch tensor (dequantised)."""
        key = (i, hybrid)
        if key not in self._weights:
            arr = self._consts[i]
            typ, scale, zp, axis, _ = self._tensors[i]
            if hybrid and arr.dtype == np.uint8 and (zp is None or not np.any(zp)):
                arr = arr.view(np.int8)  # hybrid kernels read uint8-typed weights as symmetric int8
            if arr.dtype.kind in "iu" and scale is not None:
                from twinspect.dl.adapters.loaded import dequantize

                arr = dequantize(arr, scale, zp if zp is not None else [0], axis)
            self._weights[key] = self._torch.from_numpy(np.array(arr, dtype=np.float32))
        return self._weights[key]

    def _requantise(self, i: int, v: Any) -> Any:
        """Fake-quantise value ``v`` to tensor ``i``'s scale and zero point (per tensor), straight-through."""
        typ, scale, zp, _, _ = self._tensors[i]
        if typ not in _QRANGE or scale is None:
            return v
        lo, hi = _QRANGE[typ]
        s, z = float(scale[0]), float(zp[0]) if zp is not None and len(zp) else 0.0
        q = self._torch.clamp(_round_away(v.detach() / s) + z, lo, hi)
        return _ste(v, (q - z) * s)

    # -- the graph -------------------------------------------------------------------------------------
    def __call__(self, x: Any) -> Any:
        import torch
        import torch.nn.functional as F

        env: dict[int, Any] = {self.input_index: self._requantise(self.input_index, x)}
        # integer shape computations (SHAPE → STRIDED_SLICE → PACK → RESHAPE, as Keras 3's export writes a
        # Flatten with a dynamic batch): Python ints and lists, never tensors
        ints: dict[int, Any] = {}

        def val(i: int, hybrid: bool = False) -> Any:
            return env[i] if i in env else self._const(i, hybrid)

        def is_int(i: int) -> bool:
            return i in ints or (i in self._consts and self._consts[i].dtype.kind in "iu")

        def int_val(i: int) -> Any:
            if i in ints:
                return ints[i]
            if is_int(i):
                a = self._consts[i]
                return int(a.reshape(-1)[0]) if a.ndim == 0 else [int(v) for v in a.reshape(-1)]
            raise ModelError(f"the TensorFlow Lite stand-in computes shapes from constants and SHAPE only (tensor {i})",
                             self.path)

        for name, ins, outs, opt in self._ops:
            act = int(getattr(opt, "fusedActivationFunction", 0) or 0)
            if name == "SHAPE":
                ints[outs[0]] = [int(v) for v in val(ins[0]).shape]
                continue
            if name == "STRIDED_SLICE":  # of a 1-D shape vector (one axis; masks as TensorFlow defines them)
                vec, b, e, st = int_val(ins[0]), int_val(ins[1]), int_val(ins[2]), int_val(ins[3])
                if not isinstance(vec, list) or len(b) != 1 or int(opt.ellipsisMask) or int(opt.newAxisMask):
                    raise ModelError("the TensorFlow Lite stand-in slices 1-D shape vectors only", self.path)
                lo = None if int(opt.beginMask) & 1 else b[0]
                hi = None if int(opt.endMask) & 1 else e[0]
                ints[outs[0]] = vec[b[0]] if int(opt.shrinkAxisMask) & 1 else vec[lo:hi:st[0]]
                continue
            if name == "PACK" and all(is_int(i) for i in ins):
                parts = [int_val(i) for i in ins]
                ints[outs[0]] = [v for part in parts for v in (part if isinstance(part, list) else [part])]
                continue
            if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                hybrid = self._is_hybrid(ins)
                xa = val(ins[0])
                if hybrid:
                    xa = self._quantize_inputs(xa, ins, opt)
                w = val(ins[1], hybrid)
                bias = val(ins[2]) if len(ins) > 2 and ins[2] >= 0 else None
                xa = xa.permute(0, 3, 1, 2)
                if name == "CONV_2D":
                    wt, groups = w.permute(0, 3, 1, 2), 1
                else:  # (1, KH, KW, C·M) → (C·M, 1, KH, KW), one group per input channel
                    wt, groups = w.permute(3, 0, 1, 2), xa.shape[1]
                kh, kw = int(wt.shape[2]), int(wt.shape[3])
                sh, sw = int(opt.strideH), int(opt.strideW)
                dh, dw = int(opt.dilationHFactor or 1), int(opt.dilationWFactor or 1)
                if int(opt.padding) == 0:  # SAME
                    ph, pw = _same_pads(xa.shape[2], kh, sh, dh), _same_pads(xa.shape[3], kw, sw, dw)
                    xa = F.pad(xa, [pw[0], pw[1], ph[0], ph[1]])
                out = F.conv2d(xa, wt, bias, stride=(sh, sw), dilation=(dh, dw), groups=groups).permute(0, 2, 3, 1)
                out = _act(out, act)
            elif name == "FULLY_CONNECTED":
                hybrid = self._is_hybrid(ins)
                w = val(ins[1], hybrid)
                xa = val(ins[0])
                lead = xa.shape[:-1]
                xa = xa.reshape(-1, w.shape[1])
                if hybrid:
                    xa = self._quantize_inputs(xa, ins, opt)
                bias = val(ins[2]) if len(ins) > 2 and ins[2] >= 0 else None
                out = F.linear(xa, w, bias)
                if getattr(opt, "keepNumDims", False):
                    out = out.reshape(*lead, -1)
                out = _act(out, act)
            elif name in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
                xa = val(ins[0]).permute(0, 3, 1, 2)
                kh, kw, sh, sw = int(opt.filterHeight), int(opt.filterWidth), int(opt.strideH), int(opt.strideW)
                pads = [0, 0, 0, 0]
                if int(opt.padding) == 0:
                    ph, pw = _same_pads(xa.shape[2], kh, sh, 1), _same_pads(xa.shape[3], kw, sw, 1)
                    pads = [pw[0], pw[1], ph[0], ph[1]]
                if name == "MAX_POOL_2D":
                    out = F.max_pool2d(F.pad(xa, pads, value=float("-inf")), (kh, kw), (sh, sw))
                else:  # TensorFlow averages over the window's elements inside the image only
                    ones = torch.ones_like(xa[:1, :1])
                    out = (F.avg_pool2d(F.pad(xa, pads), (kh, kw), (sh, sw))
                           / F.avg_pool2d(F.pad(ones, pads), (kh, kw), (sh, sw)))
                out = _act(out.permute(0, 2, 3, 1), act)
            elif name in ("ADD", "SUB", "MUL"):
                a, b = val(ins[0]), val(ins[1])
                out = _act(a + b if name == "ADD" else a - b if name == "SUB" else a * b, act)
            elif name == "MEAN":
                axes = [int(v) for v in np.asarray(self._consts[ins[1]]).reshape(-1)]
                out = val(ins[0]).mean(dim=tuple(axes), keepdim=bool(getattr(opt, "keepDims", False)))
            elif name == "RESHAPE":
                shape = list(getattr(opt, "newShape", None) or [])
                if not shape and len(ins) > 1 and is_int(ins[1]):
                    got = int_val(ins[1])
                    shape = list(got) if isinstance(got, list) else [got]
                if not shape:
                    shape = self._tensors[outs[0]][4]
                xa = val(ins[0])
                if shape and shape[0] in (1, -1) and len(xa) != 1:  # the batch axis: the converter's 1 (or -1)
                    shape = [len(xa), *shape[1:]]
                out = xa.reshape(shape)
            elif name == "SOFTMAX":
                out = torch.softmax(float(getattr(opt, "beta", 1.0) or 1.0) * val(ins[0]), dim=-1)
            elif name == "RELU":
                out = torch.relu(val(ins[0]))
            elif name == "RELU6":
                out = torch.clamp(val(ins[0]), 0.0, 6.0)
            elif name == "LEAKY_RELU":
                out = F.leaky_relu(val(ins[0]), float(opt.alpha))
            elif name == "HARD_SWISH":
                out = F.hardswish(val(ins[0]))
            elif name == "LOGISTIC":
                out = torch.sigmoid(val(ins[0]))
            elif name == "TANH":
                out = torch.tanh(val(ins[0]))
            elif name in ("QUANTIZE", "DEQUANTIZE"):
                out = val(ins[0])  # values are held dequantised; QUANTIZE's output is re-quantised below
            elif name == "CONCATENATION":
                out = _act(torch.cat([val(i) for i in ins], dim=int(opt.axis)), act)
            elif name == "PAD":
                p = np.asarray(self._consts[ins[1]]).reshape(-1, 2)
                flat: list[int] = []
                for b, e in p[::-1]:
                    flat += [int(b), int(e)]
                out = F.pad(val(ins[0]), flat)
            elif name == "SQUEEZE":
                dims = list(getattr(opt, "squeezeDims", None) or [])
                out = val(ins[0]).squeeze(tuple(dims)) if dims else val(ins[0]).squeeze()
            else:  # pragma: no cover - rejected in __init__
                raise ModelError(f"the TensorFlow Lite stand-in does not run operator {name}", self.path)
            env[outs[0]] = self._requantise(outs[0], out)
        return env[self.output_index]


def standin_logit_fn(clf: Classifier) -> tuple[LogitFn | None, str | None]:
    """A differentiable forward pass of a quantised TensorFlow Lite classifier, from unit-scale pixels.

    Args:
        clf: a classifier (only a ``.tflite`` model with hybrid kernels or integer activations gets one).

    Returns:
        ``(f, None)`` with ``f`` as :data:`~twinspect.dl.adapters.differentiable.LogitFn` ((N, H, W, C)
        float32 torch tensor in [0, 1] → (N, K) logits, or log-probabilities when the model outputs
        probabilities; the model's preprocessing applied inside), or ``(None, reason)`` when ``clf``
        is not such a model or its graph holds an operator the stand-in does not run.
    """
    path = _tflite_path(clf)
    if path is None:
        return None, "not a TensorFlow Lite model"
    try:
        standin = TFLiteStandIn(path)
    except ModelError as exc:
        return None, str(exc)
    if not (standin.hybrid or standin.integer):
        return None, "a float TensorFlow Lite model (no quantised kernels to stand in for)"
    fn = with_preprocess(clf, standin)
    import torch

    try:  # one zero image through the graph: an operator used in an unsupported way is found here, not mid-search
        with torch.no_grad():
            fn(torch.zeros((1, *clf.input_shape), dtype=torch.float32))
    except (ModelError, RuntimeError, ValueError, IndexError, TypeError) as exc:
        return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return fn, None


__all__ = ["OPS", "TFLiteStandIn", "asymmetric_quantize_inputs", "standin_logit_fn", "symmetric_quantize_inputs"]
