"""Benchmarks of ``twinspect clones`` on real clone benchmarks, plus speed and memory.

Sections (``--only sscd,bcb,poj,speed``; default all):

* ``sscd``  — SSCD Company-C (../shared/data/clones/sscd): pair recall / precision (70 % line overlap)
  and query-mode recall@1/@10 / MRR, beside SSCD's and SourcererCC's published numbers.
* ``bcb``   — BigCloneBench typed subset, held-out half by functionality: per-type *pair* recall
  (T1, T2, ST3, MT3, WT3/T4) and class-implied recall (pair or same clone class), each with its
  false-positive rate on the labelled non-clone pairs.
* ``poj``   — POJ-104 dev (12 problems × 500 programs): MAP@R (CodeXGLUE's formula).
* ``speed`` — fragments/s and LOC/s of parsing, of each encoder and each index, and peak RSS, each in
  its own subprocess, on this machine's Python standard library (site-packages and test folders
  excluded); the real ``twinspect clones`` CLI end to end; and jscpd on the same tree.

``--quick`` subsamples (BCB 25 % of each type's held-out labels, POJ-104 1,200 programs, a smaller neural
sample). Every table shows the measured value beside the target and the published numbers, and the
script prints its own total run time. Run from the repository root::

    .venv/bin/python benchmarks/clones.py --quick
    nice .venv/bin/python benchmarks/clones.py --only sscd,bcb,poj,speed
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / ".." / "shared" / "data" / "clones"
JSCPD_VERSION = "4.3.0"  # last JavaScript release; 5.x needs a native platform package
STDLIB_EXCLUDES = ("site-packages/**", "**/test/**", "**/tests/**", "**/idle_test/**")


def _md(rows, headers) -> str:
    from twinspect.reports.table import markdown_table

    return markdown_table(rows, headers)


def _pct(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(100.0 * float(x), 2)


def _ok(value, target, ge=True) -> str:
    if value is None:
        return "n/a"
    return "yes" if (value >= target if ge else value <= target) else "NO"


# ------------------------------------------------------------------------------------------- sscd


def bench_sscd(args) -> dict:
    from twinspect.code.clones import DetectConfig
    from twinspect.code.evaluate import run_sscd

    res = run_sscd(DATA / "sscd", DetectConfig(), quiet=True)
    r, p, pc = _pct(res["recall"]), _pct(res["precision"]), _pct(res["precision_copies"])
    rows = [
        ["recall (pairs)", r, "≥ 97", _ok(r, 97), "60.76", "86.08", "93.8"],
        ["precision (pairs touching a private fragment)", p, "≥ 95", _ok(p, 95), "84.21", "14.81", "95.0"],
        ["precision, copy-aware (identical copies of the original count)", pc, "", "", "", "", ""],
        ["query recall@1", _pct(res.get("recall@1")), "", "", "", "", ""],
        ["query recall@10", _pct(res.get("recall@10")), "", "", "", "", ""],
        ["query MRR", _pct(res.get("mrr")), "", "", "", "", ""],
    ]
    print(f"\n### SSCD Company-C — {res['found']}/{res['labels']} labelled pairs found, {res['fragments']} fragments, "
          f"{res['reported_pairs']} pairs reported, {res['seconds']:.1f} s\n")
    print(_md(rows, ["metric (%)", "twinspect", "target", "met", "SSCD paper", "SourcererCC", "TF-IDF ref."]))
    print(f"\nmissed labels (row index in dataset_c.csv): {res['missed']}")
    return res


# -------------------------------------------------------------------------------------------- bcb


def bench_bcb(args) -> dict:
    """Held-out BigCloneBench: the "test" half split by functionality (connected components of the
    labelled clone graph; :func:`~twinspect.code.evaluate.bcb_split`), so the defaults — swept on
    earlier runs over all of BCB — are at least reported on functionalities chosen apart from any
    new tuning ("tune" half). Pair recall (reported pairs only) beside class-implied recall (pair or
    same class), false positives counted the same way for each."""
    from twinspect.code.clones import DetectConfig
    from twinspect.code.evaluate import run_bcb

    fraction = 0.25 if args.quick else 1.0
    res = run_bcb(DATA / "bigclonebench", DetectConfig(), fraction=fraction, seed=0, split="test", quiet=True)
    rec, prec, lst = res["recall"], res["pair"]["recall"], res["listed"]["recall"]
    targets = {"T1": 100, "T2": 99, "ST3": 97, "MT3": 70, "WT3/T4": None}
    published = {"T1": "100", "T2": "97", "ST3": "96 (VST3) / 80 (ST3)", "MT3": "27", "WT3/T4": "1"}
    rows = []
    for t in ("T1", "T2", "ST3", "MT3", "WT3/T4"):
        v, c, li = _pct(prec.get(t)), _pct(rec.get(t)), _pct(lst.get(t))
        tg = targets[t]
        rows.append([t, v, li, c, "" if tg is None else f"≥ {tg}", "" if tg is None else _ok(v, tg), published[t],
                     f"{res['pair']['counts'][t][0]}/{res['counts'][t][1]}"])
    fp, lfp, cfp = _pct(res["pair"]["fp_rate"]), _pct(res["listed"]["fp_rate"]), _pct(res["fp_rate"])
    rows.append(["false positives (non-clone pairs)", fp, lfp, cfp, "≤ 2", _ok(fp, 2, ge=False), "",
                 f"{res['pair']['fp']}/{res['negatives']}"])
    scope = f"{int(fraction * 100)} % of each type's labels (quick)" if fraction < 1 else "all labels"
    print(f"\n### BigCloneBench typed subset, held-out half by functionality — {scope}; {res['functions']} functions "
          f"({res['unmined']} gave no fragment), {res['pairs']} pairs, {res['classes']} classes "
          f"(largest {res['largest_class']}), {res['identical_groups']} identical groups, {res['seconds']:.0f} s\n")
    print(_md(rows, ["type", "pair recall % (stated)", "listed pairs only %", "class-implied recall %",
                     "target (pair)", "met", "SSCD paper (full BCB)", "stated pairs found/total"]))
    print("\n*Stated* pairs: the pairs listed in the report plus every member pair of its `identical_groups` "
          "(exact-duplicate groups of more than `max_bucket_pairs` members, reported as one T1/T2 group "
          "instead of O(n²) pairs); *listed*: `pairs` only; *class-implied*: stated or same clone class.")
    return res


# -------------------------------------------------------------------------------------------- poj


def bench_poj(args) -> dict:
    from twinspect.code.clones import DetectConfig
    from twinspect.code.evaluate import run_poj104

    limit = 1200 if args.quick else None
    out = {}
    rows = []
    configs = [("lexical (default)", DetectConfig())]
    for name, cfg in configs:
        res = run_poj104(DATA / "poj104", cfg, limit=limit, seed=0)
        out[name] = res
        m = _pct(res["map_at_r"])
        rows.append([name, m, "≥ 60", _ok(m, 60), "55.12", "82.67", f"{res['seconds']:.0f}"])
    print(f"\n### POJ-104 dev — MAP@R, {res['programs']} programs, {res['labels']} problems\n")
    print(_md(rows, ["encoder", "MAP@R %", "target", "met", "Aroma", "CodeBERT", "seconds"]))
    return out


# ------------------------------------------------------------------------------------------ speed


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _child(stage: str, sample: int) -> dict:
    """One speed configuration, run in its own process (peak RSS = this process's ru_maxrss)."""
    import numpy as np

    from twinspect.code.fragments import mine

    t = time.perf_counter()
    frags, stats = mine([_stdlib()], exclude=STDLIB_EXCLUDES, min_lines=6, quiet=True)
    t_mine = time.perf_counter() - t
    loc = sum(f.loc for f in frags)
    out = {"stage": stage, "fragments": len(frags), "fragment_loc": loc, "files": stats.files_parsed}
    if stage == "parse":
        out["seconds"] = t_mine
        out["n"], out["loc"] = len(frags), loc
    elif stage in ("lexical", "neural"):
        from twinspect.code.encoders import make_encoder

        sub = frags if stage == "lexical" else [frags[i] for i in np.random.default_rng(0).choice(len(frags), sample, replace=False)]
        enc = make_encoder(stage)
        t = time.perf_counter()
        if hasattr(enc, "fit"):
            enc.fit(sub)
        enc.encode(sub)
        out["seconds"] = time.perf_counter() - t
        out["n"], out["loc"] = len(sub), sum(f.loc for f in sub)
    elif stage in ("exact", "hnsw"):
        from twinspect.code.encoders import make_encoder
        from twinspect.code.index import make_index

        enc = make_encoder("lexical")
        enc.fit(frags)
        vecs = enc.encode(frags)
        ids = np.arange(len(frags), dtype=np.int64)
        t = time.perf_counter()
        index = make_index(stage, vecs.shape[1], **({"seed": 0} if stage == "hnsw" else {}))
        index.add(ids, vecs)
        index.search(vecs, 15)
        out["seconds"] = time.perf_counter() - t
        out["n"], out["loc"] = len(frags), loc
    out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def _run_measured(cmd: list[str], **kw) -> tuple[float, float, int, str]:
    """Run a command; return (wall seconds, peak RSS MiB of that child, exit code, stderr tail)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    stdout, stderr = b"", b""
    # os.wait4 gives the rusage of this child alone
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    stdout = proc.stdout.read() if proc.stdout else b""
    stderr = proc.stderr.read() if proc.stderr else b""
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode, (stdout + stderr).decode(errors="replace")[-2000:]


def _jscpd(tmp: Path) -> list[str] | None:
    """Command prefix running jscpd JSCPD_VERSION (installed into a cache folder with npm if absent)."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    prefix = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "twinspect-bench" / f"jscpd-{JSCPD_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "jscpd"
    if not binary.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
                            f"jscpd@{JSCPD_VERSION}"], capture_output=True, text=True)
        if r.returncode != 0 or not binary.exists():
            print(f"(jscpd install failed: {r.stderr[-400:]})")
            return None
    return [str(binary)]


def bench_speed(args) -> dict:
    sample = 64 if args.quick else 256
    rows = []
    results: dict = {}
    for stage in ("parse", "lexical", "neural", "exact", "hnsw"):
        wall, rss, code, text = _run_measured([sys.executable, __file__, "--_child", stage, "--_sample", str(sample)],
                                              cwd=str(ROOT))
        if code != 0:
            rows.append([stage, None, None, None, None, f"failed: {text.strip().splitlines()[-1] if text.strip() else code}"])
            continue
        res = json.loads(text.strip().splitlines()[-1])
        results[stage] = res
        label = {"parse": "parse (tree-sitter mining)", "lexical": "lexical encoder (fit + encode)",
                 "neural": f"neural encoder (MiniLM, {res['n']}-fragment sample)",
                 "exact": "exact index (add + top-15 search, all)", "hnsw": "HNSW index (add + top-15 search, all)"}[stage]
        rows.append([label, res["n"], round(res["n"] / res["seconds"], 1), round(res["loc"] / res["seconds"]),
                     round(res["seconds"], 2), round(rss, 1)])
    with tempfile.TemporaryDirectory(prefix="twinspect-speed-") as tmpd:
        tmp = Path(tmpd)
        # Both tools scan the same copy of the tree: jscpd (fast-glob) silently skips every file below a
        # hidden directory such as ~/.pyenv, where this interpreter's stdlib usually lives — an earlier run
        # timed jscpd finding 0 files. The copy leaves site-packages and test folders out.
        tree = tmp / "stdlib"
        shutil.copytree(_stdlib(), tree, symlinks=True,
                        ignore=shutil.ignore_patterns("site-packages", "test", "tests", "idle_test", "__pycache__"))
        tw = shutil.which("twinspect", path=str(Path(sys.executable).parent)) or "twinspect"
        cmd = [tw, "clones", "scan", str(tree), "--format", "json", "-o", str(tmp / "report.json")]
        for x in STDLIB_EXCLUDES:
            cmd += ["--exclude", x]
        wall, rss, code, text = _run_measured(cmd)
        results["cli"] = {"seconds": wall, "maxrss_mib": rss, "exit": code}
        nfrag = None
        if code == 0:
            rep = json.loads((tmp / "report.json").read_text())
            nfrag = len(rep["fragments"])
            results["cli"].update(fragments=nfrag, pairs=len(rep["pairs"]), classes=len(rep["classes"]))
        rows.append(["`twinspect clones` CLI, default settings (json to a file)", nfrag,
                     round(nfrag / wall, 1) if nfrag else None, None, round(wall, 2), round(rss, 1)])
        jscpd = _jscpd(tmp)
        if jscpd is not None:
            ignore = ",".join(f"**/{x}" for x in STDLIB_EXCLUDES)
            jcmd = jscpd + [str(tree), "--format", "python", "--ignore", ignore, "--reporters", "json",
                            "--output", str(tmp / "jscpd"), "--silent"]
            jw, jr, jc, jt = _run_measured(jcmd)
            results["jscpd"] = {"seconds": jw, "maxrss_mib": jr, "exit": jc, "version": JSCPD_VERSION}
            jrep = tmp / "jscpd" / "jscpd-report.json"
            jstats = json.loads(jrep.read_text())["statistics"]["total"] if jrep.is_file() else {}
            results["jscpd"].update(sources=jstats.get("sources", 0), clones=jstats.get("clones"),
                                    lines=jstats.get("lines"))
            if not jstats.get("sources"):
                sys.exit(f"jscpd scanned no file of {tree}: its timing would mean nothing")
            rows.append([f"jscpd {JSCPD_VERSION} (same tree, python, json reporter; {jstats.get('sources')} files, "
                         f"{jstats.get('clones')} clones)", None, None, None, round(jw, 2), round(jr, 1)])
            if jc != 0:
                print(f"(jscpd exit {jc}: {jt[-300:]})")
    print(f"\n### Speed and memory — Python {sys.version.split()[0]} standard library "
          f"({results.get('parse', {}).get('files', '?')} files, {results.get('parse', {}).get('fragments', '?')} "
          f"functions ≥ 6 lines), {os.cpu_count()} cores\n")
    print(_md(rows, ["stage", "fragments", "fragments/s", "LOC/s", "seconds", "peak RSS MiB"]))
    cli, js = results.get("cli", {}), results.get("jscpd")
    if cli.get("exit") == 0:
        ratio = cli["seconds"] / js["seconds"] if js and js.get("exit") == 0 else None
        trows = [["wall time vs jscpd (same copy of the tree, same run)", None if ratio is None else f"{ratio:.2f}×", "≤ 10×",
                  "n/a" if ratio is None else _ok(ratio, 10, ge=False)],
                 ["peak memory (MiB)", round(cli["maxrss_mib"], 1), "≤ 2048", _ok(cli["maxrss_mib"], 2048, ge=False)]]
        print()
        print(_md(trows, ["target (default config, CLI)", "measured", "target", "met"]))
    return results


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="sscd,bcb,poj,speed", help="comma-separated sections: sscd,bcb,poj,speed")
    ap.add_argument("--quick", action="store_true", help="subsample BCB/POJ-104 and the neural speed sample")
    ap.add_argument("--json", type=Path, default=None, help="also write all results to this JSON file")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_sample", type=int, default=256, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print(json.dumps(_child(args._child, args._sample)))
        return
    t0 = time.perf_counter()
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - {"sscd", "bcb", "poj", "speed"}
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    out = {}
    # speed first: a child forked from a process that already holds the BCB/POJ data inherits that
    # process's peak RSS (Linux carries ru_maxrss across fork and exec), which would hide the real peaks
    for name, fn in (("speed", bench_speed), ("sscd", bench_sscd), ("bcb", bench_bcb), ("poj", bench_poj)):
        if name in sections:
            out[name] = fn(args)
    total = time.perf_counter() - t0
    print(f"\nTotal benchmark time: {total:.0f} s")
    if args.json:
        from twinspect._io import write_json

        write_json(args.json, {"provenance": _provenance.info(__file__), **json.loads(json.dumps(out, default=str))})


if __name__ == "__main__":
    main()
