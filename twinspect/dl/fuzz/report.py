"""Campaign summaries: the JSON contract, a text table, HTML and a coverage-over-time PNG."""

from __future__ import annotations

import html
import json
from pathlib import Path

from twinspect.dl.fuzz.campaign import Campaign
from twinspect.dl.fuzz.coverage import Coverage


def summary(root: str | Path) -> dict:
    """The campaign summary (JSON contract of issue 11; extra fields allowed).

    Returns:
        ``{"elapsed_s", "models_generated", "models_valid", "models_tested", "models_per_hour",
        "coverage": {"layer_type"|"layer_pair"|"layer_param": {"covered", "total", "ratio"}},
        "coverage_over_time": [[seconds, type_ratio, pair_ratio, param_ratio]], "threshold",
        "findings": [{"id", "kind", "systems", "signature", "dir", "layer"}], ...}``.

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
        "findings": [{**f, "duplicates": st["signatures"].get(f["signature"], 1)} for f in st["findings"]],
    }


def table(s: dict) -> str:
    """Plain-text rendering of a summary."""
    lines = [f"variant {s['variant']}  elapsed {s['elapsed_s']:.0f} s  models generated {s['models_generated']}  "
             f"valid {s['models_valid']}  tested {s['models_tested']}  ({s['models_per_hour']:.0f}/h)",
             f"D_MAD threshold {s['threshold']:.3g}" if s["threshold"] is not None else "D_MAD threshold -"]
    for k, v in s["coverage"].items():
        lines.append(f"  {k:<12} {v['covered']:>5} / {v['total']:<5} {v['ratio']:.1%}")
    if s["skipped_backends"]:
        lines.append("skipped backends: " + ", ".join(f"{k} ({v})" for k, v in s["skipped_backends"].items()))
    lines.append(f"findings: {len(s['findings'])}")
    for f in s["findings"]:
        lines.append(f"  {f['id']}  {f['kind']:<13} {','.join(f['systems']):<34} layer={f.get('layer')}  "
                     f"x{f['duplicates']}  {f['dir']}")
    return "\n".join(lines)


def to_html(s: dict) -> str:
    """Minimal self-contained HTML page of a summary."""
    rows = "".join(f"<tr><td>{html.escape(f['id'])}</td><td>{f['kind']}</td><td>{html.escape(', '.join(f['systems']))}</td>"
                   f"<td>{html.escape(str(f.get('layer')))}</td><td>{html.escape(f['signature'])}</td></tr>" for f in s["findings"])
    return (f"<html><body><h1>twinspect fuzz</h1><pre>{html.escape(json.dumps(s['coverage'], indent=1))}</pre>"
            f"<table border=1><tr><th>id</th><th>kind</th><th>systems</th><th>layer</th><th>signature</th></tr>{rows}"
            "</table></body></html>")


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
