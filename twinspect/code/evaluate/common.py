"""What the benchmark runners share: the detector's embedder and the location of the shared data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.errors import InputError

#: An embedder: ``embed(fit_on, batches) -> [vectors per batch]``; it is fitted on ``fit_on`` (the
#: mined corpus) and returns float32 (len(batch), d) L2-normalised rows for every batch.
Embedder = Callable[[Sequence[Any], Sequence[Sequence[Any]]], list[np.ndarray]]


def config_embedder(config: Any) -> Embedder:
    """The embedder the detector itself would use for ``config`` (``make_encoder`` + ``fit`` + ``encode``).

    Args:
        config: a :class:`~twinspect.code.clones.DetectConfig`.

    Returns:
        An :data:`Embedder`.
    """

    def embed(fit_on: Sequence[Any], batches: Sequence[Sequence[Any]]) -> list[np.ndarray]:
        from twinspect.code.encoders import make_encoder

        encoder = make_encoder(config.encoder, **config.encoder_params)
        fit = getattr(encoder, "fit", None)
        if callable(fit):
            fit(list(fit_on))
        return [np.asarray(encoder.encode(list(b)), dtype=np.float32) for b in batches]

    return embed


def default_data_dir(name: str) -> Path:
    """``../shared/data/clones/<name>`` relative to the current directory (the project root)."""
    return Path.cwd() / ".." / "shared" / "data" / "clones" / name


def require_data_dir(path: str | Path, what: str) -> Path:
    """Return ``path`` if it is a directory.

    Raises:
        InputError: it is not (naming the data set and how to point at it).
    """
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{what} data folder not found", p, hint="pass --data DIR (see benchmarks/README.md)")
    return p
