"""Campaign summaries: the JSON contract, a text table, HTML and a coverage-over-time PNG."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from twinspect.dl.fuzz import confirm, trackers
from twinspect.dl.fuzz.campaign import Campaign
from twinspect.dl.fuzz.coverage import Coverage


def summary(root: str | Path) -> dict:
    """The campaign summary (JSON contract of issue 11; extra fields allowed).

    Returns:
        ``{"elapsed_s", "models_generated", "models_valid", "models_tested", "models_per_hour",
        "coverage": {"layer_type"|"layer_pair"|"layer_param": {"covered", "total", "ratio"}},
        "coverage_over_time": [[seconds, type_ratio, pair_ratio, param_ratio]], "threshold",
        "findings": [{"id", "kind", "systems", "deviating", "all_differ", "signature", "dir", "layer",
        "tracker", "confirmed"}]
        (``systems``: the pair the finding was minimised on; ``deviating``: the system(s) that differed from
        an agreeing majority, else None; ``all_differ``: three or more systems all differed pairwise; absent in
        campaigns from before it existed; ``tracker``: the bundle's public-tracker verdict,
        :func:`twinspect.dl.fuzz.trackers.read`, None when unchecked; ``confirmed``: the bundle's fresh-process
        re-run, :func:`twinspect.dl.fuzz.confirm.read`, None when not run),
        "phase_s": {phase: seconds of the search loop (generate, check, coverage, save_model, execute,
        findings, state_write)}, "startup_s" (backend start-up before the clock), "findings_after_s"
        (minimising and bundling queued findings after the budget), "pending_findings" (still queued),
        "pool": {"size", "added", "evicted", "too_large", "not_clean"} (MEMO's model pool), ...}``.

    Raises:
        InputError: not a campaign directory, or a corrupt one.
    """
    st = Campaign.open(root).state
    el = float(st["elapsed_s"])
    return {
        "elapsed_s": round(el, 1), "seeding_s": st.get("seeding_s"), "variant": st["config"]["variant"], "backends": st["config"]["backends"],
        "skipped_backends": st["skipped_backends"], "models_generated": st["models_generated"],
        "models_valid": st["models_valid"], "models_invalid": st["models_invalid"],
        "models_tested": st["models_tested"],
        "models_per_hour": round(st["models_tested"] * 3600.0 / el, 1) if el > 0 else 0.0,
        "coverage": Coverage.from_json(st["coverage"]).summary(), "coverage_over_time": st["coverage_over_time"],
        "threshold": st["threshold"], "seed_distances": st["seed_distances"], "reduction": st["reduction"],
        "invalid_reasons": st["invalid_reasons"],
        "findings": [{**f, "duplicates": st["signatures"].get(f["signature"], 1),
                      "tracker": trackers.read(Path(root) / f["dir"]),
                      "confirmed": confirm.read(Path(root) / f["dir"])} for f in st["findings"]],
        "last_run": st.get("last_run"), "phase_s": st.get("phase_s", {}),
        "startup_s": st.get("startup_s"), "findings_after_s": st.get("findings_after_s", 0.0),
        "pending_findings": len(st.get("pending_findings") or []),
        "pool": {"size": len(st.get("pool") or {}), "added": st.get("pool_added", 0), "evicted": st.get("pool_evicted", 0),
                 "too_large": st.get("pool_too_large", 0), "not_clean": st.get("pool_not_clean", 0)},
    }


def incomplete_note(s: dict) -> str | None:
    """One line saying the campaign's last run did not end normally, or None when it did.

    A run records its budget when it starts and is marked complete when it ends normally
    (:meth:`~twinspect.dl.fuzz.campaign.Campaign.run`); a campaign written before that record
    existed has no ``last_run`` and gets None.
    """
    last = s.get("last_run")
    if not last or last.get("complete", True):
        return None
    limit = f"{last['budget_s']:.0f} s" + (f" / {last['max_models']} models" if last.get("max_models") else "")
    return (f"incomplete: the last run stopped after {last['loop_s']:.0f} s and {last['models']} models of its "
            f"{limit} (interrupted or crashed); resume with the same -o")


def coverage_points(s: dict, n: int = 8) -> list[list[float]]:
    """At most ``n`` evenly spaced rows of ``coverage_over_time`` (first and last always kept).

    Returns:
        ``[[seconds, type_ratio, pair_ratio, param_ratio], ...]``.
    """
    pts = s.get("coverage_over_time") or []
    if len(pts) <= n:
        return [list(p) for p in pts]
    step = (len(pts) - 1) / (n - 1)
    return [list(pts[round(i * step)]) for i in range(n)]


def _layer(f: dict) -> str:
    return f.get("layer") or "not localised"


def _systems(f: dict) -> str:
    """A finding's systems: the deviating one(s) against the others when a majority agreed (one faulty
    backend, :func:`twinspect.dl.fuzz.triage.split`), every system when they all differ pairwise
    (:func:`twinspect.dl.fuzz.triage.all_differ`), else the systems of its pair."""
    if f.get("deviating"):
        return f"{','.join(f['deviating'])} (against the others)"
    if f.get("all_differ"):
        return f"all differ (e.g. {','.join(f['systems'])})"
    return ",".join(f["systems"])


def _tracker(f: dict) -> str:
    """A finding's tracker verdict for a table cell: ``known <first link>``, ``related <link>``, ``not found``
    or ``unchecked``."""
    t = f.get("tracker")
    if not t:
        return "unchecked"
    return t["verdict"] + (f" {t['links'][0]}" if t.get("links") else "")


def _fresh(f: dict) -> str:
    """A finding's fresh-process re-run for a table cell: ``reproduces``, ``does not reproduce`` or ``unconfirmed``."""
    c = f.get("confirmed")
    if not c:
        return "unconfirmed"
    return ("reproduces" if c["reproduces"] else "does not reproduce") + (" (recorded)" if c.get("recorded") else "")


def tracker_counts(s: dict) -> dict[str, int]:
    """How many findings of a summary have each tracker verdict (``unchecked`` included, zeros left out)."""
    out: dict[str, int] = {}
    for f in s["findings"]:
        key = (f.get("tracker") or {}).get("verdict", "unchecked")
        out[key] = out.get(key, 0) + 1
    return out


def table(s: dict) -> str:
    """Plain-text rendering of a summary."""
    lines = [f"variant {s['variant']}  elapsed {s['elapsed_s']:.0f} s  models generated {s['models_generated']}  "
             f"valid {s['models_valid']}  tested {s['models_tested']}  ({s['models_per_hour']:.0f}/h)",
             f"D_MAD threshold {s['threshold']:.3g}" if s["threshold"] is not None else "D_MAD threshold -"]
    for k, v in s["coverage"].items():
        lines.append(f"  {k:<12} {v['covered']:>5} / {v['total']:<5} {v['ratio']:.1%}")
    if s["skipped_backends"]:
        lines.append("skipped backends: " + ", ".join(f"{k} ({v})" for k, v in s["skipped_backends"].items()))
    pts = coverage_points(s)
    if pts:
        lines.append("coverage over time (s: type / pair / param)")
        lines.extend(f"  {p[0]:>7.0f}  {p[1]:.1%} / {p[2]:.1%} / {p[3]:.1%}" for p in pts)
    counts = tracker_counts(s)
    lines.append(f"findings: {len(s['findings'])}" + (" (trackers: " + ", ".join(f"{v} {k}" for k, v in counts.items())
                                                       + ")" if s["findings"] else ""))
    for f in s["findings"]:
        lines.append(f"  {f['id']}  {f['kind']:<13} {_systems(f):<34} layer {_layer(f)}  "
                     f"x{f['duplicates']}  {f['dir']}  fresh run: {_fresh(f)}  tracker: {_tracker(f)}")
    cost = run_cost_line(s)
    if cost:
        lines.append(cost)
    note = incomplete_note(s)
    if note:
        lines.append(note)
    return "\n".join(lines)


def run_cost_line(s: dict) -> str | None:
    """One line with the last run's wall time split into search loop and overhead, or None when unrecorded.

    The overhead is everything outside the search loop: starting the executor (a local Ray instance and
    its actors with ``--executor ray``), backend start-up (worker processes, library imports and one tiny
    model each), seeding (reduction, threshold calibration; 0 when a resumed campaign was already seeded),
    minimising and bundling the findings queued during the loop, and shutting down.
    """
    last = s.get("last_run") or {}
    if "wall_s" not in last:
        return None
    return (f"last run ({last.get('executor', '?')} executor): wall {last['wall_s']:.0f} s = search loop "
            f"{last['loop_s']:.0f} s + overhead {last['overhead_s']:.0f} s (executor start "
            f"{last['executor_start_s']:.0f} s, backend start-up {float(last.get('startup_s') or 0):.0f} s, "
            f"seeding {float(last.get('seeding_s') or 0):.0f} s, findings after the budget "
            f"{float(last.get('findings_after_s') or 0):.0f} s"
            + (f", shutdown {float(last['executor_close_s']):.0f} s" if "executor_close_s" in last else "")
            + ")")


def to_html(s: dict) -> str:
    """A self-contained HTML page of a summary: run facts, coverage, coverage over time, findings."""
    esc = html.escape

    def tab(head: list[str], rows: Sequence[Sequence[object]]) -> str:
        th = "".join(f"<th>{esc(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{th}</tr>{body}</table>"

    thr = "-" if s["threshold"] is None else f"{s['threshold']:.3g}"
    facts = [["variant", s["variant"]], ["backends", ", ".join(s["backends"])],
             ["loop time", f"{s['elapsed_s']:.0f} s"], ["models generated / valid / tested",
                                                        f"{s['models_generated']} / {s['models_valid']} / {s['models_tested']}"],
             ["tested per hour", f"{s['models_per_hour']:.0f}"], ["D_MAD threshold", thr]]
    if s["skipped_backends"]:
        facts.append(["skipped backends", ", ".join(f"{k} ({v})" for k, v in s["skipped_backends"].items())])
    cost = run_cost_line(s)
    if cost:
        facts.append(["last run", cost])
    cov = [[k.replace("_", " "), v["covered"], v["total"], f"{v['ratio']:.1%}"] for k, v in s["coverage"].items()]
    over = [[f"{p[0]:.0f}", f"{p[1]:.1%}", f"{p[2]:.1%}", f"{p[3]:.1%}"] for p in coverage_points(s, 20)]
    finds = [[f["id"], f["kind"], _systems(f), _layer(f), f["duplicates"], f["signature"], f["dir"], _fresh(f), _tracker(f)]
             for f in s["findings"]]
    note = incomplete_note(s)
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>twinspect fuzz</title><style>"
            "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}.warn{color:#a00}</style></head><body>"
            "<h1>twinspect fuzz</h1>" + (f"<p class=\"warn\">{esc(note)}</p>" if note else "")
            + tab(["", ""], facts) + "<h2>Coverage</h2>" + tab(["criterion", "covered", "total", "ratio"], cov)
            + "<h2>Coverage over time</h2>" + tab(["loop s", "layer type", "layer pair", "layer parameter"], over)
            + f"<h2>Findings ({len(finds)})</h2>"
            + tab(["id", "kind", "systems", "layer", "duplicates", "signature", "bundle", "fresh-process re-run", "public trackers"], finds)
            + "</body></html>\n")


def plot(s: dict, path: str | Path) -> None:
    """Coverage-over-time PNG (three criteria, ratio vs seconds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from twinspect._io import atomic_path

    pts = s["coverage_over_time"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, lab in enumerate(("layer type", "layer pair", "layer parameter"), start=1):
        ax.plot([p[0] for p in pts], [p[i] for p in pts], label=lab)
    ax.set_xlabel("seconds")
    ax.set_ylabel("coverage")
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp)
    plt.close(fig)
