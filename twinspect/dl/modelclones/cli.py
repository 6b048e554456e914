"""``twinspect models compare``: all-pairs DL model clone analysis (see :mod:`twinspect.dl.modelclones.compare`;
rendering in :mod:`twinspect.dl.modelclones.report`).

Heavy libraries are imported inside the command (``twinspect --help`` stays fast).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from twinspect.cli_options import VerboseOpt
from twinspect.dl.modelclones.measures import LEVELS as _LEVELS

models_app = typer.Typer(
    name="models",
    help="DL model clone analysis: compare models at code, weight, representation and I/O level.",
    no_args_is_help=True,
)

def _check_inputs(models: list[Path], data: Optional[str], preprocess: Optional[str], threshold: float,
                  distill: Optional[str], calibration: Optional[Path], output: Optional[Path],
                  plots: Optional[Path]) -> None:
    """Every check of ``models compare`` that needs no model: values, data, files and output locations.

    Runs before the models are loaded (seconds per model), so that a typo in ``--data`` or an
    unwritable ``-o``/``--plots`` fails at once and nothing is written.

    Raises:
        InputError: naming the option or file.
    """
    import math

    from twinspect._io import check_output_dir, check_output_file, require_readable
    from twinspect.errors import InputError

    if not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
        raise InputError(f"--threshold must be a reuse score in [0, 1], got {threshold:g}")
    if len(models) < 2:
        raise InputError(f"model comparison needs at least two models, got {len(models)}")
    for m in models:
        require_readable(m, "model file")
    if preprocess is not None:
        from twinspect.dl.adapters.base import resolve_preprocess

        resolve_preprocess(preprocess)
    if distill is not None:
        from twinspect.dl.architectures import ARCHS

        if distill.lower() not in ARCHS:
            raise InputError(f"unknown --distill student {distill!r}; choose one of {', '.join(ARCHS)}")
    if calibration is not None:
        require_readable(calibration, "calibration file")
    if output is not None:
        check_output_file(output, "report file")
    if plots is not None:
        check_output_dir(plots, "plots directory")
    if data is not None and data != "uniform":
        from twinspect.dl.data import DATASETS, load_images

        if data not in DATASETS and Path(data).suffix.lower() != ".npz" and not Path(data).exists():
            raise InputError(f"unknown --data {data!r}; use {', '.join(DATASETS)}, uniform or a path to an .npz file")
        load_images(data, "test")  # a bad name or file fails here, not after the models are loaded


def compare_cmd(
    models: list[Path] = typer.Argument(..., help="Model files (.h5 .keras .tflite .onnx .pt .pt2), two or more."),
    code: Optional[list[Path]] = typer.Option(
        None, "--code", help="Training program (file or folder) of each model, in model order; repeat the option."
    ),
    data: Optional[str] = typer.Option(
        None, "--data", "-d",
        help="Comparison inputs: mnist, cifar10 (test sets), uniform (random pixels) or an .npz with x "
        "(default: the data set in the models' metadata, else uniform).",
    ),
    preprocess: Optional[str] = typer.Option(
        None, "--preprocess", help="Preprocessing preset for every model (default: model metadata, else x/255)."
    ),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json or csv."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file (atomically)."),
    plots: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Directory for one heatmap PNG per measure and per-pair CKA maps."),
    threshold: float = typer.Option(0.5, "--threshold", help="Reuse score at or above which a pair is listed as suspected derived."),
    n_inputs: int = typer.Option(500, "--inputs", help="Number of comparison inputs."),
    cka_inputs: int = typer.Option(256, "--cka-inputs", help="Inputs whose activations feed CKA."),
    distill: Optional[str] = typer.Option(
        None, "--distill", help="Distil every model into this common zoo student (e.g. lenet1) and compare the students' weights (slow)."
    ),
    levels: str = typer.Option(
        ",".join(_LEVELS), "--levels",
        help="Comma-separated subset of: " + ", ".join(_LEVELS) + ". 'baselines' = ModelDiff (ISSTA 2021) and "
        "DeepJudge's black-box RobD/JSD (S&P 2022), directional (row model = victim, needs a float torch model).",
    ),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="Reuse-score calibration JSON (default: the shipped one)."),
    peer_rule: bool = typer.Option(
        False, "--peer-rule",
        help="Lift the reuse score of a pair of different architectures to 0.9 when each model stands out among the "
        "other's architecture-mates (io_peer_z_min >= 0.7 and io_peer_z_max >= 2.5; needs 5 more models of each "
        "architecture): finds more distilled students, with more false flags (benchmarks/results/models_reuse_holdout4.md).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of input sampling, uniform inputs, DDV pairs, the baselines' attacks and distillation."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output, no table."),
    verbose: VerboseOpt = False,
) -> None:
    """Compare every pair of MODELS at the code, weight, representation and I/O levels, with a reuse score
    and the ModelDiff / DeepJudge baselines."""
    import json

    from twinspect._io import json_default
    from twinspect.cli_options import check_format, emit_text
    from twinspect.dl.modelclones import report
    from twinspect.dl.modelclones.compare import CompareConfig, compare_models, write_plots

    check_format(fmt, ("table", "json", "csv"))
    lv = tuple(s.strip() for s in levels.split(",") if s.strip())
    _check_inputs(models, data, preprocess, threshold, distill, calibration, output, plots)
    cfg = CompareConfig(
        data=data, n_inputs=n_inputs, cka_inputs=cka_inputs, preprocess=preprocess, seed=seed,
        distill_student=distill, threshold=threshold, calibration=None if calibration is None else str(calibration),
        peer_rule=peer_rule, levels=lv, verbose=0 if quiet else 1,
    )
    result = compare_models(models, code=code, config=cfg)
    if fmt == "json":
        text = json.dumps(result.to_json(), indent=2, default=json_default) + "\n"
    elif fmt == "csv":
        text = report.to_csv(result)
    else:
        text = report.to_markdown(result)
    from twinspect.progress import print_plain

    if output is not None or fmt != "table":
        emit_text(text, output)
        if output is not None and not quiet:
            print_plain(f"wrote {output} ({len(models)} models, {fmt})")
    elif not quiet:
        report.print_summary(result, threshold)
    if plots is not None:
        written = write_plots(result, plots)
        if not quiet:
            print_plain(f"wrote {len(written)} plots to {plots}")


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group (``models compare``) to the root app."""
    models_app.command("compare")(compare_cmd)
    app.add_typer(models_app, name="models")
