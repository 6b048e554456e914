"""Retrieval metrics: recall@k, MRR and MAP@R.

* recall@k / MRR over the ranks of each query's relevant item (:func:`rank_metrics`).
* MAP@R (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020; CodeXGLUE POJ-104): for
  each query, R = number of other items with the same label; AP@R = (1/R) Σ_{i≤R} P@i·rel_i over
  the top R results; MAP@R is the mean over queries (:func:`map_at_r`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def rank_metrics(ranks: Sequence[int | None], ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """Recall@k and mean reciprocal rank from the 1-based rank of each query's first relevant result.

    Args:
        ranks: per query, the 1-based rank of the first relevant result, or None when none was
            retrieved.
        ks: cut-offs for recall@k.

    Returns:
        ``{"recall@k": fraction, ..., "mrr": mean of 1/rank (0 for None), "queries": count}``.
    """
    n = len(ranks)
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall@{k}"] = sum(1 for r in ranks if r is not None and r <= k) / n if n else float("nan")
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n if n else float("nan")
    out["queries"] = n
    return out


def first_relevant_rank(similarities: np.ndarray, relevant: np.ndarray) -> int | None:
    """1-based rank of the best-ranked relevant candidate (ties broken by candidate order).

    Args:
        similarities: float array (M,) of candidate scores (higher = more similar).
        relevant: bool array (M,) marking the relevant candidates.

    Returns:
        The rank, or None when no candidate is relevant.
    """
    if not relevant.any():
        return None
    best = float(similarities[relevant].max())
    first = int(np.flatnonzero(relevant & (similarities == best))[0])
    # candidates strictly better, plus equally good ones that come earlier
    ahead = int((similarities > best).sum()) + int((similarities[:first] == best).sum())
    return ahead + 1


def average_precision_at_r(relevant_in_order: Sequence[bool], r: int) -> float:
    """AP@R of one query: (1/R) Σ_{i≤R} P@i · rel_i over the first R results.

    Args:
        relevant_in_order: relevance of the ranked results (at least the first R are read).
        r: R, the number of relevant items in the collection (> 0).

    Returns:
        AP@R in [0, 1].
    """
    hits = 0
    total = 0.0
    for i, rel in enumerate(relevant_in_order[:r], start=1):
        if rel:
            hits += 1
            total += hits / i
    return total / r


def map_at_r(vectors: np.ndarray, labels: Sequence[Hashable], chunk: int = 512) -> float:
    """MAP@R of every item queried against all the others by cosine similarity (CodeXGLUE POJ-104).

    Args:
        vectors: float (N, d) embeddings (rows L2-normalised for cosine; any rows are ranked by dot
            product).
        labels: N labels; items with the same label are relevant to each other.
        chunk: queries per matrix block (memory ~ chunk × N × 4 bytes).

    Returns:
        MAP@R in [0, 1], averaged over items that have at least one other item with their label.
        Ties are broken by item order (stable sort).
    """
    x = np.asarray(vectors, dtype=np.float32)
    lab_list = list(labels)
    codes = {lab: i for i, lab in enumerate(dict.fromkeys(lab_list))}
    y = np.array([codes[lab] for lab in lab_list])
    counts = np.bincount(y)
    n = len(y)
    aps: list[float] = []
    for s in range(0, n, chunk):
        sims = x[s : s + chunk] @ x.T
        for j in range(sims.shape[0]):
            q = s + j
            r = int(counts[y[q]]) - 1
            if r <= 0:
                continue
            row = sims[j].copy()
            row[q] = -np.inf
            order = np.argsort(-row, kind="stable")[:r]
            rel = y[order] == y[q]
            prec = np.cumsum(rel) / np.arange(1, r + 1)
            aps.append(float((prec * rel).sum() / r))
    return float(np.mean(aps)) if aps else float("nan")
