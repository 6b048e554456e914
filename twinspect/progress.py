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
        A :class:`Tracker`; call ``advance(n)`` after each ``n`` steps.
    """
    if quiet:
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
