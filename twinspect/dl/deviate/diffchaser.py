"""DiffChaser: a genetic algorithm searching for disagreements of two models (the DFlare baseline).

Xie, Ma, Wang, Li, Liu, Li, "DiffChaser: Detecting Disagreements for Deep Neural Networks",
IJCAI 2019 (doi:10.24963/ijcai.2019/800). The DFlare paper (Tian et al., TOSEM 2023) compares against it on
the same model pairs and mutation operators.

One search, for one seed image on which both models agree:

1. the initial population is ``pop_size`` mutants of the seed, each made by one randomly chosen
   mutation operator (:mod:`~twinspect.dl.deviate.mutations`, the same set DFlare uses);
2. every new individual is evaluated on both models (a generation's new individuals are sent as
   one batch; each counts as one query, i.e. one input sent to each model; the elite carried over
   from the previous generation is not evaluated again); an individual on which the top-1 labels
   differ (or a model answers NaN) ends the search;
3. fitness is DiffChaser's *k-uncertainty* (:func:`~twinspect.dl.deviate.fitness.k_uncertainty`):
   the gap between the largest and the k-th largest probability; the closer an input is to a
   decision boundary, the fitter. ``uncertainty_of`` says whose boundary: ``"both"`` (default,
   the smaller gap of the two models), ``"original"`` or ``"compressed"``. Fitness =
   −uncertainty;
4. the next generation keeps the ``elite`` best individuals and fills the rest with children:
   parents are chosen by tournament selection (size ``tournament``), two parents are crossed with
   probability ``crossover_rate`` (uniform crossover: each pixel position, all channels together,
   comes from either parent with probability 1/2), and a child is mutated with probability
   ``mutation_rate`` by one randomly chosen operator;
5. repeat from 2 until a triggering input is found or the query/time budget is spent.

The crossover form, the parent selection and the default rates are this implementation's choices
where the paper leaves room; they are parameters.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.deviate.fitness import k_uncertainty
from twinspect.dl.deviate.mutations import MutationOperator, get_operators
from twinspect.dl.deviate.pair_search import PairSearch, SeedLike, top1_labels
from twinspect.dl.deviate.results import SearchResult
from twinspect.errors import InputError


class DiffChaser(PairSearch):
    """DiffChaser's genetic algorithm (see the module docstring); same interface as DFlare.

    Args:
        orig: original model f.
        comp: compressed model g.
        pop_size: individuals per generation (≥ 2).
        crossover_rate: probability that two parents are crossed (else the first parent is copied).
        mutation_rate: probability that a child is mutated by one random operator.
        k: rank of the competing class in the k-uncertainty (2 ≤ k ≤ K).
        uncertainty_of: ``"both"``, ``"original"`` or ``"compressed"``.
        elite: best individuals copied unchanged into the next generation.
        tournament: tournament size of parent selection.
        operators: mutation operators (default: DiffChaser's six).
        pixels: ``"float"`` (default, clipped float32 images) or ``"uint8-wrap"`` (see :class:`~twinspect.dl.deviate.mutations.Uint8Cast`).
        max_queries: budget of evaluated individuals per seed (None: no limit). A generation
            is truncated so that the budget is never exceeded.
        timeout: seconds per seed (checked between generations; None: no limit).
        seed: random seed.
        max_linf, min_ssim, minimize, require, skip_orig_wrong: change budget, trigger minimisation,
            trigger requirement and setting aside seeds the original gets wrong (off by default, as in
            the paper), see :class:`~twinspect.dl.deviate.pair_search.PairSearch`.

    Raises:
        IncompatibleModelsError: the models do not take the same inputs / classes.
        InputError: bad option values.
    """

    algorithm = "diffchaser"

    def __init__(
        self,
        orig: Classifier,
        comp: Classifier,
        *,
        pop_size: int = 1000,
        crossover_rate: float = 0.5,
        mutation_rate: float = 0.5,
        k: int = 2,
        uncertainty_of: str = "both",
        elite: int = 1,
        tournament: int = 2,
        operators: Sequence[str | MutationOperator] | None = None,
        pixels: str = "float",
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
        if pop_size < 2:
            raise InputError(f"pop_size must be >= 2, got {pop_size}")
        for name, v in (("crossover_rate", crossover_rate), ("mutation_rate", mutation_rate)):
            if not 0.0 <= v <= 1.0:
                raise InputError(f"{name} must be in [0, 1], got {v}")
        if not 2 <= k <= orig.num_classes:
            raise InputError(f"k must be in 2..{orig.num_classes}, got {k}")
        if uncertainty_of not in ("both", "original", "compressed"):
            raise InputError(f"uncertainty_of must be 'both', 'original' or 'compressed', got {uncertainty_of!r}")
        if not 0 <= elite < pop_size:
            raise InputError(f"elite must be in 0..{pop_size - 1}, got {elite}")
        if tournament < 1:
            raise InputError(f"tournament must be >= 1, got {tournament}")
        self.pop_size = int(pop_size)
        self.crossover_rate = float(crossover_rate)
        self.mutation_rate = float(mutation_rate)
        self.k = int(k)
        self.uncertainty_of = uncertainty_of
        self.elite = int(elite)
        self.tournament = int(tournament)
        self.pixels = pixels
        self.operators = get_operators(operators, pixels=pixels)

    def params(self) -> dict:
        """The search parameters (for run.json)."""
        return {
            "pop_size": self.pop_size,
            "crossover_rate": self.crossover_rate,
            "mutation_rate": self.mutation_rate,
            "k": self.k,
            "uncertainty_of": self.uncertainty_of,
            "elite": self.elite,
            "tournament": self.tournament,
            "operators": [op.name for op in self.operators],
            "pixels": self.pixels,
            **super().params(),
        }

    def fitness(self, pf: np.ndarray, pg: np.ndarray) -> np.ndarray:
        """Fitness (N,) = −k-uncertainty of the chosen model(s) for (N, K) probability batches."""
        if self.uncertainty_of == "original":
            u = k_uncertainty(pf, self.k)
        elif self.uncertainty_of == "compressed":
            u = k_uncertainty(pg, self.k)
        else:
            u = np.minimum(k_uncertainty(pf, self.k), k_uncertainty(pg, self.k))
        return -np.asarray(u)

    def _mutate(self, x: np.ndarray, rng: np.random.Generator, x0: np.ndarray | None = None) -> np.ndarray:
        """``x`` mutated by one random operator; with ``x0``, kept within the change budget around it
        (a mutant outside the budget is replaced by ``x`` itself, which is within it)."""
        op = self.operators[int(rng.integers(0, len(self.operators)))]
        out = op(x, rng)
        if x0 is not None:
            adm = self._admit(x0, out)
            out = x if adm is None else adm
        return out

    def _select(self, fit: np.ndarray, rng: np.random.Generator) -> int:
        cand = rng.integers(0, len(fit), size=self.tournament)
        return int(cand[np.argmax(fit[cand])])

    def _crossover(self, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        mask = rng.random(a.shape[:2]) < 0.5
        return np.where(mask[..., None], a, b).astype(np.float32)

    def _search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:
        """Search for a triggering input starting from ``x_seed`` (see :meth:`DFlare.search`).

        Returns:
            :class:`~twinspect.dl.deviate.results.SearchResult`; ``queries`` = individuals
            evaluated up to and including the first triggering individual (counted one at a time,
            as DFlare's queries are; the batch it was evaluated in is an implementation detail);
            ``extra["generation_queries"]`` = individuals evaluated in all generations evaluated,
            whole last generation included (``pop_size`` in the first generation,
            ``pop_size − elite`` in later ones); ``extra["generations"]`` = generations evaluated.
        """
        rng = self._rng(seed)
        t0 = time.perf_counter()
        x0 = self._prepare_seed(x_seed)
        pf0, pg0, early = self._seed_outcome(x0, t0)
        if early is not None:
            return early

        queries = 0
        generations = 0
        # individuals still to evaluate (`fresh`) and the evaluated elite carried over (`kept_*`)
        fresh = np.stack([self._mutate(x0, rng, x0) for _ in range(self.pop_size)])
        k = self.orig.num_classes
        kept_x = np.empty((0,) + x0.shape, np.float32)
        kept_pf, kept_pg = np.empty((0, k)), np.empty((0, k))
        best_p, best_fit = (pf0, pg0), -np.inf
        status = "max_queries"
        while True:
            if self._out_of_time(t0):
                status = "timeout"
                break
            if self.max_queries is not None:
                room = self.max_queries - queries
                if room <= 0:
                    break
                fresh = fresh[:room]
            pf, pg = self._query(fresh)
            queries += len(fresh)
            generations += 1
            lf, lg = top1_labels(pf), top1_labels(pg)
            differ = lf != lg
            if self.require == "compressed-error" and self._label is not None:
                differ &= lf == self._label
            hit = np.flatnonzero(differ | (lf < 0) | (lg < 0))
            if hit.size:
                j = int(hit[0])
                st = "nan" if (lf[j] < 0 or lg[j] < 0) else "found"
                first = queries - len(fresh) + j + 1  # queries up to the first triggering individual
                return self._result(st, first, t0, x0, fresh[j], pf[j], pg[j],
                                    extra={"generations": generations, "generation_queries": queries})
            pop = np.concatenate([kept_x, fresh])
            pf, pg = np.concatenate([kept_pf, pf]), np.concatenate([kept_pg, pg])
            fit = self.fitness(pf, pg)
            j = int(np.argmax(fit))
            if fit[j] > best_fit:
                best_fit, best_p = float(fit[j]), (pf[j], pg[j])
            # next generation: the elite (already evaluated) + children (to evaluate)
            elite = np.argsort(-fit, kind="stable")[: self.elite]
            kept_x, kept_pf, kept_pg = pop[elite], pf[elite], pg[elite]
            children: list[np.ndarray] = []
            while len(children) < self.pop_size - self.elite:
                a = pop[self._select(fit, rng)]
                if rng.random() < self.crossover_rate:
                    child = self._crossover(a, pop[self._select(fit, rng)], rng)
                else:
                    child = a.copy()
                if rng.random() < self.mutation_rate:
                    child = self._mutate(child, rng, x0)
                if self.budget.active and self._admit(x0, child) is None:
                    child = a.copy()  # a crossover child outside the SSIM budget: its parent instead
                children.append(child)
            fresh = np.stack(children)
        return self._result(status, queries, t0, x0, None, best_p[0], best_p[1],
                            extra={"generations": generations, "generation_queries": queries,
                                   "best_uncertainty": -best_fit})
