"""Clean hold-out of the reuse score (issue 18, item 5): whole families *and whole kinds* held out, fit frozen first.

``benchmarks/models_reuse.py`` splits one zoo by seed: the calibration and test families come from the
same code, the same architectures and the same derivation recipes, and the test split has 4 pairs of
each derived kind. Here the two splits share nothing but the task (MNIST):

* **calibration split** — built with twinspect's own code only (:func:`twinspect.dl.train.train_model`,
  :mod:`twinspect.dl.compress`): 12 families, the zoo's LeNet-1 / LeNet-4 / LeNet-5 / plain CNN (width
  0.5) × seeds 10, 11, 12, each with 5 derivatives: fine-tuned (Adam, 1,000 images, 1 epoch), pruned
  50 % (per-layer magnitude), int8 (ONNX Runtime static QDQ), weights + 30 % Gaussian noise, and
  distilled (twinspect's ``distill``, T = 4, α = 0.9) into another *zoo* architecture (LeNet-1 → LeNet-5,
  LeNet-4 → LeNet-1, LeNet-5 → LeNet-1, CNN → LeNet-4).
* **test split** — built by code written in this file and nowhere else in the project, in two
  frameworks: a plain PyTorch loop (SGD with Nesterov momentum, its own preprocessing with the
  classic MNIST mean/std normalisation for the conv nets) and Keras 3 (``model.fit``, saved as
  ``.keras``). 17 families: torch MLP 784-256-128-10 (seeds 0-2), torch conv net with BatchNorm
  (``tconv``, 0-2), a LeNet-5 variant with ReLU and average pooling (``lenet5v``, 0-1), Keras CNN
  (``kcnn``, 0-2), Keras MLP 784-200-10 (``kmlp``, 0-1), and four models trained from scratch with the
  two *student* architectures (``smlp`` 784-100-10 and ``scnn``, two stride-2 convolutions, seeds 50-51):
  the hardest negatives, small independent models of the distilled students' architecture. Every one
  of the 13 non-student bases has 4 derivatives made by this file's code: fine-tuned with SGD on a seeded
  random 2,000 of the 10,000 training images (``ft-sgd``), fine-tuned with Adam on randomly shifted images for 2 epochs (``ft-shift``),
  distilled on soft labels alone (T = 2, no ground truth) into ``smlp`` (``distill-smlp``) and on soft and
  hard labels (T = 5, α = 0.5, SGD) into ``scnn`` (``distill-scnn``) — students of architectures that no
  calibration student has, by a distillation loop the calibration never saw; the 8 torch bases also get
  ``torch.nn.utils.prune`` global L1 pruning of 40 % (``prune-global40``).

Pairs are labelled inside each split as in ``models_reuse.py``: *derived* when one model is an
ancestor of the other, *independent* when their families differ; siblings are left out; pairs
across the splits are never formed.

**Frozen fit.** ``calibrate`` compares the calibration pairs, fits the reuse score's coefficients
(:func:`twinspect.dl.modelclones.fit_params`) on them and writes them to
``benchmarks/results/models_reuse_holdout_fit.json`` with the SHA-256 of the coefficients; only then
does ``test`` run, loading that file (it refuses to start without it, and records the file's SHA-256
and write time next to its own start time). The coefficients shipped with twinspect
(``reuse_calibration.json``, fitted by ``models_reuse.py`` on other families, also before this test
existed) are scored on the same test pairs as a second frozen fit. ModelDiff and DeepJudge (the
``baselines`` level) run on the same pairs with the rules of ``models_reuse.py`` (thresholds from the
calibration split's independent pairs).

Run (models are cached in ``~/.cache/twinspect-bench/reuse-holdout``, never in the repository)::

    nice -n 19 .venv/bin/python benchmarks/models_reuse_holdout.py all     # = build, calibrate, test

Results: ``benchmarks/results/models_reuse_holdout.{md,json}`` and the frozen fit
``benchmarks/results/models_reuse_holdout_fit.json``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import models_reuse as mr  # noqa: E402  (sibling benchmark: int8 export, noise, AUC, the baselines' rules)

from twinspect._io import read_json, write_json  # noqa: E402
from twinspect.reports.table import markdown_table  # noqa: E402

CACHE = Path.home() / ".cache" / "twinspect-bench" / "reuse-holdout"
RESULTS = ROOT / "benchmarks" / "results"
FIT_FILE = RESULTS / "models_reuse_holdout_fit.json"
OUT = RESULTS / "models_reuse_holdout"

# calibration split: twinspect's own zoo and code
CAL_BASES = [(arch, seed) for seed in (10, 11, 12) for arch in ("lenet1", "lenet4", "lenet5", "cnn")]
CAL_KINDS = ("finetune", "prune50", "int8", "noise30", "distill")
CAL_STUDENT = mr.STUDENT
CAL_WIDTH = mr.WIDTH

# test split: this file's own code, PyTorch and Keras
TEST_TORCH = [("mlp", 0), ("mlp", 1), ("mlp", 2), ("tconv", 0), ("tconv", 1), ("tconv", 2), ("lenet5v", 0), ("lenet5v", 1)]
TEST_KERAS = [("kcnn", 0), ("kcnn", 1), ("kcnn", 2), ("kmlp", 0), ("kmlp", 1)]
TEST_SCRATCH_STUDENTS = [("smlp", 50), ("smlp", 51), ("scnn", 50), ("scnn", 51)]
TEST_KINDS = ("ft-sgd", "ft-shift", "distill-smlp", "distill-scnn", "prune-global40")
EPOCHS = 2
#: the test split's from-scratch torch training (SGD, Nesterov momentum 0.9); lr 0.05 diverged for tconv
SCRATCH_SGD = {a: {"epochs": 4 if a == "tconv" else 8, "lr": 0.01 if a == "tconv" else 0.02, "opt": "sgd"}
               for a in ("mlp", "smlp", "tconv", "lenet5v", "scnn")}
TRAIN_SIZE = 6000
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081

CONFIG = {"n_inputs": 500, "cka_inputs": 256, "seed": 0}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def params_sha256(params: dict) -> str:
    """SHA-256 of the coefficients as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# -- the test split's independent code: architectures, a plain torch loop, Keras ------------------------
def torch_arch(name: str):
    """A test-split PyTorch architecture (written here, not in :mod:`twinspect.dl.architectures`)."""
    from torch import nn

    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "smlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, 10))
    if name == "tconv":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    if name == "lenet5v":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                             nn.AvgPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                             nn.Linear(84, 10))
    if name == "scnn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(),
                             nn.Flatten(), nn.Linear(16 * 6 * 6, 10))
    raise ValueError(name)


def torch_norm(arch: str) -> tuple[float, float]:
    """(mean, std) after x/255 of a test-split torch model: the conv nets use MNIST's, the MLPs none."""
    return (MNIST_MEAN, MNIST_STD) if arch in ("tconv", "lenet5v", "scnn") else (0.0, 1.0)


def torch_input(x: np.ndarray, arch: str):
    """uint8 (N, 28, 28) → float32 tensor (N, 1, 28, 28) in the model's own preprocessing."""
    import torch

    mean, std = torch_norm(arch)
    return torch.from_numpy(((x.astype(np.float32) / 255.0 - mean) / std)[:, None])


def shifted(x: np.ndarray, rng: np.random.Generator, pix: int = 2) -> np.ndarray:
    """Each image rolled by a random (dy, dx) in [-pix, pix] (zero-filled borders: MNIST's are 0)."""
    out = np.zeros_like(x)
    for i, img in enumerate(x):
        dy, dx = rng.integers(-pix, pix + 1, size=2)
        out[i] = np.roll(np.roll(img, dy, axis=0), dx, axis=1)
    return out


def own_torch_fit(model, arch: str, x: np.ndarray, y: np.ndarray, *, epochs: int, lr: float, opt: str, seed: int,
                  soft: np.ndarray | None = None, temperature: float = 1.0, alpha: float = 1.0, shift: bool = False,
                  batch: int = 128):
    """The test split's trainer: a plain PyTorch loop (cross-entropy, or Hinton KD on ``soft`` logits)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optim = (torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True) if opt == "sgd"
             else torch.optim.Adam(params, lr=lr))
    yt = torch.from_numpy(y.astype(np.int64))
    st = None if soft is None else torch.from_numpy(soft.astype(np.float32))
    model.train()
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for s in range(0, len(x), batch):
            idx = order[s : s + batch]
            xb = shifted(x[idx], rng) if shift else x[idx]
            out = model(torch_input(xb, arch))
            if st is None:
                loss = F.cross_entropy(out, yt[idx])
            else:
                t = temperature
                kd = F.kl_div(F.log_softmax(out / t, 1), F.softmax(st[idx] / t, 1), reduction="batchmean") * t * t
                loss = alpha * kd + (1 - alpha) * F.cross_entropy(out, yt[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
    return model.eval()


def torch_logits(model, arch: str, x: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.concatenate([model(torch_input(x[i : i + 1000], arch)).numpy() for i in range(0, len(x), 1000)])


def save_torch_plain(model, arch: str, path: Path, meta: dict) -> None:
    """``torch.jit.trace`` + ``torch.jit.save`` as a user would, metadata in the ``.json`` sidecar."""
    import torch

    from twinspect.dl.adapters.metadata import write_metadata

    mean, std = torch_norm(arch)
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), torch.zeros(2, 1, 28, 28))
    tmp = path.with_name(path.name + ".tmp")
    torch.jit.save(traced, str(tmp))
    tmp.replace(path)
    write_metadata(path, dict(meta, input_shape=[28, 28, 1], num_classes=10, output="logits", dataset="mnist",
                              preprocess={"scale": 255.0, "mean": [mean] if std != 1.0 else [],
                                          "std": [std] if std != 1.0 else [], "layout": "NCHW"}))


def keras_arch(name: str, seed: int):
    """A test-split Keras 3 architecture (logits output), initialised from ``seed``."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    if name == "kcnn":
        layers = [L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(), L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(),
                  L.Flatten(), L.Dense(64, activation="relu"), L.Dense(10)]
    elif name == "kmlp":
        layers = [L.Flatten(), L.Dense(200, activation="relu"), L.Dense(10)]
    else:
        raise ValueError(name)
    return keras.Sequential([keras.Input((28, 28, 1)), *layers], name=name)


def keras_fit(model, x: np.ndarray, y: np.ndarray, *, epochs: int, lr: float, opt: str, seed: int, shift: bool = False):
    """The test split's Keras trainer: ``compile`` + ``fit`` (sparse CE on logits)."""
    import keras

    keras.utils.set_random_seed(seed)
    optimizer = keras.optimizers.SGD(lr, momentum=0.9) if opt == "sgd" else keras.optimizers.Adam(lr)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        xe = shifted(x, rng) if shift else x
        model.fit(xe[..., None].astype(np.float32) / 255.0, y.astype(np.int64), epochs=1, batch_size=64, verbose=0)
    return model


def keras_logits(model, x: np.ndarray) -> np.ndarray:
    import keras

    xs = x[..., None].astype(np.float32) / 255.0
    return np.concatenate([keras.ops.convert_to_numpy(model(xs[i : i + 1000], training=False)) for i in range(0, len(x), 1000)])


def save_keras(model, path: Path, meta: dict) -> None:
    from twinspect.dl.adapters.metadata import write_metadata

    tmp = path.with_name(path.stem + ".tmp.keras")
    model.save(str(tmp))
    tmp.replace(path)
    write_metadata(path, dict(meta, input_shape=[28, 28, 1], num_classes=10, output="logits", dataset="mnist",
                              preprocess={"scale": 255.0, "mean": [], "std": [], "layout": "NHWC"}))


# -- building -------------------------------------------------------------------------------------------
def build(work: Path) -> list[dict]:
    """Train/derive every model of both splits (cached in ``work``); returns the manifest.

    Manifest entries: ``name, path, arch, seed, kind, parents, root, split, framework, trainer, accuracy``.
    Parents come before their children (the baselines take the first model of a pair as the victim).
    """
    import torch

    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.architectures import build_model, load_zoo_module
    from twinspect.dl.compress import prune_magnitude
    from twinspect.dl.data import load_images
    from twinspect.dl.train import FitConfig, default_preprocess, fit, train_model

    work.mkdir(parents=True, exist_ok=True)
    man_path = work / "manifest.json"
    manifest: list[dict] = read_json(man_path) if man_path.exists() else []
    have = {m["name"] for m in manifest if Path(m["path"]).exists()}
    manifest = [m for m in manifest if m["name"] in have]
    x_all, y_all = load_images("mnist", "train")
    assert y_all is not None
    xt, yt = load_images("mnist", "test", limit=2000)

    def add(entry: dict) -> None:
        entry["accuracy"] = float(np.mean(load_classifier(entry["path"]).predict(xt) == yt))
        manifest.append(entry)
        have.add(entry["name"])
        write_json(man_path, manifest)
        log(f"  {entry['name']}: acc {entry['accuracy']:.3f}")

    # calibration split: twinspect's own code
    pre = default_preprocess("mnist", 1)
    ft_idx = np.random.default_rng(123).permutation(len(x_all))[:1000]
    for arch, seed in CAL_BASES:
        name = f"{arch}-s{seed}"
        path = work / f"{name}.pt"
        common = {"split": "calibration", "framework": "torch", "trainer": "twinspect"}
        if name not in have:
            res = train_model(arch, "mnist", epochs=EPOCHS, seed=seed, train_size=TRAIN_SIZE, width=CAL_WIDTH.get(arch, 1.0))
            mr.save_torch(res.module, path, res.meta)
            add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [], "root": name, **common})
        module, meta = load_zoo_module(path)
        module = module.eval()
        for kind in CAL_KINDS:
            cname = f"{name}~{kind}"
            cpath = work / (cname + (".onnx" if kind == "int8" else ".pt"))
            if cname in have:
                continue
            cmeta = dict(meta, compression={"method": kind, "parent": name})
            rseed = 100 + seed
            c_arch = arch
            if kind == "finetune":
                m = copy.deepcopy(module)
                fit(m, x_all[ft_idx], y_all[ft_idx], pre,
                    FitConfig(epochs=1, batch_size=64, lr=1e-3, optimizer="adam", weight_decay=1e-4, seed=rseed), quiet=True)
                mr.save_torch(m.eval(), cpath, cmeta)
            elif kind == "prune50":
                mr.save_torch(prune_magnitude(module, 0.5), cpath, cmeta)
            elif kind == "int8":
                mr.export_int8(module, cpath, cmeta, x_all[:64])
            elif kind == "noise30":
                mr.save_torch(mr.noisy_copy(module, 0.3, rseed), cpath, cmeta)
            elif kind == "distill":
                c_arch = CAL_STUDENT[arch]
                torch.manual_seed(1000 + seed * 10 + CAL_BASES.index((arch, seed)))
                student = build_model(c_arch, (28, 28, 1), 10)
                mr.distill_student(module, student, x_all, y_all, pre, seed=rseed, train_size=TRAIN_SIZE, epochs=EPOCHS)
                mr.save_torch(student, cpath, dict(cmeta, arch=c_arch, width=1.0))
            add({"name": cname, "path": str(cpath), "arch": c_arch, "seed": seed, "kind": kind, "parents": [name],
                 "root": name, **common})

    # test split: this file's code (torch loop, Keras)
    x_all = x_all[..., 0]  # (N, 28, 28): the test split's own code takes plain images

    def base_subset(tag: int) -> np.ndarray:
        return np.random.default_rng(5000 + tag).permutation(len(x_all))[:TRAIN_SIZE]

    teachers: dict[str, np.ndarray] = {}  # base name -> its logits on the whole training file
    test_bases = [(a, s, "torch") for a, s in TEST_TORCH] + [(a, s, "keras") for a, s in TEST_KERAS]
    for n_b, (arch, seed, fw) in enumerate(test_bases):
        name = f"{arch}-s{seed}"
        common = {"split": "test", "framework": fw, "trainer": "own torch loop" if fw == "torch" else "keras fit"}
        sub = base_subset(n_b)
        if fw == "torch":
            path = work / f"{name}.pt"
            if name not in have:
                torch.manual_seed(seed)
                m = torch_arch(arch)
                own_torch_fit(m, arch, x_all[sub], y_all[sub], seed=seed, **SCRATCH_SGD[arch])
                save_torch_plain(m, arch, path, {"arch": arch})
                add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [], "root": name, **common})
            base_t = torch.jit.load(str(path)).eval()
            teachers[name] = torch_logits(base_t, arch, x_all)
        else:
            import keras

            path = work / f"{name}.keras"
            if name not in have:
                m = keras_arch(arch, seed)
                keras_fit(m, x_all[sub], y_all[sub], epochs=EPOCHS, lr=1e-3, opt="adam", seed=seed)
                save_keras(m, path, {"arch": arch})
                add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [], "root": name, **common})
            base_k = keras.models.load_model(str(path))
            teachers[name] = keras_logits(base_k, x_all)
        for kind in TEST_KINDS:
            if kind == "prune-global40" and fw != "torch":
                continue
            cname = f"{name}~{kind}"
            student = kind.startswith("distill")
            c_fw = "torch" if student else fw
            cpath = work / (cname + (".pt" if c_fw == "torch" else ".keras"))
            if cname in have:
                continue
            rng = np.random.default_rng(7000 + 10 * n_b + TEST_KINDS.index(kind))
            rseed = int(rng.integers(1 << 30))
            c_arch = arch
            if kind in ("ft-sgd", "ft-shift"):
                idx = rng.permutation(len(x_all))[:2000]
                sgd = kind == "ft-sgd"
                if fw == "torch":
                    m = torch_arch(arch)
                    m.load_state_dict(torch.jit.load(str(path)).state_dict())
                    own_torch_fit(m, arch, x_all[idx], y_all[idx], epochs=1 if sgd else 2, lr=0.01 if sgd else 3e-4,
                                  opt="sgd" if sgd else "adam", seed=rseed, shift=not sgd)
                    save_torch_plain(m, arch, cpath, {"arch": arch})
                else:
                    import keras

                    m = keras.models.clone_model(base_k)
                    m.set_weights(base_k.get_weights())
                    keras_fit(m, x_all[idx], y_all[idx], epochs=1 if sgd else 2, lr=0.01 if sgd else 3e-4,
                              opt="sgd" if sgd else "adam", seed=rseed, shift=not sgd)
                    save_keras(m, cpath, {"arch": arch})
            elif student:
                c_arch = kind.split("-")[1]
                idx = rng.permutation(len(x_all))[:TRAIN_SIZE]
                torch.manual_seed(rseed)
                m = torch_arch(c_arch)
                if c_arch == "smlp":  # soft labels only, no ground truth
                    own_torch_fit(m, c_arch, x_all[idx], y_all[idx], epochs=5, lr=1e-3, opt="adam", seed=rseed,
                                  soft=teachers[name][idx], temperature=2.0, alpha=1.0)
                else:
                    own_torch_fit(m, c_arch, x_all[idx], y_all[idx], epochs=5, lr=0.02, opt="sgd", seed=rseed,
                                  soft=teachers[name][idx], temperature=5.0, alpha=0.5)
                save_torch_plain(m, c_arch, cpath, {"arch": c_arch})
            elif kind == "prune-global40":
                from torch.nn.utils import prune

                m = torch_arch(arch)
                m.load_state_dict(torch.jit.load(str(path)).state_dict())
                targets = [(mod, "weight") for mod in m.modules() if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d))]
                prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=0.4)
                for mod, pname in targets:
                    prune.remove(mod, pname)
                save_torch_plain(m.eval(), arch, cpath, {"arch": arch})
            add({"name": cname, "path": str(cpath), "arch": c_arch, "seed": seed, "kind": kind, "parents": [name],
                 "root": name, "split": "test", "framework": c_fw,
                 "trainer": "own torch loop" if c_fw == "torch" else "keras fit"})
    for arch, seed in TEST_SCRATCH_STUDENTS:
        name = f"{arch}-s{seed}"
        path = work / f"{name}.pt"
        if name not in have:
            torch.manual_seed(seed)
            m = torch_arch(arch)
            sub = np.random.default_rng(6000 + seed).permutation(len(x_all))[:TRAIN_SIZE]
            own_torch_fit(m, arch, x_all[sub], y_all[sub], seed=seed, **SCRATCH_SGD[arch])
            save_torch_plain(m, arch, path, {"arch": arch})
            add({"name": name, "path": str(path), "arch": arch, "seed": seed, "kind": "base", "parents": [], "root": name,
                 "split": "test", "framework": "torch", "trainer": "own torch loop"})
    order = {m["name"]: i for i, m in enumerate(manifest)}
    manifest.sort(key=lambda m: (m["split"] != "calibration", m["kind"] != "base", order[m["name"]]))
    write_json(man_path, manifest)
    return manifest


# -- labelling and comparing ----------------------------------------------------------------------------
def labelled_pairs(models: list[dict]) -> list[dict]:
    """Derived (ancestor) and independent (other family) pairs of one split's models; siblings left out.

    Indices ``a``/``b`` are positions in ``models``; ``a`` is the ancestor of a derived pair.
    """
    by_name = {m["name"]: m for m in models}
    out = []
    for i, ma in enumerate(models):
        for j in range(i + 1, len(models)):
            mb = models[j]
            if ma["name"] in mr.ancestors(mb["name"], by_name):
                label, kind = 1, mb["kind"]
            elif ma["root"] != mb["root"]:
                label, kind = 0, "independent, same arch" if ma["arch"] == mb["arch"] else "independent, other arch"
            else:
                continue
            out.append({"a": i, "b": j, "name_a": ma["name"], "name_b": mb["name"], "label": label, "kind": kind,
                        "split": ma["split"]})
    return out


def compare_split(models: list[dict], pairs: list[dict],
                  levels: tuple[str, ...] = ("weights", "representation", "io", "baselines")) -> float:
    """Fill every pair's ``values`` and ``features`` (the measures of ``levels``, by default all of them incl.
    the baselines; the zoo of the zoo-relative features: all ``models``); returns seconds."""
    from twinspect.dl.modelclones import CompareConfig, compare_models
    from twinspect.dl.modelclones.measures import reuse_features

    cfg = CompareConfig(data="mnist", levels=levels, verbose=0, **CONFIG)
    t = time.perf_counter()
    res = compare_models([m["path"] for m in models], config=cfg, pairs=[(p["a"], p["b"]) for p in pairs])
    mats = {k: res.matrix(k) for k in res.measures}
    for p in pairs:
        i, j = p["a"], p["b"]
        p["values"] = {k: (None if not np.isfinite(mats[k][i, j]) else float(mats[k][i, j])) for k in mats}
        p["features"] = reuse_features(p["values"])
    return time.perf_counter() - t


def _split(manifest: list[dict], split: str) -> list[dict]:
    return [m for m in manifest if m["split"] == split]


def calibrate(work: Path, fit_file: Path) -> dict:
    """Compare the calibration pairs, fit the reuse score on them, write the frozen fit file."""
    from twinspect.dl.modelclones import fit_params
    from twinspect.dl.modelclones.reuse import DEFAULT_MAX_FPR, FEATURE_SETS

    manifest = read_json(work / "manifest.json")
    models = _split(manifest, "calibration")
    pairs = labelled_pairs(models)
    log(f"calibration: {len(models)} models, {len(pairs)} pairs; comparing ...")
    secs = compare_split(models, pairs)
    cal_file = work / "calibration_pairs.json"
    write_json(cal_file, pairs, indent=None)
    params = fit_params([p["features"] for p in pairs], [p["label"] for p in pairs])
    written = datetime.now(UTC).isoformat(timespec="seconds")
    data = {
        "provenance": _provenance.info(__file__),
        "params": params,
        "params_sha256": params_sha256(params),
        "features": {k: list(v) for k, v in FEATURE_SETS.items()},
        "fit": f"twinspect.dl.modelclones.fit_params (balanced logistic regression per feature set, "
               f"intercept capped at {DEFAULT_MAX_FPR:.0%} calibration false positives)",
        "fitted_on": "models_reuse_holdout.py calibration split: twinspect zoo models and twinspect-made derivatives",
        "calibration_models": len(models),
        "calibration_pairs": len(pairs),
        "calibration_derived": sum(p["label"] for p in pairs),
        "calibration_pairs_sha256": sha256_file(cal_file),
        "compare_s": round(secs, 1),
        "written_utc": written,
        "test_pairs_compared_before": 0,
    }
    write_json(fit_file, data)
    log(f"frozen fit written: {fit_file} sha256 {sha256_file(fit_file)} (params {data['params_sha256'][:16]}) at {written}")
    return data


# -- test run and report --------------------------------------------------------------------------------
def _describe(m: dict) -> str:
    return f"{m['arch']} ({m['framework']}, {m['trainer']}, {m['kind']})"


def test(work: Path, fit_file: Path, out: Path) -> None:
    """Load the frozen fit, compare the test pairs, score and write the report."""
    from twinspect.dl.modelclones import reuse_score
    from twinspect.dl.modelclones.measures import BY_NAME, REGISTRY
    from twinspect.dl.modelclones.reuse import CALIBRATION_FILE, DEFAULT_THRESHOLD, load_params

    if not fit_file.exists():
        raise SystemExit(f"error: {fit_file}: no frozen fit; run the 'calibrate' step first")
    fit_sha = sha256_file(fit_file)
    fit = read_json(fit_file)
    params = {k: [float(v) for v in vs] for k, vs in fit["params"].items()}
    if params_sha256(params) != fit["params_sha256"]:
        raise SystemExit(f"error: {fit_file}: coefficients do not match their recorded SHA-256")
    shipped = load_params(CALIBRATION_FILE)
    shipped_sha = sha256_file(CALIBRATION_FILE)
    test_start = datetime.now(UTC).isoformat(timespec="seconds")
    log(f"test run {test_start}: frozen fit {fit_file.name} sha256 {fit_sha}, written {fit['written_utc']}")

    manifest = read_json(work / "manifest.json")
    by_name = {m["name"]: m for m in manifest}
    calib = read_json(work / "calibration_pairs.json")
    if sha256_file(work / "calibration_pairs.json") != fit["calibration_pairs_sha256"]:
        raise SystemExit("error: calibration_pairs.json changed since the fit was frozen")
    models = _split(manifest, "test")
    pairs = labelled_pairs(models)
    log(f"test: {len(models)} models, {len(pairs)} pairs; comparing ...")
    secs = compare_split(models, pairs)
    th = DEFAULT_THRESHOLD
    for p in calib:
        p["reuse_calibrated"] = reuse_score(p["features"], params)
    for p in pairs:
        p["reuse_calibrated"] = reuse_score(p["features"], params)
        p["reuse_shipped"] = reuse_score(p["features"], shipped)
    write_json(work / "test_pairs.json", pairs, indent=None)

    # ROC-AUC per measure
    names = [m.name for m in REGISTRY if m.level in ("weights", "representation", "io", "baselines")
             and any(p["values"].get(m.name) is not None for p in pairs)]
    auc_rows, auc_json = [], {}
    for name in [*names, "reuse (frozen hold-out fit)", "reuse (shipped coefficients)"]:
        def score(p, name=name):
            if name.startswith("reuse (frozen"):
                return p["reuse_calibrated"]
            if name.startswith("reuse (shipped"):
                return p["reuse_shipped"]
            v = p["values"].get(name)
            return None if v is None else (v if BY_NAME[name].higher_is_similar else -v)

        a_cal = mr.auc([p["label"] for p in calib], [score(p) for p in calib]) if not name.startswith("reuse (shipped") else None
        a_test = mr.auc([p["label"] for p in pairs], [score(p) for p in pairs])
        cov = sum(score(p) is not None for p in pairs) / max(len(pairs), 1)
        auc_rows.append([name, a_cal, a_test, 100 * cov])
        auc_json[name] = {"calibration": a_cal, "test": a_test, "coverage_test": cov}

    # detection per kind at the default threshold, both frozen fits
    kinds = sorted({p["kind"] for p in pairs})
    det_rows, det_json = [], {}
    for kind in kinds:
        ps = [p for p in pairs if p["kind"] == kind]
        f1 = sum((p["reuse_calibrated"] or 0.0) >= th for p in ps)
        f2 = sum((p["reuse_shipped"] or 0.0) >= th for p in ps)
        det_rows.append([kind, ps[0]["label"], len(ps), 100 * f1 / len(ps), float(np.median([p["reuse_calibrated"] for p in ps])),
                         100 * f2 / len(ps)])
        det_json[kind] = {"label": ps[0]["label"], "pairs": len(ps), "flagged_frozen": int(f1), "flagged_shipped": int(f2)}
    der = [p for p in pairs if p["label"] == 1]
    ind = [p for p in pairs if p["label"] == 0]
    fp = sum(p["reuse_calibrated"] >= th for p in ind)
    tp = sum(p["reuse_calibrated"] >= th for p in der)
    fp_s = sum(p["reuse_shipped"] >= th for p in ind)
    tp_s = sum(p["reuse_shipped"] >= th for p in der)
    a_frozen = auc_json["reuse (frozen hold-out fit)"]["test"]
    per_kind = {k: v["flagged_frozen"] / v["pairs"] for k, v in det_json.items() if v["label"] == 1}
    n_dist = sum(p["kind"].startswith("distill") for p in der)
    n_ft = sum(p["kind"].startswith("ft") for p in der)
    fam = {s: len({m["root"] for m in _split(manifest, s)}) for s in ("calibration", "test")}

    def met(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    targets = [
        ["ROC-AUC ≥ 0.99", f"{a_frozen:.3f}", met(a_frozen >= 0.99)],
        ["≥ 95 % of derived pairs flagged", f"{100 * tp / len(der):.1f} % ({tp}/{len(der)})", met(tp / len(der) >= 0.95)],
        ["every derived kind ≥ 90 % (distilled included)",
         ", ".join(f"{k} {100 * v:.0f} %" for k, v in sorted(per_kind.items())), met(min(per_kind.values()) >= 0.90)],
        ["≤ 2 % of independent pairs flagged", f"{100 * fp / len(ind):.2f} % ({fp}/{len(ind)})", met(fp / len(ind) <= 0.02)],
        ["≥ 20 distilled and ≥ 20 fine-tuned test pairs", f"{n_dist} distilled, {n_ft} fine-tuned", met(n_dist >= 20 and n_ft >= 20)],
        ["≥ 10 independent families per split", f"calibration {fam['calibration']}, test {fam['test']}",
         met(min(fam.values()) >= 10)],
    ]
    base_md, base_json, sample_rows = mr.baselines_side_by_side(calib, pairs, th)

    # the highest-scoring independent and the lowest-scoring derived test pairs
    def pair_row(p):
        ma, mb = by_name[p["name_a"]], by_name[p["name_b"]]
        f = p["features"]
        return [p["name_a"], _describe(ma), p["name_b"], _describe(mb), p["kind"], p["reuse_calibrated"], p["reuse_shipped"],
                f.get("weights"), f.get("cka"), f.get("io_agreement"), f.get("io_logprob"), f.get("ddv_random")]

    hdr = ["a", "a is", "b", "b is", "kind", "reuse (frozen)", "reuse (shipped)", "weights cos", "CKA", "top-1 agr.",
           "logprob cos", "DDV random"]
    top_ind = sorted(ind, key=lambda p: -p["reuse_calibrated"])[:20]
    low_der = sorted(der, key=lambda p: p["reuse_calibrated"])[:15]

    acc_rows = [[m["name"], m["split"], m["kind"], m["arch"], m["framework"], m["trainer"], 100 * m["accuracy"]] for m in manifest]
    md = [
        "# Reuse score on a clean hold-out (`benchmarks/models_reuse_holdout.py`, issue 18 item 5)", "",
        f"{len(manifest)} MNIST models in two splits that share no family, no training code, no derivation recipe and no "
        f"student architecture. Calibration: {len(_split(manifest, 'calibration'))} models ({fam['calibration']} families) built "
        f"by twinspect's own `train`/`compress` code, {len(calib)} pairs ({sum(p['label'] for p in calib)} derived). Test: "
        f"{len(models)} models ({fam['test']} families) built by this script's own PyTorch loop and by Keras 3, {len(pairs)} pairs "
        f"({len(der)} derived: {n_ft} fine-tuned, {n_dist} distilled, {len(der) - n_ft - n_dist} pruned; {len(ind)} independent). "
        f"Comparison inputs: {CONFIG['n_inputs']} MNIST test images ({CONFIG['cka_inputs']} for CKA); test comparison {secs:.0f} s. "
        "The module docstring lists every family and recipe.", "",
        "## Order of the run and the frozen fit", "",
        f"1. The calibration pairs were compared and the reuse score fitted on them alone; the coefficients were written to "
        f"`benchmarks/results/{fit_file.name}` at {fit['written_utc']} (UTC), before any test pair was compared. "
        f"SHA-256 of that file: `{fit_sha}`; of its coefficients (canonical JSON): `{fit['params_sha256']}`.",
        f"2. This test run started at {test_start} (UTC), loaded that file, checked the coefficients' hash and the "
        f"calibration pairs' hash, then compared the test pairs. Nothing was changed after the test numbers were seen.",
        f"3. Second frozen fit: the coefficients shipped with twinspect (`twinspect/dl/modelclones/reuse_calibration.json`, "
        f"SHA-256 `{shipped_sha}`, fitted by `models_reuse.py` on its own calibration split before this script existed).", "",
        "## Targets (issue 18), frozen hold-out fit, test split, threshold 0.5", "",
        markdown_table(targets, ["target", "result", ""]), "",
        "## ROC-AUC, derived vs independent", "",
        "Calibration column: the reuse score's is tuned on its own data. Test column: held-out families and kinds.", "",
        markdown_table(auc_rows, ["measure", "AUC calibration", "AUC test", "coverage test %"], floatfmt=".3f"), "",
        f"## Detection at the default threshold {th} (test split)", "",
        markdown_table(det_rows, ["pair kind", "label", "pairs", "flagged % (frozen fit)", "median reuse (frozen)",
                                  "flagged % (shipped coefficients)"], floatfmt=".3f"), "",
        f"Independent test pairs flagged: frozen fit {100 * fp / len(ind):.2f} % ({fp}/{len(ind)}), shipped coefficients "
        f"{100 * fp_s / len(ind):.2f} % ({fp_s}/{len(ind)}); derived flagged: frozen {100 * tp / len(der):.1f} %, shipped "
        f"{100 * tp_s / len(der):.1f} %.", "",
        *base_md,
        "## The 20 highest-scoring independent test pairs", "",
        markdown_table([pair_row(p) for p in top_ind], hdr, floatfmt=".3f"), "",
        "## The 15 lowest-scoring derived test pairs", "",
        markdown_table([pair_row(p) for p in low_der], hdr, floatfmt=".3f"), "",
        "## Models", "",
        markdown_table(acc_rows, ["model", "split", "kind", "arch", "framework", "trainer", "test acc % (2,000 imgs)"], floatfmt=".1f"), "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(_provenance.md_header(__file__) + "\n".join(md), encoding="utf-8")

    def small(p, key="reuse_calibrated"):
        return {"name_a": p["name_a"], "name_b": p["name_b"], "label": p["label"], "kind": p["kind"],
                "features": {k: (None if v is None else round(v, 5)) for k, v in p["features"].items()},
                "reuse_frozen": round(p[key], 5), "reuse_shipped": None if "reuse_shipped" not in p else round(p["reuse_shipped"], 5)}

    write_json(out.with_suffix(".json"), {
        "provenance": _provenance.info(__file__),
        "order": {"fit_written_utc": fit["written_utc"], "test_started_utc": test_start, "fit_file_sha256": fit_sha,
                  "params_sha256": fit["params_sha256"], "shipped_calibration_sha256": shipped_sha},
        "threshold": th, "targets": targets, "auc": auc_json, "detection": det_json,
        "false_positive_rate": {"frozen": fp / len(ind), "shipped": fp_s / len(ind)},
        "derived_flagged": {"frozen": tp / len(der), "shipped": tp_s / len(der)},
        "baselines": base_json, "baseline_sample_pairs": sample_rows,
        "top_independent": [small(p) for p in top_ind], "lowest_derived": [small(p) for p in low_der],
        "models": [{k: m[k] for k in ("name", "split", "kind", "arch", "framework", "trainer", "seed", "parents", "accuracy")}
                   for m in manifest],
        "pairs_note": f"every derived test pair; all {len(pairs)} test pairs in <work-dir>/test_pairs.json",
        "derived_pairs": [small(p) for p in der],
    }, indent=1)
    print("\n".join(md))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("build", "calibrate", "test", "all"))
    ap.add_argument("--work-dir", default=str(CACHE))
    ap.add_argument("--fit-file", default=str(FIT_FILE))
    ap.add_argument("--out", default=str(OUT))
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
        calibrate(work, fit_file)
    if args.step in ("test", "all"):
        test(work, fit_file, Path(args.out))


if __name__ == "__main__":
    main()
