"""Trigger minimisation: shrink a triggering input's difference to its seed while it still triggers.

After a search finds a triggering input ``t`` for seed ``s``, two passes bring it closer to ``s``:

1. bisection on the interpolation ``s + α (t − s)``, α ∈ [0, 1], for the smallest α that still
   triggers (``steps`` halvings; α = 1 is the trigger itself, α = 0 the seed, which does not);
2. restoring square patches (``patch`` × ``patch`` pixels, raster order) to the seed, keeping each
   restoration under which the input still triggers.

Every candidate is a convex combination of ``s`` and the current input in every value, so no
distance (L0, L2, L∞) ever grows; the result is the last candidate that triggered. Each candidate
sent to the models is one query, reported apart from the search's. This is our own procedure in the
spirit of decision-based attacks' boundary search (Brendel, Rauber, Bethge, "Decision-Based
Adversarial Attacks", ICLR 2018, binary search toward the original).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: (1, H, W, C) batch → (original probabilities (K,), compressed probabilities (K,)).
QueryFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
#: (original probabilities, compressed probabilities) → does this input trigger?
TriggerFn = Callable[[np.ndarray, np.ndarray], bool]
#: candidate → candidate within the change budget, or None (not queried).
AdmitFn = Callable[[np.ndarray], np.ndarray | None]


@dataclass
class Minimized:
    """Result of :func:`minimize_trigger`: the input, both models' probabilities, queries spent."""

    x: np.ndarray
    orig_probs: np.ndarray
    comp_probs: np.ndarray
    queries: int
    alpha: float


def minimize_trigger(
    seed: np.ndarray,
    trigger: np.ndarray,
    probs: tuple[np.ndarray, np.ndarray],
    query: QueryFn,
    triggers: TriggerFn,
    *,
    admit: AdmitFn | None = None,
    steps: int = 8,
    patch: int = 4,
    max_queries: int | None = None,
    integer: bool = False,
) -> Minimized:
    """Shrink ``trigger``'s difference to ``seed`` while ``triggers`` holds (see the module docstring).

    Args:
        seed: (H, W, C) float32 seed in the 0–255 scale.
        trigger: (H, W, C) float32 triggering input.
        probs: both models' (K,) probabilities on ``trigger``.
        query: evaluates a (1, H, W, C) batch on both models.
        triggers: the trigger condition (labels differ, and e.g. the original keeps the true label).
        admit: change-budget check; a rejected candidate is skipped without a query.
        steps: bisection halvings (0 = none).
        patch: side of the restored squares in pixels (0 = no restoring pass).
        max_queries: cap on the queries of the minimisation (None: none).
        integer: round interpolated candidates to whole pixel levels (for integer-valued seeds and
            triggers, e.g. the uint8 pixel mode; |round(α·d)| ≤ |d| for an integer d, so rounding
            never moves a value farther from the seed).

    Returns:
        :class:`Minimized` (``x`` is ``trigger`` itself when nothing smaller triggers).
    """
    best, (bf, bg) = trigger.astype(np.float32), probs
    spent = 0
    diff = (trigger.astype(np.float32) - seed).astype(np.float32)

    def room() -> bool:
        return max_queries is None or spent < max_queries

    def attempt(cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        nonlocal spent
        if admit is not None:
            adm = admit(cand)
            if adm is None:
                return None
            cand = adm
        pf, pg = query(cand[None])
        spent += 1
        return (cand, pf[0], pg[0]) if triggers(pf[0], pg[0]) else None

    lo, hi = 0.0, 1.0
    for _ in range(steps):
        if not room():
            break
        mid = (lo + hi) / 2
        cand = seed + np.float32(mid) * diff
        got = attempt((np.rint(cand) if integer else cand).astype(np.float32))
        if got is None:
            lo = mid
        else:
            hi = mid
            best, bf, bg = got
    if patch > 0:
        h, w = seed.shape[:2]
        for r in range(0, h, patch):
            for c in range(0, w, patch):
                if not room():
                    break
                if np.array_equal(best[r:r + patch, c:c + patch], seed[r:r + patch, c:c + patch]):
                    continue
                cand = best.copy()
                cand[r:r + patch, c:c + patch] = seed[r:r + patch, c:c + patch]
                got = attempt(cand)
                if got is not None:
                    best, bf, bg = got
    return Minimized(best, bf, bg, spent, hi)
