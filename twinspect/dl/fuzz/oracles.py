"""Test oracles of differential testing: crash, NaN/Inf and inconsistency (CRADLE's D_MAD).

D_MAD follows CRADLE (Pham et al., ICSE 2019) as used without ground truth by LEMON and MEMO: the mean
absolute distance between two systems' outputs, ``D_MAD(o1, o2) = mean(|o1 - o2|)`` over all elements
(outputs flattened and concatenated). An inconsistency is a pair with ``D_MAD`` above a threshold
calibrated on the seed models (:func:`calibrate_threshold`). Deliberate differences from the papers: no
ground-truth output enters D_MAD (CRADLE's D_MAD measures each system against the label; generated models
have none, so two systems' outputs are compared directly, as LEMON and MEMO do), and :func:`judge` adds a
relative guard and a magnitude cut-off for exploded activations.

This module is the one definition of the rule. It imports only numpy and the standard library: every
finding's bundle carries a verbatim copy of it (``oracle.py``, :func:`inspect.getsource` of this module,
see :func:`twinspect.dl.fuzz.triage.write_bundle`), and its ``repro.py`` decides with that copy's
:func:`judge` and :func:`symptom`, as the campaign does with this module, so the reproducer and the
campaign can never judge by different rules (``tests/dl/fuzz/test_repro_oracle.py`` runs bundles'
``repro.py`` on boundary cases and checks they reach :func:`judge`'s verdict).
"""

from __future__ import annotations

import numpy as np

#: Defaults of :func:`judge`'s guards (also written into every finding's ``repro.py``).
REL_TOL = 1e-3
MAX_MAGNITUDE = 1e6


def _finite_pair(a: list[np.ndarray] | np.ndarray, b: list[np.ndarray] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both output lists flattened and concatenated (float64), restricted to the positions finite in both.

    Raises:
        ValueError: the outputs' shapes differ.
    """
    la = [np.asarray(x, dtype=np.float64).ravel() for x in (a if isinstance(a, list) else [a])]
    lb = [np.asarray(x, dtype=np.float64).ravel() for x in (b if isinstance(b, list) else [b])]
    if [x.size for x in la] != [x.size for x in lb]:
        raise ValueError(f"output shapes differ: {[x.size for x in la]} vs {[x.size for x in lb]}")
    fa, fb = np.concatenate(la) if la else np.zeros(0), np.concatenate(lb) if lb else np.zeros(0)
    ok = np.isfinite(fa) & np.isfinite(fb)
    return fa[ok], fb[ok]


def d_mad(a: list[np.ndarray] | np.ndarray, b: list[np.ndarray] | np.ndarray) -> float:
    """Mean absolute distance between two output lists (CRADLE's D_MAD).

    Args:
        a, b: outputs of two systems (arrays, or lists of arrays of matching shapes), any float dtype.

    Returns:
        ``mean(|a - b|)`` over the finite positions of both, as float; ``nan`` when no position is finite.

    Raises:
        ValueError: the outputs' shapes differ.
    """
    fa, fb = _finite_pair(a, b)
    return float(np.mean(np.abs(fa - fb))) if fa.size else float("nan")


def nonfinite(outs: list[np.ndarray]) -> dict[str, bool]:
    """``{"nan": any NaN, "inf": any ±Inf}`` over a system's outputs (float or complex arrays; others have neither)."""
    return {"nan": any(bool(np.isnan(o).any()) for o in outs if o.dtype.kind in "fc"),
            "inf": any(bool(np.isinf(o).any()) for o in outs if o.dtype.kind in "fc")}


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


def magnitude(a: list[np.ndarray] | np.ndarray, b: list[np.ndarray] | np.ndarray) -> float:
    """Mean of ``(|a| + |b|) / 2`` over the positions finite in both (0.0 when none): the output scale
    against which :func:`judge`'s relative guard measures a D_MAD.

    Raises:
        ValueError: the outputs' shapes differ.
    """
    fa, fb = _finite_pair(a, b)
    return float(np.mean((np.abs(fa) + np.abs(fb)) / 2)) if fa.size else 0.0


def pair_inconsistent(a: list[np.ndarray], b: list[np.ndarray], threshold: float, rel_tol: float = REL_TOL,
                      max_magnitude: float = MAX_MAGNITUDE) -> dict | None:
    """The inconsistency rule for one pair of systems' outputs (used by :func:`judge` and every ``repro.py``).

    Args:
        a, b: the two systems' output lists (arrays of any float dtype).
        threshold, rel_tol, max_magnitude: see :func:`judge`.

    Returns:
        None when the pair is consistent, else the finding's detail: ``{"d_mad", "threshold", "magnitude"}``,
        or ``{"shape": message}`` when the outputs' shapes differ (always inconsistent).
    """
    try:
        d = d_mad(a, b)
    except ValueError as exc:
        return {"shape": str(exc)}
    mag = magnitude(a, b)
    if np.isfinite(d) and d > threshold and d > rel_tol * mag and mag <= max_magnitude:
        return {"d_mad": d, "threshold": threshold, "magnitude": mag}
    return None


def judge(results: dict[str, dict], threshold: float, rel_tol: float = REL_TOL,
          max_magnitude: float = MAX_MAGNITUDE) -> list[dict]:
    """Findings of one *valid* model (one Keras accepted at build time) from each system's result.

    Args:
        results: system → ``{"status": "ok"|"error"|"crash"|"timeout", "outputs": list of arrays (ok only),
            "error_type", "message", "frames"}``.
        threshold: D_MAD inconsistency threshold (absolute, as CRADLE's).
        rel_tol: relative guard: a pair is inconsistent only when its D_MAD also exceeds ``rel_tol`` times
            the outputs' mean magnitude (:func:`magnitude`). Models whose activations explode (outputs of
            1e30) differ by float32 rounding alone by far more than any absolute threshold; this keeps
            them from being reported as inconsistencies. 0 disables the guard. (A twinspect addition: MEMO
            and LEMON compare D_MAD with the threshold only.)
        max_magnitude: pairs whose outputs' mean magnitude exceeds this are not compared at all: such
            activations have exploded (a recurrent layer with an unbounded activation, say) and differ between
            libraries by accumulated rounding (seen here: 0.2 % relative at 1e33), which is no library bug.

    Returns:
        A list of ``{"kind": "crash"|"nan"|"inconsistency", "systems": [...], "detail": {...}}``:

        * *crash*, one per system whose run did not end ``ok`` (an exception, a crash such as SIGSEGV or
          SIGABRT, or a hang killed at the time limit), whether or not other systems succeeded: the model
          is valid, so a library that cannot run it has a crash bug (MEMO's crash oracle). The reference
          system (keras-torch, whose Keras builds every mutant) is judged like any other.
        * *nan* when NaN/Inf appears in some successful systems' outputs but not all (LEMON/MEMO's NaN
          oracle; outputs non-finite on every system are not reported).
        * *inconsistency*, one per pair of successful systems (sorted names) that :func:`pair_inconsistent`
          flags: every pair over the threshold, as MEMO and LEMON do, with no grouping of agreeing systems
          (outputs 1.0 / 1.6 / 2.2 at threshold 1.0 give one finding, for the 1.0 / 2.2 pair). D_MAD here is
          the distance between two systems' outputs; CRADLE's ground-truth label is not used (there is none
          for generated models), as in LEMON and MEMO.
    """
    ok = {s: r for s, r in results.items() if r["status"] == "ok"}
    found: list[dict] = []
    for s, r in sorted(results.items()):
        if r["status"] != "ok":
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
            det = pair_inconsistent(ok[a]["outputs"], ok[b]["outputs"], threshold, rel_tol, max_magnitude)
            if det is not None:
                found.append({"kind": "inconsistency", "systems": [a, b], "detail": det})
    return found


def symptom(found: list[dict], kind: str, systems: list[str]) -> dict | None:
    """The finding of ``found`` (a :func:`judge` result) with this ``kind`` on exactly these ``systems``, or None.

    This is how a recorded finding is recognised again: by the campaign's minimiser on a smaller model and
    by a bundle's ``repro.py`` on a fresh run (the symptom reproduces when this is not None).

    Args:
        found: findings as :func:`judge` returns them.
        kind: ``"crash"``, ``"nan"`` or ``"inconsistency"``.
        systems: the flagged systems, sorted as :func:`judge` sorts them.
    """
    want = list(systems)
    return next((f for f in found if f["kind"] == kind and f["systems"] == want), None)
