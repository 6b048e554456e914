"""Model adapters: one module per framework behind :class:`~twinspect.dl.adapters.base.Classifier`."""

from twinspect.dl.adapters.base import Classifier, Preprocess, check_compatible

__all__ = ["Classifier", "Preprocess", "check_compatible"]
