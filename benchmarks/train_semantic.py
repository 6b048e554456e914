"""Train the semantic encoder shipped as ``twinspect/code/data/semantic_encoder.npz`` (``-e semantic``).

What it does (see :mod:`twinspect.code.encoders.semantic` for the model):

1. Data, from ``../shared`` only: the POJ-104 *train* split (problems 1–64, 32,000 C/C++ programs;
   a class = a problem) and, unless ``--no-bcb``, the BigCloneBench *tune* half (``bcb_split`` version
   2, seed 0; a class = a connected component of its labelled T1–WT3/T4 pairs, i.e. one
   functionality). The POJ-104 *valid* split (problems 65–80) is used only to choose the training
   step (early stopping on MAP@R of a fixed random subset); dev (81–92) and the BCB test half are
   never read here.
2. Vocabulary: structure n-grams (1…``--max-n``) and names that occur in ≥ ``--min-df`` training
   fragments; smoothed idf ``ln((1 + N) / (1 + df)) + 1``.
3. The projection ``W`` (V × ``--dim``) is fitted with the supervised contrastive loss (SupCon,
   Khosla et al. 2020, temperature ``--tau``) on batches of ``--classes`` classes × ``--per-class``
   fragments, AdamW, input dropout ``--dropout`` on the sparse values; seeded.
4. Writes the model (int8 projection, per-column scales) and a training log
   (``benchmarks/results/semantic_encoder_train.json``: data, sizes, every evaluation, the step kept,
   seconds).

Usage (from the repository root)::

    .venv/bin/python benchmarks/train_semantic.py            # ~5-10 min on 2 cores
    .venv/bin/twinspect clones eval poj104 -e semantic       # dev MAP@R (never used above)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect._io import atomic_write  # noqa: E402
from twinspect.code.encoders.semantic import (  # noqa: E402
    DEFAULT_MODEL,
    SemanticModel,
    bag_features,
    fragment_terms,
)
from twinspect.code.evaluate.metrics import map_at_r  # noqa: E402
from twinspect.code.evaluate.poj104 import load_poj104, poj104_fragments  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "clones"
LOG = ROOT / "benchmarks" / "results" / "semantic_encoder_train.json"


def bcb_tune_fragments(min_lines: int) -> tuple[list, list[int]]:
    """Functions of the BigCloneBench tune half that lie in a labelled clone component, and their
    component ids (one functionality each)."""
    from twinspect.code.evaluate.bcb import (
        bcb_fragments,
        bcb_split,
        functionality_groups,
        load_bcb_functions,
        load_bcb_labels,
    )

    root = SHARED / "bigclonebench"
    functions, labels = bcb_split(load_bcb_functions(root), load_bcb_labels(root), "tune", 0, version=2)
    comp = functionality_groups(labels, max_type=4)
    with tempfile.TemporaryDirectory(prefix="twinspect-semantic-") as tmp:
        frags = bcb_fragments([f for f in functions if f["id"] in comp], tmp, min_lines=min_lines)
    keep = [f for f in frags if int(Path(f.path).stem) in comp]
    return keep, [comp[int(Path(f.path).stem)] for f in keep]


def vocabulary(docs: list[list[str]], min_df: int) -> tuple[list[str], np.ndarray]:
    """Terms in ≥ ``min_df`` docs (sorted) and their smoothed idf (float32)."""
    df = Counter(t for d in docs for t in set(d))
    terms = sorted(t for t, c in df.items() if c >= min_df)
    n = len(docs)
    idf = np.asarray([np.log((1 + n) / (1 + df[t])) + 1.0 for t in terms], dtype=np.float32)
    return terms, idf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-n", type=int, default=3)
    ap.add_argument("--min-df", type=int, default=2)
    ap.add_argument("--name-weight", type=float, default=0.5)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--classes", type=int, default=32)
    ap.add_argument("--per-class", type=int, default=8)
    ap.add_argument("--dropout", type=float, default=0.3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--valid-subset", type=int, default=3000)
    ap.add_argument("--no-bcb", action="store_true", help="train on POJ-104 only")
    ap.add_argument("--bcb-share", type=float, default=0.25,
                    help="share of each batch's classes drawn from BigCloneBench components (the rest: POJ-104 problems)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--log", type=Path, default=LOG)
    args = ap.parse_args()
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    poj = SHARED / "poj104"
    train = load_poj104(poj, "train_1_64.jsonl.gz")
    frags = poj104_fragments(train)
    classes = [int(p["label"]) for p in train]
    sources = {"POJ-104 train (problems 1-64)": len(frags)}
    if not args.no_bcb:
        bf, bc = bcb_tune_fragments(min_lines=6)
        frags += bf
        classes += [1000 + c for c in bc]
        sources["BigCloneBench tune half (split v2, seed 0), functions in labelled T1-T4 components"] = len(bf)
    valid = load_poj104(poj, "valid_65_80.jsonl.gz")
    sub = rng.choice(len(valid), size=min(args.valid_subset, len(valid)), replace=False)
    vfr = poj104_fragments([valid[i] for i in sub])
    vlab = [valid[i]["label"] for i in sub]
    struct, names = fragment_terms(frags, args.max_n)
    s_terms, s_idf = vocabulary(struct, args.min_df)
    n_terms, n_idf = vocabulary(names, args.min_df)
    print(f"{len(frags)} training fragments {sources}; vocabulary {len(s_terms)} structure + {len(n_terms)} name "
          f"terms; features in {time.time() - t0:.0f} s", flush=True)
    vocabs = ({t: i for i, t in enumerate(s_terms)}, {t: i for i, t in enumerate(n_terms)})
    idf = np.concatenate([s_idf, n_idf])
    x = bag_features(struct, names, *vocabs, idf, args.name_weight)
    xv = bag_features(*fragment_terms(vfr, args.max_n), *vocabs, idf, args.name_weight)
    y = np.asarray(classes)
    by_class = {c: np.flatnonzero(y == c) for c in np.unique(y)}
    usable = [c for c, idx in by_class.items() if len(idx) >= 2]
    pools = [[c for c in usable if c < 1000], [c for c in usable if c >= 1000]]
    n_bcb = round(args.classes * args.bcb_share) if pools[1] else 0
    take = [min(args.classes - n_bcb, len(pools[0])), min(n_bcb, len(pools[1]))]

    def sparse(m):
        m = m.tocoo()
        return torch.sparse_coo_tensor(np.vstack([m.row, m.col]), m.data, m.shape).coalesce()

    w = torch.nn.Parameter(torch.randn(x.shape[1], args.dim) * 0.01)
    opt = torch.optim.AdamW([w], lr=args.lr, weight_decay=1e-4)
    best = (-1.0, 0, None)
    history = []
    for step in range(1, args.steps + 1):
        cs = np.concatenate([rng.choice(pool, size=k, replace=False) for pool, k in zip(pools, take) if k])
        idx = np.concatenate([rng.choice(by_class[c], size=min(args.per_class, len(by_class[c])), replace=False)
                              for c in cs])
        xb = sparse(x[idx])
        if args.dropout:
            xb = torch.sparse_coo_tensor(xb.indices(), torch.nn.functional.dropout(xb.values(), args.dropout), xb.shape)
        z = torch.nn.functional.normalize(torch.sparse.mm(xb, w), dim=1)
        yb = torch.as_tensor(y[idx])
        s = z @ z.T / args.tau
        s.fill_diagonal_(-1e9)
        pos = (yb[:, None] == yb[None, :]).float()
        pos.fill_diagonal_(0)
        logp = s - torch.logsumexp(s, dim=1, keepdim=True)
        loss = -((logp * pos).sum(1) / pos.sum(1).clamp(min=1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.eval_every == 0:
            with torch.no_grad():
                e = (xv @ w.detach().numpy()).astype(np.float32)
            m = map_at_r(e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12), vlab)
            history.append({"step": step, "loss": round(float(loss), 4), "valid_map_at_r": round(float(m), 4),
                            "seconds": round(time.time() - t0, 1)})
            print(history[-1], flush=True)
            if m > best[0]:
                best = (m, step, w.detach().numpy().copy())
    info = {
        "data": sources, "valid": f"POJ-104 valid (problems 65-80), random subset of {len(sub)} programs, seed "
        f"{args.seed}: early stopping only", "loss": f"SupCon, tau {args.tau}, {take[0]} POJ-104 + {take[1]} BCB classes x "
        f"{args.per_class} per batch, AdamW lr {args.lr}, input dropout {args.dropout}",
        "steps_run": args.steps, "step_kept": best[1], "valid_map_at_r": round(float(best[0]), 4),
        "max_n": args.max_n, "min_df": args.min_df, "name_weight": args.name_weight, "dim": args.dim,
        "vocabulary": {"structure": len(s_terms), "names": len(n_terms)}, "seed": args.seed,
        "torch": torch.__version__, "seconds": round(time.time() - t0, 1),
    }
    model = SemanticModel(s_terms, n_terms, idf, best[2], args.max_n, args.name_weight, info)
    model.save(args.output)
    with atomic_write(args.log) as fh:
        fh.write(json.dumps({"provenance": _provenance.info(__file__), "info": info, "history": history, "argv": sys.argv[1:]}, indent=1) + "\n")
    print(f"kept step {best[1]} (valid MAP@R {best[0]:.4f}); wrote {args.output} "
          f"({args.output.stat().st_size / 1e6:.1f} MB) and {args.log}", flush=True)


if __name__ == "__main__":
    main()
