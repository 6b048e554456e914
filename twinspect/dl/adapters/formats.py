"""Model *formats* (how a file is read) and *runtimes* (what executes it), kept apart.

NNSmith separates ``materialize/`` (how a model is represented and exported) from ``backends/``
(what compiles and runs it); twinspect does the same at the file level. A :class:`ModelFormat`
names a file type, its suffixes, the framework adapter module that reads it and the runtimes that
can execute it; a :class:`Runtime` names an executor and the formats it accepts. One adapter module
per framework (``keras.py``, ``tflite.py``, ``onnx.py``, ``torch.py``) implements the reader and the
runtimes of its formats, and :func:`twinspect.dl.adapters.load_model` picks them by the file suffix
and an optional ``runtime=`` name.

========================  ==================  ==========  ==========================================
format                    suffixes            adapter     runtimes (first = default)
========================  ==================  ==========  ==========================================
``keras-h5``              .h5 .hdf5           keras       ``torch-trace``, ``keras``
``keras``                 .keras              keras       ``torch-trace``, ``keras``
``tflite``                .tflite .lite       tflite      ``litert``
``onnx``                  .onnx               onnx        ``onnxruntime``, ``onnx-reference``
``torchscript``           .pt .pth .ts        torch       ``torch``
``torch-export``          .pt2                torch       ``torch``
========================  ==================  ==========  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinspect.errors import ModelError


@dataclass(frozen=True)
class ModelFormat:
    """A model file format.

    Attributes:
        name: short name (``"onnx"``, ``"keras-h5"``, ...).
        suffixes: lower-case file suffixes, dot included.
        framework: the adapter module reading it.
        runtimes: runtime names able to execute it; the first is the default.
        activations: whether intermediate activations can be read from this format.
        description: one line for help texts.
    """

    name: str
    suffixes: tuple[str, ...]
    framework: str
    runtimes: tuple[str, ...]
    activations: bool
    description: str


@dataclass(frozen=True)
class Runtime:
    """An executor of models.

    Attributes:
        name: short name (``"onnxruntime"``, ``"litert"``, ...).
        package: the Python package providing it (for error messages).
        description: one line for help texts.
    """

    name: str
    package: str
    description: str


RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime("keras", "keras", "Keras 3 layer-by-layer calls (on Keras' torch backend)"),
        Runtime("torch-trace", "torch", "Keras model recorded once with torch.jit.trace, checked against eager Keras"),
        Runtime("litert", "ai-edge-litert", "the TensorFlow Lite (LiteRT) interpreter"),
        Runtime("onnxruntime", "onnxruntime", "ONNX Runtime, CPU execution provider"),
        Runtime("onnx-reference", "onnx", "onnx.reference.ReferenceEvaluator (pure numpy, slow, exact)"),
        Runtime("torch", "torch", "PyTorch (TorchScript interpreter or torch.export graph module)"),
    )
}

FORMATS: dict[str, ModelFormat] = {
    f.name: f
    for f in (
        ModelFormat("keras-h5", (".h5", ".hdf5"), "keras", ("torch-trace", "keras"), True, "Keras 2/3 HDF5 model"),
        ModelFormat("keras", (".keras",), "keras", ("torch-trace", "keras"), True, "Keras 3 .keras archive"),
        ModelFormat("tflite", (".tflite", ".lite"), "tflite", ("litert",), True, "TensorFlow Lite flatbuffer"),
        ModelFormat("onnx", (".onnx",), "onnx", ("onnxruntime", "onnx-reference"), True, "ONNX protobuf"),
        ModelFormat("torchscript", (".pt", ".pth", ".ts"), "torch", ("torch",), True, "TorchScript archive (torch.jit.save)"),
        ModelFormat("torch-export", (".pt2",), "torch", ("torch",), True, "torch.export program (torch.export.save)"),
    )
}

#: File suffix → format name.
SUFFIX_FORMATS: dict[str, str] = {s: f.name for f in FORMATS.values() for s in f.suffixes}


def detect_format(path: str | Path) -> ModelFormat:
    """The :class:`ModelFormat` of a model file, from its suffix (case-insensitive).

    Raises:
        ModelError: unknown suffix; the message lists the supported ones.
    """
    suffix = Path(path).suffix.lower()
    name = SUFFIX_FORMATS.get(suffix)
    if name is None:
        raise ModelError(
            f"unknown model file suffix {suffix or '(none)'!r}; supported: {', '.join(SUFFIX_FORMATS)}", path
        )
    return FORMATS[name]


def choose_runtime(fmt: ModelFormat, runtime: str | None, path: str | Path | None = None) -> str:
    """The runtime to execute ``fmt`` with: ``runtime`` if given and able to, else the format's default.

    Raises:
        ModelError: unknown runtime name, or one that cannot execute this format.
    """
    if runtime is None:
        return fmt.runtimes[0]
    if runtime not in RUNTIMES:
        raise ModelError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}", path)
    if runtime not in fmt.runtimes:
        raise ModelError(
            f"runtime {runtime!r} cannot execute {fmt.name} models; it runs with {', '.join(fmt.runtimes)}", path
        )
    return runtime
