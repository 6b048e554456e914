"""Triage: deduplicate findings by signature and write self-contained ``findings/<id>/`` bundles.

Signature (NNSmith/MEMO practice): for a crash, the failing system, exception type and top frame; for
NaN/Inf, the systems with non-finite outputs and the root-cause layer type; for an inconsistency, the
deviating system(s) and the root-cause layer type. The root-cause layer is the first node of the
*minimised* model where the symptom appears (:func:`root_cause`, from a probe run with every node as an
output), so a cause seen through several downstream layers is one finding; :func:`localise` (the layer
producing the symptomatic model output) is the fallback and the mutant's pre-minimisation key. An
inconsistency is flagged per pair of systems (:func:`twinspect.dl.fuzz.oracles.judge`), so one faulty system
among four shows as three pairs; when the systems split into an agreeing majority and a minority each of
whose members differs from every majority member (:func:`split`: at the root-cause node when the probe ran
every system, else on the model outputs, as long as the systems the probe and the minimised model ran do not
contradict it), the signature names the minority (``inconsistency|<minority>|<layer>``) and the pairs are one
finding; when three or more systems all differ pairwise (:func:`all_differ`, decided on the model outputs and
kept while the minimised model's systems still all differ) it is ``inconsistency|all-differ|<layer>``, one
finding too; otherwise (two against two, two systems only) it names the finding's pair
(``inconsistency|<a>,<b>|<layer>``). Crash and NaN findings are per system and per model already, not per
pair. A bundle holds ``finding.json`` (kind, systems — the flagged pair for an inconsistency —, ``deviating``
— the minority the signature names, or null —, signature, library versions, the
localised layer), ``model.keras``, ``inputs.npz``, each system's ``outputs/<system>.npz`` or
``outputs/<system>.error.txt``, ``oracle.py`` (a verbatim copy of :mod:`twinspect.dl.fuzz.oracles`) and a
standalone ``repro.py`` that runs the model in fresh processes, judges the results with ``oracle.judge`` and
recognises the symptom with ``oracle.symptom`` — the campaign's rule itself, not a re-implementation — and
exits 1 when the symptom reproduces, 0 when not (``repro.py --recorded`` judges the outputs recorded in the
bundle instead of running the systems again; ``--json`` prints the verdict and every finding as JSON)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
from pathlib import Path

import numpy as np

from twinspect._io import atomic_directory
from twinspect.dl.fuzz import oracles
from twinspect.errors import InputError


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries under test (``"-"`` when absent)."""
    out = {}
    for pkg in ("keras", "tensorflow", "tensorflow-cpu", "jax", "jaxlib", "torch", "onnx", "onnxruntime", "tf2onnx", "numpy"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def localise(spec: dict, finding: dict, results: dict[str, dict]) -> str | None:
    """Layer type producing the first model output that shows the symptom (NaN/Inf or largest D_MAD)."""
    outs = spec["outputs"]
    layer_of = {n["name"]: n["layer"] for n in spec["nodes"]}
    systems = [s for s in finding["systems"] if results.get(s, {}).get("status") == "ok"]
    if finding["kind"] == "nan" and systems:
        for i, o in enumerate(results[systems[0]]["outputs"]):
            if o.dtype.kind == "f" and not np.isfinite(o).all() and i < len(outs):
                return layer_of.get(outs[i])
    if finding["kind"] == "inconsistency" and len(systems) == 2:
        a, b = (results[s]["outputs"] for s in systems)
        best, arg = -1.0, None
        for i, (x, y) in enumerate(zip(a, b)):
            if x.shape != y.shape:
                return layer_of.get(outs[i]) if i < len(outs) else None
            d = oracles.d_mad(x, y)
            if np.isfinite(d) and d > best and i < len(outs):
                best, arg = d, layer_of.get(outs[i])
        return arg
    return None


def probe_spec(spec: dict) -> dict:
    """A copy of ``spec`` whose outputs are all its nodes (known shapes only), in topological order: run on two
    systems, it shows where along the graph their results part (:func:`root_cause`)."""
    from twinspect.dl.fuzz import graph

    new = graph.clone(spec)
    new["outputs"] = [n["name"] for n in new["nodes"] if n.get("shape") is not None and -1 not in n["shape"]]
    return graph.prune(new)


def split(systems: list[str], inconsistent: list[list[str]] | set[frozenset[str]]) -> list[str] | None:
    """The deviating minority when ``systems`` split into an agreeing majority and a minority, else None.

    A split is a group of more than half of ``systems`` in which no pair is inconsistent (the majority),
    such that every other system is inconsistent with every member of the group (the minority). Such a
    group is unique when it exists (two groups of more than half share a member, which would have to agree
    and disagree with the same system). With four systems: one faulty system that differs from the three
    others gives ``[it]``; two against two, all different, or a system that differs from only some of the
    others give None; so do two systems (one of two is no majority) and no inconsistent pair at all.

    Args:
        systems: the systems compared (those that ran the model).
        inconsistent: the inconsistent pairs among them (e.g. the ``systems`` of
            :func:`twinspect.dl.fuzz.oracles.judge`'s inconsistency findings): nothing is run or recomputed.

    Returns:
        The minority, sorted, or None.
    """
    names = sorted(set(systems))
    bad = {frozenset(p) for p in inconsistent}
    if not bad:
        return None
    for s in names:  # a majority, if any, is some member's group of systems consistent with it
        group = [t for t in names if t == s or frozenset((s, t)) not in bad]
        if 2 * len(group) <= len(names):
            continue
        rest = [t for t in names if t not in group]
        if agrees(rest, names, bad):  # the group agrees within, and each of the rest differs from all of it
            return rest
        # s's group is no majority of agreeing systems; a majority containing s would equal it, so none holds s
    return None


def agrees(minority: list[str] | None, systems: list[str], inconsistent: list[list[str]] | set[frozenset[str]]
           ) -> list[str] | None:
    """``minority`` when the pairs among ``systems`` (a subset of the systems it was decided on) do not
    contradict it, else None: every pair of a minority and a majority member among ``systems`` is inconsistent
    and no pair of majority members is. Used where only some systems ran (a minimised model, a probe), and by
    :func:`split` to test a candidate majority on all of them."""
    if not minority:
        return None
    bad = {frozenset(p) for p in inconsistent}
    have = sorted(set(systems))
    maj = [s for s in have if s not in minority]
    if any(frozenset((m, g)) not in bad for m in have if m in minority for g in maj):
        return None
    if any(frozenset((a, b)) in bad for i, a in enumerate(maj) for b in maj[i + 1:]):
        return None
    return list(minority)


#: What :func:`signature` names instead of systems when every system differs from every other.
ALL_DIFFER = "all-differ"


def all_differ(systems: list[str], inconsistent: list[list[str]] | set[frozenset[str]]) -> bool:
    """Whether three or more ``systems`` differ pairwise, every pair of them inconsistent: no system is the
    odd one out (no minority, :func:`split`), the cause is the model's, not one system's."""
    names = sorted(set(systems))
    bad = {frozenset(p) for p in inconsistent}
    return len(names) >= 3 and all(frozenset((a, b)) in bad for i, a in enumerate(names) for b in names[i + 1:])


def mark_deviating(found: list[dict], results: dict[str, dict]) -> list[dict]:
    """Record on ``found`` (a :func:`twinspect.dl.fuzz.oracles.judge` result for ``results``) the deviating
    minority of its inconsistencies (:func:`split` of the systems that ran ok, from the pairs ``judge`` flagged):
    each inconsistency with a minority system gets ``"deviating": [...]``, so :func:`signature` gives all of
    them one key. When three or more systems differ pairwise (:func:`all_differ`), each inconsistency gets
    ``"all_differ": True`` instead, one key for all of them too. Nothing is recomputed. Returns ``found``."""
    ok = sorted(s for s, r in results.items() if r.get("status") == "ok")
    pairs = [f["systems"] for f in found if f["kind"] == "inconsistency"]
    minority = split(ok, pairs)
    everyone = minority is None and all_differ(ok, pairs)
    for f in found:
        if minority and f["kind"] == "inconsistency" and set(f["systems"]) & set(minority):
            f["deviating"] = list(minority)
        elif everyone and f["kind"] == "inconsistency":
            f["all_differ"] = True
    return found


def root_cause_split(probe: dict, finding: dict, results: dict[str, dict], threshold: float,
                     systems: list[str] | None = None) -> tuple[str | None, list[str] | None]:
    """Layer type of the first node (in topological order) of a :func:`probe_spec` model where the finding's
    symptom appears, and for an inconsistency the deviating minority there.

    The node: for NaN/Inf, the first node whose output is non-finite on the flagged system but finite on a
    system without the finding; for an inconsistency, the first node whose outputs on the finding's two
    systems :func:`oracles.pair_inconsistent` flags at ``threshold``. Every node before it agrees, so this
    is where the cause sits, not a layer downstream that merely passes the symptom on (one cause, one
    signature). The minority (inconsistency only): when the probe ran every one of ``systems``, :func:`split`
    of their pairs inconsistent at that node (None when they split no majority/minority way there, whatever
    the model outputs showed); when it ran fewer, the finding's ``deviating`` (decided on the model outputs)
    if the probed systems at that node do not contradict it (:func:`agrees`), else None.

    Args:
        probe: the probe spec (outputs = nodes).
        finding: ``{"kind": "nan"|"inconsistency", "systems": [...], "deviating": [...] (optional)}``.
        results: system → result of running ``probe`` (see :func:`oracles.judge`).
        threshold: the campaign's D_MAD threshold.
        systems: the systems that ran the model the probe was made from (default: those of ``results``).

    Returns:
        ``(layer type, minority)``; the layer is None for a crash, a system that did not run the probe, or
        no node showing the symptom (the minority is then None too).
    """
    outs = probe["outputs"]
    layer_of = {n["name"]: n["layer"] for n in probe["nodes"]}
    ok = {s: r["outputs"] for s, r in results.items() if r.get("status") == "ok" and len(r["outputs"]) == len(outs)}
    if finding["kind"] == "nan":
        bad = finding["systems"][0]
        clean = [s for s in sorted(ok) if s not in finding["systems"]]
        if bad not in ok or not clean:
            return None, None
        for i, name in enumerate(outs):
            x, y = ok[bad][i], ok[clean[0]][i]
            if x.dtype.kind == "f" and not np.isfinite(x).all() and (y.dtype.kind != "f" or np.isfinite(y).all()):
                return layer_of.get(name), None
        return None, None
    if finding["kind"] == "inconsistency" and len(finding["systems"]) == 2:
        a, b = finding["systems"]
        if a not in ok or b not in ok:
            return None, None
        names = sorted(ok)
        every = set(systems if systems is not None else results) <= set(names)
        for i, name in enumerate(outs):
            if oracles.pair_inconsistent([ok[a][i]], [ok[b][i]], threshold) is None:
                continue
            pairs = [[s, t] for j, s in enumerate(names) for t in names[j + 1:]
                     if oracles.pair_inconsistent([ok[s][i]], [ok[t][i]], threshold) is not None]
            minority = split(names, pairs) if every else agrees(finding.get("deviating"), names, pairs)
            return layer_of.get(name), minority
    return None, None


def root_cause(probe: dict, finding: dict, results: dict[str, dict], threshold: float) -> str | None:
    """Layer type of :func:`root_cause_split` (the first node of the probe showing the finding's symptom).

    Args:
        probe: the probe spec (outputs = nodes).
        finding: ``{"kind": "nan"|"inconsistency", "systems": [...]}``.
        results: system → result of running ``probe`` (see :func:`oracles.judge`).
        threshold: the campaign's D_MAD threshold.

    Returns:
        The layer type, or None (a crash, a system that did not run the probe, or no node shows the symptom).
    """
    return root_cause_split(probe, finding, results, threshold)[0]


def signature(finding: dict) -> str:
    """Deduplication key of a finding (see module docstring)."""
    det = finding.get("detail", {})
    if finding["kind"] == "crash":
        top = (det.get("frames") or [""])[0]
        return f"crash|{','.join(finding['systems'])}|{det.get('status')}|{det.get('error_type')}|{top}"
    if finding["kind"] == "inconsistency" and finding.get("deviating"):  # one cause, not one per pair
        return f"inconsistency|{','.join(finding['deviating'])}|{finding.get('layer')}"
    if finding["kind"] == "inconsistency" and finding.get("all_differ"):  # every pair differs: one cause too
        return f"inconsistency|{ALL_DIFFER}|{finding.get('layer')}"
    return f"{finding['kind']}|{','.join(finding['systems'])}|{finding.get('layer')}"


def finding_id(sig: str) -> str:
    """Short stable id of a signature (12 hex digits of its SHA-1)."""
    return hashlib.sha1(sig.encode()).hexdigest()[:12]


REPRO_TEMPLATE = r'''#!/usr/bin/env python
"""Reproducer of twinspect fuzz finding __ID__ (__KIND__ on __SYSTEMS__).

Runs model.keras on inputs.npz (both beside this file) under each system in a fresh Python process and
checks the symptom. Exit code 1: the symptom reproduces; 0: it does not; 2: bad use. Needs keras and
the libraries of the systems (tensorflow / jax / torch; onnxruntime + tf2onnx for "onnxruntime").

The rule is oracle.py beside this file: a verbatim copy of twinspect.dl.fuzz.oracles (the campaign's
own module, so twinspect itself is not needed here); this script only runs the systems and asks
oracle.judge and oracle.symptom for the verdict.

Options: --recorded judges the outputs the campaign recorded in outputs/ instead of running the systems
(needs numpy only); --json prints {"reproduces": bool, "findings": [...]} as one JSON object.
"""
import argparse, json, os, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402  (twinspect.dl.fuzz.oracles, copied verbatim when the bundle was written)

KIND = "__KIND__"
SYSTEMS = __SYSTEMS_LIST__
SYSTEMS_FLAGGED = __FLAGGED_LIST__
THRESHOLD = __THRESHOLD__
REL_TOL = __REL_TOL__
MAX_MAGNITUDE = __MAX_MAGNITUDE__
TIMEOUT = __TIMEOUT__
RUNNER = r"""
import os, sys, json, numpy as np
system, model_path, x_path, out_path = sys.argv[1:5]
if system == "onnxruntime":
    os.environ["KERAS_BACKEND"] = "tensorflow"
else:
    os.environ["KERAS_BACKEND"] = system.split("-", 1)[1]
import keras
x = np.load(x_path)["x"]
model = keras.saving.load_model(model_path, compile=False)
if system == "onnxruntime":
    import onnxruntime as ort, tempfile
    model(x, training=False)
    d = tempfile.mkdtemp()
    model.export(os.path.join(d, "m.onnx"), format="onnx", verbose=False)
    s = ort.InferenceSession(os.path.join(d, "m.onnx"), providers=["CPUExecutionProvider"])
    outs = s.run(None, {s.get_inputs()[0].name: x})
else:
    o = model(x, training=False)
    outs = [keras.ops.convert_to_numpy(t) for t in (o if isinstance(o, (list, tuple)) else [o])]
np.savez(out_path, **{"o%d" % i: np.asarray(t) for i, t in enumerate(outs)})
"""


def run(system):
    out = tempfile.mktemp(suffix=".npz")
    try:
        p = subprocess.run([sys.executable, "-c", RUNNER, system, os.path.join(HERE, "model.keras"),
                            os.path.join(HERE, "inputs.npz"), out], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "timeout after %d s" % TIMEOUT
    if p.returncode != 0 or not os.path.exists(out):
        return None, (p.stderr or "")[-400:] or "exit %d" % p.returncode
    z = np.load(out)
    return [z["o%d" % i] for i in range(len(z.files))], None


def recorded(system):
    """The campaign's result of one system, as recorded in outputs/ beside this file."""
    npz = os.path.join(HERE, "outputs", system + ".npz")
    if os.path.exists(npz):
        with np.load(npz) as z:
            return {"status": "ok", "outputs": [z["o%d" % i] for i in range(len(z.files))]}
    err = os.path.join(HERE, "outputs", system + ".error.txt")
    if not os.path.exists(err):
        print("error: no recorded result of %s in %s" % (system, os.path.join(HERE, "outputs")), file=sys.stderr)
        sys.exit(2)
    with open(err, encoding="utf-8") as fh:
        head, _, message = fh.read().partition("\n")
    status, _, error_type = head.partition(" ")
    return {"status": status or "error", "error_type": error_type, "message": message}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recorded", action="store_true", help="judge the outputs recorded in outputs/ instead of running the systems")
    ap.add_argument("--json", action="store_true", help="print the verdict and every finding as one JSON object")
    args = ap.parse_args(argv)
    results = {}
    for s in SYSTEMS:
        if args.recorded:
            results[s] = recorded(s)
            ok, err = results[s]["status"] == "ok", results[s].get("message", "")
        else:
            o, err = run(s)
            ok = o is not None
            results[s] = {"status": "ok", "outputs": o} if ok else {"status": "error", "message": err}
        if not args.json:
            print(s, "ok" if ok else "FAILED: " + (err.strip().splitlines()[-1] if err.strip() else "?"))
    # the campaign's rule, from the verbatim copy of twinspect.dl.fuzz.oracles beside this file
    found = oracle.judge(results, THRESHOLD, REL_TOL, MAX_MAGNITUDE)
    hit = oracle.symptom(found, KIND, SYSTEMS_FLAGGED)
    if args.json:
        print(json.dumps({"reproduces": hit is not None, "findings": found}, default=float))
    else:
        if hit is not None:
            print(hit["kind"], hit["systems"], {k: v for k, v in hit["detail"].items() if k in ("d_mad", "threshold", "magnitude", "shape")})
        print("symptom reproduces" if hit is not None else "symptom does not reproduce")
    sys.exit(1 if hit is not None else 0)


if __name__ == "__main__":
    main()
'''


def repro_source(fid: str, kind: str, systems: list[str], threshold: float, rel_tol: float = oracles.REL_TOL,
                 max_magnitude: float = oracles.MAX_MAGNITUDE, flagged: list[str] | None = None,
                 timeout_s: float = 600.0) -> str:
    """Source text of the standalone ``repro.py`` of a finding.

    The script runs ``systems`` in fresh processes (or, with ``--recorded``, reads their outputs recorded
    in the bundle) and judges their results with ``oracle.judge`` — the bundle's verbatim copy of
    :mod:`twinspect.dl.fuzz.oracles` (see :func:`write_bundle`) — with these ``threshold``, ``rel_tol`` and
    ``max_magnitude``; it exits 1 when ``oracle.symptom`` finds a finding of ``kind`` on ``flagged``
    (default: ``systems``), else 0. A system's run over ``timeout_s`` seconds counts as a hang.
    """
    return (REPRO_TEMPLATE.replace("__ID__", fid).replace("__KIND__", kind)
            .replace("__SYSTEMS_LIST__", json.dumps(systems)).replace("__SYSTEMS__", ", ".join(systems))
            .replace("__FLAGGED_LIST__", json.dumps(list(flagged if flagged is not None else systems)))
            .replace("__THRESHOLD__", repr(float(threshold))).replace("__REL_TOL__", repr(float(rel_tol)))
            .replace("__MAX_MAGNITUDE__", repr(float(max_magnitude))).replace("__TIMEOUT__", repr(int(timeout_s))))


def oracle_source() -> str:
    """Source text of :mod:`twinspect.dl.fuzz.oracles`, written into every bundle as ``oracle.py``."""
    import inspect

    return inspect.getsource(oracles)


def repro_systems(finding: dict, all_ok: list[str]) -> list[str]:
    """Systems the reproducer runs: for a crash the failing system plus one that succeeded (the failing
    system alone when none succeeded); for NaN one system with and one without; else the finding's pair."""
    if finding["kind"] == "crash":
        return finding["systems"] + all_ok[:1]
    if finding["kind"] == "nan":
        rest = [s for s in all_ok if s not in finding["systems"]]
        return finding["systems"][:1] + rest[:1]
    return list(finding["systems"])


def repro_flagged(finding: dict) -> list[str]:
    """The systems ``oracle.judge`` must flag in the reproducer's run of :func:`repro_systems` (a NaN finding's
    reproducer runs only the first system with non-finite outputs)."""
    return finding["systems"][:1] if finding["kind"] == "nan" else list(finding["systems"])


def bundle_dirs(campaign: str | Path) -> list[Path]:
    """The finding bundles of a campaign directory (``findings/<id>/`` holding ``finding.json``), sorted by id;
    none for a campaign without findings. A bundle still being written (:func:`write_bundle`'s hidden
    temporary directory) is not one.

    Raises:
        InputError: neither a ``findings`` directory nor a campaign state (``state.json``).
    """
    root = Path(campaign) / "findings"
    if not root.is_dir():
        if (Path(campaign) / "state.json").is_file():
            return []
        raise InputError(f"{campaign}: no findings directory (not a campaign, or a campaign without findings)")
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / "finding.json").is_file())


def bundle_dir(campaign: str | Path, finding_id: str) -> Path:
    """The bundle of finding ``finding_id`` in a campaign directory.

    Args:
        campaign: campaign directory (``twinspect fuzz run -o``).
        finding_id: the finding's id (``findings/<id>``), or a unique prefix of it; an exact id wins over
            longer ids it is a prefix of.

    Returns:
        The bundle path (see :func:`bundle_dirs`).

    Raises:
        InputError: not a campaign, no finding with that id or prefix, or an ambiguous prefix.
    """
    root = Path(campaign) / "findings"
    hits = [p for p in bundle_dirs(campaign) if p.name.startswith(finding_id)] if finding_id else []
    if not hits:
        raise InputError(f"{root}: no finding {finding_id!r}")
    exact = [p for p in hits if p.name == finding_id]
    if len(hits) > 1 and not exact:
        shown = ", ".join(p.name for p in hits[:4]) + (", ..." if len(hits) > 4 else "")
        raise InputError(f"{root}: {finding_id!r} matches {len(hits)} findings ({shown})")
    return exact[0] if exact else hits[0]


def write_bundle(root: Path, fid: str, finding: dict, spec: dict, model_path: Path, inputs_path: Path,
                 results: dict[str, dict], threshold: float, extra: dict | None = None,
                 rel_tol: float = oracles.REL_TOL, timeout_s: float = 600.0) -> Path:
    """Write ``root/<fid>/`` atomically and return its path (see module docstring for the contents).

    ``threshold`` and ``rel_tol`` are the inconsistency rule the bundle's ``repro.py`` applies (see
    :func:`twinspect.dl.fuzz.oracles.judge`); ``timeout_s`` is its per-system time limit in seconds (a run
    over it is a hang)."""
    dest = Path(root) / fid
    ok = sorted(s for s, r in results.items() if r["status"] == "ok")
    systems = repro_systems(finding, ok)
    with atomic_directory(dest) as tmp:
        shutil.copy(model_path, tmp / "model.keras")
        shutil.copy(inputs_path, tmp / "inputs.npz")
        (tmp / "outputs").mkdir()
        for s, r in results.items():
            if r["status"] == "ok":
                np.savez(tmp / "outputs" / f"{s}.npz", **{f"o{i}": o for i, o in enumerate(r["outputs"])})
            else:
                (tmp / "outputs" / f"{s}.error.txt").write_text(
                    f"{r['status']} {r.get('error_type', '')}\n{r.get('message', '')}\n" + "\n".join(r.get("frames", [])))
        meta = {"id": fid, "kind": finding["kind"], "systems": finding["systems"], "deviating": finding.get("deviating"),
                "signature": finding["signature"],
                "layer": finding.get("layer"), "detail": finding.get("detail"),
                "detail_before_minimising": finding.get("detail_before_minimising"), "repro_systems": systems,
                "threshold": threshold, "versions": library_versions(), "model_spec": spec, **(extra or {})}
        (tmp / "finding.json").write_text(json.dumps(meta, indent=2, default=str))
        (tmp / "oracle.py").write_text(oracle_source())
        (tmp / "repro.py").write_text(repro_source(fid, finding["kind"], systems, threshold, rel_tol,
                                                   flagged=repro_flagged(finding), timeout_s=timeout_s))
    return dest
