"""ModelDiff (Li, Zhang, Liu, Yang & Liu, "ModelDiff: Testing-Based DNN Similarity Comparison for Model
Reuse Detection", ISSTA 2021), as its paper and public artifact (github.com/ylimit/ModelDiff,
``compare.py``/``modeldiff.py`` of the ISSTA artifact commit) run it.

A model's behaviour is its **decision distance vector** (DDV; the paper's approach section) on ``n`` input pairs
``(x_i, x'_i)``: ``DDV_i = cosine_distance(f(x_i), f(x'_i))``; two models are similar when their DDVs
point the same way: ``similarity = 1 − cosine_distance(DDV_f, DDV_g)``.

The input pairs are ModelDiff's own (the paper's test input generation; the artifact's default
``profiling_mode=hybrid``): ``n`` seed inputs ``x_i`` (the artifact draws 50 from the source model's
data), and for each a perturbed ``x'_i`` found by projected gradient ascent **on the source model**
(L∞ PGD with a random start, ε = 0.1, step 0.01, 40 steps in the artifact) so that ``x'_i`` stays close
to ``x_i`` while the source model's output on it moves far away — pairs near the source model's
decision boundary, where a model that inherited the source's knowledge reacts like the source and an
independent one does not. ModelDiff needs gradients of the source model only; the suspect is
queried as a black box.

Differences from the artifact, all deliberate:

* The artifact's PGD runs in ImageNet-normalised input space with the loss
  ``−((y₀ − 1000)² + 0.1·mean((y_{1:})²))`` of advertorch's *targeted* mode (whose sign flip makes it an
  ascent on the distance of the logits from the fixed vector (1000, 0, …, 0)). Here the ascent is on
  what the paper states as the goal of its input generation, the squared distance of the source model's logits on ``x'`` from its
  logits on ``x``, with ε, step and steps applied in the unit pixel scale [0, 1] (the scale of these
  models' inputs).
* DDV entries are cosine distances of **class probabilities** (the artifact uses the raw outputs of
  its torch models, logits): a suspect in a format that answers probabilities (ONNX, TFLite, Keras)
  is then compared on the same footing as a torch one.
* Seeds are the comparison inputs of ``twinspect models compare`` (test images), drawn seeded.

Decision rule (the paper's evaluation, its "correctness" on 144 model pairs; ``compare.py`` of the
artifact logs it per source model): ModelDiff sets no threshold; a reuse pair (source, reused) counts
as correctly detected when its similarity is higher than the similarity of the source model with
every unrelated model of the benchmark. :func:`ranking_correct` implements that count.

:func:`profiling_pairs` is *not* ModelDiff's input generation: it pairs the comparison inputs at
random, for the ``io_ddv_random_pairs`` measure (a DDV without the search, one of the reuse score's
features).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cosine

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.adapters.differentiable import LogitFn
from twinspect.errors import InputError

#: The ISSTA artifact's defaults (``compare.py``: ``seed_batch_size=50``; ``gen_adv_inputs``:
#: ``eps=0.1, nb_iter=40, eps_iter=0.01, rand_init=True``).
N_PAIRS = 50
EPS = 0.1
STEP = 0.01
STEPS = 40


@dataclass
class ProfilingInputs:
    """ModelDiff's input pairs, generated on one source model.

    Attributes:
        seeds: (n, H, W, C) float32, the ``x_i``, 0–255 pixel scale.
        perturbed: (n, H, W, C) float32, the ``x'_i``, 0–255 pixel scale, ``|x'_i − x_i|∞ ≤ 255·eps``.
        source_ddv: (n,) float64, the source model's DDV on the pairs.
    """

    seeds: np.ndarray
    perturbed: np.ndarray
    source_ddv: np.ndarray


def search_pairs(clf: Classifier, f: LogitFn, x: np.ndarray, n_pairs: int = N_PAIRS, *, eps: float = EPS,
                 step: float = STEP, steps: int = STEPS, seed: int = 0, batch: int = 256) -> ProfilingInputs:
    """ModelDiff's input pairs on the source model ``clf``: seeds and their PGD-perturbed partners.

    Args:
        clf: the source model (queried for the DDV).
        f: its differentiable forward pass (:func:`twinspect.dl.adapters.differentiable.logit_fn`).
        x: (N, H, W, C) candidate seed inputs, 0–255 pixel scale; ``min(n_pairs, N)`` are drawn, seeded.
        n_pairs: number of input pairs.
        eps: L∞ bound of the perturbation, unit pixel scale ([0, 1]).
        step: ascent step (sign of the gradient), unit pixel scale.
        steps: PGD iterations.
        seed: seeds the draw of the seeds and the random start.
        batch: inputs per gradient batch.

    Returns:
        :class:`ProfilingInputs`.

    Raises:
        InputError: fewer than 2 candidate inputs, ``n_pairs`` < 2, or ``eps``/``step`` not positive.
    """
    import torch

    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 4 or len(x) < 2:
        raise InputError(f"ModelDiff needs at least 2 seed inputs of shape (N, H, W, C), got shape {x.shape}")
    if int(n_pairs) < 2:
        raise InputError(f"ModelDiff needs at least 2 input pairs, got {n_pairs}")
    if not (eps > 0 and step > 0 and steps >= 1):
        raise InputError(f"ModelDiff's search needs eps > 0, step > 0 and steps >= 1, got {eps}, {step}, {steps}")
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(x), min(int(n_pairs), len(x)), replace=False))
    seeds = x[idx]
    gen = torch.Generator().manual_seed(int(seed))
    out = []
    for s in range(0, len(seeds), batch):
        x0 = torch.from_numpy(seeds[s : s + batch] / 255.0)
        with torch.no_grad():
            y0 = f(x0)
        delta = (torch.rand(x0.shape, generator=gen) * 2 - 1) * eps  # advertorch's rand_init: uniform in the ε-ball
        delta = (x0 + delta).clamp(0.0, 1.0) - x0
        for _ in range(int(steps)):
            delta.requires_grad_(True)
            loss = ((f(x0 + delta) - y0) ** 2).sum()
            (g,) = torch.autograd.grad(loss, delta)
            with torch.no_grad():
                delta = (delta + step * g.sign()).clamp(-eps, eps)
                delta = (x0 + delta).clamp(0.0, 1.0) - x0
        out.append(((x0 + delta.detach()) * 255.0).numpy().astype(np.float32))
    perturbed = np.concatenate(out)
    return ProfilingInputs(seeds, perturbed, pair_ddv(clf, seeds, perturbed))


def pair_ddv(clf: Classifier, seeds: np.ndarray, perturbed: np.ndarray) -> np.ndarray:
    """A model's DDV on input pairs: (n,) float64 cosine distances of its class probabilities on
    ``seeds[i]`` and ``perturbed[i]`` (0–255 pixel scale, same shape)."""
    both = clf.predict_proba(np.concatenate([seeds, perturbed]))
    n = len(seeds)
    return ddv(both, np.arange(n), np.arange(n, 2 * n))


def similarity(source: ProfilingInputs, suspect: Classifier) -> float:
    """ModelDiff's similarity of ``suspect`` to the source model the pairs were generated on.

    Returns:
        ``1 − cosine_distance(DDV_source, DDV_suspect)``, in [0, 1] for the non-negative DDVs here.
    """
    return ddv_similarity(source.source_ddv, pair_ddv(suspect, source.seeds, source.perturbed))


def ranking_correct(reuse_score: float, unrelated_scores: Sequence[float]) -> bool | None:
    """ModelDiff's correctness of one reuse pair (its evaluation's rule): its similarity is above that of the source
    with every unrelated model (None when there is no unrelated score to compare with)."""
    vals = [float(s) for s in unrelated_scores if s is not None and np.isfinite(s)]
    if not vals or reuse_score is None or not np.isfinite(reuse_score):
        return None
    return bool(float(reuse_score) > max(vals))


def profiling_pairs(n_inputs: int, n_pairs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(left, right)`` of ``min(n_pairs, n_inputs // 2)`` disjoint *random* input pairs,
    seeded (the ``io_ddv_random_pairs`` measure; not ModelDiff's search, see :func:`search_pairs`).

    Raises:
        InputError: fewer than 4 inputs.
    """
    if n_inputs < 4:
        raise InputError(f"a DDV needs at least 4 inputs, got {n_inputs}")
    m = min(int(n_pairs), n_inputs // 2)
    order = np.random.default_rng(seed).permutation(n_inputs)[: 2 * m]
    return order[:m], order[m:]


def ddv(outputs: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Decision distance vector (n_pairs,) float64: cosine distance of the output rows of each pair
    (0 for a pair with an all-zero row).

    Args:
        outputs: (N, K) model outputs (probabilities) on all inputs.
        left, right: (n_pairs,) int row indices of the two members of each pair.
    """
    out = np.asarray(outputs, dtype=np.float64)
    a, b = out[left], out[right]
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = 1.0 - np.sum(a * b, axis=1) / (na * nb)
    return np.nan_to_num(d, nan=0.0)


def ddv_similarity(ddv_a: np.ndarray, ddv_b: np.ndarray) -> float:
    """``1 − cosine_distance`` of two DDVs (1 = same behaviour pattern); 1.0 when both are all zeros,
    0.0 when exactly one is.

    Raises:
        InputError: the two DDVs have different lengths.
    """
    a, b = np.asarray(ddv_a, dtype=np.float64), np.asarray(ddv_b, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"DDVs of different lengths {a.shape} and {b.shape}")
    za, zb = not np.any(a), not np.any(b)
    if za and zb:
        return 1.0
    if za or zb:
        return 0.0
    return float(1.0 - cosine(a, b))


__all__ = ["EPS", "N_PAIRS", "STEP", "STEPS", "ProfilingInputs", "ddv", "ddv_similarity", "pair_ddv", "profiling_pairs",
           "ranking_correct", "search_pairs", "similarity"]
