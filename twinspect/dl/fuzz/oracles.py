"""Test oracles of differential testing: crash, NaN/Inf and inconsistency (CRADLE's D_MAD).

D_MAD follows CRADLE (Pham et al., ICSE 2019) as used without ground truth by LEMON and MEMO: the mean
absolute distance between two systems' outputs, ``D_MAD(o1, o2) = mean(|o1 - o2|)`` over all elements
(outputs flattened and concatenated). An inconsistency is a pair with ``D_MAD`` above a threshold
calibrated on the seed models (:func:`calibrate_threshold`).
"""

from __future__ import annotations

import numpy as np


def d_mad(a: list[np.ndarray] | np.ndarray, b: list[np.ndarray] | np.ndarray) -> float:
    """Mean absolute distance between two output lists (CRADLE's D_MAD).

    Args:
        a, b: outputs of two systems (arrays, or lists of arrays of matching shapes), any float dtype.

    Returns:
        ``mean(|a - b|)`` over the finite positions of both, as float; ``nan`` when no position is finite.

    Raises:
        ValueError: the outputs' shapes differ.
    """
    la = [np.asarray(x, dtype=np.float64).ravel() for x in (a if isinstance(a, list) else [a])]
    lb = [np.asarray(x, dtype=np.float64).ravel() for x in (b if isinstance(b, list) else [b])]
    if [x.size for x in la] != [x.size for x in lb]:
        raise ValueError(f"output shapes differ: {[x.size for x in la]} vs {[x.size for x in lb]}")
    fa, fb = np.concatenate(la) if la else np.zeros(0), np.concatenate(lb) if lb else np.zeros(0)
    ok = np.isfinite(fa) & np.isfinite(fb)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(fa[ok] - fb[ok])))


def nonfinite(outs: list[np.ndarray]) -> dict[str, bool]:
    """``{"nan": any NaN, "inf": any ±Inf}`` over a system's outputs."""
    return {"nan": any(bool(np.isnan(o).any()) for o in outs if o.dtype.kind == "f"),
            "inf": any(bool(np.isinf(o).any()) for o in outs if o.dtype.kind == "f")}


def calibrate_threshold(distances: list[float], factor: float = 10.0, floor: float = 1e-4) -> float:
    """Inconsistency threshold from D_MAD values of seed models on all system pairs.

    Args:
        distances: D_MAD values measured on seed models (assumed bug-free).
        factor: safety factor applied to the largest seed distance.
        floor: smallest threshold returned.

    Returns:
        ``max(floor, factor * max(distances))`` (``floor`` when no finite distance).
    """
    finite = [d for d in distances if np.isfinite(d)]
    return max(floor, factor * max(finite)) if finite else floor


def judge(results: dict[str, dict], threshold: float) -> list[dict]:
    """Findings of one model from each system's result.

    Args:
        results: system → ``{"status": "ok"|"error"|"crash"|"timeout", "outputs": list of arrays (ok only),
            "error_type", "message", "frames"}``.
        threshold: D_MAD inconsistency threshold.

    Returns:
        A list of ``{"kind": "crash"|"nan"|"inconsistency", "systems": [...], "detail": {...}}``:
        *crash* when some systems fail and others succeed (each failing system separately); *nan* when
        NaN/Inf appears in some successful systems' outputs but not all; *inconsistency* for each system
        pair whose D_MAD exceeds the threshold (or whose output shapes differ).
    """
    ok = {s: r for s, r in results.items() if r["status"] == "ok"}
    bad = {s: r for s, r in results.items() if r["status"] != "ok"}
    found: list[dict] = []
    if ok:
        for s, r in bad.items():
            found.append({"kind": "crash", "systems": [s], "detail": {
                "status": r["status"], "error_type": r.get("error_type", ""),
                "message": r.get("message", "")[:500], "frames": r.get("frames", [])}})
    flags = {s: nonfinite(r["outputs"]) for s, r in ok.items()}
    with_nf = sorted(s for s, f in flags.items() if f["nan"] or f["inf"])
    if with_nf and len(with_nf) < len(ok):
        found.append({"kind": "nan", "systems": with_nf, "detail": {s: flags[s] for s in sorted(ok)}})
    names = sorted(ok)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            try:
                d = d_mad(ok[a]["outputs"], ok[b]["outputs"])
            except ValueError as exc:
                found.append({"kind": "inconsistency", "systems": [a, b], "detail": {"shape": str(exc)}})
                continue
            if np.isfinite(d) and d > threshold:
                found.append({"kind": "inconsistency", "systems": [a, b], "detail": {"d_mad": d, "threshold": threshold}})
    return found
