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

Languages study (``--study languages``: ``clones_precision_lang_sample.jsonl``, ``_lang_labels.csv``,
``clones_precision_lang.md``, ids ``L000``...): the same draw, blind file and labels on whole
repositories (tests and examples included, as a user scans them) in languages the earlier samples left
out, none of them used to fit or tune anything, each a ``git archive`` of the named commit under
``/tmp/langsrc/<folder>``::

    cobra/       spf13/cobra           adbc8813901bba65827259daa8e22ff94ec1f30e  (Go)
    express/     expressjs/express     a3714473feb3d2908add734d340e7755fd85e0a3  (JavaScript)
    ky/          sindresorhus/ky       3419113b48e034fdcf8fa6bd3be3da7b3d0d758f  (TypeScript)
    monolog/     Seldaek/monolog       57eb1028342134e701e77c617565d51b6e5a2a53  (PHP)
    okio/        square/okio           4164f2976ac7174f3d35d52150e8ffbdbe0acbec  (Kotlin, some Java)
    serde_json/  serde-rs/json         827a315bf2198558f0325b07bcc1e2cd973aba2f  (Rust)
    sinatra/     sinatra/sinatra       cb22afd7902b566b6eaba6c4ea89739494a65d12  (Ruby)

    .venv/bin/python benchmarks/clones_precision_blind.py sample --study languages --src /tmp/langsrc \
        --per-band 3 --mt3 6 --per-exact 2 --blind /tmp/twinspect_lang_blind.md
    .venv/bin/python benchmarks/clones_precision_blind.py score --study languages

``score --study languages [--strict-src /tmp/langsrc]`` adds T1–T3 precision per project and (with the
sources) which sampled pairs ``--verifier strict`` states too, with their labels.

Type-4 study (``-e semantic``: the clone-trained encoder and the two-evidence T4 rule). Projects
outside POJ-104 and BigCloneBench (the encoder's training data), one folder each under
``/tmp/t4src``::

    mkdir -p /tmp/t4dl /tmp/t4src && cd /tmp/t4dl
    pip download --no-deps --no-binary :all: requests==2.32.3 flask==3.0.3 click==8.1.7 rich==13.7.1 \
        httpx==0.27.0 marshmallow==3.21.2 jinja2==3.1.4 attrs==23.2.0 PyYAML==6.0.1
    cd /tmp/t4src && for f in /tmp/t4dl/*.tar.gz; do tar xzf $f; done   # whole sdists (tests, docs, examples)
    # git archive of public GitHub repositories:
    #   gson/         google/gson          9835b6f90192f79cdf5300c528fc6212455fb6c1  path gson/src/main
    #   commons-io/   apache/commons-io    d83aeb6f4774aee75d857b29fb6cd89132c9a91b  path src/main
    #   commons-lang/ apache/commons-lang  d15939ef46f0bd4144994df8be95cf5a7f91eb52  path src/main
    #   hiredis/      redis/hiredis        29ea2791c102fdffff350f1ea6e04d1f71903d0d  whole tree
    #   libuv/        libuv/libuv          6179e7af87413396d5853a1c3722c8b5749336c8  paths src include
    #   zlib/         madler/zlib          d201f04c72b0881220f5ba75ca19fd0e19fa848b  whole tree
    # e.g. mkdir gson && git --git-dir=GSON.git archive 9835b6f gson/src/main | tar -x -C gson
    cd /work/main && .venv/bin/python benchmarks/clones_precision_blind.py sample-t4 --src /tmp/t4src --per-project 9 --seed 0

``sample-t4`` scans each folder as ``twinspect clones DIR -e semantic`` does, collapses T4 pairs
repeated across exact-duplicate groups, draws up to ``--per-project`` of them per project and writes
``clones_precision_t4_sample.jsonl`` (ids ``T000``...) and the blind file ``/tmp/twinspect_t4_blind.md``.
Drawn at twinspect 91e3cfb/cbdb77e: T4 pairs (distinct) per project — PyYAML 17 (17), attrs 30 (20),
click 123 (122), commons-io 21 (21), commons-lang 94 (88), flask 88 (87), gson 50 (42), hiredis 23
(23), httpx 42 (33), jinja2 389 (153), libuv 273 (238), marshmallow 46 (34), requests 6 (3), rich
22 (22), zlib 5 (5); 9 drawn per project (requests 3, zlib 5): 125 pairs (python 75, java 27, c 23),
no project above 7.2 %. The judge writes ``clones_precision_t4_labels.csv`` (``id,label,reason``,
same labels as above) and ``score-t4`` writes ``clones_precision_t4.md`` (precision per project and
language, ``clone`` only).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

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
# the Type-4 (semantic, ``-e semantic``) study: sample, the judge's labels, report
T4_SAMPLE = RESULTS / "clones_precision_t4_sample.jsonl"
T4_LABELS = RESULTS / "clones_precision_t4_labels.csv"
T4_REPORT = RESULTS / "clones_precision_t4.md"
T4_BLIND = Path("/tmp/twinspect_t4_blind.md")
# the languages study (``--study languages``): the same draw and labels on projects in the languages the
# earlier samples left out (Go, JavaScript, TypeScript, Rust, Ruby, PHP, Kotlin), ids ``L000``...
LANG_SAMPLE = RESULTS / "clones_precision_lang_sample.jsonl"
LANG_LABELS = RESULTS / "clones_precision_lang_labels.csv"
LANG_REPORT = RESULTS / "clones_precision_lang.md"
#: per study: (sample file, labels file, report file, id prefix, title)
STUDIES = {"issue15": (SAMPLE, LABELS, REPORT, "P", "the issue-15 sample"),
           "languages": (LANG_SAMPLE, LANG_LABELS, LANG_REPORT, "L", "projects in languages the earlier samples left out")}


def records(old: bool, study: str = "issue15") -> list[dict]:
    """The sample's records, each with its judge-facing ``id``.

    The new sample's ids (``P000``...) were shuffled when it was drawn. The old sample's ids name
    project and draw (``flask-3.0.3#n120``), so the judge sees neutral ``Q000``... ids instead, in an
    order shuffled with seed 0 (kept in ``orig_id``; recomputed identically by ``score``).
    """
    path = OLD_SAMPLE if old else STUDIES[study][0]
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


def sample(src: Path, per_band: int, mt3: int, per_exact: int, seed: int, blind: Path, study: str = "issue15") -> None:
    """Draw a study's sample (see the module doc) from the project folders under ``src``; ``study`` names
    its files and id prefix (:data:`STUDIES`). Each record also carries the pair's ``language``."""
    from twinspect._io import atomic_write
    from twinspect.code.clones import DetectConfig, scan

    rng = random.Random(seed)
    drawn: list[dict] = []
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
                rec = {"project": project.name, "language": fa.language, "type": p.type, "band": p.band,
                       "similarity": round(p.similarity, 4),
                       "t3_similarity": p.t3_similarity, "score": p.score, "a": _side(fa), "b": _side(fb)}
                drawn.append(rec)
                texts[str(len(drawn) - 1)] = (fa.text, fb.text)
    order = list(range(len(drawn)))
    rng.shuffle(order)
    sample_path, _, _, prefix, _ = STUDIES[study]
    for n, i in enumerate(order):
        drawn[i]["id"] = f"{prefix}{n:03d}"
    with atomic_write(sample_path) as fh:
        for rec in sorted(drawn, key=lambda r: r["id"]):
            fh.write(json.dumps(rec) + "\n")
    write_blind(blind, "# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n",
                [(drawn[i]["id"], *texts[str(i)]) for i in order])
    print(f"{len(drawn)} pairs; sample {sample_path}; blind file {blind}", file=sys.stderr)


def fragment_lines(src: Path, rec: dict, side: str) -> list[str]:
    """The source lines of a sampled pair's fragment ``side`` ("a" or "b"), cut from
    ``src/<project>/<path>`` by its line range; exits naming the file when it cannot be read."""
    f = rec[side]
    path = src / rec["project"] / f["path"]
    try:
        return path.read_text(encoding="utf-8").splitlines()[f["start_line"] - 1:f["end_line"]]
    except OSError as exc:
        sys.exit(f"{path}: cannot read ({exc.strerror})")


def blind(src: Path, out: Path, ids: str | None, old: bool = False) -> None:
    """Rebuild the judge's blind file from the committed sample and the source trees under ``src``.

    The fragments are cut from ``src/<project>/<path>`` by the sample's line ranges, in id order
    (the ids were shuffled when the sample was drawn). ``ids`` ("P000-P039") restricts the output
    to a range so the labelling can be split between judges. ``old``: the issue-8 sample, under
    neutral ``Q`` ids (see :func:`records`).
    """
    from twinspect._io import atomic_write

    recs = records(old)
    lo, hi = (ids.split("-") if ids else ("Q000", "Q999") if old else ("P000", "P999"))
    chosen = [r for r in sorted(recs, key=lambda r: r["id"]) if lo <= r["id"] <= hi]
    with atomic_write(out) as fh:
        fh.write("# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n")
        for rec in chosen:
            fh.write(f"## {rec['id']}\n\n")
            for side in ("a", "b"):
                lines = fragment_lines(src, rec, side)
                more = f"\n... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else ""
                fh.write(f"### {side.upper()}\n```\n" + "\n".join(lines[:MAX_LINES]) + more + "\n```\n\n")
    print(f"{len(chosen)} pairs; blind file {out}", file=sys.stderr)


def _strict_subset(src: Path, recs: dict[str, dict], labels: dict[str, dict]) -> str:
    """Which sampled pairs ``--verifier strict`` states too: each project under ``src`` scanned again with it
    (a pair is stated when listed, or its two fragments are members of one identical group), and the
    judge's labels of those pairs. The sample was drawn from the default's reports, so this is the
    strict model's precision on the part of the default's pairs it keeps, per the sample's strata."""
    from twinspect.code.clones import DetectConfig, scan
    from twinspect.code.evaluate import FoundPairs, report_view

    def side(f: dict) -> tuple[str, int, int]:
        return f["path"], f["start_line"], f["end_line"]

    kept: Counter = Counter()
    total: Counter = Counter()
    for project in sorted({r["project"] for r in recs.values()}):
        report = scan([src / project], DetectConfig(verifier_path="strict"), quiet=True)
        # what the report states: listed pairs, identical groups and group pairs, fragments named by their spans
        stated = FoundPairs.from_view(report_view(report), lambda s: (s.path, s.start_line, s.end_line)).stated()
        for rid, rec in recs.items():
            if rec["project"] == project and rid in labels:
                lab = labels[rid]["label"].strip()
                total[lab] += 1
                if stated(side(rec["a"]), side(rec["b"])):
                    kept[lab] += 1
    n = sum(kept.values())
    return (f"\n`--verifier strict` (fitted on BigCloneBench and on blind-labelled pairs of twelve Python, Java and C/C++ projects, never on these languages), the same "
            f"projects scanned again: it states {n} of the {sum(total.values())} sampled pairs — clone {kept['clone']}, "
            f"weak {kept['weak']}, not {kept['not']}: precision {100 * kept['clone'] / max(1, n):.1f} %, keeping "
            f"{kept['clone']} of the {total['clone']} judged clones ({100 * kept['clone'] / max(1, total['clone']):.1f} %).\n")


def score(old: bool = False, study: str = "issue15", strict_src: Path | None = None) -> None:
    from twinspect._io import atomic_write

    _, labels_path, report_path, _, title = STUDIES[study]
    recs = {r["id"]: r for r in records(old, study)}
    with (OLD_LABELS if old else labels_path).open(encoding="utf-8") as fh:
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
    title = "the issue-8 sample relabelled blind" if old else title
    text = (f"# Blind precision study (issue 15): {title}\n\n" + "\n".join(lines) + "\n\n"
            + f"Projects: {dict(sorted(by_project.items()))}. Unlabelled: {len(missing)}.\n")
    if study == "languages":  # T1-T3 precision per project (each project is one language)
        per: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for rid, rec in recs.items():
            if rid in labels and rec["type"] in ("T1", "T2", "T3"):
                per[(rec.get("language", "?"), rec["project"])][labels[rid]["label"].strip()] += 1
        rows = ["| language | project | pairs | clone | weak | not | precision (clone) |", "|---|---|---|---|---|---|---|"]
        for (lang, proj), c in sorted(per.items()):
            n = sum(c.values())
            rows.append(f"| {lang} | {proj} | {n} | {c['clone']} | {c['weak']} | {c['not']} | {100 * c['clone'] / n:.1f} % |")
        text += "\nT1–T3 by project:\n\n" + "\n".join(rows) + "\n"
        if strict_src is not None:
            text += _strict_subset(strict_src, recs, labels)
    if not old and study == "issue15" and SECOND.is_file():
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
    with atomic_write(OLD_REPORT if old else report_path) as fh:
        fh.write(_provenance.md_header(__file__) + text)


def write_blind(out: Path, title: str, entries: list[tuple[str, str, str]]) -> None:
    """The judge's file (atomically): ``title``, then each ``(id, code A, code B)`` in the given order, code only
    (``MAX_LINES`` lines each; also used by ``clones_sscd_false_pairs.py``)."""
    from twinspect._io import atomic_write

    with atomic_write(out) as fh:
        fh.write(title)
        for rid, a, b in entries:
            fh.write(f"## {rid}\n\n")
            for side, text in (("A", a), ("B", b)):
                lines = text.splitlines()
                more = f"\n... ({len(lines) - MAX_LINES} more lines)" if len(lines) > MAX_LINES else ""
                fh.write(f"### {side}\n```\n" + "\n".join(lines[:MAX_LINES]) + more + "\n```\n\n")


def sample_t4(src: Path, per_project: int, seed: int, blind_out: Path) -> None:
    """Draw the Type-4 sample: up to ``per_project`` T4 pairs of each project under ``src``.

    Each project folder is scanned as ``twinspect clones DIR -e semantic`` does (default settings
    otherwise). A T4 pair between two members of exact-duplicate (T1/T2) groups is listed once per
    member pair in the report; those copies show the judge the same code again, so the T4 pairs are
    first collapsed to one per pair of groups (the pair with the lowest fragment ids stands for the
    rest), and the draw is among these *distinct* T4 pairs, with a generator seeded by ``seed`` and
    the project's name (adding a project does not change the others' draws). The ids ``T000``...
    follow one shuffle (seed ``seed``) of the whole sample, and the blind file lists the pairs in
    id order, code only.
    """
    from twinspect._io import atomic_write
    from twinspect.code.clones import DetectConfig, scan

    records: list[dict] = []
    texts: list[tuple[str, str]] = []
    counts: list[str] = []
    for project in sorted(p for p in src.iterdir() if p.is_dir()):
        report = scan([project], DetectConfig(encoder="semantic"), quiet=True)
        parent = list(range(len(report.fragments)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for p in report.pairs:
            if p.type in ("T1", "T2"):
                parent[find(p.a)] = find(p.b)
        for g in report.identical_groups:
            for m in g["members"][1:]:
                parent[find(m)] = find(g["members"][0])
        t4 = [p for p in report.pairs if p.type == "T4"]
        distinct: dict[tuple[int, int], object] = {}
        for p in sorted(t4, key=lambda p: (p.a, p.b)):
            distinct.setdefault(tuple(sorted((find(p.a), find(p.b)))), p)
        keys = sorted(distinct)
        rng = random.Random(f"{seed}:{project.name}")
        drawn = sorted(rng.sample(keys, min(per_project, len(keys))))
        langs = Counter(report.fragments[i].language for i in range(len(report.fragments)))
        counts.append(f"{project.name}: {len(report.fragments)} fragments {dict(langs)}, "
                      f"{len(report.pairs)} pairs, T4 {len(t4)} ({len(keys)} distinct), drawn {len(drawn)}")
        print(counts[-1], file=sys.stderr)
        for key in drawn:
            p = distinct[key]
            fa, fb = report.fragments[p.a], report.fragments[p.b]
            records.append({"project": project.name, "type": p.type, "band": p.band,
                            "similarity": round(p.similarity, 4), "t3_similarity": p.t3_similarity,
                            "score": p.score, "a": _side(fa), "b": _side(fb),
                            "project_t4_pairs": len(t4), "project_t4_distinct": len(keys)})
            texts.append((fa.text, fb.text))
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    for n, i in enumerate(order):
        records[i]["id"] = f"T{n:03d}"
    with atomic_write(T4_SAMPLE) as fh:
        for i in order:
            fh.write(json.dumps(records[i]) + "\n")
    write_blind(blind_out, "# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n",
                 [(records[i]["id"], *texts[i]) for i in order])
    by_project = Counter(r["project"] for r in records)
    top = max(by_project.values(), default=0)
    print(f"{len(records)} pairs (largest project share {100 * top / max(len(records), 1):.1f} %); "
          f"sample {T4_SAMPLE}; blind file {blind_out}", file=sys.stderr)


def score_t4(labels_path: Path = T4_LABELS, report_path: Path = T4_REPORT) -> None:
    """Join the judge's T4 labels with the sample: precision (``clone`` only) per project and language.

    Besides the pooled precision of the sample, the overall line gives a project-weighted estimate
    (each project's precision weighted by its number of distinct T4 pairs), since projects are
    sampled at different rates.
    """
    from twinspect._io import atomic_write

    recs = {r["id"]: r for r in (json.loads(line) for line in T4_SAMPLE.read_text(encoding="utf-8").splitlines() if line)}
    with labels_path.open(encoding="utf-8") as fh:
        labels = {row["id"].strip(): row["label"].strip().lower() for row in csv.DictReader(fh)}
    unknown = sorted(i for i in labels if i not in recs)
    bad = sorted(i for i, lab in labels.items() if i in recs and lab not in ("clone", "weak", "not"))
    missing = sorted(set(recs) - set(labels))
    groups: dict[str, dict[str, Counter]] = {"project": defaultdict(Counter), "language": defaultdict(Counter)}
    total: Counter = Counter()
    for rid, rec in recs.items():
        lab = labels.get(rid)
        if lab not in ("clone", "weak", "not"):
            continue
        la, lb = rec["a"]["language"], rec["b"]["language"]
        groups["project"][rec["project"]][lab] += 1
        groups["language"][la if la == lb else f"{la}/{lb}"][lab] += 1
        total[lab] += 1

    def row(name: str, c: Counter, extra: str = "") -> str:
        n = sum(c.values())
        return (f"| {name} | {n} | {c['clone']} | {c['weak']} | {c['not']} | "
                f"{100 * c['clone'] / n:.1f} % | {100 * (c['clone'] + c['weak']) / n:.1f} % |{extra}")

    distinct = {r["project"]: r["project_t4_distinct"] for r in recs.values()}
    reported = {r["project"]: r["project_t4_pairs"] for r in recs.values()}
    head = "| {} | labelled | clone | weak | not | precision (clone) | clone or weak |"
    text = ("# Blind precision of Type-4 (semantic) clone pairs (`twinspect clones -e semantic`)\n\n"
            f"Sample `{T4_SAMPLE.name}` ({len(recs)} pairs), labels `{labels_path.name}` judged blind "
            "(code only). Precision counts `clone` only.\n\n")
    for kind in ("project", "language"):
        lines = [head.format(kind) + (" T4 pairs (distinct) |" if kind == "project" else ""),
                 "|---|---|---|---|---|---|---|" + ("---|" if kind == "project" else "")]
        for name, c in sorted(groups[kind].items()):
            extra = f" {reported[name]} ({distinct[name]}) |" if kind == "project" else ""
            lines.append(row(name, c, extra))
        if total:
            lines.append(row("all", total, " |" if kind == "project" else ""))
        text += "\n".join(lines) + "\n\n"
    weights = {p: distinct[p] for p in groups["project"]}
    if weights:
        est = sum(w * groups["project"][p]["clone"] / sum(groups["project"][p].values())
                  for p, w in weights.items()) / sum(weights.values())
        text += (f"Precision weighted by each project's distinct T4 pairs: {100 * est:.1f} % "
                 f"(pooled sample: {100 * total['clone'] / sum(total.values()):.1f} %).\n")
    text += f"Unlabelled: {len(missing)}. Ids not in the sample: {len(unknown)}. Other labels: {len(bad)}.\n"
    print(text)
    with atomic_write(report_path) as fh:
        fh.write(_provenance.md_header(__file__) + text)


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
    s.add_argument("--study", choices=sorted(STUDIES), default="issue15", help="which sample's files (see STUDIES)")
    b = sub.add_parser("blind")
    b.add_argument("--src", type=Path, required=True)
    b.add_argument("--ids", help="id range, e.g. P000-P039")
    b.add_argument("--blind", type=Path, default=Path("/tmp/twinspect_blind_pairs.md"))
    b.add_argument("--old", action="store_true", help="the issue-8 sample (neutral Q ids)")
    sc = sub.add_parser("score")
    sc.add_argument("--old", action="store_true", help="the issue-8 sample and its blind labels")
    sc.add_argument("--study", choices=sorted(STUDIES), default="issue15", help="which sample's files (see STUDIES)")
    sc.add_argument("--strict-src", type=Path, help="with --study languages: the project folders, to score "
                    "the sampled pairs --verifier strict states too")
    t = sub.add_parser("sample-t4", help="draw the Type-4 (-e semantic) sample and its blind file")
    t.add_argument("--src", type=Path, required=True)
    t.add_argument("--per-project", type=int, default=10)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--blind", type=Path, default=T4_BLIND)
    st = sub.add_parser("score-t4", help="precision of the Type-4 sample from the judge's labels")
    st.add_argument("--labels", type=Path, default=T4_LABELS)
    st.add_argument("--out", type=Path, default=T4_REPORT)
    args = ap.parse_args()
    if args.cmd == "sample-t4":
        sample_t4(args.src, args.per_project, args.seed, args.blind)
    elif args.cmd == "score-t4":
        score_t4(args.labels, args.out)
    elif args.cmd == "sample":
        sample(args.src, args.per_band, args.mt3, args.per_exact, args.seed, args.blind, args.study)
    elif args.cmd == "blind":
        blind(args.src, args.blind, args.ids, args.old)
    else:
        score(args.old, args.study, args.strict_src)


if __name__ == "__main__":
    main()
