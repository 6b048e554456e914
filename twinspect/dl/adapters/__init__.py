"""Model adapters: one module per framework behind :class:`~twinspect.dl.adapters.base.Classifier`.

:func:`load_classifier` opens a model file by its suffix (Foolbox 3's ``models/`` layout):

=====================================  ===================================================
suffix                                 adapter
=====================================  ===================================================
``.h5`` ``.hdf5`` ``.keras``           :class:`~twinspect.dl.adapters.keras.KerasClassifier`
``.tflite`` ``.lite``                  :class:`~twinspect.dl.adapters.tflite.TFLiteClassifier`
``.onnx``                              :class:`~twinspect.dl.adapters.onnx.ONNXClassifier`
``.pt`` ``.pth`` ``.ts`` ``.pt2``      :class:`~twinspect.dl.adapters.torch.TorchClassifier`
=====================================  ===================================================

The framework modules are imported lazily (importing this package does not import torch, keras,
LiteRT or ONNX Runtime).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from twinspect.dl.adapters.base import (
    PRESETS,
    Classifier,
    OutputKind,
    Preprocess,
    check_compatible,
    resolve_preprocess,
)
from twinspect.dl.adapters.metadata import read_metadata, sidecar_path, write_metadata
from twinspect.errors import InputError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from twinspect.dl.adapters.keras import KerasClassifier
    from twinspect.dl.adapters.onnx import ONNXClassifier
    from twinspect.dl.adapters.tflite import TFLiteClassifier
    from twinspect.dl.adapters.torch import TorchClassifier

logger = logging.getLogger("twinspect")

#: File suffix → framework.
SUFFIXES: dict[str, str] = {
    ".h5": "keras",
    ".hdf5": "keras",
    ".keras": "keras",
    ".tflite": "tflite",
    ".lite": "tflite",
    ".onnx": "onnx",
    ".pt": "torch",
    ".pth": "torch",
    ".ts": "torch",
    ".pt2": "torch",
}


def _adapter_class(framework: str):
    if framework == "keras":
        from twinspect.dl.adapters.keras import KerasClassifier

        return KerasClassifier
    if framework == "tflite":
        from twinspect.dl.adapters.tflite import TFLiteClassifier

        return TFLiteClassifier
    if framework == "onnx":
        from twinspect.dl.adapters.onnx import ONNXClassifier

        return ONNXClassifier
    from twinspect.dl.adapters.torch import TorchClassifier

    return TorchClassifier


def load_classifier(
    path: str | Path,
    *,
    preprocess: str | dict | Preprocess | None = None,
    output: OutputKind = "auto",
    name: str | None = None,
    input_shape: Sequence[int] | None = None,
    num_classes: int | None = None,
) -> Classifier:
    """Open a model file as a :class:`Classifier`, choosing the adapter by the file suffix.

    Metadata (the sidecar ``<file>.json`` or JSON embedded in TorchScript/ONNX, see
    :mod:`twinspect.dl.adapters.metadata`) supplies ``preprocess``, ``output``, ``input_shape`` and
    ``num_classes``; explicit arguments override it. Without metadata, preprocessing defaults to
    ``"unit"`` (x/255; in NCHW for torch models). The model is probed once with a batch of two
    images to check that it outputs (N, K) class scores and, when ``output="auto"`` and neither the
    metadata nor (for Keras) the model config say so, whether they are probabilities or logits. When
    they are logits, :meth:`Classifier.predict_proba` applies a softmax and an INFO line is logged
    on the ``"twinspect"`` logger.

    Args:
        path: model file (``.h5 .hdf5 .keras .tflite .lite .onnx .pt .pth .ts .pt2``).
        preprocess: preset name (see :data:`~twinspect.dl.adapters.base.PRESETS`), dict or
            :class:`Preprocess`.
        output: ``"auto"``, ``"probabilities"`` or ``"logits"``.
        name: display name (default: the file name).
        input_shape: (H, W, C) channels-last; required for a torch file without metadata.
        num_classes: K; checked against the model's output.

    Returns:
        A ready classifier; ``describe()["output_kind"]`` shows the output decision.

    Raises:
        InputError: the file does not exist, is a directory or cannot be read; unknown preprocessing
            preset; malformed sidecar JSON.
        ModelError: unknown suffix (the message lists the supported ones), a file the framework
            cannot load (corrupt, wrong format), an output that is not (N, K) with K >= 2, shapes
            that disagree with the metadata/arguments, a torch file without input shape.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("model file does not exist", path)
    if path.is_dir():
        raise InputError("is a directory, not a model file", path)
    if not os.access(path, os.R_OK):
        raise InputError("cannot read model file (permission denied)", path)
    framework = SUFFIXES.get(path.suffix.lower())
    if framework is None:
        raise ModelError(
            f"unknown model file suffix {path.suffix or '(none)'!r}; supported: {', '.join(SUFFIXES)}", path
        )
    meta = read_metadata(path) or {}
    pre_spec = preprocess if preprocess is not None else meta.get("preprocess")
    if isinstance(pre_spec, str):
        resolve_preprocess(pre_spec)  # unknown preset → InputError before loading anything
    out = output if output != "auto" else meta.get("output", "auto")
    shape = input_shape if input_shape is not None else meta.get("input_shape")
    k = num_classes if num_classes is not None else meta.get("num_classes")
    kwargs: dict[str, Any] = dict(
        preprocess=pre_spec, output=out, name=name or path.name, input_shape=shape, num_classes=k
    )
    clf = _adapter_class(framework).load(path, **kwargs)
    if clf.output_kind == "logits":
        logger.info("%s: the model outputs logits; predict_proba applies a softmax", clf.name)
    return clf


def __getattr__(name: str):  # lazy access to the adapter classes
    classes = {
        "KerasClassifier": "keras",
        "TFLiteClassifier": "tflite",
        "ONNXClassifier": "onnx",
        "TorchClassifier": "torch",
    }
    if name in classes:
        return _adapter_class(classes[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PRESETS",
    "SUFFIXES",
    "Classifier",
    "KerasClassifier",
    "ONNXClassifier",
    "Preprocess",
    "TFLiteClassifier",
    "TorchClassifier",
    "check_compatible",
    "load_classifier",
    "read_metadata",
    "resolve_preprocess",
    "sidecar_path",
    "write_metadata",
]
