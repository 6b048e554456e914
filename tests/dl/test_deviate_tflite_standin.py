"""The differentiable stand-in for quantised TensorFlow Lite models (``twinspect.dl.deviate.tflite_standin``).

Measured against LiteRT itself on real models: DFlare's own dynamic-range ("hybrid") LeNet-1 and
ResNet-20 from ../shared, and the TinyCNN of ``conftest`` converted by today's TFLiteConverter to
dynamic-range int8 and full int8.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ai_edge_litert")


def _litert(path, x):
    """LiteRT's output on ``x`` (float32, the model's own input), one image at a time."""
    from twinspect.dl.adapters.tflite import TFLiteModel

    m = TFLiteModel(path)
    return np.concatenate([m.forward(x[i:i + 1])[0] for i in range(len(x))])


def _standin(path, x):
    from twinspect.dl.deviate.tflite_standin import TFLiteStandIn

    with torch.no_grad():
        return TFLiteStandIn(path)(torch.from_numpy(x)).numpy()


def test_dflare_hybrid_lenet1_is_reproduced(shared_file, mnist_test):
    """DFlare's 8-bit LeNet-1 (hybrid kernels, uint8-typed symmetric weights): the stand-in's probabilities
    equal LiteRT's to 1e-5 on clean and noisy test images, where the float original's differ by ~1e-3."""
    from twinspect.dl.deviate.tflite_standin import TFLiteStandIn

    path = shared_file("models", "dflare", "lenet1-quan.lite")
    st = TFLiteStandIn(path)
    assert st.hybrid == 2 and not st.integer  # the conv and the dense layer; the first (depthwise) conv is float
    rng = np.random.default_rng(0)
    x = mnist_test[0][:40].astype(np.float32)
    x = np.concatenate([x, np.clip(x + rng.uniform(-48, 48, x.shape), 0, 255)]).astype(np.float32) / 255.0
    got, want = _standin(path, x), _litert(path, x)
    assert got.shape == want.shape == (80, 10)
    assert np.abs(got - want).max() < 1e-5
    assert (got.argmax(1) == want.argmax(1)).all()


def test_dflare_hybrid_resnet20_is_close(shared_file):
    """DFlare's 8-bit ResNet-20 (19 hybrid convolutions, residual ADDs, BatchNorm as MUL/ADD, MEAN): the
    same labels as LiteRT and probabilities within a tenth of the original-vs-compressed gap."""
    from twinspect.dl.adapters import load_classifier

    path = shared_file("models", "dflare", "resnet-quan.lite")
    h5 = shared_file("models", "dflare", "resnet.h5")
    x = np.load(shared_file("cifar10", "test.npz"))["x"][:40].astype(np.float32)
    mean, std = np.float32([125.307, 122.95, 113.865]), np.float32([62.9932, 62.0887, 66.7048])
    xin = ((x - mean) / std).astype(np.float32)
    got, want = _standin(path, xin), _litert(path, xin)
    orig = load_classifier(str(h5), preprocess={"scale": 1.0, "mean": mean.tolist(), "std": std.tolist(),
                                                "layout": "NHWC"}).predict_proba(x)
    assert (got.argmax(1) == want.argmax(1)).all()
    gap = np.abs(orig - want).sum(1).mean()
    assert np.abs(got - want).sum(1).mean() < 0.1 * gap


@pytest.mark.parametrize("name", ["tflite-dynamic-int8", "tflite-int8", "tflite-dynamic-int8-shapeops"])
def test_todays_converter_output_is_reproduced(name, tiny_tflite_models, mnist_test):
    """TinyCNN converted by TFLiteConverter: dynamic-range int8 (hybrid kernels; also with the batch size
    computed by SHAPE/STRIDED_SLICE/PACK before the dense layer, as Keras 3 exports Flatten) and full int8
    (integer activations, fake-quantised here): the stand-in's logits within 0.2 % of their range of LiteRT's."""
    from twinspect.dl.deviate.tflite_standin import TFLiteStandIn

    path = tiny_tflite_models[name]
    st = TFLiteStandIn(path)
    assert (st.hybrid > 0, st.integer) == ((False, True) if name == "tflite-int8" else (True, False))
    x = (mnist_test[0][:32].astype(np.float32) / 255.0)
    got, want = _standin(path, x), _litert(path, x)
    spread = np.abs(want).max()
    assert np.abs(got - want).max() < 0.002 * spread
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.95


def test_float_model_gets_no_standin_and_gradient_flows(tiny_tflite_models, mnist_test):
    """A float TFLite model needs no stand-in (None with a reason); a quantised one's stand-in is differentiable
    through its rounding (straight-through) and from unit-scale pixels, as the guided search calls it."""
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.deviate.tflite_standin import standin_logit_fn

    meta = {"scale": 255.0, "mean": [], "std": [], "layout": "NHWC"}
    fn, why = standin_logit_fn(load_classifier(str(tiny_tflite_models["tflite-float"]), preprocess=meta))
    assert fn is None and "float" in why
    clf = load_classifier(str(tiny_tflite_models["tflite-dynamic-int8"]), preprocess=meta)
    fn, why = standin_logit_fn(clf)
    assert why is None
    x = torch.from_numpy(mnist_test[0][:2].astype(np.float32) / 255.0).requires_grad_(True)
    z = fn(x)
    assert z.shape == (2, 10)
    (g,) = torch.autograd.grad(z[:, 3].sum(), x)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


def test_unsupported_operator_is_refused_with_its_name(tmp_path):
    """A file that is not a TFLite flatbuffer, or holds an operator the stand-in does not run, raises ModelError
    naming the file (the guided search then has no stand-in, never a crash)."""
    from twinspect.dl.deviate.tflite_standin import TFLiteStandIn
    from twinspect.errors import ModelError

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(ModelError, match="bad.tflite"):
        TFLiteStandIn(bad)
