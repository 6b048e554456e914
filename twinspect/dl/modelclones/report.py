"""Rendering of a model comparison (``twinspect models compare``): terminal table, markdown, CSV.

The JSON report is :meth:`ComparisonResult.to_json`; the heatmaps are
:func:`twinspect.dl.modelclones.compare.write_plots`. This module only turns a result into text.
"""

from __future__ import annotations

import csv
import io
from typing import Any

#: Measures shown in the summary table, in column order, and their short column names.
SUMMARY: tuple[str, ...] = ("weights_cosine", "weights_shared", "cka", "io_mean_jsd", "io_top1_agreement",
                            "io_logprob_cosine", "io_ddv_random_pairs", "reuse")
SHORT: dict[str, str] = {"weights_cosine": "w-cos", "weights_shared": "share", "cka": "CKA", "io_mean_jsd": "JSD", "io_top1_agreement": "agree",
                         "io_logprob_cosine": "logp-cos", "io_ddv_random_pairs": "DDV-rand", "reuse": "reuse"}


def summary_headers(result: Any, names_in_rows: bool = True) -> list[str]:
    """Column names of :func:`summary_rows`: the two models (``a``/``b`` when they are indices),
    then the summary measures present."""
    pair = ["model a", "model b"] if names_in_rows else ["a", "b"]
    return [*pair, *(SHORT[k] for k in SUMMARY if k in result.measures)]


def summary_rows(result: Any, names_in_rows: bool = True) -> list[list]:
    """One row per unordered pair (i < j): both models, then the summary measures present in
    ``result`` (floats; ``"-"`` where a measure is undefined for the pair).

    Args:
        result: the comparison.
        names_in_rows: models as ``"i:name"`` (markdown, files); False gives the index ``i`` only,
            for the terminal, where :func:`print_summary` prints the names once above the table so
            that an 80-column terminal does not cut them.
    """
    rows = []
    names = [m["name"] for m in result.models]
    present = [k for k in SUMMARY if k in result.measures]
    mats = {k: result.matrix(k) for k in present}
    n = len(names)
    for i in range(n):
        for j in range(i + 1, n):
            vals: list[Any] = []
            for k in present:
                v = mats[k][i, j]
                vals.append("-" if v != v else float(v))
            rows.append([f"{i}:{names[i]}" if names_in_rows else i, f"{j}:{names[j]}" if names_in_rows else j, *vals])
    return rows


def to_csv(result: Any) -> str:
    """Every measure's full matrix as long-format CSV: ``measure, level, higher_is_similar, a, b,
    name_a, name_b, value`` (value empty where undefined)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["measure", "level", "higher_is_similar", "a", "b", "name_a", "name_b", "value"])
    names = [m["name"] for m in result.models]
    for name, meas in result.measures.items():
        for i, row in enumerate(meas["matrix"]):
            for j, v in enumerate(row):
                w.writerow([name, meas["level"], meas["higher_is_similar"], i, j, names[i], names[j], "" if v is None else v])
    return buf.getvalue()


def to_markdown(result: Any) -> str:
    """The summary table as GitHub-flavoured markdown (``-f table -o FILE``)."""
    from twinspect.reports.table import markdown_table

    return markdown_table(summary_rows(result), summary_headers(result), floatfmt=".3f") + "\n"


def print_summary(result: Any, threshold: float) -> None:
    """Print the summary table, the suspected derived pairs (reuse >= ``threshold``) and skipped measures on stdout."""
    from twinspect.dl.modelclones import reuse
    from twinspect.reports.table import print_table

    print(f"{len(result.models)} models, inputs: {result.config['data']}")
    for i, m in enumerate(result.models):
        print(f"  {i}  {m['name']}")
    print_table(summary_rows(result, names_in_rows=False), summary_headers(result, names_in_rows=False),
                floatfmt=".3f")
    sus = result.suspected(threshold)
    if sus:
        print(f"suspected derived pairs (reuse >= {threshold}):")
        for i, j, s in sus:
            kernels = result.shared_weights.get(f"{i},{j}", ())
            k = len(kernels)
            pruned = {m["pruned"] for m in kernels if "pruned" in m}  # sub-blocks: one is a channel-pruned copy
            as_pruned = f", {result.models[i if pruned == {'a'} else j]['name']} as a channel-pruned copy" \
                if len(pruned) == 1 else ""
            why = f"   (shares {k} hidden-layer kernel{'s' if k > 1 else ''}{as_pruned})" if k else ""
            if not k and result.config.get("peer_rule") and "io_peer_z_min" in result.measures:
                zmin, zmax = result.matrix("io_peer_z_min")[i, j], result.matrix("io_peer_z_max")[i, j]
                if reuse.peer_rule_holds(float(zmin), float(zmax)):
                    why = f"   (each stands out among the other's architecture-mates: peer z {zmin:.1f} / {zmax:.1f})"
            print(f"  {result.models[i]['name']}  <->  {result.models[j]['name']}   reuse {s:.3f}{why}")
    else:
        print(f"no pair with reuse score >= {threshold}")
    if result.skipped:
        kinds = sorted({(s["measure"], s["reason"]) for s in result.skipped})
        import shutil
        import textwrap

        line = f"skipped: {len(result.skipped)} measure/pair combinations, e.g. {kinds[0][0]}: {kinds[0][1]}"
        print(textwrap.fill(line, width=max(shutil.get_terminal_size().columns, 40), subsequent_indent="  "))
