"""Second, fresh reuse hold-out (issue 18 item 5, protocol v2): calibration v2 = both splits of the first
hold-out, a new test split of kinds neither of them has, the fit frozen before the test run.

The first hold-out (``benchmarks/models_reuse_holdout.py``) was run once and its test split looked at;
it can no longer hold anything out. Protocol v2:

* **calibration v2** — every model of the first hold-out (its cache, ``~/.cache/twinspect-bench/
  reuse-holdout``, built by ``models_reuse_holdout.py build``): the 72 twinspect-made calibration
  models and the 77 former test models (plain torch loop and Keras 3; MLPs, a BatchNorm CNN, students
  ``smlp``/``scnn``), 149 models, 29 families. Pairs are formed inside each former split as before
  (derived = ancestor, independent = other family, siblings left out); the *zoo* of every pair — the
  models a zoo-relative feature compares it with — is all 149 models.
* **test v2** — 72 models built here by code in this file only, of kinds no calibration model has
  (cache ``~/.cache/twinspect-bench/reuse-holdout-v2``, never in the repository; seeded). Ten
  families of new architectures and trainers:

  - ``wmlp`` (torch, seeds 0-1): MLP 784-512-256-10 with dropout 0.2, Adam with weight decay, no input
    normalisation;
  - ``avgcnn`` (torch, 0-1): two 5×5 convolutions with *average* pooling, SGD + momentum with label
    smoothing 0.1;
  - ``dwcnn`` (torch, 0-1): a stem convolution and two depthwise-separable blocks, Adam with random
    rotation/translation augmentation;
  - ``tres`` (torch, 0-1): a tiny ResNet (stem, two residual blocks with BatchNorm, one strided,
    global average pooling), Adam;
  - ``kbn`` (Keras 3 *functional* API, 0-1): Conv-BatchNorm-ReLU ×2 with max pooling, dropout,
    categorical cross-entropy with label smoothing 0.1, RMSprop;

  and four *scratch* models of the two new student architectures (``s2conv``: 5×5 conv 8 → pool →
  5×5 conv 16 → pool → linear; ``s3mlp``: 784-128-64-10), seeds 60-61: the hardest negatives. Each of
  the ten non-student bases gets: ``ft-rot`` (fine-tuned 2 epochs on 1,500 images rotated ±25°),
  ``ft-sub`` (fine-tuned 1 epoch on 2,000 images of the digits 5-9 only, SGD), ``distill-s2conv``
  (KD, T = 3, α = 0.7, Adam), ``distill-s3mlp`` (KD on the teacher's soft labels only, T = 4, Adam),
  ``prune80`` (80 % of the weights zeroed — ``torch.nn.utils.prune`` global L1 for torch, per-kernel
  magnitude for Keras — then fine-tuned on 2,000 images with the pruned weights kept at 0, 1 epoch for
  torch, 3 for Keras, whose BatchNorm statistics need them); the eight torch bases also ``onnx-dyn8`` (ONNX export then ONNX
  Runtime ``quantize_dynamic`` int8, the most common way to shrink an ONNX model).

Steps (``all`` = ``build``, ``calibrate``, ``test``; ``test`` refuses to run without the frozen fit
and never refits):

1. ``build``: trains the test models (the calibration v2 models must already be in the first
   hold-out's cache).
2. ``calibrate``: compares the calibration v2 pairs (no baselines: their values are taken from the
   first hold-out's cached comparisons), reports leave-one-family-out results of the old and the new
   feature sets, fits the reuse score on all calibration v2 pairs and writes the coefficients with
   their SHA-256 to ``benchmarks/results/models_reuse_holdout2_fit.json``, which is committed before
   ``test`` runs (with ``--ship`` also to the shipped ``reuse_calibration.json``: the recorded run
   did, as ``--ship`` was then the only behaviour; the shipped file was reverted after the test, see
   ``models_reuse_holdout2_notes.md``).
3. ``test``: loads and hash-checks the frozen fit, compares the test pairs once (all levels and the
   ModelDiff / DeepJudge baselines), writes ``benchmarks/results/models_reuse_holdout2.{md,json}``.

Run::

    nice -n 19 .venv/bin/python benchmarks/models_reuse_holdout2.py build
    nice -n 19 .venv/bin/python benchmarks/models_reuse_holdout2.py calibrate   # then commit the fit file
    nice -n 19 .venv/bin/python benchmarks/models_reuse_holdout2.py test
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import models_reuse as mr  # noqa: E402  (AUC, ancestors, the baselines' rules)
import models_reuse_holdout as h1  # noqa: E402  (the first hold-out: its cache is calibration v2)

from twinspect._io import read_json, write_json  # noqa: E402
from twinspect.reports.table import markdown_table  # noqa: E402

CAL_CACHE = h1.CACHE
CACHE = Path.home() / ".cache" / "twinspect-bench" / "reuse-holdout-v2"
RESULTS = ROOT / "benchmarks" / "results"
FIT_FILE = RESULTS / "models_reuse_holdout2_fit.json"
OUT = RESULTS / "models_reuse_holdout2"

TORCH_BASES = [(a, s) for a in ("wmlp", "avgcnn", "dwcnn", "tres") for s in (0, 1)]
KERAS_BASES = [("kbn", 0), ("kbn", 1)]
SCRATCH_STUDENTS = [("s2conv", 60), ("s2conv", 61), ("s3mlp", 60), ("s3mlp", 61)]
KINDS = ("ft-rot", "ft-sub", "distill-s2conv", "distill-s3mlp", "prune80", "onnx-dyn8")
TRAIN_SIZE = 6000
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
#: from-scratch recipes of the test v2 torch families: optimiser, lr, epochs, label smoothing, augmentation
RECIPES = {
    "wmlp": {"opt": "adamw", "lr": 1e-3, "epochs": 4, "smooth": 0.0, "augment": None},
    "avgcnn": {"opt": "sgd", "lr": 0.02, "epochs": 4, "smooth": 0.1, "augment": None},
    "dwcnn": {"opt": "adam", "lr": 2e-3, "epochs": 4, "smooth": 0.0, "augment": "rot"},
    "tres": {"opt": "adam", "lr": 2e-3, "epochs": 3, "smooth": 0.0, "augment": None},
    "s2conv": {"opt": "sgd", "lr": 0.02, "epochs": 5, "smooth": 0.0, "augment": None},
    "s3mlp": {"opt": "sgd", "lr": 0.05, "epochs": 6, "smooth": 0.0, "augment": None},
}
CONFIG = dict(h1.CONFIG)
log, sha256_file = h1.log, h1.sha256_file


# -- test v2: architectures and trainers written here only ------------------------------------------------
def torch_arch(name: str):
    """A test v2 PyTorch architecture (in no other file of the project)."""
    import torch
    from torch import nn

    if name == "wmlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 256), nn.ReLU(),
                             nn.Dropout(0.2), nn.Linear(256, 10))
    if name == "avgcnn":
        return nn.Sequential(nn.Conv2d(1, 12, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(12, 24, 5), nn.ReLU(), nn.AvgPool2d(2),
                             nn.Flatten(), nn.Linear(24 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "dwcnn":
        def sep(cin, cout):
            return [nn.Conv2d(cin, cin, 3, padding=1, groups=cin), nn.Conv2d(cin, cout, 1), nn.ReLU(), nn.MaxPool2d(2)]
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), *sep(16, 32), *sep(32, 48), nn.Flatten(),
                             nn.Linear(48 * 7 * 7, 10))
    if name == "s2conv":
        return nn.Sequential(nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    if name == "s3mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "tres":
        class Block(nn.Module):
            def __init__(self, cin: int, cout: int, stride: int) -> None:
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
                self.b1 = nn.BatchNorm2d(cout)
                self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
                self.b2 = nn.BatchNorm2d(cout)
                self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
                             if stride != 1 or cin != cout else nn.Identity())

            def forward(self, x):
                return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + self.skip(x))

        return nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                             Block(16, 16, 1), Block(16, 32, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    raise ValueError(name)


def norm(arch: str) -> tuple[float, float]:
    """(mean, std) after x/255: the conv nets use MNIST's, the MLPs none."""
    return (0.0, 1.0) if arch in ("wmlp", "s3mlp") else (MNIST_MEAN, MNIST_STD)


def to_input(x: np.ndarray, arch: str):
    """uint8/float (N, 28, 28) in 0-255 → float32 tensor (N, 1, 28, 28) in the model's preprocessing."""
    import torch

    mean, std = norm(arch)
    return torch.from_numpy(((np.asarray(x, dtype=np.float32) / 255.0 - mean) / std)[:, None])


def augment(xb: np.ndarray, rng: np.random.Generator, kind: str) -> np.ndarray:
    """Random rotation (±``deg``°) and translation (±3 px) of a uint8 batch (N, 28, 28), bilinear, zero fill;
    ``kind`` "rot" (±15°), "rot25" (±25°) or "shift" (translation only)."""
    import torch
    import torch.nn.functional as F

    deg = {"rot": 15.0, "rot25": 25.0, "shift": 0.0}[kind]
    n = len(xb)
    ang = np.deg2rad(rng.uniform(-deg, deg, n))
    tx, ty = rng.uniform(-3, 3, n) / 14.0, rng.uniform(-3, 3, n) / 14.0
    theta = np.stack([np.stack([np.cos(ang), -np.sin(ang), tx], 1), np.stack([np.sin(ang), np.cos(ang), ty], 1)], 1)
    t = torch.from_numpy(xb.astype(np.float32)[:, None])
    grid = F.affine_grid(torch.from_numpy(theta.astype(np.float32)), list(t.shape), align_corners=False)
    return F.grid_sample(t, grid, align_corners=False).numpy()[:, 0]


def fit_torch(model, arch: str, x: np.ndarray, y: np.ndarray, *, epochs: int, lr: float, opt: str, seed: int,
              smooth: float = 0.0, augment_kind: str | None = None, soft: np.ndarray | None = None,
              temperature: float = 1.0, alpha: float = 1.0, batch: int = 64):
    """Test v2's torch trainer: cross-entropy (optionally label-smoothed) or Hinton KD on ``soft`` logits."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if opt == "sgd":
        optim: torch.optim.Optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)
    elif opt == "adamw":
        optim = torch.optim.AdamW(params, lr=lr, weight_decay=1e-2)
    else:
        optim = torch.optim.Adam(params, lr=lr)
    yt = torch.from_numpy(y.astype(np.int64))
    st = None if soft is None else torch.from_numpy(soft.astype(np.float32))
    model.train()
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for s in range(0, len(x), batch):
            idx = order[s : s + batch]
            xb = augment(x[idx], rng, augment_kind) if augment_kind else x[idx]
            out = model(to_input(xb, arch))
            ce = F.cross_entropy(out, yt[idx], label_smoothing=smooth)
            if st is None:
                loss = ce
            else:
                t = temperature
                kd = F.kl_div(F.log_softmax(out / t, 1), F.softmax(st[idx] / t, 1), reduction="batchmean") * t * t
                loss = alpha * kd + (1 - alpha) * ce
            optim.zero_grad()
            loss.backward()
            optim.step()
    return model.eval()


def torch_logits(model, arch: str, x: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.concatenate([model(to_input(x[i : i + 1000], arch)).numpy() for i in range(0, len(x), 1000)])


def _meta(arch: str, layout: str) -> dict:
    mean, std = norm(arch)
    scaled = std != 1.0
    return {"arch": arch, "input_shape": [28, 28, 1], "num_classes": 10, "output": "logits", "dataset": "mnist",
            "preprocess": {"scale": 255.0, "mean": [mean] if scaled else [], "std": [std] if scaled else [], "layout": layout}}


def save_torch(model, arch: str, path: Path) -> None:
    """``torch.jit.trace`` + ``torch.jit.save``, metadata in the ``.json`` sidecar."""
    import torch

    from twinspect.dl.adapters.metadata import write_metadata

    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), torch.zeros(2, 1, 28, 28))
    tmp = path.with_name(path.name + ".tmp")
    torch.jit.save(traced, str(tmp))
    tmp.replace(path)
    write_metadata(path, _meta(arch, "NCHW"))


def export_onnx_dyn8(model, arch: str, path: Path) -> None:
    """ONNX export (dynamic batch) then ONNX Runtime ``quantize_dynamic`` (int8 weights)."""
    import tempfile

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from twinspect.dl.adapters.metadata import write_metadata

    with tempfile.TemporaryDirectory() as tmp:
        fp = Path(tmp) / "f.onnx"
        torch.onnx.export(model.eval(), (torch.zeros(1, 1, 28, 28),), str(fp), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        out = Path(tmp) / "q.onnx"
        quantize_dynamic(str(fp), str(out), weight_type=QuantType.QInt8)
        tmp_path = path.with_name(path.name + ".tmp")
        tmp_path.write_bytes(out.read_bytes())
        tmp_path.replace(path)
    write_metadata(path, _meta(arch, "NCHW"))


def keras_bn(seed: int):
    """The Keras functional model with BatchNorm (logits output)."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    inp = keras.Input((28, 28, 1))
    h = inp
    for f in (16, 32):
        h = L.Conv2D(f, 3, padding="same", use_bias=False)(h)
        h = L.BatchNormalization()(h)
        h = L.Activation("relu")(h)
        h = L.MaxPooling2D()(h)
    h = L.Flatten()(h)
    h = L.Dropout(0.25)(h)
    out = L.Dense(10)(h)
    return keras.Model(inp, out, name="kbn")


def keras_train(model, x: np.ndarray, y: np.ndarray, *, epochs: int, lr: float, opt: str, seed: int,
                augment_kind: str | None = None, smooth: float = 0.1, masks: list | None = None) -> None:
    """Keras ``compile`` + ``fit``: one-hot categorical cross-entropy with label smoothing; with ``masks`` (one
    boolean array or None per weight), the masked-out weights are set back to 0 after every batch."""
    import keras

    keras.utils.set_random_seed(seed)
    optimizer = {"rmsprop": keras.optimizers.RMSprop(lr), "sgd": keras.optimizers.SGD(lr, momentum=0.9),
                 "adam": keras.optimizers.Adam(lr)}[opt]
    model.compile(optimizer=optimizer, loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smooth))
    rng = np.random.default_rng(seed)
    onehot = np.eye(10, dtype=np.float32)[y]
    callbacks = []
    if masks is not None:
        class KeepPruned(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                model.set_weights([w if mk is None else np.where(mk, w, 0.0).astype(w.dtype)
                                   for w, mk in zip(model.get_weights(), masks)])

        callbacks.append(KeepPruned())
    for _ in range(epochs):
        xe = augment(x, rng, augment_kind) if augment_kind else x
        model.fit(np.asarray(xe, np.float32)[..., None] / 255.0, onehot, epochs=1, batch_size=64, verbose=0,
                  callbacks=callbacks)


def save_keras(model, path: Path) -> None:
    from twinspect.dl.adapters.metadata import write_metadata

    tmp = path.with_name(path.stem + ".tmp.keras")
    model.save(str(tmp))
    tmp.replace(path)
    write_metadata(path, _meta("kbn", "NHWC") | {"preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NHWC"}})


def open_manifest(work: Path) -> tuple[list[dict], set[str], Callable[[dict], None], Path]:
    """A hold-out's model manifest in ``work`` (entries whose file is gone dropped), the names it holds, the function
    that adds an entry (its accuracy on the first 2,000 MNIST test images measured, ``split`` "test", the manifest
    rewritten) and the manifest's path."""
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.data import load_images

    work.mkdir(parents=True, exist_ok=True)
    man_path = work / "manifest.json"
    manifest: list[dict] = read_json(man_path) if man_path.exists() else []
    manifest = [m for m in manifest if Path(m["path"]).exists()]
    have = {m["name"] for m in manifest}
    xt, yt = load_images("mnist", "test", limit=2000)

    def add(entry: dict) -> None:
        entry["accuracy"] = float(np.mean(load_classifier(entry["path"]).predict(xt) == yt))
        entry["split"] = "test"
        manifest.append(entry)
        have.add(entry["name"])
        write_json(man_path, manifest)
        log(f"  {entry['name']}: acc {entry['accuracy']:.3f}")

    return manifest, have, add, man_path


def close_manifest(manifest: list[dict], man_path: Path) -> list[dict]:
    """The manifest sorted parents first (bases, then derived models, each in the order they were added), written to
    ``man_path``; returns it."""
    order = {m["name"]: i for i, m in enumerate(manifest)}
    manifest.sort(key=lambda m: (m["kind"] != "base", order[m["name"]]))
    write_json(man_path, manifest)
    return manifest


def build(work: Path) -> list[dict]:
    """Train/derive every test v2 model (cached in ``work``); returns the manifest (parents before children).

    Manifest entries: ``name, path, arch, seed, kind, parents, root, split, framework, trainer, accuracy``.
    """
    import keras
    import torch

    from twinspect.dl.data import load_images

    manifest, have, add, man_path = open_manifest(work)
    x_all, y_all = load_images("mnist", "train")
    assert y_all is not None
    x_all = x_all[..., 0]

    bases = [(a, s, "torch") for a, s in TORCH_BASES] + [(a, s, "keras") for a, s in KERAS_BASES]
    for n_b, (arch, seed, fw) in enumerate(bases):
        name = f"{arch}-s{seed}"
        sub = np.random.default_rng(9000 + n_b).permutation(len(x_all))[:TRAIN_SIZE]
        if fw == "torch":
            path = work / f"{name}.pt"
            trainer = f"torch {RECIPES[arch]['opt']}" + (" +aug" if RECIPES[arch]["augment"] else "") + \
                (" +ls" if RECIPES[arch]["smooth"] else "")
            if name not in have:
                torch.manual_seed(seed)
                m = torch_arch(arch)
                r = RECIPES[arch]
                fit_torch(m, arch, x_all[sub], y_all[sub], epochs=r["epochs"], lr=r["lr"], opt=r["opt"], seed=seed,
                          smooth=r["smooth"], augment_kind=r["augment"])
                save_torch(m, arch, path)
                add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [],
                     "root": name, "framework": "torch", "trainer": trainer})
            base_t = torch_arch(arch)
            base_t.load_state_dict(torch.jit.load(str(path)).state_dict())
            base_t.eval()
            logits = torch_logits(base_t, arch, x_all)
        else:
            path = work / f"{name}.keras"
            trainer = "keras functional rmsprop +ls"
            if name not in have:
                m = keras_bn(seed)
                keras_train(m, x_all[sub], y_all[sub], epochs=4, lr=1e-3, opt="rmsprop", seed=seed)
                save_keras(m, path)
                add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [],
                     "root": name, "framework": "keras", "trainer": trainer})
            base_k = keras.models.load_model(str(path))
            xs = x_all[..., None].astype(np.float32) / 255.0
            logits = np.concatenate([keras.ops.convert_to_numpy(base_k(xs[i : i + 1000], training=False))
                                     for i in range(0, len(xs), 1000)])
        for k_i, kind in enumerate(KINDS):
            if kind == "onnx-dyn8" and fw != "torch":
                continue
            cname = f"{name}~{kind}"
            student = kind.startswith("distill")
            c_fw = "torch" if student else fw
            suffix = ".onnx" if kind == "onnx-dyn8" else (".pt" if c_fw == "torch" else ".keras")
            cpath = work / (cname + suffix)
            if cname in have:
                continue
            rng = np.random.default_rng(11000 + 10 * n_b + k_i)
            rseed = int(rng.integers(1 << 30))
            c_arch = arch
            if kind in ("ft-rot", "ft-sub"):
                if kind == "ft-rot":
                    idx = rng.permutation(len(x_all))[:1500]
                    kw = {"epochs": 2, "opt": "adam", "augment_kind": "rot25"}
                else:
                    pool = np.flatnonzero(y_all >= 5)
                    idx = rng.permutation(pool)[:2000]
                    kw = {"epochs": 1, "opt": "sgd", "augment_kind": None}
                if fw == "torch":
                    m = torch_arch(arch)
                    m.load_state_dict(base_t.state_dict())
                    fit_torch(m, arch, x_all[idx], y_all[idx], lr=3e-4 if kw["opt"] == "adam" else 0.005, seed=rseed, **kw)
                    save_torch(m, arch, cpath)
                else:
                    m = keras.models.clone_model(base_k)
                    m.set_weights(base_k.get_weights())
                    keras_train(m, x_all[idx], y_all[idx], epochs=kw["epochs"], lr=3e-4 if kw["opt"] == "adam" else 0.005,
                                opt=kw["opt"], seed=rseed, augment_kind=kw["augment_kind"])
                    save_keras(m, cpath)
            elif student:
                c_arch = kind.split("-")[1]
                idx = rng.permutation(len(x_all))[:TRAIN_SIZE]
                torch.manual_seed(rseed)
                m = torch_arch(c_arch)
                if c_arch == "s2conv":
                    fit_torch(m, c_arch, x_all[idx], y_all[idx], epochs=5, lr=2e-3, opt="adam", seed=rseed,
                              soft=logits[idx], temperature=3.0, alpha=0.7)
                else:  # soft labels only, no ground truth
                    fit_torch(m, c_arch, x_all[idx], y_all[idx], epochs=5, lr=1e-3, opt="adam", seed=rseed,
                              soft=logits[idx], temperature=4.0, alpha=1.0)
                save_torch(m, c_arch, cpath)
            elif kind == "prune80":
                # pruned 80 %, then fine-tuned 1 epoch on 2,000 images to recover (pruning 80 % alone breaks
                # the BatchNorm nets: 9-19 % accuracy), as pruning is used in practice
                idx = rng.permutation(len(x_all))[:2000]
                if fw == "torch":
                    from torch.nn.utils import prune

                    m = torch_arch(arch)
                    m.load_state_dict(base_t.state_dict())
                    targets = [(mod, "weight") for mod in m.modules() if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d))]
                    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=0.8)
                    fit_torch(m, arch, x_all[idx], y_all[idx], epochs=1, lr=1e-3, opt="adam", seed=rseed)  # masks kept
                    for mod, pname in targets:
                        prune.remove(mod, pname)
                    save_torch(m.eval(), arch, cpath)
                else:
                    m = keras.models.clone_model(base_k)

                    def pruned(weights):  # kernels: the 80 % smallest magnitudes of each set to 0
                        return [np.where(np.abs(w) >= np.quantile(np.abs(w), 0.8), w, 0.0).astype(w.dtype) if w.ndim >= 2
                                else w for w in weights]

                    masks = [w != 0 if w.ndim >= 2 else None for w in pruned(base_k.get_weights())]
                    m.set_weights(pruned(base_k.get_weights()))
                    # 3 epochs: BatchNorm's moving statistics (momentum 0.99) need them to follow the pruned kernels
                    keras_train(m, x_all[idx], y_all[idx], epochs=3, lr=1e-3, opt="adam", seed=rseed, masks=masks)
                    save_keras(m, cpath)
            elif kind == "onnx-dyn8":
                export_onnx_dyn8(base_t, arch, cpath)
            add({"name": cname, "path": str(cpath), "arch": c_arch, "seed": seed, "kind": kind, "parents": [name],
                 "root": name, "framework": "onnx" if kind == "onnx-dyn8" else c_fw,
                 "trainer": "test v2 derivation code"})
    for arch, seed in SCRATCH_STUDENTS:
        name = f"{arch}-s{seed}"
        path = work / f"{name}.pt"
        if name not in have:
            torch.manual_seed(seed)
            m = torch_arch(arch)
            r = RECIPES[arch]
            sub = np.random.default_rng(9500 + seed).permutation(len(x_all))[:TRAIN_SIZE]
            fit_torch(m, arch, x_all[sub], y_all[sub], epochs=r["epochs"], lr=r["lr"], opt=r["opt"], seed=seed)
            save_torch(m, arch, path)
            add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [], "root": name,
                 "framework": "torch", "trainer": f"torch {r['opt']}"})
    return close_manifest(manifest, man_path)


# -- comparing, calibrating -------------------------------------------------------------------------------
def calibration_v2(cal_dir: Path) -> tuple[list[dict], list[dict]]:
    """The calibration v2 models (all 149 of the first hold-out) and their labelled pairs (formed inside
    each former split); pair indices ``a``/``b`` are positions in the model list."""
    manifest = read_json(cal_dir / "manifest.json")
    pos = {m["name"]: i for i, m in enumerate(manifest)}
    pairs = []
    for split in ("calibration", "test"):
        for p in h1.labelled_pairs([m for m in manifest if m["split"] == split]):
            p["a"], p["b"] = pos[p["name_a"]], pos[p["name_b"]]
            pairs.append(p)
    return manifest, pairs


def without_zoo(features: dict) -> dict:
    """A pair's features with the zoo-relative ones removed (the reuse score as it was before them)."""
    from twinspect.dl.modelclones.reuse import ZOO_FEATURES

    return {k: v for k, v in features.items() if k not in ZOO_FEATURES}


def evaluate(pairs: list[dict], scores: list[float | None], th: float) -> dict:
    """ROC-AUC, % independent flagged, % derived flagged, % flagged per derived kind (at ``th``)."""
    ys = [p["label"] for p in pairs]
    ok = [s is not None and s >= th for s in scores]
    kinds: dict[str, list[bool]] = defaultdict(list)
    for p, f in zip(pairs, ok):
        if p["label"]:
            kinds[p["kind"]].append(f)
    neg = [f for p, f in zip(pairs, ok) if not p["label"]]
    pos = [f for p, f in zip(pairs, ok) if p["label"]]
    return {"auc": mr.auc(ys, scores), "fp": float(np.mean(neg)), "fp_n": int(sum(neg)), "neg": len(neg),
            "derived": float(np.mean(pos)), "derived_n": int(sum(pos)), "pos": len(pos),
            "per_kind": {k: float(np.mean(v)) for k, v in sorted(kinds.items())}}


def lofo(pairs: list[dict], by_name: dict, zoo: bool) -> list[float | None]:
    """Leave-one-family-out scores: for every family, the reuse score is fitted on the pairs with neither model
    in it and scores the pairs with a model in it; a pair of two families gets the higher of its two scores."""
    from twinspect.dl.modelclones import fit_params, reuse_score

    rows = [p["features"] if zoo else without_zoo(p["features"]) for p in pairs]
    roots = [(by_name[p["name_a"]]["root"], by_name[p["name_b"]]["root"]) for p in pairs]
    got: dict[int, list[float]] = defaultdict(list)
    for fam in sorted({r for rr in roots for r in rr}):
        tr = [i for i, rr in enumerate(roots) if fam not in rr]
        te = [i for i, rr in enumerate(roots) if fam in rr]
        params = fit_params([rows[i] for i in tr], [pairs[i]["label"] for i in tr])
        for i in te:
            s = reuse_score(rows[i], params)
            if s is not None:
                got[i].append(s)
    return [max(got[i]) if got[i] else None for i in range(len(pairs))]


def calibrate(cal_dir: Path, fit_file: Path, ship: bool = False) -> dict:
    """Compare the calibration v2 pairs, choose and fit the reuse score on them, write the frozen fit file
    and, with ``ship``, the shipped calibration (``twinspect/dl/modelclones/reuse_calibration.json``; the
    recorded run shipped it, the shipped file was reverted after the test: see the notes)."""
    from twinspect.dl.modelclones import fit_params
    from twinspect.dl.modelclones.reuse import (
        CALIBRATION_FILE,
        DEFAULT_MAX_FPR,
        DEFAULT_THRESHOLD,
        FEATURE_SETS,
        load_params,
    )

    t_start = datetime.now(UTC).isoformat(timespec="seconds")
    models, pairs = calibration_v2(cal_dir)
    by_name = {m["name"]: m for m in models}
    log(f"calibration v2: {len(models)} models, {len(pairs)} pairs; comparing (zoo: all {len(models)}) ...")
    secs = h1.compare_split(models, pairs, ("weights", "representation", "io"))
    # the baselines' values from the first hold-out's comparisons of the same pairs (same inputs, seed)
    old = {(q["name_a"], q["name_b"]): q["values"] for f in ("calibration_pairs.json", "test_pairs.json")
           for q in read_json(cal_dir / f)}
    for p in pairs:
        for k in ("modeldiff", "deepjudge_robd", "deepjudge_jsd"):
            p["values"][k] = old[(p["name_a"], p["name_b"])].get(k)
    cal_file = CACHE / "calibration_v2_pairs.json"
    cal_file.parent.mkdir(parents=True, exist_ok=True)
    write_json(cal_file, pairs, indent=None)
    th = DEFAULT_THRESHOLD
    # leave-one-family-out inside calibration v2: the score as it was (no zoo features) and with them
    choice = {}
    for name, zoo in (("without zoo features", False), ("with zoo features", True)):
        scores = lofo(pairs, by_name, zoo)
        choice[name] = {"all": evaluate(pairs, scores, th),
                        "different architectures": evaluate(
                            [p for p, s in zip(pairs, scores) if p["features"].get("weights") is None],
                            [s for p, s in zip(pairs, scores) if p["features"].get("weights") is None], th)}
        log(f"LOFO {name}: {json.dumps(choice[name]['all'])}")
    params = fit_params([p["features"] for p in pairs], [p["label"] for p in pairs])
    params_nozoo = fit_params([without_zoo(p["features"]) for p in pairs], [p["label"] for p in pairs])
    params_nozoo = {k: v for k, v in params_nozoo.items() if k in ("full", "no_weights", "io")}
    previous_shipped = load_params(CALIBRATION_FILE)
    written = datetime.now(UTC).isoformat(timespec="seconds")
    data = {
        "provenance": _provenance.info(__file__),
        "params": params,
        "params_sha256": h1.params_sha256(params),
        "params_without_zoo": params_nozoo,
        "params_without_zoo_sha256": h1.params_sha256(params_nozoo),
        "previous_shipped_params": previous_shipped,
        "features": {k: list(v) for k, v in FEATURE_SETS.items()},
        "fit": f"twinspect.dl.modelclones.fit_params (balanced logistic regression per feature set, intercept capped at "
               f"{DEFAULT_MAX_FPR:.0%} calibration false positives); 'params_without_zoo': the same fit without the "
               "zoo-relative features (ablation, frozen with the rest)",
        "fitted_on": "calibration v2: both splits of models_reuse_holdout.py (149 models, 29 families)",
        "choice_lofo": choice,
        "calibration_models": len(models),
        "calibration_pairs": len(pairs),
        "calibration_derived": sum(p["label"] for p in pairs),
        "calibration_pairs_sha256": sha256_file(cal_file),
        "compare_s": round(secs, 1),
        "started_utc": t_start,
        "written_utc": written,
        "test_pairs_compared_before": 0,
    }
    write_json(fit_file, data)
    if not ship:
        log(f"frozen fit written: {fit_file} sha256 {sha256_file(fit_file)} (params {data['params_sha256'][:16]}) at {written}")
        return data
    write_json(CALIBRATION_FILE, {
        "params": params,
        "fitted_on": "benchmarks/models_reuse_holdout2.py calibrate: calibration v2 (both splits of models_reuse_holdout.py, "
                     "149 MNIST models, 29 families: twinspect zoo, plain torch loop, Keras; MLPs, CNNs, students)",
        "pairs": len(pairs),
        "features": {k: list(v) for k, v in FEATURE_SETS.items()},
        "params_sha256": data["params_sha256"],
    })
    log(f"frozen fit written: {fit_file} sha256 {sha256_file(fit_file)} (params {data['params_sha256'][:16]}) at {written}; "
        f"shipped calibration updated")
    return data


# -- the test run ---------------------------------------------------------------------------------------
def _describe(m: dict) -> str:
    return f"{m['arch']} ({m['framework']}, {m['trainer']}, {m['kind']})"


def test(work: Path, cal_dir: Path, fit_file: Path, out: Path) -> None:
    """Load the frozen fit, compare the test v2 pairs once, score and write the report."""
    from twinspect.dl.modelclones import reuse_score
    from twinspect.dl.modelclones.measures import BY_NAME, REGISTRY
    from twinspect.dl.modelclones.reuse import CALIBRATION_FILE, DEFAULT_THRESHOLD, load_params

    if not fit_file.exists():
        raise SystemExit(f"error: {fit_file}: no frozen fit; run the 'calibrate' step first")
    fit_sha = sha256_file(fit_file)
    fit = read_json(fit_file)
    params = {k: [float(v) for v in vs] for k, vs in fit["params"].items()}
    nozoo = {k: [float(v) for v in vs] for k, vs in fit["params_without_zoo"].items()}
    if h1.params_sha256(params) != fit["params_sha256"] or h1.params_sha256(nozoo) != fit["params_without_zoo_sha256"]:
        raise SystemExit(f"error: {fit_file}: coefficients do not match their recorded SHA-256")
    # the first (and only) test run, at 5d3d228, had the frozen fit as the shipped calibration; it was reverted
    # to the previous coefficients afterwards (models_reuse_holdout2_notes.md), so a re-run records which it is
    shipped_is_frozen = load_params(CALIBRATION_FILE) == params
    v1_fit = read_json(h1.FIT_FILE)
    v1 = {k: [float(v) for v in vs] for k, vs in v1_fit["params"].items()}
    prev = {k: [float(v) for v in vs] for k, vs in fit["previous_shipped_params"].items()}
    cal_file = CACHE / "calibration_v2_pairs.json"
    if sha256_file(cal_file) != fit["calibration_pairs_sha256"]:
        raise SystemExit("error: calibration_v2_pairs.json changed since the fit was frozen")
    calib = read_json(cal_file)
    test_start = datetime.now(UTC).isoformat(timespec="seconds")
    log(f"test run {test_start}: frozen fit {fit_file.name} sha256 {fit_sha}, written {fit['written_utc']}")

    manifest = read_json(work / "manifest.json")
    by_name = {m["name"]: m for m in manifest}
    pairs = h1.labelled_pairs(manifest)
    log(f"test v2: {len(manifest)} models, {len(pairs)} pairs; comparing ...")
    secs = h1.compare_split(manifest, pairs)
    th = DEFAULT_THRESHOLD
    fits = {"frozen v2 fit (shipped)": params, "v2 fit without zoo features": nozoo,
            "v1 hold-out fit (models_reuse_holdout_fit.json)": v1, "previously shipped (models_reuse.py)": prev}
    for p in calib:
        p["reuse_calibrated"] = reuse_score(p["features"], params)
    for p in pairs:
        p["scores"] = {k: reuse_score(p["features"] if "without" not in k else without_zoo(p["features"]), v)
                       for k, v in fits.items()}
        p["reuse_calibrated"] = p["scores"]["frozen v2 fit (shipped)"]
    write_json(work / "test_pairs.json", pairs, indent=None)

    der = [p for p in pairs if p["label"] == 1]
    ind = [p for p in pairs if p["label"] == 0]
    ev = {k: evaluate(pairs, [p["scores"][k] for p in pairs], th) for k in fits}
    main_ev = ev["frozen v2 fit (shipped)"]
    n_dist = sum(p["kind"].startswith("distill") for p in der)
    n_ft = sum(p["kind"].startswith("ft") for p in der)
    fam_test = len({m["root"] for m in manifest})
    fam_cal = len({m["root"] for m in read_json(cal_dir / "manifest.json")})

    def met(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    pk = main_ev["per_kind"]
    targets = [
        ["ROC-AUC ≥ 0.99", f"{main_ev['auc']:.3f}", met(main_ev["auc"] >= 0.99)],
        ["≥ 95 % of derived pairs flagged", f"{100 * main_ev['derived']:.1f} % ({main_ev['derived_n']}/{main_ev['pos']})",
         met(main_ev["derived"] >= 0.95)],
        ["every derived kind ≥ 90 % (distilled included)", ", ".join(f"{k} {100 * v:.0f} %" for k, v in pk.items()),
         met(min(pk.values()) >= 0.90)],
        ["≤ 2 % of independent pairs flagged", f"{100 * main_ev['fp']:.2f} % ({main_ev['fp_n']}/{main_ev['neg']})",
         met(main_ev["fp"] <= 0.02)],
        ["≥ 20 distilled and ≥ 20 fine-tuned test pairs", f"{n_dist} distilled, {n_ft} fine-tuned", met(n_dist >= 20 and n_ft >= 20)],
        ["≥ 10 independent families per split", f"calibration v2 {fam_cal}, test v2 {fam_test}", met(min(fam_cal, fam_test) >= 10)],
    ]
    # ROC-AUC of every measure on the test pairs
    names = [m.name for m in REGISTRY if m.level in ("weights", "representation", "io", "baselines")
             and any(p["values"].get(m.name) is not None for p in pairs)]
    auc_rows = []
    for name in names:
        sc = [None if p["values"].get(name) is None else (p["values"][name] if BY_NAME[name].higher_is_similar
                                                            else -p["values"][name]) for p in pairs]
        auc_rows.append([name, mr.auc([p["label"] for p in pairs], sc), 100 * sum(v is not None for v in sc) / len(pairs)])
    for k in fits:
        auc_rows.append([f"reuse: {k}", ev[k]["auc"], 100.0])
    kinds = sorted(pk)
    fit_rows = [[k, ev[k]["auc"], 100 * ev[k]["derived"], *[100 * ev[k]["per_kind"][q] for q in kinds], 100 * ev[k]["fp"]]
                for k in fits]
    det_rows = []
    for kind in sorted({p["kind"] for p in pairs}):
        ps = [p for p in pairs if p["kind"] == kind]
        sc = [p["reuse_calibrated"] for p in ps]
        det_rows.append([kind, ps[0]["label"], len(ps), 100 * float(np.mean([s >= th for s in sc])), float(np.median(sc)),
                         float(np.min(sc)), float(np.max(sc))])
    base_md, base_json, sample_rows = mr.baselines_side_by_side(calib, pairs, th)

    def pair_row(p):
        f = p["features"]
        return [p["name_a"], _describe(by_name[p["name_a"]]), p["name_b"], _describe(by_name[p["name_b"]]), p["kind"],
                p["reuse_calibrated"], p["scores"]["v2 fit without zoo features"], f.get("weights"), f.get("cka"),
                f.get("io_agreement"), f.get("io_logprob"), f.get("margin_one"), f.get("margin_both")]

    hdr = ["a", "a is", "b", "b is", "kind", "reuse (frozen v2)", "reuse (v2, no zoo)", "weights cos", "CKA", "top-1 agr.",
           "logprob cos", "margin one", "margin both"]
    top_ind = sorted(ind, key=lambda p: -p["reuse_calibrated"])[:20]
    low_der = sorted(der, key=lambda p: p["reuse_calibrated"])[:15]
    lo = fit["choice_lofo"]
    lofo_rows = [[k, v["all"]["auc"], 100 * v["all"]["fp"], 100 * v["all"]["derived"],
                  100 * v["different architectures"]["derived"], 100 * v["different architectures"]["fp"],
                  ", ".join(f"{q} {100 * r:.0f}" for q, r in v["all"]["per_kind"].items())] for k, v in lo.items()]
    acc_rows = [[m["name"], m["kind"], m["arch"], m["framework"], m["trainer"], 100 * m["accuracy"]] for m in manifest]
    md = [
        "# Reuse score on a second, fresh hold-out (`benchmarks/models_reuse_holdout2.py`, issue 18 item 5, protocol v2)", "",
        f"Calibration v2: the {fit['calibration_models']} models of the first hold-out (both of its splits; its test split had "
        f"been looked at) — {fit['calibration_pairs']} pairs, {fit['calibration_derived']} derived. Test v2: {len(manifest)} "
        f"new MNIST models ({fam_test} families) of kinds calibration v2 has none of — architectures (wide MLP with dropout, "
        "average-pooling CNN, depthwise-separable CNN, tiny ResNet, Keras functional BatchNorm CNN), trainers (AdamW, SGD with "
        "label smoothing, rotation augmentation, RMSprop with label smoothing), derivations (fine-tuning on rotated images and "
        "on digits 5-9 only, 80 % pruning with recovery fine-tuning, ONNX Runtime dynamic int8) and students (`s2conv`, "
        f"`s3mlp`, plus scratch models of both) — {len(pairs)} pairs ({len(der)} derived: {n_ft} fine-tuned, {n_dist} distilled; "
        f"{len(ind)} independent). Comparison inputs: {CONFIG['n_inputs']} MNIST test images ({CONFIG['cka_inputs']} for CKA); "
        f"the zoo of the zoo-relative features is all {len(manifest)} test models. Test comparison {secs:.0f} s. The module "
        "docstring lists every family and recipe.", "",
        "## Order of the run and the frozen fit", "",
        f"1. `calibrate` compared the calibration v2 pairs, chose the features by leave-one-family-out inside calibration v2 "
        f"(table below), fitted the reuse score on all calibration v2 pairs and wrote the coefficients to "
        f"`benchmarks/results/{fit_file.name}` and to the shipped `twinspect/dl/modelclones/reuse_calibration.json` at "
        f"{fit['written_utc']} (UTC), before any test v2 pair was compared. SHA-256 of the fit file: `{fit_sha}`; of its "
        f"coefficients (canonical JSON): `{fit['params_sha256']}`.",
        f"2. This test run started at {test_start} (UTC), checked both hashes (the shipped calibration "
        f"{'was' if shipped_is_frozen else 'was NOT'} the frozen fit), then compared the test pairs once.", "",
        "## Targets (issue 18), frozen v2 fit (shipped), test v2, threshold 0.5", "",
        markdown_table(targets, ["target", "result", ""]), "",
        "## How the features were chosen (calibration v2 only, leave-one-family-out)", "",
        "For each of the 29 families the score was fitted on the pairs with neither model in it and scored the pairs with "
        "one in it (a pair of two families: the higher of its two scores). *Zoo features*: how much nearer the pair's "
        "log-probability cosine is than each model's nearest third model (`margin_one`: the nearer of the two, `margin_both`: "
        "the farther; see `twinspect.dl.modelclones.reuse.zoo_margins`).", "",
        markdown_table(lofo_rows, ["score", "AUC", "FP %", "derived %", "derived % (diff. arch.)", "FP % (diff. arch.)",
                                   "per derived kind %"], floatfmt=".3f"), "",
        "## The frozen fits on test v2 (threshold 0.5)", "",
        "The shipped score is the first row; the others are frozen comparators (the ablation without the zoo features, "
        "fitted on calibration v2 at the same time; the first hold-out's frozen fit; the coefficients shipped before).", "",
        markdown_table(fit_rows, ["fit", "AUC", "derived %", *kinds, "FP %"], floatfmt=".3f"), "",
        "## Detection per pair kind (frozen v2 fit)", "",
        markdown_table(det_rows, ["pair kind", "label", "pairs", "flagged %", "median reuse", "min", "max"], floatfmt=".3f"), "",
        "## ROC-AUC of every measure on test v2", "",
        markdown_table(auc_rows, ["measure", "AUC test v2", "coverage %"], floatfmt=".3f"), "",
        *base_md,
        "## The 20 highest-scoring independent test pairs", "",
        markdown_table([pair_row(p) for p in top_ind], hdr, floatfmt=".3f"), "",
        "## The 15 lowest-scoring derived test pairs", "",
        markdown_table([pair_row(p) for p in low_der], hdr, floatfmt=".3f"), "",
        "## Test v2 models", "",
        markdown_table(acc_rows, ["model", "kind", "arch", "framework", "trainer", "test acc % (2,000 imgs)"], floatfmt=".1f"), "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(_provenance.md_header(__file__) + "\n".join(md), encoding="utf-8")

    def small(p):
        return {"name_a": p["name_a"], "name_b": p["name_b"], "label": p["label"], "kind": p["kind"],
                "features": {k: (None if v is None else round(v, 5)) for k, v in p["features"].items()},
                "scores": {k: (None if v is None else round(v, 5)) for k, v in p["scores"].items()}}

    write_json(out.with_suffix(".json"), {
        "provenance": _provenance.info(__file__),
        "order": {"fit_written_utc": fit["written_utc"], "test_started_utc": test_start, "fit_file_sha256": fit_sha,
                  "params_sha256": fit["params_sha256"], "shipped_calibration_is_the_frozen_fit": shipped_is_frozen},
        "threshold": th, "targets": targets, "fits": ev, "auc": {r[0]: r[1] for r in auc_rows},
        "baselines": base_json, "baseline_sample_pairs": sample_rows,
        "top_independent": [small(p) for p in top_ind], "lowest_derived": [small(p) for p in low_der],
        "models": [{k: m[k] for k in ("name", "kind", "arch", "framework", "trainer", "seed", "parents", "accuracy")}
                   for m in manifest],
        "pairs_note": f"every derived test pair; all {len(pairs)} test pairs in <work-dir>/test_pairs.json",
        "derived_pairs": [small(p) for p in der],
    }, indent=1)
    print("\n".join(md))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("build", "calibrate", "test", "all"))
    ap.add_argument("--work-dir", default=str(CACHE))
    ap.add_argument("--cal-dir", default=str(CAL_CACHE))
    ap.add_argument("--fit-file", default=str(FIT_FILE))
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--ship", action="store_true",
                    help="calibrate: also write the fit to the shipped reuse_calibration.json (the recorded run did)")
    args = ap.parse_args()

    from twinspect.dl.adapters.torch import set_torch_threads

    set_torch_threads(1)
    work, fit_file = Path(args.work_dir), Path(args.fit_file)
    if args.step in ("build", "all"):
        t = time.perf_counter()
        build(work)
        log(f"build: {time.perf_counter() - t:.0f} s")
    if args.step in ("calibrate", "all"):
        if args.step == "all" and fit_file.exists():
            raise SystemExit(f"error: {fit_file} exists: the fit is frozen; run 'test' alone, or move it away to refit")
        calibrate(Path(args.cal_dir), fit_file, ship=args.ship)
    if args.step in ("test", "all"):
        test(work, Path(args.cal_dir), fit_file, Path(args.out))


if __name__ == "__main__":
    main()
