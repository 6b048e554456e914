"""DFlare: search for inputs on which a compressed model deviates from its original model.

Tian, Zhang, Wen, Cheung, Sun, Ma, Jiang, "Finding Deviated Behaviors of the Compressed DNN Models
for Image Classifications", ACM TOSEM 2023 (arXiv 2112.02819); public code
github.com/yqtianust/DFlare (``test_gen_main.py``).

Given a seed image on which the original model f and the compressed model g agree, DFlare
repeatedly mutates the current input with one operator (:mod:`~twinspect.dl.deviate.mutations`)
chosen by Metropolis–Hastings (:mod:`~twinspect.dl.deviate.selection`), queries both models once
with the mutant, stops when their top-1 labels differ, and otherwise keeps the mutant as the new
current input when its fitness ``H = D/δ + O`` (:mod:`~twinspect.dl.deviate.fitness`) says so:
by default as the public DFlare code does (D moved by more than δ, or a new state was reached;
see :func:`~twinspect.dl.deviate.fitness.keeps_mutant`), or with ``acceptance="increase"`` when H
increased. Ablations (paper, RQ3): ``selection="uniform"`` is DFlare_R (random operator choice),
``fitness="distance"`` is DFlare_D (no state novelty: a mutant is kept when D increased, as in the
public code's mode "c").

Query accounting follows the paper and its code: one iteration generates one input and queries
each of the two models once with it; ``SearchResult.queries`` is the number of iterations (the
seed's own evaluation is not counted). Per-model call counts are therefore ``queries + 1``.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from twinspect.dl.adapters.base import Classifier, check_compatible
from twinspect.dl.deviate.fitness import (
    ACCEPTANCE_RULES,
    DEFAULT_DELTA,
    DEFAULT_STATE_THRESHOLD,
    StateTracker,
    keeps_mutant,
    prob_difference,
)
from twinspect.dl.deviate.mutations import MutationOperator, get_operators
from twinspect.dl.deviate.results import SearchResult
from twinspect.dl.deviate.selection import make_selector
from twinspect.errors import InputError

SeedLike = int | Sequence[int] | np.random.SeedSequence | np.random.Generator | None


def _labels(p: np.ndarray) -> np.ndarray:
    """Top-1 labels of (N, K) probabilities; −1 for rows containing NaN."""
    lab = np.argmax(np.nan_to_num(p, nan=-np.inf), axis=1)
    lab[np.isnan(p).any(axis=1)] = -1
    return lab


class PairSearch:
    """Common part of the searches: the model pair, budgets, seed handling and result building.

    Args:
        orig: original model f.
        comp: compressed model g (same input shape and class count).
        max_queries: budget of generated inputs per seed (None: no limit).
        timeout: wall-clock budget per seed in seconds (None: no limit).
        seed: seed of the random generator (int, sequence of ints, SeedSequence or Generator).

    Raises:
        IncompatibleModelsError: the models' input shapes or class counts differ.
        InputError: both budgets are None, or a budget is not positive.
    """

    algorithm = "search"

    def __init__(
        self,
        orig: Classifier,
        comp: Classifier,
        *,
        max_queries: int | None = None,
        timeout: float | None = 180.0,
        seed: SeedLike = 0,
    ):
        check_compatible(orig, comp)
        if max_queries is None and timeout is None:
            raise InputError("give max_queries or timeout (or both): the search would never stop")
        if max_queries is not None and max_queries < 1:
            raise InputError(f"max_queries must be >= 1, got {max_queries}")
        if timeout is not None and not timeout > 0:
            raise InputError(f"timeout must be > 0 seconds, got {timeout}")
        self.orig = orig
        self.comp = comp
        self.max_queries = None if max_queries is None else int(max_queries)
        self.timeout = None if timeout is None else float(timeout)
        self.seed = seed

    # -- helpers --------------------------------------------------------------------------------
    def _rng(self, seed: SeedLike) -> np.random.Generator:
        seed = self.seed if seed is None else seed
        if isinstance(seed, np.random.Generator):
            return seed
        return np.random.default_rng(seed)

    def _prepare_seed(self, x_seed: np.ndarray) -> np.ndarray:
        x = np.asarray(x_seed)
        if x.dtype.kind not in "uif":
            raise InputError(f"seed image must be numeric, got dtype {x.dtype}")
        if x.ndim == 2 and self.orig.input_shape[-1] == 1:
            x = x[..., None]
        if tuple(x.shape) != self.orig.input_shape:
            raise InputError(
                f"seed image of shape {tuple(x.shape)} does not fit the models' input shape {self.orig.input_shape}"
            )
        return np.clip(x.astype(np.float32), 0.0, 255.0)

    def _query(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities of both models on a (N, H, W, C) batch: two (N, K) float64 arrays."""
        return self.orig.predict_proba(batch), self.comp.predict_proba(batch)

    def _result(self, status, queries, t0, x_seed, x, pf, pg, **kw) -> SearchResult:
        has_nan = bool(np.isnan(pf).any() or np.isnan(pg).any())
        lf, lg = int(_labels(pf[None])[0]), int(_labels(pg[None])[0])
        return SearchResult(
            success=status in ("found", "nan"),
            status=status,
            queries=int(queries),
            time_s=time.perf_counter() - t0,
            trigger=None if x is None else np.asarray(x, dtype=np.float32),
            orig_label=lf,
            comp_label=lg,
            seed=x_seed,
            orig_probs=np.asarray(pf, dtype=np.float64),
            comp_probs=np.asarray(pg, dtype=np.float64),
            extra={"nan": has_nan, **kw.pop("extra", {})},
            **kw,
        )

    def _seed_outcome(self, x0: np.ndarray, t0: float):
        """Evaluate the seed; return (pf0, pg0, early SearchResult or None)."""
        pf, pg = self._query(x0[None])
        pf0, pg0 = pf[0], pg[0]
        if np.isnan(pf0).any() or np.isnan(pg0).any():
            return pf0, pg0, self._result("nan", 0, t0, x0, x0, pf0, pg0)
        if np.argmax(pf0) != np.argmax(pg0):
            return pf0, pg0, self._result("disagree_at_seed", 0, t0, x0, x0, pf0, pg0)
        return pf0, pg0, None

    def _out_of_time(self, t0: float) -> bool:
        return self.timeout is not None and time.perf_counter() - t0 > self.timeout

    def search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:  # pragma: no cover
        raise NotImplementedError


class DFlare(PairSearch):
    """DFlare's search for one seed at a time (see the module docstring).

    Args:
        orig: original model f (a :class:`~twinspect.dl.adapters.base.Classifier`).
        comp: compressed model g.
        operators: mutation operators (names or instances); default DiffChaser's six
            (:data:`~twinspect.dl.deviate.mutations.DEFAULT_OPERATORS`).
        pixels: ``"uint8-wrap"`` (default: the public DFlare code's uint8 casting, see
            :class:`~twinspect.dl.deviate.mutations.Uint8Cast`) or ``"float"`` (clipped float32 images).
        selection: ``"mh"`` (Metropolis–Hastings, DFlare) or ``"uniform"`` (DFlare_R).
        fitness: ``"full"`` (H = D/δ + O, DFlare) or ``"distance"`` (H = D, DFlare_D).
        delta: δ of the fitness (1e-3).
        state_threshold: novelty threshold on the squared Euclidean distance between states (0.5,
            as in the public DFlare code).
        acceptance: rule for keeping a non-triggering mutant with the full fitness:
            ``"reference"`` (default, public DFlare code) or ``"increase"`` (H increased).
        max_queries: budget of generated inputs per seed (None: no limit).
        timeout: seconds per seed (180 in the paper's evaluation; None: no limit).
        seed: random seed (int, sequence of ints, SeedSequence or Generator); :meth:`search` may
            override it per seed input.

    Raises:
        IncompatibleModelsError: the models do not take the same inputs / classes.
        InputError: bad option values.

    Example:
        >>> res = DFlare(f, g, max_queries=1000, seed=0).search(x_test[0])   # doctest: +SKIP
        >>> res.status, res.queries, res.orig_label, res.comp_label           # doctest: +SKIP
    """

    algorithm = "dflare"

    def __init__(
        self,
        orig: Classifier,
        comp: Classifier,
        *,
        operators: Sequence[str | MutationOperator] | None = None,
        pixels: str = "uint8-wrap",
        selection: str = "mh",
        fitness: str = "full",
        delta: float = DEFAULT_DELTA,
        state_threshold: float = DEFAULT_STATE_THRESHOLD,
        acceptance: str = "reference",
        max_queries: int | None = None,
        timeout: float | None = 180.0,
        seed: SeedLike = 0,
    ):
        super().__init__(orig, comp, max_queries=max_queries, timeout=timeout, seed=seed)
        if acceptance not in ACCEPTANCE_RULES:
            raise InputError(f"unknown acceptance rule {acceptance!r}; choose one of {', '.join(ACCEPTANCE_RULES)}")
        if selection not in ("mh", "uniform"):
            raise InputError(f"unknown selection {selection!r}; choose 'mh' or 'uniform'")
        if fitness not in ("full", "distance"):
            raise InputError(f"unknown fitness {fitness!r}; choose 'full' or 'distance'")
        if not delta > 0:
            raise InputError(f"delta must be > 0, got {delta}")
        self.pixels = pixels
        self.operators = get_operators(operators, pixels=pixels)
        self.selection = selection
        self.fitness = fitness
        self.delta = float(delta)
        self.state_threshold = float(state_threshold)
        self.acceptance = acceptance
        StateTracker(self.state_threshold)  # validates the threshold

    def params(self) -> dict:
        """The search parameters (for run.json)."""
        return {
            "operators": [op.name for op in self.operators],
            "pixels": self.pixels,
            "selection": self.selection,
            "fitness": self.fitness,
            "delta": self.delta,
            "state_threshold": self.state_threshold,
            "acceptance": self.acceptance,
            "max_queries": self.max_queries,
            "timeout": self.timeout,
        }

    def search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:
        """Search for a triggering input starting from ``x_seed``.

        Args:
            x_seed: (H, W, C) (or (H, W) for one channel) uint8/float image in the 0–255 scale.
            seed: random seed for this search (default: the object's seed). The runner passes
                ``(run_seed, seed_index)`` so that each seed input's search is reproducible alone.

        Returns:
            :class:`~twinspect.dl.deviate.results.SearchResult`; ``status`` is ``"found"`` (labels
            differ), ``"nan"`` (a model answered NaN), ``"disagree_at_seed"`` (no search needed),
            ``"max_queries"`` or ``"timeout"``.

        Raises:
            InputError: the seed does not fit the models.
        """
        rng = self._rng(seed)
        t0 = time.perf_counter()
        x0 = self._prepare_seed(x_seed)
        pf0, pg0, early = self._seed_outcome(x0, t0)
        if early is not None:
            return early

        selector = make_selector(self.selection, self.operators, rng)
        tracker = StateTracker(self.state_threshold) if self.fitness == "full" else None
        d_cur = prob_difference(pf0, pg0, int(np.argmax(pf0)))
        novel_cur = False  # the seed's state is the first one stored; the seed was not "kept" for novelty
        if tracker is not None:
            tracker.observe(pf0, pg0)
        x_cur, p_cur = x0, (pf0, pg0)
        improvements = 0

        it = 0
        status = "max_queries"
        while self.max_queries is None or it < self.max_queries:
            if self._out_of_time(t0):
                status = "timeout"
                break
            i = selector.choose()
            x_new = self.operators[i](x_cur, rng)
            pf, pg = self._query(x_new[None])
            pf, pg = pf[0], pg[0]
            it += 1
            if np.isnan(pf).any() or np.isnan(pg).any():
                selector.feedback(i, True)
                return self._result("nan", it, t0, x0, x_new, pf, pg, operators=selector.counts(),
                                    extra={"improvements": improvements})
            lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
            if lf != lg:
                selector.feedback(i, True)
                return self._result("found", it, t0, x0, x_new, pf, pg, operators=selector.counts(),
                                    extra={"improvements": improvements})
            d = prob_difference(pf, pg, lf)
            if tracker is not None:
                novel = tracker.observe(pf, pg)
                keep = keeps_mutant(d, novel, d_cur, novel_cur, self.delta, self.acceptance)
            else:  # DFlare_D: distance only
                novel, keep = False, d > d_cur
            if keep:
                d_cur, novel_cur, x_cur, p_cur = d, novel, x_new, (pf, pg)
                improvements += 1
            selector.feedback(i, keep)
        return self._result(status, it, t0, x0, None, p_cur[0], p_cur[1], operators=selector.counts(),
                            extra={"improvements": improvements})
