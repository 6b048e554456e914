"""Conformance of every model adapter (Foolbox-style: one suite, all frameworks), loader errors, metadata."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.dl.adapters import check_compatible, load_classifier  # noqa: E402
from twinspect.dl.adapters.metadata import read_metadata, sidecar_path, write_metadata  # noqa: E402
from twinspect.errors import IncompatibleModelsError, InputError, ModelError  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def need_shared(*parts: str) -> Path:
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not available: {p}")
    return p


CIFAR_MEAN = np.array([125.307, 122.95, 113.865], dtype=np.float32)
CIFAR_STD = np.array([62.9932, 62.0887, 66.7048], dtype=np.float32)


def _softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# --- direct framework calls (the references the adapters must agree with) ---------------------
def _ref_keras(path, pre):
    import keras

    model = keras.models.load_model(str(path), compile=False)
    return lambda x: np.asarray(model.predict(pre(x), verbose=0, batch_size=len(x)))


def _ref_keras_logits(path, pre):
    run = _ref_keras(path, pre)
    return lambda x: _softmax(run(x))


def _ref_tflite(path, pre):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

    def run(x):
        outs = []
        for img in pre(x):
            it.set_tensor(i, img[None])
            it.invoke()
            outs.append(it.get_tensor(o)[0])
        return np.stack(outs)

    return run


def _ref_onnx(path, pre):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {sess.get_inputs()[0].name: pre(x)})[0]


def _ref_torchscript(path, pre):
    import torch

    module = torch.jit.load(str(path))
    return lambda x: _softmax(module(torch.from_numpy(pre(x))).detach().numpy())


def _unit_nhwc(x):
    return x.astype(np.float32) / 255.0


def _unit_nchw(x):
    return np.ascontiguousarray(_unit_nhwc(x).transpose(0, 3, 1, 2))


def _cifar(x):
    return (x.astype(np.float32) - CIFAR_MEAN) / CIFAR_STD


CASES = {
    # id: (how to get the file, load_classifier kwargs, reference maker, preprocessing, data, output kind)
    "torchscript": ("torchscript_file", {}, _ref_torchscript, _unit_nchw, "mnist", "logits"),
    "onnx": ("onnx_file", {"preprocess": "unit"}, _ref_onnx, _unit_nchw, "mnist", "probabilities"),
    "keras3": ("keras_file", {"preprocess": "unit"}, _ref_keras_logits, _unit_nhwc, "mnist", "logits"),
    "lenet1.h5": ("lenet1.h5", {"preprocess": "unit"}, _ref_keras, _unit_nhwc, "mnist", "probabilities"),
    "lenet1-quan.lite": ("lenet1-quan.lite", {"preprocess": "unit"}, _ref_tflite, _unit_nhwc, "mnist", "probabilities"),
    "resnet.h5": ("resnet.h5", {"preprocess": "cifar10-dflare"}, _ref_keras, _cifar, "cifar10", "probabilities"),
    "resnet-quan.lite": ("resnet-quan.lite", {"preprocess": "cifar10-dflare"}, _ref_tflite, _cifar, "cifar10", "probabilities"),
}


@pytest.fixture(params=list(CASES), scope="module")
def case(request):
    src, kwargs, ref_maker, pre, data, kind = CASES[request.param]
    if src.endswith("_file"):
        path = request.getfixturevalue(src)
    else:
        path = need_shared("models", "dflare", src)
    x_all = request.getfixturevalue("mnist_test" if data == "mnist" else "cifar_test")[0]
    x = x_all[:12]
    clf = load_classifier(path, **kwargs)
    return {"id": request.param, "clf": clf, "ref": ref_maker(path, pre), "x": x, "kind": kind, "path": path}


def test_same_probabilities_and_labels_as_the_framework(case):
    clf, x = case["clf"], case["x"]
    got = clf.predict_proba(x)
    want = case["ref"](x)
    assert got.shape == (len(x), clf.num_classes)
    assert np.array_equal(got.argmax(1), np.asarray(want).argmax(1))
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_output_kind_is_decided_at_load(case):
    assert case["clf"].describe()["output_kind"] == case["kind"]


def test_probabilities_are_a_distribution(case):
    p = case["clf"].predict_proba(case["x"])
    assert p.dtype == np.float64
    assert np.all(p >= 0) and np.all(p <= 1)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    # a trained model is not constant: the images get different top-1 labels
    assert len(set(p.argmax(1).tolist())) > 1


def test_batch_of_one_agrees_with_batch_of_n(case):
    clf, x = case["clf"], case["x"]
    batch = clf.predict_proba(x)
    singles = np.concatenate([clf.predict_proba(x[i]) for i in range(len(x))])  # (H, W, C) each
    np.testing.assert_allclose(singles, batch, atol=2e-5)
    # and again after the batch size went back up (TFLite re-allocation path)
    np.testing.assert_allclose(clf.predict_proba(x[:5]), batch[:5], atol=2e-5)


def test_uint8_and_float_input_agree(case):
    clf, x = case["clf"], case["x"]
    assert x.dtype == np.uint8
    np.testing.assert_allclose(clf.predict_proba(x), clf.predict_proba(x.astype(np.float32)), atol=1e-6)
    np.testing.assert_allclose(clf.predict_proba(x), clf.predict_proba(x.astype(np.float64)), atol=1e-6)


def test_queries_count_rows(case):
    clf, x = case["clf"], case["x"]
    clf.reset_queries()
    clf.predict_proba(x[:7])
    clf.predict(x[0])
    assert clf.queries == 8


def test_wrong_image_shape_names_both_shapes(case):
    clf = case["clf"]
    h, w, c = clf.input_shape
    bad = np.zeros((2, h + 3, w, c), dtype=np.uint8)
    with pytest.raises(InputError) as err:
        clf.predict_proba(bad)
    msg = str(err.value)
    assert str((2, h + 3, w, c)) in msg and ", ".join(map(str, clf.input_shape)) in msg


def test_mnist_batch_without_channel_axis_is_accepted(mnist_test):
    clf = load_classifier(need_shared("models", "dflare", "lenet1.h5"), preprocess="unit")
    x = mnist_test[0][:6]
    np.testing.assert_allclose(clf.predict_proba(x[..., 0]), clf.predict_proba(x))
    np.testing.assert_allclose(clf.predict_proba(x[0, ..., 0]), clf.predict_proba(x[:1]))


def test_check_compatible_names_both_shapes():
    a = load_classifier(need_shared("models", "dflare", "lenet1.h5"), preprocess="unit")
    b = load_classifier(need_shared("models", "dflare", "resnet-quan.lite"), preprocess="cifar10-dflare")
    with pytest.raises(IncompatibleModelsError) as err:
        check_compatible(a, b)
    assert "(28, 28, 1)" in str(err.value) and "(32, 32, 3)" in str(err.value)
    check_compatible(a, load_classifier(need_shared("models", "dflare", "lenet1-quan.lite")))


# --- accuracy on real data ---------------------------------------------------------------------
def test_lenet1_pair_accuracy_and_agreement(mnist_test):
    x, y = mnist_test[0][:1000], mnist_test[1][:1000]
    orig = load_classifier(need_shared("models", "dflare", "lenet1.h5"), preprocess="unit")
    comp = load_classifier(need_shared("models", "dflare", "lenet1-quan.lite"), preprocess="unit")
    lo, lc = orig.predict(x), comp.predict(x)
    assert (lo == y).mean() >= 0.95
    assert (lc == y).mean() >= 0.95
    assert (lo != lc).sum() <= 5  # README: 9 of 10,000 disagree on the full test set


@pytest.mark.slow
@pytest.mark.ci
def test_resnet_accuracy_on_cifar(cifar_test):
    x, y = cifar_test[0][:500], cifar_test[1][:500]
    clf = load_classifier(need_shared("models", "dflare", "resnet.h5"), preprocess="cifar10-dflare")
    assert (clf.predict(x) == y).mean() >= 0.75


def test_tiny_torch_model_learned_something(tiny_torch, mnist_test):
    from twinspect.dl.adapters import TorchClassifier

    clf = TorchClassifier.from_module(tiny_torch, (28, 28, 1), 10, preprocess="unit")
    assert clf.preprocess.layout == "NCHW"  # a preset name follows the model's layout
    x, y = mnist_test[0][:300], mnist_test[1][:300]
    assert (clf.predict(x) == y).mean() >= 0.6


# --- loader errors -----------------------------------------------------------------------------
def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="model file does not exist") as err:
        load_classifier(tmp_path / "nope.h5")
    assert "nope.h5" in str(err.value)


def test_unknown_suffix_lists_supported(tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"\0" * 16)
    with pytest.raises(ModelError) as err:
        load_classifier(p)
    msg = str(err.value)
    assert "model.bin" in msg and ".h5" in msg and ".onnx" in msg and ".lite" in msg and ".pt" in msg


@pytest.mark.parametrize("suffix", [".h5", ".keras", ".lite", ".tflite", ".onnx", ".pt", ".pt2"])
def test_corrupt_file_is_a_model_error_naming_the_file(tmp_path, suffix):
    p = tmp_path / f"corrupt{suffix}"
    p.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelError) as err:
        load_classifier(p, input_shape=(28, 28, 1), num_classes=10)
    assert str(p) in str(err.value)
    assert "\n" not in str(err.value)


def test_directory_is_an_input_error(tmp_path):
    d = tmp_path / "m.onnx"
    d.mkdir()
    with pytest.raises(InputError, match="directory"):
        load_classifier(d)


def test_feature_map_output_is_rejected(tmp_path):
    import torch

    from twinspect.dl.adapters import TorchClassifier

    with pytest.raises(ModelError, match=r"\(2, 4, 26, 26\).*not a probability or logit vector"):
        TorchClassifier.from_module(torch.nn.Conv2d(1, 4, 3), (28, 28, 1))


def test_single_output_regression_head_is_rejected():
    import torch

    from twinspect.dl.adapters import TorchClassifier

    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 1))
    with pytest.raises(ModelError, match="not a probability or logit vector"):
        TorchClassifier.from_module(head, (28, 28, 1))


def test_keras_single_unit_output_is_rejected(tmp_path):
    import keras

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(1)])
    p = tmp_path / "reg.keras"
    model.save(str(p))
    with pytest.raises(ModelError, match="not a probability or logit vector") as err:
        load_classifier(p)
    assert "reg.keras" in str(err.value)


def test_declared_class_count_must_match(onnx_file):
    with pytest.raises(ModelError, match="10 scores"):
        load_classifier(onnx_file, num_classes=7)


def test_bare_torchscript_needs_input_shape(tiny_torch, tmp_path):
    import torch

    p = tmp_path / "bare.pt"
    torch.jit.save(torch.jit.trace(tiny_torch, torch.zeros(1, 1, 28, 28)), str(p))
    with pytest.raises(ModelError, match="input_shape"):
        load_classifier(p)
    clf = load_classifier(p, input_shape=(28, 28, 1), num_classes=10)
    assert clf.num_classes == 10 and clf.preprocess.layout == "NCHW"


def test_pickled_module_is_refused_with_a_hint(tiny_torch, tmp_path):
    import torch

    p = tmp_path / "state.pt"
    torch.save(tiny_torch.state_dict(), str(p))
    with pytest.raises(ModelError, match="from_module"):
        load_classifier(p, input_shape=(28, 28, 1))


def test_nan_outputs_are_passed_through():
    import torch

    from twinspect.dl.adapters import TorchClassifier

    class NaNOnBright(torch.nn.Module):
        def forward(self, x):
            logits = torch.stack([x.mean((1, 2, 3)), -x.mean((1, 2, 3)), torch.zeros(x.shape[0])], 1)
            return torch.where(x.amax((1, 2, 3), keepdim=True).reshape(-1, 1) > 0.99, torch.nan, logits)

    clf = TorchClassifier.from_module(NaNOnBright(), (4, 4, 1), output="logits")
    x = np.zeros((3, 4, 4, 1), dtype=np.uint8)
    x[1] = 255
    p = clf.predict_proba(x)
    assert np.isnan(p[1]).all() and np.isfinite(p[[0, 2]]).all()
    assert clf.queries == 3


def test_logits_notice_is_logged(torchscript_file, caplog):
    with caplog.at_level(logging.INFO, logger="twinspect"):
        clf = load_classifier(torchscript_file)
    assert clf.output_kind == "logits"
    assert any("logits" in r.getMessage() and r.name == "twinspect" for r in caplog.records)


def test_keras_output_kind_comes_from_config(keras_file):
    import keras

    from twinspect.dl.adapters.keras import keras_output_kind

    model = keras.models.load_model(str(keras_file), compile=False)
    assert keras_output_kind(model) == "logits"
    soft = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    assert keras_output_kind(soft) == "probabilities"
    layer = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Softmax()])
    assert keras_output_kind(layer) == "probabilities"
    relu = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu")])
    assert keras_output_kind(relu) == "auto"


# --- ONNX specifics ----------------------------------------------------------------------------
def test_onnx_layout_detection():
    from twinspect.dl.adapters.onnx import detect_layout

    assert detect_layout([1, 28, 28]) == "NCHW"
    assert detect_layout([32, 32, 3]) == "NHWC"
    assert detect_layout([3, 32, 3]) is None
    assert detect_layout([None, None, 3]) == "NHWC"


def test_onnx_nhwc_model_and_fixed_batch(tiny_torch, tmp_path, mnist_test):
    """A channels-last ONNX graph exported at a fixed batch of 1: layout detected, batches looped."""
    import torch

    class NHWC(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x.permute(0, 3, 1, 2))

    p = tmp_path / "nhwc.onnx"
    torch.onnx.export(NHWC(tiny_torch).eval(), (torch.zeros(1, 28, 28, 1),), str(p), dynamo=False)
    clf = load_classifier(p)  # default preset "unit"
    assert clf.preprocess.layout == "NHWC" and clf.input_shape == (28, 28, 1)
    x = mnist_test[0][:5]
    want = _softmax(tiny_torch(torch.from_numpy(_unit_nchw(x))).detach().numpy())
    np.testing.assert_allclose(clf.predict_proba(x), want, atol=2e-5)
    assert clf.queries == 5


# --- metadata ----------------------------------------------------------------------------------
def test_embedded_metadata_is_used_without_sidecar(torchscript_file, tmp_path):
    import shutil

    p = tmp_path / "copy.pt"
    shutil.copy(torchscript_file, p)
    assert not sidecar_path(p).exists()
    meta = read_metadata(p)
    assert meta["input_shape"] == [28, 28, 1] and meta["output"] == "logits"
    clf = load_classifier(p)
    assert clf.input_shape == (28, 28, 1) and clf.num_classes == 10


def test_sidecar_round_trip_and_override(onnx_file, tmp_path, tiny_meta):
    import shutil

    p = tmp_path / "m.onnx"
    shutil.copy(onnx_file, p)
    meta = dict(tiny_meta, output="probabilities", preprocess={"scale": 1.0, "layout": "NCHW"})
    side = write_metadata(p, meta)
    assert side == tmp_path / "m.onnx.json" and read_metadata(p)["preprocess"]["scale"] == 1.0
    assert not list(tmp_path.glob(".*tmp*"))  # atomic write left no temporary file
    assert load_classifier(p).preprocess.scale == 1.0  # from the sidecar
    assert load_classifier(p, preprocess="unit").preprocess.scale == 255.0  # argument wins


def test_bad_sidecar_is_reported(onnx_file, tmp_path):
    import shutil

    p = tmp_path / "m.onnx"
    shutil.copy(onnx_file, p)
    sidecar_path(p).write_text("{not json")
    with pytest.raises(InputError, match="m.onnx.json"):
        load_classifier(p)
    sidecar_path(p).write_text('{"input_shape": [28, 28]}')
    with pytest.raises(ModelError, match="input_shape"):
        load_classifier(p)


def test_metadata_shape_must_agree_with_the_model(onnx_file):
    with pytest.raises(ModelError, match="input shape"):
        load_classifier(onnx_file, input_shape=(32, 32, 1))


def test_torch_export_pt2_round_trip(tiny_torch, tmp_path, mnist_test):
    import torch

    p = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(tiny_torch, (torch.zeros(1, 1, 28, 28),)), str(p))
    clf = load_classifier(p, input_shape=(28, 28, 1))
    x = mnist_test[0][:4]
    want = _softmax(tiny_torch(torch.from_numpy(_unit_nchw(x))).detach().numpy())
    np.testing.assert_allclose(clf.predict_proba(x), want, atol=2e-5)  # batch 1 export: looped


def test_unknown_preset_is_an_input_error():
    with pytest.raises(InputError, match="preset"):
        load_classifier(need_shared("models", "dflare", "lenet1.h5"), preprocess="imagenet")


def test_keras_trace_matches_eager_keras(mnist_test):
    from twinspect.dl.adapters import KerasClassifier

    path = need_shared("models", "dflare", "lenet1.h5")
    traced = KerasClassifier.load(path, preprocess="unit")
    eager = KerasClassifier.load(path, preprocess="unit", trace=False)
    assert traced.describe()["engine"] == "torchscript-trace"
    assert eager.describe()["engine"] == "keras-eager"
    x = mnist_test[0][:9]
    np.testing.assert_allclose(traced.predict_proba(x), eager.predict_proba(x), atol=1e-6)
    np.testing.assert_allclose(traced.predict_proba(x[3]), eager.predict_proba(x[3]), atol=1e-6)


def test_onnx_embedded_metadata(onnx_file, tmp_path, tiny_meta):
    import json

    import onnx

    proto = onnx.load(str(onnx_file))
    entry = proto.metadata_props.add()
    entry.key = "twinspect"
    entry.value = json.dumps(dict(tiny_meta, output="probabilities", preprocess={"scale": 127.5, "layout": "NCHW"}))
    p = tmp_path / "embedded.onnx"
    onnx.save(proto, str(p))
    assert read_metadata(p)["preprocess"]["scale"] == 127.5
    clf = load_classifier(p)
    assert clf.preprocess.scale == 127.5 and clf.output_kind == "probabilities"


def test_quantised_softmax_outputs_are_probabilities_not_logits():
    """A full-int8 TFLite softmax answers in steps of 1/256 (a confident row is 255/256 and nine 0s);
    read as logits it would be put through a softmax again and squashed to [0.085, 0.231]."""
    from twinspect.dl.adapters.base import looks_like_probabilities, softmax

    rng = np.random.default_rng(0)
    logits = rng.normal(scale=6.0, size=(64, 10))
    q = np.minimum(np.round(softmax(logits) * 256) / 256, 255 / 256)  # TFLite's uint8 softmax: scale 1/256, zero point 0
    assert not np.allclose(q.sum(1), 1.0, atol=1e-3)  # the old tolerance took these for logits
    assert looks_like_probabilities(q)
    confident = np.zeros((1, 10))
    confident[0, 3] = 255 / 256
    assert looks_like_probabilities(confident)
    assert not looks_like_probabilities(logits)
    assert not looks_like_probabilities(np.full((2, 10), 0.09))  # in [0, 1] but sums to 0.9
    assert not looks_like_probabilities(q * 1.1)
