"""CLI of the deep-learning side: ``deviate`` (search), ``repair``, ``train`` and ``compress``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the deep-learning commands to the root app."""
    from twinspect.dl import cli_train
    from twinspect.dl.deviate import cli as deviate_cli

    deviate_cli.register(app)
    cli_train.register(app)
