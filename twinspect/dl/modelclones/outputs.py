"""I/O-semantic similarity of two classifiers on the same inputs (Wu et al., ICPC 2020, §III-C).

* **JSD of the predicted-label distributions**: each model's histogram of top-1 labels over the ``K``
  classes, compared with the Jensen–Shannon divergence (base 2, so in [0, 1]; 0 = same distribution).
  This is the paper's measure: it ignores *which* inputs get which label.
* **Mean per-input JSD**: the JSD of the two probability vectors of every input, averaged — 0 only when
  the models answer every input alike (the paper's measure cannot see two models that swap labels).
* **Jaccard of per-class prediction sets**: for each class c, ``|A_c ∩ B_c| / |A_c ∪ B_c|`` with
  ``A_c`` the inputs model A labels c; averaged over the classes either model predicts.
* **Top-1 agreement**: the fraction of inputs with the same top-1 label.
* **Log-probability cosine** (twinspect's): the mean over inputs of the cosine similarity of the two
  *centred log-probability* vectors (the logits up to a per-input constant). Probabilities, and so
  both JSDs, are dominated by the top class; the log-probabilities keep how a model ranks and spaces
  the *other* classes — Hinton et al.'s "dark knowledge", which distillation transfers to a student
  and which independently trained models share much less (``benchmarks/models_reuse.py``).

The JSD is computed from :func:`scipy.special.rel_entr` as ``(KL(p‖m) + KL(q‖m)) / 2`` with
``m = (p + q) / 2``, in bits, clipped to [0, 1]: rounding can make the divergence of two almost equal
vectors a tiny negative number, which :func:`scipy.spatial.distance.jensenshannon` (the square root of
it) turns into NaN — rows of near-identical outputs were then dropped from the mean.
"""

from __future__ import annotations

import numpy as np
from scipy.special import rel_entr

from twinspect.errors import InputError


def _check(pa: np.ndarray, pb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pa, pb = np.asarray(pa, dtype=np.float64), np.asarray(pb, dtype=np.float64)
    if pa.ndim != 2 or pa.shape != pb.shape:
        raise InputError(f"probability matrices must have the same (N, K) shape, got {pa.shape} and {pb.shape}")
    return pa, pb


def js_divergence_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence (base 2) of each row pair of two (N, K) non-negative arrays.

    Args:
        p, q: (N, K) float arrays; each row is normalised to sum 1 here.

    Returns:
        float64 (N,) in [0, 1] (rounding below 0 clipped to 0); NaN for a row with zero mass or NaN.
    """
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = p / p.sum(axis=-1, keepdims=True)
        q = q / q.sum(axis=-1, keepdims=True)
        m = (p + q) / 2.0
        d = (rel_entr(p, m).sum(axis=-1) + rel_entr(q, m).sum(axis=-1)) / (2.0 * np.log(2.0))
    return np.where(np.isfinite(d), np.clip(d, 0.0, 1.0), np.nan)


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon divergence (base 2, in [0, 1]) of two discrete distributions (normalised here)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.sum() <= 0 or q.sum() <= 0:
        raise InputError("a distribution with zero mass has no JSD")
    return float(js_divergence_rows(p[None], q[None])[0])


def label_distribution(labels: np.ndarray, k: int) -> np.ndarray:
    """Histogram (K,) float64 of top-1 labels, normalised to sum 1."""
    h = np.bincount(np.asarray(labels, dtype=np.int64), minlength=k)[:k].astype(np.float64)
    return h / max(h.sum(), 1.0)


def label_jsd(pa: np.ndarray, pb: np.ndarray) -> float:
    """JSD of the two models' predicted-label distributions on the same inputs (the paper's measure).

    Args:
        pa, pb: (N, K) probability matrices.
    """
    pa, pb = _check(pa, pb)
    k = pa.shape[1]
    return jsd(label_distribution(pa.argmax(1), k), label_distribution(pb.argmax(1), k))


def mean_input_jsd(pa: np.ndarray, pb: np.ndarray) -> float:
    """Mean over inputs of the JSD (base 2) of the two probability vectors; rows with NaN are skipped
    (NaN when every row has one)."""
    pa, pb = _check(pa, pb)
    ok = np.all(np.isfinite(pa), 1) & np.all(np.isfinite(pb), 1)
    if not ok.any():
        return float("nan")
    return float(np.mean(js_divergence_rows(pa[ok], pb[ok])))


def class_jaccard(pa: np.ndarray, pb: np.ndarray) -> float:
    """Mean over classes of the Jaccard similarity of the sets of inputs each model assigns to the class
    (classes neither model predicts are left out; 1.0 when both predict nothing, which cannot happen
    for N >= 1)."""
    pa, pb = _check(pa, pb)
    la, lb = pa.argmax(1), pb.argmax(1)
    scores = []
    for c in range(pa.shape[1]):
        a, b = la == c, lb == c
        union = int(np.sum(a | b))
        if union:
            scores.append(np.sum(a & b) / union)
    return float(np.mean(scores)) if scores else 1.0


def logprob_cosine(pa: np.ndarray, pb: np.ndarray, floor: float = 1e-9) -> float:
    """Mean over inputs of the cosine similarity of the centred log-probability vectors.

    Args:
        pa, pb: (N, K) probability matrices; probabilities are clipped to ``floor`` before the log
            (a quantised or saturated softmax outputs exact zeros).

    Returns:
        A value in [−1, 1]; 1 when the two models' log-probabilities differ by a per-input constant
        (identical models, or logits shifted by a constant); rows with NaN or a constant
        log-probability vector are skipped (NaN when all are).
    """
    pa, pb = _check(pa, pb)
    la = np.log(np.clip(pa, floor, 1.0))
    lb = np.log(np.clip(pb, floor, 1.0))
    la -= la.mean(1, keepdims=True)
    lb -= lb.mean(1, keepdims=True)
    na, nb = np.linalg.norm(la, axis=1), np.linalg.norm(lb, axis=1)
    ok = np.isfinite(na) & np.isfinite(nb) & (na > 0) & (nb > 0)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.sum(la[ok] * lb[ok], axis=1) / (na[ok] * nb[ok])))


def top1_agreement(pa: np.ndarray, pb: np.ndarray) -> float:
    """Fraction of inputs on which the two models' top-1 labels agree."""
    pa, pb = _check(pa, pb)
    return float(np.mean(pa.argmax(1) == pb.argmax(1)))
