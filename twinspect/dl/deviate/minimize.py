"""Trigger minimisation: shrink a triggering input's difference to its seed while it still triggers.

After a search finds a triggering input ``t`` for seed ``s``, these passes bring it closer to ``s``
(each keeps a candidate only when it still triggers):

0. *prefer a compressed-model error* (optional ``prefer`` condition, e.g. "the original still gives
   the seed's label"): when ``t`` does not satisfy it, scan the interpolation ``s + α (t − s)`` at
   α = 1/n … (n−1)/n for the smallest α that does, and continue from there under the stricter
   condition; when ``t`` satisfies it, minimise under it (so a compressed-model error stays one);
1. bisection on the interpolation ``s + α (t − s)``, α ∈ [0, 1], for the smallest α that still
   triggers (``steps`` halvings; α = 1 is the current input, α = 0 the seed, which does not);
1a. *L∞ descent* (optional, ``descent`` > 0 rounds a level; off by default): when the trigger's L∞ is
   above ``linf_ref`` (a search whose ε grew on a robust model), rebuild it inside smaller L∞
   balls, each level 0.85 × the last down to ``linf_ref``: clip the change to the level, estimate
   per ``block`` × ``block`` block and sign how far setting it to ±level moves the two models' mean
   margin toward the boundary (two queries a block, score-based finite differences as in ZOO),
   add blocks best first until the additive model reaches the boundary, and bisect for the band
   where only the compressed model has crossed (:func:`_linf_descent`). It spreads a sparse, strong
   change over more pixels: on the issue-19 tuning pairs with a torch CNN, median L∞ 94 → 63
   (torch int8) and 70 → 64 (ONNX QDQ) but median SSIM 0.69 → 0.65 and 0.76 → 0.71 (16 seeds each),
   at about +300 minimisation queries — a trade, so it is not the default;
1b. *boundary following* (``method="boundary"``, the default; ``rounds`` rounds, each ending the
   method when it finds nothing better). Near twins' decision boundaries nearly coincide, and a
   trigger lies in the thin band between them, so restoring any part of it to the seed takes it
   out of the band (the passes 3–4 then rarely succeed). Instead, each round moves along the
   boundary: the change ``d = x − s`` is cut into ``block`` × ``block`` blocks; one query per
   changed block restores it and reads how far the two models' log-probability margins of the
   seed's label ``c`` rise (read from the probabilities the models return: a score-based
   finite difference). With those, the mean margin is modelled as additive in the blocks'
   weights, ``μ(s + Σ_k w_k d_k) ≈ μ(s) − Σ_k w_k e_k``, calibrated so that all blocks at weight 1
   give the margin seen at ``x``. For block sets K taken in the order of ``e_k`` (and of ``e_k``
   per unit of the block's own visibility) it predicts the common weight W at which the margin of
   ``s + W·d_K`` reaches 0, and scores that input by :func:`_cost` (L∞ / ``linf_ref`` +
   (1 − SSIM) / (1 − ``ssim_ref``), computed locally, no query). The ``tries`` cheapest
   predictions are then tried: walk out along the ray ``s + W·d_K`` from ``(1 − slack)·W`` (×1.25
   per query) until the model that must move has left ``c``, and bisect the ray (``bisect``
   halvings) for the band where only it has — the refinement of the margin search, so the
   result is again on the boundary. A round keeps its result only when it costs less than the
   input it started from. Weights never take a value past the seed's L∞ at the start of the
   pass (``W·max|d_K|`` is capped there), and K is a subset of the changed blocks, so L∞ and L0
   never grow (L2 may: fewer blocks at a larger weight). With ``prefer`` and a trigger that is
   not of the preferred kind, the first rounds instead look for one (the compressed model made to
   move, the cost not compared), and the rest minimise under ``prefer``;
2. bisection on an L∞ cap: ``s + clip(t − s, −L, L)`` for the smallest L that still triggers
   (``linf_steps`` halvings) — the largest pixel changes are the ones a person notices first;
3. restoring square patches (``patch`` × ``patch`` pixels, raster order) to the seed
   (``method="restore"`` only: step 1b covers it);
4. restoring single pixel positions to the seed (``pixels=True``), largest change first, or with
   ``pixel_order="ssim"`` (the margin and guided searches' default) the pixels whose restoring raises
   SSIM most first, estimated from SSIM's gradient (:func:`ssim_restore_order`);
5. the L∞ bisection once more (restoring the largest changes often lets the cap go lower);
6. *flat-region pass* (``flat`` = window sides; off by default here, on in the margin and guided
   searches, ``minimize_flat=True``, since the rule of ``benchmarks/results/deviate_ssim_notes.md``
   held on the fifth pair hold-out; :func:`_flat_pass`): SSIM
   compares local means, contrasts and structure in 7 × 7 windows, so a change where the seed is
   flat (an MNIST digit's black background) costs far more SSIM than the same change on or beside a
   stroke, where the seed already has contrast. For each window side ``k`` of ``flat`` in turn
   (smallest first: the most pixels dropped), the change is kept only where the seed's ``k`` × ``k``
   local standard deviation is at least ``flat_sd`` levels (the stroke and its neighbourhood) and
   set to 0 elsewhere; since that takes the input back across the compressed model's boundary, the
   kept part is scaled up along the ray ``s + clip(W·d_mask, −L', L')`` (W ×1.25 per query from 1, up
   to ``flat_grow``; L' = max(L, min(``linf_ref``, ``flat_headroom`` · L)) with L the trigger's L∞:
   the L∞ may grow by that factor but never past 48 levels, nor at all when it is already past them)
   until the model that must move has
   left the seed's label, and the ray is bisected for the band where only it has (``bisect``
   halvings, as in step 1b), a point counting only when that model's log-probability margin of the
   seed's label is at most −:data:`FLAT_MARGIN` (a point on the boundary itself can flip when re-run
   in the model's own runtime). The first side whose result costs less by :func:`_cost` is kept (a
   ``prefer`` trigger stays one: the condition is the same).
   Where the seed has no flat region (most natural images) the mask keeps every changed pixel and
   the pass spends no query. It has its own allowance of ``flat_queries`` queries on top of
   ``max_queries`` (the passes before it often spend the whole cap).

With ``method="restore"`` (the minimisation before issue 19) every candidate is, in every value,
between ``s`` and the current input, so no distance ever grows. The result is the last candidate
that triggered. Each candidate sent to the models is one query, reported apart from the search's
(``max_queries`` caps them; step 1b spends one query per changed block per round plus about a
dozen on the ray; the pixel pass at most one per pixel position). The procedure is deterministic
(no random draws). Step 6's mask follows the σ-maps of Croce & Hein ("Sparse and imperceivable
adversarial attacks", ICCV 2019: changes confined to where the image has local variation) and SSIM's own
definition (Wang et al., IEEE TIP 2004: its contrast term for a flat window is C2 / (σ² + C2)); its
constants (sides 3, 5, 7; 4 levels; W up to 4; headroom 1.25) were chosen on the tuning pairs (offline, on the
minimised triggers of the default search: headroom 1 moved median SSIM by 0 to +0.017, 1.25 by +0.025 to +0.052
at +0.5 to +2.2 levels median L∞, 1.5 about as 1.25 at a higher L∞). The rest is our own, built
from decision-based attacks' boundary search (Brendel,
Rauber, Bethge, "Decision-Based Adversarial Attacks", ICLR 2018: binary search toward the
original), HopSkipJumpAttack's alternation of a step along an estimated gradient at a boundary
point with a binary search back to the boundary (Chen, Jordan, Wainwright, IEEE S&P 2020), here
with the gradient over block weights estimated by score-based finite differences as in ZOO (Chen,
Zhang, Sharma, Yi, Hsieh, AISec 2017), and greedy L0 reduction. Its constants (block 4, 4 rounds,
6 tries, slack 0.05, bisect 12, the cost's references 48 levels / SSIM 0.8 — the targets of issue 19)
were chosen on the tuning pairs of ``benchmarks/deviate_suite.py`` (40 seeds each).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twinspect.dl.deviate.distance import LINF_REF, SSIM_REF

#: (1, H, W, C) batch → (original probabilities (1, K), compressed probabilities (1, K)).
QueryFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
#: (original probabilities, compressed probabilities) → does this input trigger?
TriggerFn = Callable[[np.ndarray, np.ndarray], bool]
#: candidate → candidate within the change budget, or None (not queried).
AdmitFn = Callable[[np.ndarray], np.ndarray | None]

#: Default cap on the queries of one minimisation.
DEFAULT_MAX_QUERIES = 600
#: The minimisation methods: ``"boundary"`` (step 1b, the default) and ``"restore"`` (before issue 19).
METHODS = ("boundary", "restore")
#: Default minimisation method.
DEFAULT_METHOD = "boundary"
#: Step 1a: each L∞ level is this times the last trigger's L∞.
DEFAULT_DESCENT_FACTOR = 0.85
#: Orders of step 4's single-pixel pass: ``"largest"`` (largest change first) and ``"ssim"`` (largest estimated
#: SSIM gain first, :func:`ssim_restore_order`).
PIXEL_ORDERS = ("largest", "ssim")
#: Default order of step 4.
DEFAULT_PIXEL_ORDER = "largest"


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


def _margin(p: np.ndarray, label: int) -> float:
    """Log-probability margin of ``label``: ``log p[label] − max_{j≠label} log p[j]`` (> 0: ``label`` is top-1;
    probabilities floored at 1e-12 so that saturated outputs stay finite)."""
    lp = np.log(np.maximum(np.asarray(p, np.float64).reshape(-1), 1e-12))
    return float(lp[label] - np.max(np.delete(lp, label)))


def _cost(seed: np.ndarray, x: np.ndarray, linf_ref: float, ssim_ref: float) -> float:
    """:func:`~twinspect.dl.deviate.distance.visibility_cost` of ``x``'s change to ``seed``."""
    from twinspect.dl.deviate.distance import ssim, visibility_cost
    from twinspect.errors import InputError

    d = float(np.abs(x - seed).max())
    if d == 0:
        return 0.0
    try:
        s = ssim(seed, x)
    except InputError:  # smaller than 3 × 3: no SSIM
        return visibility_cost(d, None, linf_ref, ssim_ref)
    return visibility_cost(d, s, linf_ref, ssim_ref)


def _reweight_round(seed, seed_probs, x, pf, pg, attempt, cond, room, *, block, lcap, linf_ref, ssim_ref, bisect,
                    tries, slack, mover=None):
    """One round of the boundary-following minimisation (step 1b of the module docstring).

    ``x`` triggers and lies near the boundary; ``mover`` (0 original, 1 compressed) is the model that
    must leave the seed's label (None: the one that left it at ``x``, and the result must cost less
    than ``x`` by :func:`_cost`; given: the result only has to satisfy ``cond``). Returns
    (x, pf, pg) of the new trigger, or None (nothing better found, or out of queries).
    """
    c = int(np.argmax(seed_probs[0]))
    lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
    cheaper = mover is None
    if mover is not None:
        stayer = 1 - mover
    elif lf == c and lg != c:
        mover, stayer = 1, 0
    elif lg == c and lf != c:
        mover, stayer = 0, 1
    else:
        return None
    d = x - seed
    h, w = seed.shape[:2]
    mu_seed = (_margin(seed_probs[0], c), _margin(seed_probs[1], c))
    mu_x = (_margin(pf, c), _margin(pg, c))
    masks, dm, ds = [], [], []
    for r in range(0, h, block):
        for q in range(0, w, block):
            if not np.any(np.abs(d[r:r + block, q:q + block]) >= 0.5):
                continue
            if not room():
                return None
            cand = x.copy()
            cand[r:r + block, q:q + block] = seed[r:r + block, q:q + block]
            got = attempt(cand, lambda qf, qg: True)
            if got is None:  # rejected by the change budget
                continue
            mu = (_margin(got[1], c), _margin(got[2], c))
            m = np.zeros(seed.shape, bool)
            m[r:r + block, q:q + block] = True
            masks.append(m)
            dm.append(mu[mover] - mu_x[mover])
            ds.append(mu[stayer] - mu_x[stayer])
    if not masks:
        return None
    em, es = np.asarray(dm), np.asarray(ds)
    # the two models' boundaries nearly coincide: model their mean margin, additive over blocks, calibrated
    # so that all blocks at weight 1 give the mean margin seen at x
    e = (em + es) / 2
    mu0 = (mu_seed[0] + mu_seed[1]) / 2
    if e.sum() > 0:
        e = e * (mu0 - (mu_x[0] + mu_x[1]) / 2) / e.sum()
    best_c = _cost(seed, x, linf_ref, ssim_ref)
    options = []
    alone = np.array([_cost(seed, np.where(m, x, seed), linf_ref, ssim_ref) for m in masks])
    orders = (np.argsort(-e, kind="stable"), np.argsort(-(e / (alone + 1e-3)), kind="stable"))
    seen = set()
    for order in orders:
        mask = np.zeros(seed.shape, bool)
        acc = 0.0
        for k in order:
            if e[k] <= 0:
                break
            mask = mask | masks[k]
            acc += float(e[k])
            w_m = mu0 / acc  # the mean margin reaches 0 here (linear model)
            dk = np.where(mask, d, 0.0)
            top = float(np.abs(dk).max())
            if top == 0 or w_m * top > lcap:
                continue
            key = mask.tobytes()
            if key in seen:
                continue
            seen.add(key)
            cand = np.clip(seed + np.float32(w_m) * dk, 0.0, 255.0)
            options.append((_cost(seed, cand, linf_ref, ssim_ref), w_m, dk, top))
    options.sort(key=lambda o: o[0])
    for cost, w_m, dk, top in options[:tries]:
        if (cheaper and cost >= best_c) or not room():
            break
        wmax = lcap / top
        got = _ray_band(lambda w, dk=dk: np.clip(seed + np.float32(w) * dk, 0.0, 255.0),
                        min(wmax, w_m * (1 - slack)), wmax, attempt, room, bisect,
                        accept=lambda res: bool(cond(res[1], res[2])),
                        on_c=lambda res: int(np.argmax(res[1 + mover])) == c)
        if got is not None and (not cheaper or _cost(seed, got[0], linf_ref, ssim_ref) < best_c):
            return got
    return None


def _ray_band(point, start, wmax, attempt, room, bisect, *, accept, on_c, short=None):
    """Walk out along a ray and bisect it for the band where only the mover has left the seed's label
    (steps 1b and 6 of the module docstring).

    ``point(w)`` is the ray's input at weight ``w``. From ``w = start`` the weight grows ×1.25 per
    query (up to ``wmax``) while the mover is still on the seed's label (``on_c``); the first input
    that ``accept`` takes ends the walk, one with the mover off the label ends it short of the band
    (both models crossed: the band, if any, is below). The interval from the last weight with the
    mover on the label to the first beyond it is then bisected (``bisect`` halvings): an accepted
    input lowers the upper end, one that is ``short`` of the band (default: ``on_c``) raises the lower
    end, any other lowers the upper end. Each input is one query (``attempt``), while ``room()``.

    Returns:
        The last accepted ``(x, pf, pg)``, or None.
    """
    short = on_c if short is None else short
    got, lo, hi = None, 0.0, start
    while room():
        res = attempt(point(hi), lambda qf, qg: True)
        if res is None:
            break
        if accept(res):
            got = res
            break
        if not on_c(res):
            break
        lo = hi
        if hi >= wmax:  # the mover stays on the label all along the ray: lo == hi, nothing to bisect
            break
        hi = min(wmax, hi * 1.25)
    for _ in range(bisect if hi > lo else 0):
        if not room():
            break
        mid = (lo + hi) / 2
        res = attempt(point(mid), lambda qf, qg: True)
        if res is None:
            break
        if accept(res):
            got, hi = res, mid
        elif short(res):
            lo = mid
        else:
            hi = mid
    return got


def _band_bisect(a, b, attempt, cond, room, c, steps):
    """Bisect the segment ``a → b`` (the compressed model on ``c`` at ``a``; both models off it at ``b``)
    for a point satisfying ``cond``; stop when the original is seen leaving ``c`` first.

    Returns ((x, pf, pg) or None, the farthest point of the segment seen with both models still on ``c``)."""
    lo, hi = 0.0, 1.0
    d = b - a
    for _ in range(steps):
        if not room():
            break
        mid = (lo + hi) / 2
        res = attempt(np.clip(a + np.float32(mid) * d, 0.0, 255.0), lambda qf, qg: True)
        if res is None:
            break
        if cond(res[1], res[2]):
            return res, a + np.float32(lo) * d
        lf, lg = int(np.argmax(res[1])), int(np.argmax(res[2]))
        if lf != c and lg == c:
            break
        if lg == c and lf == c:
            lo = mid
        else:
            hi = mid
    return None, a + np.float32(lo) * d


def _linf_descent(seed, x, pf, pg, c, attempt, cond, room, *, target, factor, rounds, side, bisect, tries):
    """Step 1a: lower the trigger's L∞ by rebuilding it inside a smaller L∞ ball (see the module docstring).

    ``x`` triggers with the compressed model off the seed's label ``c`` and the original on it. Per
    level ``L = max(target, factor · L∞(x − seed))``: the change is clipped to ±L (which takes the
    input back from the boundary); then, in up to ``rounds`` rounds, every ``side`` × ``side`` block
    is set to +L and to −L in turn (one query each) and the fall of the two models' mean
    log-probability margin of ``c`` it causes is read (a score-based finite difference, as in ZOO).
    Near the boundary, the ``tries`` blocks that alone take the compressed model across, with its
    margin falling most ahead of the original's, are bisected for the band where only the
    compressed model has left ``c``. Otherwise the blocks are added best first, each with its
    better sign, until the additive model predicts the margin at 0, and the segment to that
    candidate is bisected the same way; a candidate short of the boundary is kept and estimated
    again, and a segment on which the original crosses first is left at its last point where both
    models give ``c``. A level that yields a trigger satisfying ``cond`` is kept and the next level
    tried; the first that does not ends the step.

    Returns:
        (x, pf, pg) of the last trigger kept (``x`` itself when none).
    """
    h, w = seed.shape[:2]
    side = max(1, min(side, h, w))
    best = (x, pf, pg)
    level = float(np.abs(x - seed).max())

    def mean_margin(qf, qg):
        return (_margin(qf, c) + _margin(qg, c)) / 2

    while level > target + 0.5 and room():
        lv = max(target, level * factor)
        d = np.clip(best[0] - seed, -lv, lv)
        found = None
        for _ in range(rounds):
            cur = attempt(np.clip(seed + d, 0.0, 255.0), lambda qf, qg: True)
            if cur is None:
                break
            if cond(cur[1], cur[2]):
                found = cur
                break
            mu = mean_margin(cur[1], cur[2])
            if int(np.argmax(cur[1])) != c:  # the original left c first at the clipped input: give up here
                break
            options = []  # (fall of the mean margin, row, col, sign)
            crossing = []  # (g's drop − f's drop, candidate): blocks alone taking a model across
            for r in range(0, h, side):
                for q in range(0, w, side):
                    for sign in (1.0, -1.0):
                        if not room():
                            break
                        cd = d.copy()
                        cd[r:r + side, q:q + side] = sign * lv
                        if np.array_equal(cd, d):
                            continue
                        res = attempt(np.clip(seed + cd, 0.0, 255.0), lambda qf, qg: True)
                        if res is None:
                            continue
                        if cond(res[1], res[2]):
                            found = res
                            break
                        options.append((mu - mean_margin(res[1], res[2]), r, q, sign))
                        if int(np.argmax(res[2])) != c:
                            drop_g = _margin(cur[2], c) - _margin(res[2], c)
                            drop_f = _margin(cur[1], c) - _margin(res[1], c)
                            crossing.append((drop_g - drop_f, res[0]))
                    if found is not None:
                        break
                if found is not None:
                    break
            if found is not None or not room():
                break
            # at the boundary: the blocks that move the compressed model most ahead of the original,
            # bisected for the band where only it has crossed
            crossing.sort(key=lambda t: -t[0])
            for _, xb in crossing[:tries]:
                found, _last = _band_bisect(cur[0], xb, attempt, cond, room, c, bisect)
                if found is not None:
                    break
            if found is not None:
                break
            # each block once, with its better sign, best first
            by_block: dict[tuple[int, int], tuple[float, float]] = {}
            for e, r, q, sign in options:
                if e > by_block.get((r, q), (0.0, 0.0))[0]:
                    by_block[(r, q)] = (e, sign)
            ranked = sorted(by_block.items(), key=lambda kv: -kv[1][0])
            if not ranked:
                break
            nd, acc = d.copy(), 0.0
            for (r, q), (e, sign) in ranked:
                nd[r:r + side, q:q + side] = sign * lv
                acc += e
                if acc >= mu:
                    break
            new = attempt(np.clip(seed + nd, 0.0, 255.0), lambda qf, qg: True)
            if new is None:
                break
            if cond(new[1], new[2]):
                found = new
                break
            if int(np.argmax(new[2])) != c or int(np.argmax(new[1])) != c:
                # a model crossed: the band, if any, is on the segment; else go on from the segment's last
                # point where both models still give c
                found, last = _band_bisect(np.clip(seed + d, 0.0, 255.0), new[0], attempt, cond, room, c, bisect)
                if found is not None:
                    break
                d = last - seed
                continue
            d = nd  # not there yet: estimate again from the candidate
        if found is None:
            break
        best, level = found, float(np.abs(found[0] - seed).max())
    return best


#: Step 6's defaults: window sides of the seed's local standard deviation (pixels), the deviation
#: below which a pixel counts as flat (pixel levels), the largest ray weight W, the L∞ growth factor.
DEFAULT_FLAT = (3, 5, 7)
DEFAULT_FLAT_SD = 4.0
DEFAULT_FLAT_GROW = 4.0
DEFAULT_FLAT_HEADROOM = 1.25
#: Step 6's own query allowance (on top of ``max_queries``).
DEFAULT_FLAT_QUERIES = 60
#: Step 6 keeps a point only when the model that had to move is this far past its boundary (log-probability
#: margin of the seed's label ≤ −this), so that the result does not flip in another runtime's arithmetic.
FLAT_MARGIN = 0.01


def ssim_restore_order(seed: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Changed pixel positions of ``x``, those whose restoring to ``seed`` raises SSIM most first.

    The gain of restoring pixel p is estimated to first order from the gradient of the mean SSIM
    with respect to ``x`` (skimage's ``structural_similarity(..., gradient=True)``, Wang et al., IEEE
    TIP 2004): ``ΔSSIM_p ≈ Σ_channels ∂SSIM/∂x_p · (seed_p − x_p)``, computed once, locally, with no
    query. On a flat seed region (an MNIST background) a change costs far more SSIM than on a stroke,
    so those pixels come first.

    Args:
        seed, x: (H, W, C) float images in the 0–255 scale, one shape.

    Returns:
        int64 (P,) flat positions ``r * W + c`` of the P pixels where ``x`` differs from ``seed``
        (any channel), in descending estimated gain (ties: larger change first, then raster order).
        Images too small for SSIM (below 3 × 3) give the largest-change order.
    """
    from skimage.metrics import structural_similarity

    from twinspect.dl.deviate.distance import ssim_win_size

    a, b = np.asarray(seed, np.float64), np.asarray(x, np.float64)
    change = np.abs(b - a).max(axis=-1).ravel()
    changed = np.flatnonzero(change > 0)
    win = ssim_win_size(a.shape[:2])
    if win < 3:
        return changed[np.argsort(-change[changed], kind="stable")]
    # per channel (one channel included: the same gradient as the 2-D call), averaged over channels
    _, grad = structural_similarity(a, b, data_range=255.0, win_size=win, gradient=True, channel_axis=2)
    gain = (grad * (a - b)).sum(axis=-1).ravel()[changed]
    return changed[np.lexsort((-change[changed], -gain))].astype(np.int64)


def flat_mask(seed: np.ndarray, side: int, sd: float = DEFAULT_FLAT_SD) -> np.ndarray:
    """Where the seed has structure: its ``side`` × ``side`` local standard deviation is ≥ ``sd``.

    Args:
        seed: (H, W, C) or (H, W) image in the 0–255 scale.
        side: window side in pixels (≥ 1; windows are clipped at the border, ``mode="nearest"``).
        sd: threshold in pixel levels (the largest over the channels counts).

    Returns:
        (H, W) bool: True where a change is kept by step 6 (the seed is not flat there).
    """
    from scipy.ndimage import uniform_filter

    x = np.asarray(seed, np.float64)
    if x.ndim == 2:
        x = x[..., None]
    size = (side, side, 1)
    mean = uniform_filter(x, size=size, mode="nearest")
    var = np.maximum(uniform_filter(x * x, size=size, mode="nearest") - mean * mean, 0.0)
    return np.asarray(np.sqrt(var).max(axis=2) >= sd)


def _flat_pass(seed, x, pf, pg, c, attempt, cond, room, *, sides, sd, grow, bisect, linf_ref, ssim_ref,
               headroom=DEFAULT_FLAT_HEADROOM):
    """Step 6 of the module docstring: drop the change where the seed is flat and scale the rest up to the band.

    ``x`` triggers with exactly one model off the seed's label ``c`` (the other on it); that model
    must be off it again. Tries the window ``sides`` in order and returns the first (x, pf, pg) that
    satisfies ``cond`` and costs less than ``x`` by :func:`_cost`, or None (nothing cheaper, a
    trigger with both models off ``c``, or out of queries).
    """
    lf, lg = int(np.argmax(pf)), int(np.argmax(pg))
    if lf == c and lg != c:
        mover = 1
    elif lg == c and lf != c:
        mover = 0
    else:
        return None
    d = x - seed
    changed = np.abs(d).max(axis=-1) >= 0.5
    top = float(np.abs(d).max())
    if top == 0:
        return None
    # the kept part may grow up to headroom × the trigger's L∞, never past linf_ref (nor past its own L∞)
    cap = max(top, min(linf_ref, headroom * top))
    base = _cost(seed, x, linf_ref, ssim_ref)
    tried = set()

    def past(res) -> bool:
        """``cond`` holds and the mover is at least ``FLAT_MARGIN`` past its boundary (a result that
        sits on the boundary itself can flip in another runtime's arithmetic)."""
        return bool(cond(res[1], res[2])) and _margin((res[1], res[2])[mover], c) <= -FLAT_MARGIN

    for side in sides:
        keep = flat_mask(seed, side, sd) & changed
        if not keep.any() or not (changed & ~keep).any():
            continue  # nothing left, or nothing dropped
        key = keep.tobytes()
        if key in tried:
            continue
        tried.add(key)
        dm = np.where(keep[..., None], d, 0.0).astype(np.float32)
        small = float(np.abs(dm[np.abs(dm) >= 0.5]).min())
        wmax = max(1.0, min(grow, cap / small))  # past cap / small every kept value sits at ±cap

        def ray(w: float, dm: np.ndarray = dm) -> np.ndarray:
            return np.clip(seed + np.clip(np.float32(w) * dm, -cap, cap), 0.0, 255.0)

        def on_c(res) -> bool:
            return int(np.argmax(res[1 + mover])) == c

        # a point that satisfies cond but is not yet FLAT_MARGIN past the boundary is short of the band
        got = _ray_band(ray, 1.0, wmax, attempt, room, bisect, accept=past, on_c=on_c,
                        short=lambda res: on_c(res) or bool(cond(res[1], res[2])))
        if got is not None and _cost(seed, got[0], linf_ref, ssim_ref) < base:
            return got
        if not room():
            break
    return None


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
    method: str = DEFAULT_METHOD,
    rounds: int = 4,
    block: int = 4,
    bisect: int = 12,
    linf_ref: float = LINF_REF,
    ssim_ref: float = SSIM_REF,
    tries: int = 6,
    slack: float = 0.05,
    seed_probs: tuple[np.ndarray, np.ndarray] | None = None,
    seek_preferred: bool = True,
    descent: int = 0,
    descent_factor: float = DEFAULT_DESCENT_FACTOR,
    flat: tuple[int, ...] = (),
    flat_sd: float = DEFAULT_FLAT_SD,
    flat_grow: float = DEFAULT_FLAT_GROW,
    flat_headroom: float = DEFAULT_FLAT_HEADROOM,
    flat_queries: int = DEFAULT_FLAT_QUERIES,
    pixel_order: str = DEFAULT_PIXEL_ORDER,
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
        method: ``"boundary"`` (step 1b, then the passes 2, 4, 5) or ``"restore"`` (the passes 2–5).
        rounds: boundary-following rounds at most (step 1b; ≥ 0).
        block: side in pixels of the blocks step 1b weighs (≥ 1).
        bisect: halvings of a step-1b ray bisection.
        linf_ref, ssim_ref: the references of :func:`_cost` that step 1b minimises (L∞ in pixel
            levels, > 0; SSIM < 1).
        tries: step-1b predictions tried per round, cheapest first (≥ 1).
        slack: step 1b starts its walk along a ray at (1 − slack) × the predicted weight.
        seed_probs: both models' (K,) probabilities on ``seed`` (None: step 1b spends one query on them).
        seek_preferred: step 1b looks for a ``prefer`` trigger when ``trigger`` is not one.
        descent: step 1a's estimation rounds per L∞ level (0: no step 1a; each round costs two
            queries per ``block`` × ``block`` block). Runs only when the trigger's L∞ is above
            ``linf_ref`` and the compressed model is the one that left the seed's label.
        descent_factor: step 1a's level ratio, in (0, 1): each level is this times the last L∞.
        flat: step 6's window sides in pixels, tried in order (each ≥ 1; empty: no step 6, the
            default here; :data:`DEFAULT_FLAT` is the searches' ``minimize_flat=True``). Runs with
            ``method="boundary"`` only, when exactly one model has left the seed's label.
        flat_sd: step 6's flatness threshold: a pixel whose seed neighbourhood has a standard
            deviation below this many levels counts as flat (> 0).
        flat_grow: step 6's largest ray weight W (≥ 1).
        flat_headroom: step 6's L∞ growth factor (≥ 1; the L∞ never grows past ``linf_ref`` by it).
        flat_queries: queries step 6 may spend on top of what the steps before it spent (its own
            allowance, outside ``max_queries``, which the earlier passes often exhaust; ≥ 1).
        pixel_order: step 4's order, ``"largest"`` (largest change first) or ``"ssim"`` (the pixels whose
            restoring raises SSIM most first, estimated locally from SSIM's gradient with no query:
            :func:`ssim_restore_order`; where the query cap ends the pass early, the pixels it reached
            are the ones that cost the most SSIM).

    Returns:
        :class:`Minimized` (``x`` is ``trigger`` itself when nothing smaller triggers).

    Raises:
        ValueError: an unknown ``method``, or a step-1a/1b/6 setting out of its range.
    """
    if any(int(k) < 1 for k in flat) or not flat_sd > 0 or not flat_grow >= 1 or not flat_headroom >= 1 or flat_queries < 1:
        raise ValueError("minimisation: flat window sides >= 1, flat_sd > 0, flat_grow >= 1, flat_headroom >= 1 and flat_queries >= 1 needed")
    if descent < 0 or not 0 < descent_factor < 1:
        raise ValueError("minimisation: descent >= 0 and 0 < descent_factor < 1 needed")
    if method not in METHODS:
        raise ValueError(f"unknown minimisation method {method!r}; choose one of {', '.join(METHODS)}")
    if pixel_order not in PIXEL_ORDERS:
        raise ValueError(f"unknown pixel order {pixel_order!r}; choose one of {', '.join(PIXEL_ORDERS)}")
    if rounds < 0 or block < 1 or tries < 1 or not linf_ref > 0 or not ssim_ref < 1:
        raise ValueError("minimisation: rounds >= 0, block >= 1, tries >= 1, linf_ref > 0 and ssim_ref < 1 needed")
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

    def seed_outputs() -> tuple[np.ndarray, np.ndarray]:
        """Both models' (K,) probabilities on the seed: ``seed_probs``, or one query the first time they are needed."""
        nonlocal spent, seed_probs
        if seed_probs is None:
            pf0, pg0 = query(seed[None])
            spent += 1
            seed_probs = (pf0[0], pg0[0])
        return seed_probs

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

    # 1a. L∞ descent: search again inside smaller L∞ balls (a trigger found with a large ε)
    if descent > 0 and method == "boundary" and float(np.abs(best - seed).max()) > linf_ref + 0.5 and room():
        c0 = int(np.argmax(seed_outputs()[0]))
        if int(np.argmax(bf)) == c0 and int(np.argmax(bg)) != c0:
            best, bf, bg = _linf_descent(seed, best, bf, bg, c0, attempt, cond, room, target=linf_ref,
                                         factor=descent_factor, rounds=descent, side=block, bisect=bisect,
                                         tries=tries)

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

    # 1b. boundary following: re-weight the blocks of the change along the linearised boundary
    if method == "boundary":
        lcap = float(np.abs(best - seed).max())
        for _ in range(rounds):
            if not room():
                break
            seek = prefer is not None and not preferred and seek_preferred
            want = prefer if seek and prefer is not None else cond
            got_b = _reweight_round(seed, seed_outputs(), best, bf, bg, attempt, want, room,
                                    block=block, lcap=lcap, linf_ref=linf_ref, ssim_ref=ssim_ref, bisect=bisect,
                                    tries=tries, slack=slack, mover=1 if seek else None)
            if got_b is None:
                if seek:
                    seek_preferred = False
                    continue
                break
            best, bf, bg = got_b
            if seek:
                cond, preferred = want, True
    # 2. L∞ cap
    linf_pass()
    # 3. patches
    if patch > 0 and method == "restore":
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
    # 4. single pixel positions, largest change (or largest SSIM gain) first
    if pixels:
        change = np.abs(best - seed).max(axis=-1)
        order = (ssim_restore_order(seed, best) if pixel_order == "ssim"
                 else np.argsort(-change, axis=None, kind="stable"))
        for pos in order:
            if not room():
                break
            r, c = divmod(int(pos), seed.shape[1])
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
    # 6. drop the change where the seed is flat, scale the rest back to the band (its own query allowance:
    # the passes before it often spend the whole cap)
    if flat and method == "boundary":
        stop6 = spent + flat_queries

        def room6() -> bool:
            return spent < stop6

        got6 = _flat_pass(seed, best, bf, bg, int(np.argmax(seed_outputs()[0])), attempt, cond, room6,
                          sides=tuple(int(k) for k in flat), sd=flat_sd, grow=flat_grow, bisect=bisect,
                          linf_ref=linf_ref, ssim_ref=ssim_ref, headroom=flat_headroom)
        if got6 is not None:
            best, bf, bg = got6
    return Minimized(best, bf, bg, spent, alpha, preferred)
