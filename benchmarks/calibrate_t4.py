"""Calibrate the Type-4 rule of ``-e semantic`` on the BigCloneBench tune half; write ``twinspect/code/data/t4_rule.json``.

A pair below the MT3 band (abstracted-token LCS < 0.5) that the Type-3 verifier rejects is reported
as T4 only when two kinds of evidence agree (issue 16): the semantic encoder's cosine
(:mod:`twinspect.code.encoders.semantic`) reaches ``semantic`` and the control-flow WL cosine
(:mod:`twinspect.code.structural`) reaches ``structural``.

Calibration (tune half only, ``bcb_split`` version 2, seed 0; the test half is never read):

* ``semantic``: the smallest cosine at which at most ``--target-fpr`` of the tune half's labelled
  non-clones below the MT3 band reach it;
* ``structural``: the largest WL cosine that still keeps ``--keep`` of the tune WT3/T4 pairs
  accepted by the semantic threshold (a floor that removes pairs whose control flow has nothing in
  common, at a stated recall cost).

The JSON records both thresholds, the rates they give on the tune half and, for reading, the
ROC-AUC of each signal between WT3/T4 pairs and non-clones. Usage::

    .venv/bin/python benchmarks/calibrate_t4.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect._io import atomic_write  # noqa: E402
from twinspect.code.clone_types import band_of  # noqa: E402
from twinspect.code.encoders.semantic import DEFAULT_MODEL, SemanticEncoder  # noqa: E402
from twinspect.code.evaluate.bcb import (  # noqa: E402
    bcb_fragments,
    bcb_split,
    load_bcb_functions,
    load_bcb_labels,
)
from twinspect.code.normalize import abstract_tokens, token_similarity  # noqa: E402
from twinspect.code.structural import WL_ITERATIONS, StructuralSimilarity  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "clones" / "bigclonebench"
OUT = ROOT / "twinspect" / "code" / "data" / "t4_rule.json"


def pair_rows(part: str) -> np.ndarray:
    """float (P, 4) rows ``(type_idx, semantic cosine, structural cosine or nan, LCS)`` of the labelled
    WT3/T4 (type 4) and non-clone (type 5) pairs of one half whose two functions were mined."""
    functions, labels = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), part, 0, version=2)
    with tempfile.TemporaryDirectory(prefix="twinspect-t4-") as tmp:
        frags = bcb_fragments(functions, tmp, min_lines=1)
    at: dict[int, int] = {}
    for i, f in enumerate(frags):
        at.setdefault(int(Path(f.path).stem), i)
    vecs = SemanticEncoder().encode(frags)
    structural = StructuralSimilarity(frags)
    rows = []
    for p in labels:
        if p.type_idx in (4, 5) and p.id1 in at and p.id2 in at:
            a, b = at[p.id1], at[p.id2]
            s = structural(a, b)
            rows.append((p.type_idx, float(vecs[a] @ vecs[b]), np.nan if s is None else s,
                         token_similarity(abstract_tokens(frags[a]), abstract_tokens(frags[b]))))
    return np.asarray(rows, dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target-fpr", type=float, default=0.01,
                    help="share of tune non-clones below the MT3 band allowed above the semantic threshold")
    ap.add_argument("--keep", type=float, default=0.9,
                    help="share of semantically accepted tune WT3/T4 pairs the structural floor keeps")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args()
    from sklearn.metrics import roc_auc_score

    t0 = time.time()
    rows = pair_rows("tune")
    t, sem, struct, lcs = rows.T
    below = np.asarray([band_of(x).band == "WT3" for x in lcs])
    pos, neg = (t == 4) & below, (t == 5) & below
    semantic = float(np.quantile(sem[neg], 1.0 - args.target_fpr, method="higher"))
    ok = pos & (sem >= semantic) & ~np.isnan(struct)
    structural = float(np.quantile(struct[ok], 1.0 - args.keep, method="lower")) if ok.any() else 0.0
    acc = (sem >= semantic) & (np.nan_to_num(struct, nan=-1.0) >= structural) & below
    with_struct = ~np.isnan(struct)
    rule = {
        "semantic": round(semantic, 6),
        "structural": round(structural, 6),
        "wl_iterations": WL_ITERATIONS,
        "info": {
            "data": "BigCloneBench tune half (bcb_split version 2, seed 0): labelled WT3/T4 pairs vs labelled "
                    "non-clones, both below the MT3 band (abstracted-token LCS < 0.5)",
            "semantic_model": DEFAULT_MODEL.name,
            "target_fpr": args.target_fpr, "keep": args.keep,
            "pairs": {"WT3/T4": int(pos.sum()), "non-clone": int(neg.sum())},
            "tune_rates": {"WT3/T4 recall": round(float(acc[pos].mean()), 4),
                           "non-clones reported": round(float(acc[neg].mean()), 4),
                           "WT3/T4 recall, semantic only": round(float((sem >= semantic)[pos].mean()), 4)},
            "roc_auc_wt3_t4_vs_non_clone": {
                "semantic": round(float(roc_auc_score(t[below] == 4, sem[below])), 4),
                "structural": round(float(roc_auc_score(t[below & with_struct] == 4, struct[below & with_struct])), 4),
            },
            "note": "the semantic encoder was trained on this half's functionality components, so tune rates are "
                    "optimistic; report on the test half",
            "seconds": round(time.time() - t0, 1),
        },
    }
    with atomic_write(args.output) as fh:
        fh.write(json.dumps(rule, indent=1) + "\n")
    print(json.dumps(rule, indent=1))


if __name__ == "__main__":
    main()
