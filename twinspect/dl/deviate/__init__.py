"""Deviated-behaviour search for compressed models: margin and guided search, DFlare, DiffChaser, repair (Drepair).

* :class:`MarginSearch` — the black-box search (the default when the original gives no input
  gradient): the compressed model's margin near the seed, the
  original kept right (our own, after Square Attack);
* :class:`GuidedSearch` — the margin search started where the original's (or a surrogate's)
  input gradient meets its decision boundary (white-box on the original only; the default when
  the original gives a gradient, ``twinspect deviate -a auto``);
* :class:`DFlare` — Tian et al., "Finding Deviated Behaviors of the Compressed DNN Models for
  Image Classifications", ACM TOSEM 2023;
* :class:`DiffChaser` — Xie, Ma, Wang, Li, Liu, Li, "DiffChaser: Detecting Disagreements for Deep
  Neural Networks", IJCAI 2019;
* :class:`PairSearch` — their shared base (budgets, query counting, result);
* :func:`run_search` — many seeds into a resumable run directory; :func:`summarize` its records;
* :func:`repair_run` — Drepair (Tian et al., TOSEM 2023, Sec. 5) on a run's triggering inputs.

Sub-modules are imported on first use of a name.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "PairSearch": "twinspect.dl.deviate.pair_search",
    "DFlare": "twinspect.dl.deviate.dflare",
    "MarginSearch": "twinspect.dl.deviate.margin",
    "GuidedSearch": "twinspect.dl.deviate.guided",
    "DiffChaser": "twinspect.dl.deviate.diffchaser",
    "SearchResult": "twinspect.dl.deviate.results",
    "summarize": "twinspect.dl.deviate.results",
    "run_search": "twinspect.dl.deviate.runner",
    "repair_run": "twinspect.dl.deviate.repair",
    "load_repaired": "twinspect.dl.deviate.repair",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
