"""Benchmark of a fuzz campaign's speed (issue 20): models per minute and seconds per tested model by where
they go, for two versions of the code side by side in one run (same budget, seeds, backends, RNG seed).

Each configuration ``LABEL=TREE:VARIANT:JOBS`` runs one campaign in its own process (this script with
``--one``), with the working directory and ``PYTHONPATH`` set to ``TREE`` so that the campaign and its
backend workers import twinspect from that tree: ``before`` is a ``git worktree`` of the older commit,
``after`` the repository itself (``.``). ``JOBS`` is the local executor's ``--jobs`` (give 1 for a tree
whose executor has no such option). Configurations run one after another, in the order given.

Measured per configuration, from the campaign's state and from a wrapper around the backend workers'
``Worker.run`` (the same wrapper for every tree):

* tested models per minute of search loop, and the loop's seconds per tested model split into the
  campaign's phases (``phase_s``: generate, check, coverage, save_model, execute, findings, state_write);
* ``execute`` split by system: each worker's wall seconds per tested model and its CPU seconds (user +
  system time of the worker process, all threads, from ``/proc/<pid>/stat``; less sensitive to machine
  load than wall time);
* layer type / pair / parameter coverage at the end of the loop, findings queued or bundled;
* whether the configurations generated the same models: the length of the common prefix of their
  ``models.jsonl`` (operator, parent, coverage gain and spec of every valid mutant) with the first
  configuration's of the same variant (or ``--ref``), and each configuration's cost on the models the
  two share. Generation does not depend on time, so code that changes only speed generates the same
  sequence, and a faster configuration simply gets further along it.

Writes ``OUT/NAME.json`` and ``OUT/NAME.md`` (provenance header; ``--heading FILE`` adds hand-written
text above the tables). Campaign directories go to ``--work`` and are not committed.

Usage: ``nice -n 10 .venv/bin/python benchmarks/fuzz_speed.py --budget 6m --seeds all --threshold 0.0001
--timeout 120 --config before=/tmp/base:memo:1 --config after=.:memo:1 --work /tmp/speed --name
fuzz_issue20_speed`` (``--summarise-only`` re-reads the campaigns in ``--work``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

PHASES = ("generate", "check", "coverage", "save_model", "execute", "findings", "state_write")
LOOP_MODEL = "current.keras"  # the file name a campaign's search loop saves each tested mutant under


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(a: argparse.Namespace) -> None:
    """Run one campaign in this process (twinspect imported from ``PYTHONPATH``) and write ``speed.json``."""
    from twinspect.dl.fuzz import seeds
    from twinspect.dl.fuzz.backends.worker import Worker
    from twinspect.dl.fuzz.campaign import Config, parse_budget, run_campaign

    records: list[dict] = []
    real_run = Worker.run

    def run(self, model, inputs, out):
        proc = self.proc if self.proc is not None and self.proc.poll() is None else None
        c0 = _cpu_s(proc.pid) if proc is not None else None
        t0 = time.perf_counter()
        r = real_run(self, model, inputs, out)
        wall = time.perf_counter() - t0
        c1 = _cpu_s(proc.pid) if proc is not None and self.proc is proc else None
        records.append({"model": Path(model).name, "system": self.system, "status": r.status, "wall_s": round(wall, 4),
                        "cpu_s": round(c1 - c0, 3) if c0 is not None and c1 is not None else None})
        return r

    Worker.run = run  # type: ignore[method-assign]
    names = seeds.ALL_SEEDS if a.seeds == "all" else tuple(a.seeds.split(","))
    cfg = Config(backends=a.backends.split(","), seeds=list(names), variant=a.variant, seed=0, timeout_s=a.timeout,
                 threshold=a.threshold)
    kwargs = {"jobs": a.jobs} if a.jobs != 1 else {}  # a tree from before --jobs has no such argument
    load0 = os.getloadavg()[0]
    run_campaign(a.campaign, parse_budget(a.budget), cfg, **kwargs)
    state = json.loads((Path(a.campaign) / "state.json").read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "twinspect"],
                           capture_output=True, text=True).stdout.strip()
    keep = ("models_generated", "models_valid", "models_tested", "elapsed_s", "phase_s", "system_s", "last_run",
            "coverage_over_time", "findings", "pending_findings", "startup_s", "seeding_s", "threshold")
    out = {"tree": os.getcwd(), "commit": commit + ("-dirty" if dirty else ""), "variant": a.variant, "jobs": a.jobs,
           "load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2), "runs": records,
           "state": {k: state.get(k) for k in keep}}
    (Path(a.campaign) / "speed.json").write_text(json.dumps(out, default=str))


def per_system(runs: list[dict], first: int | None = None) -> tuple[dict, dict, int]:
    """Worker wall and CPU seconds per tested model by system, over the search loop's runs (``runs`` records of
    ``speed.json``), or over its first ``first`` tested models; returns ``(wall, cpu, models)``."""
    loop_runs = [r for r in runs if r["model"] == LOOP_MODEL]
    systems = sorted({r["system"] for r in loop_runs})
    if first is not None:  # a loop model's runs are consecutive: one per system
        loop_runs = loop_runs[:first * len(systems)]
    n = max(len(loop_runs) // max(len(systems), 1), 1)
    wall = {s: round(sum(r["wall_s"] for r in loop_runs if r["system"] == s) / n, 3) for s in systems}
    cpu_known = {s: [r["cpu_s"] for r in loop_runs if r["system"] == s and r["cpu_s"] is not None] for s in systems}
    cpu = {s: round(sum(v) / len(v), 3) if v else None for s, v in cpu_known.items()}
    return wall, cpu, n


def summarise(label: str, d: dict) -> dict:
    """The numbers of one configuration's ``speed.json`` for the tables."""
    st = d["state"]
    n = max(int(st["models_tested"]), 1)
    loop = float(st["elapsed_s"])
    wall, cpu, _ = per_system(d["runs"])
    t, p, q = (st["coverage_over_time"] or [[0, 0, 0, 0]])[-1][1:4]
    return {"label": label, "variant": d["variant"], "jobs": d["jobs"], "commit": d["commit"], "loop_s": round(loop, 1),
            "tested": st["models_tested"], "generated": st["models_generated"], "valid": st["models_valid"],
            "tested_per_min": round(st["models_tested"] * 60 / max(loop, 1e-9), 2), "s_per_tested": round(loop / n, 2),
            "phase_per_tested": {k: round(float((st.get("phase_s") or {}).get(k, 0.0)) / n, 3) for k in PHASES},
            "wall_per_tested": wall, "cpu_per_tested": cpu,
            "coverage": {"layer_type": t, "layer_pair": p, "layer_param": q},
            "findings": len(st.get("findings") or []), "pending": len(st.get("pending_findings") or []),
            "load_start": d["load_start"], "load_end": d["load_end"]}


def common_prefix(a: Path, b: Path) -> tuple[int, int, int]:
    """(models in the common prefix, models in ``a``, models in ``b``) of two campaigns' ``models.jsonl``."""
    def log(p: Path) -> list[str]:
        rows = []
        for line in (p / "models.jsonl").read_text().splitlines():
            try:
                rows.append(json.dumps(json.loads(line), sort_keys=True))
            except ValueError:
                continue
        return rows
    la, lb = log(a), log(b)
    k = 0
    while k < min(len(la), len(lb)) and la[k] == lb[k]:
        k += 1
    return k, len(la), len(lb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", default=[], metavar="LABEL=TREE:VARIANT:JOBS",
                    help="A configuration to run (repeatable; the first of each variant is the reference of the "
                         "same-models check).")
    ap.add_argument("--ref", action="append", default=[], metavar="LABEL=REFLABEL",
                    help="Compare configuration LABEL with REFLABEL in the same-models checks (default: the first "
                         "configuration of its variant), e.g. for a second before/after pair in the same --work.")
    ap.add_argument("--budget", default="6m")
    ap.add_argument("--backends", default="keras-tensorflow,keras-jax,keras-torch,onnxruntime")
    ap.add_argument("--seeds", default="all", help="Seed models, or 'all' (the ten of the paper).")
    ap.add_argument("--threshold", type=float, default=1e-4, help="Fixed D_MAD threshold (no calibration runs).")
    ap.add_argument("--timeout", type=float, default=120.0, help="Per-model time limit of a backend, seconds.")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--name", default="fuzz_speed")
    ap.add_argument("--heading", default=None, metavar="FILE", help="Markdown text written above the tables.")
    ap.add_argument("--summarise-only", action="store_true")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--campaign", help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="memo", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        run_one(a)
        return
    work = Path(a.work).resolve()
    configs = []
    for c in a.config:
        label, sep, rest = c.partition("=")
        parts = rest.split(":")
        if not sep or len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < 1:
            print(f"error: --config {c!r}: expected LABEL=TREE:VARIANT:JOBS (JOBS >= 1)", file=sys.stderr)
            sys.exit(2)
        configs.append((label, Path(parts[0]).resolve(), parts[1], int(parts[2])))
    if not configs:
        print("error: give at least one --config LABEL=TREE:VARIANT:JOBS", file=sys.stderr)
        sys.exit(2)
    for label, tree, variant, jobs in configs:
        camp = work / label
        if a.summarise_only:
            continue
        if not (tree / "twinspect" / "__init__.py").is_file():
            print(f"error: --config {label}: {tree} holds no twinspect package", file=sys.stderr)
            sys.exit(2)
        camp.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--campaign", str(camp), "--variant", variant,
               "--jobs", str(jobs), "--budget", a.budget, "--backends", a.backends, "--seeds", a.seeds,
               "--threshold", str(a.threshold), "--timeout", str(a.timeout), "--work", str(work)]
        print(f"{label}: {variant}, jobs {jobs}, code from {tree}", flush=True)
        with open(work / f"{label}.log", "w") as log:
            subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    speed = {label: json.loads((work / label / "speed.json").read_text()) for label, *_ in configs}
    rows = [summarise(label, speed[label]) for label, *_ in configs]
    first: dict[str, str] = {}  # variant -> label of its first configuration
    refs = dict(x.partition("=")[::2] for x in a.ref)
    for r in rows:
        first.setdefault(r["variant"], r["label"])
        ref = refs.get(r["label"], first[r["variant"]])
        r["same_models_as_first"] = dict(zip(("common_prefix", "models", "first_models"),
                                             common_prefix(work / r["label"], work / ref)), first=ref)
    # the same models: each configuration's cost, and its variant's first configuration's, on the tested models
    # the two share (the common prefix of their model logs; every logged model of a campaign is tested unless
    # its save failed, which is counted in invalid_reasons)
    for r in rows:
        ref = r["same_models_as_first"]["first"]
        k = min(r["same_models_as_first"]["common_prefix"], r["tested"], next(x["tested"] for x in rows if x["label"] == ref))
        wall, cpu, n = per_system(speed[r["label"]]["runs"], k)
        rwall, rcpu, _ = per_system(speed[ref]["runs"], k)
        r["same_models"] = {"models": n if k else 0, "with": ref, "wall_per_tested": wall, "cpu_per_tested": cpu,
                            "ref_wall_per_tested": rwall, "ref_cpu_per_tested": rcpu}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    data = {"provenance": _provenance.info(__file__), "budget": a.budget, "backends": a.backends, "seeds": a.seeds,
            "threshold": a.threshold, "timeout_s": a.timeout, "configs": [c[:1] + (str(c[1]),) + c[2:] for c in configs],
            "rows": rows}
    (out / f"{a.name}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    systems = sorted({s for r in rows for s in r["wall_per_tested"]})
    lines = ["| configuration | commit | jobs | loop s | tested | tested / min | s / tested | layer type | layer pair | "
             "layer param | findings (queued) | same models as its reference (prefix / models) | load at start, end |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, same = r["coverage"], r["same_models_as_first"]
        lines.append(f"| {r['label']} ({r['variant']}) | {r['commit']} | {r['jobs']} | {r['loop_s']:.0f} | {r['tested']} | "
                     f"{r['tested_per_min']:.1f} | {r['s_per_tested']:.2f} | {c['layer_type']:.1%} | {c['layer_pair']:.1%} | "
                     f"{c['layer_param']:.1%} | {r['findings']} ({r['pending']}) | {same['common_prefix']} / {same['models']} | "
                     f"{r['load_start']}, {r['load_end']} |")
    lines += ["", "Seconds per tested model by loop phase (the campaign's `phase_s` ÷ tested models):", "",
              "| configuration | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    for r in rows:
        lines.append(f"| {r['label']} | " + " | ".join(f"{r['phase_per_tested'][k]:.2f}" for k in PHASES) + " |")
    lines += ["", "`execute` by system, per tested model: worker wall seconds / worker CPU seconds (all threads):", "",
              "| configuration | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for r in rows:
        cells = []
        for s in systems:
            w, cp = r["wall_per_tested"].get(s), r["cpu_per_tested"].get(s)
            cells.append("—" if w is None else f"{w:.2f} / {cp:.2f}" if cp is not None else f"{w:.2f} / ?")
        lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    lines += ["", "On the same models: `execute` per tested model on the tested models a configuration shares with its "
              "reference (`--ref`, default its variant's first configuration) (the common prefix of their `models.jsonl`), CPU seconds of each worker "
              "(all threads), this configuration / the reference; then all systems' wall and CPU seconds:", "",
              "| configuration | models shared with | " + " | ".join(f"{s} CPU" for s in systems)
              + " | all systems wall, this / reference | all systems CPU, this / reference |",
              "|---|---|" + "---|" * (len(systems) + 2)]

    def total(d: dict) -> float:
        return sum(v for v in d.values() if v is not None)

    for r in rows:
        sm = r["same_models"]
        cells = [f"{sm['cpu_per_tested'][s]:.2f} / {sm['ref_cpu_per_tested'][s]:.2f}"
                 if sm["cpu_per_tested"].get(s) is not None and sm["ref_cpu_per_tested"].get(s) is not None else "—"
                 for s in systems]
        lines.append(f"| {r['label']} | {sm['models']} of {sm['with']} | " + " | ".join(cells)
                     + f" | {total(sm['wall_per_tested']):.2f} / {total(sm['ref_wall_per_tested']):.2f}"
                     f" | {total(sm['cpu_per_tested']):.2f} / {total(sm['ref_cpu_per_tested']):.2f} |")
    heading = Path(a.heading).read_text(encoding="utf-8").strip() + "\n\n" if a.heading else ""
    (out / f"{a.name}.md").write_text(_provenance.md_header(__file__) + heading + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
