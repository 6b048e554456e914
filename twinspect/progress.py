"""Progress display for long runs (parsing, embedding, search, seeds), silenced by ``--quiet``.

All capabilities use :func:`progress` so that the look and the quiet switch are the same everywhere.
Progress goes to stderr, so stdout stays clean for JSON piped to other tools.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")

stderr_console = Console(stderr=True)


def print_plain(message: str, *, prefix: str = "", prefix_style: str | None = None, console: Console | None = None) -> None:
    """Print one message on stderr exactly as given: no rich markup, emoji codes or highlighting.

    Paths and values in messages are user text: ``config.c:abc:`` or ``x:up:y`` must not turn into
    emoji, nor ``[b]`` into bold. Every user-facing line the CLI prints about a file (errors,
    "wrote FILE" notes) goes through here.

    Args:
        message: the text (printed literally, soft-wrapped: one logical line stays one line).
        prefix: printed before ``message`` (e.g. ``"error: "``).
        prefix_style: rich style of the prefix only (e.g. ``"bold red"``).
        console: where to print (default: the shared stderr console).
    """
    from rich.text import Text

    text = Text(prefix, style=prefix_style or "") if prefix else Text()
    text.append(message)
    (console or stderr_console).print(text, highlight=False, soft_wrap=True, emoji=False, markup=False)


class _NullTask:
    def advance(self, n: int = 1) -> None:  # noqa: D401 - tiny shim
        pass


class Tracker:
    """A handle on one progress bar: ``advance(n)`` moves it, ``total`` can be updated."""

    def __init__(self, progress: Progress | None, task_id: TaskID | None):
        self._progress = progress
        self._task = task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, **kwargs) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, **kwargs)


@contextlib.contextmanager
def progress(description: str, total: int | None = None, quiet: bool = False) -> Iterator[Tracker]:
    """Show one progress bar on stderr for the duration of the ``with`` block.

    Args:
        description: what is being done ("parsing", "embedding", "seeds"...).
        total: number of steps, or None for an indeterminate bar.
        quiet: show nothing (scripts, tests).

    Yields:
        A :class:`Tracker`; call ``advance(n)`` after each ``n`` steps. With ``total=0`` (nothing to
        do) no bar is shown: an empty ``0/0`` bar would only precede the error or summary line.
    """
    if quiet or total == 0:
        yield Tracker(None, None)
        return
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=stderr_console, transient=False) as prog:
        task = prog.add_task(description, total=total)
        yield Tracker(prog, task)


def track(items: Iterable[T], description: str, total: int | None = None, quiet: bool = False) -> Iterator[T]:
    """Iterate over ``items`` showing progress (see :func:`progress`)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(description, total=total, quiet=quiet) as bar:
        for item in items:
            yield item
            bar.advance()
