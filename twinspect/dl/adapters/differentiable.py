"""Gradient access to a classifier: for the model-reuse baselines that generate inputs on the first
model of a pair (ModelDiff's input-pair search, DeepJudge's adversarial test cases), and for the
guided deviation search (:mod:`twinspect.dl.deviate.guided`), which takes its first steps on the
original model's (or a surrogate's) gradient.

All of them are *white-box on one model* (the one its owner has: the victim, the original) and
black-box on the other: only that model needs gradients. Here a model has
gradients when it is a float ``torch`` module (:class:`~twinspect.dl.adapters.torch.TorchClassifier`)
or, when asked (``keras=True``: the guided deviation search asks, the model-reuse baselines do not),
a Keras 3 model on the torch backend (:class:`~twinspect.dl.adapters.keras.KerasClassifier`, called
eagerly), whose output can be back-propagated to the input; every other format (ONNX, TFLite,
quantised TorchScript) answers None with the reason.

Inputs of the returned function are in the **unit pixel scale**: float32 torch tensors (N, H, W, C)
with values in [0, 1] (the 0–255 pixels divided by 255), the scale both papers' attacks bound their
perturbations in. The model's own preprocessing (:class:`~twinspect.dl.adapters.base.Preprocess`) is
applied inside, differentiably.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twinspect.dl.adapters.base import Classifier

#: ``f(x) -> scores``: (N, H, W, C) float32 tensor in [0, 1] → (N, K) float32 tensor of logits (or of
#: log-probabilities when the model outputs probabilities).
LogitFn = Callable[[Any], Any]


def logit_fn(clf: Classifier, *, keras: bool = False) -> tuple[LogitFn | None, str | None]:
    """A differentiable forward pass of ``clf`` from unit-scale pixels, or why there is none.

    Args:
        clf: any classifier.
        keras: also differentiate a Keras model on the torch backend (the guided deviation search
            does; the model-reuse baselines keep to torch models, as measured in their results).

    Returns:
        ``(f, None)`` with ``f`` as in :data:`LogitFn`, or ``(None, reason)`` (one line) when the model
        is neither a torch module nor a Keras model on the torch backend, or its output cannot be
        back-propagated to the input (a probe batch of one zero image is tried once here).
    """
    module = getattr(clf, "module", None)
    framework = getattr(clf, "framework", None)
    keras_model = getattr(clf, "model", None) if framework == "keras" and keras else None
    if keras_model is not None and clf.describe().get("backend") == "torch":
        # Keras 3 on the torch backend: the model's call is a torch computation, eager and differentiable
        def module(z: Any) -> Any:
            return keras_model(z, training=False)
    elif framework != "torch" or module is None:
        fmt = clf.describe().get("format") or type(clf).__name__
        does = "a float torch model, or a Keras model on the torch backend, does" if keras else "a float torch model does"
        return None, f"needs input gradients of the first model; its {fmt} model gives none ({does})"
    import torch

    f = with_preprocess(clf, module)
    try:
        probe = torch.zeros((1, *clf.input_shape), dtype=torch.float32, requires_grad=True)
        (grad,) = torch.autograd.grad(f(probe).sum(), probe, allow_unused=True)
        if grad is None:
            return None, "needs input gradients of the first model; its output does not depend differentiably on the input"
    except Exception as exc:  # noqa: BLE001 - quantised or exported modules refuse autograd in many ways
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"needs input gradients of the first model; back-propagation failed: {msg[:120]}"
    return f, None


def with_preprocess(clf: Classifier, forward: Callable[[Any], Any]) -> LogitFn:
    """``forward`` behind ``clf``'s preprocessing, from unit-scale pixels: the :data:`LogitFn` of a model.

    Args:
        clf: the classifier whose preprocessing (:class:`~twinspect.dl.adapters.base.Preprocess`:
            pixel scale, mean, std, layout) and output kind apply.
        forward: the model's differentiable forward pass on its own input (preprocessed, in its
            layout) → its output, float torch (N, K) (a tuple or list: its first element).

    Returns:
        A :data:`LogitFn`: (N, H, W, C) float32 torch tensor in [0, 1] → (N, K) logits, or
        log-probabilities (clamped at 1e-12) when ``clf`` outputs probabilities. No check is made
        that ``forward`` back-propagates (:func:`logit_fn` probes it).
    """
    import torch

    pre = clf.preprocess
    mean = torch.tensor(pre.mean, dtype=torch.float32) if pre.mean else None
    std = torch.tensor(pre.std, dtype=torch.float32) if pre.std else None
    scale = 255.0 / float(pre.scale)
    probs = clf.output_kind == "probabilities"

    def f(x: Any) -> Any:
        z = x * scale
        if mean is not None:
            z = z - mean
        if std is not None:
            z = z / std
        if pre.layout == "NCHW":
            z = z.permute(0, 3, 1, 2)
        out = forward(z)
        if isinstance(out, (tuple, list)):
            out = out[0]
        out = out.float()
        return torch.log(out.clamp_min(1e-12)) if probs else out

    return f


__all__ = ["LogitFn", "logit_fn", "with_preprocess"]
