"""``twinspect train``, ``twinspect compress`` and ``twinspect repair``.

torch and scikit-learn are imported inside the command functions (``twinspect --help`` stays fast).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from twinspect.cli_options import QuietOpt, VerboseOpt, check_format, emit_report, format_option

# options train, compress and repair share
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="torch CPU threads (default $TWINSPECT_THREADS or 1).")]
TestSizeOpt = Annotated[Optional[int], typer.Option(
    "--test-size", help="Evaluate on N evenly spaced test images only (default: all).")]


def _set_threads(threads: Optional[int]) -> None:
    # (TORCH_CPP_LOG_LEVEL, against quantised TorchScript's C++ deprecation notice, is set by twinspect.cli)
    from twinspect.dl.adapters.torch import set_torch_threads

    set_torch_threads(threads)


def train_cmd(
    arch: str = typer.Argument(..., help="Architecture: lenet1, lenet4, lenet5, cnn, resnet20, resnet14, resnet8, vgg11."),
    data: str = typer.Option("mnist", "--data", "-d", help="mnist, cifar10 or an .npz with x and y."),
    output: Path = typer.Option(..., "--output", "-o", help="Output TorchScript file (.pt); metadata goes to <file>.json."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Epochs (default per architecture: 4 MNIST, 15 CIFAR)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Batch size."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate of the one-cycle schedule."),
    width: float = typer.Option(1.0, "--width", help="Channel multiplier (e.g. 0.5 halves every layer)."),
    seed: int = typer.Option(0, "--seed", help="Seed of initialisation, shuffling and augmentation."),
    train_size: Optional[int] = typer.Option(None, "--train-size", help="Train on a seeded random subset of N images."),
    test_size: TestSizeOpt = None,
    augment: Optional[bool] = typer.Option(None, "--augment/--no-augment", help="Random crop + flip (default: on for CIFAR nets)."),
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    fmt: str = format_option(("table", "json")),
    verbose: VerboseOpt = False,
) -> None:
    """Train a model-zoo architecture on MNIST/CIFAR-10 and save it as TorchScript with metadata."""
    from twinspect._io import check_output_file
    from twinspect.dl.train import save_model, train_model
    from twinspect.errors import InputError

    check_format(fmt, ("table", "json"))
    _set_threads(threads)
    if output.suffix.lower() not in (".pt", ".pth", ".ts"):
        raise InputError("output must be a TorchScript file ending in .pt, .pth or .ts", output)
    check_output_file(output, "model file")  # before the training, not after it
    res = train_model(arch, data, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, train_size=train_size,
                      width=width, augment=augment, test_size=test_size, quiet=quiet)
    save_model(res.module, output, res.meta)
    tr = res.meta["training"]
    row = [res.meta["arch"], str(data), res.meta["parameters"], tr["train_size"], tr["epochs"], 100 * res.test_accuracy,
           res.meta["test_size"], tr["time_s"]]
    headers = ["arch", "data", "params", "train imgs", "epochs", "test acc %", "test imgs", "train time s"]
    emit_report({"model": str(output), **dict(zip(headers, row))}, [row], headers, f"trained -> {output}", fmt,
                quiet=quiet)


def compress_cmd(
    model: Path = typer.Argument(..., help="Original model (.pt from `twinspect train`; distill also takes .h5/.lite/.onnx)."),
    method: str = typer.Option(..., "--method", "-m", help="quantize, prune or distill."),
    output: Path = typer.Option(..., "--output", "-o", help="Compressed model (.pt); metadata goes to <file>.json."),
    data: Optional[str] = typer.Option(None, "--data", "-d", help="Train/test data (default: the model's dataset)."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Calibration data for static quantisation (default: --data train split)."),
    calib_size: int = typer.Option(512, "--calib-size", help="Calibration images."),
    dynamic: bool = typer.Option(False, "--dynamic", help="Dynamic quantisation of Linear layers instead of static."),
    engine: str = typer.Option("x86", "--engine", help="Quantised backend: x86 or fbgemm."),
    sparsity: float = typer.Option(0.5, "--sparsity", help="Pruning: fraction of weights set to zero, in (0, 1)."),
    finetune_epochs: int = typer.Option(0, "--finetune-epochs", help="Pruning: fine-tuning epochs with the mask fixed."),
    student: Optional[str] = typer.Option(None, "--student", help="Distillation student arch (default lenet1 / resnet8)."),
    student_width: float = typer.Option(1.0, "--student-width", help="Student channel multiplier."),
    temperature: float = typer.Option(4.0, "--temperature", "-T", help="Distillation temperature T."),
    alpha: float = typer.Option(0.9, "--alpha", help="Weight of the soft-target term (1-alpha for hard labels)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Distillation epochs (default per student arch)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Batch size for distillation/fine-tuning."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate for distillation/fine-tuning."),
    train_size: Optional[int] = typer.Option(None, "--train-size", help="Seeded subset of the training split."),
    test_size: TestSizeOpt = None,
    seed: int = typer.Option(0, "--seed", help="Seed."),
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    fmt: str = format_option(("table", "json")),
    verbose: VerboseOpt = False,
) -> None:
    """Make the compressed twin of a model (quantize / prune / distill) and report how it deviates."""
    from twinspect.dl.compress import compress_model

    check_format(fmt, ("table", "json"))
    _set_threads(threads)
    res = compress_model(
        model, method, output, data=data, calibration=calibration, calib_size=calib_size, dynamic=dynamic,
        engine=engine, sparsity=sparsity, finetune_epochs=finetune_epochs, student=student,
        student_width=student_width, temperature=temperature, alpha=alpha, epochs=epochs, batch_size=batch_size,
        lr=lr, train_size=train_size, test_size=test_size, seed=seed, quiet=quiet,
    )
    c = res.meta["compression"]
    detail = {"quantize": c.get("mode"), "prune": f"sparsity {c.get('sparsity', 0):.3f}",
              "distill": f"{c.get('student')} ({c.get('student_parameters')} params)"}[method]
    row = [method, detail, 100 * res.original_accuracy, 100 * res.compressed_accuracy, res.disagreements,
           res.test_size, res.time_s]
    headers = ["method", "detail", "orig acc %", "comp acc %", "disagree", "test imgs", "time s"]
    emit_report({"model": str(output), **dict(zip(headers, row))}, [row], headers, f"{model.name} -> {output}", fmt,
                quiet=quiet)


def repair_cmd(
    run_dir: Path = typer.Argument(..., help="Deviation run directory (`twinspect deviate` output)."),
    output: Path = typer.Option(..., "--output", "-o", help="Repair output directory."),
    folds: int = typer.Option(5, "--folds", help="Cross-validation folds."),
    hidden: int = typer.Option(64, "--hidden", help="Hidden units of the repair perceptron."),
    max_iter: int = typer.Option(500, "--max-iter", help="Training iterations of the perceptron."),
    seed: int = typer.Option(0, "--seed", help="Seed of fold assignment and perceptron initialisation."),
    solver: str = typer.Option("lbfgs", "--solver", help="Perceptron solver: lbfgs, adam or sgd."),
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    fmt: str = format_option(("table", "json")),
    verbose: VerboseOpt = False,
) -> None:
    """Drepair: learn a perceptron that maps the compressed model's probabilities to the original's label."""
    from twinspect.dl.deviate.repair import repair_run

    check_format(fmt, ("table", "json"))
    _set_threads(threads)
    rep = repair_run(run_dir, output, folds=folds, hidden=hidden, max_iter=max_iter, seed=seed, solver=solver, quiet=quiet)
    def pct(v):  # a ratio without denominator (no deviated input in a fold) shows as "-"
        return "-" if v is None else 100.0 * v

    keys = ("repair_ratio", "inducing_ratio", "improvement_ratio")
    rows = [[f"fold {f['fold']}", f["n_deviated"], f["n_non_deviated"], *(pct(f[k]) for k in keys)] for f in rep["folds"]]
    rows.append(["mean", "", "", *(pct(rep["mean"][k]) for k in keys)])
    emit_report(rep, rows, ["fold", "deviated", "non-deviated", "repair %", "inducing %", "improvement %"],
                f"Drepair on {run_dir} -> {output}", fmt, quiet=quiet)


def register(app: typer.Typer) -> None:
    """Add the model commands (``train``, ``compress``, ``repair``) to the root app."""
    app.command("train")(train_cmd)
    app.command("compress")(compress_cmd)
    app.command("repair")(repair_cmd)
