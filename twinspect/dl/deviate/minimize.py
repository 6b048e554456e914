"""Trigger minimisation: shrink a triggering input's difference to its seed while it still triggers.

After a search finds a triggering input ``t`` for seed ``s``, these passes bring it closer to ``s``
(each keeps a candidate only when it still triggers):

0. *prefer a compressed-model error* (optional ``prefer`` condition, e.g. "the original still gives
   the seed's label"): when ``t`` does not satisfy it, scan the interpolation ``s + α (t − s)`` at
   α = 1/n … (n−1)/n for the smallest α that does, and continue from there under the stricter
   condition; when ``t`` satisfies it, minimise under it (so a compressed-model error stays one);
1. bisection on the interpolation ``s + α (t − s)``, α ∈ [0, 1], for the smallest α that still
   triggers (``steps`` halvings; α = 1 is the current input, α = 0 the seed, which does not);
2. bisection on an L∞ cap: ``s + clip(t − s, −L, L)`` for the smallest L that still triggers
   (``linf_steps`` halvings) — the largest pixel changes are the ones a person notices first;
3. restoring square patches (``patch`` × ``patch`` pixels, raster order) to the seed;
4. restoring single pixel positions to the seed, largest change first (``pixels=True``);
5. the L∞ bisection once more (restoring the largest changes often lets the cap go lower).

Every candidate is, in every value, between ``s`` and the current input, so no distance (L0, L2,
L∞) ever grows; the result is the last candidate that triggered. Each candidate sent to the models
is one query, reported apart from the search's (``max_queries`` caps them; the pixel pass is the
expensive one, at most one query per pixel position). This is our own procedure in the spirit of
decision-based attacks' boundary search (Brendel, Rauber, Bethge, "Decision-Based Adversarial
Attacks", ICLR 2018, binary search toward the original) and of greedy L0 reduction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: (1, H, W, C) batch → (original probabilities (1, K), compressed probabilities (1, K)).
QueryFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
#: (original probabilities, compressed probabilities) → does this input trigger?
TriggerFn = Callable[[np.ndarray, np.ndarray], bool]
#: candidate → candidate within the change budget, or None (not queried).
AdmitFn = Callable[[np.ndarray], np.ndarray | None]

#: Default cap on the queries of one minimisation.
DEFAULT_MAX_QUERIES = 600


@dataclass
class Minimized:
    """Result of :func:`minimize_trigger`: the input, both models' probabilities, queries spent.

    ``alpha`` is the interpolation factor the first bisection ended at (relative to the input it
    started from); ``preferred`` tells whether the result satisfies the ``prefer`` condition.
    """

    x: np.ndarray
    orig_probs: np.ndarray
    comp_probs: np.ndarray
    queries: int
    alpha: float
    preferred: bool = False


def minimize_trigger(
    seed: np.ndarray,
    trigger: np.ndarray,
    probs: tuple[np.ndarray, np.ndarray],
    query: QueryFn,
    triggers: TriggerFn,
    *,
    admit: AdmitFn | None = None,
    steps: int = 8,
    linf_steps: int = 8,
    patch: int = 4,
    pixels: bool = True,
    prefer: TriggerFn | None = None,
    scan: int = 16,
    max_queries: int | None = DEFAULT_MAX_QUERIES,
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
        steps: interpolation bisection halvings (0 = none).
        linf_steps: L∞-cap bisection halvings per L∞ pass (0 = no L∞ passes).
        patch: side of the restored squares in pixels (0 = no patch pass).
        pixels: run the single-pixel restoring pass.
        prefer: a stricter condition implying ``triggers`` (e.g. a compressed-model error), sought
            first along the interpolation and then kept (None: only ``triggers``).
        scan: points of the interpolation scan for ``prefer`` (n − 1 candidates at most).
        max_queries: cap on the queries of the minimisation (None: none).
        integer: round candidates to whole pixel levels (for integer-valued seeds and triggers,
            e.g. the uint8 pixel mode; |round(α·d)| ≤ |d| and |round(clip(d))| ≤ |d| for an
            integer d, so rounding never moves a value farther from the seed).

    Returns:
        :class:`Minimized` (``x`` is ``trigger`` itself when nothing smaller triggers).
    """
    seed = seed.astype(np.float32)
    best, bf, bg = trigger.astype(np.float32), probs[0], probs[1]
    spent = 0
    cond = triggers
    preferred = False

    def room() -> bool:
        return max_queries is None or spent < max_queries

    def attempt(cand: np.ndarray, ok: TriggerFn) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        nonlocal spent
        if integer:
            cand = np.rint(cand)
        cand = cand.astype(np.float32)
        if admit is not None:
            adm = admit(cand)
            if adm is None:
                return None
            cand = adm
        pf, pg = query(cand[None])
        spent += 1
        return (cand, pf[0], pg[0]) if ok(pf[0], pg[0]) else None

    # 0. look for the preferred kind along the interpolation
    if prefer is not None:
        if prefer(bf, bg):
            cond, preferred = prefer, True
        else:
            diff = best - seed
            for k in range(1, max(scan, 1)):
                if not room():
                    break
                got = attempt(seed + np.float32(k / scan) * diff, prefer)
                if got is not None:
                    best, bf, bg = got
                    cond, preferred = prefer, True
                    break

    # 1. interpolation bisection
    diff = best - seed
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        if not room():
            break
        mid = (lo + hi) / 2
        got = attempt(seed + np.float32(mid) * diff, cond)
        if got is None:
            lo = mid
        else:
            hi = mid
            best, bf, bg = got
    alpha = hi

    def linf_pass() -> None:
        nonlocal best, bf, bg
        d = best - seed
        lo_l, hi_l = 0.0, float(np.abs(d).max())
        for _ in range(linf_steps):
            if not room() or hi_l - lo_l < 0.5:
                break
            mid = (lo_l + hi_l) / 2
            got = attempt(seed + np.clip(d, -mid, mid), cond)
            if got is None:
                lo_l = mid
            else:
                hi_l = mid
                best, bf, bg = got

    # 2. L∞ cap
    linf_pass()
    # 3. patches
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
                got = attempt(cand, cond)
                if got is not None:
                    best, bf, bg = got
    # 4. single pixel positions, largest change first
    if pixels:
        change = np.abs(best - seed).max(axis=-1)
        order = np.argsort(-change, axis=None, kind="stable")
        for flat in order:
            if not room():
                break
            r, c = divmod(int(flat), seed.shape[1])
            if change[r, c] == 0:
                break
            if np.array_equal(best[r, c], seed[r, c]):
                continue
            cand = best.copy()
            cand[r, c] = seed[r, c]
            got = attempt(cand, cond)
            if got is not None:
                best, bf, bg = got
    # 5. L∞ cap again
    if pixels or patch > 0:
        linf_pass()
    return Minimized(best, bf, bg, spent, alpha, preferred)
