"""The ``twinspect`` command: one sub-command group per capability, nothing else.

Each capability contributes its commands through a ``register(app)`` function in its own CLI
module (heavy libraries are imported inside the commands, so ``twinspect --help`` stays fast).
User errors (:class:`twinspect.errors.TwinspectError`) print one line and exit 2; Ctrl-C exits 130
without a traceback and without half-written outputs.
"""

from __future__ import annotations

import logging
import os
import sys

# Quantised torch models print a C++ deprecation notice in every process; keep the CLI's output clean.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import typer
from rich.console import Console

from twinspect import __version__
from twinspect.errors import TwinspectError

app = typer.Typer(
    name="twinspect",
    help="Find twins and where twins diverge: code clones, model clones, deviated behaviour.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_err = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        print(f"twinspect {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """twinspect: find twins and where twins diverge."""


def _register_all() -> None:
    from twinspect.code import cli as code_cli
    from twinspect.dl import cli as dl_cli

    code_cli.register(app)
    dl_cli.register(app)


_register_all()


def _setup_logging() -> None:
    """Notices from the library (logger "twinspect", e.g. "model outputs logits") go to stderr."""
    logger = logging.getLogger("twinspect")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("note: %(message)s"))
        logger.addHandler(handler)
    quiet = any(a in ("-q", "--quiet") for a in (sys.argv[1:]))
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, map user errors to exit code 2 and Ctrl-C to 130."""
    _setup_logging()
    try:
        typer.main.get_command(app).main(args=argv, prog_name="twinspect", standalone_mode=True)
    except TwinspectError as exc:
        _err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err.print("interrupted")
        sys.exit(130)
