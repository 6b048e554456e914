"""DL model clone analysis (capability 3, ``twinspect models``): Wu et al.'s three levels (ICPC 2020),
linear CKA, ModelDiff's DDV baseline and a calibrated reuse score.

Entry point: :func:`compare_models` (``twinspect models compare``); the measures live one per module
(:mod:`.weights`, :mod:`.cka`, :mod:`.outputs`, :mod:`.modeldiff`, :mod:`.source`, :mod:`.reuse`).
Importing this package does not import torch or any model framework.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

# Names load on first use: importing the package (the CLI does, for every command) does not
# import scipy or the measures.
_LAZY: dict[str, str] = {
    "cka_map": "twinspect.dl.models.cka",
    "gram": "twinspect.dl.models.cka",
    "hsic_unbiased": "twinspect.dl.models.cka",
    "linear_cka": "twinspect.dl.models.cka",
    "model_cka": "twinspect.dl.models.cka",
    "MEASURES": "twinspect.dl.models.compare",
    "CompareConfig": "twinspect.dl.models.compare",
    "Comparison": "twinspect.dl.models.compare",
    "compare_models": "twinspect.dl.models.compare",
    "load_models": "twinspect.dl.models.compare",
    "write_plots": "twinspect.dl.models.compare",
    "ddv": "twinspect.dl.models.modeldiff",
    "ddv_similarity": "twinspect.dl.models.modeldiff",
    "profiling_pairs": "twinspect.dl.models.modeldiff",
    "class_jaccard": "twinspect.dl.models.outputs",
    "jsd": "twinspect.dl.models.outputs",
    "label_jsd": "twinspect.dl.models.outputs",
    "mean_input_jsd": "twinspect.dl.models.outputs",
    "top1_agreement": "twinspect.dl.models.outputs",
    "fit_params": "twinspect.dl.models.reuse",
    "load_params": "twinspect.dl.models.reuse",
    "reuse_score": "twinspect.dl.models.reuse",
    "DifferentArchitectures": "twinspect.dl.models.weights",
    "WeightComparison": "twinspect.dl.models.weights",
    "compare_weights": "twinspect.dl.models.weights",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
