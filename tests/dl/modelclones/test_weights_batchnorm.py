"""The weights level across a BatchNorm-folding export (issue 18 item 1): a torch model with BatchNorm
and its own ONNX export, ONNX Runtime dynamic int8 and static QDQ int8 copies (all three fold BatchNorm
into the convolutions), and a Keras model with BatchNormalization and its TFLite conversions, compare at
the weights level, near 1, while an independently trained twin does not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.dl.modelclones.weights import DifferentArchitectures, compare_weights, fold_batchnorm  # noqa: E402


def _bn_net():
    """Conv-BN-ReLU stem, one residual block whose shortcut has a 1×1 conv + BN (the ONNX exporter emits
    the shortcut before the main path's second conv), global pooling, linear."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
            self.b2 = nn.BatchNorm2d(8)
            self.skip = nn.Sequential(nn.Conv2d(6, 8, 1, stride=2, bias=False), nn.BatchNorm2d(8))

        def forward(self, x):
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + self.skip(x))

    return nn.Sequential(nn.Conv2d(1, 6, 3, stride=2, padding=1), nn.BatchNorm2d(6), nn.ReLU(), Block(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def _train(seed: int, x: np.ndarray, y: np.ndarray):
    import torch

    from tests.dl.conftest import adam_steps

    torch.manual_seed(seed)
    return adam_steps(_bn_net(), x, y, steps=80, lr=3e-3, seed=seed)


@pytest.fixture(scope="module")
def bn_models(mnist_train_512, tmp_path_factory, tiny_meta):
    """(TorchScript of model 0, its ONNX export, its ONNX dynamic int8, its ONNX static QDQ int8, TorchScript of
    an independently trained twin (seed 1)) as paths."""
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    from twinspect.dl.adapters.torch import set_torch_threads

    d = tmp_path_factory.mktemp("bn")
    x, y = mnist_train_512
    before = torch.get_num_threads()
    set_torch_threads(1)  # two threads on a shared 2-core machine train this tiny net 15x slower
    try:
        m0, m1 = _train(0, x, y), _train(1, x, y)
    finally:
        torch.set_num_threads(before)
    paths = {}
    for name, m in (("m0", m0), ("twin", m1)):
        paths[name] = d / f"{name}.pt"
        torch.jit.save(torch.jit.trace(m, torch.zeros(2, 1, 28, 28)), str(paths[name]))
    paths["onnx"] = d / "m0.onnx"
    torch.onnx.export(m0, (torch.zeros(1, 1, 28, 28),), str(paths["onnx"]), dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    paths["dyn8"] = d / "m0.dyn8.onnx"
    quantize_dynamic(str(paths["onnx"]), str(paths["dyn8"]), weight_type=QuantType.QInt8)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"x": x[i : i + 32].astype(np.float32).transpose(0, 3, 1, 2) / 255.0} for i in range(0, 128, 32)])

        def get_next(self):
            return next(self.batches, None)

    paths["qdq8"] = d / "m0.qdq8.onnx"
    quantize_static(str(paths["onnx"]), str(paths["qdq8"]), Reader(), quant_format=QuantFormat.QDQ,
                    weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    from twinspect.dl.adapters.metadata import write_metadata

    for p in paths.values():
        write_metadata(p, tiny_meta)
    return paths


def _weights(path):
    from twinspect.dl.adapters import load_classifier

    return load_classifier(path).loaded.canonical_weights()


def test_a_model_and_its_bn_folding_exports_compare_at_the_weights_level(bn_models):
    w0 = _weights(bn_models["m0"])
    assert sum(1 for ps in w0.values() if "running_var" in ps) == 4
    twin = _weights(bn_models["twin"])
    for kind, floor in (("onnx", 0.99999), ("dyn8", 0.999), ("qdq8", 0.999)):
        wx = _weights(bn_models[kind])
        assert not any("running_var" in ps or "var" in ps for ps in wx.values())  # the export folded every BN
        c = compare_weights(w0, wx)
        assert c.folded == (4, 0)  # the four BNs folded in the torch model
        assert c.cosine >= floor, kind
        assert compare_weights(wx, w0).cosine == pytest.approx(c.cosine)  # either order
        # the independently trained twin (same architecture, other seed) is far from the export
        ct = compare_weights(twin, wx)
        assert ct.folded == (4, 0) and ct.cosine < 0.5, kind
    # torch vs torch lines up as it is (nothing folded) — the behaviour for a same-format pair is unchanged
    c = compare_weights(w0, twin)
    assert c.folded == (0, 0) and not c.reordered
    # an export that emits the shortcut's conv before the main path's second one (as for a tiny ResNet):
    # after folding, the layers are paired by shape
    wx = _weights(bn_models["onnx"])
    names = list(wx)
    i_c2 = next(i for i, n in enumerate(names) if wx[n]["weight"].shape == (8, 8, 3, 3))
    i_sk = next(i for i, n in enumerate(names) if wx[n]["weight"].shape == (8, 6, 1, 1))
    names[i_c2], names[i_sk] = names[i_sk], names[i_c2]
    c = compare_weights(w0, {n: wx[n] for n in names})
    assert c.folded == (4, 0) and c.reordered and c.cosine >= 0.99999


def test_folding_matches_torch_fusion_and_the_model_outputs(bn_models):
    """fold_batchnorm gives torch.nn.utils.fusion's fused weights, and running the folded convolution
    reproduces conv → BN in eval mode."""
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    torch.manual_seed(3)
    conv, bn = torch.nn.Conv2d(2, 4, 3, bias=True), torch.nn.BatchNorm2d(4)
    with torch.no_grad():  # non-trivial statistics
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    conv.eval()
    bn.eval()
    w = {"conv": {"weight": conv.weight.detach().numpy(), "bias": conv.bias.detach().numpy()},
         "bn": {k: v.detach().numpy() for k, v in bn.state_dict().items() if k != "num_batches_tracked"}}
    folded, n = fold_batchnorm(w)
    assert n == 1 and list(folded) == ["conv"]
    ref = fuse_conv_bn_eval(conv, bn)
    np.testing.assert_allclose(folded["conv"]["weight"], ref.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(folded["conv"]["bias"], ref.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    xin = torch.randn(3, 2, 6, 6)
    out = torch.nn.functional.conv2d(xin, torch.from_numpy(folded["conv"]["weight"]), torch.from_numpy(folded["conv"]["bias"]))
    np.testing.assert_allclose(out.detach().numpy(), bn(conv(xin)).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert "running_var" in w["bn"]  # the input is left as it was


def test_batchnorm_not_after_a_kernel_is_kept_and_unrelated_shapes_stay_different():
    rng = np.random.default_rng(0)
    bn = {"weight": np.ones(4), "bias": np.zeros(4), "running_mean": np.zeros(4), "running_var": np.ones(4)}
    # BN first (no layer before it) and BN after BN: kept
    w = {"bn0": dict(bn), "fc": {"weight": rng.normal(size=(4, 4))}, "bn1": dict(bn), "bn2": dict(bn)}
    folded, n = fold_batchnorm(w)
    assert n == 1 and list(folded) == ["bn0", "fc", "bn2"]
    # a BN of another length than the kernel's output channels is not folded
    folded, n = fold_batchnorm({"fc": {"weight": rng.normal(size=(3, 4))}, "bn": dict(bn)})
    assert n == 0
    # Keras names (gamma/beta/moving_*), ε = 1e-3
    keras_bn = {"gamma": np.full(3, 2.0), "beta": np.ones(3), "moving_mean": np.zeros(3), "moving_variance": np.full(3, 1 - 1e-3)}
    folded, n = fold_batchnorm({"d": {"kernel": np.ones((3, 2)), "bias": np.zeros(3)}, "bn": keras_bn})
    assert n == 1
    np.testing.assert_allclose(folded["d"]["kernel"], np.full((3, 2), 2.0), rtol=1e-6)
    np.testing.assert_allclose(folded["d"]["bias"], np.ones(3), rtol=1e-6)
    # folding does not make different architectures comparable
    a = {"c": {"weight": rng.normal(size=(4, 1, 3, 3))}, "bn": dict(bn), "fc": {"weight": rng.normal(size=(10, 4))}}
    b = {"c": {"weight": rng.normal(size=(4, 1, 5, 5)), "bias": np.zeros(4)}, "fc": {"weight": rng.normal(size=(10, 4))}}
    with pytest.raises(DifferentArchitectures, match="numbers"):
        compare_weights(a, b)


def test_models_compare_scores_a_model_and_its_own_int8_export_as_reused(bn_models):
    """End to end with the shipped calibration: the BN net and its ONNX Runtime int8 copy are compared at the
    weights level and flagged — in a run of two models (no zoo features) and beside the independent twin."""
    from twinspect.dl.modelclones import CompareConfig, compare_models

    cfg = CompareConfig(data="mnist", n_inputs=200, cka_inputs=64, modeldiff_pairs=50, seed=0,
                        levels=("weights", "representation", "io", "reuse"))
    r = compare_models([bn_models["m0"], bn_models["dyn8"]], config=cfg)
    assert r.matrix("weights_cosine")[0, 1] > 0.999
    assert not any(s["measure"] == "weights_cosine" for s in r.skipped)
    assert r.matrix("reuse")[0, 1] >= 0.5
    r3 = compare_models([bn_models["m0"], bn_models["qdq8"], bn_models["twin"]], config=cfg)
    reuse = r3.matrix("reuse")
    assert reuse[0, 1] >= 0.5
    assert reuse[0, 2] < 0.5 and reuse[1, 2] < 0.5


_KERAS_BN_TFLITE = textwrap.dedent('''
    import os, sys
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np, keras, tensorflow as tf
    out = sys.argv[1]
    d = np.load(sys.argv[2]); x = d["x"].astype("float32") / 255; y = d["y"]
    L = keras.layers
    for seed in (0, 1):
        keras.utils.set_random_seed(seed)
        m = keras.Sequential([keras.Input((28, 28, 1)), L.Conv2D(8, 3, use_bias=False), L.BatchNormalization(),
                              L.Activation("relu"), L.MaxPooling2D(), L.Conv2D(16, 3), L.BatchNormalization(),
                              L.Activation("relu"), L.Flatten(), L.Dense(10)])
        m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.fit(x, y, epochs=1, batch_size=64, verbose=0)
        m.save(f"{out}/k{seed}.keras")
        c = tf.lite.TFLiteConverter.from_keras_model(m)
        open(f"{out}/k{seed}.tflite", "wb").write(c.convert())
        c = tf.lite.TFLiteConverter.from_keras_model(m); c.optimizations = [tf.lite.Optimize.DEFAULT]
        open(f"{out}/k{seed}-dyn8.tflite", "wb").write(c.convert())
''')


def test_a_keras_bn_model_and_its_tflite_conversions_compare_at_the_weights_level(mnist_train_512, tmp_path):
    """The TFLite converter folds Keras BatchNormalization (γ/β/moving statistics, ε = 1e-3) into the convolutions:
    a Keras model against its float and dynamic-range int8 TFLite files is near 1, against its twin's far lower."""
    x, y = mnist_train_512
    np.savez(tmp_path / "d.npz", x=x, y=y)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-c", _KERAS_BN_TFLITE, str(tmp_path), str(tmp_path / "d.npz")],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        if "No module named 'tensorflow'" in r.stderr:
            pytest.skip("tensorflow is not installed: no TFLite converter")
        raise AssertionError(f"TFLite conversion failed:\n{r.stderr[-2000:]}")
    from twinspect.dl.adapters import load_classifier

    def w(name):
        return load_classifier(tmp_path / name, input_shape=(28, 28, 1), num_classes=10).loaded.canonical_weights()

    k0 = w("k0.keras")
    for name, floor in (("k0.tflite", 0.99999), ("k0-dyn8.tflite", 0.999)):
        c = compare_weights(k0, w(name))
        assert c.folded == (2, 0) and c.cosine >= floor, name
    assert compare_weights(w("k1.keras"), w("k0.tflite")).cosine < 0.5
