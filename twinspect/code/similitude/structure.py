"""The CFG-only measure ``cfg``: program similarity from control-flow structure alone (no tokens).

What a program is reduced to (all from :class:`~twinspect.code.similitude.cfg.ProgramGraph`; no
identifier, literal, operator or token enters):

- **Loop depth** ``δ(v)`` of every basic block: the number of natural loops containing it, per
  function, on the function's own flow edges (call/return edges excluded, so calling a helper from
  a loop does not make a loop). Loops are found by a depth-first search from the entry: an edge
  ``u → h`` to a block still on the DFS stack is a back edge and its natural loop is ``h`` plus every
  block that reaches ``u`` without passing through ``h`` (Aho et al., *Compilers*, §9.6; exact for
  the reducible graphs structured code gives). Depths above 4 count as 4.
- **Depth-aware WL bag**: Weisfeiler–Lehman subtree labels (Shervashidze et al., JMLR 2011;
  :func:`~twinspect.code.similitude.measures.wl_labels`, the same function the default measure and
  :mod:`twinspect.code.structural` use) of the program graph whose node labels are
  ``"δ:label"`` (the block's statement-kind set prefixed by its loop depth), iterations 0..h.
- **Structure bag**: statement-kind counts over all blocks (the multiset, not only the label
  sets), in-degree and out-degree histograms (0, 1, 2, 3, ≥ 4) and the labelled edge pairs
  ``label(u) > label(v)``.

Each bag is TF-IDF weighted (sublinear tf ``1 + log c``, smoothed idf ``log((1 + N) / (1 + df)) + 1``
over the compared programs), L2-normalised and scaled by its weight (WL 1, structure ``w_struct``);
the concatenation ``x_p`` is centred on the compared set's mean, reduced by a truncated SVD to
``svd`` dimensions (skipped for ≤ ``svd`` + 1 programs), L2-normalised to ``z_p``, and

    cfg(p, q) = (1 + z_p · z_q) / 2 ∈ [0, 1],  cfg(p, p) = 1.

Why these choices (all settings were chosen on POJ-104 *valid*, problems 65–80, 50 programs each;
``benchmarks/similitude.py --part tune-cfg``; nothing was fitted on dev):

- WL labels capture a block together with its control-flow neighbourhood (what precedes and
  follows a loop header, a condition…), which bags of single labels do not. The grid (h 1–3, SVD
  0/20/30/40, structure weight 0/0.5/1) peaked at h = 1, SVD 20, weight 0.5 (valid silhouette
  0.294; h = 2 with SVD 30 is 0.293, h = 3 at most 0.279): one round of neighbourhood is enough
  once loop depth is in the labels.
- Loop depth is what distinguishes a doubly nested loop over a matrix from two loops in sequence;
  adding it to the labels raised valid silhouette from 0.244 to 0.293 (h = 2, SVD 30).
- The structure bag adds counts that WL labels (sets of kinds) lose; half weight was best.
- Centring and SVD, as in the default measure, remove what all programs share (``main``, input
  loops) and merge co-occurring labels; without the SVD valid silhouette was 0.03–0.08.
- The measure is transductive like the default one (idf, centre and SVD come from the compared set;
  no labels are used).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from twinspect.code.similitude.cfg import CFG, ENTRY, ProgramGraph, adjacency

#: Loop depths above this are counted as this.
MAX_DEPTH = 4


@dataclass(frozen=True)
class CfgParams:
    """Settings of the ``cfg`` measure (chosen on POJ-104 valid; see the module docstring).

    Attributes:
        wl_iterations: WL depth h (labels of iterations 0..h).
        w_struct: weight of the structure bag (the WL bag has weight 1).
        svd: truncated-SVD size (0 = none; skipped when the set has ≤ svd + 1 programs).
    """

    wl_iterations: int = 1
    w_struct: float = 0.5
    svd: int = 20


def loop_depths(cfg: CFG) -> list[int]:
    """Natural-loop nesting depth of each block of one function's CFG (see the module docstring).

    Returns:
        One int ≥ 0 per node (0 for blocks unreachable from the entry).
    """
    n = cfg.n_nodes
    succ, pred = adjacency(n, cfg.edges)
    if n == 0:
        return []
    state = [0] * n  # 0 unseen, 1 on the stack, 2 finished
    back: list[tuple[int, int]] = []
    state[ENTRY] = 1
    stack = [(ENTRY, iter(succ[ENTRY]))]
    while stack:
        u, it = stack[-1]
        v = next(it, None)
        if v is None:
            state[u] = 2
            stack.pop()
        elif state[v] == 1:
            back.append((u, v))
        elif state[v] == 0:
            state[v] = 1
            stack.append((v, iter(succ[v])))
    bodies: dict[int, set[int]] = {}
    for u, h in back:
        body = bodies.setdefault(h, {h})
        work = [u]
        while work:
            w = work.pop()
            if w not in body:
                body.add(w)
                work.extend(pred[w])
    depth = [0] * n
    for body in bodies.values():
        for w in body:
            depth[w] += 1
    return depth


def depth_labels(g: ProgramGraph) -> list[str]:
    """Node labels of ``g`` prefixed by their loop depth (``"2:assign+arith"``), in node order."""
    out: list[str] = []
    for f in g.functions:
        out.extend(f"{min(d, MAX_DEPTH)}:{lab}" for d, lab in zip(loop_depths(f), f.labels))
    if len(out) != g.n_nodes:  # a graph built without its functions: depth unknown, use 0
        out = [f"0:{lab}" for lab in g.labels]
    return out


def depth_wl_bag(g: ProgramGraph, iterations: int) -> Counter:
    """Bag of WL labels (iterations 0..``iterations``) of ``g`` with :func:`depth_labels` as node labels."""
    from twinspect.code.similitude.measures import wl_labels

    relabelled = ProgramGraph(path=g.path, language=g.language, functions=g.functions, labels=depth_labels(g),
                              kinds=g.kinds, edges=g.edges)
    return Counter(wl_labels(relabelled, iterations))


def structure_bag(g: ProgramGraph) -> Counter:
    """Statement-kind counts, degree histograms and labelled edge pairs of ``g`` (a bag of strings)."""
    c: Counter = Counter()
    for ks in g.kinds:
        c.update("k:" + k for k in ks)
    din = np.bincount([b for _, b in g.edges], minlength=g.n_nodes)
    dout = np.bincount([a for a, _ in g.edges], minlength=g.n_nodes)
    c.update(f"in:{min(int(d), 4)}" for d in din)
    c.update(f"out:{min(int(d), 4)}" for d in dout)
    c.update(f"e:{g.labels[a]}>{g.labels[b]}" for a, b in g.edges)
    return c


def cfg_bags(g: ProgramGraph, params: CfgParams | None = None) -> tuple[Counter, Counter]:
    """The two bags of one program: (depth-aware WL labels, structure bag)."""
    p = params or CfgParams()
    return depth_wl_bag(g, p.wl_iterations), structure_bag(g)


def cfg_features(graphs: Sequence[ProgramGraph], params: CfgParams | None = None) -> np.ndarray:
    """Centred, SVD-reduced, unit-length rows ``z_p`` of the ``cfg`` measure (float64 (N, D))."""
    from twinspect.code.similitude.measures import project_rows, tfidf

    p = params or CfgParams()
    bags = [cfg_bags(g, p) for g in graphs]
    x = sp.hstack([tfidf([b[0] for b in bags]), p.w_struct * tfidf([b[1] for b in bags])]).tocsr()
    return project_rows(x, p.svd)


def cfg_matrix(graphs: Sequence[ProgramGraph], params: CfgParams | None = None) -> np.ndarray:
    """The ``cfg`` measure's matrix (float64 (N, N), symmetric, in [0, 1], diagonal 1)."""
    from twinspect.code.similitude.measures import cosine_matrix

    if not graphs:
        return np.zeros((0, 0))
    return cosine_matrix(cfg_features(graphs, params))
