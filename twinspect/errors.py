"""User-facing errors.

Every error a user can cause (bad path, bad file, bad model, bad index) is raised as a
:class:`TwinspectError` subclass. The CLI prints its message on one line and exits with
:attr:`TwinspectError.exit_code` (2); the Python API lets it propagate. Anything else is a bug.
"""

from __future__ import annotations

from pathlib import Path


class TwinspectError(Exception):
    """Base class of user-facing errors (CLI exit code 2).

    Args:
        message: what is wrong, in one sentence.
        path: the file or directory concerned, if any; it is prefixed to the message.
        hint: what the user can do about it, appended to the message.
    """

    exit_code = 2

    def __init__(self, message: str, path: str | Path | None = None, hint: str | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(TwinspectError, ValueError):
    """A path, data file or argument given by the user is missing, unreadable or malformed.

    Also a :class:`ValueError`, so ``except ValueError`` in a Python caller catches it.
    """


class IndexFormatError(TwinspectError, ValueError):
    """A persisted index directory is corrupted or was written by an incompatible version (a ValueError)."""


class ModelError(TwinspectError, ValueError):
    """A model file cannot be loaded, has an unknown format, or does not output class scores (a ValueError)."""


class IncompatibleModelsError(ModelError):
    """Two models cannot be compared: different input shapes or numbers of classes."""
