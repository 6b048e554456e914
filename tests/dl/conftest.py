"""Fixtures of the deep-learning tests: shared data, and small real models in every format.

Keras reads ``KERAS_BACKEND`` when first imported, so it is set here, before any test module imports
keras (twinspect's Keras adapter does the same with ``setdefault``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("KERAS_BACKEND", "torch")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
DATA = SHARED / "data"
DFLARE = DATA / "models" / "dflare"


def pytest_configure(config):
    config.addinivalue_line("markers", "ci: slow test that still runs in CI")


def need_shared(*parts: str) -> Path:
    """Path under shared/data, or skip the test when it is absent."""
    p = DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not available: {p}")
    return p


@pytest.fixture(scope="session")
def shared_file():
    """``shared_file("models", "dflare", "lenet1.h5")``: a path under shared/data, or skip."""
    return need_shared


@pytest.fixture(scope="session")
def tiny_meta():
    """Metadata of the tiny torch CNN (a fresh copy)."""
    return dict(TINY_META)


@pytest.fixture(scope="session")
def mnist_train_512():
    """The first 512 images of a shuffled MNIST training subset: x (512, 28, 28, 1) uint8, y int64."""
    d = np.load(need_shared("mnist", "train_10k.npz"))
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(d["y"]))[:512]
    return d["x"][idx][..., None], d["y"][idx].astype(np.int64)


@pytest.fixture(scope="session")
def mnist_test():
    d = np.load(need_shared("mnist", "test.npz"))
    return d["x"][..., None], d["y"].astype(np.int64)


@pytest.fixture(scope="session")
def cifar_test():
    d = np.load(need_shared("cifar10", "test.npz"))
    return d["x"], d["y"].astype(np.int64)


def make_tiny_cnn():
    """LeNet-like CNN on (N, 1, 28, 28) returning (N, 10) logits."""
    import torch
    from torch import nn

    class TinyCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 12, 5)
            self.fc = nn.Linear(12 * 4 * 4, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
            return self.fc(torch.flatten(x, 1))

    return TinyCNN()


def adam_steps(model, x: np.ndarray, y: np.ndarray, steps: int, lr: float, seed: int):
    """Train ``model`` in place for ``steps`` Adam steps (batch 64, drawn with a generator seeded ``seed``) on
    uint8 NHWC images ``x`` (scaled x/255, NCHW) and int64 labels ``y``, cross-entropy on its logits; only
    the parameters that require gradients move. Returns the model in eval mode."""
    import torch

    xt = torch.from_numpy(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)
    yt = torch.from_numpy(y)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(yt), (64,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="session")
def tiny_torch(mnist_train_512):
    """A TinyCNN trained for 60 Adam steps (batch 64) on 512 MNIST images; eval mode, logits."""
    import torch

    torch.manual_seed(0)
    return adam_steps(make_tiny_cnn(), *mnist_train_512, steps=60, lr=3e-3, seed=0)


TINY_META = {
    "input_shape": [28, 28, 1],
    "num_classes": 10,
    "output": "logits",
    "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NCHW"},
    "arch": "tinycnn",
    "dataset": "mnist",
    "compression": None,
    "accuracy": None,
}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def torchscript_file(tiny_torch, model_dir):
    """TorchScript file with the metadata both embedded and as a sidecar."""
    import torch

    from twinspect.dl.adapters.metadata import extra_files, write_metadata

    path = model_dir / "tiny.pt"
    scripted = torch.jit.trace(tiny_torch, torch.zeros(1, 1, 28, 28))
    torch.jit.save(scripted, str(path), _extra_files=extra_files(TINY_META))
    write_metadata(path, TINY_META)
    return path


@pytest.fixture(scope="session")
def onnx_file(tiny_torch, model_dir):
    """ONNX export of TinyCNN + softmax (probabilities), dynamic batch, no metadata."""
    import torch

    path = model_dir / "tiny.onnx"
    model = torch.nn.Sequential(tiny_torch, torch.nn.Softmax(dim=1)).eval()
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        str(path),
        dynamo=False,
        input_names=["x"],
        output_names=["p"],
        dynamic_axes={"x": {0: "N"}, "p": {0: "N"}},
    )
    return path


@pytest.fixture(scope="session")
def keras_file(mnist_train_512, model_dir):
    """A tiny Keras 3 CNN ending in a linear Dense layer (logits), trained 2 epochs, saved as .keras."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(4, 5, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_train_512
    model.fit(x.astype(np.float32) / 255.0, y, epochs=2, batch_size=64, verbose=0)
    path = model_dir / "tiny.keras"
    model.save(str(path))
    return path


def save_rounded_twins(model, meta: dict, d: Path) -> list[Path]:
    """``model`` and a copy with every weight tensor rounded to 8 bits (per-tensor, symmetric), saved
    as TorchScript files ``d/orig.pt`` and ``d/w8.pt`` with ``meta`` embedded; returns the two paths."""
    import copy

    import torch

    from twinspect.dl.adapters.metadata import extra_files

    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for p in rounded.parameters():
            step = p.abs().max() / 127
            p.copy_(torch.round(p / step) * step)
    paths = []
    for name, m in (("orig.pt", model), ("w8.pt", rounded)):
        scripted = torch.jit.trace(m.eval(), torch.zeros(1, 1, 28, 28))
        torch.jit.save(scripted, str(d / name), _extra_files=extra_files(meta))
        paths.append(d / name)
    return paths


@pytest.fixture(scope="session")
def tiny_twins(tiny_torch, tiny_meta, tmp_path_factory):
    """The TinyCNN above and its 8-bit-rounded copy (:func:`save_rounded_twins`), loaded through
    twinspect's adapter."""
    from twinspect.dl.adapters import load_classifier

    orig, w8 = save_rounded_twins(tiny_torch, tiny_meta, tmp_path_factory.mktemp("twins"))
    return load_classifier(orig), load_classifier(w8)


@pytest.fixture(scope="session")
def tiny_nhwc(tiny_torch) -> dict[str, np.ndarray]:
    """TinyCNN's parameters in TensorFlow/Keras layout (conv HWIO, dense (in, out) in NHWC flatten order)."""
    sd = {k: v.detach().numpy() for k, v in tiny_torch.state_dict().items()}
    w = sd["fc.weight"].reshape(10, 12, 4, 4).transpose(2, 3, 1, 0).reshape(192, 10)  # (c,h,w) -> (h,w,c) rows
    return {
        "k1": sd["conv1.weight"].transpose(2, 3, 1, 0), "b1": sd["conv1.bias"],
        "k2": sd["conv2.weight"].transpose(2, 3, 1, 0), "b2": sd["conv2.bias"],
        "w": np.ascontiguousarray(w), "b": sd["fc.bias"],
    }


_TFLITE_SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import tensorflow as tf
    p = dict(np.load(sys.argv[1])); out = sys.argv[2]; calib = np.load(sys.argv[3])
    class M(tf.Module):
        def __init__(self):
            self.v = {k: tf.Variable(v) for k, v in p.items()}
        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.float32)])
        def __call__(self, x):
            v = self.v
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, v["k1"], 1, "VALID") + v["b1"]), 2, 2, "VALID")
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, v["k2"], 1, "VALID") + v["b2"]), 2, 2, "VALID")
            return tf.matmul(tf.reshape(h, [-1, 192]), v["w"]) + v["b"]
    class Flat(M):  # the flattening as Keras 3's Flatten exports it: SHAPE, STRIDED_SLICE, PACK, RESHAPE
        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.float32)])
        def __call__(self, x):
            v = self.v
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, v["k1"], 1, "VALID") + v["b1"]), 2, 2, "VALID")
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, v["k2"], 1, "VALID") + v["b2"]), 2, 2, "VALID")
            return tf.matmul(tf.reshape(h, tf.stack([tf.shape(h)[0], 192])), v["w"]) + v["b"]
    def convert(name, opt=False, types=None, rep=False, module=M):
        m = module()
        fn = m.__call__.get_concrete_function()
        c = tf.lite.TFLiteConverter.from_concrete_functions([fn], m)
        if opt:
            c.optimizations = [tf.lite.Optimize.DEFAULT]
        if types:
            c.target_spec.supported_types = types
        if rep:
            c.representative_dataset = lambda: ([calib[i : i + 1]] for i in range(len(calib)))
        open(f"{out}/{name}.tflite", "wb").write(c.convert())
    convert("tflite-float")
    convert("tflite-dynamic-int8", opt=True)
    convert("tflite-fp16", opt=True, types=[tf.float16])
    convert("tflite-int8", opt=True, rep=True)
    convert("tflite-dynamic-int8-shapeops", opt=True, module=Flat)
''')


@pytest.fixture(scope="session")
def tiny_tflite_models(tiny_nhwc, mnist_train_512, tmp_path_factory):
    """TFLite conversions of TinyCNN (TensorFlow run in a child process: ~10 s, kept apart from torch): float,
    dynamic-range int8, float16 and full int8 (calibrated on 32 training images), and dynamic-range int8 of a graph
    that flattens through SHAPE/STRIDED_SLICE/PACK as Keras 3 exports do, by name."""
    calib = (mnist_train_512[0][:32].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()
    d = tmp_path_factory.mktemp("tflite")
    np.savez(d / "p.npz", **tiny_nhwc)
    np.save(d / "calib.npy", calib.transpose(0, 2, 3, 1).copy())
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-c", _TFLITE_SCRIPT, str(d / "p.npz"), str(d), str(d / "calib.npy")],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        if "No module named 'tensorflow'" in r.stderr:
            pytest.skip("tensorflow is not installed: no TFLite converter")
        raise AssertionError(f"TFLite conversion failed:\n{r.stderr[-2000:]}")
    return {n: d / f"{n}.tflite" for n in ("tflite-float", "tflite-dynamic-int8", "tflite-fp16", "tflite-int8",
                                            "tflite-dynamic-int8-shapeops")}
