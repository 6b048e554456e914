"""Atomic file output and small file-reading helpers shared by every capability.

Nothing twinspect writes is ever left half-written: every writer goes through
:func:`atomic_write`, which writes to a temporary file in the destination directory and
``os.replace``-s it into place only when the write completed (also on KeyboardInterrupt the
temporary file is removed and the destination is untouched).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from twinspect.errors import InputError


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path`` and move it onto ``path`` on success.

    Args:
        path: destination file; its parent directories are created.
        mode: ``"w"`` (text) or ``"wb"`` (binary).
        encoding: text encoding (ignored for binary mode).

    Yields:
        The open temporary file object.

    Raises:
        InputError: the destination is a directory, or its directory cannot be created or written.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory; give a file name for the output", path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", path) from exc
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE)  # mkstemp creates 0600; outputs get the usual umask-based mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for writers that need a file name (np.savez, PNG, torch.save).

    The temporary file is renamed onto ``path`` when the block exits normally and deleted otherwise.
    The temporary name keeps ``path``'s suffix so that libraries choosing a format by suffix work.

    Raises:
        InputError: the destination is a directory, or its directory cannot be created or written.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory; give a file name for the output", path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    except OSError as exc:
        raise InputError(f"cannot write output: {exc.strerror or exc}", path) from exc
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries (renames inside it) to disk; a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths with Linux ``renameat2(RENAME_EXCHANGE)``.

    Returns:
        True when swapped; False when the platform or file system does not support it.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``path``; swap it into place on success.

    On normal exit the new directory replaces ``path`` so that at every instant one complete
    directory is at ``path``: where Linux ``renameat2(RENAME_EXCHANGE)`` is available the old and
    new directories are exchanged atomically; elsewhere the old one is renamed aside only right
    before the new one is renamed in, and put back if that fails. The old directory is deleted only
    after the new one is in place and the parent directory has been fsync-ed. On any exception
    (KeyboardInterrupt included) the temporary directory is deleted and ``path`` is left as it was.
    Used for indexes and saved models, which are directories.

    Raises:
        InputError: the parent directory cannot be created or written, or ``path`` is a file.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError("exists and is not a directory", path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    except OSError as exc:
        raise InputError(f"cannot write output directory: {exc.strerror or exc}", path) from exc
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700; outputs are ordinary directories
    try:
        yield tmp
        for entry in tmp.rglob("*"):
            if entry.is_file():
                with open(entry, "rb") as fh:
                    os.fsync(fh.fileno())
        if path.exists() and _exchange(tmp, path):
            _fsync_dir(path.parent)
            shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old directory
            return
        old: Path | None = None
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}-{time.time_ns()}")
            path.rename(old)
        try:
            tmp.rename(path)
        except BaseException:
            if old is not None and not path.exists():
                old.rename(path)
            raise
        _fsync_dir(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def json_default(obj: Any) -> Any:
    """``json.dump(default=...)`` hook: numpy scalars and arrays and paths become plain JSON values.

    Raises:
        TypeError: ``obj`` has no JSON form (as ``json`` expects from a default hook).
    """
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: str | Path, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON atomically (numpy scalars/arrays and Paths are converted)."""
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=indent, default=json_default)
        fh.write("\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file.

    Raises:
        InputError: the file is missing, unreadable or not valid JSON (message names the file).
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise InputError("file does not exist", path) from exc
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", path) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON: {exc}", path) from exc


def _probe_directory(directory: Path, named: Path, what: str) -> None:
    """Create the missing directories of ``directory``, write and delete a file in it, remove what was created.

    Raises:
        InputError: naming ``named``, when an ancestor is a file or the directory cannot be created
            or written (permission, read-only or virtual file system such as /proc).
    """
    created: list[Path] = []
    try:
        missing: list[Path] = []
        existing = directory
        while not existing.exists() and existing.parent != existing:
            missing.append(existing)
            existing = existing.parent
        if not existing.is_dir():
            raise InputError(f"cannot create the {what}: {existing} is not a directory", named)
        for d in reversed(missing):
            d.mkdir()
            created.append(d)
        fd, probe = tempfile.mkstemp(prefix=".twinspect-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write the {what}: {exc.strerror or exc}", named) from None
    finally:
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """Fail fast, before any slow work, when a file cannot be written at ``path``; write nothing.

    The missing parent directories are created and a temporary file is written beside ``path``,
    then both are removed again. The real write later goes through :func:`atomic_write` or
    :func:`atomic_path`.

    Args:
        path: the destination file (``-o``).
        what: how the message names it (``"output file"``, ``"model file"``...).

    Returns:
        ``path`` as a :class:`Path`.

    Raises:
        InputError: naming ``path``: it is a directory, an ancestor is a file, or its directory
            cannot be created or written.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"is a directory; give a file name for the {what}", path)
    _probe_directory(path.parent, path, what)
    return path


def check_output_dir(path: str | Path, what: str = "output directory", marker: str | None = None) -> Path:
    """Fail fast, before any slow work, when ``path`` cannot be (re)written as an output directory.

    The missing directories are created and a temporary file is written in ``path``, then both are
    removed again: nothing is left behind.

    Args:
        path: the destination directory (``-o``, ``--plots``).
        what: how the message names it (``"run directory"``, ``"plots directory"``...).
        marker: a file that marks a directory this command wrote before (``"repair.json"``); when
            given, an existing non-empty directory without it is refused, so that an unrelated
            folder is never written into or replaced.

    Returns:
        ``path`` as a :class:`Path`.

    Raises:
        InputError: naming ``path``: it is an existing file, an ancestor is a file, it is an
            unrelated non-empty directory (with ``marker``), or it cannot be created or written.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"exists and is not a directory (expected the {what})", path)
    try:
        unrelated = marker is not None and path.is_dir() and not (path / marker).exists() and any(path.iterdir())
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror or exc}", path) from None
    if unrelated:
        raise InputError(f"exists, is not empty and is not a {what} (no {marker})", path,
                         hint="choose a new or empty directory")
    _probe_directory(path, path, what)
    return path


def require_readable(path: str | Path, kind: str = "path") -> Path:
    """Check that ``path`` exists and can be read; return it as a :class:`Path`.

    Raises:
        InputError: with the path and ``"<kind> does not exist"`` or ``"cannot read <kind>"``.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{kind} does not exist", path)
    if not os.access(path, os.R_OK):
        raise InputError(f"cannot read {kind} (permission denied)", path)
    return path
