"""Model definitions written in the project (torchvision does not run with the CPU torch build).

Architectures (all take NCHW float input and return logits ``(N, num_classes)``):

* ``lenet1``, ``lenet4``, ``lenet5`` — LeCun et al., "Comparison of learning algorithms for
  handwritten digit recognition" (1995) / "Gradient-based learning applied to document
  recognition" (1998), in the ReLU + max-pool form used by DeepXplore, DiffChaser and DFlare.
* ``cnn`` — a plain two-convolution MNIST CNN (the Keras/PyTorch "mnist example" network).
* ``resnet20`` (and the smaller ``resnet14``/``resnet8``, used as distillation students) — the
  CIFAR-10 ResNets of He et al., "Deep residual learning for image recognition" (CVPR 2016,
  Section 4.2: 6n+2 layers, 3 stages of 16/32/64 channels), with 1×1 projection shortcuts
  (option B) so that every operation quantises in FX graph mode.
* ``vgg11``, ``vgg16`` — the VGG-11/16 layouts of Simonyan & Zisserman (ICLR 2015) with batch
  normalisation and a single linear classifier, as commonly used on CIFAR-10.
* ``resnet18``, ``resnet34``, ``densenet121``, ``densenet161``, ``alexnet`` — the remaining families of
  Wu et al.'s model clone study (ICPC 2020), in small-image forms (see each class); meant to be built
  with ``width`` < 1 on this machine.

Every builder takes ``input_shape`` (H, W, C), ``num_classes`` and ``width`` (a multiplier on all
channel counts and hidden sizes, e.g. 0.5 halves them; counts are rounded and at least 1).
The LeNet-1 student of distillation is ``lenet1``; the CIFAR students are ``resnet8``/``resnet14``
(any architecture can be a student).

Saved models are TorchScript files with a JSON metadata sidecar ``<file>.json`` and the same JSON
embedded as the extra file ``twinspect.json`` (see :func:`save_torchscript` and
:mod:`twinspect.dl.adapters.metadata`).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from twinspect._io import atomic_path, require_readable
from twinspect.dl.adapters.metadata import extra_files, read_metadata, write_metadata
from twinspect.errors import InputError, ModelError


def _ch(c: int, width: float) -> int:
    return max(1, int(round(c * width)))


def _flat_size(features: nn.Module, input_shape: tuple[int, int, int]) -> int:
    h, w, c = input_shape
    with torch.no_grad():
        out = features(torch.zeros(1, c, h, w))
    return int(out.numel())


class LeNet(nn.Module):
    """LeNet family: convolution/max-pool feature extractor, then fully connected layers.

    Args:
        convs: output channels of the two 5×5 convolutions.
        hidden: sizes of the hidden fully connected layers (empty for LeNet-1).
        input_shape: (H, W, C).
        num_classes: K.
        pad_first: pad the first convolution by 2 (LeNet-5 on 28×28 MNIST, as in the 32×32 original).
    """

    def __init__(
        self,
        convs: tuple[int, int],
        hidden: tuple[int, ...],
        input_shape: tuple[int, int, int],
        num_classes: int,
        pad_first: bool = False,
    ):
        super().__init__()
        c_in = input_shape[2]
        self.features = nn.Sequential(
            nn.Conv2d(c_in, convs[0], 5, padding=2 if pad_first else 0),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(convs[0], convs[1], 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        n = _flat_size(self.features, input_shape)
        layers: list[nn.Module] = [nn.Flatten()]
        for h in hidden:
            layers += [nn.Linear(n, h), nn.ReLU()]
            n = h
        layers.append(nn.Linear(n, num_classes))
        self.classifier = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class PlainCNN(nn.Module):
    """Two 3×3 convolutions (32, 64), max-pool, dropout, FC 128, FC K (the classic MNIST example)."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0):
        super().__init__()
        c1, c2, h = _ch(32, width), _ch(64, width), _ch(128, width)
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[2], c1, 3),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        n = _flat_size(self.features, input_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(n, h), nn.ReLU(), nn.Dropout(0.5), nn.Linear(h, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    """ResNet basic block: two 3×3 conv-BN layers, ReLU, identity or 1×1 conv-BN projection shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32×32 images (He et al. 2016, Sec. 4.2).

    Args:
        n: blocks per stage (3 → ResNet-20, 2 → ResNet-14, 1 → ResNet-8).
        input_shape: (H, W, C).
        num_classes: K.
        width: channel multiplier on 16/32/64.
    """

    def __init__(self, n: int, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0):
        super().__init__()
        chans = [_ch(16, width), _ch(32, width), _ch(64, width)]
        self.stem = nn.Sequential(
            nn.Conv2d(input_shape[2], chans[0], 3, padding=1, bias=False), nn.BatchNorm2d(chans[0]), nn.ReLU()
        )
        blocks: list[nn.Module] = []
        c_in = chans[0]
        for stage, c in enumerate(chans):
            for i in range(n):
                blocks.append(BasicBlock(c_in, c, stride=2 if (stage > 0 and i == 0) else 1))
                c_in = c
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c_in, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.layers(self.stem(x)))))


_VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


class VGG(nn.Module):
    """VGG-11 with batch normalisation (Simonyan & Zisserman 2015) for small images.

    Max-pools are skipped once the feature map is 1×1, so the network also runs on 28×28 inputs.
    """

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0, cfg: list | None = None):
        super().__init__()
        layers: list[nn.Module] = []
        c_in, size = input_shape[2], min(input_shape[0], input_shape[1])
        for v in cfg or _VGG11:
            if v == "M":
                if size >= 2:
                    layers.append(nn.MaxPool2d(2))
                    size //= 2
            else:
                c = _ch(int(str(v)), width)
                layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
                c_in = c
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.features(x))))


class ResNet(nn.Module):
    """ResNet-18/34 (He et al., CVPR 2016, Table 1: basic blocks, stages of 64/128/256/512 channels)
    for small images: a 3×3 stem without max-pool, as commonly used on CIFAR-10.

    Args:
        blocks: basic blocks per stage ((2, 2, 2, 2) → ResNet-18, (3, 4, 6, 3) → ResNet-34).
        input_shape: (H, W, C).
        num_classes: K.
        width: channel multiplier on 64/128/256/512.
    """

    def __init__(self, blocks: tuple[int, ...], input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0):
        super().__init__()
        chans = [_ch(c, width) for c in (64, 128, 256, 512)]
        self.stem = nn.Sequential(nn.Conv2d(input_shape[2], chans[0], 3, padding=1, bias=False), nn.BatchNorm2d(chans[0]), nn.ReLU())
        layers: list[nn.Module] = []
        c_in = chans[0]
        for stage, (c, n) in enumerate(zip(chans, blocks)):
            for i in range(n):
                layers.append(BasicBlock(c_in, c, stride=2 if (stage > 0 and i == 0) else 1))
                c_in = c
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.layers(self.stem(x)))))


class DenseLayer(nn.Module):
    """BN-ReLU-1×1 conv (4k) - BN-ReLU-3×3 conv (k), output concatenated to the input."""

    def __init__(self, c_in: int, growth: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(c_in), nn.ReLU(), nn.Conv2d(c_in, 4 * growth, 1, bias=False),
            nn.BatchNorm2d(4 * growth), nn.ReLU(), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


class DenseNet(nn.Module):
    """DenseNet-BC (Huang et al., CVPR 2017): dense blocks of bottleneck layers, transitions halving the
    channels and the resolution. DenseNet-121: blocks (6, 12, 24, 16), growth 32; DenseNet-161:
    (6, 12, 36, 24), growth 48. Small-image stem (3×3 conv, no max-pool); ``width`` scales the growth
    rate. Transitions stop pooling once the map is 1×1.
    """

    def __init__(self, blocks: tuple[int, ...], growth: int, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0):
        super().__init__()
        k = _ch(growth, width)
        c = 2 * k
        layers: list[nn.Module] = [nn.Conv2d(input_shape[2], c, 3, padding=1, bias=False)]
        size = min(input_shape[0], input_shape[1])
        for b, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(c, k))
                c += k
            if b < len(blocks) - 1:
                out = max(1, c // 2)
                layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, out, 1, bias=False)]
                if size >= 2:
                    layers.append(nn.AvgPool2d(2))
                    size //= 2
                c = out
        layers += [nn.BatchNorm2d(c), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.features(x))))


class AlexNet(nn.Module):
    """AlexNet (Krizhevsky, Sutskever & Hinton, NeurIPS 2012) for small images: five convolutions
    (64, 192, 384, 256, 256; 3×3 instead of 11×11/5×5), three max-pools, dropout and two hidden
    fully connected layers (4096 × width each)."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0):
        super().__init__()
        c = [_ch(v, width) for v in (64, 192, 384, 256, 256)]
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[2], c[0], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c[0], c[1], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(),
            nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(),
            nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        n = _flat_size(self.features, input_shape)
        h = _ch(4096, width)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.5), nn.Linear(n, h), nn.ReLU(), nn.Dropout(0.5), nn.Linear(h, h), nn.ReLU(),
            nn.Linear(h, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


_VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


@dataclass(frozen=True)
class ArchSpec:
    """A zoo entry: builder, default dataset and a one-line description."""

    build: Callable[[tuple[int, int, int], int, float], nn.Module]
    dataset: str
    description: str


ARCHS: dict[str, ArchSpec] = {
    "lenet1": ArchSpec(lambda s, k, w: LeNet((_ch(4, w), _ch(12, w)), (), s, k), "mnist", "LeNet-1 (4/12 conv, ~3k params)"),
    "lenet4": ArchSpec(
        lambda s, k, w: LeNet((_ch(4, w), _ch(16, w)), (_ch(120, w),), s, k), "mnist", "LeNet-4 (4/16 conv, FC 120)"
    ),
    "lenet5": ArchSpec(
        lambda s, k, w: LeNet((_ch(6, w), _ch(16, w)), (_ch(120, w), _ch(84, w)), s, k, pad_first=True),
        "mnist",
        "LeNet-5 (6/16 conv, FC 120/84)",
    ),
    "cnn": ArchSpec(lambda s, k, w: PlainCNN(s, k, w), "mnist", "plain CNN (32/64 conv, FC 128)"),
    "resnet20": ArchSpec(lambda s, k, w: CifarResNet(3, s, k, w), "cifar10", "ResNet-20 (He et al. 2016)"),
    "resnet14": ArchSpec(lambda s, k, w: CifarResNet(2, s, k, w), "cifar10", "ResNet-14 (student)"),
    "resnet8": ArchSpec(lambda s, k, w: CifarResNet(1, s, k, w), "cifar10", "ResNet-8 (student)"),
    "vgg11": ArchSpec(lambda s, k, w: VGG(s, k, w), "cifar10", "VGG-11 with batch norm"),
    "vgg16": ArchSpec(lambda s, k, w: VGG(s, k, w, _VGG16), "cifar10", "VGG-16 with batch norm"),
    "resnet18": ArchSpec(lambda s, k, w: ResNet((2, 2, 2, 2), s, k, w), "cifar10", "ResNet-18 (small-image stem)"),
    "resnet34": ArchSpec(lambda s, k, w: ResNet((3, 4, 6, 3), s, k, w), "cifar10", "ResNet-34 (small-image stem)"),
    "densenet121": ArchSpec(lambda s, k, w: DenseNet((6, 12, 24, 16), 32, s, k, w), "cifar10", "DenseNet-121 (BC, growth 32)"),
    "densenet161": ArchSpec(lambda s, k, w: DenseNet((6, 12, 36, 24), 48, s, k, w), "cifar10", "DenseNet-161 (BC, growth 48)"),
    "alexnet": ArchSpec(lambda s, k, w: AlexNet(s, k, w), "cifar10", "AlexNet (small-image variant)"),
}

#: Input shapes (H, W, C) and class counts of the built-in datasets.
DATASETS: dict[str, tuple[tuple[int, int, int], int]] = {"mnist": ((28, 28, 1), 10), "cifar10": ((32, 32, 3), 10)}


def build_model(arch: str, input_shape: tuple[int, int, int] = (28, 28, 1), num_classes: int = 10, width: float = 1.0) -> nn.Module:
    """Build an untrained zoo model.

    Args:
        arch: one of :data:`ARCHS` (``lenet1``, ``lenet4``, ``lenet5``, ``cnn``, ``resnet20``,
            ``resnet14``, ``resnet8``, ``vgg11``).
        input_shape: (H, W, C) of one image.
        num_classes: K.
        width: channel multiplier (> 0).

    Returns:
        An ``nn.Module`` mapping float32 (N, C, H, W) to logits (N, K).

    Raises:
        InputError: unknown architecture, bad width, or an input too small for the architecture.
    """
    key = arch.lower()
    if key not in ARCHS:
        raise InputError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}")
    if not (width > 0):
        raise InputError(f"width must be > 0, got {width}")
    try:
        shape = (int(input_shape[0]), int(input_shape[1]), int(input_shape[2]))
        return ARCHS[key].build(shape, int(num_classes), float(width))
    except RuntimeError as exc:
        raise InputError(f"architecture {arch!r} cannot take inputs of shape {tuple(input_shape)}: {exc}") from exc


def count_parameters(module: nn.Module) -> int:
    """Number of parameters (weights + biases) of a module (packed quantised weights are not counted)."""
    return int(sum(p.numel() for p in module.parameters()))


# -- saving and loading ----------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_torch_warnings():
    """Silence torch's deprecation/tracer warnings (TorchScript, torch.ao.quantization) in a block."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def save_torchscript(module: nn.Module | torch.jit.ScriptModule, path: str | Path, meta: dict, example: torch.Tensor) -> Path:
    """Trace (if needed) and save a model as TorchScript with its metadata, atomically.

    The metadata is embedded as the extra file ``twinspect.json`` and written to the sidecar
    ``<path>.json`` (:mod:`twinspect.dl.adapters.metadata`), so ``load_classifier(path)`` needs no
    options.

    Args:
        module: an eval-mode module (float, pruned or quantised) or an already scripted module.
        path: destination ``.pt`` file.
        meta: metadata dict (input_shape, num_classes, output, preprocess, arch, dataset,
            compression, accuracy, ...).
        example: a float32 (N, C, H, W) batch used for tracing.

    Returns:
        The path written.

    Raises:
        ModelError: the interpreted metadata fields have wrong types.
        InputError: the destination cannot be written.
    """
    path = Path(path)
    meta = json.loads(json.dumps(meta, default=_json_default))
    extra = extra_files(meta)
    with quiet_torch_warnings():
        if isinstance(module, torch.jit.ScriptModule):
            scripted = module
        else:
            module.eval()
            with torch.no_grad():
                scripted = torch.jit.trace(module, example)
        with atomic_path(path) as tmp:
            torch.jit.save(scripted, str(tmp), _extra_files=extra)
    write_metadata(path, meta)
    return path


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def load_torchscript(path: str | Path) -> torch.jit.ScriptModule:
    """Load a TorchScript model on CPU in eval mode.

    Raises:
        InputError: the file is missing.
        ModelError: the file is not a TorchScript archive.
    """
    path = require_readable(path, "model file")
    try:
        with quiet_torch_warnings():
            module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise ModelError(f"not a TorchScript model ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})", path) from exc
    module.eval()
    return module


def load_zoo_module(path: str | Path) -> tuple[nn.Module, dict]:
    """Rebuild a saved zoo model as a plain (float, trainable) ``nn.Module``.

    Quantisation, pruning and fine-tuning need the Python module, not the TorchScript graph: the
    architecture is rebuilt from the metadata (``arch``, ``width``, ``input_shape``, ``num_classes``)
    and the TorchScript file's state dict is loaded into it.

    Returns:
        (module in eval mode, metadata dict).

    Raises:
        InputError: missing file.
        ModelError: not TorchScript, no twinspect metadata, unknown architecture, or the weights
            do not fit the architecture (e.g. an already quantised model).
    """
    path = Path(path)
    scripted = load_torchscript(path)
    meta = read_metadata(path)
    if not meta or meta.get("arch") not in ARCHS:
        raise ModelError(
            "no twinspect zoo metadata (arch) found; this operation needs a float model saved by `twinspect train`",
            path,
        )
    module = build_model(meta["arch"], tuple(meta["input_shape"]), int(meta["num_classes"]), float(meta.get("width", 1.0)))
    try:
        module.load_state_dict(scripted.state_dict())
    except (RuntimeError, KeyError) as exc:
        raise ModelError(
            f"weights do not fit architecture {meta['arch']!r} (is it already compressed?): {str(exc).splitlines()[0][:200]}",
            path,
        ) from exc
    module.eval()
    return module, meta
