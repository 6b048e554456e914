"""Margin search: the default deviated-behaviour search, close to the seed and aimed at compressed-model errors.

DFlare's walk (:mod:`.dflare`) keeps almost every mutant, so its triggers drift far from their seed
(median L∞ above 240 levels on the shared MNIST pairs) and in most of them the *original* model has
changed its mind too. This search asks a narrower question — where near the seed does the
compressed model g leave the seed's label while the original model f keeps it? — and answers it as
a score-based black-box attack on g's margin, constrained by f:

* the seed's label is ``c = argmax f(seed)``; the objective is g's probability margin
  ``m_g(x) = g(x)[c] − max_{j≠c} g(x)[j]`` (lower is better);
* a candidate changes one random square window of the current *difference to the seed* to ``±ε``
  per channel (Square Attack's update: Andriushchenko, Croce, Flammarion, Hein, "Square Attack: a
  query-efficient black-box adversarial attack via random search", ECCV 2020), so every candidate
  stays in the L∞ ball of radius ε around the seed; the window covers ``window`` of the image at
  first and halves after 50, 150, 350, … queries (Square Attack's schedule, simplified);
* a candidate is kept only when it lowers ``m_g`` *and* f still gives ``c`` (greedy acceptance);
* adaptive strength: ε starts small (``eps``, 48 levels) and doubles up to 255 when ``stall``
  queries in a row brought no improvement;
* the search stops at the first input whose two top-1 labels differ. With the seed's true label
  known and f right on the seed, a trigger in which f, not g, changed its label is kept aside and
  the search goes on for ``patience`` more queries for a compressed-model error, returning the
  one kept aside if none comes.

Query accounting as in DFlare: one query is one candidate sent to both models; the seed's own
evaluation is not counted. The parameters (ε 48, window 0.1, stall 50, patience 100) were chosen on
20 seeds of the shared LeNet-1 and LeNet-5 pairs (run seed 0, the first 20 of the seed list; the
patience also on the first 20 of ResNet-20); ``benchmarks/deviate_triggers.py`` reports on other seeds.
"""

from __future__ import annotations

import time

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.deviate.results import SearchResult
from twinspect.dl.deviate.search import REJECT_LIMIT, PairSearch, SeedLike
from twinspect.errors import InputError

#: Initial square strength ε in pixel levels.
DEFAULT_EPS = 48.0
#: Initial window area as a fraction of the image.
DEFAULT_WINDOW = 0.1
#: Queries without improvement after which ε doubles.
DEFAULT_STALL = 50
#: Extra queries spent looking for a compressed-model error after a trigger in which the original changed.
DEFAULT_PATIENCE = 100


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
        stall: queries without improvement after which ε doubles (≥ 1).
        patience: queries spent after a trigger in which the original changed, looking for a
            compressed-model error (≥ 0; only with a known seed label).
        max_queries, timeout, seed, max_linf, min_ssim, minimize, require: see
            :class:`~twinspect.dl.deviate.search.PairSearch`.

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
        max_queries: int | None = None,
        timeout: float | None = 180.0,
        seed: SeedLike = 0,
        max_linf: float | None = None,
        min_ssim: float | None = None,
        minimize: bool = True,
        require: str | None = None,
    ):
        super().__init__(orig, comp, max_queries=max_queries, timeout=timeout, seed=seed, max_linf=max_linf,
                         min_ssim=min_ssim, minimize=minimize, require=require)
        if not 1 <= eps <= 255:
            raise InputError(f"eps must be in 1..255 pixel levels, got {eps}")
        if not 0 < window <= 1:
            raise InputError(f"window must be in (0, 1], got {window}")
        if stall < 1:
            raise InputError(f"stall must be >= 1, got {stall}")
        if patience < 0:
            raise InputError(f"patience must be >= 0, got {patience}")
        self.eps = float(eps)
        self.window = float(window)
        self.stall = int(stall)
        self.patience = int(patience)

    def params(self) -> dict:
        """The search parameters (for run.json)."""
        return {"eps": self.eps, "window": self.window, "stall": self.stall, "patience": self.patience,
                **super().params()}

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

        delta = np.zeros_like(x0)
        p_cur, m_cur = (pf0, pg0), margin(pg0, c)
        it = rejected = improvements = last_gain = escalations = 0
        aside: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        status = "max_queries"
        while self.max_queries is None or it < self.max_queries:
            if self._out_of_time(t0):
                status = "timeout"
                break
            side = window_side(self.window * 0.5 ** int(np.log2(1 + it / 50)), h, w)
            r, q = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
            cand = delta.copy()
            cand[r:r + side, q:q + side, :] = eps * rng.choice(np.array([-1.0, 1.0], np.float32), size=(1, 1, ch))
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
            info = {"improvements": improvements, "escalations": escalations, "final_eps": eps}
            if np.isnan(pf).any() or np.isnan(pg).any():
                return self._result("nan", it, t0, x0, x_new, pf, pg, extra=info)
            lf = int(np.argmax(pf))
            if self._triggers(pf, pg):
                if not seek_ce or lf == c:
                    return self._result("found", it, t0, x0, x_new, pf, pg, extra={**info, "set_aside": aside is not None})
                if aside is None:
                    aside = (it, x_new, pf, pg)
            if aside is not None and it - aside[0] >= self.patience:
                break
            m = margin(pg, c)
            if m < m_cur and lf == c:
                delta, p_cur, m_cur = x_new - x0, (pf, pg), m
                improvements += 1
                last_gain = it
            elif it - last_gain >= self.stall and eps < cap:
                eps = min(cap, 2 * eps)
                escalations += 1
                last_gain = it
        info = {"improvements": improvements, "escalations": escalations, "final_eps": eps}
        if aside is not None:
            return self._result("found", it, t0, x0, aside[1], aside[2], aside[3], extra={**info, "set_aside": True})
        return self._result(status, it, t0, x0, None, p_cur[0], p_cur[1], extra=info)
