"""Image mutation operators of the deviated-behaviour search (DiffChaser's set, used by DFlare).

Every operator maps one image ``x`` (H, W, C) float32 in the 0–255 pixel scale to a new image of the
same shape and dtype, drawing its random parameter from a :class:`numpy.random.Generator`, and the
result is clipped to the valid pixel range [0, 255] (:meth:`MutationOperator.__call__` does the
clipping, so every operator, also a user-defined one, obeys it). By itself an operator keeps images
float32, clipped to [0, 255] as the DFlare paper describes (the searches' default,
``pixels="float"``); ``pixels="uint8-wrap"`` (:class:`Uint8Cast`, see :func:`get_operators`) casts
each result to whole uint8 levels the way the public DFlare code does (``--preset reference``).

The operator set is Table 3 of Tian et al., "Finding Deviated Behaviors of the Compressed DNN
Models for Image Classifications" (TOSEM 2023, DFlare), which reuses the operators of DiffChaser
(Xie et al., IJCAI 2019). The parameter ranges follow the public DFlare code
(github.com/yqtianust/DFlare, ``myLib/img_mutations.py``), with two documented adjustments:

* parameters that make an operator the identity (changing 0 pixels, a 1×1 blur kernel) are left
  out, because an unchanged image only wastes a query of both models;
* the reference implementation casts noisy images to ``uint8`` (truncating, and wrapping values
  around modulo 256); the operators themselves clip to [0, 255], and :class:`Uint8Cast` reproduces
  the reference casting on top of them (the searches' default).

Blurs are computed with :mod:`scipy.ndimage` per channel (OpenCV is not a dependency); border
handling follows OpenCV's defaults (reflect-101 for box and Gaussian blur, replicate for median).

Operators are pluggable: subclass :class:`MutationOperator`, give it a unique ``name`` and
implement :meth:`MutationOperator.apply`; :func:`register` adds it to :data:`REGISTRY` so that it
can be named in :func:`get_operators`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import ndimage

from twinspect.errors import InputError

PIXEL_MIN = 0.0
PIXEL_MAX = 255.0


class MutationOperator(ABC):
    """A random image transformation ``x -> x'`` used to explore inputs around a seed.

    Subclasses implement :meth:`apply`; calling the operator applies it and clips the result.

    Attributes:
        name: unique identifier (used in the registry, run configs and operator statistics).
    """

    name: str = "operator"

    @abstractmethod
    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Transform one image.

        Args:
            x: (H, W, C) float32 image in the 0–255 pixel scale (not modified).
            rng: source of the operator's random parameter(s).

        Returns:
            (H, W, C) array (any float dtype; clipping and casting happen in :meth:`__call__`).
        """

    def __call__(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Apply the operator and clip to [0, 255].

        Args:
            x: (H, W, C) image (uint8 or float) in the 0–255 pixel scale; never modified in place.
            rng: numpy random Generator; the same generator state gives the same output.

        Returns:
            (H, W, C) float32 image with values in [0, 255].

        Raises:
            InputError: ``x`` is not a 3-D (H, W, C) image.
        """
        x = np.asarray(x)
        if x.ndim != 3:
            raise InputError(f"mutation operators take one (H, W, C) image, got shape {tuple(x.shape)}")
        x = x.astype(np.float32, copy=True)
        out = np.asarray(self.apply(x, rng), dtype=np.float32)
        if out.shape != x.shape:  # pragma: no cover - guards user-defined operators
            raise InputError(f"mutation operator {self.name!r} changed the image shape {x.shape} -> {out.shape}")
        return np.clip(out, PIXEL_MIN, PIXEL_MAX, out=out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PixelChange(MutationOperator):
    """Random pixel change: set ``n`` random pixel values to random intensities.

    ``n`` is drawn uniformly from ``{min_pixels, ..., max_pixels}``: by default 1–9 (the reference
    code draws from 0–9; 0 changes nothing and only wastes a query, so the default leaves it out;
    the reference preset keeps it); each chosen element of the flattened (H·W·C) image gets an
    integer value drawn uniformly from 0–255.

    Args:
        max_pixels: largest number of changed values (9 in the public DFlare code).
        min_pixels: smallest number (0 in the public DFlare code).
    """

    name = "pixel_change"

    def __init__(self, max_pixels: int = 9, min_pixels: int = 1):
        if not 0 <= min_pixels <= max_pixels:
            raise InputError(f"pixel_change needs 0 <= min_pixels <= max_pixels, got {min_pixels}, {max_pixels}")
        self.max_pixels = int(max_pixels)
        self.min_pixels = int(min_pixels)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = int(rng.integers(self.min_pixels, self.max_pixels + 1))
        flat = x.reshape(-1)
        idx = rng.integers(0, flat.size, size=n)
        flat[idx] = rng.integers(0, 256, size=n).astype(np.float32)
        return flat.reshape(x.shape)


class GaussianNoise(MutationOperator):
    """Additive Gaussian noise ``x + N(0, σ²)`` per pixel value.

    The public DFlare code uses a fixed variance of 0.1 (σ ≈ 0.32 pixel levels) in the 0–255 scale.
    Here the variance is the operator's random parameter, drawn uniformly from
    ``(0, max_variance]`` with ``max_variance = 0.1`` by default, so the reference setting is the
    upper end of the range.

    Args:
        max_variance: upper bound of the noise variance (pixel levels squared).
        fixed: always use ``max_variance`` (the public DFlare code's fixed variance).
    """

    name = "gaussian_noise"

    def __init__(self, max_variance: float = 0.1, fixed: bool = False):
        self.max_variance = float(max_variance)
        self.fixed = bool(fixed)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        var = self.max_variance if self.fixed else self.max_variance * (1.0 - rng.random())  # (0, max_variance]
        return x + rng.normal(0.0, np.sqrt(var), size=x.shape).astype(np.float32)


class MultiplicativeNoise(MutationOperator):
    """Multiplicative (speckle) noise ``x + x·n`` with ``n ~ N(μ, σ²)`` per pixel value.

    As in the public DFlare code: ``μ ~ U(-0.5, 0.5)`` and ``σ² ~ U(0, 0.05)`` are drawn once per
    call, so one call brightens or darkens the whole image by up to 50 % with some per-pixel spread.

    Args:
        mean_range: half-width of the uniform range of μ (0.5).
        max_variance: upper bound of σ² (0.05).
    """

    name = "multiplicative_noise"

    def __init__(self, mean_range: float = 0.5, max_variance: float = 0.05):
        self.mean_range = float(mean_range)
        self.max_variance = float(max_variance)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        mean = rng.uniform(-self.mean_range, self.mean_range)
        var = self.max_variance * rng.random()
        n = rng.normal(mean, np.sqrt(var), size=x.shape).astype(np.float32)
        return x + x * n


class _KernelBlur(MutationOperator):
    kernels: tuple[int, ...] = ()

    def __init__(self, kernels: Sequence[int] | None = None):
        if kernels is not None:
            self.kernels = tuple(int(k) for k in kernels)
        if not self.kernels or any(k < 1 for k in self.kernels):
            raise InputError(f"{self.name}: kernel sizes must be positive integers, got {self.kernels}")

    def _kernel(self, rng: np.random.Generator) -> int:
        return int(self.kernels[int(rng.integers(0, len(self.kernels)))])


class AverageBlur(_KernelBlur):
    """Average (box) blur with a k×k kernel, per channel.

    ``k`` is drawn uniformly from ``{2, 3, 4, 5}`` (the public DFlare code draws from 1–5 for
    ``cv2.blur``; k = 1 is the identity and is left out). Borders: reflect-101 (OpenCV's default).

    Args:
        kernels: candidate kernel sizes.
    """

    name = "average_blur"
    kernels = (2, 3, 4, 5)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = self._kernel(rng)
        return ndimage.uniform_filter(x, size=(k, k, 1), mode="mirror")


class GaussianBlur(_KernelBlur):
    """Gaussian blur with a k×k kernel, per channel.

    ``k`` is drawn uniformly from ``{3, 5, 7}`` (the public DFlare code draws from 1, 3, 5, 7 for
    ``cv2.GaussianBlur(img, (k, k), 0)``; k = 1 is the identity). As in OpenCV with σ = 0, the
    standard deviation follows from the kernel size: ``σ = 0.3·((k − 1)/2 − 1) + 0.8``, and the
    kernel is cut at radius ``(k − 1)/2``. Borders: reflect-101.

    Args:
        kernels: candidate (odd) kernel sizes.
    """

    name = "gaussian_blur"
    kernels = (3, 5, 7)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = self._kernel(rng)
        radius = (k - 1) // 2
        sigma = 0.3 * ((k - 1) * 0.5 - 1.0) + 0.8
        return ndimage.gaussian_filter(x, sigma=(sigma, sigma, 0.0), mode="mirror", truncate=radius / sigma)


class MedianBlur(_KernelBlur):
    """Median blur with a k×k window, per channel.

    ``k`` is drawn uniformly from ``{3, 5, 7}`` (the public DFlare code draws from 1, 3, 5, 7 for
    ``cv2.medianBlur``; k = 1 is the identity). Borders: replicate (as OpenCV's median blur).

    Args:
        kernels: candidate (odd) window sizes.
    """

    name = "median_blur"
    kernels = (3, 5, 7)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = self._kernel(rng)
        return ndimage.median_filter(x, size=(k, k, 1), mode="nearest")


class SaltPepperNoise(MutationOperator):
    """Salt-and-pepper noise: a fraction ``amount`` of pixel values set to 0 or 255 (half each).

    Present in the public DFlare code (``image_noise_rp``, amount 0.004) but not in the paper's
    Table 3, so it is registered and can be selected by name, yet it is not in :data:`DEFAULT_OPERATORS`.

    Args:
        amount: fraction of values changed (at least one value of each kind is changed).
    """

    name = "salt_pepper"

    def __init__(self, amount: float = 0.004):
        self.amount = float(amount)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        flat = x.reshape(-1)
        n = max(1, int(np.ceil(self.amount * flat.size * 0.5)))
        flat[rng.integers(0, flat.size, size=n)] = PIXEL_MAX
        flat[rng.integers(0, flat.size, size=n)] = PIXEL_MIN
        return flat.reshape(x.shape)


#: Operators available by name (see :func:`register`).
REGISTRY: dict[str, type[MutationOperator]] = {}


def register(cls: type[MutationOperator]) -> type[MutationOperator]:
    """Add an operator class to :data:`REGISTRY` under its ``name`` (usable as a decorator).

    Raises:
        InputError: another class is already registered under that name.
    """
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise InputError(f"a mutation operator named {cls.name!r} is already registered")
    REGISTRY[cls.name] = cls
    return cls


for _cls in (PixelChange, GaussianNoise, MultiplicativeNoise, AverageBlur, GaussianBlur, MedianBlur, SaltPepperNoise):
    register(_cls)

#: DiffChaser's operator set (DFlare paper, Table 3), in this order.
DEFAULT_OPERATORS: tuple[str, ...] = (
    "pixel_change",
    "gaussian_noise",
    "multiplicative_noise",
    "average_blur",
    "gaussian_blur",
    "median_blur",
)


def reference_operators() -> list[MutationOperator]:
    """The public DFlare code's seven operators with its exact parameter ranges (``--preset reference``).

    ``myLib/img_mutations.py`` of github.com/yqtianust/DFlare: pixel change of 0–9 values, Gaussian
    noise of fixed variance 0.1, salt-and-pepper noise (amount 0.004), multiplicative noise
    (μ ~ U(−0.5, 0.5), σ² ~ U(0, 0.05)), box blur k ∈ {1..5}, Gaussian and median blur
    k ∈ {1, 3, 5, 7} — identity parameters (0 pixels, k = 1) included, as in the reference. Use
    with ``pixels="uint8-wrap"`` for the reference's uint8 casting.

    Returns:
        Seven new operator instances, in the reference's order.
    """
    return [
        GaussianNoise(max_variance=0.1, fixed=True),
        SaltPepperNoise(amount=0.004),
        MultiplicativeNoise(),
        PixelChange(max_pixels=9, min_pixels=0),
        AverageBlur(kernels=(1, 2, 3, 4, 5)),
        GaussianBlur(kernels=(1, 3, 5, 7)),
        MedianBlur(kernels=(1, 3, 5, 7)),
    ]


#: Pixel handling of the operators: ``"float"`` (default: float32 images, clipped to [0, 255]) or
#: ``"uint8-wrap"`` (reference-compatible, see :class:`Uint8Cast`).
PIXEL_MODES: tuple[str, ...] = ("float", "uint8-wrap")

#: Operators whose public-DFlare implementation casts a possibly out-of-range result with
#: ``astype(np.uint8)`` (so values wrap around modulo 256) before clipping.
WRAPPING_OPERATORS: frozenset[str] = frozenset({"gaussian_noise", "multiplicative_noise"})


class Uint8Cast(MutationOperator):
    """Reference-compatible pixel handling around another operator (``pixels="uint8-wrap"``).

    The public DFlare code (github.com/yqtianust/DFlare, ``myLib/img_mutations.py``) mutates uint8
    images and converts the noise operators' float results with numpy's ``astype(np.uint8)``
    *before* its clipping. numpy's cast truncates toward zero and then wraps modulo 256: −0.3 → 0,
    −5.7 → 251, 300.2 → 44. So a small negative Gaussian perturbation of a black pixel stays black
    (it does *not* turn white), while multiplicative noise that pushes a bright stroke above 255
    turns it dark. This wrapper reproduces exactly that for the operators in
    :data:`WRAPPING_OPERATORS` (tested against ``astype(np.uint8)`` on the reference operators'
    outputs); the other operators' results are rounded to whole levels (as OpenCV's blurs on uint8
    images do) and clipped. Every generated image stays a valid uint8 image.

    Args:
        op: the operator to wrap; the wrapper keeps its ``name``.
    """

    def __init__(self, op: MutationOperator):
        self.op = op
        self.name = op.name
        self.wraps = op.name in WRAPPING_OPERATORS

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.asarray(self.op.apply(x, rng), dtype=np.float64)
        if self.wraps:
            return np.mod(np.trunc(out), 256.0)  # numpy's float -> uint8 cast: truncate, then wrap
        return np.clip(np.rint(out), PIXEL_MIN, PIXEL_MAX)

    def __repr__(self) -> str:
        return f"Uint8Cast({self.op!r})"


def get_operators(
    names: Iterable[str | MutationOperator] | None = None, pixels: str = "float"
) -> list[MutationOperator]:
    """Instantiate operators by name (or pass instances through).

    Args:
        names: operator names from :data:`REGISTRY` and/or :class:`MutationOperator` instances;
            None means :data:`DEFAULT_OPERATORS`.
        pixels: one of :data:`PIXEL_MODES`; ``"uint8-wrap"`` wraps every operator in
            :class:`Uint8Cast` (reference-compatible uint8 casting).

    Returns:
        A list of operator instances, in the given order.

    Raises:
        InputError: unknown name or pixel mode, empty list or duplicate names.
    """
    if pixels not in PIXEL_MODES:
        raise InputError(f"unknown pixel mode {pixels!r}; choose one of {', '.join(PIXEL_MODES)}")
    items = list(DEFAULT_OPERATORS if names is None else names)
    if not items:
        raise InputError("at least one mutation operator is needed")
    ops: list[MutationOperator] = []
    for item in items:
        if isinstance(item, MutationOperator):
            ops.append(item)
        elif item in REGISTRY:
            ops.append(REGISTRY[item]())
        else:
            raise InputError(f"unknown mutation operator {item!r}; choose from {', '.join(sorted(REGISTRY))}")
    names_seen = [op.name for op in ops]
    if len(set(names_seen)) != len(names_seen):
        raise InputError(f"duplicate mutation operators: {names_seen}")
    if pixels == "uint8-wrap":
        ops = [op if isinstance(op, Uint8Cast) else Uint8Cast(op) for op in ops]
    return ops
