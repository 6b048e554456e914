"""Test reference: the original dense LAV implementation (twinspect/code/similitude/lav.py at 8f0571c).

Kept unchanged (except this paragraph) so tests can check that the bounded-memory implementation
gives the same values on small graphs; it builds an (n, m, D, D) array, so use it on small graphs only.

LAV baseline: graph similarity by neighbour matching (Nikolić 2012).

Follows M. Nikolić, "Measuring similarity of graph nodes by neighbor matching", Intelligent Data
Analysis 16(6), 2012, label-aware as in the LAV tool the program-similitude seed used:

- ``x⁰_ij = L_ij`` where ``L`` is the node label similarity (:func:`label_similarity`).
- ``x^{k+1}_ij = L_ij · (s_in + s_out) / 2`` with
  ``s_out = (1 / max(od(i), od(j))) · max_f Σ_{(l, q) ∈ f} x^k_lq`` over matchings ``f`` of i's
  out-neighbours with j's out-neighbours (an optimal assignment, :func:`scipy.optimize.linear_sum_assignment`
  for large neighbourhoods, exhaustive over permutations for degrees ≤ 4 where it is the same
  optimum); ``s_in`` likewise over in-neighbours. When both nodes have no out- (in-) neighbours the
  term is 1; when only one has, it is 0.
- Iterate until ``max |x^{k+1} − x^k| < eps`` (or ``max_iter`` iterations).
- Graph similarity: the optimal node assignment ``f`` on ``x`` and
  ``s(A, B) = Σ_{(i, j) ∈ f} x_ij / max(|A|, |B|)`` (normalised by the larger graph, so a graph is
  not fully similar to its subgraphs). ``s(A, A) = 1`` and ``s(A, B) = s(B, A)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from twinspect.code.similitude.cfg import ProgramGraph
from twinspect.progress import progress

_PERMS = {d: np.array(list(itertools.permutations(range(d))), dtype=np.int64) for d in range(1, 5)}


def label_similarity(kinds_a: Sequence[tuple[str, ...]], labels_a: Sequence[str],
                     kinds_b: Sequence[tuple[str, ...]], labels_b: Sequence[str]) -> np.ndarray:
    """Node label similarity ``L`` (float64, shape (|A|, |B|)).

    ``L_ij`` is the weighted Jaccard index of the two nodes' statement-kind multisets
    (``Σ min(count) / Σ max(count)``), 1 when both are empty; ``entry`` matches only ``entry`` and
    ``exit`` only ``exit`` (1), and 0 against any other node.
    """
    vocab: dict[str, int] = {}
    for ks in (*kinds_a, *kinds_b):
        for k in ks:
            vocab.setdefault(k, len(vocab))
    va = _counts(kinds_a, vocab)
    vb = _counts(kinds_b, vocab)
    mn = np.minimum(va[:, None, :], vb[None, :, :]).sum(-1)
    mx = np.maximum(va[:, None, :], vb[None, :, :]).sum(-1)
    sim = np.where(mx > 0, mn / np.maximum(mx, 1e-12), 1.0)
    sa = np.array([lab in ("entry", "exit") for lab in labels_a])
    sb = np.array([lab in ("entry", "exit") for lab in labels_b])
    la = np.array(labels_a, dtype=object)
    lb = np.array(labels_b, dtype=object)
    special = sa[:, None] | sb[None, :]
    same = la[:, None] == lb[None, :]
    return np.where(special, same.astype(float), sim)


def _counts(kinds: Sequence[tuple[str, ...]], vocab: dict[str, int]) -> np.ndarray:
    out = np.zeros((len(kinds), max(len(vocab), 1)))
    for i, ks in enumerate(kinds):
        for k in ks:
            out[i, vocab[k]] += 1
    return out


def _neighbours(n: int, edges: Sequence[tuple[int, int]], out: bool) -> tuple[np.ndarray, np.ndarray]:
    lists: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if out:
            lists[a].append(b)
        else:
            lists[b].append(a)
    deg = np.array([len(x) for x in lists], dtype=np.int64)
    d = max(int(deg.max()) if n else 0, 1)
    pad = np.full((n, d), -1, dtype=np.int64)
    for i, x in enumerate(lists):
        pad[i, : len(x)] = x
    return pad, deg


def _match_term(x: np.ndarray, na: np.ndarray, da: np.ndarray, nb: np.ndarray, db: np.ndarray) -> np.ndarray:
    """s_ij = optimal matching sum of x over neighbours / max degree (1 if both degrees are 0)."""
    xp = np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    xp[:-1, :-1] = x  # index -1 -> the zero row/column
    y = xp[na[:, None, :, None], nb[None, :, None, :]]  # (n, m, Da, Db)
    d = max(y.shape[2], y.shape[3])
    if y.shape[2] < d or y.shape[3] < d:
        y = np.pad(y, ((0, 0), (0, 0), (0, d - y.shape[2]), (0, d - y.shape[3])))
    k = min(d, 4)
    perms = _PERMS[k]
    best = y[:, :, np.arange(k)[None, :], perms].sum(-1).max(-1)  # (n, m)
    mdeg = np.maximum(da[:, None], db[None, :])
    if d > 4:
        for i, j in zip(*np.nonzero(mdeg > 4)):
            r, c = linear_sum_assignment(y[i, j], maximize=True)
            best[i, j] = y[i, j][r, c].sum()
    both_empty = mdeg == 0
    return np.where(both_empty, 1.0, best / np.maximum(mdeg, 1))


def node_similarity(a: ProgramGraph, b: ProgramGraph, eps: float = 1e-4, max_iter: int = 100,
                    labelled: bool = True) -> np.ndarray:
    """Nikolić's node similarity matrix of two graphs (float64, shape (|A|, |B|), values in [0, 1]).

    Args:
        a, b: program graphs.
        eps: stop when the largest change of an entry is below this.
        max_iter: at most this many iterations.
        labelled: multiply by the label similarity (label-aware LAV); False gives the plain
            structural neighbour-matching similarity of the paper (``L`` = 1).
    """
    la = label_similarity(a.kinds, a.labels, b.kinds, b.labels) if labelled else np.ones((a.n_nodes, b.n_nodes))
    ia, ida = _neighbours(a.n_nodes, a.edges, out=False)
    oa, oda = _neighbours(a.n_nodes, a.edges, out=True)
    ib, idb = _neighbours(b.n_nodes, b.edges, out=False)
    ob, odb = _neighbours(b.n_nodes, b.edges, out=True)
    x = la.copy()
    for _ in range(max_iter):
        s_in = _match_term(x, ia, ida, ib, idb)
        s_out = _match_term(x, oa, oda, ob, odb)
        nxt = la * (s_in + s_out) / 2.0
        delta = float(np.abs(nxt - x).max()) if x.size else 0.0
        x = nxt
        if delta < eps:
            break
    return x


def graph_similarity(a: ProgramGraph, b: ProgramGraph, eps: float = 1e-4, max_iter: int = 100,
                     labelled: bool = True) -> float:
    """LAV similarity of two program graphs in [0, 1] (see the module docstring)."""
    x = node_similarity(a, b, eps=eps, max_iter=max_iter, labelled=labelled)
    r, c = linear_sum_assignment(x, maximize=True)
    return float(x[r, c].sum() / max(a.n_nodes, b.n_nodes, 1))


def lav_matrix(graphs: Sequence[ProgramGraph], eps: float = 1e-2, max_iter: int = 10, verbose: int = 0) -> np.ndarray:
    """All-pairs LAV similarity matrix (float64, (N, N), symmetric, diagonal 1).

    One graph pair at a time (quadratic in N; progress on stderr when ``verbose`` > 0). The
    iteration is truncated (``eps`` = 0.01, at most 10 iterations) so the 600-program benchmark
    finishes: on POJ-104 CFGs the label-aware iteration contracts slowly (the largest change shrinks
    by about 10 % per iteration), so the matrix is an approximation of the fixed point.
    """
    n = len(graphs)
    out = np.eye(n)
    with progress("LAV pairs", total=n * (n - 1) // 2, quiet=verbose <= 0) as bar:
        for i in range(n):
            for j in range(i + 1, n):
                out[i, j] = out[j, i] = graph_similarity(graphs[i], graphs[j], eps=eps, max_iter=max_iter)
            bar.advance(n - i - 1)
    return out
