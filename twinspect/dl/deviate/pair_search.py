"""The common base of the deviated-behaviour searches (DFlare, DiffChaser, and any new one).

A search owns one original/compressed model pair (:class:`~twinspect.dl.adapters.base.Classifier`
views), its per-seed budgets (queries, seconds) and random-seed handling, and builds a
:class:`~twinspect.dl.deviate.results.SearchResult` per seed. Subclasses implement
:meth:`PairSearch.search`. Algorithms live in their own modules (:mod:`.dflare`, :mod:`.diffchaser`)
and import only this base, never each other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from twinspect.dl.adapters.base import Classifier, check_compatible
from twinspect.dl.deviate.distance import ChangeBudget, trigger_distances
from twinspect.dl.deviate.minimize import (
    DEFAULT_FLAT,
    DEFAULT_MAX_QUERIES,
    DEFAULT_METHOD,
    DEFAULT_PIXEL_ORDER,
    minimize_trigger,
)
from twinspect.dl.deviate.results import SearchResult
from twinspect.errors import InputError

#: Anything :func:`numpy.random.default_rng` accepts, or a Generator used as is.
SeedLike = int | Sequence[int] | np.random.SeedSequence | np.random.Generator | None

#: What a triggering input must show: ``None`` (top-1 labels differ) or ``"compressed-error"``
#: (labels differ *and* the original still gives the seed's true label).
REQUIREMENTS = (None, "compressed-error")

#: Consecutive candidates rejected by the change budget after which a seed ends with status ``budget``.
REJECT_LIMIT = 1000


def top1_labels(p: np.ndarray) -> np.ndarray:
    """Top-1 labels of (N, K) probabilities: int64 (N,), −1 for rows containing NaN."""
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
        max_linf: change budget: every candidate is projected into the L∞ ball of this many pixel
            levels (1–255) around its seed before it reaches a model (None: no bound).
        min_ssim: change budget: a candidate whose SSIM to its seed is below this, in (0, 1], is
            rejected without a query (None: no bound). See
            :class:`~twinspect.dl.deviate.distance.ChangeBudget`.
        minimize: shrink each trigger toward its seed after the search
            (:func:`~twinspect.dl.deviate.minimize.minimize_trigger`; its queries are counted apart,
            ``extra["minimize_queries"]``).
        require: ``None`` or ``"compressed-error"`` (a trigger counts only when the original model
            still gives the seed's true label; :meth:`search` then needs ``label``).
        skip_orig_wrong: set aside a seed whose true label is given and on which the original model
            is wrong (the two models agreeing on the seed): it ends at once with status
            ``orig_wrong_at_seed``, no query and no trigger, and is counted apart from the searched
            seeds (as ``disagree_at_seed`` is), because no trigger near it is a compressed-model error
            unless the search first moves the original onto the true label. False (the default of
            this base class): such seeds are searched like any other. Without a label it does nothing.

    Raises:
        IncompatibleModelsError: the models' input shapes or class counts differ.
        InputError: both budgets are None, a budget is not positive, a change budget is out of
            range, or an unknown requirement.
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
        max_linf: float | None = None,
        min_ssim: float | None = None,
        minimize: bool = True,
        require: str | None = None,
        skip_orig_wrong: bool = False,
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
        self.budget = ChangeBudget(max_linf, min_ssim)
        if require not in REQUIREMENTS:
            raise InputError(f"unknown requirement {require!r}; choose 'compressed-error' or none")
        self.minimize = bool(minimize)
        self.require = require
        self.skip_orig_wrong = bool(skip_orig_wrong)
        #: minimisation looks for a compressed-model error along the way (needs the seed's label)
        self.prefer_compressed_error = bool(minimize) and require is None
        self._label: int | None = None

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
        lf, lg = int(top1_labels(pf[None])[0]), int(top1_labels(pg[None])[0])
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
        """Evaluate the seed (not a query); return (pf0, pg0, early SearchResult or None).

        Early results: ``"nan"``, ``"disagree_at_seed"``, and with ``skip_orig_wrong`` and a known
        label ``"orig_wrong_at_seed"`` (the two models agree and the original is wrong: set aside
        without a search, no trigger)."""
        pf, pg = self._query(x0[None])
        pf0, pg0 = pf[0], pg[0]
        if np.isnan(pf0).any() or np.isnan(pg0).any():
            return pf0, pg0, self._result("nan", 0, t0, x0, x0, pf0, pg0)
        if np.argmax(pf0) != np.argmax(pg0):
            return pf0, pg0, self._result("disagree_at_seed", 0, t0, x0, x0, pf0, pg0)
        if self.skip_orig_wrong and self._label is not None and int(np.argmax(pf0)) != self._label:
            return pf0, pg0, self._result("orig_wrong_at_seed", 0, t0, x0, None, pf0, pg0)
        return pf0, pg0, None

    def _admit(self, x0: np.ndarray, x: np.ndarray) -> np.ndarray | None:
        """``x`` within the change budget around ``x0`` (projected), or None: must not be queried."""
        return self.budget.admit(x0, x) if self.budget.active else x

    def _triggers(self, pf: np.ndarray, pg: np.ndarray) -> bool:
        """Do (K,) probabilities of both models make a trigger (labels differ [, original right])?"""
        lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
        if lf == lg:
            return False
        return self.require is None or self._label is None or lf == self._label

    def _prefers_compressed_error(self, pf: np.ndarray, pg: np.ndarray) -> bool:
        """Labels differ and the original still gives the seed's true label (a compressed-model error)."""
        lf = int(np.argmax(pf))
        return self._label is not None and lf == self._label and lf != int(np.argmax(pg))

    def _out_of_time(self, t0: float) -> bool:
        return self.timeout is not None and time.perf_counter() - t0 > self.timeout

    def params(self) -> dict:
        """The search parameters recorded in ``run.json``: budgets, change budget, minimisation and
        requirement (subclasses add their own and include these through ``super().params()``)."""
        return {"max_queries": self.max_queries, "timeout": self.timeout, **self.budget.to_dict(),
                "minimize": self.minimize, "require": self.require,
                **({"skip_orig_wrong": True} if self.skip_orig_wrong else {})}

    def search(self, x_seed: np.ndarray, *, seed: SeedLike = None, label: int | None = None) -> SearchResult:
        """Search for a triggering input from ``x_seed``, minimise it, and measure it.

        Args:
            x_seed: (H, W, C) (or (H, W) for one channel) uint8/float image in the 0–255 scale.
            seed: random seed for this search (default: the object's seed). The runner passes
                ``(run_seed, seed_index)`` so that each seed input's search is reproducible alone.
            label: the seed's true label (−1/None: unknown); needed by ``require="compressed-error"``,
                and recorded as ``extra["compressed_error"]`` (the original still gives it).

        Returns:
            :class:`~twinspect.dl.deviate.results.SearchResult`; ``status`` is ``"found"``,
            ``"nan"`` (a model answered NaN), ``"disagree_at_seed"`` (no search needed),
            ``"orig_wrong_at_seed"`` (with ``skip_orig_wrong``: the original is wrong on the seed,
            which is set aside without a search), ``"max_queries"``, ``"timeout"`` or ``"budget"`` (the change budget rejected
            :data:`REJECT_LIMIT` candidates in a row). ``queries`` are the search's; with a trigger,
            ``extra`` holds ``minimize_queries``, ``distances`` (L0, L2, L∞, SSIM to the seed, after
            minimisation) and ``distances_before`` (before it).

        Raises:
            InputError: the seed does not fit the models, or ``require`` needs a missing label.
        """
        if label is not None and label < 0:
            label = None
        if self.require == "compressed-error" and label is None:
            raise InputError("require='compressed-error' needs the seed's true label (the data has no labels)")
        self._label = None if label is None else int(label)
        res = self._search(x_seed, seed=seed)
        if (res.status == "found" and res.trigger is not None and res.seed is not None
                and res.orig_probs is not None and res.comp_probs is not None):
            x0 = res.seed
            res.extra["distances_before"] = trigger_distances(x0, res.trigger)
            if self.minimize:
                t1 = time.perf_counter()
                m = minimize_trigger(
                    x0, res.trigger, (res.orig_probs, res.comp_probs), self._query, self._triggers,
                    admit=(lambda x: self._admit(x0, x)) if self.budget.active else None,
                    integer=getattr(self, "pixels", "float") != "float",
                    prefer=self._prefers_compressed_error if self.prefer_compressed_error else None,
                    method=getattr(self, "minimize_method", DEFAULT_METHOD),
                    descent=getattr(self, "descent", 0),
                    max_queries=getattr(self, "minimize_max_queries", DEFAULT_MAX_QUERIES),
                    flat=DEFAULT_FLAT if getattr(self, "minimize_flat", False) else (),
                    pixel_order=getattr(self, "minimize_pixel_order", DEFAULT_PIXEL_ORDER),
                )
                res.trigger, res.orig_probs, res.comp_probs = m.x, m.orig_probs, m.comp_probs
                res.orig_label, res.comp_label = int(np.argmax(m.orig_probs)), int(np.argmax(m.comp_probs))
                res.extra.update(minimize_queries=m.queries, minimize_alpha=m.alpha, minimize_preferred=m.preferred,
                                 minimize_time_s=time.perf_counter() - t1)
            res.extra["distances"] = trigger_distances(x0, res.trigger)
        if res.success and self._label is not None:
            res.extra["compressed_error"] = bool(res.orig_label == self._label)
        return res

    def _search(self, x_seed: np.ndarray, *, seed: SeedLike = None) -> SearchResult:  # pragma: no cover
        """The algorithm proper (subclasses): one seed, no minimisation."""
        raise NotImplementedError
