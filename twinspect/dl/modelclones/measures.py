"""The one registry of model clone analysis: every measure, its level and direction, the reuse-score
feature it feeds and how that feature is derived, and the list of levels.

:func:`~twinspect.dl.modelclones.compare.compare_models`, the ``twinspect models compare`` CLI, the
report and the benchmarks (``benchmarks/models_reuse.py``) all read these tables; none keeps a copy.

=====================  ==============  ==================  ===============  ======================
measure                level           higher is similar   reuse feature    feature value
=====================  ==============  ==================  ===============  ======================
code_pycode_similar    code            yes                 -
code_copydetect        code            yes                 -
code_token_lcs         code            yes                 -
weights_cosine         weights         yes                 ``weights``      the measure
weights_euclidean      weights         no                  -
weights_shared         weights         yes                 -
distill_cosine         weights         yes                 -
distill_euclidean      weights         no                  -
cka                    representation  yes                 ``cka``          the measure
io_label_jsd           io              no                  -
io_mean_jsd            io              no                  ``io_jsd``       1 − the measure
io_jaccard             io              yes                 -
io_top1_agreement      io              yes                 ``io_agreement`` the measure
io_logprob_cosine      io              yes                 ``io_logprob``   the measure
io_ddv_random_pairs    io              yes                 ``ddv_random``   the measure
io_logprob_margin_one  io              yes                 ``margin_one``   the measure
io_logprob_margin_both io              yes                 ``margin_both``  the measure
modeldiff              baselines       yes                 -
deepjudge_robd         baselines       no                  -
deepjudge_jsd          baselines       no                  -
reuse                  reuse           yes                 -
=====================  ==============  ==================  ===============  ======================

``io_logprob_margin_one`` / ``io_logprob_margin_both`` are zoo-relative: how much nearer (on the
``−log(1 − x)`` scale) the pair's ``io_logprob_cosine`` is than the nearer / farther of the two models
is to any third model of the same run (:func:`twinspect.dl.modelclones.reuse.zoo_margins`; undefined,
and skipped with the reason, in a run of fewer than three comparable models).
``io_ddv_random_pairs`` is a decision distance vector on *random* pairs of the comparison inputs (the
DDV of ModelDiff without its input-pair search); the ``baselines`` level holds the two published
reuse detectors as their papers run them, each *directional* (row = the victim / source model the
test inputs are generated on, with its gradients; column = the suspect, queried as a black box):
``modeldiff`` (:mod:`twinspect.dl.modelclones.modeldiff`, Li et al., ISSTA 2021) and DeepJudge's
black-box metrics ``deepjudge_robd`` / ``deepjudge_jsd`` (:mod:`twinspect.dl.modelclones.deepjudge`,
Chen et al., S&P 2022).

This module imports only the standard library (the CLI imports it for ``--levels``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: The levels of the analysis, in report order (``--levels``, :attr:`CompareConfig.levels`).
LEVELS: tuple[str, ...] = ("code", "weights", "representation", "io", "baselines", "reuse")


@dataclass(frozen=True)
class Measure:
    """One measure of a model pair.

    Attributes:
        name: key in :attr:`Comparison.measures` and in the JSON/CSV reports.
        level: one of :data:`LEVELS`.
        higher_is_similar: True for similarities, False for distances/divergences.
        unit_range: values lie in [0, 1] (heatmaps use a fixed 0–1 colour scale); False for unbounded
            distances.
        feature: the reuse-score feature (:data:`twinspect.dl.modelclones.reuse.FEATURE_SETS`) this
            measure feeds, or None.
        complement: the feature is ``1 − value`` (a divergence in [0, 1] turned into a similarity)
            instead of the value itself.
    """

    name: str
    level: str
    higher_is_similar: bool
    unit_range: bool = True
    feature: str | None = None
    complement: bool = False

    def feature_value(self, value: float | None) -> float | None:
        """The reuse-score feature of a value of this measure: None for a missing or non-finite value.

        Raises:
            ValueError: this measure feeds no feature.
        """
        if self.feature is None:
            raise ValueError(f"measure {self.name!r} feeds no reuse-score feature")
        if value is None or not math.isfinite(float(value)):
            return None
        return 1.0 - float(value) if self.complement else float(value)


#: Every measure, in report order (the order of :attr:`Comparison.measures`).
REGISTRY: tuple[Measure, ...] = (
    Measure("code_pycode_similar", "code", True),
    Measure("code_copydetect", "code", True),
    Measure("code_token_lcs", "code", True),
    Measure("weights_cosine", "weights", True, feature="weights"),
    Measure("weights_euclidean", "weights", False, unit_range=False),
    Measure("weights_shared", "weights", True),
    Measure("distill_cosine", "weights", True),
    Measure("distill_euclidean", "weights", False, unit_range=False),
    Measure("cka", "representation", True, feature="cka"),
    Measure("io_label_jsd", "io", False),
    Measure("io_mean_jsd", "io", False, feature="io_jsd", complement=True),
    Measure("io_jaccard", "io", True),
    Measure("io_top1_agreement", "io", True, feature="io_agreement"),
    Measure("io_logprob_cosine", "io", True, feature="io_logprob"),
    Measure("io_ddv_random_pairs", "io", True, feature="ddv_random"),
    Measure("io_logprob_margin_one", "io", True, unit_range=False, feature="margin_one"),
    Measure("io_logprob_margin_both", "io", True, unit_range=False, feature="margin_both"),
    Measure("io_peer_z_min", "io", True, unit_range=False),
    Measure("io_peer_z_max", "io", True, unit_range=False),
    Measure("modeldiff", "baselines", True),
    Measure("deepjudge_robd", "baselines", False),
    Measure("deepjudge_jsd", "baselines", False),
    Measure("reuse", "reuse", True),
)

#: measure name → :class:`Measure`.
BY_NAME: dict[str, Measure] = {m.name: m for m in REGISTRY}

#: measure name → (level, higher_is_similar): the older view, kept for ``compare.MEASURES``.
MEASURES: dict[str, tuple[str, bool]] = {m.name: (m.level, m.higher_is_similar) for m in REGISTRY}

#: reuse-score feature → the measure it is derived from.
FEATURES: dict[str, str] = {m.feature: m.name for m in REGISTRY if m.feature is not None}


def names(level: str) -> tuple[str, ...]:
    """The measures of one level, in report order (the distillation measures belong to ``weights``).

    Raises:
        ValueError: ``level`` is not one of :data:`LEVELS`.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    return tuple(m.name for m in REGISTRY if m.level == level)


def reuse_features(values: Mapping[str, float | None]) -> dict[str, float | None]:
    """The reuse-score features of one pair from its measure values.

    Args:
        values: measure name → value (None, NaN or a missing key where the measure does not apply).

    Returns:
        Every feature of :data:`FEATURES` → its value (None where the measure is missing or not finite),
        ready for :func:`twinspect.dl.modelclones.reuse.reuse_score`.
    """
    return {f: BY_NAME[name].feature_value(values.get(name)) for f, name in FEATURES.items()}


__all__ = ["BY_NAME", "FEATURES", "LEVELS", "MEASURES", "REGISTRY", "Measure", "names", "reuse_features"]
