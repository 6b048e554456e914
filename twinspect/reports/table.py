"""Terminal tables (rich) used by every command's summary output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

stdout_console = Console()


def _fmt(value: Any, floatfmt: str) -> str:
    if isinstance(value, float):
        return format(value, floatfmt)
    return "" if value is None else str(value)


def render_table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], title: str | None = None, floatfmt: str = ".2f"
) -> Table:
    """Build a :class:`rich.table.Table` from rows of values (floats formatted with ``floatfmt``)."""
    table = Table(title=title, show_lines=False)
    for i, head in enumerate(headers):
        table.add_column(head, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(_fmt(v, floatfmt) for v in row))
    return table


def print_table(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    title: str | None = None,
    floatfmt: str = ".2f",
    console: Console | None = None,
) -> None:
    """Print rows as a table on stdout (or the given console)."""
    (console or stdout_console).print(render_table(rows, headers, title=title, floatfmt=floatfmt))


def markdown_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], floatfmt: str = ".2f") -> str:
    """Render rows as a GitHub-flavoured markdown table (for benchmark output and closing notes)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(v, floatfmt) for v in row) + " |")
    return "\n".join(lines)
