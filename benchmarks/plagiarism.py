"""Source-code plagiarism at file granularity: twinspect and copydetect on ConPlag.

What it measures
    ConPlag (Slobodkin & Sadovnikov, 2023; https://arxiv.org/abs/2303.10763) holds pairs of Java
    submissions to the same Codeforces problem, labelled plagiarised (1) or not (0). For each labelled
    pair, each tool says whether it *links* the two files:

    * copydetect (winnowing fingerprints; ``CopyDetector`` over the whole folder, every file against
      every other): a pair's score is the larger of its two directional similarities (the share of one
      file's tokens found in the other), and its report flags a pair when that score exceeds its display
      threshold (default 0.33). Two thresholds are reported: the default, and the lowest threshold that
      links ≤ 5 % of the unrelated labelled pairs of the *tune* split (see below), applied unchanged to
      the *test* split.
    * twinspect: ``twinspect clones <folder> --granularity file --format json -o <file>`` when the CLI
      accepts ``--granularity``, and for comparison ``--granularity function --min-lines 1`` (every
      method a fragment); without ``--granularity``, function granularity with ``--min-lines 1`` and
      with the default ``--min-lines 6``, stated in the results. A pair of files is linked when the
      report states a pair between fragments of the two files (a listed pair, two members of one
      ``identical_groups`` entry, or a cross pair of a ``group_pairs`` entry); the pair's similarity
      is the highest such pair's similarity. At file granularity twinspect compares whole programs with
      JPlag's Greedy String Tiling (``twinspect/code/tiling.py``): the reported similarity is the tiling's
      ``avg`` (``2·coverage / (|A| + |B|)``), and a pair is linked at ``avg ≥ tiling.THRESHOLD``, a
      constant chosen once on version 2's *tune* split (the same rule as copydetect's: ≤ 5 % of the
      unrelated tune pairs) and shipped. Nothing of twinspect is tuned by this script.
    * twinspect's tiling score of *every* labelled pair (a child process running the measured code tiles
      each labelled pair directly, without the candidate index), so that the threshold rule can be
      applied per version as for copydetect (reported as "this version's tune threshold") and a
      ROC-AUC computed; the shipped constant is named next to it.
    * where the measured code leaves a program's unused functions out before tiling
      (``--unused-code``, default ``drop``: ``twinspect/code/unused.py``), also the file-granularity run
      with ``--unused-code keep`` and the ROC-AUC of the whole files' tiling scores, so the step's effect
      is read in the same run.

    Reported per tool: % of plagiarised pairs linked, % of unrelated (non-plagiarised) labelled pairs
    linked, on all unique pairs, on the test split and on the tune split, and on the test split's
    plagiarised pairs per disguise level (the test CSV's ``notes`` give Faidhi & Robinson levels L1–L6,
    or ``EM`` for exact copies; the train and validation CSVs carry no levels). The brief's targets:
    ≥ 95 % of plagiarised pairs linked with ≤ 5 % of unrelated pairs linked, and ≥ 50 % of the pairs
    whose disguise changes statements or control structures (L5 program statements, L6 control logic).
    Both tools run as subprocesses of this script, on the same files, in the same run; wall time and
    peak RSS (``os.wait4``) are recorded.

Splits
    The data set's train/validation/test CSVs share pairs (116 of the 137 test rows of version 2 are
    also train or validation rows). Pairs are deduplicated; *test* = the pairs of ``test.csv``, *tune* =
    every other labelled pair. Thresholds are chosen on *tune* only: copydetect's here, twinspect's
    tiling threshold once (version 2) and shipped as a constant.

Data
    The ConPlag CSVs as published in https://github.com/FahadEbrahim/SCPD_FSE, folder ``dataset/``:
    ``version_1`` (raw submissions) and ``version_2`` (template-free: shared competitive-programming
    templates removed), each ``{train,validation,test}.csv`` with columns ``filename_1, filename_2,
    code_1, code_2, labels, notes``. Get them with ``git clone https://github.com/FahadEbrahim/SCPD_FSE``
    and pass ``--data SCPD_FSE/dataset`` (the repository root works too, and so does a bare/mirror git
    directory of it, read with ``git show``). Nothing is copied into this repository: the submissions
    are written to a temporary folder, one ``<id>.java`` per submission, and deleted afterwards. A CSV
    that is absent (a partial mirror) is skipped and named in the results.

Options
    ``--data PATH`` (required), ``--versions 2,1``, ``--twinspect-arg ARG`` (repeatable extra CLI
    arguments), ``--max-unrelated 0.05`` (copydetect threshold rule), ``--out STEM`` (default
    ``benchmarks/results/plagiarism``; ``.md`` and ``.json`` are added; written atomically; the markdown's
    hand-written section between ``<!-- by-eye:start -->`` and ``<!-- by-eye:end -->`` is kept), ``--keep
    DIR`` (keep the corpus and reports), ``--working-tree`` (run the working tree's twinspect; by default
    HEAD's ``twinspect/`` is exported with ``git archive`` and put first on PYTHONPATH, so the measured
    code is exactly the named commit even while others edit the working tree). Run from the repository
    root::

        nice -n 10 .venv/bin/python benchmarks/plagiarism.py --data ../SCPD_FSE/dataset
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clones_speed_jscpd import (  # noqa: E402  (sibling benchmark module: shared helpers)
    BY_EYE_END,
    BY_EYE_START,
    cli_accepts,
    machine_info,
    run_measured,
    stated_pairs,
    tool_version,
    twinspect_bin,
    twinspect_env,
    write_atomic,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SPLITS = ("train", "validation", "test")
LEVELS = ("EM", "L1", "L2", "L3", "L4", "L5", "L6")
LEVEL_NAMES = {"EM": "exact copy", "L1": "comments/layout", "L2": "identifiers", "L3": "declaration order",
               "L4": "modules (functions)", "L5": "program statements", "L6": "control logic"}


# --------------------------------------------------------------------------------------------- data


def _read_csv_text(data: Path, version: str, split: str) -> str | None:
    """Text of ``version_<v>/<split>.csv`` under ``data`` (folder, repo root or git directory), or None."""
    for base in (data, data / "dataset"):
        f = base / f"version_{version}" / f"{split}.csv"
        if f.is_file():
            return f.read_text(encoding="utf-8")
    if (data / "HEAD").is_file() and (data / "objects").is_dir():  # a bare / mirror git directory
        r = subprocess.run(["git", "--git-dir", str(data), "show", f"HEAD:dataset/version_{version}/{split}.csv"],
                           capture_output=True)
        if r.returncode == 0:
            return r.stdout.decode("utf-8")
    return None


def _levels(note: str) -> list[str]:
    note = note.strip()
    lv = sorted(set(re.findall(r"L([0-6])", note)))
    return ["EM"] if note == "EM" else [f"L{x}" for x in lv]


def load_version(data: Path, version: str) -> dict:
    """Unique labelled pairs of one version, with splits, notes, levels, and one code text per id."""
    csv.field_size_limit(1 << 30)
    code: dict[str, str] = {}
    variants = 0
    pairs: dict[frozenset, dict] = {}
    present, absent = [], []
    for split in SPLITS:
        text = _read_csv_text(data, version, split)
        if text is None:
            absent.append(split)
            continue
        present.append(split)
        for row in csv.DictReader(text.splitlines(keepends=True)):
            a, b = row["filename_1"].strip(), row["filename_2"].strip()
            for i, c in ((a, row["code_1"]), (b, row["code_2"])):
                if i not in code:
                    code[i] = c
                elif code[i] != c:
                    variants += 1
            key = frozenset((a, b))
            p = pairs.setdefault(key, {"a": a, "b": b, "label": int(row["labels"]), "splits": [], "notes": []})
            if int(row["labels"]) != p["label"]:
                p["label_conflict"] = True
            p["splits"].append(split)
            note = (row.get("notes") or "").strip()
            if note and note.lower() not in ("plagiarised", "non-plagiarised", "plagiarized", "non-plagiarized"):
                p["notes"].append(note)
    for p in pairs.values():
        p["levels"] = sorted({lv for n in p["notes"] for lv in _levels(n)}, key=LEVELS.index)
        p["test"] = "test" in p["splits"]
    return {"version": version, "splits_present": present, "splits_absent": absent, "code": code,
            "code_variants": variants, "pairs": list(pairs.values())}


def safe_name(i: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", i) + ".java"


# ------------------------------------------------------------------------------------------- tools


def copydetect_child(folder: Path, pairs_file: Path, out: Path) -> None:
    """Run copydetect's CopyDetector over ``folder`` (all pairs) and write the labelled pairs' scores."""
    from copydetect import CopyDetector, __version__

    det = CopyDetector(test_dirs=[str(folder)], extensions=["java"], silent=True, autoopen=False,
                       out_file=str(out.with_suffix(".html")))
    det.run()
    idx = {Path(f).name: k for k, f in enumerate(det.test_files)}
    ref = {Path(f).name: k for k, f in enumerate(det.ref_files)}
    scores = {}
    for a, b in json.loads(pairs_file.read_text()):
        if a in idx and b in ref:
            s_ab = det.similarity_matrix[idx[a], ref[b]]
            scores[f"{a}|{b}"] = [float(s_ab[0]), float(s_ab[1]), int(det.token_overlap_matrix[idx[a], ref[b]])]
    out.write_text(json.dumps({"version": __version__, "files": len(det.test_files),
                               "fingerprinted": len(det.file_data), "scores": scores}))


def tiling_child(folder: Path, pairs_file: Path, out: Path) -> None:
    """Score every labelled pair with twinspect's tiling (the measured code: run with its PYTHONPATH).

    Files are mined and base code found exactly as ``twinspect clones --granularity file`` does; each
    labelled pair is tiled (no candidate index), so pairs below the shipped threshold get a score too.
    """
    from twinspect.code import tiling
    from twinspect.code.clones import DetectConfig
    from twinspect.code.fragments import mine

    cfg = DetectConfig(granularity="file")
    frags, _ = mine([str(folder)], granularity="file", min_lines=cfg.min_lines, quiet=True)
    frags = sorted(frags, key=lambda f: (f.path, f.start_line, f.end_line, f.name))
    idx = {Path(f.path).name: k for k, f in enumerate(frags)}
    labelled = [(a, b) for a, b in json.loads(pairs_file.read_text()) if a in idx and b in idx]
    # the programs as the default compares them (unused functions left out, where the code has that step),
    # and, for comparison, the whole files
    prune = getattr(tiling, "without_unused_functions", None)
    policy = getattr(cfg, "unused_code", None)
    programs, unused = prune(frags, policy) if prune is not None and policy is not None else (frags, None)

    def tile(progs):
        base = tiling.program_base_lines(progs, cfg.base_code)
        tiled, stats = tiling.tile_files(progs, base=base, pairs=[(idx[a], idx[b]) for a, b in labelled])
        return base, stats, {f"{a}|{b}": [t.avg, t.max, t.coverage, t.len_a, t.len_b] for (a, b), t in zip(labelled, tiled)}

    base, stats, scores = tile(programs)
    whole = tile(frags)[2] if unused is not None and unused["unused_functions"] else scores
    out.write_text(json.dumps({"min_match": tiling.MIN_MATCH, "threshold": tiling.THRESHOLD, "measure": tiling.MEASURE,
                               "candidate_dice": tiling.CANDIDATE_DICE, "files": len(frags), "base_lines": len(base),
                               "unused": unused, "stats": stats, "scores": scores,
                               "scores_whole_files": whole if unused is not None else None}))


def twinspect_links(report: Path) -> tuple[dict, dict]:
    """{frozenset(file names): (best similarity, type, verifier score)} of the file pairs the report links
    (a stated pair between fragments of the two files: listed, identical group, or group pair), and stats."""
    r = json.loads(report.read_text())
    path = {f["id"]: Path(f["path"]).name for f in r["fragments"]}
    links: dict[frozenset, tuple] = {}
    for (a, b), p in stated_pairs(r).items():
        fa, fb = path[a], path[b]
        if fa == fb:
            continue
        k = frozenset((fa, fb))
        sim = p["similarity"] if p["similarity"] is not None else -1.0
        if k not in links or sim > links[k][0]:
            links[k] = (sim, p["type"], p["score"])
    st = r.get("stats", {})
    return links, {"fragments": len(r["fragments"]), "pairs": len(r["pairs"]),
                   "identical_groups": len(r.get("identical_groups", [])), "group_pairs": len(r.get("group_pairs", [])),
                   "files_parsed": st.get("files_parsed"), "files_with_fragments": len(set(path.values())),
                   "granularity": r.get("config", {}).get("granularity"), "decision": r.get("config", {}).get("decision")}


# ----------------------------------------------------------------------------------------- scoring


def rates(pairs: list[dict], linked) -> dict:
    pos = [p for p in pairs if p["label"] == 1]
    neg = [p for p in pairs if p["label"] == 0]
    lp = sum(1 for p in pos if linked(p))
    ln = sum(1 for p in neg if linked(p))
    return {"plagiarised": len(pos), "plagiarised_linked": lp, "plag_pct": 100 * lp / len(pos) if pos else None,
            "unrelated": len(neg), "unrelated_linked": ln, "unrel_pct": 100 * ln / len(neg) if neg else None}


def choose_threshold(pairs: list[dict], max_unrelated: float, score=lambda p: p["copydetect"]["score"]) -> float:
    """Lowest score threshold t (pair linked when score > t) linking ≤ max_unrelated of the unrelated pairs."""
    neg = sorted((score(p) for p in pairs if p["label"] == 0), reverse=True)
    allowed = int(max_unrelated * len(neg))  # at most this many negatives may exceed t
    if not neg:
        return 0.0
    return neg[allowed] if allowed < len(neg) else 0.0


def auc(pairs: list[dict], key) -> float | None:
    pos = [key(p) for p in pairs if p["label"] == 1]
    neg = [key(p) for p in pairs if p["label"] == 0]
    if not pos or not neg:
        return None
    wins = sum((x > y) + 0.5 * (x == y) for x in pos for y in neg)
    return wins / (len(pos) * len(neg))


def evaluate_version(ver: dict, workdir: Path, tw_args: list[str], granularity_ok: bool, max_unrel: float,
                     tw_env: dict) -> dict:
    v = ver["version"]
    folder = workdir / f"v{v}" / "files"
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for i, c in ver["code"].items():
        names[i] = safe_name(i)
        (folder / names[i]).write_text(c, encoding="utf-8")
    if len(set(names.values())) != len(names):
        sys.exit(f"version {v}: two submission ids map to one file name")
    pairs = ver["pairs"]
    for p in pairs:
        p["file_a"], p["file_b"] = names[p["a"]], names[p["b"]]

    # copydetect, all pairs of the folder, in a child process
    pf = workdir / f"v{v}" / "pairs.json"
    pf.write_text(json.dumps([[p["file_a"], p["file_b"]] for p in pairs]))
    cd_out = workdir / f"v{v}" / "copydetect.json"
    cd_run = run_measured([sys.executable, __file__, "--_copydetect", str(folder), str(pf), str(cd_out)],
                          workdir / f"v{v}" / "copydetect.log")
    if cd_run["exit"] != 0:
        sys.exit(f"copydetect failed: {cd_run['output_tail'][-800:]}")
    cd = json.loads(cd_out.read_text())
    if cd["files"] != len(names):
        sys.exit(f"copydetect read {cd['files']} files of {len(names)}")
    for p in pairs:
        s = cd["scores"].get(f"{p['file_a']}|{p['file_b']}")
        if s is None:
            sys.exit(f"copydetect gave no score for {p['file_a']} / {p['file_b']}")
        p["copydetect"] = {"sim_a": round(s[0], 4), "sim_b": round(s[1], 4), "score": round(max(s[0], s[1]), 4),
                           "overlap_tokens": s[2]}

    # twinspect's tiling score of every labelled pair (the measured code, in a child process)
    tl_out = workdir / f"v{v}" / "tiling.json"
    tl_run = run_measured([sys.executable, __file__, "--_tiling", str(folder), str(pf), str(tl_out)],
                          workdir / f"v{v}" / "tiling.log", env=tw_env)
    tl = None
    if tl_run["exit"] == 0:
        tl = json.loads(tl_out.read_text())
        for p in pairs:
            s = tl["scores"].get(f"{p['file_a']}|{p['file_b']}")
            p["tiling"] = None if s is None else {"avg": round(s[0], 4), "max": round(s[1], 4), "coverage": s[2],
                                                  "tokens_a": s[3], "tokens_b": s[4]}
            w = (tl.get("scores_whole_files") or {}).get(f"{p['file_a']}|{p['file_b']}")
            if w is not None and tl.get("unused") is not None:
                p["tiling_whole_files"] = {"avg": round(w[0], 4), "max": round(w[1], 4)}
    else:
        print(f"NOTE: no tiling module at this commit ({tl_run['output_tail'][-200:]})", file=sys.stderr)

    # twinspect: the file-granularity run (or its function-granularity fallback), and for comparison
    # function granularity with --min-lines 1 (every method; when file granularity exists) or with the
    # default --min-lines 6, which leaves out the 1-5-line methods (constructors, getters; in the fallback)
    if granularity_ok:
        configs = [("twinspect --granularity file", ["--granularity", "file"]),
                   ("twinspect, functions, --min-lines 1", ["--granularity", "function", "--min-lines", "1"])]
        if tl is not None and tl.get("unused") is not None:  # the code leaves unused functions out: whole files too
            configs.insert(1, ("twinspect --granularity file --unused-code keep",
                               ["--granularity", "file", "--unused-code", "keep"]))
    else:
        configs = [("twinspect, functions, --min-lines 1", ["--min-lines", "1"]),
                   ("twinspect, functions, --min-lines 6 (default)", [])]
    tw_info = {}
    for k, (label, extra) in enumerate(configs):
        cmd = [twinspect_bin(), "clones", str(folder), "--format", "json"] + extra + tw_args
        report = workdir / f"v{v}" / f"twinspect-{k}.json"
        run = run_measured(cmd + ["-o", str(report)], workdir / f"v{v}" / f"twinspect-{k}.log", env=tw_env)
        if run["exit"] != 0:
            sys.exit(f"twinspect failed: {run['output_tail'][-800:]}")
        links, stats = twinspect_links(report)
        if not stats["files_parsed"]:
            sys.exit("twinspect parsed no file")
        shown = ["twinspect"] + [("<corpus>" if c == str(folder) else c) for c in cmd[1:]]
        tw_info[label] = {"command": shown, "stats": stats, **{x: run[x] for x in (
            "seconds", "maxrss_mib", "tree_peak_rss_sum_mib", "tree_cpu_seconds_sampled")}}
        for p in pairs:
            hit = links.get(frozenset((p["file_a"], p["file_b"])))
            p.setdefault("tw", {})[label] = {
                "linked": hit is not None, "similarity": None if hit is None or hit[0] < 0 else round(hit[0], 4),
                "type": None if hit is None else hit[1],
                "verifier_score": None if hit is None or hit[2] is None else round(float(hit[2]), 4)}

    tune = [p for p in pairs if not p["test"]]
    test = [p for p in pairs if p["test"]]
    t_cd = choose_threshold(tune, max_unrel) if tune else None
    t95 = None
    pos_tune = sorted(p["copydetect"]["score"] for p in tune if p["label"] == 1)
    if pos_tune:  # highest threshold still linking ≥ 95 % of tune's plagiarised pairs (score > t)
        k = int(len(pos_tune) * 0.05)  # this many may fall at or below t
        t95 = pos_tune[k] - 1e-9 if k < len(pos_tune) else 0.0
    subsets = {"all": pairs, "test": test, "tune": tune}
    tools = {label: (lambda p, label=label: p["tw"][label]["linked"]) for label, _ in configs}
    tools["copydetect, default threshold (score > 0.33)"] = lambda p: p["copydetect"]["score"] > 0.33
    if t_cd is not None:
        tools[f"copydetect, threshold from tune: ≤ {max_unrel:.0%} unrelated (score > {t_cd:.4f})"] = \
            lambda p: p["copydetect"]["score"] > t_cd
    if t95 is not None:
        tools[f"copydetect, threshold from tune: ≥ 95 % plagiarised (score > {t95:.4f})"] = \
            lambda p: p["copydetect"]["score"] > t95
    t_tl = None
    if tl is not None and tune:
        def tl_avg(p):
            return p["tiling"]["avg"] if p.get("tiling") else 0.0
        t_tl = choose_threshold(tune, max_unrel, tl_avg)
        tools[f"twinspect tiling avg, this version's tune threshold (avg > {t_tl:.4f}; shipped: ≥ "
              f"{tl['threshold']})"] = lambda p: tl_avg(p) > t_tl
    table = {tool: {name: rates(sub, fn) for name, sub in subsets.items() if sub} for tool, fn in tools.items()}
    # disguise levels: test's plagiarised pairs
    plag_test = [p for p in test if p["label"] == 1]
    groups = {f"{lv} ({LEVEL_NAMES[lv]})": [p for p in plag_test if lv in p["levels"]] for lv in LEVELS}
    groups["L5 or L6 (statements or control structures)"] = [p for p in plag_test
                                                              if {"L5", "L6"} & set(p["levels"])]
    groups["no level given"] = [p for p in plag_test if not p["levels"]]
    by_level = {tool: {g: {"pairs": len(ps), "linked": sum(1 for p in ps if fn(p))} for g, ps in groups.items()}
                for tool, fn in tools.items()}
    aucs = {"copydetect score": auc(pairs, lambda p: p["copydetect"]["score"])}
    if tl is not None:
        aucs["twinspect tiling avg (every labelled pair tiled)"] = auc(
            pairs, lambda p: p["tiling"]["avg"] if p.get("tiling") else 0.0)
        aucs["twinspect tiling max (every labelled pair tiled)"] = auc(
            pairs, lambda p: p["tiling"]["max"] if p.get("tiling") else 0.0)
        if tl.get("unused") is not None:
            aucs["twinspect tiling avg, whole files (--unused-code keep)"] = auc(
                pairs, lambda p: p["tiling_whole_files"]["avg"] if p.get("tiling_whole_files") else 0.0)
    for label, _ in configs:
        aucs[f"{label} similarity (0 when not linked)"] = auc(pairs, lambda p, label=label: p["tw"][label]["similarity"] or 0.0)
    return {
        "version": v, "splits_present": ver["splits_present"], "splits_absent": ver["splits_absent"],
        "files": len(names), "code_variants_ignored": ver["code_variants"],
        "pairs": len(pairs), "label_conflicts": sum(1 for p in pairs if p.get("label_conflict")),
        "test_pairs": len(test), "tune_pairs": len(tune), "copydetect_threshold": t_cd,
        "copydetect_threshold_95": t95,
        "tiling": None if tl is None else {k: tl[k] for k in ("min_match", "threshold", "measure", "candidate_dice",
                                                                "files", "base_lines")} | {"tune_threshold": t_tl,
                                                                                           "unused": tl.get("unused")},
        "copydetect_version": cd["version"], "copydetect_fingerprinted": cd["fingerprinted"],
        "copydetect_run": {k: cd_run[k] for k in ("seconds", "maxrss_mib", "tree_peak_rss_sum_mib",
                                                  "tree_cpu_seconds_sampled")}, "twinspect_runs": tw_info,
        "rates": table, "by_level": by_level, "auc": aucs,
        "pair_list": [{k: p.get(k) for k in ("a", "b", "label", "splits", "levels", "notes", "copydetect", "tiling",
                                             "tiling_whole_files", "tw")}
                      for p in pairs],
    }


# ------------------------------------------------------------------------------------------ report


def _p(x):
    return "n/a" if x is None else f"{x:.1f}"


def render_md(res: dict, old_md: str | None) -> str:
    m, L = res["machine"], []
    L.append("# Plagiarism at file granularity — twinspect and copydetect on ConPlag\n")
    L.append(f"twinspect commit **{res['twinspect_commit']}** ({res['versions']['twinspect']}; code run: "
             f"{res['measured_code']}), copydetect "
             f"{res['versions']['copydetect']}, measured {res['date']} by `benchmarks/plagiarism.py` "
             f"(`{' '.join(res['argv'])}`).\n")
    L.append(f"Machine: {m['cpu']}, {m['nproc']} usable cores (nproc), {m['mem_gib']} GiB RAM; load average "
             f"(1/5/15 min) {res['load_before']} before and {res['load_after']} after (shared machine). "
             f"Python {m['python']}.\n")
    if res["granularity_file"]:
        L.append("twinspect ran with `--granularity file` (each file one fragment; a file pair is linked when the two "
                 "files are reported as a pair); for comparison also at function granularity with `--min-lines 1` "
                 "(linked when any two of their functions are reported as a pair). Where the measured code has "
                 "`twinspect/code/tiling.py`, file granularity is JPlag's Greedy String Tiling, and every labelled "
                 "pair is also tiled on its own to get its score (rows \"twinspect tiling avg\").\n")
    else:
        L.append("**`twinspect clones` at this commit does not accept `--granularity`: file granularity was not "
                 "available. twinspect ran at function granularity with `--min-lines 1` (every method a fragment); "
                 "a file pair is linked when any two of their methods are reported as a pair.**\n")
    L.append("Data: ConPlag as published in FahadEbrahim/SCPD_FSE `dataset/` (version 1 raw submissions, version 2 "
             "template-free). Pairs are deduplicated across the CSVs; *test* = pairs of `test.csv` (the only split "
             "whose notes give disguise levels), *tune* = all other pairs. Thresholds are chosen on *tune* only, "
             f"as the lowest that links ≤ {res['max_unrelated'] * 100:.0f} % of tune's unrelated pairs: copydetect's "
             "here, per version; twinspect's tiling threshold once, on version 2, shipped as a constant. "
             "\"Unrelated\" = labelled non-plagiarised: two solutions of the same problem, so they share a lot by "
             "construction.\n")
    for v in res["versions_evaluated"]:
        L.append(f"## Version {v['version']} ({'template-free' if v['version'] == '2' else 'raw'})\n")
        L.append(f"{v['files']} submissions, {v['pairs']} unique labelled pairs ({v['test_pairs']} test, "
                 f"{v['tune_pairs']} tune); CSVs read: {', '.join(v['splits_present'])}"
                 + (f"; **absent: {', '.join(v['splits_absent'])}**" if v["splits_absent"] else "")
                 + f". copydetect {v['copydetect_version']} (all {v['files'] * (v['files'] - 1) // 2:,} file pairs, "
                 f"{v['copydetect_fingerprinted']} files fingerprinted): {v['copydetect_run']['seconds']:.1f} s, "
                 f"{v['copydetect_run']['maxrss_mib']:.0f} MiB peak RSS (wait4).\n")
        for label, t in v["twinspect_runs"].items():
            L.append(f"- {label}: `{' '.join(t['command'])}` → {t['stats']['fragments']} fragments in "
                     f"{t['stats']['files_with_fragments']} of {v['files']} files, {t['stats']['pairs']} pairs, "
                     f"{t['stats']['identical_groups']} identical groups; {t['seconds']:.1f} s, {t['maxrss_mib']:.0f} MiB "
                     f"peak RSS (wait4; {t['tree_peak_rss_sum_mib']:.0f} MiB summed over its process tree, parse "
                     "workers included)")
        if v.get("tiling"):
            tg = v["tiling"]
            L.append(f"- tiling: min match {tg['min_match']} tokens, measure {tg['measure']}, shipped threshold "
                     f"{tg['threshold']}, candidate window Dice ≥ {tg['candidate_dice']}; {tg['base_lines']} base-code "
                     f"lines; this version's tune threshold (≤ {res['max_unrelated'] * 100:.0f} % unrelated): "
                     f"avg > {tg['tune_threshold']:.4f}")
            if tg.get("unused"):
                u = tg["unused"]
                L.append(f"- unused code ({u['unused_code']}): {u['programs_analysed']} of {tg['files']} programs have a "
                         f"`main` and were analysed; {u['unused_functions']} unused functions ({u['unused_lines']} lines) "
                         "left out of the comparison")
        L.append("")
        L.append("| tool | subset | plagiarised linked | % | unrelated linked | % | target met (≥ 95 % / ≤ 5 %) |")
        L.append("|---|---|---|---|---|---|---|")
        for tool, per in v["rates"].items():
            for sub, r in per.items():
                ok = (r["plag_pct"] is not None and r["unrel_pct"] is not None and r["plag_pct"] >= 95
                      and r["unrel_pct"] <= 5)
                L.append(f"| {tool} | {sub} | {r['plagiarised_linked']}/{r['plagiarised']} | {_p(r['plag_pct'])} | "
                         f"{r['unrelated_linked']}/{r['unrelated']} | {_p(r['unrel_pct'])} | {'yes' if ok else 'NO'} |")
        L.append("")
        L.append("ROC-AUC over all pairs: " + "; ".join(f"{k} {_p(None if x is None else 100 * x)} %"
                                                       for k, x in v["auc"].items()) + ".\n")
        L.append("Test split, plagiarised pairs by disguise level (a pair counts under every level its note names):\n")
        tools = list(v["by_level"])
        L.append("| disguise level | pairs | " + " | ".join(tools) + " |")
        L.append("|---|---|" + "---|" * len(tools))
        for g in next(iter(v["by_level"].values())):
            n = v["by_level"][tools[0]][g]["pairs"]
            cells = [f"{v['by_level'][t][g]['linked']}/{n}" for t in tools]
            L.append(f"| {g} | {n} | " + " | ".join(cells) + " |")
        L.append("")
        def q(xs):
            return "none" if not xs else f"min {xs[0]:.3f}, median {xs[len(xs) // 2]:.3f}, max {xs[-1]:.3f}"
        for label in v["twinspect_runs"]:
            pos = sorted(p["tw"][label]["similarity"] for p in v["pair_list"]
                         if p["tw"][label]["similarity"] is not None and p["label"] == 1)
            neg = sorted(p["tw"][label]["similarity"] for p in v["pair_list"]
                         if p["tw"][label]["similarity"] is not None and p["label"] == 0)
            what = "tiling avg similarity" if v.get("tiling") and "file" in label else "cosine similarity"
            L.append(f"{label}: {what} of the linked labelled pairs (best fragment pair) — plagiarised {len(pos)} "
                     f"({q(pos)}); unrelated {len(neg)} ({q(neg)}). Each pair's value is in the JSON (`pair_list`).\n")
    by_eye = None
    if old_md and BY_EYE_START in old_md and BY_EYE_END in old_md:
        by_eye = old_md[old_md.index(BY_EYE_START): old_md.index(BY_EYE_END) + len(BY_EYE_END)]
    L.append("## Read by eye\n")
    L.append(by_eye or f"{BY_EYE_START}\n(not yet written for this run)\n{BY_EYE_END}")
    L.append("")
    return "\n".join(L)


# -------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--_copydetect":
        copydetect_child(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
        return
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--_tiling":
        tiling_child(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True,
                    help="SCPD_FSE's dataset/ folder (or the repository root, or a bare git directory of it)")
    ap.add_argument("--versions", default="2,1", help="data set versions to evaluate (default 2,1)")
    ap.add_argument("--twinspect-arg", action="append", default=[], help="extra twinspect CLI argument (repeatable)")
    ap.add_argument("--max-unrelated", type=float, default=0.05, help="copydetect threshold rule on the tune split")
    ap.add_argument("--keep", type=Path, default=None, help="keep the corpus and reports in this folder")
    ap.add_argument("--working-tree", action="store_true",
                    help="measure the working tree's twinspect (editable install) instead of HEAD's committed code")
    ap.add_argument("--out", type=Path, default=RESULTS / "plagiarism", help="output stem (.md/.json added)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    data = args.data.resolve()
    if not data.exists():
        ap.error(f"--data {data} does not exist (git clone https://github.com/FahadEbrahim/SCPD_FSE)")
    workdir = Path(tempfile.mkdtemp(prefix="twinspect-plag-")) if args.keep is None else args.keep.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tw_env, measured_code, commit = twinspect_env(workdir, args.working_tree)
    gran = cli_accepts("--granularity", tw_env)
    if not gran:
        print("NOTE: `twinspect clones` does not accept --granularity at this commit: file granularity is not "
              "available; falling back to function granularity with --min-lines 1.", file=sys.stderr)
    from copydetect import __version__ as cd_version

    load_before = [round(x, 2) for x in os.getloadavg()]
    evaluated = []
    for v in [x.strip() for x in args.versions.split(",") if x.strip()]:
        ver = load_version(data, v)
        if not ver["pairs"]:
            print(f"version {v}: no CSV found under {data}; skipped", file=sys.stderr)
            continue
        res = evaluate_version(ver, workdir, args.twinspect_arg, gran, args.max_unrelated, tw_env)
        evaluated.append(res)
        for tool, per in res["rates"].items():
            r = per["all"]
            print(f"v{v} {tool}: plagiarised {r['plagiarised_linked']}/{r['plagiarised']}, "
                  f"unrelated {r['unrelated_linked']}/{r['unrelated']}", flush=True)
    if not evaluated:
        sys.exit(f"no ConPlag CSV found under {data}")
    res = {
        "twinspect_commit": commit, "measured_code": measured_code, "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv, "machine": machine_info(), "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "versions": {"twinspect": tool_version([twinspect_bin()], tw_env), "copydetect": cd_version},
        "granularity_file": gran, "max_unrelated": args.max_unrelated, "data": str(data),
        "versions_evaluated": evaluated, "total_seconds": time.perf_counter() - t0,
    }
    md_path, json_path = args.out.with_suffix(".md"), args.out.with_suffix(".json")
    old = md_path.read_text() if md_path.is_file() else None
    write_atomic(json_path, json.dumps({"provenance": _provenance.info(__file__), **res}, indent=1, default=str) + "\n")
    write_atomic(md_path, _provenance.md_header(__file__) + render_md(res, old))
    print(f"wrote {md_path} and {json_path} ({res['total_seconds']:.0f} s)")
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
