"""Model compression: 8-bit quantisation, magnitude pruning and knowledge distillation.

Each method produces the *compressed twin* of an original model (the original file is not touched),
saves it as TorchScript with metadata, and measures how far the twin deviates from the original on a
labelled test set: accuracy of both and the number of test images whose top-1 labels disagree
(the quantity DiffChaser/DFlare search inputs for).

* Post-training static quantisation (int8 weights and activations, per-channel weights), FX graph
  mode: ``prepare_fx`` → calibration forward passes → ``convert_fx`` (Jacob et al., "Quantization
  and training of neural networks for efficient integer-arithmetic-only inference", CVPR 2018;
  PyTorch's x86/fbgemm backend).
* Dynamic quantisation: int8 weights of the ``nn.Linear`` layers, activations quantised on the fly
  (``torch.ao.quantization.quantize_dynamic``).
* Global unstructured magnitude (L1) pruning (Han et al., "Learning both weights and connections
  for efficient neural networks", NeurIPS 2015) over all convolution and linear weights with
  ``torch.nn.utils.prune``, optionally fine-tuned with the mask fixed, then made permanent.
* Knowledge distillation into a smaller student (Hinton, Vinyals & Dean 2015), see
  :func:`twinspect.dl.train.fit`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from twinspect.dl.adapters.base import Preprocess
from twinspect.dl.architectures import ARCHS, build_model, count_parameters, load_zoo_module, quiet_torch_warnings
from twinspect.dl.train import (
    FitConfig,
    accuracy,
    default_fit_config,
    default_preprocess,
    eval_subset,
    fit,
    load_images,
    predict_logits,
    save_model,
)
from twinspect.errors import InputError, ModelError

METHODS = ("quantize", "prune", "distill")


def set_quantized_engine(engine: str = "x86") -> str:
    """Select the quantised CPU kernels (``"x86"`` or ``"fbgemm"``; falls back to what is available).

    Returns:
        The engine in force.

    Raises:
        InputError: no requested or fallback engine is supported by this torch build.
    """
    supported = list(torch.backends.quantized.supported_engines)
    for name in (engine, "x86", "fbgemm", "qnnpack"):
        if name in supported:
            torch.backends.quantized.engine = name
            return name
    raise InputError(f"quantised engine {engine!r} not available; this torch supports {supported}")


# -- the three methods (operate on nn.Modules) --------------------------------------------------------


def quantize_static(module: nn.Module, calib_x: np.ndarray, preprocess: Preprocess, engine: str = "x86", batch_size: int = 128) -> nn.Module:
    """Post-training static int8 quantisation in FX graph mode.

    Args:
        module: float model (not modified; a copy is quantised).
        calib_x: (N, H, W, C) calibration images in the pixel scale (a few hundred suffice).
        preprocess: the model's preprocessing.
        engine: quantised backend (``"x86"`` or ``"fbgemm"``).

    Returns:
        A quantised ``torch.fx.GraphModule`` (Conv/Linear replaced by quantised modules, BN folded).

    Raises:
        ModelError: the model cannot be symbolically traced / quantised.
    """
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engine = set_quantized_engine(engine)
    model = copy.deepcopy(module).eval()
    example = torch.from_numpy(preprocess(calib_x[:2]))
    with quiet_torch_warnings():
        try:
            prepared = prepare_fx(model, get_default_qconfig_mapping(engine), (example,))
        except Exception as exc:  # noqa: BLE001 - torch.fx raises many types
            raise ModelError(f"cannot prepare the model for FX quantisation: {type(exc).__name__}: {exc}") from exc
        with torch.no_grad():
            for i in range(0, len(calib_x), batch_size):
                prepared(torch.from_numpy(preprocess(calib_x[i : i + batch_size])))
        quantized = convert_fx(prepared)
    return quantized.eval()


def quantize_dynamic_linear(module: nn.Module) -> nn.Module:
    """Dynamic int8 quantisation of the ``nn.Linear`` layers (weights int8, activations at run time).

    Raises:
        ModelError: the model has no linear layer.
    """
    from torch.ao.quantization import quantize_dynamic

    if not any(isinstance(m, nn.Linear) for m in module.modules()):
        raise ModelError("dynamic quantisation needs nn.Linear layers; the model has none (use static quantisation)")
    set_quantized_engine()
    with quiet_torch_warnings():
        return quantize_dynamic(copy.deepcopy(module).eval(), {nn.Linear}, dtype=torch.qint8).eval()


def prunable_parameters(module: nn.Module) -> list[tuple[nn.Module, str]]:
    """(module, "weight") for every convolution and linear layer."""
    return [(m, "weight") for m in module.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear))]


def weight_sparsity(module: nn.Module) -> float:
    """Fraction of exactly-zero entries over all convolution and linear weights."""
    params = prunable_parameters(module)
    total = sum(getattr(m, n).numel() for m, n in params)
    zeros = sum(int((getattr(m, n) == 0).sum()) for m, n in params)
    return zeros / total if total else 0.0


def prune_magnitude(
    module: nn.Module,
    sparsity: float,
    *,
    finetune: tuple[np.ndarray, np.ndarray, Preprocess, FitConfig] | None = None,
    quiet: bool = True,
) -> nn.Module:
    """Global unstructured L1 magnitude pruning of all conv/linear weights.

    Args:
        module: float model (not modified; a copy is pruned).
        sparsity: fraction in (0, 1) of weights set to zero (the smallest in absolute value, ranked
            globally across layers).
        finetune: optional ``(x, y, preprocess, cfg)``: train with the mask fixed before making the
            pruning permanent.
        quiet: no progress bar while fine-tuning.

    Returns:
        The pruned model (plain ``weight`` parameters containing the zeros).

    Raises:
        InputError: sparsity outside (0, 1).
    """
    import torch.nn.utils.prune as prune

    if not 0.0 < sparsity < 1.0:
        raise InputError(f"sparsity must be in (0, 1), got {sparsity}")
    model = copy.deepcopy(module)
    params = prunable_parameters(model)
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=float(sparsity))
    if finetune is not None:
        x, y, preprocess, cfg = finetune
        fit(model, x, y, preprocess, cfg, quiet=quiet, description="fine-tune")
    for m, name in params:
        prune.remove(m, name)
    return model.eval()


def distill(
    teacher_logits_fn,
    student: nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    preprocess: Preprocess,
    cfg: FitConfig,
    *,
    temperature: float = 4.0,
    alpha: float = 0.9,
    quiet: bool = True,
) -> nn.Module:
    """Train ``student`` in place on the teacher's softened outputs (Hinton et al. 2015).

    Args:
        teacher_logits_fn: raw images (N, H, W, C) float32 → teacher logits (N, K) tensor (log-
            probabilities work too: the softmax is shift-invariant).
        student: untrained student (float).
        x, y: training images in the pixel scale and labels.
        preprocess: the *student's* preprocessing.
        cfg: training hyper-parameters.
        temperature: T > 0.
        alpha: weight in [0, 1] of the soft-target term (1 − alpha weighs the hard-label CE).

    Returns:
        The trained student (eval mode).

    Raises:
        InputError: temperature <= 0 or alpha outside [0, 1].
    """
    if not temperature > 0:
        raise InputError(f"temperature must be > 0, got {temperature}")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha must be in [0, 1], got {alpha}")
    fit(student, x, y, preprocess, cfg, teacher=teacher_logits_fn, temperature=temperature, alpha=alpha,
        quiet=quiet, description="distill")
    return student.eval()


# -- whole pipeline (files in, file out) ----------------------------------------------------------------


@dataclass
class CompressResult:
    """Outcome of :func:`compress_model`.

    Attributes:
        path: the compressed model written.
        meta: its metadata (with the ``"compression"`` block).
        original_accuracy / compressed_accuracy: top-1 accuracy on the test set, in [0, 1].
        disagreements: test images whose top-1 labels differ between original and compressed.
        test_size: number of test images.
        time_s: wall time of the compression itself (excluding evaluation).
    """

    path: Path
    meta: dict
    original_accuracy: float
    compressed_accuracy: float
    disagreements: int
    test_size: int
    time_s: float


def _sample(x: np.ndarray, y: np.ndarray | None, n: int | None, seed: int):
    if n is None or n >= len(x):
        return x, y
    idx = np.random.default_rng(seed).permutation(len(x))[:n]
    return x[idx], (None if y is None else y[idx])


def _teacher_fn(model_path: Path):
    """Logits (or log-probabilities) of the original for raw images, and its predict function."""
    from twinspect.dl.adapters import load_classifier

    clf = load_classifier(model_path)
    if clf.output_kind == "logits" and hasattr(clf, "module"):  # torch: use the raw logits
        module, pre = clf.module, clf.preprocess

        def fn(xb: np.ndarray) -> torch.Tensor:
            with torch.no_grad():
                return module(torch.from_numpy(pre(xb))).float()

    else:

        def fn(xb: np.ndarray) -> torch.Tensor:
            p = clf.predict_proba(xb)
            return torch.from_numpy(np.log(np.clip(p, 1e-30, None))).float()

    return clf, fn


def _check_common(model_path: Path, output: Path, test_size: int | None) -> None:
    """Checks every method makes before any data or model work: input, output location, sizes."""
    from twinspect._io import check_output_file

    if not model_path.exists():
        raise InputError("model file does not exist", model_path)
    if output.resolve() == model_path.resolve():
        raise InputError("output must differ from the original model (the original is left as is)", output)
    if output.suffix.lower() not in (".pt", ".pth", ".ts"):
        raise InputError("output must be a TorchScript file ending in .pt, .pth or .ts", output)
    check_output_file(output, "model file")
    _check_sizes(test_size=test_size)


def _check_sizes(**sizes: int | None) -> None:
    for name, value in sizes.items():
        if value is not None and value < 1:
            raise InputError(f"{name.replace('_', '-')} must be >= 1, got {value}")


def _dataset(model_path: Path, data: str | None) -> tuple[str, dict]:
    from twinspect.dl.adapters import read_metadata

    orig_meta = read_metadata(model_path) or {}
    dataset = data or orig_meta.get("dataset")
    if dataset is None:
        raise InputError("the model has no dataset in its metadata; give the data set (data=..., --data on the command line)", model_path)
    return str(dataset), orig_meta


def _zoo_original(model_path: Path, method: str) -> tuple[nn.Module, Preprocess, dict]:
    if model_path.suffix.lower() not in (".pt", ".pth", ".ts"):
        raise ModelError(
            f"{method} needs a float TorchScript model saved by `twinspect train` (.pt); "
            "models in other formats can be compressed with --method distill",
            model_path,
        )
    module, zoo_meta = load_zoo_module(model_path)
    preprocess = Preprocess.from_dict(zoo_meta["preprocess"])
    meta = {k: v for k, v in zoo_meta.items() if k not in ("training", "compression")}
    return module, preprocess, meta


def _finish(compressed: nn.Module, output: Path, meta: dict, info: dict, preprocess: Preprocess,
            orig_logits: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, dataset: str, elapsed: float,
            seed: int) -> CompressResult:
    """Evaluate original vs compressed on the test set, save the compressed model, build the result."""
    comp_logits = predict_logits(compressed, x_test, preprocess)
    orig_pred, comp_pred = orig_logits.argmax(1), comp_logits.argmax(1)
    acc_o, acc_c = accuracy(orig_pred, y_test), accuracy(comp_pred, y_test)
    disagree = int(np.sum(orig_pred != comp_pred))
    info.update(original_accuracy=acc_o, compressed_accuracy=acc_c, disagreements=disagree,
                test_data=str(dataset), test_size=int(len(y_test)), time_s=round(elapsed, 2), seed=seed)
    meta.update(accuracy=acc_c, test_size=int(len(y_test)), compression=info)
    with quiet_torch_warnings():
        save_model(compressed, output, meta)
    return CompressResult(output, meta, acc_o, acc_c, disagree, int(len(y_test)), elapsed)


def quantize_model(
    model_path: str | Path,
    output: str | Path,
    *,
    data: str | None = None,
    calibration: str | None = None,
    calib_size: int = 512,
    dynamic: bool = False,
    engine: str = "x86",
    test_size: int | None = None,
    seed: int = 0,
) -> CompressResult:
    """8-bit quantisation of a zoo model (static FX int8, or dynamic int8 Linear layers), evaluated and saved.

    Args:
        model_path: float TorchScript ``.pt`` saved by ``twinspect train``.
        output: destination ``.pt`` (TorchScript + ``<output>.json``); must differ from ``model_path``.
        data: dataset for calibration/evaluation (default: the ``dataset`` in the original's metadata).
        calibration: calibration dataset for static quantisation (default: ``data``'s train split;
            an ``.npz`` path is used as is).
        calib_size: calibration images (seeded random sample), >= 1.
        dynamic: dynamic instead of static quantisation.
        engine: quantised backend (``x86`` or ``fbgemm``).
        test_size: evaluate on N evenly spaced test images only (default: all).
        seed: seed of the calibration sample.

    Returns:
        :class:`CompressResult`.

    Raises:
        InputError: bad sizes, missing files or data, output equal to the input, unknown engine.
        ModelError: the original is not a float zoo TorchScript model or cannot be quantised.

    Follows Jacob et al., CVPR 2018 (see the module docstring).
    """
    model_path, output = Path(model_path), Path(output)
    _check_common(model_path, output, test_size)
    _check_sizes(calib_size=calib_size)
    if not dynamic:
        set_quantized_engine(engine)  # an unavailable engine fails before the data is loaded
    dataset, _ = _dataset(model_path, data)
    x_test, y_test = eval_subset(*load_images(dataset, split="test"), test_size)
    t0 = time.perf_counter()
    info: dict = {"method": "quantize", "original": str(model_path)}
    module, preprocess, meta = _zoo_original(model_path, "quantize")
    if dynamic:
        compressed = quantize_dynamic_linear(module)
        info.update(mode="dynamic", dtype="qint8", layers="Linear")
    else:
        calib_spec = calibration or dataset
        xc, _ = load_images(calib_spec, split="train")
        xc, _ = _sample(xc, None, calib_size, seed)
        compressed = quantize_static(module, xc, preprocess, engine=engine)
        info.update(mode="static", dtype="quint8/qint8", engine=torch.backends.quantized.engine,
                    calibration=str(calib_spec), calib_size=int(len(xc)), graph="fx")
    orig_logits = predict_logits(module, x_test, preprocess)
    elapsed = time.perf_counter() - t0
    return _finish(compressed, output, meta, info, preprocess, orig_logits, x_test, y_test, dataset, elapsed, seed)


def prune_model(
    model_path: str | Path,
    output: str | Path,
    *,
    sparsity: float = 0.5,
    data: str | None = None,
    finetune_epochs: int = 0,
    batch_size: int | None = None,
    lr: float | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
    quiet: bool = True,
) -> CompressResult:
    """Global L1 magnitude pruning of a zoo model (optionally fine-tuned), evaluated and saved.

    Args:
        model_path: float TorchScript ``.pt`` saved by ``twinspect train``.
        output: destination ``.pt`` (TorchScript + ``<output>.json``); must differ from ``model_path``.
        sparsity: fraction of conv+linear weights set to zero, in (0, 1).
        data: dataset for fine-tuning/evaluation (default: the original's metadata ``dataset``).
        finetune_epochs: fine-tuning epochs with the mask fixed (0 = none).
        batch_size, lr: fine-tuning hyper-parameters (default: the arch's, lr × 0.1).
        train_size: seeded subset of the training split; test_size: N evenly spaced test images only.
        max_steps: cap on optimisation steps (tests).
        seed: seed of sampling, shuffling and initialisation.
        quiet: no progress bar (the default; progress goes to stderr when False).

    Returns:
        :class:`CompressResult`.

    Raises:
        InputError: bad sparsity/sizes, missing files or data, output equal to the input.
        ModelError: the original is not a float zoo TorchScript model.

    Follows Han et al., NeurIPS 2015 (see the module docstring).
    """
    model_path, output = Path(model_path), Path(output)
    _check_common(model_path, output, test_size)
    if not 0.0 < sparsity < 1.0:
        raise InputError(f"sparsity must be in (0, 1), got {sparsity}")
    _check_sizes(train_size=train_size, batch_size=batch_size)
    if finetune_epochs < 0:
        raise InputError(f"finetune-epochs must be >= 0, got {finetune_epochs}")
    dataset, _ = _dataset(model_path, data)
    x_test, y_test = eval_subset(*load_images(dataset, split="test"), test_size)
    t0 = time.perf_counter()
    info: dict = {"method": "prune", "original": str(model_path)}
    module, preprocess, meta = _zoo_original(model_path, "prune")
    ft = None
    if finetune_epochs > 0:
        xt, yt = _sample(*load_images(dataset, split="train"), train_size, seed)
        cfg = default_fit_config(meta["arch"])
        cfg.epochs, cfg.seed, cfg.max_steps = finetune_epochs, seed, max_steps
        cfg.batch_size = batch_size or cfg.batch_size
        cfg.lr = lr or cfg.lr * 0.1
        ft = (xt, yt, preprocess, cfg)
    torch.manual_seed(seed)
    compressed = prune_magnitude(module, sparsity, finetune=ft, quiet=quiet)
    info.update(sparsity_target=sparsity, sparsity=weight_sparsity(compressed), scope="global conv+linear weights",
                criterion="L1 magnitude, unstructured", finetune_epochs=finetune_epochs)
    orig_logits = predict_logits(module, x_test, preprocess)
    elapsed = time.perf_counter() - t0
    return _finish(compressed, output, meta, info, preprocess, orig_logits, x_test, y_test, dataset, elapsed, seed)


def distill_model(
    model_path: str | Path,
    output: str | Path,
    *,
    data: str | None = None,
    student: str | None = None,
    student_width: float = 1.0,
    temperature: float = 4.0,
    alpha: float = 0.9,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
    quiet: bool = True,
) -> CompressResult:
    """Knowledge distillation of any classifier into a smaller zoo student, evaluated and saved.

    Args:
        model_path: the original, any file :func:`~twinspect.dl.adapters.load_classifier` opens.
        output: destination ``.pt`` (TorchScript + ``<output>.json``); must differ from ``model_path``.
        data: dataset for training/evaluation (default: the original's metadata ``dataset``).
        student: student architecture (default ``lenet1`` for 1-channel inputs, ``resnet8`` otherwise);
            student_width its channel multiplier.
        temperature: softening temperature T > 0; alpha: weight in [0, 1] of the soft-target term.
        epochs, batch_size, lr: training hyper-parameters (defaults per student arch).
        train_size: seeded subset of the training split; test_size: N evenly spaced test images only.
        max_steps: cap on optimisation steps (tests).
        seed: seed of sampling, shuffling and initialisation.
        quiet: no progress bar (the default; progress goes to stderr when False).

    Returns:
        :class:`CompressResult`.

    Raises:
        InputError: unknown student, bad parameters, missing files or data, output equal to the input.
        ModelError: the original cannot be loaded.

    Follows Hinton, Vinyals & Dean, "Distilling the knowledge in a neural network", 2015.
    """
    model_path, output = Path(model_path), Path(output)
    _check_common(model_path, output, test_size)
    _check_sizes(train_size=train_size, epochs=epochs, batch_size=batch_size)
    if student is not None and student.lower() not in ARCHS:
        raise InputError(f"unknown student architecture {student!r}; choose one of {', '.join(ARCHS)}")
    if not temperature > 0:
        raise InputError(f"temperature must be > 0, got {temperature}")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha must be in [0, 1], got {alpha}")
    dataset, orig_meta = _dataset(model_path, data)
    x_test, y_test = eval_subset(*load_images(dataset, split="test"), test_size)
    t0 = time.perf_counter()
    info: dict = {"method": "distill", "original": str(model_path)}
    clf, teacher = _teacher_fn(model_path)
    input_shape = tuple(clf.input_shape)
    arch = (student or ("lenet1" if input_shape[2] == 1 else "resnet8")).lower()
    preprocess = default_preprocess(dataset, input_shape[2])
    xt, yt = _sample(*load_images(dataset, split="train"), train_size, seed)
    cfg = default_fit_config(arch)
    cfg.epochs = epochs or cfg.epochs
    cfg.batch_size = batch_size or cfg.batch_size
    cfg.lr = lr or cfg.lr
    cfg.seed, cfg.max_steps = seed, max_steps
    torch.manual_seed(seed)
    compressed = build_model(arch, input_shape, clf.num_classes, student_width)
    distill(teacher, compressed, xt, yt, preprocess, cfg, temperature=temperature, alpha=alpha, quiet=quiet)
    info.update(student=arch, student_width=student_width, temperature=temperature, alpha=alpha,
                epochs=cfg.epochs, train_size=int(len(xt)), student_parameters=count_parameters(compressed),
                teacher_parameters=orig_meta.get("parameters"),
                loss="Hinton et al. 2015: alpha*T^2*KL + (1-alpha)*CE")
    meta = {
        "input_shape": list(input_shape),
        "num_classes": clf.num_classes,
        "output": "logits",
        "preprocess": preprocess.to_dict(),
        "arch": arch,
        "width": student_width,
        "dataset": dataset,
        "parameters": count_parameters(compressed),
    }
    orig_logits = np.log(np.clip(clf.predict_proba(x_test), 1e-30, None))
    elapsed = time.perf_counter() - t0
    return _finish(compressed, output, meta, info, preprocess, orig_logits, x_test, y_test, dataset, elapsed, seed)


#: method name → the function that performs it (the dispatcher's table).
COMPRESSORS: dict[str, Callable[..., CompressResult]] = {"quantize": quantize_model, "prune": prune_model, "distill": distill_model}

#: keyword arguments each method takes (the others are ignored by :func:`compress_model`).
_METHOD_ARGS = {
    "quantize": ("data", "calibration", "calib_size", "dynamic", "engine", "test_size", "seed"),
    "prune": ("sparsity", "data", "finetune_epochs", "batch_size", "lr", "train_size", "test_size", "max_steps",
              "seed", "quiet"),
    "distill": ("data", "student", "student_width", "temperature", "alpha", "epochs", "batch_size", "lr",
                "train_size", "test_size", "max_steps", "seed", "quiet"),
}


def compress_model(model_path: str | Path, method: str, output: str | Path, **options) -> CompressResult:
    """Compress a saved model with ``method`` and measure the deviation of the compressed twin.

    A dispatcher over :func:`quantize_model`, :func:`prune_model` and :func:`distill_model`: options that
    the chosen method does not take (e.g. ``sparsity`` for ``quantize``) are ignored, so one set of CLI
    options serves all three.

    Args:
        model_path: the original model file.
        method: ``"quantize"``, ``"prune"`` or ``"distill"``.
        output: destination ``.pt`` (TorchScript + ``<output>.json``).
        **options: keyword arguments of the method's function.

    Returns:
        :class:`CompressResult`.

    Raises:
        InputError: unknown method, unknown option name, or as raised by the method's function.
        ModelError: as raised by the method's function.
    """
    if method not in COMPRESSORS:
        raise InputError(f"unknown compression method {method!r}; choose one of {', '.join(METHODS)}")
    known = {a for args in _METHOD_ARGS.values() for a in args}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"unknown compression option(s): {', '.join(unknown)}")
    kwargs = {k: v for k, v in options.items() if k in _METHOD_ARGS[method]}
    return COMPRESSORS[method](model_path, output, **kwargs)
