"""Image data sets for the deep-learning capabilities: MNIST, CIFAR-10 and user ``.npz`` files.

The shared data directory (``shared/data`` beside the repository, see ``shared/README.md``) holds
``mnist/{test,train_10k}.npz`` and ``cifar10/{test,train_20k}.npz`` plus the DFlare/DiffChaser model
pairs in ``models/dflare``. It is found through ``$TWINSPECT_DATA``, else ``../shared/data`` relative
to the current directory, else relative to the repository root.

Images are always returned channels-last, ``(N, H, W, C)``, in the 0–255 pixel scale.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from twinspect.errors import InputError

#: Data sets known by name: folder under the shared data directory, file per split, classes.
DATASETS: dict[str, dict] = {
    "mnist": {
        "splits": {"test": "test.npz", "train": "train_10k.npz"},
        "shape": (28, 28, 1),
        "classes": [str(i) for i in range(10)],
    },
    "cifar10": {
        "splits": {"test": "test.npz", "train": "train_20k.npz"},
        "shape": (32, 32, 3),
        "classes": [
            "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
        ],
    },
}

#: The original/compressed model pairs of DiffChaser/DFlare (shared/data/models/dflare):
#: name → (original file, compressed file, preprocessing preset, data set).
DFLARE_PAIRS: dict[str, tuple[str, str, str, str]] = {
    "lenet1": ("lenet1.h5", "lenet1-quan.lite", "unit", "mnist"),
    "lenet5": ("lenet5.h5", "lenet5-quan.lite", "unit", "mnist"),
    "resnet": ("resnet.h5", "resnet-quan.lite", "cifar10-dflare", "cifar10"),
}


def find_shared_data() -> Path | None:
    """The shared data directory, or None when it cannot be found.

    Looks at ``$TWINSPECT_DATA`` (used as given, must be a directory), then ``../shared/data``
    relative to the current directory, then ``../shared/data`` relative to the repository root.
    """
    env = os.environ.get("TWINSPECT_DATA")
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    candidates = [Path.cwd() / ".." / "shared" / "data", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


def _require_shared(what: str) -> Path:
    root = find_shared_data()
    if root is None:
        env = os.environ.get("TWINSPECT_DATA")
        where = f"$TWINSPECT_DATA={env} is not a directory" if env else "no ../shared/data found"
        raise InputError(
            f"cannot find the shared data directory for {what} ({where})",
            hint="set TWINSPECT_DATA to the folder holding mnist/ and cifar10/, or pass an .npz path",
        )
    return root


def dataset_path(name: str, split: str = "test") -> Path:
    """Path of a named data set's ``.npz`` file.

    Args:
        name: ``"mnist"`` or ``"cifar10"``.
        split: ``"test"`` or ``"train"`` (the 10k MNIST / 20k CIFAR-10 training subsets).

    Raises:
        InputError: unknown name/split, shared data not found, or the file is missing.
    """
    if name not in DATASETS:
        raise InputError(f"unknown data set {name!r}; use one of {', '.join(DATASETS)} or a path to an .npz file")
    splits = DATASETS[name]["splits"]
    if split not in splits:
        raise InputError(f"unknown split {split!r} of {name}; use one of {', '.join(splits)}")
    path = _require_shared(name) / name / splits[split]
    if not path.is_file():
        raise InputError("data set file does not exist", path)
    return path


def validate_images(x: np.ndarray, source: str | Path) -> np.ndarray:
    """Check and normalise an image array to channels-last ``(N, H, W, C)`` in the 0–255 scale.

    Args:
        x: (N, H, W) or (N, H, W, C) numeric array; C in {1, 3, 4}.
        source: file named in errors.

    Returns:
        uint8 (N, H, W, C) when every value is an integer (any integer dtype, or floats that are
        whole numbers), else float32 (N, H, W, C) — rounding non-integer pixels would silently
        change e.g. saved triggering inputs.

    Raises:
        InputError: non-numeric dtype, wrong rank, no images, NaN/inf, values outside 0–255.
    """
    x = np.asarray(x)
    if x.dtype.kind not in "uif" or x.dtype == np.bool_:
        raise InputError(f"images must be a numeric array, got dtype {x.dtype}", source)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise InputError(f"images must be 3-D (N, H, W) or 4-D (N, H, W, C), got shape {x.shape}", source)
    if x.shape[0] == 0:
        raise InputError("the file holds no images (N = 0)", source)
    if x.shape[-1] not in (1, 3, 4):
        raise InputError(
            f"images must be channels-last (N, H, W, C) with C in 1, 3, 4; got shape {x.shape}", source
        )
    if x.dtype.kind == "f":
        if not np.all(np.isfinite(x)):
            raise InputError("images contain NaN or infinite values", source)
        lo, hi = float(x.min()), float(x.max())
        if lo < 0 or hi > 255:
            raise InputError(f"pixel values must be in 0–255, found {lo:g}..{hi:g}", source)
        if np.all(x == np.round(x)):
            return x.astype(np.uint8)
        return x.astype(np.float32)
    if x.dtype != np.uint8:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi > 255:
            raise InputError(f"pixel values must be in 0–255, found {lo}..{hi}", source)
        x = x.astype(np.uint8)
    return x


def _validate_labels(y: np.ndarray, n: int, source: str | Path) -> np.ndarray:
    y = np.asarray(y)
    if y.dtype.kind not in "uif" or y.dtype == np.bool_:
        raise InputError(f"labels y must be integers, got dtype {y.dtype}", source)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"labels y must have shape ({n},) to match x, got {y.shape}", source)
    if y.dtype.kind == "f" and not (np.all(np.isfinite(y)) and np.all(y == np.round(y))):
        raise InputError("labels y must be whole numbers", source)
    if n and y.min() < 0:
        raise InputError(f"labels y must be >= 0, found {y.min()}", source)
    return y.astype(np.int64)


def load_npz(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Load images (and labels, when present) from an ``.npz`` with arrays ``x`` and optional ``y``.

    Returns:
        ``(x, y)``: x as in :func:`validate_images`, y int64 (N,) or None when the file has no ``y``.

    Raises:
        InputError: missing/unreadable file, not an npz archive, no ``x`` array, or invalid arrays
            (see :func:`validate_images`); the message names the file.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("data file does not exist", path)
    if path.is_dir():
        raise InputError("is a directory, not an .npz file", path)
    try:
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):
            raise InputError("not an .npz archive (a single .npy array?); save with np.savez(path, x=..., y=...)", path)
        with data:
            if "x" not in data.files:
                raise InputError(f"no array named 'x' in the archive (found: {', '.join(data.files) or 'none'})", path)
            x = data["x"]
            y = data["y"] if "y" in data.files else None
    except InputError:
        raise
    except PermissionError as exc:
        raise InputError("cannot read data file (permission denied)", path) from exc
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"not a readable .npz archive ({type(exc).__name__}: {exc})", path) from exc
    x = validate_images(x, path)
    if y is not None:
        y = _validate_labels(y, x.shape[0], path)
    return x, y


def load_images(spec: str | Path, split: str = "test", limit: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Load an image data set by name or path.

    Args:
        spec: ``"mnist"``, ``"cifar10"`` (from the shared data directory) or a path to an ``.npz``.
        split: ``"test"`` or ``"train"`` for named data sets (ignored for a path).
        limit: keep only the first ``limit`` images.

    Returns:
        ``(x, y)``: x (N, H, W, C) uint8 (float32 only for an ``.npz`` with non-integer pixels) in the
        0–255 scale; y (N,) int64, or None for an ``.npz`` without labels.

    Raises:
        InputError: unknown name, shared data not found, bad file (named in the message).
    """
    s = str(spec)
    if s in DATASETS:
        path = dataset_path(s, split)
    else:
        path = Path(s)
        if path.suffix.lower() != ".npz" and not path.exists():
            raise InputError(f"unknown data set {s!r}; use one of {', '.join(DATASETS)} or a path to an .npz file")
    x, y = load_npz(path)
    if limit is not None:
        if limit < 1:
            raise InputError(f"limit must be >= 1, got {limit}")
        x = x[:limit]
        y = None if y is None else y[:limit]
    return x, y


def class_names(name: str) -> list[str] | None:
    """Class names of a named data set (None for unknown names)."""
    info = DATASETS.get(name)
    return None if info is None else list(info["classes"])


def dflare_pair(name: str) -> tuple[Path, Path, str, str]:
    """The DiffChaser/DFlare original/compressed model pair ``name`` from the shared data.

    Args:
        name: ``"lenet1"``, ``"lenet5"`` or ``"resnet"``.

    Returns:
        ``(original .h5 path, compressed .lite path, preprocessing preset name, data set name)``,
        e.g. ``(…/lenet1.h5, …/lenet1-quan.lite, "unit", "mnist")``.

    Raises:
        InputError: unknown name, shared data not found, or a model file missing.
    """
    if name not in DFLARE_PAIRS:
        raise InputError(f"unknown DFlare model pair {name!r}; use one of {', '.join(DFLARE_PAIRS)}")
    orig, comp, pre, ds = DFLARE_PAIRS[name]
    folder = _require_shared(f"model pair {name}") / "models" / "dflare"
    paths = []
    for f in (orig, comp):
        p = folder / f
        if not p.is_file():
            raise InputError("model file does not exist", p)
        paths.append(p)
    return paths[0], paths[1], pre, ds


__all__ = [
    "DATASETS",
    "DFLARE_PAIRS",
    "class_names",
    "dataset_path",
    "dflare_pair",
    "find_shared_data",
    "load_images",
    "load_npz",
    "validate_images",
]
