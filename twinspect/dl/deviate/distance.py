"""How far a triggering input is from its seed, and the change budget a search keeps to.

Distances are measured in the 0–255 pixel scale on (H, W, C) images:

* ``l0`` — pixel positions (H × W) where some channel changed by at least half a level (a change
  that survives rounding to 8 bits);
* ``l2`` — Euclidean norm of the difference over all H × W × C values (pixel levels);
* ``linf`` — largest absolute change of one value (pixel levels);
* ``ssim`` — structural similarity (Wang, Bovik, Sheikh, Simoncelli, "Image quality assessment:
  from error visibility to structural similarity", IEEE TIP 2004) computed by scikit-image's
  ``structural_similarity`` with ``data_range=255`` (7 × 7 uniform window, smaller for tiny images).

:class:`ChangeBudget` bounds every candidate of a search relative to its seed, as Foolbox separates
an attack from its distance: an L∞ bound is met by projecting the candidate back (clipping the
difference to ±L), an SSIM bound by rejecting the candidate before it reaches a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinspect.errors import InputError


def ssim_win_size(shape: tuple[int, ...]) -> int:
    """SSIM window side for an image of ``shape`` (H, W, ...): 7 (skimage's default), or the largest odd
    side that fits a smaller image (below 3: too small for SSIM)."""
    side = min(shape[0], shape[1])
    return 7 if side >= 7 else (side if side % 2 else side - 1)


def ssim(seed: np.ndarray, x: np.ndarray) -> float:
    """SSIM of ``x`` to ``seed``: (H, W, C) or (H, W) images in the 0–255 scale → float in [−1, 1].

    Raises:
        InputError: the shapes differ or the images are smaller than 3 × 3.
    """
    from skimage.metrics import structural_similarity

    a, b = np.asarray(seed, dtype=np.float64), np.asarray(x, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"images of shapes {a.shape} and {b.shape} cannot be compared")
    if a.ndim == 3 and a.shape[2] == 1:
        a, b = a[..., 0], b[..., 0]
    win = ssim_win_size(a.shape)
    if win < 3:
        raise InputError(f"images of shape {a.shape} are too small for SSIM (need at least 3 x 3)")
    return float(structural_similarity(a, b, data_range=255.0, win_size=win,
                                       channel_axis=2 if a.ndim == 3 else None))


def trigger_distances(seed: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """L0, L2, L∞ and SSIM of ``x`` to ``seed`` (see the module docstring).

    Args:
        seed, x: (H, W, C) or (H, W) images of one shape in the 0–255 scale (any numeric dtype).

    Returns:
        ``{"l0": int, "l2": float, "linf": float, "ssim": float}``.

    Raises:
        InputError: the shapes differ.
    """
    a, b = np.asarray(seed, dtype=np.float64), np.asarray(x, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"images of shapes {a.shape} and {b.shape} cannot be compared")
    d = b - a
    per_pixel = np.abs(d) if d.ndim == 2 else np.abs(d).max(axis=2)
    return {
        "l0": int(np.count_nonzero(per_pixel >= 0.5)),
        "l2": float(np.sqrt(np.sum(d * d))),
        "linf": float(np.max(np.abs(d))) if d.size else 0.0,
        "ssim": ssim(a, b),
    }


#: The references of :func:`visibility_cost`, in the units of :func:`trigger_distances`: issue 19's
#: targets for a trigger a person accepts (median L∞ ≤ 48 pixel levels, median SSIM ≥ 0.8).
LINF_REF = 48.0
SSIM_REF = 0.8


def visibility_cost(linf: float, ssim_value: float | None, linf_ref: float = LINF_REF, ssim_ref: float = SSIM_REF) -> float:
    """How visible a change is: L∞ / ``linf_ref`` + (1 − SSIM) / (1 − ``ssim_ref``), each term relative to its aim.

    Args:
        linf: the change's L∞ in pixel levels (≥ 0).
        ssim_value: its SSIM to the seed, or None when the image is too small for SSIM (the cost is
            then L∞ / ``linf_ref`` alone).
        linf_ref, ssim_ref: the references (``linf_ref`` > 0, ``ssim_ref`` < 1).

    Returns:
        The cost (float, 0 for no change; 2.0 for a change exactly at both references).
    """
    if linf == 0:
        return 0.0
    if ssim_value is None:
        return linf / linf_ref
    return linf / linf_ref + (1.0 - ssim_value) / max(1e-6, 1.0 - ssim_ref)


@dataclass(frozen=True)
class ChangeBudget:
    """Bounds on a candidate's change relative to its seed.

    Args:
        max_linf: largest allowed change of one value, in pixel levels, 1–255 (None: no bound).
        min_ssim: smallest allowed SSIM to the seed, in (0, 1] (None: no bound).

    Raises:
        InputError: a bound outside its range.
    """

    max_linf: float | None = None
    min_ssim: float | None = None

    def __post_init__(self) -> None:
        if self.max_linf is not None and not 1 <= self.max_linf <= 255:
            raise InputError(f"max-linf must be in 1..255 pixel levels, got {self.max_linf}")
        if self.min_ssim is not None and not 0 < self.min_ssim <= 1:
            raise InputError(f"min-ssim must be in (0, 1], got {self.min_ssim}")

    @property
    def active(self) -> bool:
        return self.max_linf is not None or self.min_ssim is not None

    def admit(self, seed: np.ndarray, x: np.ndarray) -> np.ndarray | None:
        """The candidate ``x`` projected into the L∞ ball of ``seed``, or None when its SSIM is too low.

        Args:
            seed, x: (H, W, C) float32 images in the 0–255 scale.

        Returns:
            (H, W, C) float32 image within the budget, or None (the candidate must not be queried).
        """
        if self.max_linf is not None:
            lim = np.float32(self.max_linf)
            x = np.clip(x, seed - lim, seed + lim).astype(np.float32)
        if self.min_ssim is not None and ssim(seed, x) < self.min_ssim:
            return None
        return x

    def to_dict(self) -> dict:
        return {"max_linf": self.max_linf, "min_ssim": self.min_ssim}
