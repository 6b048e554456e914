"""The :class:`Classifier` interface every model adapter implements.

A classifier takes a batch of images ``(N, H, W, C)`` (uint8 0–255 or float in the same pixel
scale) and returns probability vectors ``(N, K)`` float64. It owns its preprocessing
(:class:`Preprocess`: scale, mean/std, layout), turns logits into probabilities explicitly (and says
so in :attr:`Classifier.output_kind`), and counts the inputs it has answered in
:attr:`Classifier.queries`.

Adapters (one module per framework, Foolbox-style) only implement :meth:`Classifier._forward`, and
:meth:`Classifier._load_model` to expose the general :class:`~twinspect.dl.adapters.loaded.LoadedModel`
underneath (weights, intermediate activations, input specs): :attr:`Classifier.loaded`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

from twinspect.dl.adapters.loaded import LoadedModel, NotSupportedError, Weights
from twinspect.errors import IncompatibleModelsError, InputError, ModelError

OutputKind = Literal["auto", "probabilities", "logits"]


@dataclass(frozen=True)
class Preprocess:
    """How raw pixels become model input.

    ``model_input = ((x / scale) - mean) / std``, then transposed to ``layout``.

    Attributes:
        scale: divisor applied first (255 for "x/255", 1 for raw pixels).
        mean: per-channel mean subtracted after scaling (length C, or empty for none).
        std: per-channel std divided after the mean (length C, or empty for none).
        layout: ``"NHWC"`` (Keras, TFLite) or ``"NCHW"`` (PyTorch).
    """

    scale: float = 255.0
    mean: tuple[float, ...] = field(default_factory=tuple)
    std: tuple[float, ...] = field(default_factory=tuple)
    layout: Literal["NHWC", "NCHW"] = "NHWC"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Apply to a (N, H, W, C) batch; returns float32 in :attr:`layout`."""
        out: np.ndarray = x.astype(np.float32) / np.float32(self.scale)
        if self.mean:
            out = out - np.asarray(self.mean, dtype=np.float32)
        if self.std:
            out = out / np.asarray(self.std, dtype=np.float32)
        if self.layout == "NCHW":
            out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Preprocess:
        return cls(
            scale=float(d.get("scale", 255.0)),
            mean=tuple(d.get("mean", ())),
            std=tuple(d.get("std", ())),
            layout=d.get("layout", "NHWC"),
        )


#: Named preprocessing presets (``--preprocess NAME`` on the CLI).
PRESETS: dict[str, Preprocess] = {
    "raw": Preprocess(scale=1.0),
    "unit": Preprocess(scale=255.0),  # x/255 — MNIST models of DFlare/DiffChaser
    "mnist": Preprocess(scale=255.0),
    # ResNet-20 of DFlare/DiffChaser on CIFAR-10: per-channel mean/std in the 0–255 pixel scale.
    "cifar10-dflare": Preprocess(
        scale=1.0, mean=(125.307, 122.95, 113.865), std=(62.9932, 62.0887, 66.7048)
    ),
    "unit-nchw": Preprocess(scale=255.0, layout="NCHW"),
    "cifar10-nchw": Preprocess(
        scale=255.0, mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616), layout="NCHW"
    ),
}


def resolve_preprocess(spec: str | dict | Preprocess | None, default: Preprocess | None = None) -> Preprocess:
    """Turn a preset name, dict or :class:`Preprocess` into a :class:`Preprocess`.

    Raises:
        InputError: unknown preset name.
    """
    if spec is None:
        return default or PRESETS["unit"]
    if isinstance(spec, Preprocess):
        return spec
    if isinstance(spec, dict):
        return Preprocess.from_dict(spec)
    if spec not in PRESETS:
        raise InputError(f"unknown preprocessing preset {spec!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[spec]


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a (N, K) array, float64 (``scipy.special.softmax``, numerically stable)."""
    from scipy.special import softmax as _scipy_softmax

    return _scipy_softmax(np.asarray(z, dtype=np.float64), axis=1)


#: How far from 1 a row of a quantised softmax may sum: an 8-bit output (step 1/256, as TFLite's full
#: int8 softmax emits) rounds each of K entries by up to half a step, e.g. 255/256 + 9 · 0 for a confident row.
QUANTISED_SUM_ATOL = 0.03


def looks_like_probabilities(out: np.ndarray, atol: float = 1e-3, sum_atol: float = QUANTISED_SUM_ATOL) -> bool:
    """True when every finite row of ``out`` is in [−atol, 1 + atol] and sums to 1 within ``sum_atol``.

    ``sum_atol`` is wider than ``atol`` so that a quantised softmax (8-bit steps of 1/256, whose rows
    sum to e.g. 0.996) is read as the probabilities it is, not as logits to be put through a softmax
    again (which squashes them to [0.085, 0.231] for K = 10 and hides the model's margin).
    """
    out = np.asarray(out, dtype=np.float64)
    finite = np.all(np.isfinite(out), axis=1)
    if not finite.any():
        return False
    rows = out[finite]
    return bool(np.all(rows >= -atol) and np.all(rows <= 1 + atol) and np.allclose(rows.sum(1), 1.0, atol=sum_atol))


class Classifier(ABC):
    """An image classifier answering probability vectors, counting its queries.

    Args:
        input_shape: (H, W, C) of one image as the *user* passes it (always channels-last).
        num_classes: K.
        preprocess: pixel preprocessing owned by the model.
        output: ``"probabilities"``, ``"logits"`` or ``"auto"`` (decided once, on a probe batch, at
            the first call; the decision is stored in :attr:`output_kind`).
        name: display name (file name by default).

    Attributes:
        queries: number of images answered so far (one per row of every ``predict_proba`` call).
        output_kind: ``"probabilities"`` or ``"logits"`` after resolution.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        preprocess: Preprocess,
        output: OutputKind = "auto",
        name: str = "model",
    ):
        self.input_shape = tuple(int(s) for s in input_shape)
        self.num_classes = int(num_classes)
        self.preprocess = preprocess
        self.output_kind: OutputKind = output
        self.name = name
        self.queries = 0

    # -- to implement -------------------------------------------------------------------------
    @abstractmethod
    def _forward(self, batch: np.ndarray) -> np.ndarray:
        """Run the model on a preprocessed float32 batch (in ``preprocess.layout``); return (N, K)."""

    # -- public API ---------------------------------------------------------------------------
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities of a batch.

        Args:
            x: (N, H, W, C) or (H, W, C) uint8 / float array in the 0–255 pixel scale (a (N, H, W)
                batch is accepted for single-channel models).

        Returns:
            float64 array (N, K); rows sum to 1 (rows may contain NaN if the model produced NaN —
            callers treat that as a finding, not an error).

        Raises:
            InputError: the batch does not have this model's input shape.
            ModelError: the model's output is not a (N, K) score vector.
        """
        x = self._check_batch(x)
        raw = np.asarray(self._forward(self.preprocess(x)))
        self.queries += x.shape[0]
        if raw.ndim != 2 or raw.shape[0] != x.shape[0] or raw.shape[1] != self.num_classes:
            raise ModelError(
                f"model output has shape {tuple(raw.shape)}, expected ({x.shape[0]}, {self.num_classes}): "
                "not a probability or logit vector",
                self.name,
            )
        if self.output_kind == "auto":
            self.output_kind = "probabilities" if looks_like_probabilities(raw) else "logits"
        if self.output_kind == "logits":
            return softmax(raw)
        return raw.astype(np.float64)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Top-1 labels (N,) int64 of a batch (see :meth:`predict_proba`)."""
        return np.argmax(self.predict_proba(x), axis=1)

    def reset_queries(self) -> None:
        self.queries = 0

    # -- the general model underneath ---------------------------------------------------------
    def _load_model(self) -> LoadedModel:
        """Build the :class:`LoadedModel` this classifier runs (adapters override)."""
        raise NotSupportedError(f"{type(self).__name__} exposes no general model (weights, activations)", self.name)

    @property
    def loaded(self) -> LoadedModel:
        """The general :class:`~twinspect.dl.adapters.loaded.LoadedModel` under this classifier
        (built on first access, sharing the framework object where it can).

        Raises:
            NotSupportedError: the classifier is not backed by a model file or module.
        """
        model = getattr(self, "_loaded", None)
        if model is None:
            model = self._load_model()
            self._loaded = model
        return model

    def weights(self) -> Weights:
        """Per-layer weights of the model, dequantised (see :meth:`LoadedModel.weights`)."""
        return self.loaded.weights()

    def layer_names(self) -> list[str]:
        """Layers whose outputs :meth:`activations` can return.

        Raises:
            NotSupportedError: the format gives no access to intermediate outputs.
        """
        return self.loaded.layer_names()

    def activations(self, x: np.ndarray, layers: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Intermediate outputs on a batch of images in the 0–255 pixel scale (as :meth:`predict_proba`).

        The batch goes through this classifier's :class:`Preprocess` first. Not counted in
        :attr:`queries`.

        Returns:
            ``{layer: float32 (N, ...)}`` (see :meth:`LoadedModel.activations`).

        Raises:
            InputError: wrong image shape or unknown layer.
            NotSupportedError: the format gives no access to intermediate outputs.
        """
        return self.loaded.activations(self.preprocess(self._check_batch(x)), layers)

    def describe(self) -> dict:
        """Metadata for reports: name, adapter, input shape, classes, output kind, preprocessing."""
        return {
            "name": self.name,
            "adapter": type(self).__name__,
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "output_kind": self.output_kind,
            "preprocess": self.preprocess.to_dict(),
        }

    def _check_batch(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype.kind not in "uif":
            raise InputError(f"images must be numeric (uint8 or float), got dtype {x.dtype}")
        gray = self.input_shape[-1] == 1
        if x.ndim == 3 and gray and tuple(x.shape) != self.input_shape and tuple(x.shape[1:]) == self.input_shape[:2]:
            x = x[..., None]  # (N, H, W) batch of a single-channel model
        elif x.ndim == 3:
            x = x[None]  # one (H, W, C) image
        elif x.ndim == 2 and gray:
            x = x[None, ..., None]  # one (H, W) grayscale image
        if x.ndim != 4 or tuple(x.shape[1:]) != self.input_shape:
            raise InputError(
                f"images of shape {tuple(x.shape)} do not fit model {self.name!r} "
                f"with input shape (N, {', '.join(map(str, self.input_shape))})"
            )
        return x

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, input_shape={self.input_shape}, "
            f"num_classes={self.num_classes}, output_kind={self.output_kind!r})"
        )


def check_compatible(a: Classifier, b: Classifier) -> None:
    """Raise if two classifiers cannot be compared input-for-input.

    Raises:
        IncompatibleModelsError: different input shapes or class counts; the message names both.
    """
    if a.input_shape != b.input_shape:
        raise IncompatibleModelsError(
            f"input shapes differ: {a.name} takes {a.input_shape}, {b.name} takes {b.input_shape}"
        )
    if a.num_classes != b.num_classes:
        raise IncompatibleModelsError(
            f"class counts differ: {a.name} has {a.num_classes} classes, {b.name} has {b.num_classes}"
        )
