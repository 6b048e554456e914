"""`twinspect clones --changed` (issue 23, item 5): its wall time after one-file edits, and how its pairs
compare with a full re-scan of the edited tree.

The tree is copied to a scratch directory (the edits must not touch the source), then:

1. **full scan** ``twinspect clones TREE --cache C -f json`` (saves the scan state in C);
2. for each of ``--edits`` seeded edits, one at a time (each undone, content and modification time,
   before the next): a Python file gets a copy of a top-level function of *another* file appended,
   renamed, and (every other edit) with one statement added, so the edit plants a cross-file clone
   pair; then
   * ``twinspect clones TREE --cache C --changed -f json`` (timed: wall of the whole command, start-up
     included), and
   * unless ``--no-reference``: a full re-scan of the edited tree (its own parse checkpoint, copied
     from C, so only the edited file is parsed again), whose pairs with a fragment in the edited file
     are the reference for the ``--changed`` report: pairs in both, pairs only in the re-scan
     (missed), pairs only in ``--changed`` (extra), and whether the planted pair is in each.

With ``--update`` the edits are commits in a row: none is undone, and each check runs with
``--changed --update-state``, so it is measured against the state the previous check left (the
full scan's, then folded forward). Each check must then see only its own file as changed; the
re-scan reference is the same.

Results: ``benchmarks/results/clones_changed.{md,json}`` (or ``--out``).

Usage::

    benchmarks/clones_changed.py --tree DIR [--edits 5] [--seed 0] [--update] [--no-reference] [--out STEM]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _provenance  # noqa: E402  (sibling module: the results files' provenance header)
import _timing  # noqa: E402  (sibling module: GNU time runs)

RESULTS = Path(__file__).resolve().parent / "results"
TWINSPECT = Path(sys.executable).with_name("twinspect")
_TOP_DEF = re.compile(r"^def (\w+)\(", re.M)


def run(args: list[str], out: Path, timeout_s: float) -> dict:
    """One ``twinspect clones`` command under GNU time: wall seconds, peak RSS (MiB) and the JSON report."""
    cmd = [str(TWINSPECT), "clones", *args, "-q", "-f", "json", "-o", str(out)]
    proc, wall, peak = _timing.gnu_time(cmd, timeout_s)
    if proc.returncode != 0:
        sys.exit(f"twinspect failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return {"wall_s": round(wall, 2), "peak_mib": None if peak is None else round(peak),
            "report": json.loads(out.read_text())}


def pair_keys(report: dict, touched: str | None = None) -> set[tuple]:
    """Pairs as ((path, start, end), (path, start, end), type), sides ordered; only those with a side in
    ``touched`` when given."""
    fr = report["fragments"]
    out = set()
    for p in report["pairs"]:
        a, b = fr[p["a"]], fr[p["b"]]
        ka, kb = (a["path"], a["start_line"], a["end_line"]), (b["path"], b["start_line"], b["end_line"])
        if touched is not None and touched not in (ka[0], kb[0]):
            continue
        out.add((*sorted([ka, kb]), p["type"]))
    return out


def group_keys(report: dict, touched: str) -> set[frozenset]:
    """The exact-duplicate groups (``identical_groups``) with a member in ``touched``, as sets of (path, start, end)."""
    fr = report["fragments"]
    out = set()
    for g in report.get("identical_groups", []):
        members = frozenset((fr[m]["path"], fr[m]["start_line"], fr[m]["end_line"]) for m in g["members"])
        if any(m[0] == touched for m in members):
            out.add(members)
    return out


def planted_found(report: dict, edit: dict) -> bool:
    """Whether the report pairs the planted copy with a fragment of the donor file: as a listed pair, or as
    two members of one exact-duplicate group (``identical_groups``: all their pairs are clones)."""
    fr = report["fragments"]

    def planted(i: int) -> bool:
        return fr[i]["path"] == edit["file"] and fr[i]["start_line"] == edit["planted_lines"][0]

    def donor(i: int) -> bool:
        return fr[i]["path"] == edit["donor"]

    if any((planted(p["a"]) and donor(p["b"])) or (planted(p["b"]) and donor(p["a"])) for p in report["pairs"]):
        return True
    return any(any(map(planted, g["members"])) and any(map(donor, g["members"]))
               for g in report.get("identical_groups", []))


def top_functions(path: Path) -> list[tuple[str, str]]:
    """(name, source) of the top-level functions of a Python file with 8-60 lines."""
    text = path.read_text(errors="replace")
    found = list(_TOP_DEF.finditer(text))
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        line_end = text.find("\n", m.end()) + 1 or end
        # the function ends at the next line starting in column 0 (a closing bracket of a signature excepted)
        nxt = re.search(r"^[^\s)\]}#]", text[line_end:end], re.M)
        lines = text[m.start(): line_end + nxt.start() if nxt else end].rstrip().split("\n")
        while lines and (not lines[-1].strip() or lines[-1].startswith("#")):  # comments after the function
            lines.pop()
        body = "\n".join(lines) + "\n"
        if 8 <= body.count("\n") <= 60:
            out.append((m.group(1), body))
    return out


def plant(rng: random.Random, files: list[Path], tree: Path, with_edit: bool) -> dict:
    """Append to one file a renamed copy of another file's function; returns what was done (and the undo data)."""
    for _ in range(10_000):
        target, donor = rng.sample(files, 2)
        funcs = top_functions(donor)
        if not funcs:
            continue
        name, body = rng.choice(funcs)
        copy = body.replace(f"def {name}(", f"def {name}_planted(", 1)
        if with_edit:  # one added statement, at the indentation of the first body line
            lines = copy.splitlines(keepends=True)
            first = next((i for i, ln in enumerate(lines) if i and ln.strip() and not ln.lstrip().startswith("#")
                          and ln[: len(ln) - len(ln.lstrip())]), None)
            if first is None:
                continue
            indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
            copy = "".join(lines[:first] + [f"{indent}_planted_marker = 1\n"] + lines[first:])
        old = target.read_bytes()
        new = old.decode("utf-8", "replace").rstrip() + "\n\n\n" + copy
        try:
            compile(new, str(target), "exec")
            compile(body, str(donor), "exec")
        except (SyntaxError, ValueError):
            continue
        st = target.stat()
        start = new.count("\n", 0, len(new) - len(copy)) + 1
        target.write_text(new)
        return {"file": str(target.relative_to(tree)), "donor": str(donor.relative_to(tree)), "function": name,
                "with_edit": with_edit, "planted_lines": [start, start + copy.count("\n") - 1],
                "_undo": (target, old, st.st_atime_ns, st.st_mtime_ns)}
    sys.exit("found no function to plant (top-level Python functions of 8-60 lines) in 10,000 tries")


def undo(edit: dict) -> None:
    """Restore the edited file's content and times (so the next check sees it unchanged)."""
    path, old, atime, mtime = edit.pop("_undo")
    path.write_bytes(old)
    os.utime(path, ns=(atime, mtime))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per command (default 3600)")
    ap.add_argument("--no-reference", action="store_true", help="time --changed only, no full re-scans")
    ap.add_argument("--reference-edits", type=int, default=None,
                    help="compare only the first N edits with a full re-scan (default: all)")
    ap.add_argument("--parse-cache", type=Path, default=None,
                    help="a parse checkpoint of the same tree to start from (its parse.sqlite is copied; the tree "
                         "copy keeps sizes and modification times, so its entries are hits): the full scan then "
                         "skips parsing")
    ap.add_argument("--update", action="store_true",
                    help="edits in a row (not undone), each check with --update-state")
    ap.add_argument("--out", type=Path, default=RESULTS / "clones_changed", help="output stem (.md, .json)")
    args = ap.parse_args(argv)
    if not args.tree.is_dir():
        sys.exit(f"{args.tree}: no such directory")
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="twinspect-changed-") as tmp:
        tree, cache, out = Path(tmp) / "tree", Path(tmp) / "cache", Path(tmp) / "r.json"
        shutil.copytree(args.tree, tree, symlinks=True)
        files = sorted(p for p in tree.rglob("*.py") if p.is_file() and not p.is_symlink())
        if args.parse_cache is not None:
            cache.mkdir()
            shutil.copy2(args.parse_cache / "parse.sqlite", cache / "parse.sqlite")
        full = run([str(tree), "--cache", str(cache)], out, args.timeout)
        st = full["report"]["stats"]
        print(f"full scan: {full['wall_s']} s, {full['peak_mib']} MiB, {st['fragments']} fragments", file=sys.stderr)
        for i in range(args.edits):
            edit = plant(rng, files, tree, with_edit=bool(i % 2))
            ch = run([str(tree), "--cache", str(cache), "--changed", *(["--update-state"] if args.update else [])],
                     out, args.timeout)
            got = pair_keys(ch["report"])
            row = {**{k: v for k, v in edit.items() if k != "_undo"}, "changed_wall_s": ch["wall_s"], "changed_peak_mib": ch["peak_mib"],
                   "changed_stats": ch["report"]["stats"].get("changed"), "changed_pairs": len(got),
                   "planted_found_changed": planted_found(ch["report"], edit)}
            if not args.no_reference and (args.reference_edits is None or i < args.reference_edits):
                ref_cache = Path(tmp) / "ref-cache"
                shutil.rmtree(ref_cache, ignore_errors=True)
                shutil.copytree(cache, ref_cache, ignore=shutil.ignore_patterns("scan-state"))
                ref = run([str(tree), "--cache", str(ref_cache)], out, args.timeout)
                want = pair_keys(ref["report"], edit["file"])
                row.update(reference_wall_s=ref["wall_s"], reference_pairs=len(want), both=len(got & want),
                           missed=sorted(map(list, want - got))[:20], extra=sorted(map(list, got - want))[:20],
                           n_missed=len(want - got), n_extra=len(got - want),
                           planted_found_reference=planted_found(ref["report"], edit),
                           identical_groups_equal=group_keys(ch["report"], edit["file"])
                           == group_keys(ref["report"], edit["file"]))
            if args.update:
                edit.pop("_undo")
            else:
                undo(edit)
            rows.append(row)
            print(f"edit {i}: {row['file']} --changed {row['changed_wall_s']} s, {row['changed_pairs']} pairs"
                  + (f"; re-scan {row['reference_pairs']} pairs, both {row['both']}" if "both" in row else ""),
                  file=sys.stderr)
    payload = {"provenance": _provenance.info(__file__, argv), "tree": str(args.tree),
               "full_scan": {"wall_s": full["wall_s"], "peak_mib": full["peak_mib"],
                             "parse_cache": st.get("parse_cache"), "timings": st.get("timings"),
                             **{k: st.get(k) for k in ("files_parsed", "fragments", "representatives", "pairs",
                                                       "total_lines")}},
               "edits": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".json"), "w") as fh:
        json.dump(payload, fh, indent=1)
    pc = st.get("parse_cache") or {}
    how = ("The edits are commits in a row: none is undone, and each is checked with `--changed --update-state` "
           "(measured against the state the previous check left) and (unless `--no-reference`) compared with a "
           "full re-scan of the tree as it then is." if args.update else
           "Each edit is checked with `--changed` and (unless `--no-reference`) compared with a full re-scan of "
           "the edited tree, then undone.")
    md = [f"Tree: a copy of `{args.tree}` ({st.get('files_parsed'):,} files parsed, {st.get('fragments'):,} "
          f"fragments). Full scan with `--cache`: {full['wall_s']} s (parse checkpoint: {pc.get('hits', 0):,} files "
          f"read back, {pc.get('parsed', 0):,} parsed), peak {full['peak_mib']} MiB. Each edit appends "
          "to one file a renamed copy of another file's function (odd edits: plus one added statement). " + how,
          "", "| # | edited file | donor | `--changed` s | peak MiB | files changed | retrieved | state update s | "
          "pairs | re-scan pairs | both | missed | extra | same identical groups | planted found (changed / re-scan) |",
          "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for i, r in enumerate(rows):
        ref = r.get("reference_pairs", "–")
        cs = r["changed_stats"] or {}
        upd = (cs.get("state_update") or {}).get("seconds", "–")
        md.append(f"| {i} | `{r['file']}` | `{r['donor']}` | {r['changed_wall_s']} | {r['changed_peak_mib']} | "
                  f"{cs.get('files_changed', 0) + cs.get('files_added', 0)} | "
                  f"{cs.get('fragments_retrieved')} | {upd} | {r['changed_pairs']} | {ref} | "
                  f"{r.get('both', '–')} | {r.get('n_missed', '–')} | {r.get('n_extra', '–')} | "
                  f"{'–' if 'identical_groups_equal' not in r else ('yes' if r['identical_groups_equal'] else 'no')} | "
                  f"{'yes' if r['planted_found_changed'] else 'no'} / "
                  f"{'–' if 'planted_found_reference' not in r else ('yes' if r['planted_found_reference'] else 'no')} |")
    md += ["", "Target (issue 23): an index update plus report ≤ 30 s after changing one file of the 9-MLOC tree."]
    with open(args.out.with_suffix(".md"), "w") as fh:
        fh.write(_provenance.md_header(__file__, argv) + "\n".join(md) + "\n")
    print(f"wrote {args.out.with_suffix('.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
