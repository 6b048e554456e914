"""Precision of ``twinspect clones`` on real code: a stratified, hand-labelled sample of reported pairs.

Two steps (issue 8, point 4):

1. ``sample``: scan each project folder under ``--src`` at the default settings, and draw up to
   ``--per-type`` reported pairs per (project, clone type) with a fixed seed. Writes
   ``benchmarks/results/clones_precision_sample.jsonl`` (one pair per line: id, project, type, band,
   similarity, both fragments' path:lines and name) and prints both sides of each pair for reading.
2. ``score``: join the sample with the hand labels in
   ``benchmarks/results/clones_precision_labels.csv`` (``id,label,reason``; label ``clone`` or
   ``not-clone``, the reason one line, so anyone can audit it) and print precision per type beside
   the targets (T1–T3 ≥ 90 %, T4 ≥ 70 %).

The projects are PyPI source distributions downloaded outside the repository, e.g.::

    mkdir -p /tmp/prec_src && cd /tmp/prec_src
    pip download --no-deps --no-binary :all: flask==3.0.3 requests==2.32.3 redis==5.0.8 \
        pybind11==2.13.6 ujson==5.10.0 cffi==1.17.1 JPype1==1.5.0   # (metadata build errors are harmless)
    for f in *.tar.gz; do tar xzf $f; done
    cd - && .venv/bin/python benchmarks/clones_precision.py sample --src /tmp/prec_src
    .venv/bin/python benchmarks/clones_precision.py score

The committed sample has three draws (see benchmarks/results/clones_precision.md): the first as
above (at an earlier commit), then::

    .venv/bin/python benchmarks/clones_precision.py sample --src /tmp/prec_src --encoder neural \
        --runtime onnx-int8 --types T4 --per-type 7 --tag n --append
    .venv/bin/python benchmarks/clones_precision.py sample --src /tmp/prec_src --types T3 --per-type 4 \
        --seed 1 --tag l --append --all-bands   # drawn before WT3 was dropped by default
    .venv/bin/python benchmarks/clones_precision.py sample --src /tmp/prec_src --types T1 T2 --per-type 1 \
        --seed 1 --tag m --append
    .venv/bin/python benchmarks/clones_precision.py show --src /tmp/prec_src   # read, then label
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
SAMPLE = RESULTS / "clones_precision_sample.jsonl"
LABELS = RESULTS / "clones_precision_labels.csv"
TARGETS = {"T1": 90, "T2": 90, "T3": 90, "T4": 70}


def _side(f) -> dict:
    return {"path": f.path, "start_line": f.start_line, "end_line": f.end_line, "name": f.name,
            "language": f.language}


def _pair_key(rec: dict) -> tuple:
    a, b = rec["a"], rec["b"]
    return (rec["project"], a["path"], a["start_line"], b["path"], b["start_line"])


def sample(src: Path, per_type: int, seed: int, show: bool, encoder: str = "lexical",
           runtime: str | None = None, types: list[str] | None = None, tag: str = "",
           append: bool = False, all_bands: bool = False) -> list[dict]:
    """Draw up to ``per_type`` reported pairs per (project, type) at the default settings of ``encoder``.

    With ``append`` the records are added to the existing sample, skipping pairs already in it (ids get
    ``tag`` so they never clash with earlier draws); ``types`` restricts the drawn types;
    ``all_bands`` keeps lexical WT3 pairs (``lexical_min_t3=None``, the default before issue 8's
    second run).
    """
    from twinspect.code.clones import DetectConfig, scan

    rng = random.Random(seed)
    old = ([json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
           if append and SAMPLE.exists() else [])
    seen = {_pair_key(r) for r in old}
    out: list[dict] = []
    params = {"runtime": runtime} if (encoder == "neural" and runtime) else None
    enc_name = encoder + (f" {runtime}" if params else "")
    for project in sorted(p for p in src.iterdir() if p.is_dir()):
        cfg = DetectConfig(encoder=encoder, encoder_params=params)
        if all_bands:
            cfg.lexical_min_t3 = None
        report = scan([project], cfg, quiet=True)
        by_type: dict[str, list] = defaultdict(list)
        for p in report.pairs:
            by_type[p.type].append(p)
        st = report.stats
        print(f"{project.name}: {len(report.fragments)} fragments, {len(report.pairs)} pairs "
              f"{dict(Counter(p.type for p in report.pairs))}, {len(report.classes)} classes "
              f"(largest {st.get('largest_class')}; sizes {st.get('class_sizes')})", file=sys.stderr)
        for t in sorted(by_type):
            if types and t not in types:
                continue
            pairs = by_type[t]
            drawn = 0
            for p in rng.sample(pairs, len(pairs)):
                if drawn >= per_type:
                    break
                fa, fb = report.fragments[p.a], report.fragments[p.b]
                rec = {"id": f"{project.name}#{tag}{len(old) + len(out)}", "project": project.name,
                       "encoder": enc_name, "type": p.type,
                       "band": p.band, "similarity": round(float(p.similarity), 4),
                       "t3_similarity": None if p.t3_similarity is None else round(float(p.t3_similarity), 4),
                       "a": _side(fa), "b": _side(fb)}
                if _pair_key(rec) in seen:
                    continue
                seen.add(_pair_key(rec))
                drawn += 1
                out.append(rec)
                if show:
                    print(f"\n===== {rec['id']} {p.type} {p.band or ''} cos {p.similarity:.3f}")
                    for f in (fa, fb):
                        print(f"--- {f.path}:{f.start_line}-{f.end_line} {f.name}")
                        print("\n".join(f.text.splitlines()[:40]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    from twinspect._io import atomic_write

    with atomic_write(SAMPLE) as fh:
        for rec in old + out:
            fh.write(json.dumps(rec) + "\n")
    return out


def show_unlabelled(src: Path, max_lines: int) -> int:
    """Print both sides of every sampled pair that has no label yet (read from the sources under ``src``)."""
    recs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    labelled = set()
    if LABELS.exists():
        with LABELS.open(newline="", encoding="utf-8") as fh:
            labelled = {r["id"] for r in csv.DictReader(fh)}
    n = 0
    for rec in recs:
        if rec["id"] in labelled:
            continue
        n += 1
        print(f"\n===== {rec['id']} {rec.get('encoder', 'lexical')} {rec['type']} {rec['band'] or ''} "
              f"cos {rec['similarity']} tok {rec['t3_similarity']}")
        for side in (rec["a"], rec["b"]):
            lines = (src / rec["project"] / side["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
            body = lines[side["start_line"] - 1:side["end_line"]]
            print(f"--- {side['path']}:{side['start_line']}-{side['end_line']} {side['name']}")
            print("\n".join(body[:max_lines]) + (f"\n    ... ({len(body) - max_lines} more lines)"
                                                  if len(body) > max_lines else ""))
    return n


def score() -> dict:
    recs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    with LABELS.open(newline="", encoding="utf-8") as fh:
        labels = {r["id"]: r for r in csv.DictReader(fh)}
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    projects, languages = set(), set()
    for rec in recs:
        lab = labels.get(rec["id"])
        if lab is None:
            continue
        if lab["label"] not in ("clone", "not-clone"):
            raise SystemExit(f"{LABELS}: bad label {lab['label']!r} for {rec['id']}")
        per[rec["type"]][1] += 1
        per[rec["type"]][0] += lab["label"] == "clone"
        projects.add(rec["project"])
        languages.add(rec["a"]["language"])
    from twinspect.reports.table import markdown_table

    rows = []
    for t in ("T1", "T2", "T3", "T4"):
        ok, n = per.get(t, [0, 0])
        prec = round(100.0 * ok / n, 1) if n else None
        tgt = TARGETS[t]
        rows.append([t, n, ok, prec, f"≥ {tgt}", "n/a" if prec is None else ("yes" if prec >= tgt else "NO")])
    t13 = [sum(per.get(t, [0, 0])[i] for t in ("T1", "T2", "T3")) for i in (0, 1)]
    p13 = round(100.0 * t13[0] / t13[1], 1) if t13[1] else None
    rows.append(["T1–T3", t13[1], t13[0], p13, "≥ 90", "n/a" if p13 is None else ("yes" if p13 >= 90 else "NO")])
    n = sum(v[1] for v in per.values())
    print(f"\n### Precision study — {n} labelled pairs from {len(projects)} projects in "
          f"{len(languages)} languages ({', '.join(sorted(languages))})\n")
    print(markdown_table(rows, ["type", "labelled", "clones", "precision %", "target", "met"]))
    # the same labels by encoder (draw) and Type-3 band
    by: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for rec in recs:
        lab = labels.get(rec["id"])
        if lab is None:
            continue
        key = (rec.get("encoder", "lexical"), rec["type"], rec["band"] or "")
        by[key][1] += 1
        by[key][0] += lab["label"] == "clone"
    brows = [[e, t, b, n, ok, round(100.0 * ok / n, 1)] for (e, t, b), (ok, n) in sorted(by.items())]
    print("\nBy encoder, type and Type-3 band:\n")
    print(markdown_table(brows, ["encoder", "type", "band", "labelled", "clones", "precision %"]))
    return {"per_type": {k: v for k, v in per.items()}, "labelled": n, "projects": sorted(projects),
            "languages": sorted(languages), "t1_t3_precision": p13}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--src", type=Path, required=True, help="folder of unpacked projects (one sub-folder each)")
    s.add_argument("--per-type", type=int, default=10)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--show", action="store_true", help="print both sides of every sampled pair")
    s.add_argument("--encoder", default="lexical", help="lexical (default) or neural")
    s.add_argument("--runtime", default=None, help="neural encoder runtime (e.g. onnx-int8)")
    s.add_argument("--types", nargs="*", default=None, help="draw only these clone types (e.g. T4)")
    s.add_argument("--tag", default="", help="id infix of this draw (ids stay unique across draws)")
    s.add_argument("--append", action="store_true", help="add to the existing sample instead of replacing it")
    s.add_argument("--all-bands", action="store_true", help="keep lexical WT3 pairs (lexical_min_t3=None)")
    sh = sub.add_parser("show", help="print both sides of every sampled pair that has no label yet")
    sh.add_argument("--src", type=Path, required=True)
    sh.add_argument("--max-lines", type=int, default=60)
    sub.add_parser("score")
    args = ap.parse_args(argv)
    if args.cmd == "sample":
        recs = sample(args.src, args.per_type, args.seed, args.show, encoder=args.encoder,
                      runtime=args.runtime, types=args.types, tag=args.tag, append=args.append,
                      all_bands=args.all_bands)
        print(f"{len(recs)} pairs sampled -> {SAMPLE}", file=sys.stderr)
    elif args.cmd == "show":
        print(f"{show_unlabelled(args.src, args.max_lines)} unlabelled pairs", file=sys.stderr)
    else:
        score()


if __name__ == "__main__":
    main()
