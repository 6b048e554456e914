"""``twinspect train``, ``twinspect compress`` and ``twinspect repair``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the model commands to the root app."""
