"""Blind precision study of ``twinspect clones`` at the default settings (issue 15, point 6).

Three steps:

1. ``sample --src DIR``: scan each project folder under ``DIR`` at the default settings and draw,
   per project, up to ``--per-band`` reported pairs of each Type-3 band (VST3, ST3, MT3; MT3 gets
   ``--mt3`` pairs) and ``--per-exact`` T1/T2 pairs, with a fixed seed. Writes the sample with its
   metadata to ``benchmarks/results/clones_precision_blind_sample.jsonl`` and, for the judge, a
   *blind* file (``--blind``, default ``/tmp/twinspect_blind_pairs.md``): the pairs in shuffled
   order under neutral ids, each as the two fragments' code only — no type, band, score, project
   or file name.
2. The judge (someone who did not build the detector) labels every pair ``clone`` / ``weak`` /
   ``not`` with a one-line reason into ``benchmarks/results/clones_precision_blind_labels.csv``
   (``id,label,reason``). "clone": duplicated logic a maintainer would want to know about; "weak":
   a shared skeleton or boilerplate; "not": unrelated.
   ``blind --src DIR [--ids P000-P039]`` rebuilds the blind file (or a slice of it) from the
   committed sample and the source trees.
3. ``score``: joins labels and sample and prints precision (``clone`` only counts) per type and
   band, writing ``benchmarks/results/clones_precision_blind.md``.

The earlier sample (issue 8: ``clones_precision_sample.jsonl``, 203 pairs from flask, requests,
redis-py, pybind11, ujson, cffi and JPype1, then labelled by the detector's builder) is relabelled
the same way: ``blind --old --src DIR`` (the seven sdists unpacked under DIR, e.g. ``pip download
--no-deps --no-binary :all: JPype1==1.5.0 cffi==1.17.1 redis==5.0.8 requests==2.32.3 ujson==5.10.0
flask==3.0.3 pybind11==2.13.6``) writes it under neutral ids ``Q000``..., the judge writes
``clones_precision_old_blind_labels.csv``, and ``score --old`` writes ``clones_precision_old_blind.md``.

The projects are downloaded outside the repository (none of them was used to fit the verifier or
in the earlier precision study), e.g.::

    mkdir -p /tmp/prec2 && cd /tmp/prec2
    pip download --no-deps --no-binary :all: click==8.1.7 msgpack==1.0.8 PyYAML==6.0.1
    pip download --no-deps jinja2==3.1.4 marshmallow==3.21.2 rich==13.7.1 httpx==0.27.0 attrs==23.2.0
    for f in *.tar.gz; do tar xzf $f; done; for w in *.whl; do mkdir "${w%%-py3*}"; (cd "${w%%-py3*}" && python -m zipfile -e ../$w .); done
    # Java: src/main of google/gson at 9835b6f and apache/commons-io at d83aeb6 (git archive), as gson/ and commons-io/
    # stdlib-3.11/: the stdlib subset (asyncio, email, json, http, xml, ...) listed in the sample's paths
    cd - && .venv/bin/python benchmarks/clones_precision_blind.py sample --src /tmp/prec2 --per-band 6 --mt3 14
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
SAMPLE = RESULTS / "clones_precision_blind_sample.jsonl"
LABELS = RESULTS / "clones_precision_blind_labels.csv"
REPORT = RESULTS / "clones_precision_blind.md"
# the earlier (issue 8) sample, labelled then by the detector's builder with types in view; redone blind
# a second judge's blind labels of an id range of the new sample (inter-judge agreement)
SECOND = RESULTS / "clones_precision_blind_labels_judge2.csv"
OLD_SAMPLE = RESULTS / "clones_precision_sample.jsonl"
OLD_LABELS = RESULTS / "clones_precision_old_blind_labels.csv"
OLD_REPORT = RESULTS / "clones_precision_old_blind.md"


def _records(old: bool) -> list[dict]:
    """The sample's records, each with its judge-facing ``id``.

    The new sample's ids (``P000``...) were shuffled when it was drawn. The old sample's ids name
    project and draw (``flask-3.0.3#n120``), so the judge sees neutral ``Q000``... ids instead, in an
    order shuffled with seed 0 (kept in ``orig_id``; recomputed identically by ``score``).
    """
    path = OLD_SAMPLE if old else SAMPLE
    recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if old:
        recs.sort(key=lambda r: r["id"])
        order = list(range(len(recs)))
        random.Random(0).shuffle(order)
        for n, i in enumerate(order):
            recs[i]["orig_id"], recs[i]["id"] = recs[i]["id"], f"Q{n:03d}"
    return recs
MAX_LINES = 60


def _side(f) -> dict:
    return {"path": f.path, "start_line": f.start_line, "end_line": f.end_line, "name": f.name, "language": f.language}


def sample(src: Path, per_band: int, mt3: int, per_exact: int, seed: int, blind: Path) -> None:
    from twinspect._io import atomic_write
    from twinspect.code.clones import DetectConfig, scan

    rng = random.Random(seed)
    records: list[dict] = []
    texts: dict[str, tuple[str, str]] = {}
    for project in sorted(p for p in src.iterdir() if p.is_dir()):
        report = scan([project], DetectConfig(), quiet=True)
        by_stratum: dict[str, list] = defaultdict(list)
        for p in report.pairs:
            by_stratum[p.band if p.type in ("T3", "T4") else p.type].append(p)
        print(f"{project.name}: {len(report.fragments)} fragments, {len(report.pairs)} pairs "
              f"{ {k: len(v) for k, v in sorted(by_stratum.items())} }", file=sys.stderr)
        for stratum, pairs in sorted(by_stratum.items()):
            want = mt3 if stratum == "MT3" else per_exact if stratum in ("T1", "T2") else per_band
            for p in rng.sample(pairs, min(want, len(pairs))):
                fa, fb = report.fragments[p.a], report.fragments[p.b]
                rec = {"project": project.name, "type": p.type, "band": p.band, "similarity": round(p.similarity, 4),
                       "t3_similarity": p.t3_similarity, "score": p.score, "a": _side(fa), "b": _side(fb)}
                records.append(rec)
                texts[str(len(records) - 1)] = (fa.text, fb.text)
    order = list(range(len(records)))
    rng.shuffle(order)
    for n, i in enumerate(order):
        records[i]["id"] = f"P{n:03d}"
    with atomic_write(SAMPLE) as fh:
        for rec in sorted(records, key=lambda r: r["id"]):
            fh.write(json.dumps(rec) + "\n")
    with atomic_write(blind) as fh:
        fh.write("# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n")
        for i in order:
            a, b = texts[str(i)]
            fh.write(f"## {records[i]['id']}\n\n")
            for side, text in (("A", a), ("B", b)):
                lines = text.splitlines()
                more = f"\n... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else ""
                fh.write(f"### {side}\n```\n" + "\n".join(lines[:MAX_LINES]) + more + "\n```\n\n")
    print(f"{len(records)} pairs; sample {SAMPLE}; blind file {blind}", file=sys.stderr)


def blind(src: Path, out: Path, ids: str | None, old: bool = False) -> None:
    """Rebuild the judge's blind file from the committed sample and the source trees under ``src``.

    The fragments are cut from ``src/<project>/<path>`` by the sample's line ranges, in id order
    (the ids were shuffled when the sample was drawn). ``ids`` ("P000-P039") restricts the output
    to a range so the labelling can be split between judges. ``old``: the issue-8 sample, under
    neutral ``Q`` ids (see :func:`_records`).
    """
    from twinspect._io import atomic_write

    recs = _records(old)
    lo, hi = (ids.split("-") if ids else ("Q000", "Q999") if old else ("P000", "P999"))
    chosen = [r for r in sorted(recs, key=lambda r: r["id"]) if lo <= r["id"] <= hi]
    with atomic_write(out) as fh:
        fh.write("# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n")
        for rec in chosen:
            fh.write(f"## {rec['id']}\n\n")
            for side in ("a", "b"):
                f = rec[side]
                path = src / rec["project"] / f["path"]
                try:
                    lines = path.read_text(encoding="utf-8").splitlines()[f["start_line"] - 1:f["end_line"]]
                except OSError as exc:
                    sys.exit(f"{path}: cannot read ({exc.strerror})")
                more = f"\n... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else ""
                fh.write(f"### {side.upper()}\n```\n" + "\n".join(lines[:MAX_LINES]) + more + "\n```\n\n")
    print(f"{len(chosen)} pairs; blind file {out}", file=sys.stderr)


def score(old: bool = False) -> None:
    from twinspect._io import atomic_write

    recs = {r["id"]: r for r in _records(old)}
    with (OLD_LABELS if old else LABELS).open(encoding="utf-8") as fh:
        labels = {row["id"]: row for row in csv.DictReader(fh)}
    missing = sorted(set(recs) - set(labels))
    strata: dict[str, Counter] = defaultdict(Counter)
    for rid, rec in recs.items():
        if rid not in labels:
            continue
        lab = labels[rid]["label"].strip()
        stratum = rec["band"] if rec["type"] in ("T3", "T4") else rec["type"]
        for key in (stratum, "T1-T3" if rec["type"] in ("T1", "T2", "T3") else "T4", "all"):
            strata[key][lab] += 1
    lines = ["| stratum | pairs | clone | weak | not | precision (clone) |", "|---|---|---|---|---|---|"]
    for key in ("T1", "T2", "VST3", "ST3", "MT3", "WT3", "T1-T3", "all"):
        c = strata.get(key)
        if not c:
            continue
        n = sum(c.values())
        lines.append(f"| {key} | {n} | {c['clone']} | {c['weak']} | {c['not']} | {100 * c['clone'] / n:.1f} % |")
    by_project = Counter(rec["project"] for rid, rec in recs.items() if rid in labels)
    title = "the issue-8 sample relabelled blind" if old else "the issue-15 sample"
    text = (f"# Blind precision study (issue 15): {title}\n\n" + "\n".join(lines) + "\n\n"
            + f"Projects: {dict(sorted(by_project.items()))}. Unlabelled: {len(missing)}.\n")
    if not old and SECOND.is_file():
        with SECOND.open(encoding="utf-8") as fh:
            second = {row["id"]: row["label"].strip() for row in csv.DictReader(fh)}
        both = sorted(set(second) & set(labels))
        if both:
            first = [labels[i]["label"].strip() for i in both]
            other = [second[i] for i in both]
            po = sum(x == y for x, y in zip(first, other)) / len(both)
            ca = [x == "clone" for x in first]
            cb = [y == "clone" for y in other]
            pb = sum(x == y for x, y in zip(ca, cb)) / len(both)
            pa_, pb_ = sum(ca) / len(both), sum(cb) / len(both)
            pe = pa_ * pb_ + (1 - pa_) * (1 - pb_)
            kappa = (pb - pe) / (1 - pe) if pe < 1 else float("nan")
            text += (f"\nInter-judge agreement ({SECOND.name}: a second blind judge on {both[0]}–{both[-1]}, "
                     f"{len(both)} pairs): same label {100 * po:.1f} %; clone vs not-clone {100 * pb:.1f} %, "
                     f"Cohen's κ {kappa:.2f}; clones {sum(ca)} (first judge) vs {sum(cb)} (second).\n")
    print(text)
    with atomic_write(OLD_REPORT if old else REPORT) as fh:
        fh.write(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--src", type=Path, required=True)
    s.add_argument("--per-band", type=int, default=5)
    s.add_argument("--mt3", type=int, default=10)
    s.add_argument("--per-exact", type=int, default=2)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--blind", type=Path, default=Path("/tmp/twinspect_blind_pairs.md"))
    b = sub.add_parser("blind")
    b.add_argument("--src", type=Path, required=True)
    b.add_argument("--ids", help="id range, e.g. P000-P039")
    b.add_argument("--blind", type=Path, default=Path("/tmp/twinspect_blind_pairs.md"))
    b.add_argument("--old", action="store_true", help="the issue-8 sample (neutral Q ids)")
    sc = sub.add_parser("score")
    sc.add_argument("--old", action="store_true", help="the issue-8 sample and its blind labels")
    args = ap.parse_args()
    if args.cmd == "sample":
        sample(args.src, args.per_band, args.mt3, args.per_exact, args.seed, args.blind)
    elif args.cmd == "blind":
        blind(args.src, args.blind, args.ids, args.old)
    else:
        score(args.old)


if __name__ == "__main__":
    main()
