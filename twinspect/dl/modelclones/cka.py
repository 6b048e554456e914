"""Linear CKA on centred features with the unbiased HSIC estimator, layer × layer maps and a model score.

Centered kernel alignment (Kornblith, Norouzi, Lee & Hinton, "Similarity of Neural Network
Representations Revisited", ICML 2019) compares two representations of the same ``n`` inputs,
``X (n, p)`` and ``Y (n, q)``. Linear CKA is defined on *centred* features (each column minus its mean
over the ``n`` inputs, i.e. ``HX`` with the centring matrix ``H = I − 11ᵀ/n``); with the linear Gram
matrices ``K = XXᵀ``, ``L = YYᵀ`` of the centred features,
``CKA = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))``.

Two estimators of HSIC are offered:

* ``unbiased=True`` (default, used by ``twinspect models compare``): the unbiased estimator of Song,
  Smola, Gretton, Bedo & Borgwardt ("Feature selection via dependence maximization", JMLR 2012), as
  used for CKA by Nguyen, Raghu & Kornblith ("Do wide and deep networks learn the same things?",
  ICLR 2021) and as Kornblith et al.'s ``debiased`` option: with ``K̃``, ``L̃`` the Gram matrices with
  zeroed diagonals,
  ``HSIC₁(K, L) = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((n−1)(n−2)) − 2/(n−2) · 1ᵀK̃L̃1] / (n(n−3))``.
  Its CKA is centred on 0 for independent representations.
* ``unbiased=False``: the biased estimator ``HSIC₀ = tr(KHLH)/(n−1)²`` of the paper, whose CKA equals
  the feature-space form ``‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F)`` on centred ``X``, ``Y``.

The unbiased estimator is invariant to a constant added to the features in exact arithmetic, but
computed on uncentred features it cancels terms of size ``offset² · p`` and loses every digit for an
offset of 1e3–1e4; centring first (in float64) keeps it exact to rounding. Linear CKA is invariant to
orthogonal transformations and isotropic scaling of either representation (so a copy of a network
with permuted neurons has CKA 1 layer for layer), but not to arbitrary invertible linear maps.

A representation whose every feature is constant over the inputs has no variance: its CKA is
undefined (NaN) and :attr:`Gram.constant` says so, so callers can tell it from a numerical failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from twinspect.errors import InputError


@dataclass(frozen=True)
class Gram:
    """A representation's zero-diagonal linear Gram matrix of centred features, prepared for unbiased HSIC.

    Attributes:
        k: (n, n) float64 ``Xc Xcᵀ`` (``Xc`` the column-centred features) with its diagonal set to 0.
        rows: (n,) row sums of ``k``.
        total: sum of ``k``.
        self_hsic: ``HSIC₁(K, K)``.
        constant: every feature is constant over the ``n`` inputs (CKA undefined).
    """

    k: np.ndarray
    rows: np.ndarray
    total: float
    self_hsic: float
    constant: bool = False

    @property
    def n(self) -> int:
        return int(self.k.shape[0])


def centred_features(x: np.ndarray) -> np.ndarray:
    """``x`` flattened to (n, features) float64 with each feature's mean over the inputs subtracted.

    Features constant over the inputs become exactly 0 (not rounding noise of their mean).

    Args:
        x: (n, ...) activations of ``n`` inputs, any real dtype; n >= 4.

    Returns:
        float64 (n, features) centred features ``H x``.

    Raises:
        InputError: ``x`` has no batch axis (a scalar), fewer than 4 rows, or NaN/infinite values.
    """
    arr = np.asarray(x)
    if arr.ndim < 1:
        raise InputError(f"activations of shape {arr.shape} have no input axis; CKA needs (n, ...) arrays")
    if arr.dtype.kind not in "fiub":
        raise InputError(f"activations of dtype {arr.dtype} are not numeric")
    a = arr.astype(np.float64).reshape(arr.shape[0], -1)
    n = a.shape[0]
    if n < 4:
        raise InputError(f"unbiased CKA needs at least 4 inputs, got {n}")
    if not np.all(np.isfinite(a)):
        raise InputError("activations contain NaN or infinity; CKA is undefined")
    c = a - a.mean(axis=0, keepdims=True)
    if a.shape[1]:
        c[:, np.ptp(a, axis=0) == 0] = 0.0
    return c


def gram(x: np.ndarray) -> Gram:
    """Prepare one representation: centre its features, then build the zero-diagonal Gram matrix.

    Args:
        x: (n, ...) activations of ``n`` inputs (flattened to (n, features)); n >= 4.

    Returns:
        A :class:`Gram` (float64, ``n × n``).

    Raises:
        InputError: see :func:`centred_features`.
    """
    c = centred_features(x)
    k = c @ c.T
    np.fill_diagonal(k, 0.0)
    rows = k.sum(1)
    g = Gram(k, rows, float(rows.sum()), 0.0)
    return Gram(k, rows, g.total, _hsic(g, g), constant=not bool(np.any(c)))


def _hsic(a: Gram, b: Gram) -> float:
    n = a.n
    term = float(np.sum(a.k * b.k)) + a.total * b.total / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * float(a.rows @ b.rows)
    return term / (n * (n - 3))


def hsic_unbiased(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased HSIC₁ of the linear kernels of the centred ``x`` and ``y`` (n, ...) (module docstring).

    Raises:
        InputError: different input counts, or see :func:`centred_features`.
    """
    a, b = gram(x), gram(y)
    if a.n != b.n:
        raise InputError(f"representations of different input counts: {a.n} and {b.n}")
    return _hsic(a, b)


def cka_from_grams(a: Gram, b: Gram) -> float:
    """Linear CKA (unbiased HSIC) of two prepared representations of the same inputs.

    Returns:
        CKA (≈ [0, 1]; the unbiased estimate can fall slightly below 0); NaN when either
        representation is constant (:attr:`Gram.constant`) or, rarely, when an unbiased self-HSIC
        estimate is not positive.

    Raises:
        InputError: different input counts.
    """
    if a.n != b.n:
        raise InputError(f"representations of different input counts: {a.n} and {b.n}")
    den = a.self_hsic * b.self_hsic
    if a.constant or b.constant or not den > 0:
        return float("nan")
    return float(_hsic(a, b) / np.sqrt(den))


def linear_cka(x: np.ndarray, y: np.ndarray, *, unbiased: bool = True) -> float:
    """Linear CKA of two representations ``x (n, p...)`` and ``y (n, q...)`` of the same ``n`` inputs.

    Args:
        x, y: activations, batch first; n >= 4; centred here.
        unbiased: HSIC₁ (default) or the paper's biased HSIC₀ (then equal to the feature-space form
            ``‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F)``).

    Returns:
        float CKA; NaN when a representation is constant.

    Raises:
        InputError: see :func:`centred_features`; different input counts.
    """
    if unbiased:
        return cka_from_grams(gram(x), gram(y))
    cx, cy = centred_features(x), centred_features(y)
    if cx.shape[0] != cy.shape[0]:
        raise InputError(f"representations of different input counts: {cx.shape[0]} and {cy.shape[0]}")
    k, l_ = cx @ cx.T, cy @ cy.T
    den = float(np.sqrt(np.sum(k * k) * np.sum(l_ * l_)))
    return float(np.sum(k * l_) / den) if den > 0 else float("nan")


def cka_map(a: Mapping[str, Gram], b: Mapping[str, Gram]) -> np.ndarray:
    """Layer × layer CKA map between two models.

    Args:
        a, b: ``{layer: Gram}`` in execution order (from :func:`gram` of each layer's activations on
            the same inputs).

    Returns:
        float64 (len(a), len(b)); entry (i, j) = CKA of layer i of ``a`` and layer j of ``b`` (NaN
        where :func:`cka_from_grams` is undefined).
    """
    ga, gb = list(a.values()), list(b.values())
    out = np.empty((len(ga), len(gb)), dtype=np.float64)
    for i, x in enumerate(ga):
        for j, y in enumerate(gb):
            out[i, j] = cka_from_grams(x, y)
    return out


def model_cka(m: np.ndarray, skip_a: Sequence[bool] | np.ndarray | None = None, skip_b: Sequence[bool] | np.ndarray | None = None) -> float:
    """One model-level score from a layer × layer CKA map: the mean over both models' layers of each
    layer's best match in the other model, ``(mean_i max_j m[i, j] + mean_j max_i m[i, j]) / 2``.

    1 for two models whose every layer has a perfectly aligned counterpart (identical or
    neuron-permuted copies).

    Args:
        m: (La, Lb) CKA map.
        skip_a, skip_b: (La,) / (Lb,) bool: layers left out (constant layers, whose CKA is undefined).

    Returns:
        The score; NaN when no layer is left, or when any entry between kept layers is NaN (a
        numerical failure is reported as undefined, never averaged away).
    """
    m = np.asarray(m, dtype=np.float64)
    if m.ndim != 2:
        return float("nan")
    keep_a = np.ones(m.shape[0], bool) if skip_a is None else ~np.asarray(skip_a, bool)
    keep_b = np.ones(m.shape[1], bool) if skip_b is None else ~np.asarray(skip_b, bool)
    sub = m[np.ix_(keep_a, keep_b)]
    if sub.size == 0 or not np.all(np.isfinite(sub)):
        return float("nan")
    return float((sub.max(axis=1).mean() + sub.max(axis=0).mean()) / 2.0)


def undefined_cells(
    m: np.ndarray, layers_a: list[str], layers_b: list[str], skip_a: Sequence[bool] | None = None, skip_b: Sequence[bool] | None = None
) -> list[str]:
    """``"layer_a × layer_b"`` of the non-finite entries of a CKA map between kept layers (for reports)."""
    m = np.asarray(m, dtype=np.float64)
    sa = np.zeros(len(layers_a), bool) if skip_a is None else np.asarray(skip_a, bool)
    sb = np.zeros(len(layers_b), bool) if skip_b is None else np.asarray(skip_b, bool)
    return [f"{layers_a[i]} × {layers_b[j]}" for i, j in zip(*np.nonzero(~np.isfinite(m))) if not sa[i] and not sb[j]]
