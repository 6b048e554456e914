"""Candidate clone pairs: the two retrieval sources of the clone pipeline, before verification.

A clone detector that reports a pair only if it is among a fragment's top-k neighbours saturates:
on BigCloneBench a functionality holds hundreds of near-identical functions, so the k slots fill
with copies and the Type-3 partners are never looked at. Candidate generation here cannot
saturate in that way:

* exact and T2-identical duplicates are collapsed into one *representative* before retrieval (the
  caller passes representatives only; :mod:`twinspect.code.clones` expands them afterwards);
* :func:`range_pairs` keeps **every** neighbour at or above a similarity threshold (a range
  search), up to a per-fragment ``cap`` that is counted when hit (``capped`` in the result), not a
  fixed top-k;
* :func:`overlap_pairs` is a second, lexical source made for Type-3: SourcererCC's token-bag
  overlap index (Sajnani et al., "SourcererCC: Scaling Code Clone Detection to Big-Code", ICSE
  2016). A pair is a candidate when its token multisets share at least ``theta · max(|A|, |B|)``
  tokens, whatever its embedding cosine. The *prefix filter* makes this sub-quadratic: with tokens
  sorted rarest first by a global order, two bags that reach the overlap share a token among
  their first ``|A| − ⌈theta·|A|⌉ + 1`` tokens, so only pairs sharing a prefix token are
  compared. With prefixes ``k − 1`` items longer, such bags share at least ``k`` prefix tokens
  (the extended prefix filter of Xiao et al., "Efficient Similarity Joins for Near Duplicate
  Detection", WWW 2008, Lemma 1 generalised), which prunes most pairs that share one common
  token before the exact overlap is computed. Multisets are handled as SourcererCC does, by numbering repeated tokens (the k-th
  ``(`` is the item ``("(", k)``), which turns multiset overlap into set overlap. A last bound
  before the exact overlap, in the spirit of SourcererCC's (and PPJoin's) positional filter: of
  two prefixes, the one whose last item comes first in the global order shares nothing with the
  other bag's suffix, so ``|A ∩ B| ≤ shared + min(|its suffix|, |other bag| − shared)``, where
  ``shared`` counts the common prefix items; a pair whose bound misses the overlap is dropped.

Both functions are vectorised with numpy/scipy, except two inner loops compiled with numba
(:mod:`twinspect.code.kernels`): the prefix index is an inverted index (item → the rows whose
prefix holds it) that each row probes, counting the prefix items it shares with each later row;
the exact overlap of the pairs that pass is a merge of the two rows' sorted item ids.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twinspect._memory import trim
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError
from twinspect.progress import progress

if TYPE_CHECKING:
    import numpy as np

    from twinspect.code.executors import ShardExecutor

_REDUCE_CHUNK = 50_000  # representatives projected and added to the reduced index at once (a memory bound)
_SEARCH_CHUNK = 1024  # queries per index.search call (progress granularity, bounded memory)
_PREFIX_CHUNK = 256  # rows of the prefix index probed per task (progress granularity, bounded result arrays)
_BAG_CHUNK = 1 << 15  # representatives whose token bags are built at once, at most (bounds the int64 sort keys)
_BAG_TOKENS = 1 << 21  # and their tokens, at most (the keys and sort orders are int64 per token)
_RESCORE_CHUNK = 1 << 18  # neighbour pairs of the reduced index re-scored per progress step
_SPAN_CHUNK = 1 << 22  # neighbour entries checked for overlapping spans at once (bounded memory)
_GROUP_CHUNK = 1 << 22  # (query, neighbour) entries ranked per query at once (bounds the sort's temporaries)
#: k of the extended prefix filter: prefixes k − 1 items longer must share k items.
PREFIX_SHARED = 32

#: With ``index="auto"``, :func:`range_pairs` searches exactly below this many representatives and
#: builds an HNSW index from it on. From benchmarks/results/index_recall.md (lexical encoder, d =
#: 2048, 2 cores): exact search (build + query, quadratic) took 15.7 s on 20k representatives and
#: 60.2 s on 40k, HNSW with the settings below (one build thread) 31.8 s and 70.3 s (about linear),
#: so they cross near 50k; on 81k HNSW took 161 s, exact 377 s (measured on a loaded machine).
AUTO_HNSW_MIN = 50_000
#: HNSW settings of ``index="auto"``: on 81k representatives of the large corpus their range-search
#: recall against exact search was 0.977 (issue 23's target: ≥ 0.95); ef_construction 200 reached
#: 0.983 in an earlier, interrupted run (not in the results file) but took 266 s to build instead of
#: 102 s. ``ef_search`` is raised to the query's k (105 by default).
AUTO_HNSW_PARAMS: dict[str, Any] = {"M": 16, "ef_construction": 100, "ef_search": 100}
#: Threads that insert into the ``index="auto"`` HNSW graph. One makes the graph (and so the
#: candidates) reproducible for a given seed; two build it about twice as fast on this 2-core
#: machine but the insertion order, and so the last neighbours, may vary between runs. Queries
#: always run on two threads (each query is independent: same results).
AUTO_HNSW_BUILD_THREADS = 1
#: Dimension of the truncated SVD the ``index="auto"`` HNSW graph is built on (the lexical vectors have
#: 2,048 columns; distance computations, and so build and search time, scale with it). On the 81,099
#: representatives of benchmarks/index_recall.py's sample (threshold 0.4, k 105), with 2x oversampling:
#: 384 dimensions gave recall 0.955 in 131 s, 256 gave 0.927 in 112 s (HNSW over the full 2,048
#: dimensions: 0.977 in 161 s, with 5x the index memory); measured 2026-11-26, not in a results file. On
#: all 204,925 representatives of the 13.3-MLOC tree (1,000 seeded queries, 2026-11-27; chosen on that
#: tree, the pipeline's own 256-query measure on it is no independent check) 384 dimensions gave 0.910
#: with 2x oversampling and 0.949 with 3x, 512 dimensions 0.936 with 2x, **0.956 with 2.5x** and 0.966
#: with 3x. Every miss was a neighbour the reduced index ranked below the oversampled list (reduced
#: cosines 0.48-0.61, far above threshold − margin), not one the graph failed to reach (ef_search 400
#: instead of 105 added 0.008): the reduced space's ranking, not the graph, loses them.
AUTO_HNSW_DIM = 512
#: Neighbours the reduced index returns at a cosine ≥ threshold − this margin are re-scored with the
#: full vectors (the reduced cosine only approximates the full one).
RERANK_MARGIN = 0.1
#: The reduced index is asked for this many times the query's k neighbours (rounded up) before
#: re-scoring; each extra neighbour is one more candidate key held until the re-scoring (about 25 %
#: more keys with 2.5 than with 2 on the 13.3-MLOC tree, where nearly every query fills its list).
RERANK_OVERSAMPLE = 2.5
#: The reduced index is first asked for this many neighbours; only queries whose last one still
#: reaches threshold − :data:`RERANK_MARGIN` are searched again for ``RERANK_OVERSAMPLE · k``.
FIRST_ROUND_K = 32
#: Once a chunk of queries has more than this share searched again for ``RERANK_OVERSAMPLE · k``, the
#: later chunks (and the recall measurement) skip the first, short search and ask for that many at once.
#: The first search costs about 0.45 of the second (13.3-MLOC tree, 512 dimensions: 65 s for k 32 and
#: ef 100, 144 s for k 263, two threads), so it pays only while fewer than about 55 % of the queries
#: go on; on that tree nearly every query does (its median 32nd reduced cosine is 0.56, the floor 0.3).
SKIP_FIRST_ROUND_SHARE = 0.6
#: Queries whose HNSW results are checked against exact search at run time (seeded sample).
RECALL_QUERIES = 256


@dataclass
class Candidates:
    """Candidate pairs of one retrieval source, as parallel arrays sorted by ``(a, b)``.

    Attributes:
        a: int64 (P,) first fragment ids.
        b: int64 (P,) second fragment ids, ``a[i] < b[i]``; each pair occurs once.
        score: float64 (P,) the source's own similarity of each pair (cosine for
            :func:`range_pairs`, overlap similarity in [0, 1] for :func:`overlap_pairs`).
        capped: number of query fragments whose candidate list was cut at the cap.
        index: the k-NN index :func:`range_pairs` used (``"exact"`` or ``"hnsw"``; ``"auto"``
            resolved); ``"exact"`` for :func:`overlap_pairs`.
        index_recall: with HNSW, the share of the exact range-search neighbours (cosine ≥ the
            threshold, top k, the query itself excluded) of a seeded sample of queries that HNSW
            also returned, in [0, 1]; None with exact search or when the sample has no neighbours.
        index_recall_queries: number of sampled queries behind ``index_recall`` (0 without it).
    """

    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    capped: int = 0
    index: str = "exact"
    index_recall: float | None = None
    index_recall_queries: int = 0

    def __len__(self) -> int:
        return len(self.a)

    @property
    def pairs(self) -> dict[tuple[int, int], float]:
        """The pairs as ``{(a, b): score}`` (Python objects: for small inputs and callers that want a dict)."""
        return dict(zip(zip(self.a.tolist(), self.b.tolist()), self.score.tolist()))

    @classmethod
    def empty(cls, capped: int = 0) -> Candidates:
        """No pairs."""
        import numpy as np

        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), capped)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The candidates as named numpy arrays (``{prefix}_a``, ``_b``, ``_score``, ``_capped``,
        ``_index``, ``_recall`` — NaN for None —, ``_recall_queries``), for an ``.npz`` checkpoint
        read without pickles (:mod:`twinspect.code.stage_cache`); :meth:`from_arrays` inverts it."""
        import numpy as np

        return {f"{prefix}_a": self.a, f"{prefix}_b": self.b, f"{prefix}_score": self.score,
                f"{prefix}_capped": np.asarray(self.capped), f"{prefix}_index": np.asarray(self.index),
                f"{prefix}_recall": np.asarray(np.nan if self.index_recall is None else self.index_recall),
                f"{prefix}_recall_queries": np.asarray(self.index_recall_queries)}

    @classmethod
    def from_arrays(cls, arrays: Any, prefix: str) -> Candidates:
        """The candidates :meth:`to_arrays` wrote under ``prefix`` into ``arrays`` (a mapping of name to array).

        Raises:
            KeyError: an array is missing.
        """
        import numpy as np

        recall = float(arrays[f"{prefix}_recall"])
        return cls(arrays[f"{prefix}_a"], arrays[f"{prefix}_b"], arrays[f"{prefix}_score"],
                   int(arrays[f"{prefix}_capped"]), str(arrays[f"{prefix}_index"]),
                   None if np.isnan(recall) else recall, int(arrays[f"{prefix}_recall_queries"]))


def _ends_by_range(
    a: np.ndarray, b: np.ndarray, score: np.ndarray, n: int,
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The undirected pairs ``(a[i], b[i])`` with ``score[i]``, seen from both ends, a range of ids at a time.

    For each range ``[lo, hi)`` of ids whose entries (as either end) number at most :data:`_GROUP_CHUNK`
    (:func:`twinspect._arrays.chunk_bounds`; an id with more is a range of its own), the entries
    whose end lies in it, sorted by (end, descending score, partner): each end's group is whole and in
    the order both the neighbour cap and the overlap cap rank it. One sort of every pair from both ends
    at once held several arrays of twice the pairs (about 1 GB at 33 M pairs).

    Yields:
        ``(lo, hi, end, partner, score, pair)``: the range and, per entry, its end, the other end, the
        score and the index ``i`` of its pair.
    """
    import numpy as np

    from twinspect._arrays import chunk_bounds

    for lo, hi in chunk_bounds(np.bincount(a, minlength=n) + np.bincount(b, minlength=n), _GROUP_CHUNK):
        from_a = np.flatnonzero((a >= lo) & (a < hi))
        from_b = np.flatnonzero((b >= lo) & (b < hi))
        end = np.concatenate([a[from_a], b[from_b]])
        partner = np.concatenate([b[from_a], a[from_b]])
        sc = np.concatenate([score[from_a], score[from_b]])
        pair = np.concatenate([from_a, from_b])
        del from_a, from_b
        order = np.lexsort((partner, -sc, end))
        yield lo, hi, end[order], partner[order], sc[order], pair[order]


def _best_per_pair(a: np.ndarray, b: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected pairs ``(min, max)`` of ``a``/``b`` (int64 ids), each once with its highest score,
    sorted by (a, b).

    One int64 key per entry, sorted once, and the highest score of each run of equal keys: a
    three-key lexsort held both ends, the negated scores and their gathered copies at once (about
    1 GB at the 19 M kept entries of a 13-MLOC tree's range search)."""
    import numpy as np

    if not len(a):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    base = int(max(a.max(), b.max())) + 1
    key = np.minimum(a, b, dtype=np.int64)  # the key built in place: no int64 temporaries beside it
    key *= base
    key += np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    key = key[order]
    score = score[order]
    del order
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    best = np.maximum.reduceat(score, starts).astype(np.float64)
    key = key[starts]
    return key // base, key % base, best


class FragmentSpans:
    """Where fragments lie, as arrays: path id and first/last line of each fragment id.

    Args:
        frags: the fragments (anything with ``path``, ``start_line`` and ``end_line``).
    """

    def __init__(self, frags: Sequence[Fragment]):
        import numpy as np

        path_ids: dict[str, int] = {}
        self.path = np.fromiter((path_ids.setdefault(f.path, len(path_ids)) for f in frags), np.int64, len(frags))
        self.start = np.fromiter((f.start_line for f in frags), np.int64, len(frags))
        self.end = np.fromiter((f.end_line for f in frags), np.int64, len(frags))

    def take(self, order: np.ndarray) -> FragmentSpans:
        """The spans of fragments ``order`` (int ids), renumbered 0..len(order) − 1."""
        out = object.__new__(FragmentSpans)
        out.path, out.start, out.end = self.path[order], self.start[order], self.end[order]
        return out

    def overlapping(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """bool (P,): fragments ``a[i]`` and ``b[i]`` (int ids) are in one file with intersecting lines."""
        return (self.path[a] == self.path[b]) & (self.start[a] <= self.end[b]) & (self.start[b] <= self.end[a])


def _keep_neighbours(
    query: np.ndarray, neighbour: np.ndarray, sims: np.ndarray, starts: np.ndarray, spans: FragmentSpans,
    threshold: float, cap: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Each query's neighbours under the cap, vectorised.

    Args:
        query, neighbour: int (E,) ids of (query, neighbour) entries — fragment ids, or positions
            when ``spans`` is indexed by position — grouped by query, each group by descending
            cosine (a neighbour id < 0 is padding).
        sims: (E,) cosines.
        starts: int64 (Q + 1,) offsets of the query groups in the entries.
        spans: where the fragments lie, indexed like ``query`` (overlapping fragments never pair).
        threshold: minimum cosine.
        cap: most neighbours kept per query.

    Returns:
        ``(a, b, cosine, capped)``: the kept entries (not yet de-duplicated) and the number of
        queries with more than ``cap`` eligible neighbours — the neighbours that are not the query,
        reach the threshold and do not overlap it.
    """
    import numpy as np

    from twinspect._arrays import index_dtype

    ok = (neighbour >= 0) & (neighbour != query) & (sims >= threshold)
    for lo in range(0, len(ok), _SPAN_CHUNK):  # in chunks: the span look-ups are int64 per entry
        idx = lo + np.flatnonzero(ok[lo:lo + _SPAN_CHUNK])
        ok[idx[spans.overlapping(query[idx], neighbour[idx])]] = False
    count = index_dtype(len(ok))
    rank: np.ndarray = np.cumsum(ok, dtype=count)  # eligible entries up to and including each one
    # minus the eligible entries of earlier groups, minus one: the rank within the group (in place)
    rank -= np.repeat(np.concatenate([[0], rank])[starts[:-1]].astype(count) + 1, np.diff(starts))
    keep = ok & (rank < cap)
    capped = int(np.count_nonzero(ok & (rank == cap)))
    return query[keep], neighbour[keep], sims[keep], capped


def resolve_index(requested: str, n: int) -> str:
    """The index to use for ``n`` representatives: ``requested`` itself unless it is ``"auto"``.

    Args:
        requested: ``"exact"``, ``"hnsw"`` or ``"auto"``.
        n: number of vectors to index.

    Returns:
        ``"exact"`` or ``"hnsw"``; ``"auto"`` gives ``"hnsw"`` from :data:`AUTO_HNSW_MIN` vectors on.

    Raises:
        InputError: an unknown index name.
    """
    if requested == "auto":
        return "hnsw" if n >= AUTO_HNSW_MIN else "exact"
    if requested not in ("exact", "hnsw"):
        raise InputError(f"unknown index {requested!r}", hint="choose one of auto, exact, hnsw")
    return requested


def measure_recall(
    index: Any, vecs: Any, ids: np.ndarray, k: int, threshold: float, queries: int | None = None,
    seed: int = 0,
) -> tuple[float | None, int]:
    """Range-search recall of ``index`` against exact search on a seeded sample of its own vectors.

    Each sampled row searches ``index`` for k neighbours and, exactly, all of ``vecs`` (blocked
    matrix products, so the cost is ``queries × len(vecs)`` dot products); on both sides the
    neighbours kept are those at cosine ≥ ``threshold`` other than the query itself.

    Args:
        index: a :class:`twinspect.code.index.Index` holding ``vecs`` under ``ids`` (searched with
            the sampled rows' dense vectors), or a callable ``search(positions, k) -> (ids, sims)``
            taking int64 row positions (e.g. :func:`range_pairs`' re-scored search over a reduced
            index).
        vecs: the N indexed vectors by position: float32 (N, d) unit rows or a
            :class:`twinspect.code.vectors.FragmentVectors`.
        ids: int64 (N,) their ids in ``index``.
        k: neighbours per query (as in the real search).
        threshold: minimum cosine.
        queries: sample size (at most N); None: :data:`RECALL_QUERIES`, read at the call (so the module's
            setting governs :func:`range_pairs`' own measurement).
        seed: seed of the sample.

    Returns:
        ``(recall, queries)``: hits / exact neighbours over the sample (None when the exact side
        is empty) and the number of queries sampled.
    """
    import numpy as np

    from twinspect.code.index import topk_rows
    from twinspect.code.vectors import as_vectors

    fv = as_vectors(vecs)
    n = len(fv)
    queries = RECALL_QUERIES if queries is None else queries
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(queries, n), replace=False))
    if callable(getattr(index, "search", None)):
        got_ids, got_sims = index.search(fv.dense(rows), k)
    else:
        got_ids, got_sims = index(rows, k)
    hits = total = 0
    for lo in range(0, len(rows), 32):
        block = rows[lo:lo + 32]
        cols, sims = topk_rows(fv.cross_all(block), k)
        for j, row in enumerate(block):
            own = int(ids[row])
            exact = {int(ids[c]) for c, s in zip(cols[j], sims[j]) if s >= threshold and int(ids[c]) != own}
            approx = {int(v) for v, s in zip(got_ids[lo + j], got_sims[lo + j]) if v >= 0 and s >= threshold
                      and int(v) != own}
            hits += len(exact & approx)
            total += len(exact)
    return (hits / total if total else None), len(rows)


def range_pairs(
    vecs: Any,
    reps: Sequence[int],
    frags: Sequence[Fragment],
    *,
    threshold: float,
    cap: int,
    index: str = "exact",
    index_params: dict[str, Any] | None = None,
    quiet: bool = True,
    hold: contextlib.AbstractContextManager[Any] = contextlib.nullcontext(),
) -> Candidates:
    """Every neighbour of every representative at cosine ≥ ``threshold`` (up to ``cap`` per query).

    Args:
        vecs: the N fragments' L2-normalised vectors (rows = fragment ids): float32 (N, d) array or
            :class:`twinspect.code.vectors.FragmentVectors` (dense or sparse rows).
        reps: ids of the fragments to search among (each queries all others).
        frags: the N fragments (pairs of overlapping fragments — same file, intersecting lines —
            are never candidates).
        threshold: minimum cosine, in [-1, 1].
        cap: most neighbours kept per query (≥ 1). A query whose ``cap``-th non-overlapping
            neighbour still reaches the threshold counts as capped.
        index: ``"exact"`` (blocked matrix product), ``"hnsw"`` (see :mod:`twinspect.code.index`) or
            ``"auto"`` (exact below :data:`AUTO_HNSW_MIN` representatives, else HNSW with
            :data:`AUTO_HNSW_PARAMS` over an :data:`AUTO_HNSW_DIM`-dimensional truncated SVD of the
            vectors (:func:`twinspect.code.vectors.reduce_dim_chunks`), built with
            :data:`AUTO_HNSW_BUILD_THREADS` threads and searched with two; the neighbours it returns
            within :data:`RERANK_MARGIN` of the threshold are re-scored with the exact cosine of the
            full vectors). With HNSW the range search's recall against exact search over the full
            vectors is measured on :data:`RECALL_QUERIES` seeded queries (:func:`measure_recall`).
        index_params: keyword arguments of the index (HNSW ``M``, ``ef_construction``,
            ``ef_search``, ``seed``, ``num_threads``); with ``"auto"`` only ``seed`` is used.
        quiet: no progress bar.
        hold: a context held for the whole search, from building the index to returning. The index,
            the found neighbour keys and the joining, re-scoring and ranking after them are this search's
            memory; a lock shared with :func:`overlap_pairs` running beside it (its ``tail``) keeps that
            index's largest temporaries from coinciding with this search (a 13-MLOC tree peaked at 4,219
            MiB when the overlap's tail ran beside the search loop, 3,778 MiB held back so). Default:
            nothing held (a ``contextlib.nullcontext``, reusable). The result does not depend on it.

    Returns:
        :class:`Candidates` with cosine scores (always the full vectors' cosine).

    Raises:
        InputError: ``cap < 1``.
    """
    with hold:
        return _range_search(vecs, reps, frags, threshold=threshold, cap=cap, index=index,
                             index_params=index_params, quiet=quiet)


def _range_search(vecs: Any, reps: Sequence[int], frags: Sequence[Fragment], *, threshold: float, cap: int,
                  index: str, index_params: dict[str, Any] | None, quiet: bool) -> Candidates:
    """:func:`range_pairs` without its held context."""
    import numpy as np

    from twinspect._arrays import concatenate_consumed, index_dtype, shrink, unique_sorted
    from twinspect.code.index import ExactIndex, make_index
    from twinspect.code.vectors import as_vectors, reduce_dim_chunks

    if cap < 1:
        raise InputError(f"the neighbour cap must be at least 1, got {cap}")
    if len(reps) < 2:
        return Candidates.empty()
    fv = as_vectors(vecs)
    rep_ids = np.asarray(reps, dtype=np.int64)
    rep_fv = fv.subset(rep_ids)
    used = resolve_index(index, len(reps))
    params = dict(index_params or {}) if used == "hnsw" else {}
    seed = int((index_params or {}).get("seed", 0))
    search_threads = None
    reduced = False
    if used == "hnsw" and index == "auto":
        params = {**AUTO_HNSW_PARAMS, "seed": seed, "num_threads": AUTO_HNSW_BUILD_THREADS}
        search_threads = min(2, os.cpu_count() or 1)  # queries are independent: same results on any count
        reduced = AUTO_HNSW_DIM < fv.dim
    if used == "hnsw" and not reduced:  # the reduced index raises ef with its own k (low_search)
        params["ef_search"] = max(int(params.get("ef_search", 100)), cap + 5)
    idx: Any  # the index; None once the reduced search has measured its recall (below)
    with progress("building the neighbour index", total=None, quiet=quiet or used != "hnsw"):
        # the reduced index holds positions (0..n-1) of the representatives, the others their ids
        index_ids = np.arange(len(reps), dtype=np.int64) if reduced else rep_ids
        if reduced:
            # filled a chunk of reduced rows at a time, its slots allocated once: the whole reduced
            # matrix beside the index's own copy was about 300 MB at 200k representatives (one
            # insertion thread: the same graph as one add of every row, in the same order)
            done, built = 0, None
            for part in reduce_dim_chunks(fv, rep_ids, AUTO_HNSW_DIM, seed=seed, chunk=_REDUCE_CHUNK):
                if built is None:  # the width of the rows (the full one when there are too few to reduce)
                    built = make_index(used, part.shape[1], **params, initial_capacity=len(reps))
                built.add(index_ids[done:done + len(part)], part)
                done += len(part)
            del part
            assert built is not None  # len(reps) >= 2: one chunk at least
            idx = built
        else:
            base = rep_fv.dense(np.arange(len(reps)))
            idx = make_index(used, base.shape[1], **params)
            idx.add(index_ids, base)
            del base
    # the index holds its own copy of the vectors (hnswlib's "ip" space stores them as given): the
    # queries below read them back from it a chunk at a time, the same float32 values, instead of
    # keeping a second copy alive through the search (about 300 MB at 200k representatives)

    def query_vectors(rows: np.ndarray) -> np.ndarray:
        """The indexed vectors of the representatives at positions ``rows`` (the search's queries)."""
        return idx.get_vectors(index_ids[rows])
    if search_threads is not None:
        idx.num_threads = search_threads  # type: ignore[attr-defined]
    # A few extra neighbours stand in for the query itself and overlapping (nested) fragments.
    k = min(len(reps), cap + 5)

    direct = False  # set once a chunk shows the first, short search to be wasted (SKIP_FIRST_ROUND_SHARE)

    def low_search(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Reduced-space neighbours (positions, reduced cosines) of the representatives at ``rows``.

        A range search down to threshold − margin: most queries have few neighbours there and stop
        after FIRST_ROUND_K; the others are searched again for RERANK_OVERSAMPLE · k. Where most go
        on (a chunk with more than SKIP_FIRST_ROUND_SHARE of them), the later ones are asked for
        RERANK_OVERSAMPLE · k at once."""
        nonlocal direct
        k_full = min(len(reps), math.ceil(RERANK_OVERSAMPLE * k))
        k1 = k_full if direct else min(k_full, FIRST_ROUND_K)
        q = query_vectors(rows)
        ids, sims = idx.search(q, k1)
        more = np.flatnonzero(sims[:, -1] >= threshold - RERANK_MARGIN) if k1 < k_full else np.zeros(0, np.int64)
        if len(more) > SKIP_FIRST_ROUND_SHARE * len(rows):
            direct = True
        if len(more):
            ids = np.concatenate([ids, np.full((len(rows), k_full - k1), -1, dtype=np.int64)], axis=1)
            sims = np.concatenate([sims, np.full((len(rows), k_full - k1), -2.0, dtype=np.float32)], axis=1)
            ids[more], sims[more] = idx.search(q[more], k_full)
        return ids, sims

    def search(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Neighbours of the representatives at positions ``rows`` by descending full cosine (index ids)."""
        if not reduced:
            return idx.search(query_vectors(rows), k)
        ids, sims = low_search(rows, k)
        qi, qj = np.nonzero((ids >= 0) & (sims >= threshold - RERANK_MARGIN))
        exact = np.full(ids.shape, -2.0, dtype=np.float32)
        if len(qi):
            exact[qi, qj] = rep_fv.pair_cosines(rows[qi], ids[qi, qj])
        order = np.argsort(-exact, axis=1, kind="stable")
        return np.take_along_axis(ids, order, axis=1), np.take_along_axis(exact, order, axis=1)

    spans = FragmentSpans(frags)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    capped = 0
    if not reduced:
        with progress("neighbour search", total=len(reps), quiet=quiet) as bar:
            if isinstance(idx, ExactIndex):  # an all-pairs self-join over the upper triangle only
                starts, flat_ids, flat_sims = idx.self_range_search(threshold, k, advance=bar.advance)
                query = np.repeat(rep_ids, np.diff(starts))
                a, b, c, capped = _keep_neighbours(query, flat_ids, flat_sims, starts, spans, threshold, cap)
                found.append((a, b, c))
            else:
                for lo in range(0, len(reps), _SEARCH_CHUNK):
                    hi = min(len(reps), lo + _SEARCH_CHUNK)
                    ids, sims = search(np.arange(lo, hi), k)
                    query = np.repeat(rep_ids[lo:hi], ids.shape[1])
                    a, b, c, cut = _keep_neighbours(query, ids.ravel(), sims.ravel(),
                                                    np.arange(0, ids.size + 1, max(1, ids.shape[1])), spans,
                                                    threshold, cap)
                    found.append((a, b, c))
                    capped += cut
                    bar.advance(hi - lo)
        a, b, c = _best_per_pair(*(np.concatenate(x) for x in zip(*found)))  # len(reps) ≥ 2: one chunk at least
        if used != "hnsw":
            return Candidates(a, b, c, capped)
        recall, queries = measure_recall(search, rep_fv, rep_ids, k, threshold, seed=seed)
        return Candidates(a, b, c, capped, index=used, index_recall=recall, index_recall_queries=queries)

    # Reduced index: collect every (query, neighbour) the reduced space puts within the margin, re-score
    # each distinct pair once with the full cosine (a pair usually turns up from both ends), then let
    # each query keep its best neighbours as above.
    # Positions of representatives are held as int32 (index_dtype): tens of millions of neighbour
    # entries on a 10-MLOC tree, and these arrays are most of the scan's peak memory.
    n = len(reps)
    found_keys = []
    with progress("neighbour search", total=len(reps), quiet=quiet) as bar:
        for lo in range(0, len(reps), _SEARCH_CHUNK):
            hi = min(len(reps), lo + _SEARCH_CHUNK)
            rows = np.arange(lo, hi)
            ids, sims = low_search(rows, k)
            qi, qj = np.nonzero((ids >= 0) & (sims >= threshold - RERANK_MARGIN))
            a, b = rows[qi], ids[qi, qj]
            keep = a != b
            # each chunk's pairs as sorted distinct keys min·n + max (a pair often turns up from both ends)
            found_keys.append(unique_sorted(np.minimum(a[keep], b[keep]) * n + np.maximum(a[keep], b[keep])))
            bar.advance(hi - lo)
    # the recall measurement first, then the index is let go of: the graph and its copy of the reduced
    # vectors (about 0.5 GB at 200k representatives and 512 dimensions) are not held through the
    # joining, re-scoring and ranking below, this search's largest temporaries
    recall, queries = measure_recall(search, rep_fv, np.arange(n, dtype=np.int64), k, threshold, seed=seed)
    idx = built = None  # the closures read the index through the same cell: nothing holds it now
    trim()
    # one array of every chunk's keys, each chunk dropped once copied in and the array then sorted in
    # place: about one copy of the keys, where concatenating and sorting a copy held four (~1.2 GB
    # at 33 M keys)
    keys = concatenate_consumed(found_keys, np.int64)
    pair_key = unique_sorted(keys, overwrite=True)
    del keys
    pa, pb = (pair_key // n).astype(index_dtype(n)), (pair_key % n).astype(index_dtype(n))
    del pair_key
    # the pairs that reach the threshold are moved to the front of the same arrays as each chunk is
    # re-scored (the write position never passes the chunk being read), then the arrays are cut to
    # them: no second set of pair arrays beside the first (~0.25 GB at 33 M pairs)
    cos = np.empty(len(pa), dtype=np.float32)
    kept_n = 0
    with progress("re-scoring neighbours", total=len(pa), quiet=quiet) as bar:
        for lo in range(0, len(pa), _RESCORE_CHUNK):
            hi = min(len(pa), lo + _RESCORE_CHUNK)
            c = rep_fv.pair_cosines(pa[lo:hi], pb[lo:hi])
            ok = c >= threshold
            m = int(ok.sum())
            pa[kept_n:kept_n + m] = pa[lo:hi][ok]
            pb[kept_n:kept_n + m] = pb[lo:hi][ok]
            cos[kept_n:kept_n + m] = c[ok]
            kept_n += m
            bar.advance(hi - lo)
    pa, pb, cos = shrink(pa, kept_n), shrink(pb, kept_n), shrink(cos, kept_n)  # no views of them remain
    # Each query's neighbours are its pairs from both ends, by descending cosine, ties by position,
    # cut at the cap a range of queries at a time (_ends_by_range: a query's group is whole in its range).
    spans_pos = spans.take(rep_ids)
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    capped = 0
    for lo, hi, q, v, c, _ in _ends_by_range(pa, pb, cos, n):
        # positions throughout (spans taken by position), fragment ids for the kept entries only
        ka, kb, kc, cut = _keep_neighbours(q, v, c, np.searchsorted(q, np.arange(lo, hi + 1)), spans_pos,
                                           threshold, cap)
        kept.append((ka, kb, kc))
        capped += cut
    del pa, pb, cos
    # one range at least (n ≥ 2); each range's arrays dropped as they are copied (concatenate_consumed)
    ka_parts, kb_parts, kc_parts = (list(x) for x in zip(*kept))
    del kept
    a = rep_ids[concatenate_consumed(ka_parts)]
    b = rep_ids[concatenate_consumed(kb_parts)]
    a, b, c = _best_per_pair(a, b, concatenate_consumed(kc_parts))
    trim()  # the ranges' temporaries, freed into the C heap, back to the system
    return Candidates(a, b, c, capped, index=used, index_recall=recall, index_recall_queries=queries)


def token_items(tokens: Sequence[str], vocab: dict[str, int]) -> list[int]:
    """SourcererCC's multiset items of a token list: the k-th occurrence of token t is one item.

    Args:
        tokens: the fragment's tokens.
        vocab: item-name → id map, extended in place (item names are ``"t\\x00k"``).

    Returns:
        Item ids, one per token (distinct within the list).
    """
    seen: dict[str, int] = {}
    out = []
    for t in tokens:
        k = seen.get(t, 0)
        seen[t] = k + 1
        name = f"{t}\x00{k}"
        item = vocab.get(name)
        if item is None:
            item = vocab[name] = len(vocab)
        out.append(item)
    return out


def _overlap_chunk(shared: tuple, chunk: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``lo:hi`` (in size order) of :func:`overlap_pairs`: prefix-filter candidates with a later row,
    verified exactly. Returns int64 (P,) row pairs and float64 (P,) overlap similarities ≥ theta."""
    import numpy as np

    from twinspect.code.kernels import prefix_join, shared_column_counts

    theta, prefix, inverted, bags, s_sizes, s_need, s_rest, s_last, spans = shared
    lo, hi = chunk
    # the extended prefix filter, the size filter and the suffix bound (see the module doc), in the
    # compiled probe loop: the sparse product it replaced listed every (row, partner) count, of which
    # 1 % reached `need` on a 50k-representative sample of the 13-MLOC tree
    a, b = prefix_join(lo, hi, prefix.indptr, prefix.indices, inverted.indptr, inverted.indices,
                       s_sizes, s_need, s_rest, s_last, theta)
    keep = ~spans.overlapping(a, b)  # no overlapping pair
    a, b = a[keep], b[keep]
    inter = shared_column_counts(bags.indptr, bags.indices, a, b)  # |A ∩ B| of the item sets
    sim = inter / np.maximum(s_sizes[a], s_sizes[b])
    ok = sim >= theta - 1e-9
    return a[ok], b[ok], sim[ok]


def overlap_pairs(
    token_lists: Sequence[Sequence[str]],
    reps: Sequence[int],
    frags: Sequence[Fragment],
    *,
    theta: float,
    cap: int,
    quiet: bool = True,
    executor: ShardExecutor | None = None,
    tail: contextlib.AbstractContextManager[Any] = contextlib.nullcontext(),
) -> Candidates:
    """SourcererCC candidates: representative pairs whose token multisets overlap ≥ ``theta``.

    The overlap similarity of bags A and B is ``|A ∩ B| / max(|A|, |B|)`` (multiset intersection),
    SourcererCC's measure. Candidates come from the prefix filter (see the module doc) and are
    then verified exactly, so the result holds exactly the pairs that reach ``theta``, except that
    each representative keeps at most ``cap`` partners (its most overlapping ones; counted in
    ``capped``).

    Args:
        token_lists: tokens of every fragment (indexed by fragment id; SourcererCC uses the
            fragment's lexical tokens, identifiers included).
        reps: ids of the fragments to compare.
        frags: the fragments (overlapping fragments never pair).
        theta: minimum overlap similarity, in (0, 1].
        cap: most partners kept per representative (≥ 1).
        quiet: no progress bar.
        executor: where the row chunks of the prefix index are matched and verified
            (:mod:`twinspect.code.executors`); None = this process. Same result either way.
        tail: a context held while the found pairs are joined, capped and de-duplicated (see
            :func:`range_pairs`); default: nothing held. Same result either way.

    Returns:
        :class:`Candidates` with overlap-similarity scores.

    Raises:
        InputError: ``theta`` outside (0, 1] or ``cap < 1``.
    """

    import numpy as np
    import scipy.sparse as sp

    from twinspect._arrays import chunk_bounds, concatenate_consumed, index_dtype

    if not 0.0 < theta <= 1.0:
        raise InputError(f"the token-overlap threshold must be in (0, 1], got {theta}")
    if cap < 1:
        raise InputError(f"the candidate cap must be at least 1, got {cap}")
    n = len(reps)
    if n < 2:
        return Candidates.empty()
    # SourcererCC's multiset items, vectorised: the k-th occurrence of token t in a bag is item (t, k),
    # numbered token by token (item = offset[t] + k, where token t occurs at most width[t] times in a
    # bag). Rows are taken _BAG_CHUNK at a time, each in (row, token, position) order: only the
    # chunk's sort keys are int64, the per-token arrays kept across chunks int32 (a 13-MLOC tree has
    # 35 M tokens in its representatives; whole-array int64 passes held ~1.8 GB at once there).
    vocab = {t: i for i, t in enumerate(sorted(set(itertools.chain.from_iterable(token_lists[r] for r in reps))))}
    nvocab = len(vocab)
    sizes = np.fromiter((len(token_lists[r]) for r in reps), dtype=np.int64, count=n)
    # SourcererCC's size order: with rows sorted by size, the partners b > a that can pass the size
    # filter (|a| ≥ theta·|b|) form a contiguous column range, so each chunk is multiplied by a slice.
    # Rows are built in that order from the start (row i is representative reps[srt[i]]): sorting
    # the finished matrices copied them (~0.35 GB more on a 13-MLOC tree, beside the range search).
    srt = np.argsort(sizes, kind="stable")
    sizes = sizes[srt]
    rep_rows = [reps[i] for i in srt.tolist()]
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    n_tokens = int(indptr[-1])
    tok_dtype = index_dtype(nvocab)
    tok_sorted = np.empty(n_tokens, dtype=tok_dtype)  # each row's token ids ascending (ties: positions)
    occ = np.empty(n_tokens, dtype=index_dtype(int(sizes.max(initial=0))))  # k of each token in its row
    width = np.zeros(nvocab, dtype=np.int64)
    # row chunks by tokens (rows ascend in size: a chunk of 32,768 of the largest rows held several
    # times the tokens of the first ones, and its int64 sort keys several hundred MB)
    row_chunks = chunk_bounds(sizes, _BAG_TOKENS, _BAG_CHUNK)
    for c0, c1 in row_chunks:
        t0, t1 = int(indptr[c0]), int(indptr[c1])
        toks = np.fromiter(map(vocab.__getitem__, itertools.chain.from_iterable(token_lists[r] for r in rep_rows[c0:c1])),
                           dtype=np.int64, count=t1 - t0)
        run_key = np.repeat(np.arange(c1 - c0, dtype=np.int64), sizes[c0:c1]) * (nvocab + 1) + toks
        order = np.argsort(run_key, kind="stable")  # by row, token, position
        run_key = run_key[order]
        starts = np.r_[0, np.flatnonzero(run_key[1:] != run_key[:-1]) + 1] if t1 > t0 else np.zeros(0, np.int64)
        del run_key
        run_len = np.diff(np.r_[starts, t1 - t0])
        toks = toks[order]
        del order
        occ[t0:t1] = np.arange(t1 - t0) - np.repeat(starts, run_len)
        np.maximum.at(width, toks[starts], run_len)
        tok_sorted[t0:t1] = toks
        del toks, starts, run_len
    del vocab
    offset = np.r_[0, np.cumsum(width)[:-1]]
    nitems = int(width.sum())
    item_dtype = index_dtype(nitems)
    items = np.empty(n_tokens, dtype=item_dtype)  # ascending within each row
    for t0 in range(0, n_tokens, _BAG_CHUNK * 64):
        t1 = min(n_tokens, t0 + _BAG_CHUNK * 64)
        items[t0:t1] = offset[tok_sorted[t0:t1]] + occ[t0:t1]
    del tok_sorted, occ, offset, width
    # boolean entries: only the structure is read (the exact overlap counts shared item ids, and the items
    # ascend within each row as that merge needs); 1 byte an entry instead of float32's 4: about 200 MB
    # less at 67 M tokens, here and in every worker
    bags = sp.csr_matrix((np.ones(n_tokens, dtype=bool), items.astype(np.int32, copy=False), indptr),
                         shape=(n, nitems))
    # SourcererCC's global order: rarest item first (ties by item id)
    df = np.bincount(items, minlength=nitems)
    rank = np.empty(nitems, dtype=np.int64)
    rank[np.lexsort((np.arange(nitems), df))] = np.arange(nitems)
    del df
    # prefixes: each row's items sorted rarest first, the first plen(row) kept, a chunk of rows at a time
    alpha = np.maximum(1, np.ceil(theta * sizes - 1e-9).astype(np.int64))
    need = np.minimum(PREFIX_SHARED, alpha)  # shared prefix items a candidate must have (extended filter)
    plen = np.where(sizes > 0, sizes - alpha + need, 0)
    last = np.full(n, -1, dtype=np.int64)  # rank of each prefix's last (most common) item
    p_rows, p_items = [], []
    for c0, c1 in row_chunks:
        t0, t1 = int(indptr[c0]), int(indptr[c1])
        row = np.repeat(np.arange(c0, c1, dtype=np.int64), sizes[c0:c1])
        it = items[t0:t1]
        order = np.argsort(row * nitems + rank[it], kind="stable")  # by row, then rank
        pos = np.arange(t1 - t0) - np.repeat(indptr[c0:c1] - t0, sizes[c0:c1])
        take = order[pos < np.repeat(plen[c0:c1], sizes[c0:c1])]
        del order, pos
        p_rows.append(row[take].astype(np.int32))
        p_items.append(it[take])
        np.maximum.at(last, row[take], rank[it[take]])
        del row, take
    del items, rank
    prow, pitem = concatenate_consumed(p_rows), concatenate_consumed(p_items)
    if not len(prow):
        return Candidates.empty()
    prefix = sp.csr_matrix((np.ones(len(prow), dtype=bool), (prow, pitem)), shape=(n, nitems))
    del prow, pitem
    s_sizes, s_need, s_rest, s_last = sizes, need, sizes - plen, last  # rows in size order (above)
    inverted = prefix.tocsc()  # the inverted index: item -> the rows whose prefix holds it, ascending
    rep_arr = np.asarray(reps, dtype=np.int64)
    found_a, found_b, found_s = [], [], []
    shared = (theta, prefix, inverted, bags, s_sizes, s_need, s_rest, s_last,
              FragmentSpans([frags[r] for r in rep_rows]))
    del rep_rows
    chunks = [(lo, min(n, lo + _PREFIX_CHUNK)) for lo in range(0, n, _PREFIX_CHUNK)]
    results = (executor.map(_overlap_chunk, chunks, shared=shared) if executor is not None
               else map(functools.partial(_overlap_chunk, shared), chunks))
    # the map holds the matrices from here on: a worker pool's map lets go of them once it has handed
    # them to its workers (about 0.5 GB on a 13-MLOC tree, through the rest of this stage)
    del shared, prefix, inverted, bags
    with progress("token-overlap index", total=n, quiet=quiet) as bar:
        for (lo, hi), (pa, pb, sim) in zip(chunks, results):
            # positions as int32 (index_dtype) as they arrive: the found pairs are this index's peak memory
            found_a.append(srt[pa].astype(index_dtype(n), copy=False))
            found_b.append(srt[pb].astype(index_dtype(n), copy=False))
            found_s.append(sim)
            bar.advance(hi - lo)
    if not found_a:
        return Candidates.empty()
    with tail:  # see range_pairs
        # each list emptied as it is copied (concatenate_consumed): one copy of the found pairs at a time
        fa, fb = concatenate_consumed(found_a), concatenate_consumed(found_b)
        fs = concatenate_consumed(found_s)
        # the cap: a pair stays when it is among the `cap` most overlapping partners of either side (ties by
        # partner id), ranked a range of representatives at a time (_ends_by_range, as in range_pairs)
        kept = np.zeros(len(fa), dtype=bool)
        for _, _, ends, _, _, pair in _ends_by_range(fa, fb, fs, n):
            rank = np.arange(len(ends)) - np.searchsorted(ends, ends, side="left")  # within each end's group
            kept[pair[rank < cap]] = True
        counts = np.bincount(fa, minlength=n) + np.bincount(fb, minlength=n)
        capped = int((counts > cap).sum())
        a, b, score = _best_per_pair(rep_arr[fa[kept]], rep_arr[fb[kept]], fs[kept])
        del fa, fb, fs, kept
        trim()  # the index's and the cap's temporaries, freed into the C heap, back to the system
    return Candidates(a, b, score, capped)
