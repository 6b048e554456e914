"""PyTorch adapter: TorchScript (``.pt``/``.pth``/``.ts``), ``torch.export`` (``.pt2``), or a live module.

Inputs are channels-first (``preprocess.layout == "NCHW"``); a preset preprocessing name (``"unit"``,
``"cifar10-dflare"``) is switched to NCHW for torch models. A query runs under
``torch.inference_mode()``.

Threads: the first torch-backed classifier (torch or Keras-on-torch) of a process calls
``torch.set_num_threads`` once, with ``$TWINSPECT_THREADS`` or 1. On the 2-core development machine one
thread was faster than two for every model here (single-image LeNet-style CNN: 0.33 vs 0.39 ms; a batch
of 64: 0.57 vs 2.75 ms per image while other jobs were running). Call :func:`set_torch_threads`
yourself to choose another count; it is then left alone.

A plain ``torch.save`` pickle or a ``state_dict`` is not loaded from a file (unpickling runs arbitrary
code and a state dict has no architecture): build the module and use :meth:`TorchClassifier.from_module`.
"""

from __future__ import annotations

import logging
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from twinspect.dl.adapters._util import choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess
from twinspect.errors import ModelError

_threads_set = False


def set_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count (``$TWINSPECT_THREADS`` or 1 when ``n`` is None).

    Returns:
        The thread count now in force.
    """
    global _threads_set
    import torch

    if n is None:
        try:
            n = int(os.environ.get("TWINSPECT_THREADS", "1"))
        except ValueError:
            n = 1
    n = max(1, int(n))
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    _threads_set = True
    return n


def ensure_threads() -> None:
    """Apply :func:`set_torch_threads` once per process (no-op after the first call)."""
    if not _threads_set:
        set_torch_threads()


class TorchClassifier(Classifier):
    """A ``torch.nn.Module`` (or ScriptModule / exported module) mapping (N, C, H, W) to (N, K).

    Args:
        module: the model; it is switched to eval mode.
        input_shape: (H, W, C) of one image as the user passes it (channels-last). Required: a torch
            module does not declare its input size.
        num_classes: K; when None it is read from a probe forward pass.
        preprocess: preset name, dict or :class:`Preprocess` (default ``"unit"``, i.e. x/255, in NCHW).
            A preset name's layout is set to NCHW; a dict/Preprocess keeps its own layout.
        output: ``"probabilities"``, ``"logits"`` or ``"auto"`` (probe once at construction).
        name: display name.
        path: file the module came from (named in errors).

    Raises:
        ModelError: ``input_shape`` missing, or the module's output on a probe batch is not (N, K)
            with K >= 2 (or disagrees with ``num_classes``).
    """

    framework = "torch"

    def __init__(
        self,
        module: Any,
        input_shape: Sequence[int] | None,
        num_classes: int | None = None,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str = "torch-model",
        path: str | Path | None = None,
    ):
        import torch

        ensure_threads()
        self._torch = torch
        self.path = None if path is None else str(path)
        if input_shape is None:
            raise ModelError(
                "a torch model does not declare its input shape: pass input_shape=(H, W, C) and "
                "num_classes=K (or save the model with twinspect metadata)",
                path,
            )
        shape = tuple(int(s) for s in input_shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ModelError(f"input_shape must be (H, W, C) positive integers, got {tuple(input_shape)}", path)
        try:
            module.eval()
        except (AttributeError, NotImplementedError):
            pass  # torch.export modules refuse eval(); they are already in inference form
        self.module = module
        self._fixed_batch = False
        pre = choose_preprocess(preprocess, "NCHW", isinstance(preprocess, str) or preprocess is None)
        super().__init__(shape, num_classes or 2, pre, output, name)
        finish_load(self, num_classes, path)

    @classmethod
    def from_module(
        cls,
        module: Any,
        input_shape: Sequence[int],
        num_classes: int | None = None,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str = "torch-model",
    ) -> "TorchClassifier":
        """Wrap a live module (see the class docstring for the arguments)."""
        return cls(module, input_shape, num_classes, preprocess, output, name)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        input_shape: Sequence[int] | None = None,
        num_classes: int | None = None,
        preprocess: str | dict | Preprocess | None = None,
        output: OutputKind = "auto",
        name: str | None = None,
    ) -> "TorchClassifier":
        """Load TorchScript (``.pt``/``.pth``/``.ts``) or a ``torch.export`` program (``.pt2``).

        Raises:
            ModelError: the file is neither (e.g. a pickled module or a state dict), or is corrupt.
        """
        import torch

        ensure_threads()
        path = Path(path)
        if not zipfile.is_zipfile(path):
            raise ModelError(
                "not a TorchScript or torch.export archive (not a zip file); the file is corrupt or "
                "in another format",
                path,
            )
        if path.suffix.lower() == ".pt2":
            export_log = logging.getLogger("torch.export")
            level = export_log.level
            export_log.setLevel(logging.ERROR)  # torch logs a traceback before raising
            try:
                module = torch.export.load(str(path)).module()
            except Exception as exc:  # noqa: BLE001
                raise load_error(path, "torch.export (.pt2)", exc) from exc
            finally:
                export_log.setLevel(level)
        else:
            try:
                with warnings.catch_warnings():  # TorchScript's deprecation notice on every load
                    warnings.simplefilter("ignore", DeprecationWarning)
                    module = torch.jit.load(str(path), map_location="cpu")
            except Exception as exc:  # noqa: BLE001
                err = load_error(path, "TorchScript", exc)
                err.hint = (
                    "twinspect loads TorchScript (torch.jit.save) and torch.export (.pt2) files; for a "
                    "pickled module or a state_dict, build the model and use TorchClassifier.from_module"
                )
                raise err from exc
        return cls(module, input_shape, num_classes, preprocess, output, name or path.name, path=path)

    def _call(self, x):
        out = self.module(x)
        if isinstance(out, (tuple, list)):
            if len(out) != 1:
                raise ModelError(f"model returned {len(out)} outputs; one class-score tensor is required", self.path)
            out = out[0]
        if not hasattr(out, "detach"):
            raise ModelError(f"model returned {type(out).__name__}, not a tensor", self.path)
        return out.detach().float().cpu().numpy()

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(batch)
            n = batch.shape[0]
            if self._fixed_batch and n > 1:
                return np.concatenate([self._call(x[i : i + 1]) for i in range(n)], axis=0)
            try:
                return self._call(x)
            except ModelError:
                raise
            except Exception:
                # torch.export programs traced at batch 1 reject other batch sizes: go one by one
                if n == 1 or self._fixed_batch:
                    raise
                self._fixed_batch = True
                return np.concatenate([self._call(x[i : i + 1]) for i in range(n)], axis=0)

    def describe(self) -> dict:
        d = super().describe()
        d.update(framework=self.framework, path=self.path)
        return d
