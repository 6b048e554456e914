"""The options every ``twinspect`` command shares (docs/CLI.md), defined once.

``-q/--quiet``, ``-v/--verbose`` (third-party logs allowed; read by :func:`twinspect.cli.main` from the
argument list before any library is imported), ``-f/--format`` and ``-o/--output`` of report
commands, and :func:`emit_report` / :func:`emit_text`, which print or write a report the same way everywhere;
:class:`DefaultCommandGroup`, the group that sends arguments naming no sub-command to a default one
(``clones`` → ``scan``, ``deviate`` → ``search``).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from twinspect.errors import InputError


class DefaultCommandGroup(TyperGroup):
    """A typer group that routes arguments to a default sub-command.

    If the first argument is neither a registered sub-command nor a help option, the default
    command's name (:attr:`default_command`) is inserted in front of the arguments.
    """

    #: the sub-command that receives arguments naming no sub-command (set by each group's subclass)
    default_command = ""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        help_names = set(ctx.help_option_names or ["--help"])
        if args and args[0] not in self.commands and args[0] not in help_names:
            first = args[0]
            if not first.startswith("-") and not os.path.exists(first):
                close = difflib.get_close_matches(first, list(self.commands), n=1)
                if close:  # a mistyped sub-command rather than a missing PATH
                    ctx.fail(f"No such command or path {first!r}. Did you mean {close[0]!r}?")
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors (no progress, no summary).")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="More detail; also let third-party libraries "
                                          "(TensorFlow, absl, Keras, torch) log to stderr.")]
PlotsOpt = Annotated[Optional[Path], typer.Option("--plots", metavar="DIR", help="Write the plots (PNG) into DIR (created).")]


def format_option(formats: Sequence[str], default: str = "table") -> Any:
    """A ``-f/--format`` option listing ``formats`` in its help."""
    return typer.Option(default, "--format", "-f", help="Report format: " + ", ".join(formats) + ".")


def check_format(fmt: str, formats: Sequence[str]) -> None:
    """Raise :class:`InputError` (exit 2) when ``fmt`` is not one of ``formats``."""
    if fmt not in formats:
        raise InputError(f"unknown --format {fmt!r}; choose one of {', '.join(formats)}")


def emit_text(text: str, output: Optional[Path] = None, show: bool = True) -> None:
    """Write a rendered report atomically to ``output``, or else echo it on stdout when ``show``.

    Args:
        text: the report, ending in a newline.
        output: report file (``-o``), or None for stdout.
        show: print it when there is no ``output`` (False: ``-q`` with a summary table, which is not the
            report itself).
    """
    from twinspect._io import atomic_write

    if output is not None:
        with atomic_write(output) as fh:
            fh.write(text)
    elif show:
        typer.echo(text, nl=False)


def emit_report(
    data: Any,
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    title: str,
    fmt: str,
    output: Optional[Path] = None,
    quiet: bool = False,
    floatfmt: str = ".2f",
) -> None:
    """Print or write a report the conventional way.

    ``-f json`` prints ``data`` as JSON on stdout, or writes it atomically to ``output``; ``-f table``
    prints the table on stdout (not with ``quiet``), or writes it as markdown to ``output``.

    Args:
        data: the JSON-serialisable report (numpy scalars and paths are converted).
        rows: table rows; headers: their column names; title: the table's title.
        fmt: ``"table"`` or ``"json"``.
        output: report file, or None for stdout.
        quiet: print no table on the terminal (a JSON report is still printed: it is the output).
        floatfmt: format of float cells.
    """
    from twinspect._io import json_default
    from twinspect.reports.table import markdown_table, print_table

    if fmt == "json":
        emit_text(json.dumps(data, indent=2, default=json_default) + "\n", output)
    elif output is not None:
        emit_text(f"{title}\n\n" + markdown_table(rows, headers, floatfmt=floatfmt) + "\n", output)
    elif not quiet:
        print_table(rows, headers, title=title, floatfmt=floatfmt)
