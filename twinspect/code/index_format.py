"""On-disk format of a persisted clone index: writing and reading the directory, nothing else.

:class:`twinspect.code.store.CloneIndex` decides *what* is stored (building, incremental updates,
queries); this module decides *how* (format version :data:`FORMAT_VERSION`)::

    DIR/manifest.json      format name and version, twinspect version, created/updated times, scan
                           roots and options, encoder name + config + state file, index kind +
                           params, counts, scan statistics, lexical IDF bookkeeping
    DIR/fragments.jsonl    one JSON object per fragment: id, path, start_line, end_line, name,
                           language, text, code (null when equal to text)
    DIR/vectors.npy        float32 (N, d), row i = line i of fragments.jsonl
    DIR/files.json         per file: sha256 of the decoded content, language, fragment ids, scan counters
    DIR/encoder.npz|json   encoder state (lexical: fitted IDF; neural: parameters)
    DIR/ann/               the k-NN index (:mod:`twinspect.code.index`; HNSW only — the exact index is
                           rebuilt from vectors.npy at load)

Every write produces a complete new directory beside ``DIR`` and swaps it in
(:func:`twinspect._io.atomic_directory`), so an interrupted run leaves the previous index intact.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinspect import __version__
from twinspect._io import atomic_directory, atomic_path, write_json
from twinspect.code.encoders import Encoder, encoder_from_state
from twinspect.code.fragments import Fragment
from twinspect.code.index import ExactIndex, Index, make_index
from twinspect.errors import IndexFormatError, TwinspectError

FORMAT_NAME = "twinspect-clone-index"
FORMAT_VERSION = 1
REBUILD_HINT = "rebuild it with `twinspect clones index PATH -o DIR`"


def fragment_to_json(fid: int, f: Fragment) -> str:
    """One line of ``fragments.jsonl`` (without the newline)."""
    return json.dumps(
        {
            "id": fid,
            "path": f.path,
            "start_line": f.start_line,
            "end_line": f.end_line,
            "name": f.name,
            "language": f.language,
            "text": f.text,
            "code": None if f.code == f.text else f.code,
        }
    )


def fragment_from_json(line: str) -> tuple[int, Fragment]:
    """Parse one line of ``fragments.jsonl`` into ``(id, Fragment)``."""
    d = json.loads(line)
    code = d["code"]
    return int(d["id"]), Fragment(
        path=d["path"],
        start_line=int(d["start_line"]),
        end_line=int(d["end_line"]),
        name=d["name"],
        language=d["language"],
        text=d["text"],
        code=d["text"] if code is None else code,
    )


def write_index(
    out_dir: str | Path,
    manifest: dict,
    fragments: Sequence[Fragment],
    ids: np.ndarray,
    vectors: np.ndarray,
    files: dict[str, dict],
    encoder: Encoder,
    index: Index,
) -> dict:
    """Write a complete clone index directory atomically (see the module docstring for the layout).

    Args:
        out_dir: destination directory (replaced only once the new one is complete).
        manifest: the manifest to write; its ``encoder.state`` entry is set here.
        fragments, ids, vectors: aligned fragments, int64 (N,) ids and float32 (N, d) vectors.
        files: per-file bookkeeping.
        encoder: the encoder whose ``state_dict()`` is stored.
        index: the k-NN index (saved unless it is exact, which is rebuilt at load).

    Returns:
        The manifest as written.

    Raises:
        InputError: the directory cannot be written.
    """
    out_dir = Path(out_dir)
    with atomic_directory(out_dir) as tmp:
        with open(tmp / "fragments.jsonl", "w", encoding="utf-8") as fh:
            for fid, f in zip(ids.tolist(), fragments):
                fh.write(fragment_to_json(fid, f))
                fh.write("\n")
        with open(tmp / "vectors.npy", "wb") as fh:
            np.save(fh, np.ascontiguousarray(vectors, dtype=np.float32))
        write_json(tmp / "files.json", files, indent=None)
        enc = dict(manifest["encoder"])
        state_fn = getattr(encoder, "state_dict", None)
        state = state_fn() if callable(state_fn) else {}
        if any(isinstance(v, np.ndarray) for v in state.values()):
            with atomic_path(tmp / "encoder.npz") as p, open(p, "wb") as fh:
                np.savez(fh, **state)
            enc["state"] = "encoder.npz"
        else:
            write_json(tmp / "encoder.json", state)
            enc["state"] = "encoder.json"
        if not isinstance(index, ExactIndex):
            index.save(tmp / "ann")
        manifest["encoder"] = enc
        write_json(tmp / "manifest.json", manifest)  # last: marks the directory complete
    return manifest


@dataclass
class StoredIndex:
    """The contents of a clone index directory, as read by :func:`read_index`."""

    directory: Path
    manifest: dict
    fragments: list[Fragment]
    ids: np.ndarray
    vectors: np.ndarray
    files: dict[str, dict]
    encoder: Encoder
    index: Index


def read_index(directory: str | Path) -> StoredIndex:
    """Read and check a clone index directory written by :func:`write_index`.

    Args:
        directory: the index directory.

    Returns:
        Its :class:`StoredIndex` (the exact k-NN index is rebuilt from the vectors).

    Raises:
        IndexFormatError: the directory is missing, not a clone index, of another format version,
            or has missing/corrupt/inconsistent files (the message says how to rebuild it).
    """
    directory = Path(directory)

    def bad(msg: str, path: Path | None = None) -> IndexFormatError:
        return IndexFormatError(msg, path or directory, hint=REBUILD_HINT)

    if not directory.is_dir():
        raise bad("clone index directory does not exist")
    mpath = directory / "manifest.json"
    if not mpath.is_file():
        raise bad("not a twinspect clone index (no manifest.json)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise bad(f"unreadable manifest: {exc}", mpath) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise bad("not a twinspect clone index (unknown manifest format)", mpath)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise bad(
            f"clone index format version {manifest.get('format_version')!r} is not supported "
            f"(this twinspect {__version__} reads version {FORMAT_VERSION})",
            mpath,
        )
    try:
        fragments: list[Fragment] = []
        ids: list[int] = []
        with open(directory / "fragments.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    fid, frag = fragment_from_json(line)
                    ids.append(fid)
                    fragments.append(frag)
        with open(directory / "vectors.npy", "rb") as fb:
            vectors = np.load(fb, allow_pickle=False)
        files = json.loads((directory / "files.json").read_text(encoding="utf-8"))
        enc = manifest["encoder"]
        state_path = directory / enc["state"]
        if state_path.suffix == ".npz":
            with np.load(state_path, allow_pickle=False) as z:
                state = {k: z[k] for k in z.files}
        else:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        encoder = encoder_from_state(enc["name"], state)
        kind = manifest["index"]["kind"]
        params = manifest["index"]["params"]
        count = manifest["counts"]["fragments"]
    except TwinspectError as exc:
        raise bad(f"corrupt clone index: {exc.message}") from exc
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as exc:
        raise bad(f"missing or corrupt clone index file: {exc}") from exc
    id_arr = np.asarray(ids, dtype=np.int64)
    if len(fragments) != count or vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != count:
        raise bad(
            f"inconsistent clone index: manifest says {count} fragments, fragments.jsonl has "
            f"{len(fragments)}, vectors.npy has shape {vectors.shape}"
        )
    dim = manifest["encoder"]["config"].get("dim")
    if count and vectors.shape[1] != dim:
        raise bad(f"vectors have dimension {vectors.shape[1]}, the encoder {dim}")
    if kind == "exact":
        index: Index = make_index("exact", vectors.shape[1], **params)
        if count:
            index.add(id_arr, vectors)
    else:
        try:
            index = Index.load(directory / "ann")
        except IndexFormatError as exc:
            raise bad(f"corrupt k-NN index: {exc.message}", directory / "ann") from exc
        if len(index) != count or not np.array_equal(index.ids(), np.sort(id_arr)):
            raise bad("the k-NN index does not hold the same fragments as fragments.jsonl", directory / "ann")
    return StoredIndex(directory, manifest, fragments, id_arr, vectors, files, encoder, index)

