"""Training stage of ``benchmarks/models_study_v2.py``: the study's models, seeded and cached.

Trains (or finds in the cache) every model the v2 seed study compares, per data set, and writes
them as TorchScript + metadata under ``~/.cache/twinspect-bench/models-study-v2/`` (never in the
repository; ``TWINSPECT_BENCH_CACHE`` moves the root). Kept apart from the analysis so that the
slow part (training, ~66 CPU-minutes) runs once in the background while the analysis is iterated.

What is trained (the reasons for the choice are in ``models_study_v2.py``'s docstring):

* **Families**, seed 0: MNIST LeNet-5 (width 1), ResNet-8 (width 1; width 0.5 reached only 97.2 % in 10 epochs), VGG-11 (width 0.25) on the
  10,000 shared training images, no augmentation; CIFAR-10 ResNet-8 (width 1) and VGG-11 (width
  0.25) on the 20,000 shared training images with random crop + horizontal flip. One-cycle schedule
  (SGD with Nesterov momentum for ResNet/VGG, AdamW for LeNet-5).
* **Independent references**, seed 1, same recipe (MNIST LeNet-5 and VGG-11 only, CPU budget: the
  same-architecture pair that shares nothing but the code, to read the distillation numbers against).
* **Distilled students** (Wu et al.'s Table 4): for each listed pair (A, B) a student with B's
  structure taught by A and one with A's structure taught by B (Hinton et al. 2015, T = 4,
  alpha = 0.9, the teacher's logits; the student's init seed is 1, not its structure-mate's 0, so
  the student-vs-mate weight comparison is not helped by a shared initialisation; seed 1 is also
  the references' seed, so a student and the seed-1 reference of its structure start from the
  *same* initial weights — a control for what shared initialisation alone does to the weights).
  A student is trained with its structure's family recipe, epochs included (``STUDENT_EPOCHS`` None),
  so its accuracy is like-for-like with its structure-mate's. The first run gave the CIFAR-10
  students 10 epochs instead of 25 (CPU budget) and both missed 75 %; since then they get the 25.
* **Table 3 snapshots**: the MNIST LeNet-5 (seed 0) weights after every epoch of its training.

Run: ``nice -n 19 .venv/bin/python benchmarks/models_study_v2_train.py --datasets mnist`` (and
``cifar10``, e.g. in a second process); re-running skips what is cached. CIFAR-10 splits over two
processes with ``--families vgg11 --students 'resnet8<-vgg11'`` and ``--families resnet8 --students
'vgg11<-resnet8'`` (each student's teacher is the family its own process trains). Every model's metadata
records its accuracy on the whole 10,000-image test set and its training time (``training.time_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

CACHE = Path(os.environ.get("TWINSPECT_BENCH_CACHE", "~/.cache/twinspect-bench")).expanduser() / "models-study-v2"


@dataclass(frozen=True)
class Recipe:
    """How one family is trained on one data set (the student of that structure uses the same)."""

    arch: str
    width: float
    epochs: int
    optimizer: str
    lr: float
    batch_size: int
    augment: bool
    weight_decay: float = 5e-4


RECIPES: dict[str, list[Recipe]] = {
    "mnist": [
        Recipe("lenet5", 1.0, 20, "adam", 3e-3, 64, False, 1e-4),
        Recipe("resnet8", 1.0, 15, "sgd", 0.05, 128, False),
        Recipe("vgg11", 0.25, 10, "sgd", 0.05, 128, False),
    ],
    "cifar10": [
        Recipe("vgg11", 0.25, 25, "sgd", 0.05, 128, True),
        Recipe("resnet8", 1.0, 25, "sgd", 0.1, 128, True),
    ],
}
#: (A, B) pairs distilled both ways: A into B's structure and B into A's.
DISTILL_PAIRS: dict[str, list[tuple[str, str]]] = {
    "mnist": [("lenet5", "resnet8"), ("lenet5", "vgg11")],
    "cifar10": [("resnet8", "vgg11")],
}
#: Seeds of the independently trained copies (seed 0 is the family model itself).
REFERENCE_SEEDS: dict[str, tuple[int, ...]] = {"mnist": (1,), "cifar10": ()}
#: Families that get those references (ResNet-8 left out: 6+ CPU-minutes on MNIST alone).
REFERENCE_ARCHS: dict[str, tuple[str, ...]] = {"mnist": ("lenet5", "vgg11"), "cifar10": ()}
#: Epochs of a distilled student; None = its structure's family recipe (like-for-like with the structure-mate).
#: CIFAR-10 students were given 10 epochs in the first run (CPU budget) and missed 75 %; now the recipe's 25.
STUDENT_EPOCHS: dict[str, int | None] = {"mnist": None, "cifar10": None}
STUDENT_SEED = 1


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def model_path(dataset: str, arch: str, seed: int = 0) -> Path:
    """Cache path of a family model (seed 0) or an independent reference (other seeds)."""
    return CACHE / f"{dataset}-{arch}-s{seed}.pt"


def student_path(dataset: str, structure: str, teacher: str) -> Path:
    """Cache path of the student with ``structure`` distilled from the seed-0 ``teacher``."""
    return CACHE / f"{dataset}-{structure}-from-{teacher}.pt"


def snapshots_path(dataset: str, arch: str) -> Path:
    """Cache path of the per-epoch snapshots (state dicts and accuracies) of the seed-0 model."""
    return CACHE / f"{dataset}-{arch}-s0-snapshots.pt"


def recipe(dataset: str, arch: str) -> Recipe:
    return next(r for r in RECIPES[dataset] if r.arch == arch)


def _fit_config(r: Recipe, seed: int, epochs: int | None = None):
    from twinspect.dl.train import FitConfig

    return FitConfig(epochs=epochs or r.epochs, batch_size=r.batch_size, lr=r.lr, optimizer=r.optimizer,
                     weight_decay=r.weight_decay, augment=r.augment, seed=seed)


def _meta(module, dataset: str, r: Recipe, acc: float, n_test: int, cfg, log_, n_train: int, **extra) -> dict:
    from dataclasses import asdict

    from twinspect.dl.architectures import count_parameters
    from twinspect.dl.train import default_preprocess

    shape = [28, 28, 1] if dataset == "mnist" else [32, 32, 3]
    return {"input_shape": shape, "num_classes": 10, "output": "logits",
            "preprocess": default_preprocess(dataset, shape[2]).to_dict(), "arch": r.arch, "width": r.width,
            "dataset": dataset, "compression": None, "accuracy": acc, "test_size": n_test,
            "parameters": count_parameters(module),
            "training": {**asdict(cfg), "train_size": n_train, "steps": log_.steps, "time_s": round(log_.time_s, 1),
                         "final_loss": log_.loss[-1] if log_.loss else None, "cpu_threads": 1}, **extra}


def train_one(dataset: str, r: Recipe, seed: int, data, *, snapshots: bool = False) -> None:
    """Train family ``r`` with ``seed`` on the full shared training set and cache it (skip when cached)."""
    import torch

    from twinspect.dl.architectures import build_model
    from twinspect.dl.train import accuracy, default_preprocess, fit, predict_logits, save_model

    path = model_path(dataset, r.arch, seed)
    if path.exists():
        log(f"cached {path.name}")
        return
    x, y, xt, yt = data
    pre = default_preprocess(dataset, x.shape[-1])
    torch.manual_seed(seed)
    m = build_model(r.arch, tuple(x.shape[1:]), 10, r.width)
    snaps: list[dict] = []

    def keep(epoch: int, module) -> None:
        acc = accuracy(predict_logits(module, xt, pre).argmax(1), yt)
        snaps.append({"epoch": epoch, "accuracy": acc,
                      "state": {k: v.detach().clone() for k, v in module.state_dict().items()}})
        module.train()
        log(f"  {dataset} {r.arch} s{seed} epoch {epoch}: test acc {acc:.4f}")

    cfg = _fit_config(r, seed)
    lg = fit(m, x, y, pre, cfg, quiet=True, on_epoch=keep if snapshots else None)
    acc = accuracy(predict_logits(m, xt, pre).argmax(1), yt)
    save_model(m, path, _meta(m, dataset, r, acc, len(yt), cfg, lg, len(x), seed=seed))
    if snapshots:
        torch.save(snaps, snapshots_path(dataset, r.arch))
    log(f"trained {path.name}: test acc {acc:.4f} in {lg.time_s:.0f} s")


def distill_one(dataset: str, structure: str, teacher_arch: str, data) -> None:
    """Distil the seed-0 ``teacher_arch`` into a fresh ``structure`` (init seed 1) and cache the student."""
    import torch

    from twinspect.dl.architectures import build_model, load_zoo_module
    from twinspect.dl.train import accuracy, default_preprocess, fit, predict_logits, save_model

    path = student_path(dataset, structure, teacher_arch)
    if path.exists():
        log(f"cached {path.name}")
        return
    x, y, xt, yt = data
    pre = default_preprocess(dataset, x.shape[-1])
    teacher, _ = load_zoo_module(model_path(dataset, teacher_arch, 0))
    teacher.eval()

    def teach(xb: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return teacher(torch.from_numpy(pre(xb)))

    r = recipe(dataset, structure)
    torch.manual_seed(STUDENT_SEED)
    m = build_model(structure, tuple(x.shape[1:]), 10, r.width)
    cfg = _fit_config(r, STUDENT_SEED, STUDENT_EPOCHS[dataset])
    lg = fit(m, x, y, pre, cfg, teacher=teach, temperature=4.0, alpha=0.9, quiet=True)
    acc = accuracy(predict_logits(m, xt, pre).argmax(1), yt)
    save_model(m, path, _meta(m, dataset, replace(r, epochs=cfg.epochs), acc, len(yt), cfg, lg, len(x),
                              seed=STUDENT_SEED, distilled_from=teacher_arch, temperature=4.0, alpha=0.9))
    log(f"distilled {path.name}: test acc {acc:.4f} in {lg.time_s:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="mnist,cifar10")
    ap.add_argument("--students", default="all",
                    help="'all', 'none' or a comma list of 'structure<-teacher' (to run students in another process)")
    ap.add_argument("--skip-families", action="store_true", help="train no family model (students of cached teachers only)")
    ap.add_argument("--families", default="all",
                    help="'all' or a comma list of architectures whose seed-0 family model to train (to split a data set's"
                         " families over processes)")
    ap.add_argument("--skip-references", action="store_true")
    args = ap.parse_args()

    from twinspect.dl.adapters.torch import set_torch_threads
    from twinspect.dl.train import load_images

    set_torch_threads(1)
    CACHE.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets.split(","):
        x, y = load_images(dataset, "train")
        xt, yt = load_images(dataset, "test")
        data = (x, y, xt, yt)
        t = time.perf_counter()
        if not args.skip_families:
            families = None if args.families == "all" else set(args.families.split(","))
            for r in RECIPES[dataset]:
                if families is None or r.arch in families:
                    train_one(dataset, r, 0, data, snapshots=(dataset == "mnist" and r.arch == "lenet5"))
        wanted = None if args.students == "all" else set() if args.students == "none" else set(args.students.split(","))
        for a, b in DISTILL_PAIRS[dataset]:
            for structure, teacher in ((b, a), (a, b)):
                if wanted is None or f"{structure}<-{teacher}" in wanted:
                    distill_one(dataset, structure, teacher, data)
        for seed in () if args.skip_references else REFERENCE_SEEDS[dataset]:
            for r in RECIPES[dataset]:
                if r.arch in REFERENCE_ARCHS[dataset]:
                    train_one(dataset, r, seed, data)
        log(f"{dataset}: done in {time.perf_counter() - t:.0f} s")
        (CACHE / f"{dataset}-done.json").write_text(json.dumps({"wall_s": round(time.perf_counter() - t, 1)}))


if __name__ == "__main__":
    main()
