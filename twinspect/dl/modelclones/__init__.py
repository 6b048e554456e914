"""DL model clone analysis (capability 3, ``twinspect models``): Wu et al.'s three levels (ICPC 2020),
linear CKA, a calibrated reuse score, and the ModelDiff and DeepJudge baselines as their papers run them.

Entry point: :func:`compare_models` (``twinspect models compare``); the measures live one per module
(:mod:`.weights`, :mod:`.cka`, :mod:`.outputs`, :mod:`.modeldiff`, :mod:`.deepjudge`, :mod:`.source`,
:mod:`.reuse`; gradient access for the baselines in
:mod:`twinspect.dl.adapters.differentiable`), and
:mod:`.measures` is the one table of their names, levels, directions and reuse-score features.
Importing this package does not import torch or any model framework.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

# Names load on first use: importing the package (the CLI does, for every command) does not
# import scipy or the measures.
_LAZY: dict[str, str] = {
    "cka_map": "twinspect.dl.modelclones.cka",
    "gram": "twinspect.dl.modelclones.cka",
    "hsic_unbiased": "twinspect.dl.modelclones.cka",
    "linear_cka": "twinspect.dl.modelclones.cka",
    "model_cka": "twinspect.dl.modelclones.cka",
    "LEVELS": "twinspect.dl.modelclones.measures",
    "MEASURES": "twinspect.dl.modelclones.measures",
    "REGISTRY": "twinspect.dl.modelclones.measures",
    "reuse_features": "twinspect.dl.modelclones.measures",
    "CompareConfig": "twinspect.dl.modelclones.compare",
    "Comparison": "twinspect.dl.modelclones.compare",
    "compare_models": "twinspect.dl.modelclones.compare",
    "load_models": "twinspect.dl.modelclones.compare",
    "write_plots": "twinspect.dl.modelclones.compare",
    "ddv": "twinspect.dl.modelclones.modeldiff",
    "ddv_similarity": "twinspect.dl.modelclones.modeldiff",
    "profiling_pairs": "twinspect.dl.modelclones.modeldiff",
    "class_jaccard": "twinspect.dl.modelclones.outputs",
    "jsd": "twinspect.dl.modelclones.outputs",
    "label_jsd": "twinspect.dl.modelclones.outputs",
    "mean_input_jsd": "twinspect.dl.modelclones.outputs",
    "top1_agreement": "twinspect.dl.modelclones.outputs",
    "fit_params": "twinspect.dl.modelclones.reuse",
    "load_params": "twinspect.dl.modelclones.reuse",
    "reuse_score": "twinspect.dl.modelclones.reuse",
    "with_shared_weights": "twinspect.dl.modelclones.reuse",
    "DifferentArchitectures": "twinspect.dl.modelclones.weights",
    "WeightComparison": "twinspect.dl.modelclones.weights",
    "compare_weights": "twinspect.dl.modelclones.weights",
    "SharedKernels": "twinspect.dl.modelclones.weights",
    "shared_kernels": "twinspect.dl.modelclones.weights",
    "pruned_sub_kernels": "twinspect.dl.modelclones.weights",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
