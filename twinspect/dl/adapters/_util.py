"""Helpers shared by the framework adapters: load-time probing, error wrapping, layout choice."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from twinspect.dl.adapters.base import Classifier, Preprocess, looks_like_probabilities, resolve_preprocess
from twinspect.errors import ModelError

#: Seed of the random probe image (the probe must be the same on every load).
_PROBE_SEED = 20231


def load_error(path: str | Path | None, framework: str, exc: BaseException) -> ModelError:
    """A one-line :class:`ModelError` naming the file for an exception a framework raised at load."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 240:
        first = first[:237] + "..."
    detail = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    article = "an" if framework[:1].upper() in "AEIOU" else "a"
    return ModelError(f"cannot load as {article} {framework} model ({detail})", path)


def choose_preprocess(spec, layout: str | None, layout_from_model: bool) -> Preprocess:
    """Resolve ``spec`` and, when the layout is the model's to decide, set it to ``layout``.

    Args:
        spec: preset name, dict, :class:`Preprocess` or None (→ ``"unit"``).
        layout: the layout the model takes (``"NHWC"``/``"NCHW"``), or None when unknown.
        layout_from_model: True when ``spec`` is a preset name or None (presets are layout-neutral);
            an explicit dict/Preprocess keeps its own layout.
    """
    pre = resolve_preprocess(spec)
    if layout is not None and layout_from_model and pre.layout != layout:
        pre = dataclasses.replace(pre, layout="NCHW" if layout == "NCHW" else "NHWC")
    return pre


def check_shape_agrees(
    model_shape: Sequence[int | None] | None, given: Sequence[int] | None, what: str, path
) -> tuple[int, ...]:
    """Merge an (H, W, C) shape read from the model (None for unknown dims) with a given one.

    Raises:
        ModelError: they disagree, or a dimension stays unknown.
    """
    if model_shape is None and given is None:
        raise ModelError(f"the model does not declare its {what}; pass input_shape=(H, W, C)", path)
    if given is not None:
        given = tuple(int(s) for s in given)
        if len(given) != 3:
            raise ModelError(f"{what} must be (H, W, C), got {given}", path)
    if model_shape is None:
        return given  # type: ignore[return-value]
    model_shape = tuple(None if (s is None or (isinstance(s, int) and s < 0)) else int(s) for s in model_shape)
    if given is not None:
        for m, g in zip(model_shape, given):
            if m is not None and m != g:
                raise ModelError(f"the model takes {what} {_fmt(model_shape)}, but {given} was given", path)
        return given
    if any(s is None for s in model_shape):
        raise ModelError(f"the model's {what} {_fmt(model_shape)} has unknown dimensions; pass input_shape=(H, W, C)", path)
    return model_shape  # type: ignore[return-value]


def _fmt(shape) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"


def probe_batch(input_shape: Sequence[int]) -> np.ndarray:
    """Two fixed probe images (N=2, H, W, C) float32: all zeros and seeded uniform noise in 0–255."""
    rng = np.random.default_rng(_PROBE_SEED)
    x = np.zeros((2, *input_shape), dtype=np.float32)
    x[1] = rng.uniform(0, 255, size=input_shape).astype(np.float32)
    return x


def finish_load(clf: Classifier, declared_classes: int | None, path) -> Classifier:
    """Probe a freshly built classifier once; fix ``num_classes`` and ``output_kind``.

    Runs the model on :func:`probe_batch` (not counted in ``queries``). Checks that the output is a
    (2, K) score matrix with K >= 2, that K equals ``declared_classes`` when given, and resolves
    ``output_kind == "auto"`` from the probe output (rows in [0, 1] summing to 1 → probabilities).

    Raises:
        ModelError: the output is not (N, K) with K >= 2, or K differs from the declared count.
    """
    x = probe_batch(clf.input_shape)
    try:
        raw = np.asarray(clf._forward(clf.preprocess(x)))
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - any framework failure on a well-formed input
        text = str(exc).strip().splitlines()
        raise ModelError(
            f"model failed on a probe batch of shape (2, {', '.join(map(str, clf.input_shape))}) "
            f"in layout {clf.preprocess.layout} ({type(exc).__name__}: {text[0][:200] if text else ''})",
            path,
        ) from exc
    if raw.ndim != 2 or raw.shape[0] != 2 or raw.shape[1] < 2:
        raise ModelError(
            f"model output has shape {tuple(raw.shape)} for a batch of 2: not a probability or logit vector",
            path,
        )
    k = int(raw.shape[1])
    if declared_classes is not None and int(declared_classes) != k:
        raise ModelError(f"model outputs {k} scores but num_classes={declared_classes} was given", path)
    clf.num_classes = k
    if clf.output_kind == "auto":
        clf.output_kind = "probabilities" if looks_like_probabilities(raw) else "logits"
    return clf
