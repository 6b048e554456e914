"""The ``twinspect`` command: one sub-command group per capability, nothing else.

Each capability contributes its commands through a ``register(app)`` function in its own CLI
module (heavy libraries are imported inside the commands, so ``twinspect --help`` stays fast).
User errors (:class:`twinspect.errors.TwinspectError`) print one line and exit 2; Ctrl-C exits 130
without a traceback and without half-written outputs.
"""

from __future__ import annotations

import contextlib
import importlib
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


#: Capability CLI modules, each exposing ``register(app: typer.Typer) -> None``.
CAPABILITY_CLIS: tuple[str, ...] = (
    "twinspect.code.cli",
    "twinspect.dl.cli",
    "twinspect.dl.modelclones.cli",
    "twinspect.code.similitude.cli",
    "twinspect.dl.fuzz.cli",
)


def _register_all() -> None:
    for name in CAPABILITY_CLIS:
        importlib.import_module(name).register(app)


_register_all()


def _setup_logging(argv: list[str]) -> None:
    """Send library notices (logger "twinspect", e.g. "model outputs logits") to stderr.

    Args:
        argv: the command-line arguments being run (without the program name); ``-q``/``--quiet``
            among them lowers the level to warnings.
    """
    logger = logging.getLogger("twinspect")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("note: %(message)s"))
        logger.addHandler(handler)
    quiet = any(a in ("-q", "--quiet") for a in argv)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


def print_error(message: str) -> None:
    """Print a user error as one line on stderr: ``error: MESSAGE``, the message taken literally.

    The one error path of the CLI: paths and values in ``message`` are neither rich markup
    (``[b]``) nor emoji codes (``config.c:abc:`` stays as typed).
    """
    from twinspect.progress import print_plain

    print_plain(message, prefix="error: ", prefix_style="bold red", console=_err)


def _is_verbose(argv: list[str]) -> bool:
    """Whether ``-v``/``--verbose`` (alone or in a bundle of short flags such as ``-qv``) is among ``argv``."""
    return any(a == "--verbose" or (a.startswith("-") and not a.startswith("--") and "v" in a[1:] and a[1:].isalpha())
               for a in argv if a != "--")


def _usage_error_line(exc: Exception) -> str:
    """One line for a click usage error: its message and where to find the usage (no usage block, no panel)."""
    message = exc.format_message().strip().replace("\n", " ")  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


class _NeverRaised(Exception):
    """Stands in for an exception class the installed click does not have."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, map user errors to exit code 2 and Ctrl-C to 130.

    Every user error (a :class:`~twinspect.errors.TwinspectError` or a click usage error such as an
    unknown option or a value of the wrong type) prints one line ``error: ...`` on stderr and exits 2.
    Unless ``-v/--verbose`` is given, third-party log noise is silenced first
    (:mod:`twinspect._quiet`), also for the worker processes a command starts.

    Args:
        argv: arguments without the program name; ``None`` reads ``sys.argv[1:]``.
    """
    from typer import Abort

    try:  # typer >= 0.2x vendors click as typer._click; older releases use the click package
        from typer._click import exceptions as click_exc
    except ImportError:
        from click import exceptions as click_exc  # type: ignore[no-redef]
    ClickException, UsageError = click_exc.ClickException, click_exc.UsageError
    # click < 8.2 has no NoArgsIsHelpError (it exits through SystemExit after printing the help)
    NoArgsIsHelpError: type[Exception] = getattr(click_exc, "NoArgsIsHelpError", _NeverRaised)

    from twinspect import _quiet

    args = list(sys.argv[1:] if argv is None else argv)
    _setup_logging(args)
    verbose = _is_verbose(args)
    if not verbose:
        _quiet.silence_third_party()
    # native start-up lines (absl, oneDNN, TFLite) ignore every switch: filter fd 2 itself, but only when
    # stderr is the process's own (not a test's capture)
    native_filter = not verbose and sys.stderr is sys.__stderr__
    code: int = 0
    try:
        with _quiet.filter_native_stderr() if native_filter else contextlib.nullcontext():
            result = typer.main.get_command(app).main(args=args, prog_name="twinspect", standalone_mode=False)
            code = result if isinstance(result, int) else 0
    except TwinspectError as exc:
        print_error(str(exc))
        code = exc.exit_code
    except NoArgsIsHelpError as exc:  # the help was printed
        code = getattr(exc, "exit_code", 2)
    except UsageError as exc:
        print_error(_usage_error_line(exc))
        code = 2
    except ClickException as exc:
        print_error(exc.format_message())
        code = exc.exit_code
    except (KeyboardInterrupt, Abort):
        _err.print("interrupted")
        code = 130
    sys.exit(code)  # also 0: callers (and tests) see SystemExit as from click's standalone mode
