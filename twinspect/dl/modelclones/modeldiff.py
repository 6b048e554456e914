"""ModelDiff's decision-distance-vector similarity (Li, Zhang, Chen, Shen, Gu & Liu, ISSTA 2021).

"ModelDiff: Testing-based DNN Similarity Comparison for Model Reuse Detection" represents a model's
behaviour on ``n`` pairs of inputs ``(x_i, x'_i)`` by its *decision distance vector* (DDV):
``DDV_i = cosine_distance(f(x_i), f(x'_i))``; two models are similar when their (L2-normalised) DDVs
point the same way: ``similarity = 1 − cosine_distance(DDV_f, DDV_g)``.

Here the pairs are drawn from the comparison inputs without ModelDiff's gradient-guided input
search (which needs white-box access to one model): half of ``2n`` seeded-shuffled inputs are paired
with the other half. That is the baseline the reuse score is measured against.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cosine

from twinspect.errors import InputError


def profiling_pairs(n_inputs: int, n_pairs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(left, right)`` of ``min(n_pairs, n_inputs // 2)`` disjoint input pairs, seeded.

    Raises:
        InputError: fewer than 4 inputs.
    """
    if n_inputs < 4:
        raise InputError(f"ModelDiff needs at least 4 inputs, got {n_inputs}")
    m = min(int(n_pairs), n_inputs // 2)
    order = np.random.default_rng(seed).permutation(n_inputs)[: 2 * m]
    return order[:m], order[m:]


def ddv(outputs: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Decision distance vector (n_pairs,) float64: cosine distance of the output rows of each pair.

    Args:
        outputs: (N, K) model outputs (probabilities) on all inputs.
        left, right: pair indices from :func:`profiling_pairs`.
    """
    out = np.asarray(outputs, dtype=np.float64)
    a, b = out[left], out[right]
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = 1.0 - np.sum(a * b, axis=1) / (na * nb)
    return np.nan_to_num(d, nan=0.0)


def ddv_similarity(ddv_a: np.ndarray, ddv_b: np.ndarray) -> float:
    """``1 − cosine_distance`` of two DDVs (1 = same behaviour pattern); 1.0 when both are all zeros,
    0.0 when exactly one is."""
    a, b = np.asarray(ddv_a, dtype=np.float64), np.asarray(ddv_b, dtype=np.float64)
    za, zb = not np.any(a), not np.any(b)
    if za and zb:
        return 1.0
    if za or zb:
        return 0.0
    return float(1.0 - cosine(a, b))
