"""ONNX Runtime execution of a sentence-transformers code encoder, optionally int8-quantised.

The neural encoder (:mod:`twinspect.code.encoders.neural`) runs a BERT-style transformer with
mean pooling. On a 2-core CPU, PyTorch eager execution is the bottleneck of a neural clone scan;
this module exports the same transformer once to ONNX (``torch.onnx.export``, TorchScript-based
exporter), fuses attention and layer norms with ONNX Runtime's transformer optimiser, and — by
default — quantises the weights of every MatMul to int8 per output channel
(``onnxruntime.quantization.quantize_dynamic``; activations are quantised on the fly). Pooling
(attention-mask mean) and L2 normalisation are done in numpy exactly as sentence-transformers does.

The exported files are cached by the SHA-256 of the model weights, the ONNX Runtime version and
the precision, in ``$TWINSPECT_CACHE/onnx`` (default ``~/.cache/twinspect/onnx``); the export takes
a few seconds and happens once per model. Fidelity against the PyTorch model is measured in
``benchmarks/encoders_index.py`` and tested in ``tests/code/test_neural_onnx.py`` (fp32: cosine
≥ 0.9999 per fragment; int8: mean cosine ≥ 0.98 and nearest-neighbour agreement reported).

Only models whose sentence-transformers pipeline is Transformer → mean Pooling (→ Normalize) can
be exported (all-MiniLM-L6-v2 and the models written by
:func:`twinspect.code.encoders.finetune.finetune`); others raise :class:`ModelError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect._io import atomic_path
from twinspect.errors import ModelError
from twinspect.progress import progress

#: Precisions :func:`exported_model` can produce.
PRECISIONS = ("fp32", "int8")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_lock = threading.Lock()
_sessions: dict[tuple[str, int], Any] = {}


def cache_dir() -> Path:
    """Directory of exported ONNX models: ``$TWINSPECT_CACHE/onnx`` or ``~/.cache/twinspect/onnx``."""
    root = os.environ.get("TWINSPECT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "twinspect")
    return Path(root) / "onnx"


def check_exportable(model_dir: str | Path) -> None:
    """Check that a sentence-transformers directory is Transformer → mean Pooling (→ Normalize).

    Raises:
        ModelError: another pipeline (CLS/max pooling, dense heads), or no weights file.
    """
    model_dir = Path(model_dir)
    modules_file = model_dir / "modules.json"
    if modules_file.is_file():
        try:
            modules = json.loads(modules_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(f"unreadable modules.json: {exc}", model_dir) from exc
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or any(k not in ("Normalize",) for k in kinds[2:]):
            raise ModelError(f"ONNX runtime supports Transformer+Pooling(+Normalize) models, not {kinds}", model_dir)
        pooling_dir = model_dir / next(m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling"))
        try:
            pooling = json.loads((pooling_dir / "config.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(f"unreadable pooling config: {exc}", pooling_dir) from exc
        # sentence-transformers writes either boolean flags (older) or "pooling_mode": "mean" (newer,
        # e.g. models saved by `twinspect clones finetune`)
        mean = pooling.get("pooling_mode") == "mean" if "pooling_mode" in pooling else pooling.get("pooling_mode_mean_tokens")
        if not mean or any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
        ):
            raise ModelError("ONNX runtime supports mean pooling only", pooling_dir)
    if not any((model_dir / name).is_file() for name in _WEIGHT_FILES):
        raise ModelError("no model.safetensors or pytorch_model.bin to export", model_dir)


def weights_digest(model_dir: str | Path) -> str:
    """First 16 hex digits of the SHA-256 of the model's weights file (the cache key)."""
    model_dir = Path(model_dir)
    for name in _WEIGHT_FILES:
        f = model_dir / name
        if f.is_file():
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
            return h.hexdigest()[:16]
    raise ModelError("no model.safetensors or pytorch_model.bin", model_dir)


def exported_model(model_dir: str | Path, precision: str = "int8", directory: str | Path | None = None) -> Path:
    """Return the ONNX file of ``model_dir``'s transformer, exporting and caching it on first use.

    Args:
        model_dir: a sentence-transformers model directory (see :func:`check_exportable`).
        precision: ``"fp32"`` (optimised graph) or ``"int8"`` (dynamic per-channel int8 MatMul weights).
        directory: cache directory (default :func:`cache_dir`).

    Returns:
        Path of the ``.onnx`` file; its graph takes int64 ``input_ids``, ``attention_mask``,
        ``token_type_ids`` (B, L) and returns ``last_hidden_state`` float32 (B, L, d).

    Raises:
        ModelError: unknown precision, a model that cannot be exported, or torch/onnxruntime missing.
    """
    if precision not in PRECISIONS:
        raise ModelError(f"unknown ONNX precision {precision!r}", hint=f"choose one of {', '.join(PRECISIONS)}")
    model_dir = Path(model_dir)
    check_exportable(model_dir)
    try:
        import onnxruntime
    except ImportError as exc:
        raise ModelError("the ONNX runtime of the neural encoder needs onnxruntime",
                         hint="pip install 'twinspect[neural]'") from exc
    out_dir = Path(directory) if directory is not None else cache_dir()
    out = out_dir / f"{weights_digest(model_dir)}-{precision}-ort{onnxruntime.__version__}.onnx"
    with _lock:
        if not out.is_file():
            _export(model_dir, out, precision)
    return out


def _export(model_dir: Path, out: Path, precision: str) -> None:
    import logging
    import warnings

    try:
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers import optimizer
        from transformers import AutoConfig, AutoModel
    except ImportError as exc:
        raise ModelError("exporting the neural encoder needs torch, transformers and onnxruntime",
                         hint="pip install 'twinspect[neural]'") from exc

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: D401 - export shim
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    try:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    except Exception as exc:  # noqa: BLE001 - any loader failure is a bad model directory
        raise ModelError(f"cannot load the transformer to export it: {exc}", model_dir) from exc
    dummy = torch.ones((1, 8), dtype=torch.int64)
    axes = {"batch": 0, "tokens": 1}
    dynamic = {name: {v: k for k, v in axes.items()} for name in (*_INPUTS, "last_hidden_state")}
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out.with_suffix(".fp32.onnx")) as raw, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.root.level
        logging.root.setLevel(logging.ERROR)  # the quantiser logs advice through the root logger
        try:
            with torch.inference_mode():
                torch.onnx.export(_LastHidden(model), (dummy, dummy, torch.zeros_like(dummy)), str(raw),
                                  input_names=list(_INPUTS), output_names=["last_hidden_state"],
                                  dynamic_axes=dynamic, opset_version=17, dynamo=False)
            optimised = optimizer.optimize_model(str(raw), model_type="bert", opt_level=1,
                                                 num_heads=int(config.num_attention_heads),
                                                 hidden_size=int(config.hidden_size))
            with atomic_path(out) as final:
                if precision == "fp32":
                    optimised.save_model_to_file(str(final))
                else:
                    import onnx

                    with atomic_path(out.with_suffix(".opt.onnx")) as opt:
                        optimised.save_model_to_file(str(opt))
                        quantize_dynamic(str(opt), str(final), weight_type=QuantType.QInt8, per_channel=True,
                                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            logging.root.setLevel(previous)
    for leftover in (out.with_suffix(".fp32.onnx"), out.with_suffix(".opt.onnx")):
        leftover.unlink(missing_ok=True)


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    key = (str(path), int(threads))
    with _lock:
        sess = _sessions.get(key)
        if sess is None:
            so = ort.SessionOptions()
            so.intra_op_num_threads = max(int(threads), 1)
            so.inter_op_num_threads = 1
            so.log_severity_level = 3
            try:
                sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            except Exception as exc:  # noqa: BLE001 - a corrupt cache file is a model error
                raise ModelError(f"cannot load exported ONNX model: {exc}", path,
                                 hint="delete the file to re-export it") from exc
            _sessions[key] = sess
    return sess


def embed(
    onnx_path: str | Path,
    tokenizer: Any,
    texts: Sequence[str],
    max_tokens: int,
    batch_size: int = 32,
    threads: int = 2,
    quiet: bool = True,
) -> np.ndarray:
    """Mean-pooled, L2-normalised sentence embeddings of ``texts`` with an exported transformer.

    Texts are sorted longest first so that each batch pads to similar lengths; each is truncated to
    its first ``max_tokens`` sub-word tokens (special tokens included), as sentence-transformers does.

    Args:
        onnx_path: a file from :func:`exported_model`.
        tokenizer: the model's Hugging Face tokenizer (``model.tokenizer`` of the SentenceTransformer).
        texts: N strings.
        max_tokens: truncation length (sub-word tokens).
        batch_size: texts per ONNX Runtime call.
        threads: ONNX Runtime intra-op threads.
        quiet: hide the progress bar (stderr).

    Returns:
        float32 (N, d), rows of unit L2 norm (zero rows for empty input are left zero).
    """
    sess = _session(Path(onnx_path), threads)
    names = {i.name for i in sess.get_inputs()}
    n = len(texts)
    out: np.ndarray | None = None
    order = np.argsort([-len(t) for t in texts], kind="stable")
    with progress("embedding", total=n, quiet=quiet) as bar:
        for lo in range(0, n, batch_size):
            idx = order[lo : lo + batch_size]
            batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                              max_length=int(max_tokens), return_tensors="np")
            feed = {k: np.asarray(batch[k], dtype=np.int64) for k in _INPUTS if k in names and k in batch}
            if "token_type_ids" in names and "token_type_ids" not in feed:
                feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
            hidden = sess.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            if out is None:
                out = np.zeros((n, pooled.shape[1]), dtype=np.float32)
            out[idx] = pooled
            bar.advance(len(idx))
    if out is None:
        return np.zeros((0, 0), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)
