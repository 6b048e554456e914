"""Linear CKA with the unbiased HSIC estimator, layer × layer maps and a model-level score.

Centered kernel alignment (Kornblith, Norouzi, Lee & Hinton, "Similarity of Neural Network
Representations Revisited", ICML 2019) compares two representations of the same ``n`` inputs,
``X (n, p)`` and ``Y (n, q)``, through their linear Gram matrices ``K = X Xᵀ`` and ``L = Y Yᵀ``:
``CKA = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))``. HSIC is the unbiased estimator of Song, Smola,
Gretton, Bedo & Borgwardt ("Feature selection via dependence maximization", JMLR 2012), as used for
CKA by Nguyen, Raghu & Kornblith ("Do wide and deep networks learn the same things?", ICLR 2021):
with ``K̃``, ``L̃`` the Gram matrices with zeroed diagonals,

``HSIC₁(K, L) = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((n−1)(n−2)) − 2/(n−2) · 1ᵀK̃L̃1] / (n(n−3))``.

Linear CKA is invariant to orthogonal transformations and isotropic scaling of either
representation (so a copy of a network with permuted neurons has CKA 1 layer for layer), but not to
arbitrary invertible linear maps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from twinspect.errors import InputError


@dataclass(frozen=True)
class Gram:
    """A representation's zero-diagonal linear Gram matrix, prepared for unbiased HSIC.

    Attributes:
        k: (n, n) float64 ``X Xᵀ`` with its diagonal set to 0.
        rows: (n,) row sums of ``k``.
        total: sum of ``k``.
        self_hsic: ``HSIC₁(K, K)``.
    """

    k: np.ndarray
    rows: np.ndarray
    total: float
    self_hsic: float

    @property
    def n(self) -> int:
        return int(self.k.shape[0])


def gram(x: np.ndarray) -> Gram:
    """Prepare one representation.

    Args:
        x: (n, ...) activations of ``n`` inputs (flattened to (n, features)); n >= 4.

    Returns:
        A :class:`Gram`.

    Raises:
        InputError: fewer than 4 inputs (the unbiased estimator divides by n − 3), or non-finite values.
    """
    a = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    n = a.shape[0]
    if n < 4:
        raise InputError(f"unbiased CKA needs at least 4 inputs, got {n}")
    if not np.all(np.isfinite(a)):
        raise InputError("activations contain NaN or infinity; CKA is undefined")
    k = a @ a.T
    np.fill_diagonal(k, 0.0)
    rows = k.sum(1)
    g = Gram(k, rows, float(rows.sum()), 0.0)
    return Gram(k, rows, g.total, _hsic(g, g))


def _hsic(a: Gram, b: Gram) -> float:
    n = a.n
    term = float(np.sum(a.k * b.k)) + a.total * b.total / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * float(a.rows @ b.rows)
    return term / (n * (n - 3))


def hsic_unbiased(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased HSIC of the linear kernels of ``x`` and ``y`` (n, ...) (see the module docstring)."""
    a, b = gram(x), gram(y)
    if a.n != b.n:
        raise InputError(f"representations of different input counts: {a.n} and {b.n}")
    return _hsic(a, b)


def cka_from_grams(a: Gram, b: Gram) -> float:
    """Linear CKA of two prepared representations of the same inputs.

    Returns:
        CKA (≈ [0, 1]; the unbiased estimate can fall slightly below 0); NaN when either
        representation is constant (zero self-HSIC).

    Raises:
        InputError: different input counts.
    """
    if a.n != b.n:
        raise InputError(f"representations of different input counts: {a.n} and {b.n}")
    den = a.self_hsic * b.self_hsic
    if not den > 0:
        return float("nan")
    return float(_hsic(a, b) / np.sqrt(den))


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (unbiased HSIC) of two representations ``x (n, p...)`` and ``y (n, q...)`` of the same
    ``n`` inputs (n >= 4). See :func:`cka_from_grams`."""
    return cka_from_grams(gram(x), gram(y))


def cka_map(a: Mapping[str, Gram], b: Mapping[str, Gram]) -> np.ndarray:
    """Layer × layer CKA map between two models.

    Args:
        a, b: ``{layer: Gram}`` in execution order (from :func:`gram` of each layer's activations on
            the same inputs).

    Returns:
        float64 (len(a), len(b)); entry (i, j) = CKA of layer i of ``a`` and layer j of ``b``.
    """
    ga, gb = list(a.values()), list(b.values())
    out = np.empty((len(ga), len(gb)), dtype=np.float64)
    for i, x in enumerate(ga):
        for j, y in enumerate(gb):
            out[i, j] = cka_from_grams(x, y)
    return out


def model_cka(m: np.ndarray) -> float:
    """One model-level score from a layer × layer CKA map: the mean over both models' layers of each
    layer's best match in the other model, ``(mean_i max_j m[i, j] + mean_j max_i m[i, j]) / 2``.

    1 for two models whose every layer has a perfectly aligned counterpart (identical or
    neuron-permuted copies); NaN entries (constant layers) are ignored; NaN for an empty map.
    """
    m = np.asarray(m, dtype=np.float64)
    if m.size == 0 or np.all(np.isnan(m)):
        return float("nan")
    with np.errstate(all="ignore"):
        rows = np.nanmax(np.where(np.isnan(m), -np.inf, m), axis=1)
        cols = np.nanmax(np.where(np.isnan(m), -np.inf, m), axis=0)
    rows, cols = rows[np.isfinite(rows)], cols[np.isfinite(cols)]
    return float((rows.mean() + cols.mean()) / 2.0)
