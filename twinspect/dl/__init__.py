"""Deep-learning side: model adapters, data, model zoo and compression, deviated-behaviour search.

Main entry points (loaded on first use, so ``import twinspect.dl`` imports neither torch nor any
other framework):

* :func:`load_classifier` — open a model file (Keras, TFLite, ONNX, TorchScript) as a
  :class:`Classifier` (``predict_proba`` on raw NHWC images → (N, C) float probabilities);
* :func:`load_images` — a dataset by name (``mnist``, ``cifar10`` … from the shared data) or ``.npz``;
* :func:`train_model` — train a zoo architecture and save it as TorchScript + metadata;
* :func:`compress_model` — quantise, prune or distil a saved model (one function per method:
  :func:`quantize_model`, :func:`prune_model`, :func:`distill_model`);
* :class:`DFlare`, :class:`DiffChaser` — deviated-behaviour searches on one seed;
  :func:`run_search` — a whole run over many seeds into a run directory;
* :func:`repair_run` — Drepair-style repair of a run's compressed model; :func:`load_repaired`.

Library functions are quiet by default (``quiet=True``; progress on stderr only when asked) and
never write to stdout. Later capabilities (model clone analysis, DL-library differential testing)
live beside these sub-packages and reuse :mod:`twinspect.dl.adapters`.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "load_classifier": "twinspect.dl.adapters",
    "Classifier": "twinspect.dl.adapters",
    "load_images": "twinspect.dl.data",
    "train_model": "twinspect.dl.train",
    "compress_model": "twinspect.dl.compress",
    "quantize_model": "twinspect.dl.compress",
    "prune_model": "twinspect.dl.compress",
    "distill_model": "twinspect.dl.compress",
    "DFlare": "twinspect.dl.deviate.dflare",
    "DiffChaser": "twinspect.dl.deviate.diffchaser",
    "SearchResult": "twinspect.dl.deviate.results",
    "run_search": "twinspect.dl.deviate.runner",
    "repair_run": "twinspect.dl.deviate.repair",
    "load_repaired": "twinspect.dl.deviate.repair",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
