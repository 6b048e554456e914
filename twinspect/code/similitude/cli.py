"""CLI of program similitude: ``twinspect similitude PATH... [OPTIONS]``.

Heavy libraries (tree-sitter grammars, scikit-learn, matplotlib) are imported inside the command so
``twinspect --help`` stays fast. User errors are :class:`twinspect.errors.InputError` (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from twinspect.cli_options import VerboseOpt
from twinspect.errors import InputError

_FORMATS = ("table", "json", "csv")


def similitude_command(
    paths: Annotated[list[Path], typer.Argument(help="Program files or directories.", show_default=False,
                                                metavar="PATH...")],
    labels: Annotated[Optional[str], typer.Option(
        "--labels", help="'dirs' (label = parent folder name) or a CSV file of path,label rows.")] = None,
    measure: Annotated[str, typer.Option(
        "--measure", "-m", help="wl-tokens (WL over the CFG + token n-grams), cfg, node-sym, normalized-node-sym or lav.")] = "wl-tokens",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
    plots: Annotated[Optional[Path], typer.Option(
        "--plots", metavar="DIR", help="Write heatmap.png and the 2-D projection (mds.png or pca.png) into this directory.")] = None,
    projection: Annotated[str, typer.Option(
        "--projection", help="2-D projection of --plots: mds (classical MDS) or pca.")] = "mds",
    clusters: Annotated[Optional[int], typer.Option(
        "--clusters", help="Number of agglomerative clusters (default: chosen by silhouette, 2-10).")] = None,
    program_per_dir: Annotated[bool, typer.Option(
        "--program-per-dir", help="Each directory holding source files is one program.")] = False,
    language: Annotated[Optional[str], typer.Option(
        "--language", "-l", help="Parse every file as this language (python, java, c, cpp).")] = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-j", help="Worker processes for --measure lav (default: the CPUs available, at most 8).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr, no table.")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Whole-program similarity from control-flow graphs, with clusters, silhouette and plots."""
    from twinspect.code.similitude.analysis import analyze
    from twinspect.code.similitude.report import PROJECTIONS, to_csv, to_json, write_plots, write_text

    if fmt not in _FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"choose one of: {', '.join(_FORMATS)}")
    if projection not in PROJECTIONS:
        raise InputError(f"unknown projection {projection!r}", hint=f"choose one of: {', '.join(PROJECTIONS)}")
    from twinspect._io import check_output_dir, check_output_file
    from twinspect.progress import print_plain

    if output is not None:  # an unwritable location fails before the programs are scored
        check_output_file(output, "report file")
    if plots is not None:
        check_output_dir(plots, "plots directory")
    result = analyze(paths, measure=measure, labels=labels, program_per_dir=program_per_dir,
                     clusters=clusters, language=language, verbose=0 if quiet else 1, workers=workers)
    if plots is not None:
        written = write_plots(result, plots, projection=projection)
        if not quiet:
            print_plain(f"wrote {len(written)} plots to {plots}")
    if fmt == "json":
        text = to_json(result)
    elif fmt == "csv":
        text = to_csv(result)
    else:
        text = None
    if output is not None:
        if text is None:  # -f table -o FILE: the terminal tables as plain text
            from twinspect._io import atomic_write

            with atomic_write(output) as fh:
                _print_table(result, file=fh)
        else:
            write_text(text, output)
        if not quiet:
            print_plain(f"wrote {output} ({len(result.paths)} programs, {fmt})")
    elif text is not None:
        sys.stdout.write(text)
    elif not quiet:
        _print_table(result)


def _print_table(result, file=None) -> None:  # type: ignore[no-untyped-def]
    """Print the programs table, the similarity matrix (up to 15 programs) and the summary lines, on
    stdout or into ``file`` (plain text, no colours)."""
    from rich.console import Console

    from twinspect.reports.table import print_table

    console = Console() if file is None else Console(file=file, width=200, no_color=True)
    names = [Path(p).stem for p in result.paths]
    rows = [[p, lab or "", int(c), g.n_nodes, g.n_edges] for p, lab, c, g in
            zip(result.paths, result.labels, result.clusters, result.graphs)]
    print_table(rows, ["program", "label", "cluster", "nodes", "edges"], title=f"{len(rows)} programs", console=console)
    if len(names) <= 15:
        print_table([[n, *row] for n, row in zip(names, result.matrix.tolist())], ["", *names],
                    title=f"similarity ({result.measure})", console=console)
    sil = "n/a (fewer than two labels)" if result.silhouette is None else f"{result.silhouette:.3f}"
    console.print(f"measure {result.measure}; silhouette {sil}; {result.k} clusters; "
                  f"{len(result.skipped)} skipped", highlight=False)
    if "lav" in result.details:
        d = result.details["lav"]
        console.print(f"LAV iterations to eps {d['eps']:g}: mean {d['iterations_mean']:.1f}, max "
                      f"{d['iterations_max']} (cap {d['max_iter']}; {d['unconverged_pairs']} pairs hit it)",
                      highlight=False)
    for s in result.skipped:
        console.print(f"skipped {s['path']}: {s['reason']}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``similitude`` command to the root app."""
    app.command("similitude", no_args_is_help=True)(similitude_command)
