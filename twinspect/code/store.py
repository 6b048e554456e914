"""Persisted, incrementally updatable clone index: ``twinspect clones index PATH -o DIR`` / ``query``.

A :class:`CloneIndex` holds every fragment (function/method) of a codebase, its embedding and a k-NN
index over the embeddings (SSCD's indexing phase, Chochlov et al., ICSME 2022), so that new code can
be checked against the codebase without re-processing it, and a changed codebase is re-indexed by
re-parsing and re-embedding only the files whose content changed.

The directory layout and its reading/writing live in :mod:`twinspect.code.index_format`.

Every build/update writes a complete new directory beside ``DIR`` (``.DIR.tmp-XXXX``) and swaps it
in with two renames, so an interrupted run leaves the previous index intact (or no index), never a
half-written one that loads.

**IDF on update (lexical encoder).** The IDF fitted at build time is kept: added and changed files
are embedded with it, so unchanged fragments keep their vectors and the HNSW graph is updated in
place (remove + add) — only changed files are parsed and embedded. The share of fragments embedded
since the last fit is tracked; when it exceeds :data:`REFIT_FRACTION` (or ``refit_idf=True``) the IDF
is refitted on all stored fragments and every vector is recomputed from the stored code (no file is
re-read or re-parsed; for the lexical encoder this costs about a second per 10k fragments) and the
k-NN index is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect import __version__
from twinspect.code.encoders import Encoder
from twinspect.code.fragments import Fragment
from twinspect.code.index import Index, make_index
from twinspect.code.index_format import FORMAT_NAME, FORMAT_VERSION, REBUILD_HINT, read_index, write_index
from twinspect.errors import IndexFormatError, InputError, TwinspectError
from twinspect.progress import progress

#: Auto-refit the lexical IDF when more than this share of fragments was embedded since the fit.
REFIT_FRACTION = 0.5
_ADD_CHUNK = 4096


def _overlap(a: Fragment, b: Fragment) -> bool:
    return a.path == b.path and a.start_line <= b.end_line and b.start_line <= a.end_line


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CloneIndex:
    """A persisted codebase index: fragments, their embeddings and a k-NN index.

    Build with :meth:`build`, reopen with :meth:`load`, refresh with :meth:`update`, search with
    :meth:`query`.

    Attributes:
        directory: where the index lives.
        fragments: the indexed fragments, ordered by file then source position.
        ids: int64 (N,) stable fragment ids (k-NN labels), aligned with ``fragments``.
        vectors: float32 (N, d) unit embeddings, aligned with ``fragments``.
        stats: scan counters (``ScanStats.to_dict()``) of the latest build/update.
        encoder: the encoder (lexical: with the stored IDF), used to embed queries.
        index: the k-NN :class:`~twinspect.code.index.Index`.
        manifest: the parsed ``manifest.json``.
    """

    def __init__(
        self,
        directory: Path,
        manifest: dict,
        fragments: list[Fragment],
        ids: np.ndarray,
        vectors: np.ndarray,
        files: dict[str, dict],
        encoder: Encoder,
        index: Index,
    ):
        self.directory = Path(directory)
        self.manifest = manifest
        self.fragments = fragments
        self.ids = ids
        self.vectors = vectors
        self.files = files
        self.encoder = encoder
        self.index = index
        self._row_of_id = {int(i): r for r, i in enumerate(ids)}
        self._by_path: dict[str, list[int]] | None = None

    # -- properties ------------------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        """Scan counters of the latest build/update."""
        return self.manifest.get("stats", {})

    def __len__(self) -> int:
        return len(self.fragments)

    # -- scanning --------------------------------------------------------------------------------
    @staticmethod
    def _scan(
        paths: Sequence[str | Path],
        scan: dict,
        old_files: dict[str, dict],
        old_frags: dict[int, Fragment],
        quiet: bool,
    ) -> tuple[dict[str, dict], dict[str, list[Fragment] | None], Any, dict[str, int]]:
        """Discover and read files; parse only new/changed ones.

        Returns ``(files, parsed, stats, counts)``: per-rel file records (sha256, language,
        counters; ``ids`` filled later), fragments of parsed files (None = unchanged, reuse stored
        ids), the ScanStats, and the added/changed/unchanged/removed file counts.
        """
        from twinspect.code.files import ScanStats, discover
        from twinspect.code.fragments import extract_fragments, read_source

        found, stats = discover(
            paths,
            exclude=scan["exclude"],
            max_file_bytes=scan["max_file_bytes"],
            respect_gitignore=scan["respect_gitignore"],
            language=scan["language"],
        )
        files: dict[str, dict] = {}
        parsed: dict[str, list[Fragment] | None] = {}
        counts = {"added_files": 0, "changed_files": 0, "unchanged_files": 0, "removed_files": 0}
        with progress("parsing", total=len(found), quiet=quiet) as bar:
            for sf in found:
                text = read_source(sf, stats)
                bar.advance()
                if text is None:
                    continue
                digest = _digest(text)
                old = old_files.get(sf.rel)
                if (
                    old is not None
                    and old.get("sha256") == digest
                    and old.get("language") == sf.language
                    and all(i in old_frags for i in old.get("ids", []))
                ):
                    stats.merge(ScanStats.from_dict(old.get("stats", {})))
                    files[sf.rel] = dict(old)
                    parsed[sf.rel] = None
                    counts["unchanged_files"] += 1
                    continue
                fstats = ScanStats()
                frags = extract_fragments(text, sf.rel, sf.language, min_lines=scan["min_lines"], stats=fstats)
                stats.merge(fstats)
                files[sf.rel] = {"sha256": digest, "language": sf.language, "stats": fstats.to_dict(), "ids": []}
                parsed[sf.rel] = frags
                counts["changed_files" if old is not None else "added_files"] += 1
        counts["removed_files"] = sum(1 for rel in old_files if rel not in files)
        return files, parsed, stats, counts

    # -- build -----------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        paths: Sequence[str | Path],
        out_dir: str | Path,
        *,
        encoder: Encoder,
        index_kind: str = "hnsw",
        index_params: dict | None = None,
        min_lines: int = 6,
        exclude: Sequence[str] = (),
        max_file_bytes: int = 1 << 20,
        respect_gitignore: bool = True,
        language: str | None = None,
        quiet: bool = True,
    ) -> CloneIndex:
        """Scan ``paths``, embed every fragment, build the k-NN index and write it to ``out_dir``.

        Args:
            paths: files and/or directories (see :func:`twinspect.code.files.discover`).
            out_dir: index directory; replaced atomically if it holds a clone index already.
            encoder: the encoder (a lexical encoder is fitted on the scanned fragments).
            index_kind: ``"hnsw"``, ``"exact"`` or ``"auto"`` (resolved by the fragment count as
                :func:`twinspect.code.candidates.resolve_index` does; the manifest records the result).
            index_params: parameters of :func:`twinspect.code.index.make_index`.
            min_lines, exclude, max_file_bytes, respect_gitignore, language: scan options, kept in
                the manifest and reused by :meth:`update`.
            quiet: hide progress bars.

        Returns:
            The built index (already saved).

        Raises:
            InputError: bad paths/options, or ``out_dir`` exists and is not a clone index.
            ModelError: the encoder's model cannot be loaded.
        """
        if isinstance(paths, (str, Path)):
            paths = [paths]
        out_dir = Path(out_dir)
        _check_target(out_dir)
        if min_lines < 1:
            raise InputError(f"min_lines must be at least 1, got {min_lines}")
        index_params = dict(index_params or {})
        # validate kind and parameters before the work ("auto" is resolved by the fragment count below)
        make_index("exact" if index_kind == "auto" and not index_params else index_kind, 2, **index_params)
        roots = [os.path.abspath(os.fspath(p)) for p in paths]
        scan = {
            "min_lines": int(min_lines),
            "exclude": list(exclude),
            "max_file_bytes": int(max_file_bytes),
            "respect_gitignore": bool(respect_gitignore),
            "language": language,
        }
        files, parsed, stats, counts = cls._scan(roots, scan, {}, {}, quiet)
        fragments: list[Fragment] = []
        ids: list[int] = []
        for rel, frags in parsed.items():
            assert frags is not None
            first = len(fragments)
            fragments.extend(frags)
            files[rel]["ids"] = list(range(first, first + len(frags)))
            ids.extend(files[rel]["ids"])
        fit = getattr(encoder, "fit", None)
        if callable(fit):
            fit(fragments)
        vectors = _encode(encoder, fragments, quiet)
        id_arr = np.asarray(ids, dtype=np.int64)
        if index_kind == "auto":
            from twinspect.code.candidates import AUTO_HNSW_PARAMS, resolve_index

            index_kind = resolve_index(index_kind, len(fragments))
            if index_kind == "hnsw":
                index_params = {**AUTO_HNSW_PARAMS, **index_params}
        index = _build_index(index_kind, vectors.shape[1], index_params, id_arr, vectors, quiet)
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "twinspect_version": __version__,
            "created": now,
            "updated": now,
            "roots": roots,
            "scan": scan,
            "encoder": {"name": encoder.name, "config": encoder.config()},
            "index": {"kind": index_kind, "params": index_params},
            "counts": {"fragments": len(fragments), "files": len(files)},
            "stats": stats.to_dict(),
            "next_id": len(fragments),
            "idf": {"fitted_docs": len(fragments), "embedded_since_fit": 0} if callable(fit) else None,
            "last_update": {**counts, "added_files": len(files), "embedded_fragments": len(fragments)},
        }
        store = cls(out_dir, manifest, fragments, id_arr, vectors, files, encoder, index)
        store._write(out_dir)
        return store

    # -- update ----------------------------------------------------------------------------------
    def update(
        self, paths: Sequence[str | Path] | None = None, *, refit_idf: bool | None = None, quiet: bool = True
    ) -> dict:
        """Re-scan the codebase and bring the index up to date; re-embed only added/changed files.

        Files are compared by the sha256 of their decoded content. Fragments of removed and changed
        files leave the k-NN index; fragments of added and changed files are parsed, embedded and
        added. See the module docstring for how the lexical IDF is handled.

        Args:
            paths: new roots to scan (None = the stored roots).
            refit_idf: lexical encoder only: True = refit the IDF and re-weight everything, False =
                keep it, None = refit when more than :data:`REFIT_FRACTION` of the fragments were
                embedded since the last fit.
            quiet: hide progress bars.

        Returns:
            ``{"added_files", "changed_files", "removed_files", "unchanged_files",
            "embedded_fragments", "removed_fragments", "refit_idf"}``.

        Raises:
            InputError: a root no longer exists or cannot be read.
        """
        if isinstance(paths, (str, Path)):
            paths = [paths]
        roots = self.manifest["roots"] if paths is None else [os.path.abspath(os.fspath(p)) for p in paths]
        old_frags = {int(i): f for i, f in zip(self.ids, self.fragments)}
        files, parsed, stats, counts = self._scan(roots, self.manifest["scan"], self.files, old_frags, quiet)
        next_id = int(self.manifest["next_id"])
        fragments: list[Fragment] = []
        ids: list[int] = []
        new_frags: list[Fragment] = []
        new_ids: list[int] = []
        for rel, frags in parsed.items():
            if frags is None:
                old_ids = files[rel]["ids"]
                fragments.extend(old_frags[i] for i in old_ids)
                ids.extend(old_ids)
                continue
            fresh = list(range(next_id, next_id + len(frags)))
            next_id += len(frags)
            files[rel]["ids"] = fresh
            fragments.extend(frags)
            ids.extend(fresh)
            new_frags.extend(frags)
            new_ids.extend(fresh)
        kept = set(ids)
        removed_ids = np.array([i for i in self.ids.tolist() if i not in kept], dtype=np.int64)
        id_arr = np.asarray(ids, dtype=np.int64)

        idf = dict(self.manifest.get("idf") or {})
        fit = getattr(self.encoder, "fit", None)
        refit = False
        if callable(fit):
            since = int(idf.get("embedded_since_fit", 0)) + len(new_frags)
            refit = bool(refit_idf) if refit_idf is not None else since > REFIT_FRACTION * max(1, len(fragments))
            idf["embedded_since_fit"] = 0 if refit else since
        kind = self.manifest["index"]["kind"]
        params = self.manifest["index"]["params"]
        if new_frags or refit:
            self._check_encoder()  # never mix embeddings of two different models in one index
        if refit and callable(fit):
            fit(fragments)
            idf["fitted_docs"] = len(fragments)
            vectors = _encode(self.encoder, fragments, quiet)
            index = _build_index(kind, vectors.shape[1], params, id_arr, vectors, quiet)
            embedded = len(fragments)
        else:
            new_vecs = _encode(self.encoder, new_frags, quiet) if new_frags else np.zeros((0, self.vectors.shape[1]), np.float32)
            vec_of = {i: self.vectors[self._row_of_id[i]] for i in ids if i in self._row_of_id}
            for i, v in zip(new_ids, new_vecs):
                vec_of[i] = v
            vectors = np.stack([vec_of[i] for i in ids]).astype(np.float32) if ids else np.zeros(
                (0, self.vectors.shape[1]), np.float32
            )
            index = self.index
            if removed_ids.size:
                index.remove(removed_ids, missing_ok=True)
            _add_chunked(index, np.asarray(new_ids, dtype=np.int64), new_vecs, quiet)
            embedded = len(new_frags)
        result = {**counts, "embedded_fragments": embedded, "removed_fragments": int(removed_ids.size), "refit_idf": refit}
        manifest = dict(self.manifest)
        manifest.update(
            roots=roots,
            updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            encoder={"name": self.encoder.name, "config": self.encoder.config()},
            counts={"fragments": len(fragments), "files": len(files)},
            stats=stats.to_dict(),
            next_id=next_id,
            idf=idf if callable(fit) else None,
            last_update=result,
        )
        self._write_replace(manifest, fragments, id_arr, vectors, files, index)
        return result

    def _write_replace(self, manifest, fragments, ids, vectors, files, index) -> None:
        self.manifest, self.fragments, self.ids, self.vectors, self.files, self.index = (
            manifest, fragments, ids, vectors, files, index,
        )
        self._row_of_id = {int(i): r for r, i in enumerate(ids)}
        self._by_path = None
        self._write(self.directory)

    # -- persistence (the format lives in twinspect.code.index_format) ---------------------------
    def _write(self, out_dir: Path) -> None:
        self.manifest = write_index(out_dir, self.manifest, self.fragments, self.ids, self.vectors, self.files,
                                    self.encoder, self.index)
        self.directory = Path(out_dir)

    @classmethod
    def load(cls, directory: str | Path) -> CloneIndex:
        """Open an index written by :meth:`build` / :meth:`update`.

        Raises:
            IndexFormatError: the directory is missing, not a clone index, of another format
                version, or has missing/corrupt/inconsistent files (the message says to rebuild).
        """
        st = read_index(directory)
        return cls(st.directory, st.manifest, st.fragments, st.ids, st.vectors, st.files, st.encoder, st.index)

    # -- queries ---------------------------------------------------------------------------------
    def _check_encoder(self) -> None:
        stored = self.manifest["encoder"]["config"]
        current = self.encoder.config()
        if stored != current:
            raise IndexFormatError(
                f"the index was built with encoder {stored} but the encoder now is {current} "
                "(model files changed?)",
                self.directory,
                hint=REBUILD_HINT,
            )

    def _stored_vector(self, fragment: Fragment) -> np.ndarray | None:
        rows = self._paths().get(fragment.path, [])
        for r in rows:
            f = self.fragments[r]
            if f.start_line == fragment.start_line and f.end_line == fragment.end_line and f.text == fragment.text:
                return self.vectors[r]
        return None

    def _paths(self) -> dict[str, list[int]]:
        if self._by_path is None:
            by: dict[str, list[int]] = {}
            for r, f in enumerate(self.fragments):
                by.setdefault(f.path, []).append(r)
            self._by_path = by
        return self._by_path

    def embed(self, fragments: Sequence[Fragment], quiet: bool = True) -> np.ndarray:
        """Embed fragments with the index's encoder (stored vectors are reused for indexed ones).

        Returns:
            float32 (N, d) unit rows.

        Raises:
            IndexFormatError: the encoder no longer matches the one the index was built with.
        """
        out = np.zeros((len(fragments), self.vectors.shape[1]), dtype=np.float32)
        todo = []
        for i, f in enumerate(fragments):
            v = self._stored_vector(f)
            if v is None:
                todo.append(i)
            else:
                out[i] = v
        if todo:
            self._check_encoder()
            out[todo] = self.encoder.encode([fragments[i] for i in todo], quiet=quiet)
        return out

    def query(self, fragment: Fragment, k: int = 10, threshold: float = 0.0) -> list[tuple[Fragment, float]]:
        """The indexed fragments most similar to ``fragment`` (SSCD's topN + threshold).

        The fragment itself and indexed fragments overlapping it (same path, intersecting lines,
        e.g. its nested functions) are never returned.

        Args:
            fragment: any fragment (indexed or new code).
            k: maximum number of results (topN).
            threshold: minimum cosine similarity.

        Returns:
            Up to k ``(fragment, cosine)`` pairs, by decreasing similarity.

        Raises:
            InputError: k < 1.
            IndexFormatError: the encoder no longer matches the one the index was built with.
        """
        return self.query_many([fragment], k=k, threshold=threshold)[0]

    def query_many(
        self, fragments: Sequence[Fragment], k: int = 10, threshold: float = 0.0, quiet: bool = True
    ) -> list[list[tuple[Fragment, float]]]:
        """:meth:`query` for several fragments at once (one batched embedding and search)."""
        if int(k) != k or k < 1:
            raise InputError(f"k must be a positive integer, got {k!r}")
        if not fragments or len(self) == 0:
            return [[] for _ in fragments]
        vecs = self.embed(fragments, quiet=quiet)
        by_path = self._paths()
        extra = max((len(by_path.get(f.path, [])) for f in fragments), default=0)
        kk = min(len(self), k + min(extra, 64) + 1)
        results: list[list[tuple[Fragment, float]]] = []
        nbr, sims = self.index.search(vecs, kk)
        for qi, f in enumerate(fragments):
            hits: list[tuple[Fragment, float]] = []
            row_ids, row_sims = nbr[qi], sims[qi]
            for fid, s in zip(row_ids.tolist(), row_sims.tolist()):
                if fid < 0 or s < threshold or len(hits) >= k:
                    break
                g = self.fragments[self._row_of_id[fid]]
                if _overlap(f, g):
                    continue
                hits.append((g, float(s)))
            # a file with very many overlapping fragments can exhaust the list: fall back to a
            # larger search for that query
            if len(hits) < k and kk < len(self) and row_sims.size and row_sims[-1] >= threshold:
                more_ids, more_sims = self.index.search(vecs[qi : qi + 1], len(self))
                hits = []
                for fid, s in zip(more_ids[0].tolist(), more_sims[0].tolist()):
                    if fid < 0 or s < threshold or len(hits) >= k:
                        break
                    g = self.fragments[self._row_of_id[fid]]
                    if not _overlap(f, g):
                        hits.append((g, float(s)))
            results.append(hits)
        return results


def _check_target(out_dir: Path) -> None:
    if out_dir.exists():
        if not out_dir.is_dir():
            raise InputError("output path exists and is not a directory", out_dir)
        if any(out_dir.iterdir()) and not (out_dir / "manifest.json").is_file():
            raise InputError(
                "output directory exists, is not empty and is not a clone index", out_dir,
                hint="choose a new directory or an existing clone index",
            )


def _encode(encoder: Encoder, fragments: Sequence[Fragment], quiet: bool) -> np.ndarray:
    if not fragments:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    vecs = np.asarray(encoder.encode(fragments, quiet=quiet), dtype=np.float32)
    if vecs.shape != (len(fragments), encoder.dim):
        raise TwinspectError(f"encoder returned shape {vecs.shape}, expected {(len(fragments), encoder.dim)}")
    return vecs


def _add_chunked(index: Index, ids: np.ndarray, vectors: np.ndarray, quiet: bool) -> None:
    if ids.size == 0:
        return
    with progress("indexing", total=int(ids.size), quiet=quiet) as bar:
        for lo in range(0, ids.size, _ADD_CHUNK):
            index.add(ids[lo : lo + _ADD_CHUNK], vectors[lo : lo + _ADD_CHUNK])
            bar.advance(min(_ADD_CHUNK, ids.size - lo))


def _build_index(kind: str, dim: int, params: dict, ids: np.ndarray, vectors: np.ndarray, quiet: bool) -> Index:
    if kind == "hnsw":
        params = {"initial_capacity": max(1, ids.size), **params}
    index = make_index(kind, dim, **params)
    _add_chunked(index, ids, vectors, quiet)
    return index
