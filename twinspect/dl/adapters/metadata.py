"""Model metadata: the JSON that lets ``load_classifier`` open a saved model with no extra options.

Every model twinspect saves carries a JSON sidecar ``<model file>.json`` (for ``lenet.pt`` it is
``lenet.pt.json``)::

    {"input_shape": [H, W, C], "num_classes": K, "output": "logits" | "probabilities",
     "preprocess": {"scale": ..., "mean": [...], "std": [...], "layout": "NHWC" | "NCHW"},
     "arch": str, "dataset": str, "compression": {...} | null, "accuracy": float}

TorchScript files additionally embed the same JSON as the extra file ``twinspect.json``
(``torch.jit.save(m, path, _extra_files=extra_files(meta))``) and ONNX files may embed it as the
``metadata_props`` entry ``twinspect``, so a model that lost its sidecar still loads. Only
``input_shape``, ``num_classes``, ``output`` and ``preprocess`` are interpreted by the loaders; other
keys are carried through untouched.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from twinspect._io import read_json, write_json
from twinspect.errors import ModelError

#: Name of the embedded JSON in TorchScript ``_extra_files`` and ONNX ``metadata_props``.
EMBEDDED_NAME = "twinspect.json"
ONNX_METADATA_KEY = "twinspect"

_LAYOUTS = ("NHWC", "NCHW")
_OUTPUTS = ("logits", "probabilities", "auto")


def sidecar_path(model_path: str | Path) -> Path:
    """The sidecar of a model file: the model's full file name plus ``.json``."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".json")


def validate_metadata(meta: Any, source: str | Path) -> dict:
    """Check the types of the interpreted metadata fields.

    Args:
        meta: the parsed JSON object.
        source: file it came from (named in errors).

    Returns:
        ``meta`` itself (a dict).

    Raises:
        ModelError: ``meta`` is not an object, or ``input_shape`` / ``num_classes`` / ``output`` /
            ``preprocess`` has the wrong type or value.
    """
    if not isinstance(meta, dict):
        raise ModelError("model metadata must be a JSON object", source)
    shape = meta.get("input_shape")
    if shape is not None:
        if (
            not isinstance(shape, (list, tuple))
            or len(shape) != 3
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
        ):
            raise ModelError(f"metadata input_shape must be [H, W, C] positive integers, got {shape!r}", source)
    k = meta.get("num_classes")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 2):
        raise ModelError(f"metadata num_classes must be an integer >= 2, got {k!r}", source)
    out = meta.get("output")
    if out is not None and out not in _OUTPUTS:
        raise ModelError(f"metadata output must be one of {', '.join(_OUTPUTS)}, got {out!r}", source)
    pre = meta.get("preprocess")
    if pre is not None:
        if isinstance(pre, str):
            return meta  # a preset name; resolved (and checked) by resolve_preprocess
        if not isinstance(pre, dict):
            raise ModelError(f"metadata preprocess must be an object or preset name, got {pre!r}", source)
        if pre.get("layout", "NHWC") not in _LAYOUTS:
            raise ModelError(f"metadata preprocess.layout must be NHWC or NCHW, got {pre.get('layout')!r}", source)
        try:
            float(pre.get("scale", 255.0))
            [float(v) for v in pre.get("mean", ()) or ()]
            [float(v) for v in pre.get("std", ()) or ()]
        except (TypeError, ValueError) as exc:
            raise ModelError(f"metadata preprocess has a non-numeric scale/mean/std: {pre!r}", source) from exc
        if any(float(v) == 0.0 for v in pre.get("std", ()) or ()):
            raise ModelError("metadata preprocess.std contains 0", source)
    return meta


def _read_torchscript_embedded(path: Path) -> dict | None:
    """Read ``extra/twinspect.json`` from a TorchScript zip archive without loading the model."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                parts = info.filename.split("/")
                if len(parts) >= 2 and parts[-2] == "extra" and parts[-1] == EMBEDDED_NAME:
                    text = zf.read(info).decode("utf-8")
                    return json.loads(text) if text.strip() else None
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read embedded metadata: {exc}", path) from exc
    except json.JSONDecodeError as exc:
        raise ModelError(f"embedded {EMBEDDED_NAME} is not valid JSON: {exc}", path) from exc
    return None


def _read_onnx_embedded(path: Path) -> dict | None:
    """Read the ``twinspect`` entry of an ONNX model's ``metadata_props`` (weights are not loaded)."""
    try:
        import onnx

        proto = onnx.load(str(path), load_external_data=False)
    except Exception:  # corrupt files are reported by the adapter, which names the framework error
        return None
    for prop in proto.metadata_props:
        if prop.key == ONNX_METADATA_KEY:
            try:
                return json.loads(prop.value)
            except json.JSONDecodeError as exc:
                raise ModelError(f"embedded ONNX metadata {ONNX_METADATA_KEY!r} is not valid JSON: {exc}", path) from exc
    return None


def read_metadata(path: str | Path) -> dict | None:
    """Metadata of a model file: the sidecar if present, else JSON embedded in the model, else None.

    Args:
        path: the model file (not the sidecar).

    Returns:
        The metadata dict (validated with :func:`validate_metadata`), or ``None`` when the model has
        none (e.g. the DFlare ``.h5`` / ``.lite`` files).

    Raises:
        InputError: the sidecar exists but cannot be read or is not valid JSON.
        ModelError: the metadata has wrong field types, or embedded JSON is malformed.
    """
    path = Path(path)
    side = sidecar_path(path)
    if side.exists():
        return validate_metadata(read_json(side), side)
    suffix = path.suffix.lower()
    meta = None
    if suffix in (".pt", ".pth", ".ts", ".pt2"):
        meta = _read_torchscript_embedded(path)
    elif suffix == ".onnx":
        meta = _read_onnx_embedded(path)
    return None if meta is None else validate_metadata(meta, path)


def write_metadata(path: str | Path, meta: dict) -> Path:
    """Write the sidecar ``<model file>.json`` of a model atomically.

    Args:
        path: the model file the metadata describes (it need not exist yet).
        meta: the metadata dict (see the module docstring); a
            :class:`~twinspect.dl.adapters.base.Preprocess` under ``"preprocess"`` is converted.

    Returns:
        The sidecar path.

    Raises:
        ModelError: the interpreted fields have wrong types.
        InputError: the sidecar cannot be written.
    """
    meta = _plain(meta)
    validate_metadata(meta, sidecar_path(path))
    side = sidecar_path(path)
    write_json(side, meta)
    return side


def extra_files(meta: dict) -> dict[str, str]:
    """``_extra_files`` for ``torch.jit.save`` embedding ``meta`` as ``twinspect.json``."""
    meta = _plain(meta)
    validate_metadata(meta, EMBEDDED_NAME)
    return {EMBEDDED_NAME: json.dumps(meta)}


def _plain(meta: dict) -> dict:
    """Copy ``meta`` with a Preprocess object and tuples turned into JSON-ready values."""
    if not isinstance(meta, dict):
        raise ModelError("model metadata must be a dict", EMBEDDED_NAME)
    out = dict(meta)
    pre = out.get("preprocess")
    if pre is not None and hasattr(pre, "to_dict"):
        pre = pre.to_dict()
    if isinstance(pre, dict):
        pre = {k: (list(v) if isinstance(v, tuple) else v) for k, v in pre.items()}
        out["preprocess"] = pre
    if isinstance(out.get("input_shape"), tuple):
        out["input_shape"] = [int(s) for s in out["input_shape"]]
    return out


__all__ = [
    "EMBEDDED_NAME",
    "ONNX_METADATA_KEY",
    "extra_files",
    "read_metadata",
    "sidecar_path",
    "validate_metadata",
    "write_metadata",
]
