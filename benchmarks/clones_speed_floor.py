"""Where the CPU of `twinspect clones` goes on the standard library, against jscpd 5's whole run (issue 15).

Issue 15 asks for a stdlib scan within 3× jscpd 5.x's wall time. On this 2-core machine that is
about 3 s, i.e. at most about 6 CPU-seconds even if every stage used both cores all the time. This
script measures, on one copy of the tree (as ``clones_speed_jscpd.py`` copies it), in CPU seconds
(user + system, so a shared machine's load matters less than for wall times):

1. jscpd 5.3.3's whole run (``os.wait4`` rusage of the launcher and the native binary it waits for);
2. twinspect's whole default run (its process tree sampled in /proc, parse workers included);
3. twinspect's stages in one process and one thread (``--workers 1``, BLAS and OpenMP at one thread;
   the CLI run with every stage timer on process CPU time): ``stats.timings``. Candidate generation
   and the alignments are inside ``verify``; its two candidate sources run side by side in threads
   of the process, so their own timers would count each other and are not listed;
4. the two passes a tokenising detector makes over the files, each alone on process CPU time:
   tree-sitter parsing with the function query (:func:`twinspect.code.fragments.extract_file` per
   file, the files already read) and the regular-expression lexing of every fragment
   (:func:`twinspect.code.normalize.lex_with_lines`, as the parse workers run it).

Run from the repository root: ``.venv/bin/python benchmarks/clones_speed_floor.py [--out STEM]``
(about 1 minute; jscpd is installed into the benchmark cache on first use, see
``clones_speed_jscpd.py``). Writes ``STEM.md`` and ``STEM.json`` (default
``benchmarks/results/clones_speed_floor``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _provenance  # noqa: E402
from clones_speed_jscpd import copy_tree, install_jscpd, run_measured, twinspect_bin, write_atomic  # noqa: E402

JSCPD_VERSION = "5.3.3"

#: The CLI with every stage timer reading process CPU time (one process, one thread: CPU per stage).
_CPU_TIMERS = "import sys, time; time.perf_counter = time.process_time; from twinspect.cli import main; sys.argv[0] = 'twinspect'; main()"


#: The stage timers that do not overlap (``detect`` holds ``normalize`` to ``classes``; ``range_search`` and
#: ``token_overlap`` run side by side inside ``verify``, each timer counting the other thread's CPU too).
_STAGES = ("mine", "normalize", "encode", "verify", "alignment", "classes", "subfunction")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def passes(tree: Path) -> dict:
    """CPU seconds of tree-sitter parsing (with the function query) and of the fragments' lexing, this process."""
    from twinspect.code.files import discover
    from twinspect.code.fragments import extract_file, read_source
    from twinspect.code.normalize import lex_with_lines, strip_comments

    files, stats = discover([tree])
    texts = [(sf, read_source(sf, stats)) for sf in files]
    t = _cpu()
    frags = []
    for sf, text in texts:
        if text is not None:
            frags.extend(extract_file(text, sf.rel, sf.language, min_lines=6, stats=stats)[0])
    parse = _cpu() - t
    codes = [(strip_comments(f), f.language) for f in frags]
    t = _cpu()
    tokens = sum(len(lex_with_lines(c, lang)[0]) for c, lang in codes)
    lex = _cpu() - t
    return {"files": len(files), "fragments": len(frags), "tokens": tokens, "parse_cpu_s": parse, "lex_cpu_s": lex}


def stage_cpu(tree: Path, out: Path) -> dict:
    """``stats.timings`` of a one-process, one-thread CLI run whose timers read process CPU time."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    report = out / "stages.json"
    cmd = [sys.executable, "-c", _CPU_TIMERS, "clones", str(tree), "--workers", "1", "-f", "json", "-o", str(report), "-q"]
    subprocess.run(cmd, check=True, env=env)
    return json.loads(report.read_text())["stats"]["timings"]


def render(res: dict) -> str:
    j, tw, st, ps = res["jscpd"], res["twinspect"], res["stages_cpu_s"], res["passes"]
    base = j["cpu_seconds"]
    rows = [("jscpd 5.3.3, whole run", base), ("twinspect, whole default run (process tree)", tw["tree_cpu_seconds_sampled"]),
            ("twinspect, one process and one thread: its stage timers' total (start-up and report writing not in it)", st.get("total", 0.0))]
    listed = [k for k in _STAGES if k in st]
    rows += [(f"— stage `{k}`" + (" (inside `verify`)" if k == "alignment" else ""), st[k]) for k in listed]
    rows += [("tree-sitter parsing + function query, alone", ps["parse_cpu_s"]),
             ("regex lexing of every fragment, alone", ps["lex_cpu_s"]),
             ("parsing + lexing", ps["parse_cpu_s"] + ps["lex_cpu_s"])]
    lines = ["# Where `twinspect clones` spends its CPU on the stdlib, against jscpd 5's whole run", "",
             f"Tree: a copy of this Python's standard library ({ps['files']} files discovered, {ps['fragments']} function "
             f"fragments, {ps['tokens']:,} tokens), as `clones_speed_jscpd.py` copies it. CPU seconds are user + system.",
             f"Wall seconds of the two whole runs: jscpd {j['seconds']:.2f}, twinspect {tw['seconds']:.2f} "
             f"(1-min load {res['load'][0]} before, {res['load'][1]} after).", "",
             "| what | CPU s | × jscpd's whole run |", "|---|---:|---:|"]
    lines += [f"| {name} | {v:.2f} | {v / base:.1f}× |" for name, v in rows]
    lines += ["", "Stage timers of the one-thread run: `mine` is parsing and lexing in the process (no workers); "
              "`verify` holds the two candidate sources (the embedding range search and the token-overlap index, "
              "side by side in threads), the alignments (`alignment`, also listed alone) and the verifier.", "",
              f"Issue 15's target, a stdlib scan within 3× jscpd's wall time, leaves about {3 * j['seconds']:.1f} s of wall "
              f"time here, so at most {2 * 3 * j['seconds']:.1f} CPU-seconds with both cores busy throughout; "
              f"parsing and lexing alone take {ps['parse_cpu_s'] + ps['lex_cpu_s']:.1f}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results/clones_speed_floor", help="output stem (.md and .json)")
    args = ap.parse_args(argv)
    jscpd = install_jscpd(JSCPD_VERSION)
    load0 = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="tw-floor-") as tmp:
        work = Path(tmp)
        tree = work / "stdlib"
        copy_tree(Path(sysconfig.get_paths()["stdlib"]), tree)
        j = run_measured([str(jscpd), str(tree), "--format", "python", "--min-lines", "6", "--reporters", "json",
                          "--output", str(work / "jscpd")], work / "jscpd.log")
        if j["exit"] != 0:
            sys.exit(f"jscpd failed: {j['output_tail']}")
        tw = run_measured([twinspect_bin(), "clones", str(tree), "-f", "json", "-o", str(work / "tw.json"), "-q"], work / "tw.log")
        if tw["exit"] != 0:
            sys.exit(f"twinspect failed: {tw['output_tail']}")
        stages = stage_cpu(tree, work)
        ps = passes(tree)
    res = {"jscpd": {k: j[k] for k in ("seconds", "cpu_seconds", "maxrss_mib")},
           "twinspect": {k: tw[k] for k in ("seconds", "cpu_seconds", "tree_cpu_seconds_sampled")},
           "stages_cpu_s": stages, "passes": ps, "load": [load0, round(os.getloadavg()[0], 2)],
           "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = Path(args.out)
    write_atomic(out.with_suffix(".md"), _provenance.md_header(__file__) + render(res))
    write_atomic(out.with_suffix(".json"), json.dumps({"provenance": _provenance.info(__file__), **res}, indent=1) + "\n")
    print(render(res))


if __name__ == "__main__":
    main()
