"""Margin search: the black-box deviated-behaviour search, close to the seed and aimed at compressed-model errors.

It is the default (``-a auto``) when the original model gives no input gradient; with one, the default
is :mod:`.guided`, which starts this search's loop from the original's decision boundary.

DFlare's walk (:mod:`.dflare`) keeps almost every mutant, so its triggers drift far from their seed
(median L∞ above 240 levels on the shared MNIST pairs) and in most of them the *original* model has
changed its mind too. This search asks a narrower question — where near the seed does the
compressed model g leave the seed's label while the original model f keeps it? — and answers it as
a score-based black-box attack on g's margin, constrained by f:

* the seed's label is ``c = argmax f(seed)``; the objective is g's probability margin
  ``m_g(x) = g(x)[c] − max_{j≠c} g(x)[j]`` less ``orig_weight`` (λ, 0.5) times f's, ``m_g − λ·m_f``
  (lower is better): among changes toward g's boundary, those that leave f surer are preferred;
* a candidate changes one random square window of the current *difference to the seed* to ``±ε``
  per channel (Square Attack's update: Andriushchenko, Croce, Flammarion, Hein, "Square Attack: a
  query-efficient black-box adversarial attack via random search", ECCV 2020), so every candidate
  stays in the L∞ ball of radius ε around the seed; the window covers ``window`` of the image at
  first and halves after 50, 150, 350, … queries (Square Attack's schedule, simplified);
  optionally (``texture`` < 1) the change is scaled by the seed's local σ, so flat regions stay flat;
* a candidate is kept only when f still gives ``c`` and g's margin falls (then the lower objective
  wins), or, on a plateau of g's margin (a saturated or coarsely quantised output), f's margin falls
  (greedy acceptance);
* adaptive strength, per seed: ε starts at ``eps`` (32 levels); every ``stall`` queries the trend of
  the mean of both margins is read. When some step since the last look took both models across,
  the boundary is reached: ε does not grow, and shrinks ×0.7 (down to ε/4) if the mean did not fall.
  Otherwise, when at its rate the mean would not reach 0 within ``horizon`` queries, ε grows ×1.5
  (×2 when it did not fall at all), up to 255;
* boundary refinement: a close twin's decision boundaries nearly coincide with its original's, and
  the band where only g has changed is thin, so a step usually takes both models across at once;
  such a step is bisected (``refine_steps``) for the point where g has left ``c`` and f has not —
  a compressed-model error — and abandoned as soon as f is seen crossing first;
* the search stops at the first input whose two top-1 labels differ. With the seed's true label
  known and f right on the seed, a trigger in which f, not g, changed its label is kept aside and
  the search goes on for a compressed-model error: as many queries as the first trigger cost (at
  least 25, at most ``patience``), returning the one kept aside if none comes.

Query accounting as in DFlare: one query is one candidate sent to both models (refinement queries
included); the seed's own evaluation is not counted.

The parameters (ε 32, λ 0.5, window 0.1, stall 50, horizon 300, patience ≤ 100, 12 refinement steps)
were chosen on the *tuning* pairs of ``benchmarks/deviate_suite.py`` (the shared LeNet-1 and
ResNet-20 TFLite pairs, LeNet-1 → TFLite float16, and a torch LeNet-5 against its ONNX Runtime
dynamic int8 copy, a 50 %-pruned copy and a distilled LeNet-1; 20 seeds each);
``benchmarks/deviate_generalisation.py`` reports on held-out pairs the search never ran on while it was
designed (issue 19). The search before issue 19 (ε 48 doubling after 50 stalled queries, g's margin
alone, fixed patience, no refinement) is ``adaptive=False, refine=False, orig_weight=0, eps=48``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.deviate.minimize import DEFAULT_MAX_QUERIES, DEFAULT_METHOD, METHODS, PIXEL_ORDERS
from twinspect.dl.deviate.pair_search import REJECT_LIMIT, PairSearch, SeedLike
from twinspect.dl.deviate.results import SearchResult
from twinspect.errors import InputError

#: The margin and guided searches' order of the minimisation's single-pixel pass: SSIM order, since the rule of
#: benchmarks/results/deviate_pixel_order_notes.md held on the eleventh pair hold-out (DFlare and DiffChaser keep
#: :data:`~twinspect.dl.deviate.minimize.DEFAULT_PIXEL_ORDER`, largest change first).
SEARCH_PIXEL_ORDER = "ssim"

#: Initial square strength ε in pixel levels.
DEFAULT_EPS = 32.0
#: Initial window area as a fraction of the image.
DEFAULT_WINDOW = 0.1
#: Queries between two looks at the margin trend (adaptive), or without improvement before ε doubles.
DEFAULT_STALL = 50
#: Extra queries spent looking for a compressed-model error after a trigger in which the original changed.
DEFAULT_PATIENCE = 100
#: Adaptive strength: ε grows when the margin trend would not reach the boundary within this many queries.
DEFAULT_HORIZON = 300
#: Weight λ of the original's margin in the objective ``m_g − λ·m_f`` (0: the compressed model's margin alone).
DEFAULT_ORIG_WEIGHT = 0.5
#: Strength left in flat regions of the seed by the texture map (1: none; 0: flat regions never change).
DEFAULT_TEXTURE = 1.0
#: Adaptive strength: ε grows up to this first; then flat regions open (texture → 1); then ε grows to 255.
DEFAULT_SOFT_EPS = 255.0
#: Margin changes up to this size count as a plateau (no change of the compressed model's margin).
PLATEAU = 1e-9
#: Bisection steps of a boundary refinement (it stops early when the original is seen crossing first).
DEFAULT_REFINE_STEPS = 12
#: Minimisation step 1a (L∞ descent): estimation rounds per L∞ level (0: off).
DEFAULT_DESCENT = 0
#: Set aside seeds the original gets wrong (labels known): on by default since the rule of
#: ``benchmarks/results/deviate_cifar_notes.md`` held on the sixth pair hold-out.
DEFAULT_SKIP_ORIG_WRONG = True


@dataclass
class WarmStart:
    """A starting point of the margin search's loop other than the seed (see :meth:`MarginSearch._start`).

    Attributes:
        delta: float32 (H, W, C) change to the seed in pixel levels; both models still give the
            seed's label on ``seed + delta``.
        eps: the square strength ε the loop starts with (pixel levels).
        queries: queries already spent (counted in the seed's total).
        probs: both models' (K,) probabilities on ``seed + delta``.
        reserve: a trigger in which the original changed, found before the loop (queries at the
            time, x, pf, pg), or None: returned only if the loop ends without a trigger of its own
            (it does not shorten the loop as a trigger kept aside in the loop does).
        info: entries added to the result's ``extra``.
    """

    delta: np.ndarray
    eps: float
    queries: int
    probs: tuple[np.ndarray, np.ndarray]
    reserve: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
    info: dict = field(default_factory=dict)


def margin(p: np.ndarray, label: int) -> float:
    """Probability margin of class ``label``: ``p[label] − max_{j≠label} p[j]`` (in [−1, 1]).

    Args:
        p: (K,) probabilities, K ≥ 2.
        label: class index.
    """
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    return float(p[label] - np.max(np.delete(p, label)))


def window_side(fraction: float, height: int, width: int) -> int:
    """Side in pixels of a square covering ``fraction`` of an ``height`` × ``width`` image (1 … min side)."""
    return int(min(height, width, max(1, round(float(np.sqrt(fraction * height * width))))))


class MarginSearch(PairSearch):
    """The margin search (see the module docstring): one seed at a time.

    Args:
        orig: original model f (a :class:`~twinspect.dl.adapters.base.Classifier`).
        comp: compressed model g.
        eps: initial square strength ε in pixel levels (1–255); with ``max_linf`` it never exceeds it.
        window: initial window area as a fraction of the image, in (0, 1].
        stall: adaptive: queries between two looks at the margin trend; otherwise queries without
            improvement after which ε doubles (≥ 1).
        patience: most queries spent after a trigger in which the original changed, looking for a
            compressed-model error (≥ 0; only with a known seed label). Adaptive: as many as the
            first trigger cost, at least 25, at most ``patience``.
        adaptive: adapt ε to the compressed model's margin trend (False: double ε after ``stall``
            queries without improvement, the search before issue 19).
        horizon: adaptive: ε grows (×1.5, ×2 without progress) when the margin, at its rate over
            the last ``stall`` queries, would not reach 0 within this many queries (≥ 1).
        refine: when a step takes *both* models off the seed's label, bisect the step for the point
            where only the compressed model has left it (``refine_steps`` queries at most).
        refine_steps: bisection steps of a refinement (≥ 1).
        texture: strength in flat regions, in [0, 1]: each pixel's change is ε times
            ``texture + (1 − texture)·σ/σ_max``, σ the seed's 3 × 3 local standard deviation (a σ-map
            as in Croce & Hein, "Sparse and imperceivable adversarial attacks", ICCV 2019), so that
            changes go where the seed has structure and a flat background stays flat (1: off).
        soft_eps: adaptive, with ``texture`` < 1: ε grows up to this many levels first, then the flat
            regions open (texture +0.25 per look), then ε grows on up to 255 (1–255).
        orig_weight: λ in [0, 1): a candidate is kept when it lowers ``m_g − λ·m_f`` (``m_f`` the
            original's margin on the seed's label), so that among changes toward the boundary those
            that leave the original surer are preferred.
        minimize_method: how triggers are minimised, ``"boundary"`` (the default) or ``"restore"``
            (before issue 19); see :func:`~twinspect.dl.deviate.minimize.minimize_trigger`.
        descent: estimation rounds per level of the minimisation's L∞ descent (step 1a of
            :func:`~twinspect.dl.deviate.minimize.minimize_trigger`: the trigger searched for again
            inside smaller L∞ balls when the search's ε grew past 48 levels; 0: off). Its cap on
            minimisation queries rises by 300 per round.
        minimize_flat: run the minimisation's flat-region pass (step 6 of
            :func:`~twinspect.dl.deviate.minimize.minimize_trigger`: the change dropped where the seed
            is flat, e.g. an MNIST background, and the rest scaled back to the boundary, L∞ up to
            1.25× but never past 48 levels; about 30–40 more minimisation queries a trigger). On by
            default since the rule of ``benchmarks/results/deviate_ssim_notes.md`` held on the fifth
            pair hold-out (median SSIM on its MNIST pairs 0.790–0.846 → 0.802–0.888, per-pair
            targets met 14 → 16 of 16; search queries unchanged).
        minimize_pixel_order: the order of the minimisation's single-pixel pass (step 4 of
            :func:`~twinspect.dl.deviate.minimize.minimize_trigger`): ``"ssim"``, the pixels whose
            restoring raises SSIM most first (:data:`SEARCH_PIXEL_ORDER`, the default since the rule of
            ``benchmarks/results/deviate_pixel_order_notes.md`` held on the eleventh pair hold-out: mean of
            the four pairs' median SSIM 0.8668 → 0.8677, a small gain; queries and compressed-model errors
            unchanged), or ``"largest"`` change first (before).
        skip_orig_wrong: set aside a seed whose label is given and on which the original is wrong
            (status ``orig_wrong_at_seed``, no search, counted apart from the searched seeds: no
            trigger near it is a compressed-model error unless the search first moves the original
            onto the true label). None: :data:`DEFAULT_SKIP_ORIG_WRONG`, on since the rule of
            ``benchmarks/results/deviate_cifar_notes.md`` held on the sixth pair hold-out (compressed-model
            errors on its two CIFAR-10 pairs 75.0 → 82.5 % pooled, over fewer searched seeds; it finds no
            additional compressed-model error and drops those the search found by first moving the
            original onto the true label: 41 of 276 there). False: every seed is searched.
        max_queries, timeout, seed, max_linf, min_ssim, minimize, require: see
            :class:`~twinspect.dl.deviate.pair_search.PairSearch`.

    Raises:
        IncompatibleModelsError: the models do not take the same inputs / classes.
        InputError: bad option values.

    Example:
        >>> res = MarginSearch(f, g, max_queries=1000, seed=0).search(x_test[0], label=y_test[0])  # doctest: +SKIP
        >>> res.status, res.queries, res.extra["compressed_error"]                                  # doctest: +SKIP
    """

    algorithm = "margin"

    def __init__(
        self,
        orig: Classifier,
        comp: Classifier,
        *,
        eps: float = DEFAULT_EPS,
        window: float = DEFAULT_WINDOW,
        stall: int = DEFAULT_STALL,
        patience: int = DEFAULT_PATIENCE,
        adaptive: bool = True,
        horizon: int = DEFAULT_HORIZON,
        refine: bool = True,
        refine_steps: int = DEFAULT_REFINE_STEPS,
        orig_weight: float = DEFAULT_ORIG_WEIGHT,
        texture: float = DEFAULT_TEXTURE,
        soft_eps: float = DEFAULT_SOFT_EPS,
        max_queries: int | None = None,
        timeout: float | None = 180.0,
        seed: SeedLike = 0,
        max_linf: float | None = None,
        min_ssim: float | None = None,
        minimize: bool = True,
        require: str | None = None,
        minimize_method: str = DEFAULT_METHOD,
        descent: int = DEFAULT_DESCENT,
        minimize_flat: bool = True,
        skip_orig_wrong: bool | None = None,
        minimize_pixel_order: str = SEARCH_PIXEL_ORDER,
    ):
        super().__init__(orig, comp, max_queries=max_queries, timeout=timeout, seed=seed, max_linf=max_linf,
                         min_ssim=min_ssim, minimize=minimize, require=require,
                         skip_orig_wrong=DEFAULT_SKIP_ORIG_WRONG if skip_orig_wrong is None else skip_orig_wrong)
        if minimize_method not in METHODS:
            raise InputError(f"minimize_method must be one of {', '.join(METHODS)}, got {minimize_method!r}")
        if minimize_pixel_order not in PIXEL_ORDERS:
            raise InputError(f"minimize_pixel_order must be one of {', '.join(PIXEL_ORDERS)}, "
                             f"got {minimize_pixel_order!r}")
        if not 1 <= eps <= 255:
            raise InputError(f"eps must be in 1..255 pixel levels, got {eps}")
        if not 0 < window <= 1:
            raise InputError(f"window must be in (0, 1], got {window}")
        if stall < 1:
            raise InputError(f"stall must be >= 1, got {stall}")
        if patience < 0:
            raise InputError(f"patience must be >= 0, got {patience}")
        if horizon < 1:
            raise InputError(f"horizon must be >= 1, got {horizon}")
        if not 0 <= orig_weight < 1:
            raise InputError(f"orig_weight must be in [0, 1), got {orig_weight}")
        if not 1 <= soft_eps <= 255:
            raise InputError(f"soft_eps must be in 1..255 pixel levels, got {soft_eps}")
        if not 0 <= texture <= 1:
            raise InputError(f"texture must be in [0, 1], got {texture}")
        if refine_steps < 1:
            raise InputError(f"refine_steps must be >= 1, got {refine_steps}")
        if descent < 0:
            raise InputError(f"descent must be >= 0, got {descent}")
        self.eps = float(eps)
        self.window = float(window)
        self.stall = int(stall)
        self.patience = int(patience)
        self.adaptive = bool(adaptive)
        self.horizon = int(horizon)
        self.refine = bool(refine)
        self.refine_steps = int(refine_steps)
        self.orig_weight = float(orig_weight)
        self.texture = float(texture)
        self.soft_eps = float(soft_eps)
        self.minimize_method = minimize_method
        self.descent = int(descent)
        self.minimize_flat = bool(minimize_flat)
        self.minimize_pixel_order = minimize_pixel_order
        #: the minimisation's query cap: the usual one plus 300 per step-1a round
        self.minimize_max_queries = DEFAULT_MAX_QUERIES + 300 * self.descent

    def params(self) -> dict:
        """The search parameters (for run.json)."""
        return {"eps": self.eps, "window": self.window, "stall": self.stall, "patience": self.patience,
                "adaptive": self.adaptive, "horizon": self.horizon, "refine": self.refine,
                "refine_steps": self.refine_steps, "orig_weight": self.orig_weight, "texture": self.texture,
                "soft_eps": self.soft_eps, "minimize_method": self.minimize_method, "descent": self.descent,
                "minimize_flat": self.minimize_flat,
                "minimize_pixel_order": self.minimize_pixel_order,
                **super().params()}

    @staticmethod
    def _local_sd(x0: np.ndarray) -> np.ndarray:
        """(H, W, C) the seed's 3 × 3 local standard deviation relative to its largest value (in [0, 1])."""
        from scipy.ndimage import uniform_filter

        x = x0.astype(np.float64)
        mean = uniform_filter(x, size=(3, 3, 1), mode="nearest")
        sd = np.sqrt(np.maximum(uniform_filter(x * x, size=(3, 3, 1), mode="nearest") - mean * mean, 0.0))
        top = sd.max()
        return (sd / top if top > 0 else np.ones_like(sd)).astype(np.float32)

    def _refine(self, x0: np.ndarray, cur: np.ndarray, new: np.ndarray, c: int, t0: float):
        """Bisect the segment ``cur → new`` for the point where the compressed model leaves ``c``.

        ``cur`` is an input on which both models give ``c``; ``new`` one on which both left it. Near
        twins' decision boundaries are close and nearly parallel, so a greedy step often jumps over
        the thin band where only the compressed model has changed; along the segment, the two models
        cross at different points, and a bisection on the compressed model's label finds the band
        when the compressed model crosses first (then the original still gives ``c``: a
        compressed-model error). Returns (queries spent, (x, pf, pg) of a trigger or None).
        """
        lo, hi = 0.0, 1.0
        spent = 0
        d = new - cur
        for _ in range(self.refine_steps):
            if self._out_of_time(t0):
                break
            mid = (lo + hi) / 2
            x = self._admit(x0, (cur + np.float32(mid) * d).astype(np.float32))
            if x is None:
                break
            pf, pg = self._query(x[None])
            spent += 1
            pf, pg = pf[0], pg[0]
            lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
            if lf == c and lg != c:
                return spent, (x, pf, pg)
            if lf != c and lg == c:  # the original crosses first on this segment
                break
            if lg == c:
                lo = mid
            else:
                hi = mid
        return spent, None

    def _start(self, x0: np.ndarray, c: int, pf0: np.ndarray, pg0: np.ndarray, t0: float, cap: float,
               seek_ce: bool, rng: np.random.Generator) -> WarmStart | SearchResult | None:
        """Where the loop starts: None (at the seed, with ε = ``eps``), a :class:`WarmStart`, or a
        finished result. Subclasses override it (:class:`~twinspect.dl.deviate.guided.GuidedSearch`)."""
        return None

    def _search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:
        """The margin search's loop for one seed (called by :meth:`PairSearch.search`)."""
        rng = self._rng(seed)
        t0 = time.perf_counter()
        x0 = self._prepare_seed(x_seed)
        pf0, pg0, early = self._seed_outcome(x0, t0)
        if early is not None:
            return early
        c = int(np.argmax(pf0))
        h, w, ch = x0.shape
        cap = 255.0 if self.budget.max_linf is None else float(self.budget.max_linf)
        eps = min(self.eps, cap)
        # a trigger in which the original changed is kept aside only when a compressed-model error is possible
        seek_ce = self.patience > 0 and self._label is not None and c == self._label

        start = self._start(x0, c, pf0, pg0, t0, cap, seek_ce, rng)
        if isinstance(start, SearchResult):
            return start
        rel = self._local_sd(x0) if self.texture < 1 else None
        tex = self.texture
        soft = min(cap, self.soft_eps)
        delta = np.zeros_like(x0) if start is None else start.delta
        if start is not None:
            eps = start.eps
            pf0, pg0 = start.probs
        p_cur, m_cur, mf_cur = (pf0, pg0), margin(pg0, c), margin(pf0, c)
        j_cur = m_cur - self.orig_weight * mf_cur
        it = 0 if start is None else start.queries
        rejected = improvements = escalations = refinements = 0
        last_gain = last_check = it  # a warm start's queries are not queries without improvement
        m_check, crossings = (m_cur + mf_cur) / 2, 0
        aside: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        patience = self.patience
        status = "max_queries"
        start_info = {} if start is None else start.info

        def info() -> dict:
            return {"improvements": improvements, "escalations": escalations, "final_eps": eps, "final_texture": tex,
                    "refinements": refinements, **start_info}

        while self.max_queries is None or it < self.max_queries:
            if self._out_of_time(t0):
                status = "timeout"
                break
            side = window_side(self.window * 0.5 ** int(np.log2(1 + it / 50)), h, w)
            r, q = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            cand = delta.copy()
            cand[r:r + side, q:q + side, :] = eps * rng.choice(np.array([-1.0, 1.0], np.float32), size=(1, 1, ch))
            if rel is not None and tex < 1:
                cand[r:r + side, q:q + side, :] *= tex + (1.0 - tex) * rel[r:r + side, q:q + side, :]
            x_new = self._admit(x0, np.clip(x0 + cand, 0.0, 255.0).astype(np.float32))
            if x_new is None:  # outside the change budget: never reaches a model, not a query
                rejected += 1
                if rejected >= REJECT_LIMIT:
                    status = "budget"
                    break
                continue
            rejected = 0
            pf, pg = self._query(x_new[None])
            pf, pg = pf[0], pg[0]
            it += 1
            if np.isnan(pf).any() or np.isnan(pg).any():
                return self._result("nan", it, t0, x0, x_new, pf, pg, extra=info())
            lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
            trigger = self._triggers(pf, pg)
            if trigger and (not seek_ce or lf == c):
                return self._result("found", it, t0, x0, x_new, pf, pg, extra={**info(), "set_aside": False})
            if lf != c and lg != c:
                crossings += 1
                if self.refine:
                    # both left c on this step: the compressed model may have crossed first along it
                    spent, got = self._refine(x0, x0 + delta, x_new, c, t0)
                    it += spent
                    refinements += 1
                    if got is not None:
                        return self._result("found", it, t0, x0, got[0], got[1], got[2],
                                            extra={**info(), "set_aside": False, "refined": True})
            if trigger and aside is None:
                aside = (it, x_new, pf, pg)
                # patience in proportion to what the first trigger cost, up to ``patience``
                patience = min(self.patience, max(25, it)) if self.adaptive else self.patience
            if aside is not None and it - aside[0] >= patience:
                break
            m, mf = margin(pg, c), margin(pf, c)
            j = m - self.orig_weight * mf
            # g's margin must fall (then the lower m_g − λ·m_f wins); on a plateau of g's margin (a
            # saturated or coarsely quantised output) the original's margin leads toward the boundary
            if lf == c and ((m < m_cur - PLATEAU and j < j_cur) or (abs(m - m_cur) <= PLATEAU and mf < mf_cur)):
                delta, p_cur, m_cur, mf_cur, j_cur = x_new - x0, (pf, pg), m, mf, j
                improvements += 1
                last_gain = it
            if self.adaptive and it - last_check >= self.stall:
                # the trend of the two margins' mean over the last ``stall`` queries
                m_avg = (m_cur + mf_cur) / 2
                if crossings:
                    # steps that take both models across: the strength suffices, the boundary is here;
                    # finer steps (not stronger ones) find the band where only g has crossed
                    if m_check - m_avg <= 0:
                        eps = max(min(self.eps, cap) / 4, eps * 0.7)
                    last_check, m_check, crossings = it, m_avg, 0
                elif eps < cap or tex < 1:
                    # stronger changes when at this rate it would not reach 0 within ``horizon`` queries
                    rate = (m_check - m_avg) / max(1, it - last_check)
                    if rate <= 0 or m_avg / rate > self.horizon:
                        # the ladder: ε up to soft_eps, then the flat regions opened, then ε up to 255
                        if eps < soft:
                            eps = min(soft, eps * (2.0 if rate <= 0 else 1.5))
                        elif tex < 1:
                            tex = min(1.0, tex + 0.25)
                        else:
                            eps = min(cap, eps * (2.0 if rate <= 0 else 1.5))
                        escalations += 1
                    last_check, m_check = it, m_avg
            elif not self.adaptive and it - last_gain >= self.stall and eps < cap:
                eps = min(cap, 2 * eps)
                escalations += 1
                last_gain = it
        if aside is None and start is not None:
            aside = start.reserve
        if aside is not None:
            return self._result("found", it, t0, x0, aside[1], aside[2], aside[3], extra={**info(), "set_aside": True})
        return self._result(status, it, t0, x0, None, p_cur[0], p_cur[1], extra=info())
