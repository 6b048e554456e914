"""DeepJudge's black-box metrics (Chen, Wang, Peng, Sun, Cheng, Ji, Ma, Li & Song, "Copy, Right? A
Testing Framework for Copyright Protection of Deep Learning Models", IEEE S&P 2022), as its public
code (github.com/Testing4AI/DeepJudge: ``seed_selection.py``, ``blackbox_generation.py``,
``adversarial_attacks.py``, ``metrics.py``, ``blackbox_evaluation.py``) computes them.

DeepJudge tests a *suspect* model against a *victim* (the owner's model, white-box to its owner):

1. **Seed selection** (``seed_selection.py``): of the victim's test inputs, those it classifies
   correctly, ranked by the Gini impurity complement ``Σ_k p_k²`` of its output (most confident
   first, ``order='max'``); the first ``num`` (default 1,000) are the seeds.
2. **Black-box test cases** (``blackbox_generation.py``, ``adversarial_attacks.py``): adversarial
   examples of the seeds **generated on the victim** — FGSM, or PGD (the default): a uniform random
   start in [−ε, ε], then ``iters`` steps ``x ← clip(x + step·sign(∇ CE(y, f(x))), 0, 1)``
   (defaults ε = 0.1, 10 steps, step 0.03; the code clips to the pixel range but, unlike Madry's PGD,
   does not project back into the ε-ball). Only the *successful* ones (the victim's top-1 ≠ y) are
   kept, with their ground-truth labels ``y``.
3. **Metrics** (``metrics.py``, the paper's black-box metrics):

   * **RobD**, robustness distance: ``|Rob(victim) − Rob(suspect)|`` with ``Rob(m)`` the accuracy of
     ``m`` on the test cases against ``y``. The victim's Rob is 0 on its own successful adversarial
     examples, so RobD is the suspect's accuracy on them (``blackbox_evaluation.py`` reports exactly
     ``Rob(suspect)``). A copy inherits the victim's weaknesses: low RobD.
   * **JSD**: the mean over the test cases of the Jensen–Shannon divergence of the two models' output
     probability vectors, natural log (``scipy.stats.entropy``), so in [0, ln 2]. Low for a copy.

   Both are distances: lower means more similar.
4. **Judging** (the paper's judging mechanism; ``judge.py`` in the public code is a stub naming
   ``calThreshold(contrast_models, metric_func, tests, confidence=0.99)`` and
   ``Judge(..., rule='major')``): each metric's threshold is set on *negative* suspect models (trained
   independently of the victim) as the lower bound of their metric values at confidence 0.99
   (:func:`threshold`: mean − z₀.₉₉·std of the negatives' values, a normal fit — our reading of
   the paper's lower bound, not checked against a reference implementation; the empirical 1 %
   quantile is the alternative without the normal assumption); a metric votes
   *copy* when the suspect's value is below its threshold; the suspect is judged a copy by majority
   vote (:func:`judge`: more than half of the metrics vote copy — with the two black-box metrics,
   both).

Difference from the code, deliberate: without the data set's labels at hand (``twinspect models
compare`` takes unlabelled inputs), ``y`` is the victim's top-1 label, so step 1 cannot drop the
victim's misclassified inputs; on the confident seeds it ranks first these are few.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.adapters.differentiable import LogitFn
from twinspect.errors import InputError

#: ``seed_selection.py --num`` default.
N_SEEDS = 1000
#: ``blackbox_generation.py`` defaults: ``--ep 0.1 --iters 10``; ``PGD(step=0.03)``.
EPS = 0.1
STEP = 0.03
ITERS = 10
#: ``calThreshold(..., confidence=0.99)``.
CONFIDENCE = 0.99


@dataclass
class TestCases:
    """DeepJudge's black-box test cases, generated on one victim model.

    Attributes:
        x: (M, H, W, C) float32 successful adversarial examples, 0–255 pixel scale (M may be 0).
        y: (M,) int64 their labels (the victim's label of the seed).
        victim_probs: (M, K) float64 the victim's class probabilities on ``x``.
        seeds: number of seeds the attack started from.
        method: ``"pgd"`` or ``"fgsm"``.
    """

    __test__ = False  # not a pytest class

    x: np.ndarray
    y: np.ndarray
    victim_probs: np.ndarray
    seeds: int
    method: str


def select_seeds(probs: np.ndarray, num: int = N_SEEDS, labels: np.ndarray | None = None) -> np.ndarray:
    """Indices of DeepJudge's seeds: correctly classified inputs, most confident (largest ``Σ p²``) first.

    Args:
        probs: (N, K) the victim's class probabilities on the candidate inputs.
        num: number of seeds.
        labels: (N,) ground-truth labels, or None to take the victim's top-1 (keeps every input).

    Returns:
        (min(num, #correct),) int64 indices into the candidates, in rank order.
    """
    p = np.asarray(probs, dtype=np.float64)
    pred = p.argmax(1)
    ok = np.flatnonzero(pred == (pred if labels is None else np.asarray(labels)))
    gini = np.sum(np.square(p[ok]), axis=1)
    return ok[np.argsort(-gini, kind="stable")[: int(num)]]


def generate(clf: Classifier, f: LogitFn, x: np.ndarray, num: int = N_SEEDS, *, method: str = "pgd", eps: float = EPS,
             step: float = STEP, iters: int = ITERS, seed: int = 0, labels: np.ndarray | None = None,
             batch: int = 256) -> TestCases:
    """DeepJudge's black-box test cases on the victim ``clf``: seed selection, then FGSM/PGD.

    Args:
        clf: the victim model.
        f: its differentiable forward pass (:func:`twinspect.dl.adapters.differentiable.logit_fn`).
        x: (N, H, W, C) candidate inputs, 0–255 pixel scale.
        num: number of seeds.
        method: ``"pgd"`` (default of ``blackbox_generation.py``) or ``"fgsm"`` (one step of size ``eps``).
        eps: perturbation bound (random start, and FGSM's step), unit pixel scale [0, 1].
        step: PGD step, unit pixel scale.
        iters: PGD iterations.
        seed: seeds the random start.
        labels: ground-truth labels of ``x`` (default: the victim's top-1).
        batch: inputs per gradient batch.

    Returns:
        :class:`TestCases` (only the adversarial examples that changed the victim's top-1).

    Raises:
        InputError: unknown ``method``, non-positive ``eps``/``step``/``iters``/``num``, or ``x`` not a
            non-empty (N, H, W, C) batch.
    """
    import torch

    if method not in ("pgd", "fgsm"):
        raise InputError(f"unknown DeepJudge attack {method!r}; choose pgd or fgsm")
    if not (eps > 0 and step > 0 and iters >= 1 and num >= 1):
        raise InputError(f"DeepJudge's attack needs eps, step, iters and num positive, got {eps}, {step}, {iters}, {num}")
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 4 or len(x) == 0:
        raise InputError(f"DeepJudge needs a non-empty batch of shape (N, H, W, C), got shape {x.shape}")
    probs = clf.predict_proba(x)
    idx = select_seeds(probs, num, labels)
    seeds, y = x[idx], probs[idx].argmax(1).astype(np.int64)
    gen = torch.Generator().manual_seed(int(seed))
    advs = []
    for s in range(0, len(seeds), batch):
        xb = torch.from_numpy(seeds[s : s + batch] / 255.0)
        yb = torch.from_numpy(y[s : s + batch])
        xa = (xb + (torch.rand(xb.shape, generator=gen) * 2 - 1) * eps).clamp(0.0, 1.0)
        n_steps, size = (1, eps) if method == "fgsm" else (int(iters), step)
        for _ in range(n_steps):
            xa.requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(f(xa), yb, reduction="sum")
            (g,) = torch.autograd.grad(loss, xa)
            with torch.no_grad():
                xa = (xa + size * g.sign()).clamp(0.0, 1.0)
        advs.append((xa.detach() * 255.0).numpy().astype(np.float32))
    adv = np.concatenate(advs) if advs else np.zeros((0, *x.shape[1:]), np.float32)
    vp = clf.predict_proba(adv) if len(adv) else np.zeros((0, probs.shape[1]))
    ok = vp.argmax(1) != y
    return TestCases(adv[ok], y[ok], vp[ok], len(seeds), method)


def rob(probs: np.ndarray, y: np.ndarray) -> float:
    """Rob: accuracy (in [0, 1]) of a model's probabilities (M, K) on labels (M,); NaN when M = 0."""
    p = np.asarray(probs)
    return float(np.mean(p.argmax(1) == np.asarray(y))) if len(p) else float("nan")


def jsd(pa: np.ndarray, pb: np.ndarray) -> float:
    """DeepJudge's JSD: mean over rows of the Jensen–Shannon divergence (natural log, in [0, ln 2]) of
    two (M, K) probability matrices; NaN when M = 0.

    Raises:
        InputError: the shapes differ.
    """
    from twinspect.dl.modelclones.outputs import js_divergence_rows

    a, b = np.asarray(pa, dtype=np.float64), np.asarray(pb, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise InputError(f"JSD needs two (M, K) probability matrices of one shape, got {a.shape} and {b.shape}")
    if len(a) == 0:
        return float("nan")
    # the one row-wise JSD of the package (base 2, rounding below 0 clipped), in nats as DeepJudge's
    return float(np.mean(js_divergence_rows(a, b)) * np.log(2.0))


def metrics(cases: TestCases, suspect: Classifier) -> dict[str, float]:
    """RobD and JSD of ``suspect`` against the victim the test cases were generated on.

    Returns:
        ``{"robd": float in [0, 1], "jsd": float in [0, ln 2]}`` (NaN when there is no test case).
    """
    if len(cases.x) == 0:
        return {"robd": float("nan"), "jsd": float("nan")}
    sp = suspect.predict_proba(cases.x)
    return {"robd": abs(rob(cases.victim_probs, cases.y) - rob(sp, cases.y)), "jsd": jsd(sp, cases.victim_probs)}


def threshold(negative_values: Sequence[float], confidence: float = CONFIDENCE, method: str = "normal") -> float:
    """A metric's threshold from its values on negative (independent) suspect models: their lower bound
    at ``confidence``.

    Args:
        negative_values: the metric (a distance) on each negative model; None/NaN are left out.
        confidence: the share of negatives meant to lie above the threshold.
        method: ``"normal"`` — ``mean − z_confidence · std`` (sample std) of a normal fitted to the
            values, the reading of the paper's lower bound used by default; ``"quantile"`` — the
            empirical ``1 − confidence`` quantile of the values (no normal assumption: with skewed
            values the normal bound can fall below every possible distance).

    Raises:
        InputError: fewer than 2 finite values, ``confidence`` outside (0.5, 1), unknown ``method``.
    """
    from scipy.stats import norm

    v = np.asarray([float(x) for x in negative_values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) < 2:
        raise InputError(f"a DeepJudge threshold needs at least 2 negative models' values, got {len(v)}")
    if not 0.5 < confidence < 1.0:
        raise InputError(f"confidence must be in (0.5, 1), got {confidence}")
    if method == "quantile":
        return float(np.quantile(v, 1.0 - confidence))
    if method != "normal":
        raise InputError(f"unknown threshold method {method!r}; choose normal or quantile")
    return float(v.mean() - norm.ppf(confidence) * v.std(ddof=1))


def judge(values: Mapping[str, float | None], thresholds: Mapping[str, float]) -> bool | None:
    """DeepJudge's majority vote: a copy when more than half of the metrics (distances) with a value
    are below their thresholds; None when no metric has a value."""
    votes = [float(v) < thresholds[k] for k, v in values.items() if k in thresholds and v is not None and np.isfinite(v)]
    if not votes:
        return None
    return sum(votes) * 2 > len(votes)


__all__ = ["CONFIDENCE", "EPS", "ITERS", "N_SEEDS", "STEP", "TestCases", "generate", "jsd", "judge", "metrics", "rob",
           "select_seeds", "threshold"]
