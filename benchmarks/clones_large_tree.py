"""`twinspect clones` on issue 23's large tree: wall time, peak memory and stage timings, cold and after a one-file edit.

The tree is the ``site-packages`` that ``benchmarks/large_corpus.py`` builds (42,739 files, 13.3 MLOC). It
is copied once (hard links are not used: the edit must not touch the venv) to a scratch directory, then:

1. **cold**: ``twinspect clones TREE -f json --workers 2 --cache CACHE`` with default detection settings
   (Type-3 verifier on, ``--index auto``), under GNU time (wall, the driver process's peak RSS);
2. **one file edited**: a function of one file gets a renamed copy appended (a new clone pair), and the
   same command runs again with the parse checkpoint of step 1 (only that file is parsed again).

Each run's report gives the stage timings (``stats.timings``), the index used and its measured recall,
and the counts. Results: ``benchmarks/results/clones_large_tree.{md,json}``.

Usage::

    benchmarks/clones_large_tree.py                 # needs benchmarks/large_corpus.py's tree
    benchmarks/clones_large_tree.py --tree DIR      # any other tree
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _provenance  # noqa: E402  (sibling module: the results files' provenance header)
import _timing  # noqa: E402  (sibling module: GNU time runs)

RESULTS = Path(__file__).resolve().parent / "results"
TWINSPECT = Path(sys.executable).with_name("twinspect")
DEFAULT_TREE = Path.home() / ".cache/twinspect-bench/large-corpus/venv/lib/python3.11/site-packages"
STAGES = ("mine", "normalize", "encode", "tokens", "range_search", "token_overlap", "alignment", "verify",
          "classes", "detect", "subfunction", "total")


def run(tree: Path, out: Path, cache: Path, timeout_s: float) -> dict:
    """One scan under GNU time; returns wall seconds, driver peak RSS (MiB) and the report's stats."""
    cmd = [str(TWINSPECT), "clones", str(tree), "-f", "json", "-o", str(out), "--workers", "2", "--cache", str(cache)]
    proc, wall, peak = _timing.gnu_time(cmd, timeout_s)
    if proc.returncode != 0:
        sys.exit(f"twinspect failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return summarise(json.loads(out.read_text())["stats"], wall, peak)


def summarise(stats: dict, wall_s: float, peak_mib: float | None) -> dict:
    """The fields of one run kept in the results: wall seconds, driver peak RSS (MiB) and report stats."""
    keep = ("files_parsed", "fragments", "representatives", "candidate_pairs", "verified", "pairs", "pairs_by_type",
            "classes", "index", "index_requested", "index_recall", "index_recall_queries", "parse_cache",
            "total_lines", "duplicated_lines_pct", "timings")
    return {"wall_s": round(wall_s, 1), "peak_mib": None if peak_mib is None else round(peak_mib),
            **{k: stats.get(k) for k in keep}}


def edit_one_file(tree: Path) -> str:
    """Append a renamed copy of one function of a mid-sized Python file; returns the file's relative path."""
    for path in sorted(tree.rglob("*.py")):
        text = path.read_text(errors="replace")
        start = text.find("\ndef ")
        if start < 0 or not 5_000 < len(text) < 50_000:
            continue
        end = text.find("\ndef ", start + 1)
        body = text[start:end if end > 0 else len(text)]
        if body.count("\n") < 12:
            continue
        name = body.split("(", 1)[0].split()[-1]
        path.write_text(text + "\n" + body.replace(f"def {name}(", f"def {name}_edited_copy(", 1) + "\n")
        return str(path.relative_to(tree))
    raise SystemExit("no Python file with a function of 12+ lines to edit")


def write_results(out: Path, tree_src: Path, argv: list[str] | None, cold: dict, edited: str | None,
                  warm: dict | None, note: str = "") -> None:
    """Write ``out``.md / .json: the cold run and (when measured) the run after a one-file edit."""
    payload = {"provenance": _provenance.info(__file__, argv), "tree": str(tree_src), "edited_file": edited,
               "cold": cold, "after_one_file_edit": warm}
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".json"), "w") as fh:
        json.dump(payload, fh, indent=1)
    rows = [("cold (parse checkpoint empty)", cold)]
    if warm is not None:
        rows.append((f"after editing `{edited}`", warm))
    md = [f"Tree: a copy of `{tree_src}` ({cold['files_parsed']:,} files parsed, {cold['total_lines'] or 0:,} lines, "
          f"{cold['fragments']:,} fragments, {cold['representatives']:,} representatives). Command: `twinspect "
          "clones TREE -f json -o R --workers 2 --cache C` (default detection: verifier, `--index auto`). "
          "Peak RSS is the driver process's (GNU time `%M`); the two parse/overlap worker processes come on top.", "",
          "| run | wall s | peak RSS MiB | index (recall) | candidate pairs | clone pairs | parse cache |",
          "|---|---:|---:|---|---:|---:|---|"]
    for name, r in rows:
        rec = f"{r['index']} ({r['index_recall']:.3f} on {r['index_recall_queries']} queries)" \
            if isinstance(r.get("index_recall"), float) else str(r["index"])
        pc = r.get("parse_cache") or {}
        md.append(f"| {name} | {r['wall_s']} | {r['peak_mib']} | {rec} | {r['candidate_pairs']:,} | {r['pairs']:,} | "
                  f"{pc.get('hits', 0):,} read back, {pc.get('parsed', 0):,} parsed |")
    md += ["", "Stage timings, seconds (`stats.timings`; `token_overlap` runs beside `range_search`):", "",
           "| stage | " + " | ".join(name for name, _ in rows) + " |", "|---|" + "---:|" * len(rows)]
    for st in STAGES:
        md.append(f"| {st} | " + " | ".join(f"{(r['timings'] or {}).get(st, 0):.1f}" for _, r in rows) + " |")
    md += ["", "Targets (issue 23): the ≈ 9-MLOC tree in ≤ 5 min and ≤ 4 GiB; an index update plus report "
           "≤ 30 s after a one-file change."]
    if warm is None:
        md += ["", f"**Not measured: the one-file-edit run.** {note}"]
    with open(out.with_suffix(".md"), "w") as fh:
        fh.write(_provenance.md_header(__file__, argv) + "\n".join(md) + "\n")
    print(f"wrote {out.with_suffix('.md')}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run (default 3600)")
    ap.add_argument("--out", type=Path, default=RESULTS / "clones_large_tree", help="output stem (.md, .json)")
    ap.add_argument("--cold-only", action="store_true", help="measure the cold run only (no one-file-edit run)")
    args = ap.parse_args(argv)
    if not args.tree.is_dir():
        sys.exit(f"{args.tree}: no such tree; run benchmarks/large_corpus.py first")
    with tempfile.TemporaryDirectory(prefix="twinspect-large-") as tmp:
        tree, cache, report = Path(tmp) / "tree", Path(tmp) / "cache", Path(tmp) / "report.json"
        t = time.perf_counter()
        shutil.copytree(args.tree, tree, symlinks=True)
        copy_s = time.perf_counter() - t
        print(f"copied the tree in {copy_s:.0f} s; cold run...", file=sys.stderr)
        cold = run(tree, report, cache, args.timeout)
        print(f"cold: {cold['wall_s']} s, {cold['peak_mib']} MiB", file=sys.stderr)
        # the cold run's results are written at once: a later failure or timeout does not lose them
        write_results(args.out, args.tree, argv, cold, None, None,
                      note="Run with `--cold-only`." if args.cold_only else "The edit run did not finish.")
        if args.cold_only:
            return
        print("one-file edit run...", file=sys.stderr)
        edited = edit_one_file(tree)
        warm = run(tree, report, cache, args.timeout)
        print(f"after the edit: {warm['wall_s']} s, {warm['peak_mib']} MiB", file=sys.stderr)
    write_results(args.out, args.tree, argv, cold, edited, warm)


if __name__ == "__main__":
    main()
