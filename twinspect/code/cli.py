"""CLI of the code side: the ``twinspect clones`` group (scan, index, query, eval)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``clones`` command group to the root app."""
    clones = typer.Typer(help="Scalable code clone detection (SSCD pipeline).", no_args_is_help=True)
    from twinspect.code.cli_eval import register_eval

    register_eval(clones)
    app.add_typer(clones, name="clones")
