"""``twinspect deviate``: search for inputs where a compressed model disagrees with its original.

Examples::

    twinspect deviate --pair lenet1 --seeds 100 -o runs/lenet1
    twinspect deviate orig.h5 comp.tflite --data mnist --preprocess unit --algorithm diffchaser -o runs/x
    twinspect deviate --pair lenet1 --seeds 500 -o runs/lenet1 --resume     # continue / extend a run
    twinspect deviate report runs/lenet1 -f html -o lenet1.html              # a page of the triggers

Everything (models, data, options, output directory) is validated before the run directory is
created; a user error prints one line and exits 2. An output directory that cannot be created or
written (read-only file system, no permission, a file in the way) is found before any data or model
is loaded. Heavy libraries are imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from twinspect.cli_options import DefaultCommandGroup, VerboseOpt, check_format
from twinspect.errors import InputError


def deviate(
    original: Annotated[Optional[Path], typer.Argument(help="Original model file (.h5/.keras/.tflite/.onnx/.pt).", show_default=False)] = None,
    compressed: Annotated[Optional[Path], typer.Argument(help="Compressed model file.", show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Run directory to write (results.jsonl, triggers/, summary.json).")] = None,
    data: Annotated[Optional[str], typer.Option("--data", help="Seed images: mnist, cifar10 or an .npz with arrays x (and y).")] = None,
    split: Annotated[str, typer.Option("--split", help="Dataset split for mnist/cifar10.")] = "test",
    preprocess: Annotated[Optional[str], typer.Option("--preprocess", help="Preprocessing preset for both models (unit, cifar10-dflare, ...); default: model metadata, else unit.")] = None,
    pair: Annotated[Optional[str], typer.Option("--pair", help="Use a shared DFlare pair instead of two paths: lenet1, lenet5 or resnet.")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Number of seed images (a seeded random sample of the dataset).")] = 500,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the run (seed sample and every search).")] = 0,
    algorithm: Annotated[str, typer.Option("--algorithm", "-a", help="auto (default: guided when the original or --surrogate gives an input gradient, else margin), margin (the compressed model's margin on the seed's label, square-window changes near the seed, the original kept right; black-box on both models), guided (the margin search started where the original's input gradient meets its decision boundary; needs a float torch or Keras original, or --surrogate), dflare (the DFlare paper), dflare-r (uniform operator choice), dflare-d (distance-only fitness) or diffchaser.")] = "auto",
    surrogate: Annotated[Optional[Path], typer.Option("--surrogate", help="-a guided or auto: a float torch or Keras model of the original's function whose input gradient guides the first steps (e.g. the .pt an ONNX original was exported from); default: the original itself.")] = None,
    second: Annotated[Optional[str], typer.Option("--second", help="-a guided or auto: margin (also run the margin search from the seed where the guided trigger is missing, not a compressed-model error or above 48 levels L∞, and keep the better one; the default) or none (the guided search alone).")] = None,
    second_max_queries: Annotated[Optional[int], typer.Option("--second-max-queries", help="-a guided or auto: the most search queries the second search may spend on a seed (default 200, benchmarks/results/deviate_second_cap_notes.md; 0 = no cap: all of the seed's budget left).")] = None,
    minimize_flat: Annotated[Optional[bool], typer.Option("--minimize-flat/--no-minimize-flat", help="-a margin, guided or auto: end each trigger's minimisation with the flat-region pass (drop the change where the seed is flat, e.g. an MNIST background, and scale the rest back to the boundary, L∞ up to 1.25× but never past 48 levels; about 30-40 more minimisation queries a trigger). Default: on (--no-minimize-flat turns it off).")] = None,
    minimize_pixel_order: Annotated[Optional[str], typer.Option("--minimize-pixel-order", help="-a margin, guided or auto: the order in which the minimisation's single-pixel pass tries restoring changed pixels: ssim (the pixels whose restoring raises SSIM most first, from SSIM's gradient, no query; the default, benchmarks/results/deviate_pixel_order_notes.md) or largest (largest change first, the order before 2026-11-29).")] = None,
    skip_orig_wrong: Annotated[Optional[bool], typer.Option("--skip-orig-wrong/--search-orig-wrong", help="With labelled seeds: set aside the seeds on which the original model is wrong (the two models agreeing there), without a search, and count them apart from the searched seeds, like seeds where the models already disagree; no trigger near such a seed is a compressed-model error unless the search first moves the original onto the true label. --search-orig-wrong searches them like any other seed (the behaviour before 2026-11-27). Default: on for -a auto, margin and guided (benchmarks/results/deviate_cifar_notes.md), off for DFlare and DiffChaser (as their papers); unlabelled seeds are always searched.")] = None,
    pair_gradient: Annotated[Optional[bool], typer.Option("--pair-gradient/--no-pair-gradient", help="-a guided or auto: where the original crosses first on its own gradient and the compressed model also gives an input gradient (a float torch or Keras copy: pruned, distilled; an ONNX Runtime dynamic-int8 or a quantised TFLite model through a differentiable stand-in of its quantised graph; not other ONNX Runtime models), first try projected gradient steps on both models' margins (the compressed model's down, the original's held up) up to 48 levels L∞. Default: on (benchmarks/results/deviate_standin_notes.md).")] = None,
    pair_restarts: Annotated[Optional[int], typer.Option("--pair-restarts", help="-a guided or auto: when the pair's direction (--pair-gradient) found no compressed-model error, projected gradient steps on both models' hinge margins from this many starts at once, at 24, 36 and 48 levels L∞ (one query for the point found; 0 = off). Default: see benchmarks/results/deviate_pair_restarts_notes.md.")] = None,
    max_queries: Annotated[Optional[int], typer.Option("--max-queries", help="Budget per seed: generated inputs, each sent once to both models (default: none).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Budget per seed in seconds (0 = none).")] = 180.0,
    pop_size: Annotated[int, typer.Option("--pop-size", help="DiffChaser: population size.")] = 1000,
    crossover_rate: Annotated[float, typer.Option("--crossover-rate", help="DiffChaser: crossover probability.")] = 0.5,
    mutation_rate: Annotated[float, typer.Option("--mutation-rate", help="DiffChaser: mutation probability per child.")] = 0.5,
    pixels: Annotated[Optional[str], typer.Option("--pixels", help="Pixel handling of the mutations: float (float32 images clipped to [0, 255], as the DFlare paper describes; the default preset's) or uint8-wrap (the public DFlare code's numpy uint8 cast: truncate toward zero, then wrap modulo 256; the reference preset's).")] = None,
    preset: Annotated[str, typer.Option("--preset", help="DFlare settings: default (the paper's description) or reference (the public DFlare code: its 7 operators and parameter ranges, uint8 casting, initial best D of 0). Explicit options override it.")] = "default",
    max_linf: Annotated[Optional[float], typer.Option("--max-linf", help="Change budget: no candidate differs from its seed by more than L pixel levels (1-255) in any value; candidates are projected back before they reach a model.")] = None,
    min_ssim: Annotated[Optional[float], typer.Option("--min-ssim", help="Change budget: candidates with SSIM to their seed below S (0 < S <= 1) are rejected without a query.")] = None,
    minimize: Annotated[bool, typer.Option("--minimize/--no-minimize", help="Shrink each trigger toward its seed while it still triggers (queries reported apart).")] = True,
    require: Annotated[Optional[str], typer.Option("--require", help="compressed-error: a trigger counts only when the original model still gives the seed's true label.")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", help="Parallel worker processes (each loads the models).")] = 1,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --output (skip finished seeds; same options required).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, no summary table.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Summary on stdout: table or json.")] = "table",
    verbose: VerboseOpt = False,
) -> None:
    """Find inputs on which a compressed model's top-1 label deviates from its original model's.

    Runs the guided search (the margin search started on the original's input gradient; the default when the original or --surrogate gives one), the margin search (the default otherwise), DFlare (Tian et al., TOSEM 2023) or the DiffChaser baseline from seed images (seeds where the models already disagree are counted apart). Writes one line per seed to RUN_DIR/results.jsonl, triggering inputs to RUN_DIR/triggers/ and the success rate, query statistics and trigger distances to RUN_DIR/summary.json.

    `twinspect deviate PAIR-OPTIONS` is `twinspect deviate search PAIR-OPTIONS`; `twinspect deviate report RUN_DIR` prints or writes a finished run's report.
    """
    import json

    import numpy as np

    from twinspect.dl.deviate.results import seed_list, summary_rows
    from twinspect.dl.deviate.runner import ALGORITHMS, load_model, run_search

    # -- options ---------------------------------------------------------------------------------
    if output is None:
        raise InputError("give the run directory with --output/-o")
    check_format(fmt, ("table", "json"))
    if algorithm not in ALGORITHMS:
        raise InputError(f"unknown --algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if pair is not None:
        if original is not None or compressed is not None:
            raise InputError("give either --pair or the ORIGINAL and COMPRESSED model paths, not both")
        from twinspect.dl.data import dflare_pair

        original, compressed, pair_pre, pair_data = dflare_pair(pair)
        data = data or pair_data
        preprocess = preprocess or pair_pre
    if original is None or compressed is None:
        raise InputError("give the ORIGINAL and COMPRESSED model paths (or --pair lenet1|lenet5|resnet)")
    if data is None:
        raise InputError("give the seed images with --data mnist|cifar10|FILE.npz")
    if seeds < 1:
        raise InputError(f"--seeds must be >= 1, got {seeds}")
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if timeout < 0:
        raise InputError(f"--timeout must be >= 0, got {timeout}")
    if max_queries is not None and max_queries < 1:
        raise InputError(f"--max-queries must be >= 1, got {max_queries}")
    if timeout == 0 and max_queries is None:
        raise InputError("--timeout 0 needs --max-queries: the search would never stop")
    if max_linf is not None and not 1 <= max_linf <= 255:
        raise InputError(f"--max-linf must be in 1..255 pixel levels, got {max_linf}")
    if min_ssim is not None and not 0 < min_ssim <= 1:
        raise InputError(f"--min-ssim must be in (0, 1], got {min_ssim}")
    if require not in (None, "compressed-error"):
        raise InputError(f"unknown --require {require!r}; the only requirement is compressed-error")

    from twinspect.dl.deviate.dflare import PRESETS
    from twinspect.dl.deviate.mutations import PIXEL_MODES

    if pixels is not None and pixels not in PIXEL_MODES:
        raise InputError(f"unknown --pixels {pixels!r}; choose one of {', '.join(PIXEL_MODES)}")
    if preset not in PRESETS:
        raise InputError(f"unknown --preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if preset != "default" and not algorithm.startswith("dflare"):
        raise InputError(f"--preset {preset} applies to DFlare, not to --algorithm {algorithm}")
    if pixels is not None and algorithm in ("margin", "guided", "auto"):
        raise InputError(f"--pixels applies to DFlare and DiffChaser, not to --algorithm {algorithm} (float pixels)")
    params: dict = {"max_queries": max_queries, "timeout": None if timeout == 0 else timeout,
                    "max_linf": max_linf, "min_ssim": min_ssim, "minimize": minimize, "require": require}
    if pixels is not None:
        params["pixels"] = pixels
    if algorithm.startswith("dflare"):
        params["preset"] = preset
    if algorithm == "diffchaser":
        params.update(pop_size=pop_size, crossover_rate=crossover_rate, mutation_rate=mutation_rate)
    if surrogate is not None and algorithm not in ("guided", "auto"):
        raise InputError(f"--surrogate applies to --algorithm guided or auto, not to {algorithm}")
    if second is not None:
        from twinspect.dl.deviate.guided import SECONDS

        if algorithm not in ("guided", "auto"):
            raise InputError(f"--second applies to --algorithm guided or auto, not to {algorithm}")
        if second != "none" and second not in SECONDS:
            raise InputError(f"unknown --second {second!r}; choose {' or '.join((*SECONDS, 'none'))}")
        params["second"] = None if second == "none" else second
    if second_max_queries is not None:
        if algorithm not in ("guided", "auto"):
            raise InputError(f"--second-max-queries applies to --algorithm guided or auto, not to {algorithm}")
        if second_max_queries < 0:
            raise InputError(f"--second-max-queries must be >= 0 (0 = no cap), got {second_max_queries}")
        params["second_max_queries"] = second_max_queries or None
    if minimize_flat is not None:
        if algorithm not in ("margin", "guided", "auto"):
            raise InputError(f"--minimize-flat applies to --algorithm margin, guided or auto, not to {algorithm}")
        params["minimize_flat"] = minimize_flat
    if minimize_pixel_order is not None:
        from twinspect.dl.deviate.minimize import PIXEL_ORDERS

        if algorithm not in ("margin", "guided", "auto"):
            raise InputError(f"--minimize-pixel-order applies to --algorithm margin, guided or auto, not to {algorithm}")
        if minimize_pixel_order not in PIXEL_ORDERS:
            raise InputError(f"unknown --minimize-pixel-order {minimize_pixel_order!r}; choose {' or '.join(PIXEL_ORDERS)}")
        params["minimize_pixel_order"] = minimize_pixel_order
    if skip_orig_wrong is not None:
        params["skip_orig_wrong"] = skip_orig_wrong
    if pair_gradient is not None:
        if algorithm not in ("guided", "auto"):
            raise InputError(f"--pair-gradient applies to --algorithm guided or auto, not to {algorithm}")
        params["pair_gradient"] = pair_gradient
    if pair_restarts is not None:
        if algorithm not in ("guided", "auto"):
            raise InputError(f"--pair-restarts applies to --algorithm guided or auto, not to {algorithm}")
        if pair_restarts < 0:
            raise InputError(f"--pair-restarts must be >= 0 (0 = off), got {pair_restarts}")
        params["pair_restarts"] = pair_restarts

    # -- inputs (all validated before anything is written; cheap checks first) ----------------
    from twinspect._io import require_readable
    from twinspect.dl.data import load_images

    require_readable(original, "model file")
    require_readable(compressed, "model file")
    if surrogate is not None:
        require_readable(surrogate, "model file")
        params["surrogate"] = {"path": str(surrogate), "preprocess": preprocess}
    check_run_dir(output, resume)
    x, y = load_images(data, split=split)
    if require is not None and y is None:
        raise InputError("--require compressed-error needs labelled seeds (an .npz with a y array)", data)
    if seeds > len(x):
        raise InputError(f"--seeds {seeds} is more than the {len(x)} images of the data",
                         None if data in ("mnist", "cifar10") else data)
    indices = seed_list(len(x), seeds, seed)
    dataset = data if data in ("mnist", "cifar10") else str(Path(data).resolve())
    if data in ("mnist", "cifar10") and split != "test":
        dataset = f"{data}:{split}"
    specs = [{"path": str(path), "preprocess": preprocess} for path in (original, compressed)]
    orig_clf, comp_clf = load_model(specs[0]), load_model(specs[1])

    summary = run_search(
        specs[0],
        specs[1],
        x,
        y,
        indices,
        algorithm,
        output,
        workers=workers,
        resume=resume,
        quiet=quiet,
        seed=seed,
        params=params,
        dataset=dataset,
        models=(orig_clf, comp_clf),
    )

    if fmt == "json":
        typer.echo(json.dumps(summary, indent=2, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    elif not quiet:
        from twinspect.reports.table import print_table

        title = f"{algorithm}: {orig_clf.name} vs {comp_clf.name} ({summary['out_dir']})"
        print_table(summary_rows(summary), headers=["metric", "value"], title=title)
        aside = summary.get("set_aside_orig_wrong", 0)
        if aside:
            typer.echo(f"{aside} of {summary['seeds']} seeds were set aside, not searched: the original model is wrong on "
                       "them, so no trigger near them is a compressed-model error (--search-orig-wrong searches them too).")


def check_run_dir(path: Path, resume: bool = False) -> None:
    """Fail fast when the run directory cannot be used, before any data or model work.

    Refuses an existing file, an unrelated non-empty directory (one without a run; ``clones index``
    refuses the same), a directory holding a run without ``--resume``, and a location that cannot be
    created or written (see :func:`twinspect._io.check_output_dir`: nothing is left behind).

    Args:
        path: the ``--output`` run directory.
        resume: ``--resume`` was given.

    Raises:
        InputError: naming ``path``.
    """
    from twinspect._io import check_output_dir
    from twinspect.dl.deviate.results import RunDir

    RunDir(path).check_location(resume)
    check_output_dir(path, "run directory")


def report(
    run_dir: Annotated[Path, typer.Argument(help="A `twinspect deviate` run directory.", show_default=False,
                                            metavar="RUN_DIR")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Report format: html (a self-contained page of the "
                                     "triggers), table or json (the run's summary).")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file "
                                                   "(atomically); html default: RUN_DIR/report.html.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Report of a finished run: an HTML page of its triggers (-f html) or its summary (table, json)."""
    from twinspect.dl.deviate.report import run_summary, write_html_report

    check_format(fmt, ("html", "table", "json"))
    if fmt == "html":
        path = write_html_report(run_dir, output)
        if not quiet:
            typer.echo(str(path))
        return
    from twinspect.cli_options import emit_report
    from twinspect.dl.deviate.results import summary_rows

    if output is not None:
        from twinspect._io import check_output_file

        check_output_file(output, "report file")
    summary = run_summary(run_dir)
    emit_report(summary, summary_rows(summary), ["metric", "value"], f"deviate run {run_dir}", fmt, output, quiet)


def register(app: typer.Typer) -> None:
    """Add the ``deviate`` command to the root app."""

    class _DeviateGroup(DefaultCommandGroup):
        default_command = "search"

    group = typer.Typer(
        cls=_DeviateGroup,
        help="Find inputs on which a compressed model's top-1 label deviates from its original model's.\n\n"
        "`twinspect deviate [ORIGINAL COMPRESSED] OPTIONS` runs a search (same as `twinspect deviate search ...`; "
        "see `twinspect deviate search --help` for its options); `twinspect deviate report RUN_DIR` reports a run.",
        no_args_is_help=True,
        subcommand_metavar="[ORIGINAL COMPRESSED] OPTIONS | COMMAND [ARGS]...",
    )
    group.command("search", no_args_is_help=True)(deviate)
    group.command("report")(report)
    app.add_typer(group, name="deviate")
