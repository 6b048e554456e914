"""Changed-files clone checks: ``twinspect clones PATH --cache DIR --changed``.

A clone check in CI should cost what the commit changed, not what the tree holds: on a 13-MLOC tree
a full scan takes minutes, but a commit touches a handful of files. Here a full scan run with
``--cache DIR`` saves, beside its parse checkpoint (:mod:`twinspect.code.checkpoint`), the state its
detection was made with (:func:`save_state`, ``DIR/scan-state/``):

* every fragment's file, lines, name and T2 key (a 64-bit hash of the identifier-abstracted text);
* the exact-duplicate buckets and the representatives the candidate search ran over;
* the representatives' lexical vectors (sparse) and the fitted encoder (its IDF), so new code is
  embedded with the statistics of the whole tree;
* the representatives' token multisets as SourcererCC items (token hash, occurrence) with an
  inverted index, so token-overlap candidates of new code are found without rebuilding the index;
* the base lines of the base-code rule (:mod:`twinspect.code.basecode`) and the file keys (size,
  modification time, language) of the scan.

:func:`changed_scan` then parses only the files whose key differs from the saved one (or that are
new), retrieves from the state the unchanged fragments that could pair with their fragments — every
representative at cosine ≥ the candidate threshold or token overlap ≥ ``token_overlap`` (the most
similar ``2 × max_neighbours`` of each kind per fragment), their buckets' members and the fragments of
the same T2 key — reads those back from the parse checkpoint, and runs the ordinary detection
(:func:`twinspect.code.clones.detect`, with the saved encoder and base lines) on that small set. The
report keeps the pairs with at least one fragment in a changed or added file: the clones the change
brings in or touches. ``--baseline`` then narrows them to the new ones.

What it does not do, by design or not yet:

* by default the state is the one of the last full scan and successive checks are all measured
  against it; with ``--update-state`` (``update=True``) a check is folded into it
  (:func:`update_state`: the changed files' rows replaced, buckets and token index kept
  consistent), so the next check is measured against this tree — but the encoder's IDF and the
  base lines stay the full scan's until a full scan with the same ``--cache`` refits them;
* pairs between two unchanged files are not re-checked (they are the full scan's);
* detection runs on the retrieved neighbourhood, so the verifier's TF-IDF features and the
  per-fragment candidate caps are those of that neighbourhood, not of the whole tree: a pair can
  differ from what a full re-scan would report (``benchmarks/clones_changed.py`` measures how often);
* copied regions inside functions (:mod:`twinspect.code.subfunction`) are found only between a
  changed function and the retrieved ones.

A state is saved only for the detection it can serve: ``decision="verifier"`` at function
granularity with the lexical encoder and exact-duplicate buckets (the defaults).
"""

from __future__ import annotations

import json
import math
import os
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from twinspect._io import atomic_directory
from twinspect.errors import InputError

if TYPE_CHECKING:
    from twinspect.code.clones import CloneReport, DetectConfig
    from twinspect.code.fragments import Fragment

STATE_DIR = "scan-state"
STATE_VERSION = 1
#: retrieved neighbours per changed fragment and per candidate source, as a multiple of ``max_neighbours``
RETRIEVE_FACTOR = 2
_ITEM_ROWS = 20_000  # token lists per block of token_items
_OCC_STEP = np.uint64(0x9E3779B97F4A7C15)  # the k-th occurrence of a token is item h(token) + k·step (mod 2^64)
#: detection options a saved state depends on (others, e.g. the report format, do not matter)
_STATE_OPTIONS = ("encoder", "encoder_params", "decision", "max_neighbours", "token_overlap", "verifier_path",
                  "candidate_threshold", "lexical_min_t3", "min_lines", "granularity", "exact_buckets",
                  "max_bucket_pairs", "base_code")


def state_supported(config: DetectConfig) -> str | None:
    """Why a scan with ``config`` cannot save or use a changed-files state (None: it can).

    Returns:
        A short reason, or None.
    """
    if config.decision != "verifier":
        return f"--decision {config.decision} (the state serves the verifier)"
    if config.granularity != "function":
        return f"--granularity {config.granularity} (the state serves function granularity)"
    if config.encoder != "lexical":
        return f"-e {config.encoder} (the state serves the lexical encoder)"
    if not config.exact_buckets:
        return "exact-duplicate buckets switched off"
    return None


def _fingerprint(config: DetectConfig, mining: dict[str, Any]) -> str:
    from twinspect import __version__

    opts = {k: v for k, v in config.to_dict().items() if k in _STATE_OPTIONS}
    return json.dumps({"options": opts, "mining": mining, "version": __version__, "state": STATE_VERSION},
                      sort_keys=True, default=str)


def _hash64(texts: Sequence[str]) -> np.ndarray:
    """uint64 (N,) :func:`twinspect.code.normalize.blake64` of each string."""
    from twinspect.code.normalize import blake64

    return np.fromiter(map(blake64, texts), dtype=np.uint64, count=len(texts))


def token_items(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """SourcererCC multiset items of token lists, as 64-bit keys, grouped by list.

    The k-th occurrence (k = 0, 1, ...) of token t in a list is the item ``h(t) + k·c (mod 2^64)``, with
    h a 64-bit BLAKE2b hash and c an odd constant, so the number of items two lists share is the size of
    their multiset intersection (up to hash collisions, negligible at 2^-64 per item pair).

    Args:
        token_lists: N token lists.

    Returns:
        ``(indptr, items)``: int64 (N+1,) row offsets and int64 (T,) item keys (the uint64 keys viewed
        as int64), grouped by row (row i's are ``items[indptr[i]:indptr[i+1]]``, in no set order).
    """
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    items = np.empty(int(indptr[-1]), dtype=np.int64)
    for lo in range(0, len(token_lists), _ITEM_ROWS):  # in row blocks: bounded temporaries on a large tree
        hi = min(len(token_lists), lo + _ITEM_ROWS)
        items[indptr[lo]:indptr[hi]] = _block_items(token_lists[lo:hi])
    return indptr, items


def _block_items(token_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """:func:`token_items` of one block of lists, concatenated (rows in order; within a row by token, then k)."""
    from twinspect.code.normalize import token_ids

    ids, lengths, vocab = token_ids(token_lists)
    if not len(ids):
        return np.zeros(0, dtype=np.int64)
    key = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths) * (len(vocab) + 1) + ids
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1]
    run_len = np.diff(np.r_[starts, len(key)])
    del key
    occ = (np.arange(len(order)) - np.repeat(starts, run_len)).astype(np.uint64)
    with np.errstate(over="ignore"):
        return (_hash64(vocab)[ids[order]] + occ * _OCC_STEP).view(np.int64)


@dataclass
class ScanState:
    """What a full scan saves for later changed-files checks (see the module doc).

    Attributes:
        meta: ``fingerprint`` (options the state depends on), ``files`` (rel path -> file key),
            ``paths`` (the distinct fragment paths), ``names`` (fragment names), ``saved`` (time).
        path_id, start, end: int32 (N,) each fragment's path (index into ``meta["paths"]``) and lines.
        t2: int64 (N,) 64-bit hash of each fragment's T2 key.
        bucket: int64 (N,) exact-duplicate bucket of each fragment; ``reps`` int64 (R,) the fragment
            row of each bucket's representative (bucket b's is ``reps[b]``).
        vectors: float32 CSR (R, d) the representatives' vectors.
        item_ptr, items: the representatives' token items (:func:`token_items`), int64.
        post_items, post_ptr, post_reps: the inverted index: sorted distinct items, int64 offsets and
            int32 representative positions.
        encoder: the fitted lexical encoder.
        base: the base lines used by the full scan.
    """

    meta: dict
    path_id: np.ndarray
    start: np.ndarray
    end: np.ndarray
    t2: np.ndarray
    bucket: np.ndarray
    reps: np.ndarray
    vectors: sp.csr_matrix
    item_ptr: np.ndarray
    items: np.ndarray
    post_items: np.ndarray
    post_ptr: np.ndarray
    post_reps: np.ndarray
    encoder: Any
    base: frozenset[str] = field(default_factory=frozenset)

    def __len__(self) -> int:
        return len(self.path_id)

    def rows_of(self, paths: set[str]) -> np.ndarray:
        """bool (N,): the fragments whose file is one of ``paths`` (rel paths)."""
        return np.asarray([p in paths for p in self.meta["paths"]], dtype=bool)[self.path_id]


def save_state(directory: str | os.PathLike[str], *, fragments: Sequence[Fragment], clf: Any,
               buckets: Sequence[Sequence[int]], vectors: Any, encoder: Any, base: frozenset[str],
               config: DetectConfig, mining: dict[str, Any], file_keys: dict[str, str | None]) -> Path:
    """Save a full scan's detection state under ``directory/scan-state`` (atomically: the previous
    state stays until the new one is complete).

    Args:
        directory: the ``--cache`` directory.
        fragments: the N fragments in the report's order; ``clf`` their
            :class:`~twinspect.code.clone_types.TypeClassifier`; ``buckets`` the exact-duplicate
            buckets (first member = representative); ``vectors`` their
            :class:`~twinspect.code.vectors.FragmentVectors` (sparse lexical rows); ``encoder`` the
            fitted lexical encoder; ``base`` the base lines used — as
            :func:`twinspect.code.clones.detect` hands them to ``keep_state``.
        config: the detection options; ``mining`` the parse options (min_lines, granularity, ...).
        file_keys: rel path -> the parse checkpoint's file key (size, mtime, language), None where
            the file could not be stat-ed.

    Returns:
        The state directory.
    """
    from twinspect.code.normalize import token_views

    n = len(fragments)
    paths = sorted({f.path for f in fragments})
    pid = {p: i for i, p in enumerate(paths)}
    bucket = np.empty(n, dtype=np.int64)
    for bi, members in enumerate(buckets):
        bucket[np.asarray(members, dtype=np.int64)] = bi
    reps = np.asarray([b[0] for b in buckets], dtype=np.int64)
    meta = {
        "fingerprint": _fingerprint(config, mining),
        "files": {k: v for k, v in file_keys.items() if v is not None},
        "paths": paths,
        "names": [f.name for f in fragments],
        "base": sorted(base),
        "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    # the representatives' rows and token items are made only when written (see _write_state)
    return _write_state(Path(directory) / STATE_DIR, meta, encoder,
                        path_id=np.asarray([pid[f.path] for f in fragments], dtype=np.int32),
                        start=np.asarray([f.start_line for f in fragments], dtype=np.int32),
                        end=np.asarray([f.end_line for f in fragments], dtype=np.int32),
                        t2=_hash64([clf.t2_key(i) for i in range(n)]).view(np.int64),
                        bucket=bucket, reps=reps,
                        vectors=lambda: sp.csr_matrix(vectors.rows(reps) if hasattr(vectors, "rows") else vectors[reps],
                                                      dtype=np.float32),
                        items=lambda: token_items([token_views(fragments[int(r)])[0] for r in reps.tolist()]))


_TOP_BLOCK = 1 << 22  # items whose range number is computed at once by postings() (a memory bound)


def postings(item_ptr: np.ndarray, items: np.ndarray, *, parts: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inverted index of the representatives' token items (see :class:`ScanState`).

    The items are split by their top bits into ``parts`` ranges in sort order and each range is
    sorted on its own (stably, its entries in ascending position), so only one range's sort keys are
    held at once: on a 13-MLOC tree's 35 M items a whole-array sort held about 1 GB of int64
    temporaries at the scan's memory peak. The result does not depend on ``parts``.

    Args:
        item_ptr: int64 (R + 1,) offsets of each representative's items in ``items`` (int64).
        parts: ranges sorted one at a time (≥ 1; a memory bound, rounded up to a power of two).

    Returns:
        ``(post_items, post_ptr, post_reps)``: the sorted distinct items, int64 (U + 1,) offsets into
        ``post_reps``, and int32 the representative position of each entry (ascending within an item).
    """
    bits = max(0, int(np.ceil(np.log2(max(1, parts)))))
    # order-preserving unsigned view of the int64 items: its top `bits` bits number the ranges in order
    # (computed a block at a time: two whole-array uint64 temporaries were 0.5 GB at 35 M items)
    top = np.zeros(len(items), dtype=np.uint16)
    if bits:
        unsigned = items.view(np.uint64)
        for lo in range(0, len(items), _TOP_BLOCK):
            top[lo:lo + _TOP_BLOCK] = (unsigned[lo:lo + _TOP_BLOCK] ^ np.uint64(1 << 63)) >> np.uint64(64 - bits)
    out_items, out_counts, out_reps = [], [], []
    for part in range(1 << bits):
        pos = np.flatnonzero(top == part)  # ascending positions: a stable sort keeps them in order per item
        if not len(pos):
            continue
        part_items = items[pos]
        order = np.argsort(part_items, kind="stable")
        part_items = part_items[order]
        reps = (np.searchsorted(item_ptr, pos[order], side="right") - 1).astype(np.int32)  # the row of each item
        del pos, order
        distinct, ptr, reps = _grouped(part_items, reps)
        out_items.append(distinct)
        out_counts.append(np.diff(ptr))
        out_reps.append(reps)
    del top
    if not out_items:
        return _grouped(items[:0], np.zeros(0, np.int32))
    counts = np.concatenate(out_counts)
    return (np.concatenate(out_items), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            np.concatenate(out_reps))


def _grouped(sorted_items: np.ndarray, reps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Postings from entries sorted by item: distinct items, offsets, and the entries' representatives."""
    starts = np.r_[0, np.flatnonzero(sorted_items[1:] != sorted_items[:-1]) + 1] if len(sorted_items) \
        else np.zeros(0, np.int64)
    return sorted_items[starts], np.r_[starts, len(sorted_items)].astype(np.int64), reps.astype(np.int32)


def _write_state(target: Path, meta: dict, encoder: Any, *,
                 vectors: sp.csr_matrix | Callable[[], sp.csr_matrix],
                 items: tuple[np.ndarray, np.ndarray] | Callable[[], tuple[np.ndarray, np.ndarray]],
                 index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 **rows: np.ndarray) -> Path:
    """Write a state (the per-fragment ``rows`` arrays, the representatives' ``vectors`` and token
    ``items`` — ``(item_ptr, items)`` — with their inverted index — ``index`` when given, else built
    by :func:`postings` —, the encoder and ``meta``) to ``target``, atomically.

    ``vectors`` and ``items`` may be callables that make them: each is then made right before it is
    written, and every array is let go of once written (the archive is filled one array at a time),
    so a full scan's save holds the token items and their index, not every array of the state at
    once (about 1 GB on a 13-MLOC tree's 35 M items, at the scan's memory peak)."""
    with atomic_directory(target) as tmp:
        with zipfile.ZipFile(tmp / "state.npz", "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            def put(name: str, array: np.ndarray) -> None:
                with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)

            for name in list(rows):
                put(name, rows.pop(name))
            item_ptr, item_keys = items() if callable(items) else items
            del items
            post = list(index if index is not None else postings(item_ptr, item_keys))
            del index
            put("item_ptr", item_ptr)
            put("items", item_keys)
            del item_ptr, item_keys
            for name in ("post_items", "post_ptr", "post_reps"):
                put(name, post.pop(0))
            vec = vectors() if callable(vectors) else vectors
            del vectors
            for name, array in (("vec_data", vec.data), ("vec_indices", vec.indices), ("vec_indptr", vec.indptr),
                                ("vec_shape", np.asarray(vec.shape))):
                put(name, array)
            del vec
            for k, v in encoder.state_dict().items():
                put(f"enc_{k}", v)
        with open(tmp / "state.json", "w", encoding="utf-8") as fh:
            json.dump(meta, fh, ensure_ascii=False)
    return target


def update_state(directory: str | os.PathLike[str], state: ScanState, *, fragments: Sequence[Fragment],
                 gone: set[str], file_keys: dict[str, str | None], promoted: dict[int, Fragment]) -> dict[str, int]:
    """Fold a changed-files check into the saved state, so the next check starts from this tree.

    The rows of ``gone`` files are dropped, ``fragments`` (the changed and added files' fragments)
    are appended, and the exact-duplicate buckets kept consistent: a new fragment joins the bucket
    of its T2 key when one survives, else new fragments of one T2 key form a bucket (the first one
    its representative); a bucket whose representative left keeps its first surviving member as
    the new one (``promoted`` holds those fragments, read back from the parse checkpoint). New
    representatives are embedded with the saved encoder and their token items indexed. What stays
    as the full scan made it: the encoder's IDF and the base lines (a full scan with the same
    ``--cache`` refits both); so after many updates the state drifts from what a full scan of the
    same tree would save (``benchmarks/clones_changed.py --update`` compares each check made on an
    updated state with a full re-scan).

    Args:
        directory: the ``--cache`` directory; ``state`` its loaded state.
        fragments: the changed and added files' fragments, in the check's order.
        gone: rel paths whose rows are dropped (changed, added and removed files).
        file_keys: rel path -> file key of every file of the checked tree (None: could not be stat-ed).
        promoted: state row -> fragment, for every row :func:`promotions` names.

    Returns:
        ``{"fragments_dropped", "fragments_added", "representatives_promoted", "representatives_embedded",
        "fragments"}`` (counts; ``fragments`` the state's new size).

    Raises:
        InputError: the state cannot be written (as :func:`twinspect._io.atomic_directory`).
    """
    from twinspect.code.normalize import t2_key, token_views

    stale = state.rows_of(gone)
    keep = np.flatnonzero(~stale)
    n_keep, n_new = len(keep), len(fragments)
    old_paths: list[str] = state.meta["paths"]
    paths = sorted({old_paths[i] for i in np.unique(state.path_id[keep]).tolist()} | {f.path for f in fragments})
    pid = {p: i for i, p in enumerate(paths)}
    remap = np.asarray([pid.get(p, -1) for p in old_paths], dtype=np.int32)
    path_id = np.r_[remap[state.path_id[keep]], np.asarray([pid[f.path] for f in fragments], dtype=np.int32)]
    start = np.r_[state.start[keep], np.asarray([f.start_line for f in fragments], dtype=np.int32)].astype(np.int32)
    end = np.r_[state.end[keep], np.asarray([f.end_line for f in fragments], dtype=np.int32)].astype(np.int32)
    t2 = np.r_[state.t2[keep], _hash64([t2_key(f) for f in fragments]).view(np.int64)]
    names = [state.meta["names"][r] for r in keep.tolist()] + [f.name for f in fragments]

    # buckets: the surviving old ones (in their order), then the new T2 keys'; members in row order
    old_bucket = state.bucket[keep]
    surviving = np.unique(old_bucket)  # ascending old bucket ids
    b_new = np.full(len(state.reps), -1, dtype=np.int64)
    b_new[surviving] = np.arange(len(surviving))
    bucket = np.empty(n_keep + n_new, dtype=np.int64)
    bucket[:n_keep] = b_new[old_bucket]
    first_row = np.full(len(surviving), n_keep, dtype=np.int64)  # each surviving bucket's first kept row
    np.minimum.at(first_row, bucket[:n_keep], np.arange(n_keep, dtype=np.int64))
    by_t2 = {int(t): int(b) for t, b in zip(t2[first_row].tolist(), range(len(surviving)))}
    next_b = len(surviving)
    new_rep_rows: list[int] = []
    for j in range(n_new):
        key = int(t2[n_keep + j])
        if key not in by_t2:
            by_t2[key] = next_b
            next_b += 1
            new_rep_rows.append(n_keep + j)
        bucket[n_keep + j] = by_t2[key]
    old_rep_row = state.reps[surviving]  # the old representative of each surviving bucket (a state row)
    rep_kept = ~stale[old_rep_row]
    # a kept representative's row among the kept rows (keep is ascending); promoted ones: their first kept row
    reps = np.r_[np.where(rep_kept, np.searchsorted(keep, old_rep_row), first_row),
                 np.asarray(new_rep_rows, dtype=np.int64)]

    # vectors and token items: the old ones of kept representatives, new ones for the others
    kept_pos = np.flatnonzero(rep_kept)  # surviving buckets whose representative stayed
    to_embed_rows = [int(keep[first_row[b]]) for b in np.flatnonzero(~rep_kept).tolist()]  # promoted (state rows)
    missing = [r for r in to_embed_rows if r not in promoted]
    if missing:
        raise ValueError(f"update_state: no fragment given for promoted rows {missing[:5]}")
    embed = [promoted[r] for r in to_embed_rows] + [fragments[r - n_keep] for r in new_rep_rows]
    n_prom, n_old = len(to_embed_rows), len(state.reps)
    new_vec = (sp.csr_matrix(state.encoder.encode_sparse(embed), dtype=np.float32) if embed
               else sp.csr_matrix((0, state.vectors.shape[1]), dtype=np.float32))
    new_ptr, new_items = token_items([token_views(f)[0] for f in embed])
    # the source of each representative of the new order, among the old ones (0..n_old-1) and the embedded
    # ones (n_old + k): surviving buckets (kept or promoted), then the new buckets
    src_new = np.full(len(surviving), -1, dtype=np.int64)
    src_new[~rep_kept] = np.arange(n_prom)
    src = np.r_[np.where(rep_kept, surviving, n_old + src_new), n_old + n_prom + np.arange(len(new_rep_rows))]
    vectors = sp.csr_matrix(sp.vstack([state.vectors, new_vec], format="csr")[src], dtype=np.float32)
    pool_lo = np.r_[state.item_ptr[:-1], len(state.items) + new_ptr[:-1]]
    pool_hi = np.r_[state.item_ptr[1:], len(state.items) + new_ptr[1:]]
    items = np.concatenate([state.items, new_items])[_ranges(pool_lo[src], pool_hi[src])]
    item_ptr = np.r_[0, np.cumsum(pool_hi[src] - pool_lo[src])].astype(np.int64)

    # the inverted index, merged instead of rebuilt (a full sort of every item took most of an update on
    # the 13-MLOC tree): the old entries of kept representatives, renumbered, then the new ones inserted
    # after the old entries of the same item
    map_old = np.full(len(state.reps), -1, dtype=np.int64)
    map_old[surviving[kept_pos]] = kept_pos
    ent_rep = map_old[state.post_reps]
    keep_ent = ent_rep >= 0
    ent_item = np.repeat(state.post_items, np.diff(state.post_ptr))[keep_ent]
    ent_rep = ent_rep[keep_ent]
    at_pos = np.r_[np.flatnonzero(~rep_kept), len(surviving) + np.arange(len(new_rep_rows))].astype(np.int64)
    new_rep = np.repeat(at_pos, np.diff(new_ptr))
    o = np.argsort(new_items, kind="stable")
    where = np.searchsorted(ent_item, new_items[o], side="right")
    index = _grouped(np.insert(ent_item, where, new_items[o]), np.insert(ent_rep, where, new_rep[o]))
    del ent_item, ent_rep, keep_ent

    files = {k: v for k, v in state.meta.get("files", {}).items() if k not in gone}
    files.update({k: v for k, v in file_keys.items() if k in gone and v is not None})
    meta = {**state.meta, "files": files, "paths": paths, "names": names,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "updates": int(state.meta.get("updates", 0)) + 1}
    _write_state(Path(directory) / STATE_DIR, meta, state.encoder, path_id=path_id, start=start, end=end, t2=t2,
                 bucket=bucket, reps=reps, vectors=vectors, items=(item_ptr, items), index=index)
    return {"fragments_dropped": int(stale.sum()), "fragments_added": n_new, "representatives_promoted": n_prom,
            "representatives_embedded": len(embed), "fragments": n_keep + n_new}


def promotions(state: ScanState, gone: set[str]) -> np.ndarray:
    """State rows that become their bucket's representative when the rows of ``gone`` files are
    dropped (the first surviving member of a bucket whose representative is dropped), int64 sorted."""
    stale = state.rows_of(gone)
    lost = np.flatnonzero(stale[state.reps])  # buckets whose representative goes
    if not len(lost):
        return np.zeros(0, dtype=np.int64)
    alive = np.flatnonzero(~stale & np.isin(state.bucket, lost))
    _, first = np.unique(state.bucket[alive], return_index=True)
    return alive[first]


def load_state(directory: str | os.PathLike[str], config: DetectConfig, mining: dict[str, Any]) -> ScanState:
    """Read the state a full scan saved under ``directory`` (:func:`save_state`).

    Raises:
        InputError: there is no state (no full scan with this ``--cache`` yet), it is damaged, or it
            was saved under other detection or parse options (one line saying which).
    """
    from twinspect.code.encoders.lexical import LexicalEncoder

    src = Path(directory) / STATE_DIR
    hint = f"run a full scan first: twinspect clones PATH --cache {directory}"
    if not (src / "state.json").is_file() or not (src / "state.npz").is_file():
        raise InputError("no saved scan state (a full scan with --cache saves one)", Path(directory), hint=hint)
    try:
        with open(src / "state.json", encoding="utf-8") as fh:
            meta = json.load(fh)
        if meta.get("fingerprint") != _fingerprint(config, mining):
            raise InputError("the saved scan state was made with other detection or parse options (or another "
                             "twinspect version)", src, hint=hint + " and the same options")
        z = np.load(src / "state.npz", allow_pickle=False)
        enc = LexicalEncoder.from_state({k[4:]: z[k] for k in z.files if k.startswith("enc_")})
        shape = tuple(int(v) for v in z["vec_shape"])
        vec = sp.csr_matrix((z["vec_data"], z["vec_indices"], z["vec_indptr"]), shape=shape)
        return ScanState(meta=meta, path_id=z["path_id"], start=z["start"], end=z["end"], t2=z["t2"],
                         bucket=z["bucket"], reps=z["reps"], vectors=vec, item_ptr=z["item_ptr"], items=z["items"],
                         post_items=z["post_items"], post_ptr=z["post_ptr"], post_reps=z["post_reps"],
                         encoder=enc, base=frozenset(meta.get("base") or ()))
    except InputError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"damaged scan state: {exc}", src, hint=hint) from exc


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenated index ranges ``lo[i]:hi[i]`` (int64), without a Python loop."""
    lens = hi - lo
    if not len(lens) or not lens.sum():
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.r_[0, np.cumsum(lens)[:-1]], lens)
    return starts + np.arange(int(lens.sum()), dtype=np.int64)


def _top(scores: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray:
    """Positions of the at most ``k`` highest ``scores`` where ``ok`` (ties by position)."""
    idx = np.flatnonzero(ok)
    if len(idx) > k:
        idx = idx[np.lexsort((idx, -scores[idx]))[:k]]
    return idx


def overlap_neighbours(state: ScanState, fragments: Sequence[Fragment], theta: float, k: int,
                       rep_ok: np.ndarray) -> list[np.ndarray]:
    """Per fragment, the representatives whose token overlap with it reaches ``theta`` (the ``k`` highest).

    The overlap is SourcererCC's ``|A ∩ B| / max(|A|, |B|)`` over token multisets (the fragments' T1
    tokens, as :func:`twinspect.code.candidates.overlap_pairs` uses them), computed exactly for the
    representatives that pass SourcererCC's extended prefix filter on the saved inverted index: a
    partner sharing ``alpha = ceil(theta·m)`` of a fragment's m items shares at least
    ``k' = min(PREFIX_SHARED, alpha)`` of any ``m - alpha + k'`` of them, and the rarest ones (shortest
    postings) are taken.

    Args:
        state: the saved state; ``fragments`` the query fragments; ``theta`` in (0, 1]; ``k`` the most
            kept per fragment (highest overlap, ties by position); ``rep_ok`` bool (R,) the
            representatives that may be returned.

    Returns:
        One int64 array of representative positions (into ``state.reps``) per fragment.
    """
    from twinspect.code.candidates import PREFIX_SHARED
    from twinspect.code.normalize import token_views

    out: list[np.ndarray] = []
    q_ptr, q_items = token_items([token_views(f)[0] for f in fragments])
    rep_size = np.diff(state.item_ptr)
    post_len = np.diff(state.post_ptr)
    n_post = len(state.post_items)
    empty = np.zeros(0, dtype=np.int64)
    for j in range(len(fragments)):
        mine = np.unique(q_items[q_ptr[j]:q_ptr[j + 1]])
        m = len(mine)
        if not m or not n_post:
            out.append(empty)
            continue
        alpha = max(1, math.ceil(theta * m - 1e-9))
        k_shared = min(PREFIX_SHARED, alpha)
        pos = np.minimum(np.searchsorted(state.post_items, mine), n_post - 1)
        present = state.post_items[pos] == mine
        plen = np.where(present, post_len[pos], 0)
        prefix = np.argsort(plen, kind="stable")[: m - alpha + k_shared]
        prefix = pos[prefix[present[prefix]]]
        lo, hi = state.post_ptr[prefix], state.post_ptr[prefix + 1]
        hits = np.bincount(state.post_reps[_ranges(lo, hi)], minlength=len(state.reps))
        cand = np.flatnonzero(hits >= k_shared)
        size = rep_size[cand]
        cand = cand[(size >= theta * m - 1e-9) & (size * theta <= m + 1e-9) & rep_ok[cand]]
        if not len(cand):
            out.append(empty)
            continue
        lo, hi = state.item_ptr[cand], state.item_ptr[cand + 1]  # exact overlap of the survivors
        shared = np.add.reduceat(np.isin(state.items[_ranges(lo, hi)], mine).astype(np.int64),
                                 np.r_[0, np.cumsum(hi - lo)[:-1]])
        sim = shared / np.maximum(m, hi - lo)
        out.append(cand[_top(sim, sim >= theta - 1e-9, k)])
    return out


def retrieve(state: ScanState, fragments: Sequence[Fragment], config: DetectConfig,
             stale: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """Fragment rows of the state that may pair with ``fragments`` (the changed files' fragments).

    A representative is retrieved when its cosine with a fragment reaches ``config.candidate_cosine``
    or its token overlap (``|A ∩ B| / max(|A|, |B|)``, SourcererCC's) reaches ``config.token_overlap``
    — the most similar ``RETRIEVE_FACTOR × max_neighbours`` of each source per fragment —, and it
    brings its whole bucket; fragments with a changed fragment's T2 key are retrieved too. Rows in
    ``stale`` (fragments of changed or removed files) are never returned.

    Args:
        state: the saved state; ``fragments`` the changed files' fragments; ``config`` the
            detection options; ``stale`` bool (N,) rows to leave out.

    Returns:
        ``(rows, counts)``: int64 sorted fragment rows, and ``{"by_cosine", "by_overlap", "by_t2"}``
        (representatives or fragments found by each way).
    """
    from twinspect.code.normalize import t2_key

    k = RETRIEVE_FACTOR * config.max_neighbours
    rep_ok = ~stale[state.reps]
    found: list[np.ndarray] = []
    counts = {"by_cosine": 0, "by_overlap": 0, "by_t2": 0}
    if not fragments:
        return np.zeros(0, dtype=np.int64), counts
    q = sp.csr_matrix(state.encoder.encode_sparse(list(fragments)), dtype=np.float32)
    sims = (state.vectors @ q.T).toarray() if state.vectors.shape[0] else np.zeros((0, len(fragments)), np.float32)
    for j in range(len(fragments)):
        col = sims[:, j]
        hit = _top(col, (col >= config.candidate_cosine - 1e-6) & rep_ok, k)
        counts["by_cosine"] += len(hit)
        found.append(hit)
    if config.token_overlap is not None:
        for sel in overlap_neighbours(state, fragments, float(config.token_overlap), k, rep_ok):
            counts["by_overlap"] += len(sel)
            found.append(sel)
    reps = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(np.isin(state.bucket, reps))  # whole buckets of the retrieved representatives
    t2 = _hash64([t2_key(f) for f in fragments]).view(np.int64)
    same = np.flatnonzero(np.isin(state.t2, t2) & ~stale)
    counts["by_t2"] = int(len(same))
    rows = np.union1d(rows, same)
    return rows[~stale[rows]], counts


@dataclass
class ChangedFiles:
    """The files of a tree compared with a saved state.

    Attributes:
        changed: rel paths whose key differs from the saved one; ``added``: rel paths new to the tree;
        ``removed``: saved rel paths no longer in the tree; ``unchanged``: the number of the others.
    """

    changed: list[str]
    added: list[str]
    removed: list[str]
    unchanged: int


def compare_files(state: ScanState, keys: dict[str, str | None]) -> ChangedFiles:
    """Which discovered files (``keys``: rel path -> current file key) changed since the state's scan."""
    saved: dict[str, str] = state.meta.get("files", {})
    changed = sorted(r for r, k in keys.items() if r in saved and (k is None or saved[r] != k))
    added = sorted(r for r in keys if r not in saved)
    removed = sorted(r for r in saved if r not in keys)
    return ChangedFiles(changed, added, removed, len(keys) - len(changed) - len(added))


def changed_scan(
    paths: Sequence[str | Path],
    config: DetectConfig,
    cache_dir: str | os.PathLike[str],
    *,
    exclude: Sequence[str] = (),
    max_file_bytes: int = 1 << 20,
    respect_gitignore: bool = True,
    language: str | None = None,
    quiet: bool = True,
    update: bool = False,
) -> CloneReport:
    """Detect the clones of the files changed since the full scan that filled ``cache_dir`` (module doc).

    Args:
        paths: the scanned files/directories (as for the full scan).
        config: detection options (those the state depends on must equal the full scan's).
        cache_dir: the ``--cache`` directory of that full scan.
        exclude, max_file_bytes, respect_gitignore, language: as :func:`twinspect.code.clones.scan`.
        quiet: no progress display.
        update: then fold the check into the saved state (:func:`update_state`), so the next
            ``--changed`` check is measured against this tree (one commit's check after another's).

    Returns:
        A :class:`~twinspect.code.clones.CloneReport` over the changed files' fragments and the
        retrieved ones, holding only pairs (and classes, identical groups, group pairs) with a
        fragment in a changed or added file; its stats gain ``changed`` (``files_changed``,
        ``files_added``, ``files_removed``, ``files_unchanged``, ``fragments_changed``,
        ``fragments_retrieved``, ``retrieved_by``, ``state_fragments``, ``state_updates`` (updates
        folded into the state before this check) and, with ``update``, ``state_update``).

    Raises:
        InputError: no usable state (see :func:`load_state`), options the state cannot serve, or a
            path problem (as a scan).
    """
    from twinspect.code.checkpoint import ParseCache, file_key
    from twinspect.code.clones import detect, scan_root
    from twinspect.code.files import discover
    from twinspect.code.fragments import mine_files
    from twinspect.progress import progress

    why = state_supported(config)
    if why is not None:
        raise InputError(f"--changed cannot serve {why}")
    t0 = time.perf_counter()
    mining = mining_options(config)
    state = load_state(cache_dir, config, mining)
    t_load = time.perf_counter() - t0
    files, stats = discover(paths, exclude=exclude, max_file_bytes=max_file_bytes,
                            respect_gitignore=respect_gitignore, language=language)
    root = scan_root(list(paths))
    keys = {sf.rel: file_key(sf) for sf in files}
    diff = compare_files(state, keys)
    if state.meta.get("files") and len(diff.removed) == len(state.meta["files"]):
        raise InputError(f"none of the {len(diff.removed)} files of the saved scan is under the scanned PATHs",
                         root, hint="give --changed the same PATHs as the full scan, from the same "
                         "directory (fragment paths are relative to them)")
    touched = set(diff.changed) | set(diff.added)
    by_rel = {sf.rel: sf for sf in files}
    cache = ParseCache(cache_dir)
    try:
        new_frags = mine_files([by_rel[r] for r in sorted(touched)], stats, cache, mining, quiet=quiet)
        gone = touched | set(diff.removed)
        stale = state.rows_of(gone)
        with progress("retrieving neighbours", total=None, quiet=quiet):
            rows, by = retrieve(state, new_frags, config, stale)
        # the retrieved fragments and, with update, the new representatives, read back in one pass
        prom = promotions(state, gone) if update else np.zeros(0, dtype=np.int64)
        back = _read_back(state, np.union1d(rows, prom), by_rel, cache, mining)
        retrieved = set(rows.tolist())
        old_frags = [f for r, f in back.items() if r in retrieved]
        promoted = {r: back[r] for r in prom.tolist() if r in back}
    finally:
        cache.close()
    report = detect(list(new_frags) + old_frags, config, quiet=True, encoder=state.encoder, base=state.base)
    if config.subfunction:
        from twinspect.code.subfunction import add_subfunction_pairs

        report = add_subfunction_pairs(report, min_lines=config.min_lines)
    report = _restrict(report, touched)
    report.root = root
    scan_dict = stats.to_dict()
    report.stats = {**scan_dict, **report.stats}
    report.stats["changed"] = {
        "files_changed": len(diff.changed), "files_added": len(diff.added), "files_removed": len(diff.removed),
        "files_unchanged": diff.unchanged, "fragments_changed": len(new_frags),
        "fragments_retrieved": len(old_frags), "retrieved_by": by, "state_fragments": len(state),
        "state_saved": state.meta.get("saved"), "state_updates": int(state.meta.get("updates", 0)),
        "load_seconds": round(t_load, 3),
    }
    if update and gone:  # nothing changed: the state already is this tree's
        t1 = time.perf_counter()
        with progress("updating the scan state", total=None, quiet=quiet):
            done = update_state(cache_dir, state, fragments=new_frags, gone=gone, file_keys=keys, promoted=promoted)
        report.stats["changed"]["state_update"] = {**done, "seconds": round(time.perf_counter() - t1, 3)}
    report.stats["timings"] = {**report.stats.get("timings", {}), "total": round(time.perf_counter() - t0, 4)}
    return report


def _read_back(state: ScanState, rows: np.ndarray, by_rel: dict[str, Any], cache: Any,
               mining: dict[str, Any]) -> dict[int, Fragment]:
    """The fragments of state ``rows`` (unchanged files), re-mined from the parse checkpoint file by
    file: row -> fragment, in row order (rows whose file or fragment is gone are left out)."""
    from twinspect.code.files import ScanStats
    from twinspect.code.fragments import mine_files

    paths_of, names = state.meta["paths"], state.meta["names"]
    want: dict[str, dict[tuple[int, int, str], int]] = {}
    for r in rows.tolist():
        want.setdefault(paths_of[state.path_id[r]], {})[(int(state.start[r]), int(state.end[r]), names[r])] = r
    files = [by_rel[p] for p in sorted(want) if p in by_rel]
    found: dict[int, Fragment] = {}
    for f in mine_files(files, ScanStats(), cache, mining, quiet=True):
        r = want.get(f.path, {}).get((f.start_line, f.end_line, f.name))
        if r is not None:
            found[r] = f
    return dict(sorted(found.items()))


def _restrict(report: CloneReport, touched: set[str]) -> CloneReport:
    """The report's pairs, classes, identical groups and group pairs with a fragment in ``touched`` files."""
    hit = np.asarray([f.path in touched for f in report.fragments], dtype=bool)
    return report.restricted(
        [p for p in report.pairs if hit[p.a] or hit[p.b]],
        [g for g in report.identical_groups if any(hit[m] for m in g["members"])],
        [g for g in report.group_pairs if any(hit[m] for m in g["a"]) or any(hit[m] for m in g["b"])])


def mining_options(config: DetectConfig) -> dict[str, Any]:
    """The parse options of a scan with ``config`` (those :class:`~twinspect.code.checkpoint.ParseCache` keys on)."""
    return {"min_lines": config.min_lines, "errors": "lenient", "pretokenize": True, "granularity": config.granularity}
