"""k-nearest-neighbour indexes over unit-length embeddings: exact (blocked matmul) and HNSW.

SSCD (Chochlov et al., "Using a Nearest-Neighbour, BERT-Based Approach for Scalable Clone
Detection", ICSME 2022) embeds every function and retrieves, for each one, its ``topN`` nearest
neighbours, keeping those above a cosine threshold. Exact search is a brute-force matrix product;
approximate search uses Hierarchical Navigable Small World graphs (Malkov & Yashunin, TPAMI 2020)
through ``hnswlib``.

Both indexes implement :class:`Index`. Vectors are float32 rows that the caller has L2-normalised, so
similarity = cosine = inner product, and results are sorted by decreasing similarity. Ids are
non-negative int64 labels chosen by the caller; search results are padded with id ``-1`` and
similarity ``-inf`` when fewer than ``k`` items exist.

On disk an index is a directory holding ``index.json`` (kind, dimension, parameters, format version)
and the kind's data files; every file is written atomically.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from twinspect._arrays import index_dtype
from twinspect._io import atomic_path, read_json, write_json
from twinspect.errors import IndexFormatError, InputError, TwinspectError

INDEX_FORMAT_VERSION = 1
_META = "index.json"


def _as_ids(ids: Any) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise InputError(f"ids must be a 1-D array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise InputError("ids must be non-negative (-1 is the padding id of search results)")
    if np.unique(arr).size != arr.size:
        raise InputError("ids must be unique within one call")
    return arr


def _as_vectors(vectors: Any, dim: int, what: str = "vectors") -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InputError(f"{what} must have shape (N, {dim}), got {np.asarray(vectors).shape}")
    if not np.isfinite(arr).all():
        raise InputError(f"{what} contain NaN or infinite values")
    return np.ascontiguousarray(arr)


def _check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _pad(ids: np.ndarray, sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    q, have = ids.shape
    if have >= k:
        return ids[:, :k], sims[:, :k]
    out_ids = np.full((q, k), -1, dtype=np.int64)
    out_sims = np.full((q, k), -np.inf, dtype=np.float32)
    out_ids[:, :have] = ids
    out_sims[:, :have] = sims
    return out_ids, out_sims


def topk_rows(sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Column positions and values of the k largest entries of each row, sorted descending.

    ``argpartition`` works on ``sims`` itself (largest entries at the end), so the only temporary
    of the full block size is the int64 partition index.
    """
    n = sims.shape[1]
    kk = min(k, n)
    if kk == 0:
        return np.zeros((sims.shape[0], 0), np.int64), np.zeros((sims.shape[0], 0), np.float32)
    if kk < n:
        part = np.argpartition(sims, n - kk, axis=1)[:, n - kk :]
    else:
        part = np.broadcast_to(np.arange(n), sims.shape).copy()
    vals = np.take_along_axis(sims, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)  # decreasing similarity, ties by position
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(vals, order, axis=1)


class Index(ABC):
    """A k-NN index of unit-length float32 vectors under inner-product (= cosine) similarity.

    Attributes:
        kind: ``"exact"`` or ``"hnsw"`` (written into ``index.json``).
        dim: vector dimension d.
    """

    kind: str = "index"

    def __init__(self, dim: int):
        if int(dim) != dim or dim < 1:
            raise InputError(f"index dimension must be a positive integer, got {dim!r}")
        self.dim = int(dim)

    # -- interface -----------------------------------------------------------------------------
    @abstractmethod
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors under the given ids; an id already present has its vector replaced.

        Args:
            ids: int64 (N,), unique, non-negative.
            vectors: float32 (N, dim), rows L2-normalised by the caller.

        Raises:
            InputError: wrong shapes, dimension mismatch, negative/duplicate ids, NaN values.
        """

    @abstractmethod
    def remove(self, ids: np.ndarray, missing_ok: bool = False) -> None:
        """Delete the vectors with the given ids (for incremental re-indexing).

        Args:
            ids: int64 (N,).
            missing_ok: ignore ids that are not in the index instead of raising.

        Raises:
            InputError: an id is not in the index (unless ``missing_ok``).
        """

    @abstractmethod
    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Find the k most similar stored vectors of each query.

        Args:
            vectors: float32 (Q, dim) queries (a single (dim,) vector is treated as Q = 1).
            k: number of neighbours per query (>= 1).

        Returns:
            ``(ids, sims)``: int64 (Q, k) ids and float32 (Q, k) inner products, each row sorted by
            decreasing similarity, padded with ``-1`` / ``-inf`` when fewer than k items are stored.

        Raises:
            InputError: wrong query shape or dimension, or k < 1.
        """

    @abstractmethod
    def ids(self) -> np.ndarray:
        """The stored ids, int64 (len,), in ascending order."""

    @abstractmethod
    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        """Stored vectors of the given ids, float32 (N, dim).

        Raises:
            InputError: an id is not in the index.
        """

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored (not removed) vectors."""

    @abstractmethod
    def params(self) -> dict:
        """Construction parameters (JSON-serialisable), as accepted by :func:`make_index`."""

    @abstractmethod
    def _save_data(self, directory: Path) -> dict:
        """Write the data files into ``directory``; return extra metadata for ``index.json``."""

    @classmethod
    @abstractmethod
    def _load_data(cls, directory: Path, meta: dict) -> Index:
        """Rebuild an index of this kind from ``directory`` and its ``index.json`` contents."""

    # -- persistence ---------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write the index into ``directory`` (created if needed); ``index.json`` is written last.

        Raises:
            InputError: the directory cannot be written.
        """
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create index directory: {exc.strerror or exc}", directory) from exc
        extra = self._save_data(directory)
        meta = {
            "format_version": INDEX_FORMAT_VERSION,
            "kind": self.kind,
            "dim": self.dim,
            "params": self.params(),
            "count": len(self),
            **extra,
        }
        write_json(directory / _META, meta)

    @classmethod
    def load(cls, directory: str | Path) -> Index:
        """Load an index saved by :meth:`save`; ``Index.load`` dispatches on the stored kind.

        Raises:
            IndexFormatError: missing or corrupt files, unknown kind, format version mismatch, or
                (when called on a subclass) an index of another kind.
        """
        directory = Path(directory)
        meta_path = directory / _META
        try:
            meta = read_json(meta_path)
        except InputError as exc:
            raise IndexFormatError(f"cannot read k-NN index metadata: {exc.message}", meta_path) from exc
        if not isinstance(meta, dict) or meta.get("format_version") != INDEX_FORMAT_VERSION:
            raise IndexFormatError(
                f"unsupported k-NN index format version {meta.get('format_version') if isinstance(meta, dict) else None!r}"
                f" (this twinspect reads version {INDEX_FORMAT_VERSION})",
                meta_path,
            )
        kind = meta.get("kind")
        impl = _KINDS.get(str(kind))
        if impl is None:
            raise IndexFormatError(f"unknown k-NN index kind {kind!r}", meta_path)
        if cls is not Index and not issubclass(impl, cls):
            raise IndexFormatError(f"index is of kind {kind!r}, not {cls.kind!r}", meta_path)
        try:
            index = impl._load_data(directory, meta)
        except TwinspectError:
            raise
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, EOFError, zipfile.BadZipFile) as exc:
            raise IndexFormatError(f"corrupt {kind} index data: {exc}", directory) from exc
        if len(index) != meta.get("count"):
            raise IndexFormatError(
                f"index holds {len(index)} vectors but its metadata says {meta.get('count')}", directory
            )
        return index


#: :meth:`ExactIndex.self_range_search` searches whole rows once a block's hits fill more than this
#: share of its cells (and exceed k a row). A hit costs the self-join about 600 ns (gathered,
#: mirrored, sorted when compacted), a whole row about 50 ns a column (the other half of the matrix
#: product and the top-k selection), so whole rows pay from about 1/12 of the cells on. Measured
#: here: 20,000 vectors all within the threshold, 20 s with whole rows against 259 s without; the
#: 41,485 representatives of a 2.4-MLOC tree (numpy, scipy, scikit-learn, transformers; 1 % of
#: the cells over the threshold), 113 s when the switch came at k hits a row against 56 s at this share.
DENSE_HIT_SHARE = 1 / 8


def _k_best_per_row(
    r: np.ndarray, c: np.ndarray, v: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hits ``(r[i], c[i], v[i])`` sorted by row, then descending value, ties by column; at most
    ``k`` per row kept."""
    order = np.lexsort((c, -v, r))
    r, c, v = r[order], c[order], v[order]
    first = np.searchsorted(r, r, side="left")
    keep = (np.arange(len(r)) - first) < k
    return r[keep], c[keep], v[keep]


class ExactIndex(Index):
    """Exact k-NN by brute force: blocked float32 matrix products and ``argpartition`` top-k.

    Memory stays bounded by processing queries in blocks whose similarity matrix (block x len)
    takes at most ``block_bytes`` bytes (the top-k selection needs about twice that again).

    Args:
        dim: vector dimension.
        block_bytes: memory budget of one similarity block (default 64 MiB).
    """

    kind = "exact"

    def __init__(self, dim: int, block_bytes: int = 64 << 20):
        super().__init__(dim)
        if block_bytes < 1:
            raise InputError(f"block_bytes must be positive, got {block_bytes}")
        self.block_bytes = int(block_bytes)
        self._ids = np.zeros(0, dtype=np.int64)
        self._vecs = np.zeros((0, self.dim), dtype=np.float32)

    def params(self) -> dict:
        return {"block_bytes": self.block_bytes}

    def __len__(self) -> int:
        return int(self._ids.size)

    def ids(self) -> np.ndarray:
        return np.sort(self._ids)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        order = np.argsort(self._ids, kind="stable")
        sorted_ids = self._ids[order]
        pos = np.searchsorted(sorted_ids, ids)
        pos = np.minimum(pos, max(sorted_ids.size - 1, 0))
        found = sorted_ids.size > 0
        ok = (sorted_ids[pos] == ids) if found else np.zeros(ids.shape, bool)
        rows = np.where(ok, order[pos] if found else -1, -1)
        return rows

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        ids = _as_ids(ids)
        rows = self._rows(ids)
        if (rows < 0).any():
            raise InputError(f"ids not in the index: {ids[rows < 0][:5].tolist()}")
        return self._vecs[rows].copy()

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = _as_ids(ids)
        vecs = _as_vectors(vectors, self.dim)
        if vecs.shape[0] != ids.size:
            raise InputError(f"got {ids.size} ids for {vecs.shape[0]} vectors")
        rows = self._rows(ids)
        present = rows >= 0
        if present.any():
            self._vecs[rows[present]] = vecs[present]
        new = ~present
        if new.any():
            self._ids = np.concatenate([self._ids, ids[new]])
            self._vecs = np.concatenate([self._vecs, vecs[new]])

    def remove(self, ids: np.ndarray, missing_ok: bool = False) -> None:
        ids = _as_ids(ids)
        rows = self._rows(ids)
        if not missing_ok and (rows < 0).any():
            raise InputError(f"cannot remove ids not in the index: {ids[rows < 0][:5].tolist()}")
        keep = np.ones(self._ids.size, dtype=bool)
        keep[rows[rows >= 0]] = False
        self._ids = self._ids[keep]
        self._vecs = self._vecs[keep]

    def _block_size(self) -> int:
        return max(1, self.block_bytes // max(1, 4 * len(self)))

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = _check_k(k)
        queries = _as_vectors(vectors, self.dim, "queries")
        return self._search(queries, k, exclude_rows=None)

    def _search(
        self, queries: np.ndarray, k: int, exclude_rows: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        q = queries.shape[0]
        out_ids = np.full((q, k), -1, dtype=np.int64)
        out_sims = np.full((q, k), -np.inf, dtype=np.float32)
        if len(self) == 0 or q == 0:
            return out_ids, out_sims
        step = self._block_size()
        for lo in range(0, q, step):
            hi = min(q, lo + step)
            sims = queries[lo:hi] @ self._vecs.T
            if exclude_rows is not None:
                ex = exclude_rows[lo:hi]
                valid = ex >= 0
                sims[np.nonzero(valid)[0], ex[valid]] = -np.inf
            cols, vals = topk_rows(sims, k)
            ids = self._ids[cols]
            ids[~np.isfinite(vals)] = -1
            width = cols.shape[1]
            out_ids[lo:hi, :width] = ids
            out_sims[lo:hi, :width] = vals
        return out_ids, out_sims

    def self_range_search(
        self, threshold: float, k: int, advance: Callable[[int], object] | None = None,
        max_hits: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every indexed vector's neighbours at cosine ≥ ``threshold``, at most its ``k`` nearest (a self-join).

        Cosine is symmetric, so while hits are sparse only the upper triangle of the similarity
        matrix is computed (blocks of rows against the rows from their own first one on) and each
        hit is stated from both ends: half the matrix products of querying every vector with
        :meth:`search`, and only the hits are sorted. A block whose hits fill more than
        :data:`DENSE_HIT_SHARE` of its cells, and more than ``k`` a row on average (a tree where most
        fragments look alike), switches the rest of the rows to :meth:`search`'s way — whole
        rows and a top-k selection per row — whose cost does not grow with the number of hits; the rows before it are complete by then. Hits are compacted to
        each vector's ``k`` best whenever they outgrow ``max_hits``.

        Args:
            threshold: minimum cosine (inclusive).
            k: most neighbours per vector (≥ 1).
            advance: called with the number of rows done after each block (progress).
            max_hits: hits held before a compaction (None: ``max(2·N·k, 2**20)``); the result
                does not depend on it.

        Returns:
            ``(starts, ids, sims)``: int64 (N + 1,) offsets of each indexed vector's group (in
            insertion order: the order of the ``vectors`` given to :meth:`add`) in the flat int64
            (E,) neighbour ids and float32 (E,) cosines; each group by descending cosine, ties by
            index position. The same neighbours as :meth:`search` with ``k`` (itself included),
            cut at the threshold.

        Raises:
            InputError: ``k < 1``.
        """
        k = _check_k(k)
        n = len(self)
        vecs = self._vecs
        # hit rows and columns are int32 (positions < n, index_dtype): 12 bytes a hit instead of 20, and
        # the hits (mirrored, merged, sorted) are what this search holds most of
        pos = index_dtype(n)
        kept: tuple[np.ndarray, np.ndarray, np.ndarray] = (
            np.zeros(0, pos), np.zeros(0, pos), np.zeros(0, np.float32))
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        pending = 0
        budget = max(2 * n * k, 1 << 20) if max_hits is None else int(max_hits)
        step = self._block_size()
        whole_rows_from = n  # rows from here on are searched whole (dense hits)

        def merged() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            r, c, v = (np.concatenate([x, *(p[i] for p in parts)]) for i, x in enumerate(kept))
            return _k_best_per_row(r, c, v, k)

        for lo in range(0, n, step):
            hi = min(n, lo + step)
            if lo >= whole_rows_from:  # search()'s way: every column, the k best of each row
                cols, sims = topk_rows(vecs[lo:hi] @ vecs.T, k)
                hit = sims >= threshold
                r = np.repeat(np.arange(lo, hi, dtype=pos), hit.sum(axis=1))
                parts.append((r, cols[hit].astype(pos), sims[hit]))
                pending += len(r)
            else:
                sims = vecs[lo:hi] @ vecs[lo:].T
                r64, c64 = np.nonzero(sims >= threshold)
                v = sims[r64, c64]
                r = r64.astype(pos) + pos.type(lo)
                c = c64.astype(pos) + pos.type(lo)
                del r64, c64
                upper = c > r  # the lower triangle of the diagonal block comes from the mirror below
                mine = upper | (c == r)
                parts += [(r[mine], c[mine], v[mine]), (c[upper], r[upper], v[upper])]
                pending += int(mine.sum() + upper.sum())
                if len(r) > (hi - lo) * max(k, DENSE_HIT_SHARE * (n - lo)):  # dense: rows [0, hi) are complete, the later ones go whole
                    whole_rows_from = hi
                    parts = [tuple(x[p[0] < hi] for x in p) for p in parts]  # type: ignore[misc]
                    kept = tuple(x[kept[0] < hi] for x in kept)  # type: ignore[assignment]
            if pending > budget:
                kept, parts, pending = merged(), [], 0
            if advance is not None:
                advance(hi - lo)
        r, c, v = merged()
        counts = np.bincount(r, minlength=n)
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), self._ids[c], v.astype(np.float32)

    def _save_data(self, directory: Path) -> dict:
        with atomic_path(directory / "exact.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, ids=self._ids, vectors=self._vecs)
        return {"data": "exact.npz"}

    @classmethod
    def _load_data(cls, directory: Path, meta: dict) -> ExactIndex:
        path = directory / meta.get("data", "exact.npz")
        if not path.is_file():
            raise IndexFormatError("missing exact index data file", path)
        with np.load(path, allow_pickle=False) as data:
            ids, vecs = data["ids"], data["vectors"]
        dim = int(meta["dim"])
        if vecs.dtype != np.float32 or vecs.ndim != 2 or vecs.shape != (ids.size, dim) or ids.dtype != np.int64:
            raise IndexFormatError(f"exact index data has shape {vecs.shape}/{ids.shape}, expected (N, {dim})", path)
        index = cls(dim, **meta.get("params", {}))
        index._ids, index._vecs = ids, vecs
        return index


class HNSWIndex(Index):
    """Approximate k-NN with a Hierarchical Navigable Small World graph (hnswlib 0.8.0).

    Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical
    Navigable Small World graphs", TPAMI 2020. Capacity grows automatically as items are added;
    :meth:`remove` marks items deleted (excluded from results) and their graph slots are reused by
    later insertions.

    Args:
        dim: vector dimension.
        space: ``"ip"`` (inner product; vectors must already be unit length) or ``"cosine"``
            (hnswlib normalises internally). Similarities returned are ``1 - distance`` in both.
        M: graph out-degree (hnswlib ``M``).
        ef_construction: candidate list size while building.
        ef_search: candidate list size while searching; raised to at least ``k`` per search.
        seed: random seed of the level assignment.
        num_threads: threads for add/search (-1 = all cores). Graph construction is reproducible
            for a given seed only with ``num_threads=1`` (parallel insertion order varies).
        initial_capacity: number of slots allocated up front.
    """

    kind = "hnsw"

    def __init__(
        self,
        dim: int,
        space: str = "ip",
        M: int = 16,
        ef_construction: int = 200,
        ef_search: int = 100,
        seed: int = 0,
        num_threads: int = -1,
        initial_capacity: int = 1024,
    ):
        super().__init__(dim)
        if space not in ("ip", "cosine"):
            raise InputError(f"HNSW space must be 'ip' or 'cosine', got {space!r}")
        for name, value in (("M", M), ("ef_construction", ef_construction), ("ef_search", ef_search)):
            if int(value) != value or value < 1:
                raise InputError(f"HNSW {name} must be a positive integer, got {value!r}")
        import hnswlib

        self.space = space
        self.M = int(M)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self.seed = int(seed)
        self.num_threads = int(num_threads)
        self.initial_capacity = max(1, int(initial_capacity))
        self._hnsw = hnswlib.Index(space=space, dim=self.dim)
        self._hnsw.init_index(
            max_elements=self.initial_capacity,
            ef_construction=self.ef_construction,
            M=self.M,
            random_seed=self.seed,
            allow_replace_deleted=True,
        )
        self._hnsw.set_ef(self.ef_search)
        self._live: set[int] = set()
        self._deleted: set[int] = set()  # labels marked deleted and still present in the graph

    def params(self) -> dict:
        return {
            "space": self.space,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
            "seed": self.seed,
            "num_threads": self.num_threads,
        }

    def __len__(self) -> int:
        return len(self._live)

    def ids(self) -> np.ndarray:
        return np.array(sorted(self._live), dtype=np.int64)

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        ids = _as_ids(ids)
        missing = [int(i) for i in ids if int(i) not in self._live]
        if missing:
            raise InputError(f"ids not in the index: {missing[:5]}")
        if ids.size == 0:
            return np.zeros((0, self.dim), np.float32)
        return np.asarray(self._hnsw.get_items(ids.astype(np.uint64), return_type="numpy"), dtype=np.float32)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = _as_ids(ids)
        vecs = _as_vectors(vectors, self.dim)
        if vecs.shape[0] != ids.size:
            raise InputError(f"got {ids.size} ids for {vecs.shape[0]} vectors")
        if ids.size == 0:
            return
        id_list = [int(i) for i in ids]
        # A label that is marked deleted but still in the graph must be un-deleted before it can be
        # updated (hnswlib refuses to overwrite deleted labels when slot reuse is enabled).
        for label in id_list:
            if label in self._deleted:
                self._hnsw.unmark_deleted(label)
                self._deleted.discard(label)
                self._live.add(label)
        fresh = sum(1 for label in id_list if label not in self._live)
        needed = self._hnsw.get_current_count() + fresh
        if needed > self._hnsw.get_max_elements():
            self._hnsw.resize_index(max(needed, 2 * self._hnsw.get_max_elements()))
        self._hnsw.add_items(vecs, ids.astype(np.uint64), num_threads=self.num_threads, replace_deleted=True)
        self._live.update(id_list)
        if self._deleted and fresh:
            # some deleted slots were reused by the fresh labels: forget the labels they held
            self._deleted &= set(int(i) for i in self._hnsw.get_ids_list())

    def remove(self, ids: np.ndarray, missing_ok: bool = False) -> None:
        ids = _as_ids(ids)
        missing = [int(i) for i in ids if int(i) not in self._live]
        if missing and not missing_ok:
            raise InputError(f"cannot remove ids not in the index: {missing[:5]}")
        for label in (int(i) for i in ids):
            if label in self._live:
                self._hnsw.mark_deleted(label)
                self._live.discard(label)
                self._deleted.add(label)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = _check_k(k)
        queries = _as_vectors(vectors, self.dim, "queries")
        q = queries.shape[0]
        kk = min(k, len(self))
        if kk == 0 or q == 0:
            return _pad(np.zeros((q, 0), np.int64), np.zeros((q, 0), np.float32), k)
        ef = max(self.ef_search, kk)
        for attempt in range(3):
            self._hnsw.set_ef(ef)
            try:
                labels, dists = self._hnsw.knn_query(queries, k=kk, num_threads=self.num_threads)
                break
            except RuntimeError:
                # hnswlib could not collect kk results (many deleted items): widen the search
                if attempt == 2:
                    return self._search_one_by_one(queries, k)
                ef = max(2 * ef, len(self) + len(self._deleted))
        self._hnsw.set_ef(self.ef_search)
        ids = labels.astype(np.int64)
        sims = (1.0 - dists).astype(np.float32)
        return _pad(ids, sims, k)

    def _search_one_by_one(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        out_ids = np.full((queries.shape[0], k), -1, dtype=np.int64)
        out_sims = np.full((queries.shape[0], k), -np.inf, dtype=np.float32)
        self._hnsw.set_ef(max(self.ef_search, len(self) + len(self._deleted)))
        for i, query in enumerate(queries):
            for kk in range(min(k, len(self)), 0, -1):
                try:
                    labels, dists = self._hnsw.knn_query(query[None], k=kk, num_threads=1)
                except RuntimeError:
                    continue
                out_ids[i, :kk] = labels[0].astype(np.int64)
                out_sims[i, :kk] = 1.0 - dists[0]
                break
        self._hnsw.set_ef(self.ef_search)
        return out_ids, out_sims

    def _save_data(self, directory: Path) -> dict:
        with atomic_path(directory / "hnsw.bin") as tmp:
            self._hnsw.save_index(str(tmp))
        with atomic_path(directory / "hnsw_labels.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(
                    fh,
                    live=np.array(sorted(self._live), dtype=np.int64),
                    deleted=np.array(sorted(self._deleted), dtype=np.int64),
                )
        return {"data": "hnsw.bin", "labels": "hnsw_labels.npz", "data_bytes": (directory / "hnsw.bin").stat().st_size,
                "data_sha256": _file_sha256(directory / "hnsw.bin")}

    @classmethod
    def _load_data(cls, directory: Path, meta: dict) -> HNSWIndex:
        path = directory / meta.get("data", "hnsw.bin")
        labels_path = directory / meta.get("labels", "hnsw_labels.npz")
        for p in (path, labels_path):
            if not p.is_file():
                raise IndexFormatError("missing HNSW index data file", p)
        # hnswlib trusts the file completely (a truncated or damaged file can crash the process),
        # so its size and checksum are verified first.
        if path.stat().st_size != meta.get("data_bytes") or _file_sha256(path) != meta.get("data_sha256"):
            raise IndexFormatError("HNSW graph file is truncated or damaged (checksum mismatch)", path)
        params = dict(meta.get("params", {}))
        index = cls(int(meta["dim"]), **params, initial_capacity=1)
        with np.load(labels_path, allow_pickle=False) as data:
            live, deleted = data["live"], data["deleted"]
        capacity = max(1, int(live.size + deleted.size))
        import hnswlib

        index._hnsw = hnswlib.Index(space=index.space, dim=index.dim)
        index._hnsw.load_index(str(path), max_elements=capacity, allow_replace_deleted=True)
        if index._hnsw.get_current_count() != live.size + deleted.size:
            raise IndexFormatError(
                f"HNSW graph holds {index._hnsw.get_current_count()} items, labels file says "
                f"{live.size + deleted.size}",
                path,
            )
        index._hnsw.set_ef(index.ef_search)
        index._live = set(int(i) for i in live)
        index._deleted = set(int(i) for i in deleted)
        return index


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


_KINDS: dict[str, type[Index]] = {"exact": ExactIndex, "hnsw": HNSWIndex}
INDEX_KINDS = tuple(_KINDS)


def make_index(kind: str, dim: int, **params: Any) -> Index:
    """Create an empty index.

    Args:
        kind: ``"exact"`` or ``"hnsw"``.
        dim: vector dimension.
        **params: constructor parameters of :class:`ExactIndex` / :class:`HNSWIndex`.

    Raises:
        InputError: unknown kind or parameter.
    """
    impl = _KINDS.get(kind)
    if impl is None:
        raise InputError(f"unknown index kind {kind!r} (choose one of: {', '.join(INDEX_KINDS)})")
    try:
        return impl(dim, **params)
    except TypeError as exc:
        raise InputError(f"bad parameters for the {kind} index: {exc}") from exc


def knn_all(
    index_or_vectors: Index | np.ndarray,
    k: int,
    threshold: float = -np.inf,
    *,
    ids: np.ndarray | None = None,
    kind: str = "exact",
    **params: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All-vs-all k-NN excluding each item itself: SSCD's "topN neighbours above a threshold" step.

    Each stored item is used as a query; its own id is removed from its result list (and, for the
    exact index, never competes for a slot). Neighbours whose similarity is below ``threshold`` are
    replaced by padding.

    Args:
        index_or_vectors: a filled :class:`Index`, or float32 (N, d) unit vectors (then an index of
            ``kind`` with ``params`` is built over them, with ids ``0..N-1`` unless ``ids`` given).
        k: neighbours per item (SSCD's topN).
        threshold: minimum cosine similarity kept.
        ids: int64 (N,) ids of the rows when vectors are given.
        kind: index kind used when vectors are given.
        **params: index parameters used when vectors are given.

    Returns:
        ``(query_ids, nbr_ids, sims)``: int64 (N,) ids of the items, int64 (N, k) neighbour ids and
        float32 (N, k) similarities, rows sorted by decreasing similarity, padded with -1 / -inf.

    Raises:
        InputError: bad shapes or k < 1.
    """
    k = _check_k(k)
    if isinstance(index_or_vectors, Index):
        index = index_or_vectors
        query_ids = index.ids()
    else:
        vectors = np.asarray(index_or_vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise InputError(f"vectors must have shape (N, d), got {vectors.shape}")
        query_ids = np.arange(vectors.shape[0], dtype=np.int64) if ids is None else _as_ids(ids)
        if query_ids.size != vectors.shape[0]:
            raise InputError(f"got {query_ids.size} ids for {vectors.shape[0]} vectors")
        index = make_index(kind, vectors.shape[1], **params)
        index.add(query_ids, vectors)
    if isinstance(index, ExactIndex):
        queries = index.get_vectors(query_ids)
        nbr, sims = index._search(queries, k, exclude_rows=index._rows(query_ids))
    else:
        queries = index.get_vectors(query_ids)
        nbr, sims = index.search(queries, k + 1) if len(query_ids) else (
            np.zeros((0, k + 1), np.int64),
            np.zeros((0, k + 1), np.float32),
        )
        is_self = nbr == query_ids[:, None]
        # drop the self match where found, otherwise the last column
        drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), k)
        keep = np.ones_like(is_self)
        keep[np.arange(len(drop)), drop] = False
        nbr = nbr[keep].reshape(-1, k)
        sims = sims[keep].reshape(-1, k)
    below = sims < threshold
    nbr = np.where(below, -1, nbr)
    sims = np.where(below, np.float32(-np.inf), sims).astype(np.float32)
    return query_ids, nbr, sims


def read_index_meta(directory: str | Path) -> dict:
    """Return the ``index.json`` of a saved index without loading it (raises IndexFormatError)."""
    path = Path(directory) / _META
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexFormatError(f"cannot read k-NN index metadata: {exc}", path) from exc
