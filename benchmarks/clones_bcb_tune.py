"""BigCloneBench tune-half study for ``twinspect clones`` defaults (issue 8, point 2; helper script).

Scores a few :class:`~twinspect.code.clones.DetectConfig` variants on the *tune* half of
BigCloneBench split by functionality (:func:`twinspect.code.evaluate.bcb_split`), never on the
held-out "test" half, and prints missed labelled pairs for reading by eye::

    nice -n 10 .venv/bin/python benchmarks/clones_bcb_tune.py --fraction 0.25 --show-missed ST3 --n-missed 20

Per variant: pair recall (pairs the report states: listed pairs plus the members of its identical
groups), listed-only recall and class-implied recall per type, each with false positives on the
labelled non-clone pairs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / ".." / "shared" / "data" / "clones" / "bigclonebench"
VARIANTS = {
    "default": {},
    "margin_none": {"pair_margin": None},
    "margin_0.05": {"pair_margin": 0.05},
}


def main(argv: list[str] | None = None) -> None:
    import numpy as np

    from twinspect.code.clones import DetectConfig, detect
    from twinspect.code.evaluate.bcb import (
        BCB_TYPES,
        FoundPairs,
        bcb_fragments,
        bcb_function_id,
        bcb_split,
        bcb_subset,
        load_bcb_functions,
        load_bcb_labels,
        score_bcb,
    )
    from twinspect.code.evaluate.common import config_embedder
    from twinspect.code.evaluate.matching import report_view

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--split", default="tune", choices=["tune", "test"])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--show-missed", default="", help="comma-separated types whose missed pairs are printed")
    ap.add_argument("--n-missed", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    functions, labels = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), args.split, 0)
    if args.fraction < 1:
        functions, labels = bcb_subset(functions, labels, args.fraction, 0)
    code = {f["id"]: f["code"] for f in functions}
    with tempfile.TemporaryDirectory(prefix="twinspect-bcb-") as tmp:
        frags = bcb_fragments(functions, tmp, 1, True)
    frags = sorted(frags, key=lambda f: (f.path, f.start_line, f.end_line))  # report ids = list indices
    (vecs,) = config_embedder(DetectConfig())(frags, [frags])
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    print(f"{args.split} half, {args.fraction:.0%} of labels: {len(functions)} functions, {len(frags)} fragments, "
          f"{len(labels)} labels ({time.perf_counter() - t0:.0f} s)")
    results = {}
    for name in args.variants.split(","):
        cfg = DetectConfig(**VARIANTS[name])
        rep = detect(frags, cfg, vectors=vecs, vectors_encoder=cfg.encoder, quiet=True)
        found = FoundPairs.from_view(report_view(rep), bcb_function_id)
        scores = {"class": score_bcb(found, labels), "stated": score_bcb(found.stated(), labels),
                  "listed": score_bcb(found.listed(), labels)}
        results[name] = {k: {"recall": v["recall"], "fp_rate": v["fp_rate"], "fp": v["fp"]} for k, v in scores.items()}
        results[name]["largest_class"] = rep.stats["largest_class"]
        print(f"\n## {name} {VARIANTS[name]}: {len(rep.pairs)} pairs, {len(rep.classes)} classes "
              f"(largest {rep.stats['largest_class']}), {len(rep.identical_groups)} identical groups")
        for k, v in scores.items():
            cells = "  ".join(f"{t} {100 * v['recall'].get(t, float('nan')):.1f}"
                              for t in ("T1", "T2", "ST3", "MT3", "WT3/T4"))
            print(f"  {k:7s} {cells}  FP {100 * v['fp_rate']:.2f} % ({v['fp']}/{v['negatives']})")
        show = [t for t in args.show_missed.split(",") if t]
        if show and name == args.variants.split(",")[0]:
            stated = found.stated()
            by_id = {bcb_function_id(s): fid for fid, s in report_view(rep).spans.items()}
            for t in show:
                missed = [lab for lab in labels if lab.is_clone and BCB_TYPES[lab.type_idx] == t
                          and not stated(lab.id1, lab.id2)]
                print(f"\n### {len(missed)} missed {t} pairs; {args.n_missed} drawn at random (seed 0):")
                nomargin = FoundPairs.from_view(report_view(detect(frags, DetectConfig(pair_margin=None), vectors=vecs,
                                                                   vectors_encoder=cfg.encoder, quiet=True)),
                                                bcb_function_id).stated()
                for lab in random.Random(0).sample(missed, min(args.n_missed, len(missed))):
                    fa, fb = by_id.get(lab.id1), by_id.get(lab.id2)
                    sim = None if fa is None or fb is None else float(vecs[fa] @ vecs[fb])
                    same_class = found(lab.id1, lab.id2)
                    tsim = None
                    if fa is not None and fb is not None:
                        tsim = rep_t3(rep, fa, fb)
                    print(f"\n--- {lab.id1} vs {lab.id2}: cosine {sim if sim is None else round(sim, 3)}, "
                          f"token sim {tsim}, same class {same_class}, "
                          f"found without pair margin {nomargin(lab.id1, lab.id2)}")
                    for i in (lab.id1, lab.id2):
                        body = code[i].splitlines()
                        print(f"[{i}] " + "\n     ".join(body[:12]) + (f"\n     ... {len(body)} lines" if len(body) > 12
                                                                     else ""))
    if args.json:
        from twinspect._io import write_json

        write_json(args.json, {"provenance": _provenance.info(__file__), **json.loads(json.dumps(results, default=str))})


def rep_t3(rep, a: int, b: int) -> float | None:
    """Abstracted-token similarity of two fragments of a report (as the T3 bands use it)."""
    from twinspect.code.clone_types import TypeClassifier

    ct = TypeClassifier([rep.fragments[a], rep.fragments[b]]).classify(0, 1)
    return None if ct.t3_similarity is None else round(float(ct.t3_similarity), 3)


if __name__ == "__main__":
    main()
