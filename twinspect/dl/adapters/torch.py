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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters._util import choose_preprocess, finish_load, load_error
from twinspect.dl.adapters.base import Classifier, OutputKind, Preprocess
from twinspect.dl.adapters.loaded import PLUMBING_OPS, LoadedModel, NotSupportedError, TensorSpec, Weights
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
    ) -> TorchClassifier:
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
    ) -> TorchClassifier:
        """Load TorchScript (``.pt``/``.pth``/``.ts``) or a ``torch.export`` program (``.pt2``).

        Raises:
            ModelError: the file is neither (e.g. a pickled module or a state dict), or is corrupt.
        """
        path = Path(path)
        module = read_torch_file(path)
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

    def _format(self) -> str:
        if self.path is None:
            return "torch-module"
        return "torch-export" if Path(self.path).suffix.lower() == ".pt2" else "torchscript"

    def describe(self) -> dict:
        d = super().describe()
        d.update(framework=self.framework, path=self.path, format=self._format(), runtime="torch")
        return d

    def _load_model(self) -> TorchModel:
        h, w, c = self.input_shape
        shape = (None, c, h, w) if self.preprocess.layout == "NCHW" else (None, h, w, c)
        spec = TensorSpec("input", shape, "float32")
        return TorchModel(self.module, format=self._format(), inputs=(spec,), name=self.name, path=self.path)


#: Module classes that only move data around (left out of activation lists).
_PLUMBING_MODULES = ("Dropout", "Dropout2d", "Flatten", "Identity", "Unflatten", "QuantStub", "DeQuantStub")


def _to_numpy(t: Any) -> np.ndarray:
    if getattr(t, "is_quantized", False):
        t = t.dequantize()
    return t.detach().float().cpu().numpy()


def _getattr_path(value: Any) -> str | None:
    """Dotted attribute path (``"conv1.weight"``) of a TorchScript value read from ``self``, or None."""
    parts = []
    node = value.node()
    while node.kind() == "prim::GetAttr":
        parts.append(node.s("name"))
        node = node.input().node()
    if not parts or node.kind() != "prim::Param":
        return None
    return ".".join(reversed(parts))


class TorchModel(LoadedModel):
    """A PyTorch module: TorchScript (format ``torchscript``), ``torch.export`` (``torch-export``) or a
    live ``nn.Module`` (``torch-module``), run by ``torch`` under ``inference_mode``.

    Weights come from ``state_dict()`` grouped by module path (``"conv1" → {"weight", "bias"}``),
    with quantised tensors dequantised and packed quantised conv/linear parameters unpacked
    (``quantized::conv2d_unpack`` / ``linear_unpack``). Activations:

    * live modules: forward hooks on every leaf module (named by module path);
    * TorchScript: the inlined graph is copied with every tensor-valued ``aten::`` / ``quantized::``
      node output appended to its return tuple (named by the module whose weight the node reads,
      else ``<op>_<k>``);
    * ``torch.export`` programs: a ``torch.fx.Interpreter`` records every ``call_function`` output.

    Args:
        module: the model (switched to eval mode).
        format: ``"torchscript"``, ``"torch-export"`` or ``"torch-module"``.
        inputs: input specs (a torch module does not declare them; ``()`` when unknown).
        name: display name.
        path: source file, if any.
    """

    framework = "torch"
    runtime = "torch"

    def __init__(self, module: Any, *, format: str = "torch-module", inputs: Sequence[TensorSpec] = (), name: str = "torch-model", path: str | Path | None = None):
        import torch

        ensure_threads()
        self._torch = torch
        try:
            module.eval()
        except (AttributeError, NotImplementedError):
            pass
        self.module = module
        self.format = format
        self.inputs = tuple(inputs)
        self.outputs = ()
        self.name = name
        self.path = None if path is None else str(path)
        self._script_fn: Any = None
        self._script_names: list[str] | None = None

    @classmethod
    def load(cls, path: str | Path, *, name: str | None = None, inputs: Sequence[TensorSpec] = ()) -> TorchModel:
        """Read a TorchScript (``.pt .pth .ts``) or ``torch.export`` (``.pt2``) file.

        Raises:
            ModelError: not a zip archive, or not loadable as either format.
        """
        path = Path(path)
        module = read_torch_file(path)
        fmt = "torch-export" if path.suffix.lower() == ".pt2" else "torchscript"
        return cls(module, format=fmt, inputs=inputs, name=name or path.name, path=path)

    def forward(self, *xs: np.ndarray) -> list[np.ndarray]:
        torch = self._torch
        self._check_inputs(xs)
        with torch.inference_mode():
            try:
                out = self.module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in xs])
            except Exception as exc:  # noqa: BLE001
                raise ModelError(f"torch failed on inputs {[np.shape(x) for x in xs]} ({type(exc).__name__}: {str(exc)[:200]})", self.path) from exc
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [_to_numpy(o) for o in outs if hasattr(o, "detach")]

    def weights(self) -> Weights:
        torch = self._torch
        out: Weights = {}

        def put(key: str, arr: np.ndarray) -> None:
            layer, _, param = key.rpartition(".")
            out.setdefault(layer or "(root)", {})[param] = arr.astype(np.float32)

        for key, t in self.module.state_dict().items():
            if not isinstance(t, torch.Tensor):
                if key.endswith("_packed_params") or "_packed_params" in key:
                    self._unpack(key, t, put)
                continue
            if key.endswith(("num_batches_tracked", ".scale", ".zero_point")) or not (t.is_floating_point() or t.is_quantized):
                continue
            if t.dim() == 0:  # quantisation scales and zero points saved as scalars, not weights
                continue
            put(key, _to_numpy(t))
        order: list[str] = []
        if hasattr(self.module, "named_modules"):
            for mname, sub in self.module.named_modules():
                order.append(mname)
                # scripted quantised conv/linear modules keep their weights as packed-parameter attributes
                packed = getattr(sub, "_packed_params", None)
                if packed is not None and not isinstance(packed, torch.nn.Module) and not hasattr(packed, "named_modules"):
                    base = mname[: -len("._packed_params")] if mname.endswith("._packed_params") else mname
                    if out.get(base or "(root)", {}).get("weight") is None:
                        self._unpack(f"{base}._packed_params" if base else "_packed_params", packed, put)
        rank = {name: i for i, name in enumerate(order)}
        return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))

    def _unpack(self, key: str, packed: Any, put) -> None:
        torch = self._torch
        base = key.split("._packed_params")[0]
        for op in ("conv2d_unpack", "linear_unpack", "conv1d_unpack", "conv3d_unpack"):
            try:
                w, b = getattr(torch.ops.quantized, op)(packed)
            except Exception:  # noqa: BLE001 - not this kind of packed params
                continue
            put(f"{base}.weight", _to_numpy(w))
            if b is not None:
                put(f"{base}.bias", _to_numpy(b))
            return
        if isinstance(packed, tuple) and packed and isinstance(packed[0], torch.Tensor):
            put(f"{base}.weight", _to_numpy(packed[0]))

    # -- activations ---------------------------------------------------------------------------
    def _is_script(self) -> bool:
        return isinstance(self.module, self._torch.jit.ScriptModule)

    def _is_fx(self) -> bool:
        import torch.fx

        return isinstance(self.module, torch.fx.GraphModule)

    def _leaf_modules(self) -> list[tuple[str, Any]]:
        return [
            (n, m)
            for n, m in self.module.named_modules()
            if n and not list(m.children()) and type(m).__name__ not in _PLUMBING_MODULES
        ]

    def _script_graph(self):
        """(function returning (outputs..., activations...), activation names, number of outputs)."""
        if self._script_fn is None:
            torch = self._torch
            g = self.module.inlined_graph
            picked: list[Any] = []
            names: list[str] = []
            counts: dict[str, int] = {}
            for node in list(g.nodes()):
                kind = node.kind()
                if not (kind.startswith("aten::") or kind.startswith("quantized::")) or node.outputsSize() != 1:
                    continue
                op = kind.split("::", 1)[1].strip("_")
                if op.lower() in PLUMBING_OPS:
                    continue
                if not isinstance(node.output().type(), torch._C.TensorType):
                    continue
                label = None
                for v in node.inputs():
                    p = _getattr_path(v)
                    if p is not None:
                        label = p.rsplit(".", 1)[0] if "." in p else p
                        while label.endswith("._packed_params"):  # a quantised Linear: named as its module
                            label = label[: -len("._packed_params")]
                        break
                label = label or op
                counts[label] = counts.get(label, 0) + 1
                names.append(label if counts[label] == 1 else f"{label}_{counts[label] - 1}")
                picked.append(node.output())
            ret = g.return_node()
            orig = list(ret.inputs())
            vals = orig + picked
            for i in reversed(range(ret.inputsSize())):
                g.eraseOutput(i)
            tup = g.create("prim::TupleConstruct", vals)
            tup.insertBefore(ret)
            tup.output().setType(torch._C.TupleType([v.type() for v in vals]))
            g.registerOutput(tup.output())
            try:
                fn = torch._C._create_function_from_graph("twinspect_activations", g)
            except Exception as exc:  # noqa: BLE001
                raise NotSupportedError(f"cannot instrument this TorchScript graph for activations ({exc})", self.path) from exc
            self._script_fn = (fn, len(orig))
            self._script_names = names
        return self._script_fn

    def layer_names(self) -> list[str]:
        if self._is_script():
            self._script_graph()
            return list(self._script_names or [])
        if self._is_fx():
            return [n.name for n in self.module.graph.nodes if n.op == "call_function" and _fx_op_name(n).lower() not in PLUMBING_OPS]
        names = [n for n, _ in self._leaf_modules()]
        if not names:
            raise NotSupportedError("the module has no sub-modules to read activations from", self.path)
        return names

    def _activations(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        n = int(np.shape(xs[0])[0]) if xs else 0
        try:
            return self._activations_batch(xs, layers)
        except Exception:
            # torch.export programs traced at batch 1 reject other batch sizes: go one by one, as forward does
            if n <= 1 or not self._is_fx():
                raise
        parts = [self._activations_batch([x[i : i + 1] for x in xs], layers) for i in range(n)]
        return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}

    def _activations_batch(self, xs: Sequence[np.ndarray], layers: list[str]) -> dict[str, np.ndarray]:
        torch = self._torch
        tx = [torch.from_numpy(np.ascontiguousarray(x)) for x in xs]
        found: dict[str, np.ndarray] = {}
        wanted = set(layers)
        with torch.inference_mode():
            if self._is_script():
                fn, n_out = self._script_graph()
                res = fn(self.module._c, *tx)
                for name, t in zip(self._script_names or [], list(res)[n_out:]):
                    if name in wanted:
                        found[name] = _to_numpy(t)
            elif self._is_fx():
                from torch.fx import Interpreter

                class _Rec(Interpreter):
                    def run_node(self, n):
                        r = super().run_node(n)
                        if n.name in wanted and isinstance(r, torch.Tensor):
                            found[n.name] = _to_numpy(r)
                        return r

                _Rec(self.module).run(*tx)
            else:
                handles = []
                for name, m in self._leaf_modules():
                    if name in wanted:
                        handles.append(m.register_forward_hook(_hook(found, name)))
                try:
                    self.module(*tx)
                finally:
                    for h in handles:
                        h.remove()
        return {k: found[k] for k in layers if k in found}


def _fx_op_name(node: Any) -> str:
    t = node.target
    name = getattr(t, "__name__", None) or str(t)
    return name.split(".")[0].lstrip("_")


def _hook(store: dict, name: str):
    def fn(_module, _inp, out):
        if isinstance(out, (tuple, list)):
            out = out[0]
        if hasattr(out, "detach"):
            store[name] = _to_numpy(out)

    return fn


def read_torch_file(path: Path) -> Any:
    """Read a TorchScript archive or a ``torch.export`` program (``.pt2``) into a callable module.

    Raises:
        ModelError: not a zip archive, or the framework cannot load it (the message names the file).
    """
    import torch

    ensure_threads()
    if not zipfile.is_zipfile(path):
        raise ModelError(
            "not a TorchScript or torch.export archive (not a zip file); the file is corrupt or in another format",
            path,
        )
    if path.suffix.lower() == ".pt2":
        export_log = logging.getLogger("torch.export")
        level = export_log.level
        export_log.setLevel(logging.ERROR)  # torch logs a traceback before raising
        try:
            return torch.export.load(str(path)).module()
        except Exception as exc:  # noqa: BLE001
            raise load_error(path, "torch.export (.pt2)", exc) from exc
        finally:
            export_log.setLevel(level)
    try:
        with warnings.catch_warnings():  # TorchScript's deprecation notice on every load
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:  # noqa: BLE001
        err = load_error(path, "TorchScript", exc)
        err.hint = (
            "twinspect loads TorchScript (torch.jit.save) and torch.export (.pt2) files; for a "
            "pickled module or a state_dict, build the model and use TorchClassifier.from_module"
        )
        raise err from exc
