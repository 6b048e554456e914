"""Conformance matrix: ``compare_models`` on one small CNN shipped in every format a user ships it in.

Every model is made here from the trained TinyCNN of ``conftest`` (the same weights everywhere): ONNX
float / dynamic int8 (``quantize_dynamic``) / static QDQ and QOperator int8 (``quantize_static``) /
float16, TorchScript float / static int8 / dynamic int8, Keras ``.keras`` / ``.h5`` and TFLite float /
dynamic-range int8 / float16 / full int8. For each pair of a model and its derivative, the weights,
CKA and output levels must each be measured (with the value a copy should have) or skipped with a
one-line reason; nothing may raise.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.dl.adapters import load_model  # noqa: E402
from twinspect.dl.adapters.metadata import extra_files, write_metadata  # noqa: E402
from twinspect.dl.modelclones import CompareConfig, compare_models  # noqa: E402

TS_META = {
    "input_shape": [28, 28, 1],
    "num_classes": 10,
    "output": "logits",
    "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NCHW"},
}

#: the three levels of the matrix and the measure that stands for each
LEVELS = {"weights": "weights_cosine", "representation": "cka", "io": "io_top1_agreement"}


class _Reader:
    def __init__(self, x):
        self.it = iter([{"x": x[i : i + 1]} for i in range(len(x))])

    def get_next(self):
        return next(self.it, None)


@pytest.fixture(scope="module")
def calib(mnist_train_512):
    return (mnist_train_512[0][:32].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()


@pytest.fixture(scope="module")
def data_npz(mnist_test, tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "mnist64.npz"
    np.savez(p, x=mnist_test[0][:64])
    return p


@pytest.fixture(scope="module")
def onnx_models(tiny_torch, calib, tmp_path_factory):
    import onnx
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    d = tmp_path_factory.mktemp("onnx")
    f = d / "float.onnx"
    torch.onnx.export(tiny_torch, (torch.zeros(1, 1, 28, 28),), str(f), dynamo=False, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    out = {"onnx-float": f}
    quantize_dynamic(str(f), str(d / "dyn.onnx"), weight_type=QuantType.QInt8)
    out["onnx-dynamic-int8"] = d / "dyn.onnx"
    reader = type("R", (_Reader, CalibrationDataReader), {})
    for name, fmt in (("onnx-qdq-int8", QuantFormat.QDQ), ("onnx-qoperator-int8", QuantFormat.QOperator)):
        quantize_static(str(f), str(d / f"{name}.onnx"), reader(calib), quant_format=fmt, weight_type=QuantType.QInt8, per_channel=True)
        out[name] = d / f"{name}.onnx"
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16  # ORT's copy of onnxconverter-common's
    except ImportError:
        out["onnx-fp16"] = None
    else:
        onnx.save(convert_float_to_float16(onnx.load(str(f)), keep_io_types=True), str(d / "fp16.onnx"))
        out["onnx-fp16"] = d / "fp16.onnx"
    # an infinite bias: infinite logits, NaN probabilities, infinite weights
    proto = onnx.load(str(f))
    for t in proto.graph.initializer:
        if t.name == "fc.bias":
            b = onnx.numpy_helper.to_array(t).copy()
            b[3] = np.inf
            t.CopyFrom(onnx.numpy_helper.from_array(b, t.name))
    onnx.save(proto, str(d / "nonfinite.onnx"))
    out["onnx-nonfinite"] = d / "nonfinite.onnx"
    # a model whose every layer is constant (conv1 zeroed): CKA is undefined and must be skipped
    proto = onnx.load(str(f))
    for t in proto.graph.initializer:
        if t.name == "conv1.weight":
            t.CopyFrom(onnx.numpy_helper.from_array(np.zeros_like(onnx.numpy_helper.to_array(t)), t.name))
    onnx.save(proto, str(d / "constant.onnx"))
    out["onnx-constant"] = d / "constant.onnx"
    return out


@pytest.fixture(scope="module")
def torch_models(tiny_torch, mnist_train_512, tmp_path_factory):
    import torch

    from twinspect.dl.adapters.base import Preprocess
    from twinspect.dl.compress import quantize_dynamic_linear, quantize_static

    d = tmp_path_factory.mktemp("ts")
    mods = {
        "ts-float": tiny_torch,
        "ts-static-int8": quantize_static(tiny_torch, mnist_train_512[0][:64], Preprocess(scale=255.0, layout="NCHW")),
        "ts-dynamic-int8": quantize_dynamic_linear(tiny_torch),
    }
    out = {}
    for name, m in mods.items():
        torch.jit.save(torch.jit.trace(m, torch.zeros(1, 1, 28, 28)), str(d / f"{name}.pt"), _extra_files=extra_files(TS_META))
        out[name] = d / f"{name}.pt"
    torch.export.save(torch.export.export(tiny_torch, (torch.zeros(1, 1, 28, 28),)), str(d / "export.pt2"))  # batch 1, as usual
    write_metadata(d / "export.pt2", TS_META)
    out["torch-export"] = d / "export.pt2"
    return out


@pytest.fixture(scope="module")
def keras_models(tiny_nhwc, calib, tmp_path_factory):
    import keras

    p = tiny_nhwc
    # explicit names: Keras' automatic ones come from a process-wide counter other tests rely on
    model = keras.Sequential([
        keras.Input((28, 28, 1), name="x"),
        keras.layers.Conv2D(6, 5, activation="relu", name="conv1"), keras.layers.MaxPooling2D(2, name="pool1"),
        keras.layers.Conv2D(12, 5, activation="relu", name="conv2"), keras.layers.MaxPooling2D(2, name="pool2"),
        keras.layers.Flatten(name="flatten"), keras.layers.Dense(10, name="fc"),
    ], name="tinycnn")
    model.layers[0].set_weights([p["k1"], p["b1"]])
    model.layers[2].set_weights([p["k2"], p["b2"]])
    model.layers[5].set_weights([p["w"], p["b"]])
    d = tmp_path_factory.mktemp("keras")
    model.save(str(d / "m.keras"))
    model.save(str(d / "m.h5"))
    out = {"keras": d / "m.keras", "keras-h5": d / "m.h5"}
    # Keras' own ONNX export (MatMul + Add, Conv + separate bias Add, Casts and Transposes around them)
    # and its ONNX Runtime int8 copies
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    model(np.zeros((1, 28, 28, 1), np.float32))
    model.export(str(d / "k.onnx"), format="onnx", verbose=False)
    name = onnx.load(str(d / "k.onnx")).graph.input[0].name
    nhwc = calib.transpose(0, 2, 3, 1).copy()
    reader = type("R", (CalibrationDataReader,), {
        "__init__": lambda self: setattr(self, "it", iter([{name: nhwc[i : i + 1]} for i in range(len(nhwc))])),
        "get_next": lambda self: next(self.it, None),
    })
    quantize_dynamic(str(d / "k.onnx"), str(d / "k-dyn.onnx"), weight_type=QuantType.QInt8)
    quantize_static(str(d / "k.onnx"), str(d / "k-qop.onnx"), reader(), quant_format=QuantFormat.QOperator,
                    weight_type=QuantType.QInt8, per_channel=True)
    out.update({"keras-onnx": d / "k.onnx", "keras-onnx-dynamic-int8": d / "k-dyn.onnx", "keras-onnx-qoperator-int8": d / "k-qop.onnx"})
    return out


def _compare(a, b, data_npz):
    return compare_models([a, b], config=CompareConfig(data=str(data_npz), n_inputs=64, cka_inputs=48, modeldiff_pairs=16,
                                                       levels=("weights", "representation", "io")))


def _check_cell(r, expect: dict[str, float | str]):
    """Each level measured at least at its bound (``float``), or skipped with a one-line reason
    containing the expected text (``str``)."""
    for level, want in expect.items():
        measure = LEVELS[level]
        value = r.matrix(measure)[0, 1]
        reasons = [s["reason"] for s in r.skipped if s["measure"] == measure and (s["a"], s["b"]) == (0, 1)]
        for why in reasons:
            assert why.strip() and "\n" not in why and "Traceback" not in why
        if isinstance(want, str):
            assert not np.isfinite(value) and reasons and want in reasons[0], (level, value, reasons)
        else:
            assert not reasons, (level, reasons)
            assert np.isfinite(value) and value >= want, (level, value)


# (reference, derivative, {level: lower bound or expected skip reason})
QUANTISED = {"weights": 0.999, "representation": 0.99, "io": 0.95}
COPY = {"weights": 0.999999, "representation": 0.999999, "io": 1.0}
CELLS = {
    "onnx-dynamic-int8": ("onnx", "onnx-float", "onnx-dynamic-int8", QUANTISED),
    "onnx-qdq-int8": ("onnx", "onnx-float", "onnx-qdq-int8", QUANTISED),
    "onnx-qoperator-int8": ("onnx", "onnx-float", "onnx-qoperator-int8", QUANTISED),
    "onnx-fp16": ("onnx", "onnx-float", "onnx-fp16", {"weights": 0.99999, "representation": 0.9999, "io": 1.0}),
    "onnx-constant": ("onnx", "onnx-float", "onnx-constant", {"weights": 0.0, "representation": "constant", "io": 0.0}),
    # every level skipped with its reason; the other layers still enter CKA
    "onnx-nonfinite": ("onnx", "onnx-float", "onnx-nonfinite", {"weights": "NaN or infinite", "representation": 0.9, "io": "NaN or infinity"}),
    "torchscript": ("torch", "onnx-float", "ts-float", COPY),
    "torch-export": ("torch", "onnx-float", "torch-export", COPY),
    "torchscript-static-int8": ("torch", "ts-float", "ts-static-int8", QUANTISED),
    "torchscript-dynamic-int8": ("torch", "ts-float", "ts-dynamic-int8", QUANTISED),
    # Keras flattens NHWC: same dense weights in another order, so weight cosine < 1 across frameworks;
    # its Conv2D(activation="relu") has no pre-ReLU output for ONNX's Conv to match, so CKA < 1
    "keras": ("keras", "onnx-float", "keras", {"weights": 0.0, "representation": 0.99, "io": 1.0}),
    "keras-h5": ("keras", "keras", "keras-h5", COPY),
    # Keras' ONNX export splits each layer (Conv + bias Add + Relu): CKA's best matches < 1
    "keras-onnx": ("keras", "keras", "keras-onnx", {"weights": 0.999999, "representation": 0.99, "io": 1.0}),
    "keras-onnx-dynamic-int8": ("keras", "keras-onnx", "keras-onnx-dynamic-int8", QUANTISED),
    "keras-onnx-qoperator-int8": ("keras", "keras-onnx", "keras-onnx-qoperator-int8", QUANTISED),
    "tflite-float": ("tflite", "keras", "tflite-float", {"weights": 0.999999, "representation": 0.9999, "io": 1.0}),
    "tflite-dynamic-int8": ("tflite", "tflite-float", "tflite-dynamic-int8", QUANTISED),
    "tflite-fp16": ("tflite", "tflite-float", "tflite-fp16", {"weights": 0.99999, "representation": 0.9999, "io": 1.0}),
    "tflite-int8": ("tflite", "tflite-float", "tflite-int8", QUANTISED),
}


@pytest.mark.parametrize("cell", list(CELLS))  # the whole matrix takes ~20 s, ~9 s of it the TFLite converter
def test_format_matrix_cell(cell, request, data_npz):
    family, ref, var, expect = CELLS[cell]
    models = dict(request.getfixturevalue("onnx_models"))
    if family in ("torch",):
        models.update(request.getfixturevalue("torch_models"))
    if family in ("keras", "tflite"):
        models.update(request.getfixturevalue("keras_models"))
    if family == "tflite":
        models.update(request.getfixturevalue("tiny_tflite_models"))
    if var not in models or models[var] is None:
        pytest.skip(f"{var}: onnxruntime.transformers.float16 (the float16 converter) is not available")
    r = _compare(models[ref], models[var], data_npz)
    _check_cell(r, expect)
    if cell == "onnx-nonfinite":
        assert [d["layer"] for d in r.models[1]["cka_layers_skipped"]] == ["/fc/Gemm"]
        assert "NaN or infinity" in r.models[1]["cka_layers_skipped"][0]["reason"]


def test_dynamic_int8_onnx_layers_pair_with_the_float_layers(onnx_models, mnist_test):
    """The int8 copy lists the float model's layers (no scales, zero points or quantisation plumbing),
    each activation (N, ...) and close to its float counterpart; weights come out dequantised."""
    f, q = load_model(onnx_models["onnx-float"]), load_model(onnx_models["onnx-dynamic-int8"])
    assert q.layer_names() == f.layer_names() == ["/conv1/Conv", "/Relu", "/MaxPool", "/conv2/Conv", "/Relu_1", "/MaxPool_1", "/fc/Gemm"]
    x = (mnist_test[0][:16].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()
    af, aq = f.activations(x), q.activations(x)
    for k in af:
        assert aq[k].shape == af[k].shape and aq[k].dtype == np.float32
        assert np.abs(aq[k] - af[k]).max() <= 0.05 * np.abs(af[k]).max(), k
    wf, wq = f.weights(), q.weights()
    assert list(wq) == ["/conv1/Conv", "/conv2/Conv", "/fc/Gemm"] and all(set(v) == {"weight", "bias"} for v in wq.values())
    for layer in wf:
        a, b = wf[layer]["weight"], q.canonical_weights()[layer]["weight"]
        step = np.abs(a).max() / 127.0  # per-tensor symmetric int8 step of quantize_dynamic
        assert b.dtype == np.float32 and b.shape == a.shape and np.abs(a - b).max() <= step * 0.5 + 1e-6
        np.testing.assert_array_equal(wq[layer]["bias"], wf[layer]["bias"])  # biases stay float


def test_qoperator_int8_activations_are_dequantised(onnx_models, mnist_test):
    f, q = load_model(onnx_models["onnx-float"]), load_model(onnx_models["onnx-qoperator-int8"])
    assert set(q.layer_names()) <= set(f.layer_names())  # Relu folded into the int8 conv: fewer layers
    x = (mnist_test[0][:8].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()
    af, aq = f.activations(x), q.activations(x)
    # the QLinearConv output is relu(conv) in uint8; dequantised it matches the float Relu output
    np.testing.assert_allclose(aq["/conv1/Conv"], af["/Relu"], atol=0.05 * np.abs(af["/Relu"]).max())
    np.testing.assert_allclose(aq["/MaxPool"], af["/MaxPool"], atol=0.05 * np.abs(af["/MaxPool"]).max())


def test_one_unmeasurable_model_does_not_end_the_all_pairs_run(onnx_models, data_npz):
    paths = [onnx_models[k] for k in ("onnx-float", "onnx-constant", "onnx-dynamic-int8")]
    r = compare_models(paths, config=CompareConfig(data=str(data_npz), n_inputs=64, cka_inputs=48, modeldiff_pairs=16))
    cka = r.matrix("cka")
    assert cka[0, 2] > 0.99 and not np.isfinite(cka[0, 1]) and not np.isfinite(cka[1, 2])
    skipped = {(s["a"], s["b"]) for s in r.skipped if s["measure"] == "cka"}
    assert skipped == {(0, 1), (1, 2)}
    assert r.models[1]["cka_constant_layers"][0] == "/conv1/Conv"
