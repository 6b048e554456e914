"""Fragment embeddings for users: ``twinspect clones embed`` writes them to a ``.npz`` file.

For people who build their own search on top of twinspect's fragments and encoders, and for
retrieval measurements such as MAP@R on POJ-104 (one program per file with ``granularity="file"``).
The vectors are exactly those the clone pipeline searches (:func:`twinspect.code.clones.detect`
embeds with the same encoder and parameters).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect.code.fragments import Fragment

if TYPE_CHECKING:
    import numpy as np

#: Arrays of an embeddings file.
NPZ_KEYS = ("paths", "start_lines", "end_lines", "names", "languages", "vectors")


def embed(
    paths: Sequence[str | Path],
    *,
    encoder: str = "lexical",
    encoder_params: dict[str, Any] | None = None,
    granularity: str = "function",
    min_lines: int = 6,
    exclude: Sequence[str] = (),
    language: str | None = None,
    quiet: bool = True,
) -> tuple[list[Fragment], np.ndarray]:
    """Mine fragments under ``paths`` and embed them.

    Args:
        paths: files and/or directories.
        encoder: ``"lexical"`` or ``"neural"`` (see :func:`twinspect.code.encoders.make_encoder`).
        encoder_params: the encoder's keyword arguments; None = the defaults ``twinspect clones``
            uses (:data:`twinspect.code.clones.DEFAULT_ENCODER_PARAMS`).
        granularity: ``"function"``, ``"block"`` or ``"file"`` (see :func:`twinspect.code.fragments.mine`).
        min_lines: minimum code lines of a fragment.
        exclude: gitignore-style globs to leave out.
        language: force one language.
        quiet: no progress output.

    Returns:
        ``(fragments, vectors)``: N fragments sorted by (path, start_line, end_line) and float32
        (N, d) L2-normalised rows (a fragment without tokens gets a zero row).

    Raises:
        InputError: a bad path, encoder, granularity or option, or no source file under ``paths``
            was parsed (:func:`twinspect.code.clones.check_parsed`; files parsed without a fragment
            give an empty result).
    """
    import numpy as np

    from twinspect.code.clones import DetectConfig, check_parsed, scan_root
    from twinspect.code.encoders import make_encoder
    from twinspect.code.fragments import mine

    config = DetectConfig(encoder=encoder, encoder_params=encoder_params, min_lines=min_lines, granularity=granularity)
    config.validate()
    frags, stats = mine(list(paths), exclude=tuple(exclude), language=language, min_lines=min_lines,
                        granularity=granularity, quiet=quiet)
    check_parsed(stats, scan_root(list(paths)))  # no source file at all, or none parsed: refused as `clones` does
    frags.sort(key=lambda f: (f.path, f.start_line, f.end_line, f.name))
    if not frags:
        return frags, np.zeros((0, 0), dtype=np.float32)
    enc = make_encoder(config.encoder, **(config.encoder_params or {}))
    fit = getattr(enc, "fit", None)
    if callable(fit):
        fit(frags)
    vecs = np.asarray(enc.encode(frags, quiet=quiet), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return frags, (vecs / norms).astype(np.float32)


def write_embeddings(path: str | Path, fragments: Sequence[Fragment], vectors: np.ndarray) -> None:
    """Write an embeddings file atomically (numpy ``.npz``, uncompressed).

    Arrays: ``paths`` (str, N), ``start_lines`` / ``end_lines`` (int64, N, 1-based inclusive),
    ``names`` (str, N), ``languages`` (str, N) and ``vectors`` (float32, N × d, L2-normalised).

    Args:
        path: the output file (``.npz`` is not appended).
        fragments: N fragments.
        vectors: (N, d) vectors in the same order.

    Raises:
        InputError: the destination is a directory or cannot be written.
        ValueError: ``vectors`` does not have N rows.
    """
    import numpy as np

    from twinspect._io import atomic_path

    if len(vectors) != len(fragments):
        raise ValueError(f"{len(fragments)} fragments but {len(vectors)} vectors")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(
            fh,
            paths=np.asarray([f.path for f in fragments], dtype=str),
            start_lines=np.asarray([f.start_line for f in fragments], dtype=np.int64),
            end_lines=np.asarray([f.end_line for f in fragments], dtype=np.int64),
            names=np.asarray([f.name for f in fragments], dtype=str),
            languages=np.asarray([f.language for f in fragments], dtype=str),
            vectors=np.asarray(vectors, dtype=np.float32),
        )
