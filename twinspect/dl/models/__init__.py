"""DL model clone analysis (capability 3, ``twinspect models``): Wu et al.'s three levels (ICPC 2020),
linear CKA, ModelDiff's DDV baseline and a calibrated reuse score.

Entry point: :func:`compare_models` (``twinspect models compare``); the measures live one per module
(:mod:`.weights`, :mod:`.cka`, :mod:`.outputs`, :mod:`.modeldiff`, :mod:`.source`, :mod:`.reuse`).
Importing this package does not import torch or any model framework.
"""

from __future__ import annotations

from twinspect.dl.models.cka import cka_map, gram, hsic_unbiased, linear_cka, model_cka
from twinspect.dl.models.compare import MEASURES, CompareConfig, Comparison, compare_models, load_models, write_plots
from twinspect.dl.models.modeldiff import ddv, ddv_similarity, profiling_pairs
from twinspect.dl.models.outputs import class_jaccard, jsd, label_jsd, mean_input_jsd, top1_agreement
from twinspect.dl.models.reuse import fit_params, load_params, reuse_score
from twinspect.dl.models.weights import DifferentArchitectures, WeightComparison, compare_weights

__all__ = [
    "MEASURES",
    "CompareConfig",
    "Comparison",
    "DifferentArchitectures",
    "WeightComparison",
    "cka_map",
    "class_jaccard",
    "compare_models",
    "compare_weights",
    "ddv",
    "ddv_similarity",
    "fit_params",
    "gram",
    "hsic_unbiased",
    "jsd",
    "label_jsd",
    "linear_cka",
    "load_models",
    "load_params",
    "mean_input_jsd",
    "model_cka",
    "profiling_pairs",
    "reuse_score",
    "top1_agreement",
    "write_plots",
]
