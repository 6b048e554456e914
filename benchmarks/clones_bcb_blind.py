"""Blind labels of BigCloneBench pairs by the real-code precision study's standard (issues 15 and 16).

Issue 15 asks for two things at once with default settings: BigCloneBench MT3 recall ≥ 50 % and, on
real code, precision ≥ 80 % among the MT3-band pairs a blind judge calls ``clone`` ("duplicated
logic a maintainer would want to know about"; ``weak``: "a shared skeleton or boilerplate"; ``not``:
unrelated). The real-code study (``clones_precision_blind.py``) found most reported MT3-band pairs
``weak``, and every verifier fitted to the judges' labels keeps about 2 % of BigCloneBench's MT3.
This script asks the judge about BigCloneBench's own labelled pairs, so the two targets can be read
against one standard: which share of the benchmark's MT3 (and ST3, WT3/T4, non-clone) pairs does the
same judge, shown only the two methods, call a clone?

Steps:

1. ``sample``: draw, with a fixed seed, pairs of each labelled type from the *test* half of the
   functionality split (``bcb_split(..., "test")``, the half the recall targets are reported on;
   nothing is tuned here) and write ``benchmarks/results/clones_bcb_blind_sample.jsonl`` (neutral
   ids ``B000``..., shuffled) and the judge's blind file (``--blind``, default
   ``/tmp/twinspect_bcb_blind.md``): the two methods' code only — no type, label, score or folder.
2. The judge (someone who did not build the detector) writes
   ``benchmarks/results/clones_bcb_blind_labels.csv`` (``id,label,reason``); a second judge, on the same
   blind file, ``clones_bcb_blind_labels_judge2.csv`` (optional: inter-judge agreement).
3. ``score``: the share judged ``clone`` / ``weak`` / ``not`` per BigCloneBench type, written to
   ``benchmarks/results/clones_bcb_blind.md``.

Run from the repository root::

    .venv/bin/python benchmarks/clones_bcb_blind.py sample
    .venv/bin/python benchmarks/clones_bcb_blind.py score --detector  # minutes: the verifier, a scan of the half
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / ".." / "shared" / "data" / "clones" / "bigclonebench"
RESULTS = ROOT / "benchmarks" / "results"
SAMPLE = RESULTS / "clones_bcb_blind_sample.jsonl"
LABELS = RESULTS / "clones_bcb_blind_labels.csv"
#: a second blind judge's labels of the same pairs (optional): inter-judge agreement
LABELS2 = RESULTS / "clones_bcb_blind_labels_judge2.csv"
REPORT = RESULTS / "clones_bcb_blind.md"
#: pairs drawn per BigCloneBench type index (2 ST3 incl. VST3, 3 MT3, 4 WT3/T4, 5 non-clone)
PER_TYPE = {2: 20, 3: 40, 4: 20, 5: 20}
#: longest fragment shown to the judge (as in the real-code study)
MAX_LINES = 60


def sample(seed: int, blind_out: Path) -> None:
    """Draw the pairs, write the sample (with types) and the blind file (code only)."""
    import random

    from twinspect._io import atomic_write
    from twinspect.code.evaluate.bcb import BCB_TYPES, bcb_split, load_bcb_functions, load_bcb_labels

    functions, labels = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), "test", 0)
    code = {f["id"]: f["code"] for f in functions}
    rng = random.Random(seed)
    drawn = []
    for t, n in PER_TYPE.items():
        pool = sorted((p for p in labels if p.type_idx == t and p.id1 in code and p.id2 in code),
                      key=lambda p: (p.id1, p.id2))
        drawn += [(t, p) for p in rng.sample(pool, min(n, len(pool)))]
    rng.shuffle(drawn)
    recs = [{"id": f"B{i:03d}", "type_idx": t, "type": BCB_TYPES[t], "id1": p.id1, "id2": p.id2}
            for i, (t, p) in enumerate(drawn)]
    with atomic_write(SAMPLE) as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    with atomic_write(blind_out) as fh:
        fh.write("# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n")
        for r in recs:
            fh.write(f"## {r['id']}\n\n")
            for side, fid in (("A", r["id1"]), ("B", r["id2"])):
                lines = code[fid].splitlines()
                more = f"\n... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else ""
                fh.write(f"### {side}\n```\n" + "\n".join(lines[:MAX_LINES]) + more + "\n```\n\n")
    print(f"{len(recs)} pairs: sample {SAMPLE}, blind file {blind_out}", file=sys.stderr)


def verifier_accepts(recs: dict[str, dict]) -> dict[str, bool]:
    """Sample id → does the shipped default clone verifier accept the pair (features over the test half's
    functions, as a scan of that half computes them; candidate generation not involved)?"""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from train_verifier import bcb_function_fragments  # noqa: E402

    from twinspect.code.evaluate.bcb import bcb_split, load_bcb_functions, load_bcb_labels
    from twinspect.code.verify import PairFeatures, load_verifier

    functions, _ = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), "test", 0)
    frags, longest = bcb_function_fragments(functions)
    ids = [i for i, r in recs.items() if r["id1"] in longest and r["id2"] in longest]
    a = np.asarray([longest[recs[i]["id1"]] for i in ids])
    b = np.asarray([longest[recs[i]["id2"]] for i in ids])
    v = load_verifier(None)
    acc = v.score(PairFeatures(frags).compute(a, b)) >= v.threshold
    return dict(zip(ids, acc.tolist(), strict=True))


def detector_states(recs: dict[str, dict]) -> dict[str, bool]:
    """Sample id → does ``twinspect clones`` at its default settings, run on the whole test half (every
    function a fragment, as ``benchmarks/clones.py`` scans it), state the pair (listed, or inside an
    identical group)?"""
    import tempfile

    import numpy as np

    from twinspect.code.clones import DetectConfig, detect
    from twinspect.code.evaluate.bcb import (
        FoundPairs,
        bcb_fragments,
        bcb_function_id,
        bcb_split,
        load_bcb_functions,
        load_bcb_labels,
    )
    from twinspect.code.evaluate.common import config_embedder
    from twinspect.code.evaluate.matching import report_view

    functions, _ = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), "test", 0)
    with tempfile.TemporaryDirectory(prefix="twinspect-bcb-") as tmp:
        frags = bcb_fragments(functions, tmp, 1, True)
    frags = sorted(frags, key=lambda f: (f.path, f.start_line, f.end_line))
    cfg = DetectConfig()
    (vecs,) = config_embedder(cfg)(frags, [frags])
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    rep = detect(frags, cfg, vectors=vecs, vectors_encoder=cfg.encoder, quiet=True)
    stated = FoundPairs.from_view(report_view(rep), bcb_function_id).stated()
    return {i: bool(stated(r["id1"], r["id2"])) for i, r in recs.items()}


def read_labels(path: Path) -> dict[str, str]:
    """``id,label,reason`` CSV → id → label; exits naming the file on a label other than clone/weak/not."""
    with path.open(encoding="utf-8") as fh:
        labels = {row["id"].strip(): row["label"].strip() for row in csv.DictReader(fh)}
    bad = sorted(i for i, lab in labels.items() if lab not in ("clone", "weak", "not"))
    if bad:
        sys.exit(f"{path}: labels other than clone/weak/not for {', '.join(bad[:5])}")
    return labels


def agreement(a: dict[str, str], b: dict[str, str]) -> tuple[int, float, float, float]:
    """(pairs both judged, same label share, same clone/not-clone share, Cohen's κ on clone/not-clone)."""
    ids = sorted(set(a) & set(b))
    same = sum(a[i] == b[i] for i in ids) / len(ids)
    ca = [a[i] == "clone" for i in ids]
    cb = [b[i] == "clone" for i in ids]
    po = sum(x == y for x, y in zip(ca, cb, strict=True)) / len(ids)
    pa, pb = sum(ca) / len(ids), sum(cb) / len(ids)
    pe = pa * pb + (1 - pa) * (1 - pb)
    return len(ids), same, po, (po - pe) / (1 - pe) if pe < 1 else 1.0


def flag_rows(recs: dict[str, dict], labels: dict[str, str], flag: dict[str, bool]) -> list[str]:
    """Markdown rows, one per BigCloneBench type: ``flagged / pairs`` for each judge's label."""
    rows = []
    for t in ("ST3", "MT3", "WT3/T4", "non-clone"):
        cells = []
        for lab in ("clone", "weak", "not"):
            got = [flag[i] for i, r in recs.items() if r["type"] == t and i in flag and labels.get(i) == lab]
            cells.append(f"{sum(got)} / {len(got)}" if got else "–")
        rows.append(f"| {t} | " + " | ".join(cells) + " |")
    return rows


def score(with_verifier: bool, with_detector: bool = False) -> None:
    """Per BigCloneBench type: pairs judged clone / weak / not (and, ``with_verifier``, the share of each the
    shipped verifier accepts; ``with_detector``, the share the default detector states on a scan of the
    whole test half); written to :data:`REPORT`."""
    from twinspect._io import atomic_write

    recs = {json.loads(line)["id"]: json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()}
    labels = read_labels(LABELS)
    counts: dict[str, Counter] = defaultdict(Counter)
    for rid, rec in recs.items():
        if rid in labels:
            counts[rec["type"]][labels[rid]] += 1
    lines = ["| BigCloneBench type | pairs | clone | weak | not | judged clone |", "|---|---|---|---|---|---|"]
    for t in ("ST3", "MT3", "WT3/T4", "non-clone"):
        c = counts.get(t)
        if c:
            n = sum(c.values())
            lines.append(f"| {t} | {n} | {c['clone']} | {c['weak']} | {c['not']} | {100 * c['clone'] / n:.1f} % |")
    if with_verifier:
        acc = verifier_accepts(recs)
        lines += ["", "Accepted by the shipped default verifier (`twinspect/code/data/t3_verifier.json`; the pair's "
                  "features alone, candidate generation not involved), per type and judge's label:", "",
                  "| BigCloneBench type | judged clone: accepted | judged weak: accepted | judged not: accepted |",
                  "|---|---|---|---|"]
        lines += flag_rows(recs, labels, acc)
    if with_detector:
        st = detector_states(recs)
        lines += ["", "Stated by `twinspect clones` at its default settings on a scan of the whole test half "
                  "(listed or inside an identical group), per type and judge's label:", "",
                  "| BigCloneBench type | judged clone: stated | judged weak: stated | judged not: stated |",
                  "|---|---|---|---|"]
        lines += flag_rows(recs, labels, st)
    if LABELS2.exists():
        second = read_labels(LABELS2)
        n, same, po, kappa = agreement(labels, second)
        lines += ["", f"A second blind judge (`{LABELS2.name}`, same blind file, same instructions) on {n} pairs: "
                  f"same label {100 * same:.1f} %, clone vs not-clone {100 * po:.1f} %, Cohen's κ {kappa:.2f}. "
                  "Judged clone by the second judge, per type:", "",
                  "| BigCloneBench type | pairs | clone | weak | not | judged clone | both judges clone |",
                  "|---|---|---|---|---|---|---|"]
        for t in ("ST3", "MT3", "WT3/T4", "non-clone"):
            ids = [i for i, r in recs.items() if r["type"] == t and i in second]
            if ids:
                c2 = Counter(second[i] for i in ids)
                both = sum(second[i] == "clone" and labels.get(i) == "clone" for i in ids)
                lines.append(f"| {t} | {len(ids)} | {c2['clone']} | {c2['weak']} | {c2['not']} | "
                             f"{100 * c2['clone'] / len(ids):.1f} % | {both} |")
    missing = sorted(set(recs) - set(labels))
    body = ["# BigCloneBench pairs judged blind by the real-code precision study's standard", "",
            "Sample: `benchmarks/clones_bcb_blind.py sample` (test half of the functionality split, seed 0); the judge "
            "saw the two methods' code only (no type, label or folder) and answered clone / weak / not with a reason.",
            "", *lines, "", f"Unlabelled: {len(missing)}."]
    with atomic_write(REPORT) as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(body) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["sample", "score"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blind", type=Path, default=Path("/tmp/twinspect_bcb_blind.md"))
    ap.add_argument("--no-verifier", action="store_true", help="score: leave out the shipped verifier's decisions")
    ap.add_argument("--detector", action="store_true",
                    help="score: also scan the whole test half with the default detector (minutes) and say which "
                         "pairs it states")
    args = ap.parse_args()
    if args.command == "sample":
        sample(args.seed, args.blind)
    else:
        score(not args.no_verifier, args.detector)


if __name__ == "__main__":
    main()
