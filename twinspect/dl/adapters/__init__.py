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

Beneath the classifier view, :func:`load_model` opens any model file as a general
:class:`~twinspect.dl.adapters.loaded.LoadedModel` (input/output specs, ``forward``/``predict`` on
arrays in the model's own layout, ``weights()`` per layer, ``activations()`` per layer), with file
*formats* and *runtimes* as separate notions (:mod:`twinspect.dl.adapters.formats`); every
:class:`Classifier` exposes its model as ``clf.loaded``.

The framework modules are imported lazily (importing this package does not import torch, keras,
LiteRT or ONNX Runtime).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect.dl.adapters.base import (
    PRESETS,
    Classifier,
    OutputKind,
    Preprocess,
    check_compatible,
    resolve_preprocess,
)
from twinspect.dl.adapters.formats import FORMATS, RUNTIMES, ModelFormat, Runtime, choose_runtime, detect_format
from twinspect.dl.adapters.loaded import LoadedModel, NotSupportedError, TensorSpec, Weights, dequantize
from twinspect.dl.adapters.metadata import read_metadata, sidecar_path, write_metadata
from twinspect.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from twinspect.dl.adapters.keras import KerasClassifier, KerasModel
    from twinspect.dl.adapters.onnx import ONNXClassifier, ONNXModel
    from twinspect.dl.adapters.tflite import TFLiteClassifier, TFLiteModel
    from twinspect.dl.adapters.torch import TorchClassifier, TorchModel

logger = logging.getLogger("twinspect")

#: File suffix → framework (adapter module), from :data:`~twinspect.dl.adapters.formats.FORMATS`.
SUFFIXES: dict[str, str] = {s: f.framework for f in FORMATS.values() for s in f.suffixes}


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
    _check_file(path)
    framework = detect_format(path).framework
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


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputError("model file does not exist", path)
    if path.is_dir():
        raise InputError("is a directory, not a model file", path)
    if not os.access(path, os.R_OK):
        raise InputError("cannot read model file (permission denied)", path)


def load_model(
    path: str | Path,
    *,
    runtime: str | None = None,
    name: str | None = None,
    input_shape: Sequence[int | None] | None = None,
) -> LoadedModel:
    """Open a model file as a general :class:`LoadedModel` (no image-classifier assumptions).

    The format is read from the suffix (:func:`~twinspect.dl.adapters.formats.detect_format`); the
    runtime is ``runtime`` or the format's default (:data:`~twinspect.dl.adapters.formats.FORMATS`).

    Args:
        path: model file (``.h5 .hdf5 .keras .tflite .lite .onnx .pt .pth .ts .pt2``).
        runtime: e.g. ``"onnx-reference"`` to run an ONNX file with ONNX's numpy evaluator.
        name: display name (default: the file name).
        input_shape: full input shape, batch first, for a torch file (TorchScript and torch.export
            files do not declare it); default from the twinspect metadata when present
            (channels-first for torch).

    Returns:
        The loaded model; ``.format``/``.runtime`` say how it was read and what runs it.

    Raises:
        InputError: missing, unreadable or directory path.
        ModelError: unknown suffix or runtime, or a file the format reader cannot load.
    """
    path = Path(path)
    _check_file(path)
    fmt = detect_format(path)
    rt = choose_runtime(fmt, runtime, path)
    nm = name or path.name
    if fmt.framework == "keras":
        from twinspect.dl.adapters.keras import KerasModel

        return KerasModel.load(path, runtime=rt, name=nm)
    if fmt.framework == "tflite":
        from twinspect.dl.adapters.tflite import TFLiteModel

        return TFLiteModel(path, name=nm)
    if fmt.framework == "onnx":
        from twinspect.dl.adapters.onnx import ONNXModel

        return ONNXModel(path, runtime=rt, name=nm)
    from twinspect.dl.adapters.torch import TorchModel

    shape: tuple[int | None, ...] | None = None
    if input_shape is not None:
        shape = tuple(input_shape)
    else:
        meta = read_metadata(path) or {}
        hwc = meta.get("input_shape")
        if hwc and len(hwc) == 3:
            layout = resolve_preprocess(meta.get("preprocess")).layout if meta.get("preprocess") else "NCHW"
            h, w, c = (int(v) for v in hwc)
            shape = (None, c, h, w) if layout == "NCHW" else (None, h, w, c)
    specs = (TensorSpec("input", shape, "float32"),) if shape is not None else ()
    return TorchModel.load(path, name=nm, inputs=specs)


def __getattr__(name: str):  # lazy access to the adapter classes
    classes = {
        "KerasClassifier": "keras",
        "TFLiteClassifier": "tflite",
        "ONNXClassifier": "onnx",
        "TorchClassifier": "torch",
    }
    if name in classes:
        return _adapter_class(classes[name])
    models = {"KerasModel": "keras", "TFLiteModel": "tflite", "ONNXModel": "onnx", "TorchModel": "torch"}
    if name in models:
        import importlib

        return getattr(importlib.import_module(f"twinspect.dl.adapters.{models[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMATS",
    "PRESETS",
    "RUNTIMES",
    "SUFFIXES",
    "Classifier",
    "KerasClassifier",
    "KerasModel",
    "LoadedModel",
    "ModelFormat",
    "NotSupportedError",
    "ONNXClassifier",
    "ONNXModel",
    "OutputKind",
    "Preprocess",
    "Runtime",
    "TFLiteClassifier",
    "TFLiteModel",
    "TensorSpec",
    "TorchClassifier",
    "TorchModel",
    "Weights",
    "check_compatible",
    "choose_runtime",
    "dequantize",
    "detect_format",
    "load_classifier",
    "load_model",
    "read_metadata",
    "resolve_preprocess",
    "sidecar_path",
    "write_metadata",
]
