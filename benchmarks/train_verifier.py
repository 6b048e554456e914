"""Fit the clone verifier shipped as ``twinspect/code/data/t3_verifier.json``.

What: a monotone gradient-boosted tree model over the features of
:mod:`twinspect.code.verify` (LCS alignment, token-bag overlaps, TF-IDF cosine, size ratio) that
decides clone / not clone for candidate pairs.

Data: the BigCloneBench *tune* half only (``bcb_split(..., "tune", seed=0, version=2)``: split by
functionality, the test half is never read here). Positives: labelled T1, T2, ST3 and MT3 pairs;
negatives: the labelled non-clones, and up to ``--max-cross`` candidate pairs (from twinspect's own
candidate generation at the default settings) between functions of different functionalities —
non-clones by construction, and the bulk of what a real codebase offers. WT3/T4 pairs are left out (disputed as clones; Type-4 is the
semantic encoder's job). Classes are balanced by sample weights.

Threshold: out-of-fold scores (5 folds grouped by functionality component, so a fold never sees its
own functionality; the one component holding 77 % of the tune pairs stays in every training fold
and is not scored) give the score above which at most ``--target-fpr`` of the tune non-clones
fall, and at most ``--target-cross-fpr`` of the cross-functionality candidates; the final model is fitted on the whole tune half and stored with that threshold and the
out-of-fold recall per type.

The trees are read from scikit-learn's fitted HistGradientBoostingClassifier (its ``_predictors``
layout, checked against ``predict_proba`` before writing), so twinspect itself needs no pickle and no
scikit-learn model at run time.

Usage (from the repository root; needs ../shared/data/clones/bigclonebench)::

    .venv/bin/python benchmarks/train_verifier.py                       # writes the packaged model
    .venv/bin/python benchmarks/train_verifier.py --target-fpr 0.02 -o /tmp/v.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect._io import atomic_write  # noqa: E402
from twinspect.code.evaluate.bcb import (  # noqa: E402
    bcb_fragments,
    bcb_function_id,
    bcb_split,
    functionality_groups,
    load_bcb_functions,
    load_bcb_labels,
)
from twinspect.code.evaluate.matching import Span  # noqa: E402
from twinspect.code.verify import DEFAULT_MODEL, FEATURE_VERSION, FEATURES, PairFeatures, Verifier  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "clones" / "bigclonebench"
RESULTS_DIR = ROOT / "benchmarks" / "results"
POSITIVE_TYPES = (0, 1, 2, 3)
NEGATIVE_TYPE = 5
CROSS_TYPE = 6  # candidate pairs across functionalities (negatives)
PROJECT_TYPE = 7  # candidate pairs across unrelated real projects (negatives)
REAL_CLONE_TYPE = 8  # real-code pairs a blind judge labelled "clone"
REAL_OTHER_TYPE = 9  # ... labelled "weak" or "not"


def cross_project_candidates(src: Path, limit: int, seed: int) -> tuple[list, np.ndarray]:
    """(fragments, (M, 3) rows (a, b, project of a)): candidate pairs between fragments of two
    different projects (top-level folders of ``src``), at most ``limit``, drawn with ``seed``.
    Exact (T2-identical) copies are left out: they never reach the verifier."""
    from twinspect.code.candidates import overlap_pairs, range_pairs
    from twinspect.code.clones import DEFAULT_ENCODER_PARAMS, DetectConfig
    from twinspect.code.encoders import make_encoder
    from twinspect.code.fragments import mine
    from twinspect.code.normalize import t2_key, tokens

    cfg = DetectConfig()
    projects = sorted(p for p in src.iterdir() if p.is_dir())
    frags, _ = mine(projects, min_lines=cfg.min_lines, quiet=True, respect_gitignore=False)
    project_of = [f.path.split("/", 1)[0] for f in frags]
    keys = [t2_key(f) for f in frags]
    first: dict[str, int] = {}
    reps = [i for i, k in enumerate(keys) if first.setdefault(k, i) == i]
    enc = make_encoder("lexical", **DEFAULT_ENCODER_PARAMS["lexical"])
    enc.fit(frags)
    vecs = enc.encode(frags)
    cand = set(range_pairs(vecs, reps, frags, threshold=cfg.candidate_cosine, cap=cfg.max_neighbours).pairs)
    assert cfg.token_overlap is not None
    toks = [tokens(f) for f in frags]
    cand |= set(overlap_pairs(toks, reps, frags, theta=cfg.token_overlap, cap=cfg.max_neighbours).pairs)
    names = sorted(set(project_of))
    rows = [(u, v, names.index(project_of[u])) for u, v in sorted(cand) if project_of[u] != project_of[v]]
    rng = np.random.default_rng(seed)
    if len(rows) > limit:
        rows = [rows[i] for i in sorted(rng.choice(len(rows), size=limit, replace=False))]
    print(f"cross-project: {len(frags)} fragments in {names}, {len(cand)} candidates, {len(rows)} drawn", flush=True)
    return frags, np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def real_code_pairs(specs: list[str], projects: set[str] | None, strata: list[str] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Hand-labelled real-code pairs (the blind precision study) as training rows.

    Args:
        specs: ``SAMPLE.jsonl:LABELS.csv:SRC`` strings — a sample written by
            ``benchmarks/clones_precision_blind.py`` (or the issue-8 sample), its blind labels, and
            the folder holding the projects' source trees.
        projects: use only pairs of these projects (the tune projects); None = all.
        strata: when a list, each row's reported type/band (``T1``, ``T2``, ``VST3``...) is appended.

    Returns:
        ``(x, y, project, names)``: float32 (P, len(FEATURES)) features — computed, as a scan does,
        over the T2 representatives of the pair's whole project — int (P,) 1 for "clone" and 0 for
        "weak"/"not", int (P,) project index into ``names``.
    """
    import csv

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from clones_precision_blind import records  # noqa: E402  (same neutral ids as the judge saw)

    from twinspect.code.fragments import mine
    from twinspect.code.normalize import t2_key

    by_project: dict[tuple[str, str], list[tuple[dict, int]]] = {}
    for spec in specs:
        sample, labels_path, src = spec.split(":")
        old = Path(sample).name == "clones_precision_sample.jsonl"
        recs = {r["id"]: r for r in records(old)} if Path(sample).resolve().parent == RESULTS_DIR else None
        if recs is None:
            recs = {json.loads(line)["id"]: json.loads(line) for line in Path(sample).read_text().splitlines() if line}
        with open(labels_path, encoding="utf-8") as fh:
            labels = {row["id"]: row["label"].strip() for row in csv.DictReader(fh)}
        for rid, rec in recs.items():
            if rid in labels and (projects is None or rec["project"] in projects):
                by_project.setdefault((src, rec["project"]), []).append((rec, int(labels[rid] == "clone")))
    xs, ys, ps, names = [], [], [], []
    for (src, project), rows in sorted(by_project.items()):
        frags, _ = mine([Path(src) / project], min_lines=1, quiet=True, respect_gitignore=False)
        prefix = project + "/"
        at = {(f.path[len(prefix):] if f.path.startswith(prefix) else f.path, f.start_line, f.end_line): i
              for i, f in enumerate(frags)}
        seen: dict[str, int] = {}
        reps = [i for i, f in enumerate(frags) if seen.setdefault(t2_key(f), i) == i]
        rep_of = {i: seen[t2_key(f)] for i, f in enumerate(frags)}
        pos = {r: k for k, r in enumerate(reps)}
        feats = PairFeatures([frags[r] for r in reps])
        a, b, y = [], [], []
        for rec, label in rows:
            ka = (rec["a"]["path"], rec["a"]["start_line"], rec["a"]["end_line"])
            kb = (rec["b"]["path"], rec["b"]["start_line"], rec["b"]["end_line"])
            if ka not in at or kb not in at:
                print(f"  {project}: {rec['id']} not mined as in the sample, left out", flush=True)
                continue
            a.append(pos[rep_of[at[ka]]])
            b.append(pos[rep_of[at[kb]]])
            y.append(label)
            if strata is not None:
                strata.append(rec["band"] if rec["type"] in ("T3", "T4") else rec["type"])
        names.append(project)
        xs.append(feats.compute(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)))
        ys.append(np.asarray(y, dtype=np.int64))
        ps.append(np.full(len(y), len(names) - 1))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ps), names


def cross_functionality_candidates(frags, labels, longest: dict[int, int], limit: int, seed: int) -> np.ndarray:
    """(M, 3) int rows (fragment a, fragment b, component of a): candidate pairs between functions of
    different functionalities, both in some labelled clone pair; at most ``limit``, drawn with ``seed``."""
    from twinspect.code.candidates import overlap_pairs, range_pairs
    from twinspect.code.clones import DEFAULT_ENCODER_PARAMS, DetectConfig
    from twinspect.code.encoders import make_encoder
    from twinspect.code.normalize import tokens

    cfg = DetectConfig()
    comp_all = functionality_groups(labels, max_type=4)
    in_clone = {x for lab in labels if lab.is_clone for x in (lab.id1, lab.id2)}
    frag_fn = {i: fn for fn, i in longest.items()}
    reps = sorted(i for i, fn in frag_fn.items() if fn in in_clone)
    enc = make_encoder("lexical", **DEFAULT_ENCODER_PARAMS["lexical"])
    enc.fit(frags)
    vecs = enc.encode(frags)
    cand = set(range_pairs(vecs, reps, frags, threshold=cfg.candidate_cosine, cap=cfg.max_neighbours).pairs)
    toks = [tokens(f) for f in frags]
    assert cfg.token_overlap is not None
    cand |= set(overlap_pairs(toks, reps, frags, theta=cfg.token_overlap, cap=cfg.max_neighbours).pairs)
    labelled = {(lab.id1, lab.id2) for lab in labels} | {(lab.id2, lab.id1) for lab in labels}
    comp3 = functionality_groups(labels, max_type=3)
    rows = [(u, v, comp3[frag_fn[u]]) for u, v in sorted(cand)
            if comp_all[frag_fn[u]] != comp_all[frag_fn[v]] and (frag_fn[u], frag_fn[v]) not in labelled]
    rng = np.random.default_rng(seed)
    if len(rows) > limit:
        rows = [rows[i] for i in sorted(rng.choice(len(rows), size=limit, replace=False))]
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def export_trees(clf) -> tuple[float, list[dict]]:
    """(baseline, trees) of a fitted binary HistGradientBoostingClassifier."""
    baseline = float(np.asarray(clf._baseline_prediction).ravel()[0])
    trees = []
    for (pred,) in clf._predictors:
        nodes = pred.nodes
        trees.append({
            "feature": nodes["feature_idx"].astype(int).tolist(),
            "threshold": [float(t) for t in nodes["num_threshold"]],
            "left": nodes["left"].astype(int).tolist(),
            "right": nodes["right"].astype(int).tolist(),
            "value": [float(v) for v in nodes["value"]],
            "leaf": nodes["is_leaf"].astype(bool).tolist(),
        })
    return baseline, trees


def make_model(seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=100, max_depth=3, learning_rate=0.1,
                                          monotonic_cst=[1] * len(FEATURES), random_state=seed)


def bcb_function_fragments(functions) -> tuple[list, dict[int, int]]:
    """(fragments, BCB function id -> index of its longest fragment) of BigCloneBench functions, each
    mined from its ``BigbenchClone`` wrapper file in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="twinspect-bcb-") as tmp:
        frags = bcb_fragments(functions, tmp, 1)
    longest: dict[int, int] = {}
    for i, f in enumerate(frags):
        k = bcb_function_id(Span(f.path, f.start_line, f.end_line))
        if k is not None and (k not in longest or f.loc > frags[longest[k]].loc):
            longest[k] = i
    return frags, longest


def bcb_rows(args) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, types, groups) of the BigCloneBench tune rows, cross-functionality candidates and
    (with ``--negatives-src``) cross-project candidates."""
    functions, labels = bcb_split(load_bcb_functions(args.data), load_bcb_labels(args.data), "tune", 0, version=2)
    comp = functionality_groups(labels, max_type=3)
    frags, longest = bcb_function_fragments(functions)
    rows = [(longest[lab.id1], longest[lab.id2], lab.type_idx, comp[lab.id1]) for lab in labels
            if lab.id1 in longest and lab.id2 in longest and lab.type_idx in (*POSITIVE_TYPES, NEGATIVE_TYPE)]
    a = np.asarray([r[0] for r in rows])
    b = np.asarray([r[1] for r in rows])
    types = np.asarray([r[2] for r in rows])
    groups = np.asarray([r[3] for r in rows])
    # Cross-functionality candidates: pairs the candidate generator proposes between functions of
    # different functionalities (components of all labelled clone pairs, WT3/T4 included) — not
    # clones by construction, and the kind of pair a real codebase offers by the thousand.
    cross = cross_functionality_candidates(frags, labels, longest, args.max_cross, args.seed)
    a = np.concatenate([a, cross[:, 0]])
    b = np.concatenate([b, cross[:, 1]])
    types = np.concatenate([types, np.full(len(cross), CROSS_TYPE)])
    groups = np.concatenate([groups, cross[:, 2]])
    y = (~np.isin(types, (NEGATIVE_TYPE, CROSS_TYPE))).astype(int)
    x = PairFeatures(frags).compute(a, b)
    if args.negatives_src is not None:
        pfrags, prow = cross_project_candidates(args.negatives_src, args.max_cross, args.seed)
        x = np.concatenate([x, PairFeatures(pfrags).compute(prow[:, 0], prow[:, 1])])
        types = np.concatenate([types, np.full(len(prow), PROJECT_TYPE)])
        groups = np.concatenate([groups, -1 - prow[:, 2]])  # negative ids: never a BCB component
        y = np.concatenate([y, np.zeros(len(prow), dtype=y.dtype)])
    return x, y, types, groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--target-fpr", type=float, default=0.01,
                    help="share of tune non-clones allowed above the threshold (out-of-fold)")
    ap.add_argument("--target-cross-fpr", type=float, default=0.01,
                    help="share of cross-functionality candidates allowed above the threshold (out-of-fold)")
    ap.add_argument("--negatives-src", type=Path, default=None,
                    help="folder of unrelated real projects (one per sub-folder): candidate pairs across them are negatives")
    ap.add_argument("--target-project-fpr", type=float, default=0.01,
                    help="share of cross-project candidates allowed above the threshold (out-of-fold)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-cross", type=int, default=20000, help="cross-functionality negatives drawn at most")
    ap.add_argument("--real", action="append", default=[], metavar="SAMPLE:LABELS:SRC",
                    help="hand-labelled real-code pairs (blind precision study) as extra rows; repeatable")
    ap.add_argument("--real-holdout", default="",
                    help="comma-separated projects whose labelled pairs are never read (the report split)")
    ap.add_argument("--real-weight", type=float, default=0.25,
                    help="share of the total sample weight carried by the real-code rows")
    ap.add_argument("--target-real-precision", type=float, default=None,
                    help="also raise the threshold until the out-of-fold precision of the real-code rows reaches this")
    ap.add_argument("--cache", type=Path, default=None,
                    help="an .npz holding the BCB/candidate rows (features, types, groups): read when it exists, "
                         "else written (the slow part; the real-code rows are always recomputed)")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_MODEL)
    args = ap.parse_args()
    import sklearn
    from sklearn.model_selection import GroupKFold

    t0 = time.time()
    if args.cache is not None and args.cache.is_file():
        with np.load(args.cache) as cached:
            x, y, types, groups = cached["x"], cached["y"], cached["types"], cached["groups"]
        print(f"rows read from {args.cache}", flush=True)
    else:
        x, y, types, groups = bcb_rows(args)
        if args.cache is not None:
            np.savez(args.cache, x=x, y=y, types=types, groups=groups)
    w = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    real_projects: list[str] = []
    if args.real:
        holdout = {p for p in args.real_holdout.split(",") if p}
        everything = {json.loads(line)["project"] for spec in args.real
                      for line in Path(spec.split(":")[0]).read_text(encoding="utf-8").splitlines() if line}
        tune_projects = everything - holdout
        rx, ry, rp, real_projects = real_code_pairs(args.real, tune_projects)
        rw = np.where(ry == 1, 0.5 / max(ry.mean(), 1e-9), 0.5 / max(1 - ry.mean(), 1e-9))
        rw *= args.real_weight / (1 - args.real_weight) * w.sum() / rw.sum()
        x = np.concatenate([x, rx])
        y = np.concatenate([y, ry])
        w = np.concatenate([w, rw])
        types = np.concatenate([types, np.where(ry == 1, REAL_CLONE_TYPE, REAL_OTHER_TYPE)])
        groups = np.concatenate([groups, -1000 - rp])  # one group per project
    print(f"{len(types)} pairs {dict(Counter(types.tolist()))}, "
          f"features in {time.time() - t0:.0f} s", flush=True)

    # One functionality component holds most tune pairs (77 %); it stays in every training fold,
    # the other components are dealt to 5 folds, and the out-of-fold scores of those rows (never
    # of a functionality the model saw) set the threshold and the reported rates.
    giant = Counter(groups.tolist()).most_common(1)[0][0]
    rest = np.where(groups != giant)[0]
    oof = np.full(len(y), np.nan)
    for tr, te in GroupKFold(n_splits=5).split(rest, y[rest], groups[rest]):
        fit_rows = np.concatenate([np.where(groups == giant)[0], rest[tr]])
        clf = make_model(args.seed).fit(x[fit_rows], y[fit_rows], sample_weight=w[fit_rows])
        oof[rest[te]] = clf.predict_proba(x[rest[te]])[:, 1]
    held = ~np.isnan(oof)
    neg = oof[held & (types == NEGATIVE_TYPE)]
    limits = [np.quantile(neg, 1.0 - args.target_fpr, method="higher")]
    for kind, rate in ((CROSS_TYPE, args.target_cross_fpr), (PROJECT_TYPE, args.target_project_fpr)):
        scores = oof[held & (types == kind)]
        if len(scores):
            limits.append(np.quantile(scores, 1.0 - rate, method="higher"))
    if args.target_real_precision is not None:
        real = held & np.isin(types, (REAL_CLONE_TYPE, REAL_OTHER_TYPE))
        for t in np.unique(oof[real]):
            acc = real & (oof >= t)
            if acc.any() and (types[acc] == REAL_CLONE_TYPE).mean() >= args.target_real_precision:
                limits.append(float(t))
                break
    threshold = float(max(limits))
    threshold = min(max(threshold, 1e-6), 1 - 1e-6)
    names = {0: "T1", 1: "T2", 2: "ST3", 3: "MT3", 5: "non-clone", CROSS_TYPE: "cross-functionality candidate",
             PROJECT_TYPE: "cross-project candidate", REAL_CLONE_TYPE: "real-code clone (blind label)",
             REAL_OTHER_TYPE: "real-code weak/not (blind label)"}
    oof_rates = {names[t]: round(float((oof[held & (types == t)] >= threshold).mean()), 4)
                 for t in sorted(set(types[held].tolist()))}
    print("out-of-fold rates at the threshold", round(threshold, 4), oof_rates, flush=True)

    clf = make_model(args.seed).fit(x, y, sample_weight=w)
    baseline, trees = export_trees(clf)
    model = Verifier(baseline=baseline, trees=trees, threshold=threshold, info={
        "data": "BigCloneBench tune half (bcb_split version 2, seed 0): labelled T1/T2/ST3/MT3 pairs vs labelled "
                "non-clones and candidate pairs across functionalities"
                + (", plus blind-labelled real-code pairs of the tune projects" if real_projects else ""),
        "real_code_projects": real_projects,
        "real_code_holdout": sorted(p for p in args.real_holdout.split(",") if p),
        "real_weight": args.real_weight if real_projects else None,
        "target_real_precision": args.target_real_precision,
        "pairs": {names[t]: int((types == t).sum()) for t in sorted(set(types.tolist()))},
        "target_fpr": args.target_fpr,
        "target_cross_fpr": args.target_cross_fpr,
        "target_project_fpr": args.target_project_fpr if args.negatives_src is not None else None,
        "negative_projects": sorted(p.name for p in args.negatives_src.iterdir() if p.is_dir())
        if args.negatives_src is not None else [],
        "out_of_fold_rates": oof_rates,
        "out_of_fold_pairs": {names[t]: int((held & (types == t)).sum()) for t in sorted(set(types[held].tolist()))},
        "model": "sklearn HistGradientBoostingClassifier(max_iter=100, max_depth=3, monotonic_cst=+1), balanced",
        "sklearn": sklearn.__version__,
        "feature_version": FEATURE_VERSION,
        "seed": args.seed,
    })
    ref = clf.predict_proba(x)[:, 1]
    diff = float(np.abs(model.score(x) - ref).max())
    if diff > 1e-6:
        raise SystemExit(f"exported trees disagree with scikit-learn (max |diff| {diff:.2e})")
    with atomic_write(args.output) as fh:
        fh.write(json.dumps(model.to_json_dict(), separators=(",", ":")) + "\n")
    print(f"wrote {args.output} ({args.output.stat().st_size / 1024:.0f} KiB; export max |diff| {diff:.1e}) "
          f"in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
