"""``twinspect clones eval``: benchmark evaluation commands (SSCD Company-C, BigCloneBench, POJ-104)."""

from __future__ import annotations

import typer


def register_eval(clones: typer.Typer) -> None:
    """Add the ``eval`` sub-group to the ``clones`` group."""
