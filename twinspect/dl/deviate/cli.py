"""``twinspect deviate``: search for inputs where a compressed model disagrees with its original."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``deviate`` command to the root app."""
