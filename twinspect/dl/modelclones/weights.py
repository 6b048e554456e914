"""Weight-level similarity of two models of the same architecture (Wu et al., ICPC 2020, §III-B), and
the hidden-layer kernels two models of any architectures share (:func:`shared_kernels`).

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

**BatchNorm folded by an export.** Exporters fold an inference-mode BatchNorm into the convolution or
dense layer before it (``torch.onnx.export``'s constant folding, ONNX Runtime's graph optimisation and
quantisers, the TFLite converter), so a model and its own export list different arrays (a tiny ResNet:
32 in torch, 14 in its ONNX export). When the arrays do not line up as they are, :func:`compare_weights`
folds every BatchNorm that follows a layer with a kernel of as many output channels
(:func:`fold_batchnorm`) — in one model, the other, or both — and compares the folded arrays:
``w' = w · γ/√(σ² + ε)`` per output channel and ``b' = (b − μ) · γ/√(σ² + ε) + β`` (``b`` = 0 when the
layer has no bias). This is the formula of PyTorch's ``torch.nn.utils.fusion.fuse_conv_bn_weights`` /
``fuse_linear_bn_weights`` and of ONNX Runtime's ``ConvBNFusion``; ε is the framework's default
(torch and ONNX 1e-5, Keras 1e-3), as the weights do not carry it. When the layers then match in shape
but in another order (an exporter may emit a residual block's shortcut before its main path), they are
paired by shape, in order among layers of one shape (only after folding: arrays that line up in shape
but not in order without it stay different architectures).

**Shared kernels across architectures.** A transfer-learned model keeps its source's backbone under a new
head, often for another number of classes; :func:`shared_kernels` finds the hidden kernels the two hold in
common element-wise, at any architecture (the ``weights_shared`` measure; with any shared kernel the reuse
score is 1, :func:`twinspect.dl.modelclones.reuse.with_shared_weights`). A structurally pruned copy, whose
whole channels were removed (``torch_pruning`` and the like), holds sub-blocks of its original's kernels; when
the two architectures differ, :func:`pruned_sub_kernels` aligns them layer by layer and they count as shared
too. It does not see a same-architecture copy whose hidden units were permuted (same function, weights in
another order); the I/O and representation levels do.
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
        folded: BatchNorm layers folded into the layer before them in model a and in model b (0, 0 when
            the arrays lined up as they are; see :func:`fold_batchnorm`).
        reordered: the layers were paired by shape, not in the order the models list them.
        n_weights: number of weights compared (the length of the flattened vector ``P``).
    """

    cosine: float
    euclidean: float
    layers: list[dict] = field(default_factory=list)
    folded: tuple[int, int] = (0, 0)
    reordered: bool = False
    n_weights: int = 0

    @property
    def euclidean_rms(self) -> float:
        """Euclidean distance normalised by the number of weights: ``‖a − b‖ / √P``, the root-mean-square
        difference per weight (in weight units), comparable across architectures of different sizes
        (the raw distance grows with √P). NaN when no weights were compared."""
        return self.euclidean / float(np.sqrt(self.n_weights)) if self.n_weights else float("nan")


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


#: BatchNorm parameter names per framework: (scale, shift, mean, variance, default ε). torch
#: ``BatchNorm*d`` state dict; Keras ``BatchNormalization`` (``gamma``/``beta`` absent when ``scale``/
#: ``center`` is off); ONNX ``BatchNormalization`` operands as the ONNX adapter names them.
BATCHNORM_NAMES: tuple[tuple[str, str, str, str, float], ...] = (
    ("weight", "bias", "running_mean", "running_var", 1e-5),
    ("gamma", "beta", "moving_mean", "moving_variance", 1e-3),
    ("scale", "bias", "mean", "var", 1e-5),
)


def _batchnorm(ps: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float] | None:
    """``(γ, β, μ, σ², ε)`` of a layer whose arrays are exactly one BatchNorm's (1-D, one length), else None."""
    for g, b, m, v, eps in BATCHNORM_NAMES:
        if m not in ps or v not in ps or not set(ps) <= {g, b, m, v}:
            continue
        arrs = [np.asarray(a, dtype=np.float64) for a in ps.values()]
        if any(a.ndim != 1 or a.shape != arrs[0].shape for a in arrs):
            return None
        n = arrs[0].shape[0]
        return (np.asarray(ps.get(g, np.ones(n)), np.float64), np.asarray(ps.get(b, np.zeros(n)), np.float64),
                np.asarray(ps[m], np.float64), np.asarray(ps[v], np.float64), eps)
    return None


def _kernel(ps: dict[str, np.ndarray]) -> tuple[str, str | None] | None:
    """``(kernel name, bias name or None)`` of a layer with one array of rank ≥ 2 and at most one 1-D array
    of its output channels; None for any other layer."""
    high = [k for k, a in ps.items() if np.ndim(a) >= 2]
    if len(high) != 1:
        return None
    k = high[0]
    rest = [n for n in ps if n != k]
    if len(rest) > 1 or (rest and np.shape(ps[rest[0]]) != (np.shape(ps[k])[0],)):
        return None
    return k, (rest[0] if rest else None)


def fold_batchnorm(w: Weights) -> tuple[Weights, int]:
    """Fold every BatchNorm layer into the layer with a kernel just before it, as exporters do.

    A BatchNorm layer (torch, Keras or ONNX names, :data:`BATCHNORM_NAMES`) directly after (in the weights'
    layer order) a layer with one kernel of rank ≥ 2 whose first axis — the output channels in the canonical
    PyTorch layout — has the BatchNorm's length is removed, and that layer's kernel and bias become
    ``w · γ/√(σ² + ε)`` (per output channel) and ``(b − μ) · γ/√(σ² + ε) + β`` (``b`` = 0 without a bias; the
    folded bias is called ``bias``): the formula of ``torch.nn.utils.fusion.fuse_conv_bn_weights``. Other
    BatchNorm layers (one after an activation's layer-free output, two in a row) are kept as they are.

    Args:
        w: canonical per-layer weights (``LoadedModel.canonical_weights()``), float arrays.

    Returns:
        ``(weights with the BatchNorms folded, number of BatchNorm layers folded)``; the input is not modified.
    """
    out: Weights = {}
    prev: str | None = None  # the last layer kept, when it has a kernel no BatchNorm was folded into yet
    kern: tuple[str, str | None] | None = None  # that layer's (kernel, bias) names
    folded = 0
    for layer, ps in w.items():
        bn = _batchnorm(ps)
        if bn is not None and prev is not None and kern is not None:
            gamma, beta, mean, var, eps = bn
            kname, bname = kern
            kernel = np.asarray(out[prev][kname], dtype=np.float64)
            if kernel.shape[0] == gamma.shape[0]:
                scale = gamma / np.sqrt(var + eps)
                bias = np.asarray(out[prev][bname], np.float64) if bname else np.zeros_like(scale)
                out[prev] = {kname: (kernel * scale.reshape((-1,) + (1,) * (kernel.ndim - 1))).astype(np.float32),
                             "bias": ((bias - mean) * scale + beta).astype(np.float32)}
                folded += 1
                prev = None
                continue
        out[layer] = dict(ps)
        kern = _kernel(ps)
        prev = layer if kern is not None else None
    return out, folded


def _by_shape(a: Weights, b: Weights) -> Weights | None:
    """``b``'s layers reordered to pair with ``a``'s by their arrays' shapes (in order among layers of one
    shape signature), or None when the two do not hold the same layer shapes."""
    def sig(ps: dict[str, np.ndarray]) -> tuple:
        return tuple(sorted(tuple(np.shape(x)) for x in ps.values()))

    free: dict[tuple, list[str]] = {}
    for name, ps in b.items():
        free.setdefault(sig(ps), []).append(name)
    out: Weights = {}
    for ps in a.values():
        names = free.get(sig(ps))
        if not names:
            return None
        n = names.pop(0)
        out[n] = b[n]
    return out if len(out) == len(b) else None


def _compare_lined_up(a: Weights, b: Weights) -> WeightComparison:
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
    return WeightComparison(_cos(va, vb), float(np.linalg.norm(va - vb)), layers, n_weights=int(va.size))


def compare_weights(a: Weights, b: Weights) -> WeightComparison:
    """Cosine similarity and Euclidean distance of two models' weights, per array and in total.

    The arrays are compared as they are when they line up (same layer names: paired by name, else in
    order). When they do not, BatchNorm layers are folded into the layer before them (:func:`fold_batchnorm`)
    in model b, model a, or both — the first of these that lines up, in order or, failing that, with the
    layers paired by shape (:func:`_by_shape`) — so that a model and its own export (ONNX, ONNX Runtime int8, TFLite), which
    fold BatchNorm, compare at the weights level.

    Args:
        a, b: canonical per-layer weights (``LoadedModel.canonical_weights()``); paired by layer name
            when both have the same names, else by order.

    Returns:
        A :class:`WeightComparison` (``folded`` and ``reordered`` say whether and how the arrays were
        lined up).

    Raises:
        DifferentArchitectures: different numbers of arrays or shapes, as they are and after folding
            (the first mismatch of the arrays as they are is named).
    """
    if list(a) != list(b) and set(a) == set(b):
        b = {k: b[k] for k in a}  # same layer names in another order: pair by name
    try:
        return _compare_lined_up(a, b)
    except DifferentArchitectures as exc:
        first = exc
    fa_, na = fold_batchnorm(a)
    fb_, nb = fold_batchnorm(b)
    tries = [(x, y, fx, fy) for x, y, fx, fy in ((a, fb_, 0, nb), (fa_, b, na, 0), (fa_, fb_, na, nb)) if fx or fy]
    for reorder in (False, True):
        for x, y, fx, fy in tries:
            if reorder:
                y2 = _by_shape(x, y)
                if y2 is None or list(y2) == list(y):
                    continue
                y = y2
            try:
                wc = _compare_lined_up(x, y)
            except DifferentArchitectures:
                continue
            wc.folded, wc.reordered = (fx, fy), reorder
            return wc
    raise first


#: Smallest kernel (weights in one array of rank ≥ 2) :func:`shared_kernels` looks at. Two unrelated
#: kernels of n weights have a Pearson correlation of about ±1/√n (±0.06 at 256), so a near-identical pair
#: of this size cannot arise by chance.
SHARED_MIN_WEIGHTS = 256
#: Pearson correlation at or above which two kernels count as the same weights: a copy kept frozen, a
#: dequantised int8 or float16 copy, or a lightly fine-tuned one (a float model and its ONNX Runtime
#: dynamic int8 copy: ≥ 0.9999 per kernel).
SHARED_MIN_CORRELATION = 0.99


@dataclass
class SharedKernels:
    """Hidden-layer kernels two models have in common (:func:`shared_kernels`).

    Attributes:
        matches: one dict per shared kernel, ``{"a": array name in model a, "b": in model b, "shape": [...] (in
            model a), "correlation": Pearson r}``, by descending correlation; a kernel matched as a sub-block
            (:func:`pruned_sub_kernels`) also has ``"shape_b"`` (its shape in model b) and ``"pruned"`` (``"a"`` or
            ``"b"``, the model that is the channel-pruned copy).
        share: weights in shared kernels ÷ hidden-kernel weights of the model that has fewer of them,
            in [0, 1] (0 when a model has no hidden kernel of :data:`SHARED_MIN_WEIGHTS` or more).
        hidden_a, hidden_b: hidden kernels of each model that were looked at (rank ≥ 2, at least
            :data:`SHARED_MIN_WEIGHTS` weights, not the model's last kernel).
        best: the highest correlation of any two same-shape hidden kernels, shared or not (None when no
            two have the same shape): how near an unshared pair came.
    """

    matches: list[dict] = field(default_factory=list)
    share: float = 0.0
    hidden_a: int = 0
    hidden_b: int = 0
    best: float | None = None


def _kernels(flat: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
    """The arrays of rank ≥ 2 of :func:`flat_arrays`' list, in its order."""
    return [(n, a) for n, a in flat if a.ndim >= 2]


def _hidden_kernels(kernels: list[tuple[str, np.ndarray]], min_weights: int) -> list[tuple[str, np.ndarray]]:
    """Of a model's kernels (:func:`_kernels`), those with at least ``min_weights`` weights and a non-zero spread,
    except the last one (the output layer), in the model's order."""
    return [(n, a) for n, a in kernels[:-1] if a.size >= min_weights and float(np.std(a)) > 0.0]


def _pearson_nonzero(a: np.ndarray, b: np.ndarray, min_weights: int) -> float | None:
    """Pearson correlation of two same-shape kernels over the positions where both are non-zero (a pruned
    copy's zeroed weights say nothing about the rest), or None when fewer than ``min_weights`` such
    positions remain or either side is constant there."""
    both = (a != 0) & (b != 0)
    if int(both.sum()) < min_weights:
        return None
    x, y = a[both], b[both]
    x, y = x - x.mean(), y - y.mean()
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0.0 or ny == 0.0:
        return None
    return min(1.0, float(np.dot(x, y) / (nx * ny)))


def shared_kernels(a: Weights, b: Weights, min_weights: int = SHARED_MIN_WEIGHTS,
                   min_correlation: float = SHARED_MIN_CORRELATION) -> SharedKernels:
    """The hidden-layer kernels two models share, at any architecture (transfer learning, a new head).

    Reuse by transfer learning keeps a backbone and replaces the head, often with another number of
    classes, so the two models have different architectures and :func:`compare_weights` does not apply.
    Their hidden kernels are still the same arrays. Independently trained networks never share one: the
    hidden units of a layer can be permuted without changing the function (Hecht-Nielsen, "On the
    algebraic structure of feedforward network weight spaces", 1990), so two trainings from different
    random initialisations end in unrelated element-wise weights (the reason model-merging work must
    first align units, e.g. Ainsworth et al., "Git Re-Basin", ICLR 2023). Two trainings from the *same*
    initialisation (one seed, one architecture) do keep correlated kernels, since weights a task never
    updates stay at their shared initial values: 0.79–0.95 for such pairs of
    ``benchmarks/results/models_reuse_transfer.md``, under the default floor. Kernels are therefore compared
    element-wise, each hidden kernel of ``a`` against every hidden kernel of ``b`` of the same shape, by
    the Pearson correlation over the positions where both are non-zero (so that a mask-pruned copy, whose
    zeroed weights carry no information, still matches on the weights it kept; at least ``min_weights``
    such positions), and paired one-to-one greedily by descending correlation while it reaches
    ``min_correlation``. The output layer (each model's last kernel) is left out: it has no
    permutation symmetry on its output side, and two linear models of one task can converge to the
    same weights. When the two architectures differ (:func:`architecture_signature`), the kernels
    :func:`pruned_sub_kernels` aligns as sub-blocks, in either direction, are matched as well (those of the
    hidden kernels looked at, not yet matched, at ``min_correlation`` or more): structurally pruned copies fine-tuned
    gently after the pruning keep 0.992–0.999 (``benchmarks/results/models_reuse_pruned.md``; copies fine-tuned at a
    high learning rate fall under the floor); ``share`` then counts the pruned model's kernel sizes.

    Args:
        a, b: canonical per-layer weights (``LoadedModel.canonical_weights()``, PyTorch layout).
        min_weights: smallest kernel looked at (see :data:`SHARED_MIN_WEIGHTS`).
        min_correlation: correlation from which two kernels count as shared.

    Returns:
        A :class:`SharedKernels`.

    Raises:
        ValueError: ``min_weights < 1`` or ``min_correlation`` not in (0, 1].
    """
    if min_weights < 1:
        raise ValueError(f"min_weights must be >= 1, got {min_weights}")
    if not 0.0 < min_correlation <= 1.0:
        raise ValueError(f"min_correlation must be in (0, 1], got {min_correlation}")
    flat_a, flat_b = flat_arrays(a), flat_arrays(b)
    kern_a, kern_b = _kernels(flat_a), _kernels(flat_b)
    ka, kb = _hidden_kernels(kern_a, min_weights), _hidden_kernels(kern_b, min_weights)
    scored = []
    best: float | None = None
    for i, (_, x) in enumerate(ka):
        for j, (_, y) in enumerate(kb):
            if x.shape == y.shape:
                r = _pearson_nonzero(x, y, min_weights)
                if r is not None:
                    best = r if best is None else max(best, r)
                    if r >= min_correlation:
                        scored.append((r, i, j))
    used_a: set[int] = set()
    used_b: set[int] = set()
    matches: list[dict] = []
    for r, i, j in sorted(scored, key=lambda t: (-t[0], t[1], t[2])):
        if i in used_a or j in used_b:
            continue
        used_a.add(i)
        used_b.add(j)
        matches.append({"a": ka[i][0], "b": kb[j][0], "shape": list(ka[i][1].shape), "correlation": r})
    # a physically pruned copy (whole channels cut out): its kernels are sub-blocks of the original's
    if [x.shape for _, x in flat_a] != [y.shape for _, y in flat_b]:  # different architectures
        names_a, names_b = [n for n, _ in ka], [n for n, _ in kb]
        for big, small, swap in ((kern_a, kern_b, False), (kern_b, kern_a, True)):
            for name_big, name_small, _, r in _sub_kernel_walk(big, small):
                na_, nb_ = (name_small, name_big) if swap else (name_big, name_small)
                if na_ not in names_a or nb_ not in names_b:  # a small or output kernel: not counted
                    continue
                best = r if best is None else max(best, r)
                i, j = names_a.index(na_), names_b.index(nb_)
                if r >= min_correlation and i not in used_a and j not in used_b:
                    used_a.add(i)
                    used_b.add(j)
                    matches.append({"a": na_, "b": nb_, "shape": list(ka[i][1].shape), "shape_b": list(kb[j][1].shape),
                                    "correlation": r, "pruned": "a" if swap else "b"})
        matches.sort(key=lambda m: -m["correlation"])
    total_a, total_b = sum(x.size for _, x in ka), sum(y.size for _, y in kb)
    # the shared weights counted on the side with fewer hidden-kernel weights (the pruned copy's sizes)
    shared_w = sum(ka[i][1].size for i in used_a) if total_a <= total_b else sum(kb[j][1].size for j in used_b)
    smaller = min(total_a, total_b)
    share = min(1.0, shared_w / smaller) if smaller else 0.0
    return SharedKernels(matches, float(share), len(ka), len(kb), best)


def _row_pearson(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pearson correlation of every row of ``y`` (m, d) with every row of ``x`` (n, d): (m, n) float64 (0 for a
    constant row)."""
    def z(v: np.ndarray) -> np.ndarray:
        v = v - v.mean(axis=1, keepdims=True)
        n = np.linalg.norm(v, axis=1, keepdims=True)
        return np.divide(v, n, out=np.zeros_like(v), where=n > 0)
    return z(y) @ z(x).T


def pruned_sub_kernels(big: Weights, small: Weights) -> list[tuple[str, str, list[int], float]]:
    """The kernels of ``small`` that are sub-blocks of ``big``'s: ``small`` as a structurally pruned copy of ``big``.

    Structured pruning that removes whole channels (Li et al., "Pruning Filters for Efficient ConvNets", ICLR
    2017; the physical removal ``torch_pruning`` performs, Fang et al., "DepGraph", CVPR 2023) keeps, for each
    layer, a subset of the original's output channels (rows of the kernel) and, from the layer before, the
    matching subset of its input channels (columns). Walking the two models' kernels (arrays of rank ≥ 2) in
    order, the columns a kernel of ``small`` keeps are the rows kept in the layer before (all of them when the
    input width is unchanged; for a dense layer after a flatten, whole blocks of ``height × width`` inputs per
    kept channel, in PyTorch's channel-first order or a channel-last one, whichever correlates better), and its
    rows are matched to ``big``'s rows over those columns by the assignment that maximises the summed row
    correlation (Hungarian method, ``scipy.optimize.linear_sum_assignment``). Each aligned kernel pair is then
    scored by the Pearson correlation of the aligned weights, over the positions where both are non-zero. A
    kernel whose columns cannot be aligned (the model is not a plain chain of layers, e.g. residual additions
    or concatenations whose pruning the walk does not follow) breaks the walk until a layer with an unchanged
    input width. Requires the two models to have the same number of kernels, each of ``small`` at most as wide
    as ``big``'s in both channel dimensions, with the same remaining dimensions; otherwise nothing is returned.

    Args:
        big: canonical per-layer weights of the presumed original (PyTorch layout).
        small: those of the presumed pruned copy.

    Returns:
        ``[(name in big, name in small, shape in big, Pearson r)]`` for every kernel the walk aligned (every
        layer, the small and output ones too; :func:`shared_kernels` counts the hidden ones it looks at), in
        layer order; empty when ``small`` is not shaped as a channel-pruned ``big``.
    """
    return _sub_kernel_walk(_kernels(flat_arrays(big)), _kernels(flat_arrays(small)))


def _sub_kernel_walk(kb_: list[tuple[str, np.ndarray]], ks_: list[tuple[str, np.ndarray]]
                     ) -> list[tuple[str, str, list[int], float]]:
    """:func:`pruned_sub_kernels` on the two models' kernels (:func:`_kernels`)."""
    from scipy.optimize import linear_sum_assignment

    if not kb_ or len(kb_) != len(ks_):
        return []
    for (_, x), (_, y) in zip(kb_, ks_):
        if x.ndim != y.ndim or x.shape[2:] != y.shape[2:] or y.shape[0] > x.shape[0] or y.shape[1] > x.shape[1]:
            return []
    out: list[tuple[str, str, list[int], float]] = []
    rows_prev: np.ndarray | None = None  # rows of big's previous kernel that small's kept, in small's order
    width_prev = 0  # big's previous kernel's row count
    for (nb, x), (ns, y) in zip(kb_, ks_):
        in_big, in_small = x.shape[1], y.shape[1]
        col_options: list[np.ndarray] = []
        if in_small == in_big:
            col_options.append(np.arange(in_big))
        elif rows_prev is not None and in_small == len(rows_prev):
            col_options.append(rows_prev)
        elif rows_prev is not None and width_prev and in_big % width_prev == 0 and in_small % len(rows_prev) == 0 \
                and in_small // len(rows_prev) == in_big // width_prev:
            block = in_big // width_prev  # a flatten of (channels, height, width) before a dense layer
            col_options.append((rows_prev[:, None] * block + np.arange(block)).ravel())  # channel-first
            col_options.append((np.arange(block)[:, None] * width_prev + rows_prev[None, :]).ravel())  # channel-last
        best_r, best_rows = None, None
        for cols in col_options:
            xs = x[:, cols]
            corr = _row_pearson(y.reshape(len(y), -1), xs.reshape(len(xs), -1))
            if y.shape[0] == x.shape[0] and np.allclose(corr.diagonal(), 1.0, atol=0.05):
                rows = np.arange(len(x))  # rows kept as they are (an unpruned layer)
            else:
                _, rows = linear_sum_assignment(-corr)
            r = _pearson_nonzero(xs[rows], y, 1)
            if r is not None and (best_r is None or r > best_r):
                best_r, best_rows = r, rows
        if best_r is None or best_rows is None:
            rows_prev, width_prev = None, 0
            continue
        out.append((nb, ns, list(x.shape), best_r))
        rows_prev, width_prev = np.asarray(best_rows), x.shape[0]
    return out
