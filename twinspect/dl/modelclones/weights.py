"""Weight-level similarity of two models of the same architecture (Wu et al., ICPC 2020, §III-B).

Wu, Qin, Yu, Xie, Ma, Xue, Liu & Zhao, "How are Deep Learning Models Similar? An Empirical Study on Clone
Analysis of Deep Learning Software" (ICPC 2020) compare models of one architecture by the cosine
similarity and the Euclidean distance of their weights. Here both are computed per layer and over
all weights at once, on the arrays of
:meth:`~twinspect.dl.adapters.loaded.LoadedModel.canonical_weights` (dequantised, pruned zeros kept,
PyTorch layout), so a Keras model and its TFLite int8 conversion line up array for array.

Two models have the same architecture when their canonical weight arrays have the same shapes in
the same order (names may differ between formats). When both list the same layer names (a model and
its quantised or float16 copy in one format), the layers are paired by name instead: a quantiser may
emit parallel branches (a ResNet shortcut and its main path) in another valid order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from twinspect.dl.adapters.loaded import Weights


class DifferentArchitectures(ValueError):
    """The two weight lists do not have the same shapes in the same order (the message says where)."""


@dataclass
class WeightComparison:
    """Weight similarity of two models.

    Attributes:
        cosine: cosine similarity of all weights as one vector (1 = identical direction).
        euclidean: Euclidean distance of all weights (0 = identical), in weight units.
        layers: per array: ``{"a": name in model a, "b": name in model b, "shape", "cosine", "euclidean"}``.
    """

    cosine: float
    euclidean: float
    layers: list[dict] = field(default_factory=list)


def flat_arrays(w: Weights) -> list[tuple[str, np.ndarray]]:
    """``[("layer/param", array)]`` in layer order; within a layer, higher-rank arrays first (kernel before
    bias), otherwise in the model's order — pruning in PyTorch re-registers ``weight`` after ``bias``,
    and frameworks list a layer's arrays in different orders."""
    out: list[tuple[str, np.ndarray]] = []
    for layer, ps in w.items():
        items = sorted(ps.items(), key=lambda kv: -np.ndim(kv[1]))  # stable
        out.extend((f"{layer}/{p}", np.asarray(a, dtype=np.float64)) for p, a in items)
    return out


def architecture_signature(w: Weights) -> tuple[tuple[int, ...], ...]:
    """The shapes of the weight arrays in order (what "same architecture" compares)."""
    return tuple(tuple(int(s) for s in a.shape) for _, a in flat_arrays(w))


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def compare_weights(a: Weights, b: Weights) -> WeightComparison:
    """Cosine similarity and Euclidean distance of two models' weights, per array and in total.

    Args:
        a, b: canonical per-layer weights (``LoadedModel.canonical_weights()``); paired by layer name
            when both have the same names, else by order.

    Returns:
        A :class:`WeightComparison`.

    Raises:
        DifferentArchitectures: different numbers of arrays or shapes (the first mismatch is named).
    """
    if list(a) != list(b) and set(a) == set(b):
        b = {k: b[k] for k in a}  # same layer names in another order: pair by name
    fa, fb = flat_arrays(a), flat_arrays(b)
    if not fa or not fb:
        raise DifferentArchitectures("a model has no weights")
    if len(fa) != len(fb):
        raise DifferentArchitectures(f"different numbers of weight arrays ({len(fa)} and {len(fb)})")
    layers = []
    for (na, wa), (nb, wb) in zip(fa, fb):
        if wa.shape != wb.shape:
            raise DifferentArchitectures(f"weight {na} has shape {wa.shape}, its counterpart {nb} {wb.shape}")
        va, vb = wa.ravel(), wb.ravel()
        layers.append({"a": na, "b": nb, "shape": list(wa.shape), "cosine": _cos(va, vb), "euclidean": float(np.linalg.norm(va - vb))})
    va = np.concatenate([w.ravel() for _, w in fa])
    vb = np.concatenate([w.ravel() for _, w in fb])
    return WeightComparison(_cos(va, vb), float(np.linalg.norm(va - vb)), layers)
