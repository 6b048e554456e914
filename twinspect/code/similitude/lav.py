"""LAV baseline: graph similarity by neighbour matching (Nikolić 2012), in bounded memory.

Follows M. Nikolić, "Measuring similarity of graph nodes by neighbor matching", Intelligent Data
Analysis 16(6), 2012, label-aware as in the LAV tool the program-similitude seed used:

- ``x⁰_ij = L_ij`` where ``L`` is the node label similarity (:func:`label_similarity`).
- ``x^{k+1}_ij = L_ij · (s_in + s_out) / 2`` with
  ``s_out = (1 / max(od(i), od(j))) · max_f Σ_{(l, q) ∈ f} x^k_lq`` over matchings ``f`` of i's
  out-neighbours with j's out-neighbours; ``s_in`` likewise over in-neighbours. When both nodes have
  no out- (in-) neighbours the term is 1; when only one has, it is 0.
- Iterate until ``max |x^{k+1} − x^k| < eps`` over the pair's node pairs (or ``max_iter``
  iterations); the number of iterations is reported per program pair.
- Graph similarity: the optimal node assignment ``f`` on ``x`` and
  ``s(A, B) = Σ_{(i, j) ∈ f} x_ij / max(|A|, |B|)`` (normalised by the larger graph, so a graph is
  not fully similar to its subgraphs). ``s(A, A) = 1`` and ``s(A, B) = s(B, A)``.

How the matching is computed (exact, never an (n, m, D, D) tensor): node pairs ``(i, j)`` are
grouped by their degree pair ``(d_i, d_j)``; for a group the neighbour submatrices
``x[N(i), N(j)]`` (shape ``k₁ × k₂`` with ``k₁ = min``, ``k₂ = max`` of the two degrees) are gathered
once per iteration, so memory is ``Σ_{i,j} d_i·d_j = |E_A|·|E_B|`` index entries per term, not
``n·m·D²``. The optimal matching of a ``k₁ × k₂`` block with entries ≥ 0 is found

- for ``k₁ = 1`` as the row maximum; for ``k₁ = 2`` from each row's best and second-best column
  (``max(a₀ + b₁)`` over distinct columns is ``m₀ + m₁`` when the argmaxes differ, else
  ``max(m₀ + s₁, s₀ + m₁)``);
- for ``k₁ ≥ 3`` with at most :data:`MAX_ENUMERATED` injective row→column maps, by enumerating them;
- otherwise by :func:`scipy.optimize.linear_sum_assignment` on that node pair's block alone.

All are the same optimum as the dense formulation (matching into zero padding adds nothing because
``x ≥ 0``), so values equal the original implementation's to rounding. Program pairs are scored in
batches (one numpy pass per iteration covers many pairs; a pair whose change fell below ``eps`` is
frozen at that iterate, exactly as if it had been run alone) and in parallel over a process pool
(:func:`lav`).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from twinspect.code.similitude.cfg import ProgramGraph
from twinspect.errors import InputError
from twinspect.progress import progress

#: Largest number of injective row→column maps enumerated for one degree class (k₁ ≥ 3).
MAX_ENUMERATED = 720
#: Default convergence threshold and iteration cap.
EPS = 1e-4
MAX_ITER = 1000
#: Node pairs per numpy batch (bounds a worker's memory: about 100 bytes per node pair and term).
BATCH_NODE_PAIRS = 400_000

_INJECTIONS: dict[tuple[int, int], np.ndarray] = {}


def label_similarity(kinds_a: Sequence[tuple[str, ...]], labels_a: Sequence[str],
                     kinds_b: Sequence[tuple[str, ...]], labels_b: Sequence[str]) -> np.ndarray:
    """Node label similarity ``L`` (float64, shape (|A|, |B|)).

    ``L_ij`` is the weighted Jaccard index of the two nodes' statement-kind multisets
    (``Σ min(count) / Σ max(count)``), 1 when both are empty; ``entry`` matches only ``entry`` and
    ``exit`` only ``exit`` (1), and 0 against any other node.
    """
    vocab: dict[str, int] = {}
    a = _Prepared.of(ProgramGraph("a", "", [], list(labels_a), list(kinds_a), []), vocab)
    b = _Prepared.of(ProgramGraph("b", "", [], list(labels_b), list(kinds_b), []), vocab)
    return _label_sim(a, b)


@dataclass
class _Prepared:
    """A graph in the form the iteration needs (picklable, built once per program)."""

    n: int
    counts: np.ndarray  # (n, V) kind counts
    totals: np.ndarray  # (n,)
    special: np.ndarray  # (n,) 0 ordinary, 1 entry, 2 exit
    ins: list[tuple[np.ndarray, np.ndarray]]  # per in-degree d: (nodes (c,), neighbours (c, d))
    outs: list[tuple[np.ndarray, np.ndarray]]

    @staticmethod
    def of(g: ProgramGraph, vocab: dict[str, int]) -> _Prepared:
        n = g.n_nodes
        for ks in g.kinds:
            for k in ks:
                vocab.setdefault(k, len(vocab))
        counts = np.zeros((n, max(len(vocab), 1)))
        for i, ks in enumerate(g.kinds):
            for k in ks:
                counts[i, vocab[k]] += 1
        special = np.array([{"entry": 1, "exit": 2}.get(lab, 0) for lab in g.labels], dtype=np.int8)
        return _Prepared(n, counts, counts.sum(1), special, _by_degree(n, g.edges, out=False),
                         _by_degree(n, g.edges, out=True))


def _by_degree(n: int, edges: Sequence[tuple[int, int]], out: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    lists: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if out:
            lists[a].append(b)
        else:
            lists[b].append(a)
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(lists):
        groups.setdefault(len(x), []).append(i)
    res = []
    for d in sorted(groups):
        nodes = np.array(groups[d], dtype=np.int64)
        nb = np.array([lists[i] for i in groups[d]], dtype=np.int64).reshape(len(nodes), d)
        res.append((nodes, nb))
    return res


def _label_sim(a: _Prepared, b: _Prepared) -> np.ndarray:
    va, vb = a.counts, b.counts
    v = max(va.shape[1], vb.shape[1])
    if va.shape[1] < v:
        va = np.pad(va, ((0, 0), (0, v - va.shape[1])))
    if vb.shape[1] < v:
        vb = np.pad(vb, ((0, 0), (0, v - vb.shape[1])))
    mn = np.zeros((a.n, b.n))
    for k in np.nonzero(va.any(0) & vb.any(0))[0]:
        mn += np.minimum(va[:, k, None], vb[None, :, k])
    mx = a.totals[:, None] + b.totals[None, :] - mn
    sim = np.where(mx > 0, mn / np.maximum(mx, 1e-12), 1.0)
    special = (a.special[:, None] > 0) | (b.special[None, :] > 0)
    same = (a.special[:, None] == b.special[None, :]).astype(float)
    return np.where(special, same, sim)


def _injections(k1: int, k2: int) -> np.ndarray:
    key = (k1, k2)
    if key not in _INJECTIONS:
        _INJECTIONS[key] = np.array(list(itertools.permutations(range(k2), k1)), dtype=np.int64)
    return _INJECTIONS[key]


class _Term:
    """One matching term (in or out) for a batch of node pairs, grouped by degree class."""

    def __init__(self, size: int):
        self.size = size
        self.const_pos: list[np.ndarray] = []
        self.const_val: list[float] = []
        self.parts: dict[tuple[int, int], tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def add(self, pa: list[tuple[np.ndarray, np.ndarray]], pb: list[tuple[np.ndarray, np.ndarray]],
            m: int, off: int) -> None:
        for na, nba in pa:
            da = nba.shape[1]
            for nb, nbb in pb:
                db = nbb.shape[1]
                pos = off + na[:, None] * m + nb[None, :]
                if da == 0 or db == 0:
                    self.const_pos.append(pos.ravel())
                    self.const_val.append(1.0 if da == db else 0.0)
                    continue
                idx = off + nba[:, None, :, None] * m + nbb[None, :, None, :]  # (|na|, |nb|, da, db)
                idx = idx.reshape(-1, da, db)
                if da > db:
                    idx = idx.transpose(0, 2, 1)
                key = (min(da, db), max(da, db))
                lst = self.parts.setdefault(key, ([], []))
                lst[0].append(pos.ravel())
                lst[1].append(idx)

    def finish(self) -> None:
        self.base = np.zeros(self.size)
        for p, v in zip(self.const_pos, self.const_val):
            self.base[p] = v
        # index blocks stored (k1, k2, c) so each gathered neighbour entry is one contiguous vector
        self.classes = [(k1, k2, np.concatenate(ps),
                         np.ascontiguousarray(np.concatenate(ix).transpose(1, 2, 0)))
                        for (k1, k2), (ps, ix) in sorted(self.parts.items())]
        del self.const_pos, self.const_val, self.parts

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = self.base.copy()
        for k1, k2, pos, idx in self.classes:
            out[pos] = _best_matching(x, idx, k1, k2) / k2
        return out


def _best_matching(x: np.ndarray, idx: np.ndarray, k1: int, k2: int) -> np.ndarray:
    """Largest matching sum of each block ``x[idx[:, :, c]]`` (k1 × k2, k1 ≤ k2; float64 (c,))."""
    if k1 == 1:
        if k2 > 16:
            return x[idx[0]].max(0)
        out = x[idx[0, 0]]
        for col in range(1, k2):
            np.maximum(out, x[idx[0, col]], out=out)
        return out
    if k1 == 2:
        if k2 <= 6:
            y = x[idx]  # (2, k2, c)
            out = y[0, 0] + y[1, 1]
            for a in range(k2):
                for b in range(k2):
                    if a != b and (a, b) != (0, 1):
                        np.maximum(out, y[0, a] + y[1, b], out=out)
            return out
        y = x[idx]
        cols = np.arange(y.shape[2])
        a0, a1 = y[0].argmax(0), y[1].argmax(0)
        m0, m1 = y[0][a0, cols], y[1][a1, cols]
        r0, r1 = y[0].copy(), y[1].copy()
        r0[a0, cols] = -np.inf
        r1[a1, cols] = -np.inf
        s0, s1 = r0.max(0), r1.max(0)
        return np.where(a0 != a1, m0 + m1, np.maximum(m0 + s1, s0 + m1))
    blocks = idx.transpose(2, 0, 1)  # (c, k1, k2)
    if math.perm(k2, k1) <= MAX_ENUMERATED:
        inj = _injections(k1, k2)
        out = np.empty(len(blocks))
        step = max(1, 2_000_000 // (len(inj) * k1))
        for s in range(0, len(blocks), step):
            y = x[blocks[s:s + step]]  # (c, k1, k2)
            out[s:s + step] = y[:, np.arange(k1), inj].sum(-1).max(-1)
        return out
    out = np.empty(len(blocks))
    for c in range(len(blocks)):
        y = x[blocks[c]]
        r, col = linear_sum_assignment(y, maximize=True)
        out[c] = y[r, col].sum()
    return out


def _iterate(pairs: Sequence[tuple[_Prepared, _Prepared]], labelled: bool, eps: float, max_iter: int,
             ) -> tuple[list[np.ndarray], list[int]]:
    """The fixed-point iteration for several graph pairs at once: their x matrices and iterations.

    Converged pairs are frozen; when they hold half of the batch's node pairs the batch is rebuilt
    from the pairs still running (each continues from its current iterate).
    """
    labs = [(_label_sim(a, b) if labelled else np.ones((a.n, b.n))).ravel() for a, b in pairs]
    xs = [lab.copy() for lab in labs]
    iters = [0] * len(pairs)
    running = [p for p, (a, b) in enumerate(pairs) if a.n * b.n > 0]
    it = 0
    while running and it < max_iter:
        sizes = np.array([pairs[p][0].n * pairs[p][1].n for p in running], dtype=np.int64)
        offs = np.concatenate([[0], np.cumsum(sizes)])
        total = int(offs[-1])
        t_in, t_out = _Term(total), _Term(total)
        for p, off in zip(running, offs[:-1]):
            a, b = pairs[p]
            t_in.add(a.ins, b.ins, b.n, int(off))
            t_out.add(a.outs, b.outs, b.n, int(off))
        t_in.finish()
        t_out.finish()
        lab = np.concatenate([labs[p] for p in running])
        x = np.concatenate([xs[p] for p in running])
        active = np.ones(len(running), dtype=bool)
        live = total
        while it < max_iter and live * 2 > total:
            it += 1
            nxt = lab * (t_in(x) + t_out(x)) / 2.0
            delta = np.maximum.reduceat(np.abs(nxt - x), offs[:-1])
            if active.all():
                x = nxt
            else:
                x = np.where(np.repeat(active, sizes), nxt, x)
            done = active & (delta < eps)
            for q in np.nonzero(active)[0]:
                iters[running[q]] = it
            for q in np.nonzero(done)[0]:
                xs[running[q]] = x[offs[q]:offs[q + 1]].copy()
            active &= ~done
            live = int(sizes[active].sum())
        for q in np.nonzero(active)[0]:
            xs[running[q]] = x[offs[q]:offs[q + 1]].copy()
        running = [p for q, p in enumerate(running) if active[q]]
    return [x.reshape(a.n, b.n) for x, (a, b) in zip(xs, pairs)], iters


def node_similarity(a: ProgramGraph, b: ProgramGraph, eps: float = EPS, max_iter: int = MAX_ITER,
                    labelled: bool = True) -> np.ndarray:
    """Nikolić's node similarity matrix of two graphs (float64, shape (|A|, |B|), values in [0, 1]).

    Args:
        a, b: program graphs.
        eps: stop when the largest change of an entry is below this.
        max_iter: at most this many iterations.
        labelled: multiply by the label similarity (label-aware LAV); False gives the plain
            structural neighbour-matching similarity of the paper (``L`` = 1).
    """
    vocab: dict[str, int] = {}
    xs, _ = _iterate([(_Prepared.of(a, vocab), _Prepared.of(b, vocab))], labelled, eps, max_iter)
    return xs[0]


def _assign(x: np.ndarray, na: int, nb: int) -> float:
    if x.size == 0:
        return 0.0
    r, c = linear_sum_assignment(x, maximize=True)
    return float(x[r, c].sum() / max(na, nb, 1))


def graph_similarity(a: ProgramGraph, b: ProgramGraph, eps: float = EPS, max_iter: int = MAX_ITER,
                     labelled: bool = True) -> float:
    """LAV similarity of two program graphs in [0, 1] (see the module docstring)."""
    x = node_similarity(a, b, eps=eps, max_iter=max_iter, labelled=labelled)
    return _assign(x, a.n_nodes, b.n_nodes)


@dataclass
class LavResult:
    """All-pairs LAV (:func:`lav`).

    Attributes:
        matrix: float64 (N, N), symmetric, diagonal 1, values in [0, 1].
        iterations: int64 (N, N) iterations run per program pair (0 on the diagonal).
        eps, max_iter: the stopping rule used; pairs with ``iterations == max_iter`` may not have
            reached ``eps``.
    """

    matrix: np.ndarray
    iterations: np.ndarray
    eps: float
    max_iter: int

    def summary(self) -> dict:
        """``{"eps", "max_iter", "pairs", "iterations_mean", "iterations_max", "unconverged_pairs"}``."""
        n = self.matrix.shape[0]
        it = self.iterations[np.triu_indices(n, 1)]
        return {"eps": self.eps, "max_iter": self.max_iter, "pairs": int(it.size),
                "iterations_mean": float(it.mean()) if it.size else 0.0,
                "iterations_max": int(it.max()) if it.size else 0,
                "unconverged_pairs": int((it >= self.max_iter).sum())}


_WORKER: dict = {}


def _init_worker(prepared: list[_Prepared], eps: float, max_iter: int, labelled: bool) -> None:
    _WORKER.update(prepared=prepared, eps=eps, max_iter=max_iter, labelled=labelled)


def _run_chunk(chunk: list[tuple[int, int]]) -> list[tuple[int, int, float, int]]:
    prep = _WORKER["prepared"]
    out: list[tuple[int, int, float, int]] = []
    batch: list[tuple[int, int]] = []
    load = 0

    def flush() -> None:
        pairs = [(prep[i], prep[j]) for i, j in batch]
        xs, iters = _iterate(pairs, _WORKER["labelled"], _WORKER["eps"], _WORKER["max_iter"])
        for (i, j), x, it in zip(batch, xs, iters):
            out.append((i, j, _assign(x, prep[i].n, prep[j].n), it))
        batch.clear()

    for i, j in chunk:
        batch.append((i, j))
        load += prep[i].n * prep[j].n
        if load >= BATCH_NODE_PAIRS:
            flush()
            load = 0
    if batch:
        flush()
    return out


def default_workers() -> int:
    """Worker processes used when none are given: the CPUs this process may run on, at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


def lav(graphs: Sequence[ProgramGraph], eps: float = EPS, max_iter: int = MAX_ITER, workers: int | None = None,
        verbose: int = 0, labelled: bool = True) -> LavResult:
    """All-pairs LAV similarity with the iterations run per pair.

    Args:
        graphs: N program graphs.
        eps: per pair, stop when the largest change of a node-pair entry is below this (default 1e-4).
        max_iter: at most this many iterations per pair.
        workers: worker processes (None = :func:`default_workers`; 1 = in this process). Pairs are
            sent in chunks to a :class:`~concurrent.futures.ProcessPoolExecutor` (``forkserver``
            where available, else ``spawn``); the result does not depend on the number of workers.
        verbose: > 0 shows a progress bar (pairs) on stderr.
        labelled: label-aware LAV (default) or plain neighbour matching.

    Returns:
        A :class:`LavResult`.

    Raises:
        InputError: ``workers < 1``, ``eps <= 0`` or ``max_iter < 1``.
    """
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}")
    if not eps > 0 or max_iter < 1:
        raise InputError(f"LAV needs eps > 0 and max_iter >= 1, got eps={eps}, max_iter={max_iter}")
    n = len(graphs)
    vocab: dict[str, int] = {}
    prepared = [_Prepared.of(g, vocab) for g in graphs]
    matrix = np.eye(n)
    iterations = np.zeros((n, n), dtype=np.int64)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    # chunks of similar work (~ node pairs), a few per worker and bar step
    chunks: list[list[tuple[int, int]]] = []
    target = max(BATCH_NODE_PAIRS, sum(prepared[i].n * prepared[j].n for i, j in pairs) // max(1, 50 * workers))
    cur: list[tuple[int, int]] = []
    load = 0
    for i, j in pairs:
        cur.append((i, j))
        load += prepared[i].n * prepared[j].n
        if load >= target:
            chunks.append(cur)
            cur, load = [], 0
    if cur:
        chunks.append(cur)

    def store(res: list[tuple[int, int, float, int]]) -> None:
        for i, j, s, it in res:
            matrix[i, j] = matrix[j, i] = s
            iterations[i, j] = iterations[j, i] = it

    with progress("LAV pairs", total=len(pairs), quiet=verbose <= 0) as bar:
        if workers == 1 or len(chunks) <= 1:
            _init_worker(prepared, eps, max_iter, labelled)
            try:
                for ch in chunks:
                    store(_run_chunk(ch))
                    bar.advance(len(ch))
            finally:
                _WORKER.clear()
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed

            from twinspect._mp import guarded_initializer, mp_context

            init, initargs = guarded_initializer(_init_worker, (prepared, eps, max_iter, labelled))
            with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=mp_context(),
                                     initializer=init, initargs=initargs) as pool:
                futures = {pool.submit(_run_chunk, ch): len(ch) for ch in chunks}
                for fut in as_completed(futures):
                    store(fut.result())
                    bar.advance(futures[fut])
    return LavResult(matrix=np.clip(matrix, 0.0, 1.0), iterations=iterations, eps=eps, max_iter=max_iter)


def lav_matrix(graphs: Sequence[ProgramGraph], eps: float = EPS, max_iter: int = MAX_ITER, verbose: int = 0,
               workers: int | None = None) -> np.ndarray:
    """All-pairs LAV similarity matrix (float64, (N, N), symmetric, diagonal 1); see :func:`lav`."""
    return lav(graphs, eps=eps, max_iter=max_iter, workers=workers, verbose=verbose).matrix
