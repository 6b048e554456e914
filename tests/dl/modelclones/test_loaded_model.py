"""The general loaded-model API (formats, runtimes, weights, activations) on small real models."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.dl.adapters import (  # noqa: E402
    FORMATS,
    NotSupportedError,
    choose_runtime,
    detect_format,
    load_classifier,
    load_model,
)
from twinspect.errors import ModelError  # noqa: E402

DFLARE = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "models" / "dflare"


def _nchw(x):
    return (x.astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()


def test_formats_and_runtimes_are_separate_notions(tmp_path):
    assert detect_format("a.H5").name == "keras-h5" and detect_format("b.pt2").name == "torch-export"
    assert choose_runtime(FORMATS["onnx"], None) == "onnxruntime"
    assert choose_runtime(FORMATS["onnx"], "onnx-reference") == "onnx-reference"
    with pytest.raises(ModelError, match="cannot execute tflite"):
        choose_runtime(FORMATS["tflite"], "onnxruntime")
    with pytest.raises(ModelError, match="unknown runtime"):
        choose_runtime(FORMATS["onnx"], "tvm")
    with pytest.raises(ModelError, match="unknown model file suffix"):
        detect_format(tmp_path / "m.bin")


def test_torchscript_weights_and_activations(tiny_torch, torchscript_file, mnist_test):
    import torch

    m = load_model(torchscript_file)
    assert m.format == "torchscript" and m.runtime == "torch"
    assert m.inputs[0].shape == (None, 1, 28, 28)  # from the embedded metadata
    w = m.weights()
    assert list(w) == ["conv1", "conv2", "fc"]
    np.testing.assert_array_equal(w["conv1"]["weight"], tiny_torch.conv1.weight.detach().numpy())
    x = _nchw(mnist_test[0][:4])
    acts = m.activations(x)
    names = list(acts)
    assert names[0] == "conv1" and "fc" in names
    with torch.no_grad():
        conv1 = tiny_torch.conv1(torch.from_numpy(x)).numpy()
        logits = tiny_torch(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(acts["conv1"], conv1, atol=1e-5)
    np.testing.assert_allclose(acts["fc"], logits, atol=1e-5)
    np.testing.assert_allclose(m.predict(x), logits, atol=1e-5)
    only = m.activations(x, layers=["conv2"])
    assert list(only) == ["conv2"] and only["conv2"].shape == (4, 12, 8, 8)


def test_live_module_hooks_and_unknown_layer(tiny_torch, mnist_test):
    from twinspect.dl.adapters import TorchModel

    m = TorchModel(tiny_torch)
    assert m.layer_names() == ["conv1", "conv2", "fc"]
    x = _nchw(mnist_test[0][:3])
    assert m.activations(x)["fc"].shape == (3, 10)
    with pytest.raises(ValueError, match="unknown layer"):
        m.activations(x, layers=["nope"])


def test_module_without_submodules_is_not_supported_and_catchable():
    import torch

    from twinspect.dl.adapters import TorchModel

    class Bare(torch.nn.Module):
        def forward(self, x):
            return x.flatten(1)[:, :10]

    m = TorchModel(Bare())
    with pytest.raises(NotSupportedError) as info:
        m.activations(np.zeros((1, 1, 4, 4), np.float32))
    assert isinstance(info.value, ModelError) and "sub-modules" in info.value.reason


def test_torch_export_activations_through_fx(tiny_torch, tmp_path, mnist_test):
    import torch

    p = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(tiny_torch, (torch.zeros(2, 1, 28, 28),)), str(p))
    m = load_model(p, input_shape=(None, 1, 28, 28))
    assert m.format == "torch-export"
    x = _nchw(mnist_test[0][:2])
    acts = m.activations(x)
    assert len(acts) >= 5
    with torch.no_grad():
        logits = tiny_torch(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(list(acts.values())[-1], logits, atol=1e-5)
    assert set(m.weights()) == {"conv1", "conv2", "fc"}


def test_onnx_weights_activations_and_two_runtimes(tiny_torch, onnx_file, mnist_test):
    import torch

    m = load_model(onnx_file)
    ref = load_model(onnx_file, runtime="onnx-reference")
    assert (m.runtime, ref.runtime) == ("onnxruntime", "onnx-reference")
    x = _nchw(mnist_test[0][:3])
    np.testing.assert_allclose(m.predict(x), ref.predict(x), atol=1e-5)
    w = m.weights()
    convs = [v for k, v in w.items() if "weight" in v and v["weight"].ndim == 4]
    np.testing.assert_array_equal(convs[0]["weight"], tiny_torch.conv1.weight.detach().numpy())
    acts = m.activations(x)
    with torch.no_grad():
        conv1 = tiny_torch.conv1(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(list(acts.values())[0], conv1, atol=1e-5)
    np.testing.assert_allclose(list(acts.values())[-1], m.predict(x), atol=1e-6)


def test_onnx_int8_weights_are_dequantised_within_one_step(onnx_file, tmp_path, mnist_test):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    x = _nchw(mnist_test[0][:16])

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": x[i : i + 1]} for i in range(len(x))])

        def get_next(self):
            return next(self.it, None)

    q = tmp_path / "q.onnx"
    quantize_static(str(onnx_file), str(q), Reader(), quant_format=QuantFormat.QDQ,
                    weight_type=QuantType.QInt8, per_channel=True)
    wf = [v["weight"] for v in load_model(onnx_file).weights().values() if "weight" in v]
    mq = load_model(q)
    wq = [v["weight"] for v in mq.weights().values() if "weight" in v]
    assert len(wf) == len(wq) == 3
    for a, b in zip(wf, wq):
        step = np.abs(a).reshape(a.shape[0], -1).max(1) / 127.0  # per-output-channel symmetric scale
        err = np.abs(a - b).reshape(a.shape[0], -1).max(1)
        assert np.all(err <= step * 0.5 + 1e-7) and not np.array_equal(a, b)
    assert mq.activations(x[:2])  # QDQ graphs expose float activations


def test_keras_weights_activations_and_classifier_view(keras_file, mnist_test):
    import keras

    m = load_model(keras_file)
    assert m.format == "keras" and m.inputs[0].shape == (None, 28, 28, 1)
    model = keras.models.load_model(str(keras_file), compile=False)
    w = m.weights()
    np.testing.assert_array_equal(w["conv2d"]["kernel"], model.layers[0].get_weights()[0])
    x = mnist_test[0][:3].astype(np.float32) / 255.0
    acts = m.activations(x)
    assert "flatten" not in acts and list(acts)[0] == "conv2d"
    np.testing.assert_allclose(list(acts.values())[-1], m.predict(x), atol=1e-5)
    clf = load_classifier(keras_file)
    assert clf.loaded.runtime in ("torch-trace", "keras")
    ca = clf.activations(mnist_test[0][:3])  # pixel scale in, the classifier's preprocessing applied
    np.testing.assert_allclose(ca["dense"], acts["dense"], atol=1e-5)


def test_pruned_zeros_are_kept(tiny_torch):
    import copy

    import torch

    from twinspect.dl.adapters import TorchModel

    pruned = copy.deepcopy(tiny_torch)
    with torch.no_grad():
        wt = pruned.fc.weight
        wt[wt.abs() < wt.abs().median()] = 0.0
    w = TorchModel(pruned).weights()["fc"]["weight"]
    assert w.shape == (10, 192) and (w == 0).sum() >= 950


def test_tflite_int8_weights_match_keras_within_one_step():
    h5, lite = DFLARE / "lenet1.h5", DFLARE / "lenet1-quan.lite"
    if not lite.exists():
        pytest.skip(f"shared data not available: {lite}")
    kw = load_model(h5).weights()
    tm = load_model(lite)
    tw = tm.weights()
    # Keras dense kernel (588, 10) ↔ TFLite fully-connected (10, 588), stored as uint8 with a scale
    dense_k = kw["before_softmax"]["kernel"].T
    dense_t = next(v for k, v in tw.items() if "fully_connected" in k)["before_softmax/kernel/transpose"]
    step = np.abs(dense_k).max() / 127.0  # symmetric int8 step of this tensor
    assert np.max(np.abs(dense_k - dense_t)) <= step * 0.5 + 1e-6 and not np.array_equal(dense_k, dense_t)
    conv_k = kw["block2_conv1"]["kernel"].transpose(3, 0, 1, 2)  # (H, W, I, O) → TFLite (O, H, W, I)
    conv_t = next(v for k, v in tw.items() if k.startswith("2:conv_2d"))["block2_conv1/kernel"]
    assert np.max(np.abs(conv_k - conv_t)) <= np.abs(conv_k).max() / 127.0 * 0.5 + 1e-6
    x = np.random.default_rng(0).uniform(0, 1, (2, 28, 28, 1)).astype(np.float32)
    acts = tm.activations(x)
    assert acts["block1_conv1/Relu"].shape == (2, 28, 28, 4)
    np.testing.assert_allclose(list(acts.values())[-1], tm.predict(x), atol=1e-6)


def test_quantised_torchscript_weights_are_unpacked_and_dequantised(tiny_torch, tmp_path, mnist_test):
    import torch

    from twinspect.dl.adapters import TorchModel
    from twinspect.dl.adapters.base import Preprocess
    from twinspect.dl.compress import quantize_dynamic_linear, quantize_static

    pre = Preprocess(scale=255.0, layout="NCHW")
    float_w = TorchModel(tiny_torch).weights()
    for q in (quantize_static(tiny_torch, mnist_test[0][:32], pre), quantize_dynamic_linear(tiny_torch)):
        p = tmp_path / "q.pt"
        torch.jit.save(torch.jit.trace(q, torch.zeros(1, 1, 28, 28)), str(p))
        w = load_model(p).weights()
        assert list(w) == ["conv1", "conv2", "fc"]  # packed int8 parameters unpacked, in module order
        for layer in w:
            a, b = float_w[layer]["weight"], w[layer]["weight"]
            step = np.abs(a).reshape(a.shape[0], -1).max(1) / 63.0  # per-channel int8 step (reduced range)
            err = np.abs(a - b).reshape(a.shape[0], -1).max(1)
            assert np.all(err <= step + 1e-7)


def test_onnx_weight_behind_a_transpose_belongs_to_its_layer(tmp_path):
    """A weight reaching its MatMul through a Transpose node is that layer's weight (PyTorch layout),
    not a layer of its own nor dropped."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)  # (out, in)
    g = helper.make_graph(
        [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0], name="tr"), helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])], [numpy_helper.from_array(w, "w")],
    )
    p = tmp_path / "tr.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), str(p))
    m = load_model(p)
    assert m.layer_names() == ["mm"]
    np.testing.assert_array_equal(m.canonical_weights()["mm"]["weight"], w)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(m.activations(x)["mm"], x @ w.T, rtol=1e-6)
