"""Checkpoints of a clone scan's costly detection stages in ``twinspect clones --cache DIR`` (issue 23).

The parse checkpoint (:mod:`twinspect.code.checkpoint`) keeps what was parsed; on a large tree the
stages after it are most of the run (a 13-MLOC tree: about 10 minutes of candidate search and 3 of
verification). With a cache directory, the default detection also writes, in ``DIR/stages/``:

* ``candidates.npz`` — both candidate sources (the embedding range search and the token-overlap
  index: pairs, scores, caps, the index used and its measured recall), written as soon as both are done;
* ``verified.npz`` — the verified candidates a report is built from (the pairs at or above the
  verifier's threshold: their positions, features and scores), the base lines of the base-code rule
  and the count it turned down.

A run whose fragments and settings are those of the checkpoint reads a stage back instead of
computing it: a scan interrupted after its candidate search resumes at the verification, and a
repeated scan of an unchanged tree skips both. Each file carries a key — a hash of the twinspect
version, every detection setting, the verifier model file and every fragment (path, lines, name,
language, kind and text) — and a file with another key is ignored and, when its stage is done again,
overwritten; so the directory holds one checkpoint per stage, never a growing history. Files are
numpy ``.npz`` archives read with ``allow_pickle=False`` (a cache directory cannot run code), written
to a temporary file and renamed. An unreadable or foreign file counts as absent.

Not checkpointed: the embedding (the lexical encoder is fitted and applied in about a minute on
13 MLOC), clone classes, sub-function copies and the report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect import __version__
from twinspect._io import atomic_path
from twinspect.code.fragments import Fragment

if TYPE_CHECKING:
    import numpy as np

#: The stages written, in the order a scan reaches them.
STAGES = ("candidates", "verified")
#: Sub-directory of the cache directory holding the stage files.
STAGES_DIR = "stages"
_FORMAT = 1


def stage_key(fragments: Sequence[Fragment], config: Any, extra: Iterable[bytes] = ()) -> str:
    """The key a stage checkpoint is valid for.

    Args:
        fragments: the N fragments detection runs on, in its order (ids index them).
        config: the detection settings (a dataclass, e.g. :class:`~twinspect.code.clones.DetectConfig`).
        extra: further bytes that decide the result (e.g. the verifier model file's content).

    Returns:
        A 32-character hex BLAKE2b digest.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{_FORMAT}\0{__version__}\0".encode())
    h.update(json.dumps(dataclasses.asdict(config), sort_keys=True, default=str).encode())
    for part in extra:
        h.update(hashlib.blake2b(part, digest_size=16).digest())
    for f in fragments:
        h.update(f"\1{f.path}\0{f.start_line}\0{f.end_line}\0{f.name}\0{f.language}\0{f.kind}\0".encode(
            "utf-8", "surrogatepass"))
        h.update(f.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class StageCache:
    """Reads and writes the stage checkpoints of one detection run (see the module doc).

    Args:
        directory: the cache directory (``--cache DIR``); stage files go to ``DIR/stages/``.
        key: the run's :func:`stage_key`.

    Attributes:
        loaded: the stages read back, in order.
        saved: the stages written, in order.
    """

    def __init__(self, directory: str | os.PathLike[str], key: str):
        self.directory = Path(directory) / STAGES_DIR
        self.key = key
        self.loaded: list[str] = []
        self.saved: list[str] = []

    def path(self, stage: str) -> Path:
        """The file of ``stage`` (one of :data:`STAGES`).

        Raises:
            ValueError: an unknown stage name.
        """
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
        return self.directory / f"{stage}.npz"

    def load(self, stage: str) -> dict[str, np.ndarray] | None:
        """The arrays saved for ``stage`` under this run's key, or None (no file, another key, unreadable)."""
        import zipfile

        import numpy as np

        try:
            with np.load(self.path(stage), allow_pickle=False) as archive:
                if "_key" not in archive.files or str(archive["_key"]) != self.key:
                    return None
                data = {name: archive[name] for name in archive.files if name != "_key"}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            return None
        self.loaded.append(stage)
        return data

    def save(self, stage: str, arrays: dict[str, Any]) -> None:
        """Write ``stage``'s arrays (numpy arrays or scalars; no objects) under this run's key, atomically.

        Raises:
            InputError: the cache directory cannot be written.
        """
        import numpy as np

        payload: dict[str, Any] = {"_key": np.array(self.key), **{k: np.asarray(v) for k, v in arrays.items()}}
        with atomic_path(self.path(stage)) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **payload)
        self.saved.append(stage)

    def counters(self) -> dict[str, list[str]]:
        """``{"loaded": [...], "saved": [...]}`` for the report's stats."""
        return {"loaded": list(self.loaded), "saved": list(self.saved)}
