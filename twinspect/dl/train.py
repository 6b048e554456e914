"""Training zoo models on MNIST / CIFAR-10 (CPU), evaluating them, saving them with metadata.

The training loop (:func:`fit`) is shared by ``twinspect train``, pruning fine-tuning and
knowledge distillation (:mod:`twinspect.dl.compress`). Images stay in the 0–255 pixel scale
(N, H, W, C) until the model's own :class:`~twinspect.dl.adapters.base.Preprocess` turns them into
NCHW tensors, so a saved model needs nothing but its metadata to be used by the adapters.

Reproducibility: ``torch.manual_seed(seed)`` before the weights are initialised and a
``numpy.random.default_rng(seed)`` for the subset, the shuffling and the augmentation; CPU kernels
are deterministic for these layers, so the same seed gives the same weights on the same machine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from twinspect.dl.adapters.base import PRESETS, Preprocess
from twinspect.dl.architectures import ARCHS, DATASETS, build_model, count_parameters, save_torchscript
from twinspect.errors import InputError
from twinspect.progress import progress

#: Logits of a teacher for a batch of raw images (N, H, W, C) float32 in the pixel scale.
TeacherFn = Callable[[np.ndarray], torch.Tensor]


# -- data ------------------------------------------------------------------------------------------


def load_images(spec: str, split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of a dataset: ``"mnist"``, ``"cifar10"`` or an ``.npz`` path.

    Delegates to :func:`twinspect.dl.data.load_images` (the shared loader).

    Returns:
        x uint8 (N, H, W, C), y int64 (N,).

    Raises:
        InputError: unknown dataset, missing data, or a file without labels.
    """
    from twinspect.dl.data import load_images as _load

    x, y = _load(spec, split=split)
    if y is None:
        raise InputError(f"dataset {spec!r} has no labels (array 'y'); training and accuracy need them")
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    return x, np.asarray(y, dtype=np.int64)


def eval_subset(x: np.ndarray, y: np.ndarray, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` evenly spaced images of a test set (all when ``n`` is None or >= its size).

    Evenly spaced rather than the first ``n``: the shared CIFAR-10 test set is sorted by class.
    """
    if n is None or n >= len(x):
        return x, y
    idx = np.arange(n) * len(x) // n
    return x[idx], y[idx]


def default_preprocess(dataset: str, channels: int) -> Preprocess:
    """Preprocessing of models trained by twinspect: x/255 for MNIST, per-channel mean/std for CIFAR-10 (NCHW)."""
    if dataset == "cifar10" or (dataset not in DATASETS and channels == 3):
        return PRESETS["cifar10-nchw"]
    return PRESETS["unit-nchw"]


def augment_crop_flip(x: np.ndarray, rng: np.random.Generator, pad: int = 4) -> np.ndarray:
    """Standard CIFAR augmentation: random crop after ``pad``-pixel zero padding, random horizontal flip.

    Args:
        x: (N, H, W, C) images (any dtype).
        rng: numpy generator (seeded by the caller).

    Returns:
        Augmented copy, same shape and dtype.
    """
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    dy: list[int] = np.asarray(rng.integers(0, 2 * pad + 1, n)).tolist()
    dx: list[int] = np.asarray(rng.integers(0, 2 * pad + 1, n)).tolist()
    flip: list[bool] = (np.asarray(rng.random(n)) < 0.5).tolist()
    out = np.empty_like(x)
    for i in range(n):
        crop = padded[i, dy[i] : dy[i] + h, dx[i] : dx[i] + w]
        out[i] = crop[:, ::-1] if flip[i] else crop
    return out


# -- evaluation ------------------------------------------------------------------------------------


def predict_logits(module: nn.Module, x: np.ndarray, preprocess: Preprocess, batch_size: int = 500) -> np.ndarray:
    """Model outputs for raw images.

    Args:
        module: eval-mode module or TorchScript model mapping preprocessed batches to scores.
        x: (N, H, W, C) images in the pixel scale.
        preprocess: the model's preprocessing.

    Returns:
        float32 array (N, K).
    """
    module.eval()
    outs = []
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            outs.append(module(torch.from_numpy(preprocess(x[i : i + batch_size]))).float().numpy())
    return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)


def accuracy(labels: np.ndarray, y: np.ndarray) -> float:
    """Fraction of ``labels`` equal to ``y`` (both (N,))."""
    return float(np.mean(np.asarray(labels) == np.asarray(y))) if len(y) else float("nan")


# -- training --------------------------------------------------------------------------------------


@dataclass
class FitConfig:
    """Hyper-parameters of :func:`fit`.

    Attributes:
        epochs: passes over the training set.
        batch_size: images per step.
        lr: peak learning rate of the one-cycle schedule (Smith & Topin 2019).
        optimizer: ``"adam"`` (AdamW) or ``"sgd"`` (Nesterov momentum 0.9).
        weight_decay: L2 / decoupled weight decay.
        augment: random crop + flip (CIFAR-style) on every batch.
        seed: seed of numpy shuffling/augmentation and of torch (dropout).
        max_steps: stop after this many optimisation steps (tests), or None.
    """

    epochs: int = 5
    batch_size: int = 128
    lr: float = 2e-3
    optimizer: str = "adam"
    weight_decay: float = 5e-4
    augment: bool = False
    seed: int = 0
    max_steps: int | None = None


@dataclass
class FitLog:
    """Per-epoch training loss and accuracy, and the wall time in seconds."""

    loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    time_s: float = 0.0
    steps: int = 0


def default_fit_config(arch: str) -> FitConfig:
    """Defaults that reach good accuracy quickly on 2 CPU cores: AdamW for MNIST nets, SGD for CIFAR nets."""
    if arch in ("resnet20", "resnet14", "resnet8", "vgg11"):
        return FitConfig(epochs=15, batch_size=128, lr=0.1, optimizer="sgd", weight_decay=5e-4, augment=True)
    return FitConfig(epochs=4, batch_size=64, lr=3e-3, optimizer="adam", weight_decay=1e-4, augment=False)


def fit(
    module: nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    preprocess: Preprocess,
    cfg: FitConfig,
    *,
    teacher: TeacherFn | None = None,
    temperature: float = 4.0,
    alpha: float = 0.9,
    quiet: bool = True,
    description: str = "training",
    on_epoch: Callable[[int, nn.Module], None] | None = None,
) -> FitLog:
    """Train ``module`` in place with cross-entropy, or with the distillation loss when ``teacher`` is given.

    Distillation follows Hinton, Vinyals & Dean, "Distilling the knowledge in a neural network"
    (2015): ``loss = alpha * T² * KL(softmax(t/T) ‖ softmax(s/T)) + (1 − alpha) * CE(s, y)``.

    Args:
        module: model to train (float).
        x: (N, H, W, C) training images in the pixel scale; y: (N,) int labels.
        preprocess: the model's preprocessing.
        cfg: hyper-parameters (seeded).
        teacher: function giving teacher logits for a batch of raw images, or None.
        temperature: T of the softened distributions.
        alpha: weight of the soft-target term.
        quiet: no progress bar.
        description: label of the progress bar.
        on_epoch: called as ``on_epoch(epoch, module)`` (epoch counted from 1, module in train
            mode) after every completed epoch, e.g. to keep weight snapshots; None = no call.

    Returns:
        A :class:`FitLog`.
    """
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    n = len(x)
    steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
    total = cfg.epochs * steps_per_epoch
    if cfg.max_steps is not None:
        total = min(total, cfg.max_steps)
    params = [p for p in module.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(
            params, lr=cfg.lr, momentum=0.9, nesterov=True, weight_decay=cfg.weight_decay
        )
    else:
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    # one-cycle schedule; too few steps for its warm-up phase → constant learning rate
    sched = (
        torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=total, pct_start=0.25)
        if total >= 10
        else None
    )
    log = FitLog()
    t0 = time.perf_counter()
    step = 0
    with progress(description, total=total, quiet=quiet) as bar:
        for epoch in range(cfg.epochs):
            if step >= total:
                break
            module.train()
            order = rng.permutation(n)
            loss_sum, correct, seen = 0.0, 0, 0
            for b in range(steps_per_epoch):
                if step >= total:
                    break
                idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
                xb = x[idx]
                if cfg.augment:
                    xb = augment_crop_flip(xb, rng)
                inp = torch.from_numpy(preprocess(xb))
                yb = torch.from_numpy(y[idx])
                out = module(inp)
                loss = F.cross_entropy(out, yb)
                if teacher is not None:
                    with torch.no_grad():
                        t_logits = teacher(xb.astype(np.float32))
                    soft = F.kl_div(
                        F.log_softmax(out / temperature, dim=1),
                        F.log_softmax(t_logits / temperature, dim=1),
                        reduction="batchmean",
                        log_target=True,
                    )
                    loss = alpha * temperature**2 * soft + (1.0 - alpha) * loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                step += 1
                loss_sum += float(loss.detach()) * len(idx)
                correct += int((out.argmax(1) == yb).sum())
                seen += len(idx)
                bar.advance()
            log.loss.append(loss_sum / max(seen, 1))
            log.train_acc.append(correct / max(seen, 1))
            bar.update(description=f"{description} epoch {epoch + 1}/{cfg.epochs} loss {log.loss[-1]:.3f}")
            if on_epoch is not None:
                on_epoch(epoch + 1, module)
    module.eval()
    log.time_s = time.perf_counter() - t0
    log.steps = step
    return log


@dataclass
class TrainResult:
    """What :func:`train_model` produced: the module, its metadata and the measurements."""

    module: nn.Module
    meta: dict
    log: FitLog
    test_accuracy: float
    eval_time_s: float


def train_model(
    arch: str,
    dataset: str = "mnist",
    *,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    train_size: int | None = None,
    test_size: int | None = None,
    width: float = 1.0,
    augment: bool | None = None,
    max_steps: int | None = None,
    quiet: bool = True,
) -> TrainResult:
    """Train a zoo architecture on a dataset and measure its test accuracy.

    Args:
        arch: zoo architecture (see :data:`twinspect.dl.architectures.ARCHS`).
        dataset: ``"mnist"``, ``"cifar10"`` or an ``.npz`` with ``x``, ``y`` (the training split of
            the named datasets is ``train_10k.npz`` / ``train_20k.npz``; for an ``.npz`` the same file
            serves as test set).
        epochs, batch_size, lr: override :func:`default_fit_config`.
        seed: reproducibility seed.
        train_size: use a seeded random subset of this many training images.
        test_size: evaluate on N evenly spaced test images only (see :func:`eval_subset`); None = all.
        width: channel multiplier.
        augment: crop+flip augmentation (default: on for CIFAR-style nets).
        max_steps: stop after this many steps (tests).
        quiet: no progress output.

    Returns:
        :class:`TrainResult` (the module is in eval mode; ``meta`` is ready for saving).

    Raises:
        InputError: unknown architecture, bad hyper-parameters, missing data.
    """
    if arch.lower() not in ARCHS:
        raise InputError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}")
    arch = arch.lower()
    cfg = default_fit_config(arch)
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("train_size", train_size), ("test_size", test_size)):
        if value is not None and value < 1:
            raise InputError(f"{name.replace('_', '-')} must be >= 1, got {value}")
    if lr is not None and not lr > 0:
        raise InputError(f"lr must be > 0, got {lr}")
    cfg.epochs = epochs or cfg.epochs
    cfg.batch_size = batch_size or cfg.batch_size
    cfg.lr = lr or cfg.lr
    cfg.seed = seed
    cfg.max_steps = max_steps
    if augment is not None:
        cfg.augment = augment
    x, y = load_images(dataset, split="train")
    x_test, y_test = load_images(dataset, split="test")
    if train_size is not None and train_size < len(x):
        sub = np.random.default_rng(seed).permutation(len(x))[:train_size]
        x, y = x[sub], y[sub]
    x_test, y_test = eval_subset(x_test, y_test, test_size)
    hh, ww, cc = (int(v) for v in x.shape[1:])
    input_shape = (hh, ww, cc)
    num_classes = int(max(y.max(), y_test.max()) + 1) if dataset not in DATASETS else DATASETS[dataset][1]
    preprocess = default_preprocess(dataset, input_shape[2])
    torch.manual_seed(seed)
    module = build_model(arch, input_shape, num_classes, width)
    log = fit(module, x, y, preprocess, cfg, quiet=quiet, description=f"train {arch}")
    t0 = time.perf_counter()
    acc = accuracy(predict_logits(module, x_test, preprocess).argmax(1), y_test)
    eval_time = time.perf_counter() - t0
    meta = {
        "input_shape": list(input_shape),
        "num_classes": num_classes,
        "output": "logits",
        "preprocess": preprocess.to_dict(),
        "arch": arch,
        "width": width,
        "dataset": dataset,
        "compression": None,
        "accuracy": acc,
        "test_size": int(len(y_test)),
        "parameters": count_parameters(module),
        "training": {
            "epochs": cfg.epochs,
            "batch_size": cfg.batch_size,
            "lr": cfg.lr,
            "optimizer": cfg.optimizer,
            "augment": cfg.augment,
            "seed": seed,
            "train_size": int(len(x)),
            "steps": log.steps,
            "time_s": round(log.time_s, 2),
            "final_loss": log.loss[-1] if log.loss else None,
        },
    }
    return TrainResult(module, meta, log, acc, eval_time)


def example_input(meta: dict, n: int = 2) -> torch.Tensor:
    """A float32 NCHW example batch for tracing a model with metadata ``meta``."""
    h, w, c = meta["input_shape"]
    return torch.zeros(n, c, h, w)


def save_model(module: nn.Module, path: str | Path, meta: dict) -> Path:
    """Save ``module`` as TorchScript + metadata (atomic); see :func:`twinspect.dl.architectures.save_torchscript`."""
    return save_torchscript(module, path, meta, example_input(meta))
