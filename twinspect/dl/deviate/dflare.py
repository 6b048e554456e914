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
from collections.abc import Sequence

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.deviate.fitness import (
    ACCEPTANCE_RULES,
    DEFAULT_DELTA,
    DEFAULT_STATE_THRESHOLD,
    StateTracker,
    keeps_mutant,
    prob_difference,
)
from twinspect.dl.deviate.mutations import MutationOperator, get_operators, reference_operators
from twinspect.dl.deviate.pair_search import REJECT_LIMIT, PairSearch, SeedLike
from twinspect.dl.deviate.results import SearchResult
from twinspect.dl.deviate.selection import SELECTIONS, make_selector
from twinspect.errors import InputError

#: Settings each preset gives the arguments left at None (see :class:`DFlare`).
PRESETS: dict[str, dict[str, str]] = {
    "default": {"pixels": "float", "selection": "mh", "initial_d": "seed"},
    "reference": {"pixels": "uint8-wrap", "selection": "mh-reference", "initial_d": "zero"},
}


class DFlare(PairSearch):
    """DFlare's search for one seed at a time (see the module docstring).

    Args:
        orig: original model f (a :class:`~twinspect.dl.adapters.base.Classifier`).
        comp: compressed model g.
        operators: mutation operators (names or instances); default DiffChaser's six
            (:data:`~twinspect.dl.deviate.mutations.DEFAULT_OPERATORS`).
        pixels: ``"float"`` (float32 images clipped to [0, 255], as the paper describes) or
            ``"uint8-wrap"`` (the public DFlare code's uint8 casting, see
            :class:`~twinspect.dl.deviate.mutations.Uint8Cast`); default: the preset's.
        selection: ``"mh"`` (Metropolis–Hastings, DFlare), ``"mh-reference"`` (the public code's
            variant) or ``"uniform"`` (DFlare_R); default: the preset's.
        fitness: ``"full"`` (H = D/δ + O, DFlare) or ``"distance"`` (H = D, DFlare_D).
        delta: δ of the fitness (1e-3).
        state_threshold: novelty threshold on the squared Euclidean distance between states (0.5,
            as in the public DFlare code).
        acceptance: rule for keeping a non-triggering mutant with the full fitness:
            ``"reference"`` (default, public DFlare code) or ``"increase"`` (H increased).
        initial_d: ``"seed"`` (the current D starts at the seed's D) or ``"zero"`` (the public
            code's initial best D of 0); default: the preset's.
        preset: ``"default"`` (the paper's description: DiffChaser's six operators without
            identity parameters, float pixels clipped to [0, 255], MH selection as stated) or
            ``"reference"`` (the public code github.com/yqtianust/DFlare: its seven operators and
            parameter ranges, :func:`~twinspect.dl.deviate.mutations.reference_operators`, uint8
            casting, its MH variant, initial best D of 0). Explicit arguments override the preset.
        max_queries: budget of generated inputs per seed (None: no limit).
        timeout: seconds per seed (180 in the paper's evaluation; None: no limit).
        seed: random seed (int, sequence of ints, SeedSequence or Generator); :meth:`search` may
            override it per seed input.
        max_linf, min_ssim, minimize, require, skip_orig_wrong: change budget, trigger minimisation,
            trigger requirement and setting aside seeds the original gets wrong (off by default, as in
            the paper), see :class:`~twinspect.dl.deviate.pair_search.PairSearch`.

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
        pixels: str | None = None,
        selection: str | None = None,
        fitness: str = "full",
        delta: float = DEFAULT_DELTA,
        state_threshold: float = DEFAULT_STATE_THRESHOLD,
        acceptance: str = "reference",
        initial_d: str | None = None,
        preset: str = "default",
        max_queries: int | None = None,
        timeout: float | None = 180.0,
        seed: SeedLike = 0,
        max_linf: float | None = None,
        min_ssim: float | None = None,
        minimize: bool = True,
        require: str | None = None,
        skip_orig_wrong: bool = False,
    ):
        super().__init__(orig, comp, max_queries=max_queries, timeout=timeout, seed=seed, max_linf=max_linf,
                         min_ssim=min_ssim, minimize=minimize, require=require,
                         skip_orig_wrong=skip_orig_wrong)
        if preset not in PRESETS:
            raise InputError(f"unknown DFlare preset {preset!r}; choose one of {', '.join(PRESETS)}")
        base = PRESETS[preset]
        pixels = base["pixels"] if pixels is None else pixels
        selection = base["selection"] if selection is None else selection
        initial_d = base["initial_d"] if initial_d is None else initial_d
        if operators is None and preset == "reference":
            operators = reference_operators()
        if initial_d not in ("seed", "zero"):
            raise InputError(f"unknown initial_d {initial_d!r}; choose 'seed' or 'zero'")
        if acceptance not in ACCEPTANCE_RULES:
            raise InputError(f"unknown acceptance rule {acceptance!r}; choose one of {', '.join(ACCEPTANCE_RULES)}")
        if selection not in SELECTIONS:
            raise InputError(f"unknown selection {selection!r}; choose one of {', '.join(SELECTIONS)}")
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
        self.initial_d = initial_d
        self.preset = preset
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
            "initial_d": self.initial_d,
            "preset": self.preset,
            **super().params(),
        }

    def _search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:
        """DFlare's loop for one seed (called by :meth:`PairSearch.search`, which minimises and measures)."""
        rng = self._rng(seed)
        t0 = time.perf_counter()
        x0 = self._prepare_seed(x_seed)
        pf0, pg0, early = self._seed_outcome(x0, t0)
        if early is not None:
            return early

        selector = make_selector(self.selection, self.operators, rng)
        tracker = StateTracker(self.state_threshold) if self.fitness == "full" else None
        d_cur = prob_difference(pf0, pg0, int(np.argmax(pf0))) if self.initial_d == "seed" else 0.0
        novel_cur = False  # the seed's state is the first one stored; the seed was not "kept" for novelty
        if tracker is not None:
            tracker.observe(pf0, pg0)
        x_cur, p_cur = x0, (pf0, pg0)
        improvements = 0

        it = 0
        rejected = 0
        status = "max_queries"
        while self.max_queries is None or it < self.max_queries:
            if self._out_of_time(t0):
                status = "timeout"
                break
            i = selector.choose()
            x_new = self._admit(x0, self.operators[i](x_cur, rng))
            if x_new is None:  # outside the change budget: never reaches a model, not a query
                selector.feedback(i, False)
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
                selector.feedback(i, True)
                return self._result("nan", it, t0, x0, x_new, pf, pg, operators=selector.counts(),
                                    extra={"improvements": improvements})
            lf = int(np.argmax(pf))
            if self._triggers(pf, pg):
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
