"""Clone reports: JSON, SARIF 2.1.0, a self-contained HTML page, and terminal tables.

Every file is written atomically (:mod:`twinspect._io`): an interrupted run never leaves a
half-written report. The JSON shape is a contract read by other tools (see
:meth:`twinspect.code.clones.CloneReport.to_json_dict`).
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast
from urllib.parse import quote

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import JustifyMethod

from twinspect._io import atomic_write, json_default
from twinspect.code.clone_types import BANDS, TYPE_DESCRIPTIONS, TYPES
from twinspect.code.clones import ClonePair, CloneReport
from twinspect.code.fragments import Fragment
from twinspect.code.subfunction import KIND as SUBFUNCTION

FORMATS = ("table", "json", "sarif", "html")
#: SARIF 2.1.0 JSON schema (the OASIS errata 01 schema, as most consumers reference it).
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
#: Pairs rendered side by side in the HTML report (the page stays openable for huge reports).
HTML_MAX_SIDE_BY_SIDE = 500
#: Rows of the HTML pairs table.
HTML_MAX_TABLE_ROWS = 5000

_RULE_NAMES = {"T1": "Type1Clone", "T2": "Type2Clone", "T3": "Type3Clone", "T4": "Type4Clone"}


def _version() -> str:
    from twinspect import __version__

    return __version__


def fragment_label(f: Fragment) -> str:
    """``path:start-end`` of a fragment."""
    return f"{f.path}:{f.start_line}-{f.end_line}"


def _type_label(p: ClonePair) -> str:
    return p.type if p.band is None else f"{p.type} ({p.band})"


def is_subfunction_pair(report: CloneReport, p: ClonePair) -> bool:
    """True if either fragment of ``p`` is a copied region inside a function (:mod:`twinspect.code.subfunction`)."""
    return report.fragments[p.a].kind == SUBFUNCTION or report.fragments[p.b].kind == SUBFUNCTION


def ranked_pairs(report: CloneReport) -> list[ClonePair]:
    """Pairs by decreasing similarity (ties by type then ids), the pairs of copied regions inside
    functions (sub-function fragments) after the others: the order of tables and HTML."""
    rank = {t: i for i, t in enumerate(TYPES)}
    return sorted(report.pairs,
                  key=lambda p: (is_subfunction_pair(report, p), -p.similarity, rank.get(p.type, 9), p.a, p.b))


# ----------------------------------------------------------------------------------------- JSON
def to_json(report: CloneReport) -> str:
    """The JSON report as a string, in the layout of :func:`write_json_report`."""
    import io

    buf = io.StringIO()
    _write_json(report, buf)
    return buf.getvalue()


def _write_json(report: CloneReport, fh: IO[str]) -> None:
    """Stream the JSON report (see :meth:`CloneReport.to_json_dict`) to ``fh``, entry by entry.

    Each fragment gets its ``code_hash`` (:func:`twinspect.code.baseline.code_hash`: what
    ``--baseline`` matches on), and identical groups kept by ``--baseline`` their
    ``baseline_members`` (:func:`twinspect.code.baseline.add_json_fields`). Layout: one top-level
    field per line, ``config`` and ``stats`` indented by two spaces, and the entries of the long
    lists (fragments, pairs, classes, identical groups, group pairs) one per line — a report of
    millions of pairs is written without building it as one string (the pure-Python indenting
    encoder took about 50 s and several GB on 3.4 M pairs), and reads line by line with grep.
    """
    from twinspect.code.baseline import add_json_fields

    doc = add_json_fields(dict(report.json_fields()), report)
    compact = json.JSONEncoder(default=json_default).encode
    fh.write("{\n")
    for n, (key, value) in enumerate(doc.items()):
        fh.write(",\n" if n else "")
        fh.write(f"  {json.dumps(key)}: ")
        if isinstance(value, Iterator):
            first = True
            for entry in value:
                fh.write("[\n    " if first else ",\n    ")
                fh.write(compact(entry))
                first = False
            fh.write("[]" if first else "\n  ]")
        else:
            fh.write(json.dumps(value, indent=2, default=json_default).replace("\n", "\n  "))
    fh.write("\n}\n")


def write_json_report(report: CloneReport, path: str | Path) -> None:
    """Write the JSON report atomically to ``path``, streamed entry by entry (see :func:`to_json`)."""
    with atomic_write(path) as fh:
        _write_json(report, fh)


# ---------------------------------------------------------------------------------------- SARIF
def _physical(f: Fragment) -> dict:
    return {
        "artifactLocation": {"uri": quote(f.path), "uriBaseId": "SRCROOT"},
        "region": {"startLine": f.start_line, "endLine": f.end_line},
    }


def _pair_fingerprint(a: Fragment, b: Fragment) -> str:
    """A line-shift-stable fingerprint of a pair: SHA-256 (hex, 32 chars) of both fragments'
    paths, names and layout-normalised code (order-independent), not of their line numbers."""
    import hashlib

    from twinspect.code.normalize import t1_key

    sides = sorted(f"{f.path}\0{f.name}\0{t1_key(f)}" for f in (a, b))
    return hashlib.sha256("\1".join(sides).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def to_sarif(report: CloneReport) -> dict:
    """The report as a SARIF 2.1.0 log (one result per clone pair).

    Each result has ``ruleId`` = the clone type (one rule per type), level ``"note"``, a message
    naming the other fragment, ``locations[0]`` = fragment ``a`` and ``relatedLocations[0]`` =
    fragment ``b`` (URIs relative to the ``SRCROOT`` base, which is the scanned root), and
    ``properties`` with the similarity, band, token similarity and clone class index.
    ``partialFingerprints["cloneFragments/v1"]`` hashes both fragments' paths, names and
    normalised code, so a result keeps its identity when unrelated lines above it move.

    Returns:
        A JSON-serialisable dict.
    """
    rules = [
        {
            "id": t,
            "name": _RULE_NAMES[t],
            "shortDescription": {"text": f"Type-{t[1]} code clone"},
            "fullDescription": {"text": TYPE_DESCRIPTIONS[t]},
            "defaultConfiguration": {"level": "note"},
        }
        for t in TYPES
    ]
    rule_index = {t: i for i, t in enumerate(TYPES)}
    class_of: dict[int, int] = {}
    for ci, members in enumerate(report.classes):
        for m in members:
            class_of[m] = ci
    results = []
    frags = report.fragments
    for p in report.pairs:
        fa, fb = frags[p.a], frags[p.b]
        other = fragment_label(fb) + (f" ({fb.name})" if fb.name else "")
        band = f", band {p.band}" if p.band else ""
        results.append(
            {
                "ruleId": p.type,
                "ruleIndex": rule_index[p.type],
                "level": "note",
                "message": {
                    "text": f"{fa.name or 'Fragment'} is a {p.type} clone of {other}{band}; "
                    f"cosine similarity {p.similarity:.3f}."
                },
                "locations": [{"physicalLocation": _physical(fa)}],
                "relatedLocations": [
                    {"id": 1, "physicalLocation": _physical(fb), "message": {"text": f"clone: {other}"}}
                ],
                "partialFingerprints": {"cloneFragments/v1": _pair_fingerprint(fa, fb)},
                "properties": {
                    "similarity": round(float(p.similarity), 6),
                    "band": p.band,
                    "t3Similarity": None if p.t3_similarity is None else round(float(p.t3_similarity), 6),
                    "fragmentIds": [p.a, p.b],
                    "cloneClass": class_of.get(p.a),
                },
            }
        )
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "twinspect",
                "version": _version(),
                "semanticVersion": _version(),
                "informationUri": "https://pypi.org/project/twinspect/",
                "rules": rules,
            }
        },
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {"stats": report.stats, "config": report.config, "classes": report.classes},
    }
    if report.root:
        run["originalUriBaseIds"] = {"SRCROOT": {"uri": Path(report.root).resolve().as_uri().rstrip("/") + "/"}}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def write_sarif(report: CloneReport, path: str | Path) -> None:
    """Write the SARIF log atomically to ``path``."""
    with atomic_write(path) as fh:
        json.dump(to_sarif(report), fh, indent=2, default=json_default)
        fh.write("\n")


# ----------------------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#1d2330;background:#fafbfc}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
.note{color:#57606a;font-size:.9em}
table{border-collapse:collapse;font-size:.88em;background:#fff}
th,td{border:1px solid #d0d7de;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f0f3f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
.stats td:first-child{font-weight:600}
.badge{display:inline-block;border-radius:.8em;padding:0 .6em;font-size:.8em;font-weight:600;color:#fff}
.T1{background:#1a7f37}.T2{background:#0969da}.T3{background:#9a6700}.T4{background:#8250df}
.sim{background:#57606a}
details{margin:.5em 0;border:1px solid #d0d7de;border-radius:6px;background:#fff}
summary{cursor:pointer;padding:.4em .7em}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:.5em;padding:.5em}
.side{min-width:0}
.side h3{font-size:.85em;margin:.2em 0;font-weight:600;word-break:break-all}
pre{margin:0;padding:.5em;background:#f6f8fa;border:1px solid #eaeef2;overflow:auto;font-size:.8em;line-height:1.35}
.ln{color:#8c959f;user-select:none;display:inline-block;min-width:3.5em;text-align:right;padding-right:.8em}
.d{background:#fff1b8;display:inline-block;min-width:100%}
"""


def _badge(p: ClonePair) -> str:
    band = f" {html.escape(p.band)}" if p.band else ""
    return f'<span class="badge {html.escape(p.type)}">{html.escape(p.type)}{band}</span>'


def _lines(f: Fragment) -> list[str]:
    return f.text.splitlines() or [""]


def differing_lines(a: list[str], b: list[str]) -> tuple[set[int], set[int]]:
    """The lines that differ between two fragments' lines, whitespace ignored.

    :class:`difflib.SequenceMatcher` aligns the whitespace-stripped lines (no junk heuristic);
    a line of ``a`` outside every matching block is not matched in ``b``, and vice versa.

    Args:
        a: lines of the first fragment.
        b: lines of the second fragment.

    Returns:
        ``(in_a, in_b)``: 0-based indices of the unmatched lines of ``a`` and of ``b``.
    """
    sm = difflib.SequenceMatcher(None, [ln.strip() for ln in a], [ln.strip() for ln in b], autojunk=False)
    in_a, in_b = set(range(len(a))), set(range(len(b)))
    for block in sm.get_matching_blocks():
        in_a.difference_update(range(block.a, block.a + block.size))
        in_b.difference_update(range(block.b, block.b + block.size))
    return in_a, in_b


def _code_block(f: Fragment, marked: set[int] | frozenset[int] = frozenset()) -> str:
    """The fragment's code (html-escaped, with line numbers); the rows of the lines whose 0-based
    index is in ``marked`` are wrapped in ``<span class="d">`` (highlighted as differing)."""
    rows = []
    for i, line in enumerate(_lines(f)):
        row = f'<span class="ln">{f.start_line + i}</span>{html.escape(line)}'
        rows.append(f'<span class="d">{row}</span>' if i in marked else row)
    body = "\n".join(rows)
    return f"<pre><code>{body}</code></pre>"


def _frag_cell(f: Fragment) -> str:
    name = f" <em>{html.escape(f.name)}</em>" if f.name else ""
    return f"{html.escape(fragment_label(f))}{name}"


def to_html(
    report: CloneReport, max_side_by_side: int = HTML_MAX_SIDE_BY_SIDE, max_rows: int = HTML_MAX_TABLE_ROWS
) -> str:
    """Render the report as one self-contained HTML page (inline CSS, no scripts or external assets).

    The page holds summary statistics, the clone classes, a table of pairs (by decreasing
    similarity, at most ``max_rows``) and the code of the first ``max_side_by_side`` pairs side by
    side (html-escaped), with type and similarity badges. Each side-by-side pair is a collapsed
    ``<details>`` element; in it, the lines of either fragment that are not matched in the other
    (:func:`differing_lines`, whitespace ignored) are highlighted (``class="d"``).

    Args:
        report: the clone report.
        max_side_by_side: pairs shown side by side (negative counts as 0).
        max_rows: rows of the pairs and classes tables.

    Returns:
        The HTML document as a string.
    """
    esc = html.escape
    frags = report.fragments
    pairs = ranked_pairs(report)
    st = report.stats
    by_type = st.get("pairs_by_type", {})
    by_band = st.get("pairs_by_band", {})
    timings = st.get("timings", {})
    summary_rows = [
        ("root", report.root or "—"),
        ("files parsed", st.get("files_parsed", "—")),
        ("fragments", len(frags)),
        ("clone pairs", len(report.pairs)),
        ("pairs by type", ", ".join(f"{t} {by_type.get(t, 0)}" for t in TYPES)),
        ("Type-3/4 bands", ", ".join(f"{b} {by_band.get(b, 0)}" for b in BANDS)),
        ("clone classes", len(report.classes)),
        ("largest class", max((len(c) for c in report.classes), default=0)),
        ("encoder / index", f"{st.get('encoder', report.config.get('encoder', '?'))} / "
                            f"{st.get('index', report.config.get('index', '?'))}"),
        ("top-k / threshold", f"{report.config.get('top_k', '?')} / {report.config.get('threshold', '?')}"),
    ]
    skipped = st.get("skipped") or {}
    if skipped:
        summary_rows.append(("skipped files", ", ".join(f"{k} {v}" for k, v in skipped.items())))
    if st.get("files_with_parse_errors"):
        summary_rows.append(("files with parse errors", st["files_with_parse_errors"]))
    if timings:
        summary_rows.append(("time (s)", ", ".join(f"{k} {v:.2f}" for k, v in timings.items())))

    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>twinspect clone report — {esc(report.root or 'codebase')}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>twinspect clone report</h1>",
        f'<p class="note">twinspect {esc(_version())}. Types after Roy &amp; Cordy; Type-3 bands after '
        "BigCloneBench (VST3 ≥ 0.9, ST3 ≥ 0.7, MT3 ≥ 0.5 abstracted-token similarity; below: T4/WT3).</p>",
        '<p><a href="#pairs">pairs</a> · <a href="#classes">classes</a> · <a href="#side-by-side">side by side</a></p>',
        '<h2>Summary</h2><table class="stats">',
    ]
    out += [f"<tr><td>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>" for k, v in summary_rows]
    out.append("</table>")

    out.append(f'<h2 id="pairs">Clone pairs ({len(pairs)})</h2>')
    if pairs:
        rows = pairs[:max_rows]
        if len(pairs) > len(rows):
            out.append(f'<p class="note">Showing the {len(rows)} most similar of {len(pairs)} pairs; '
                       "the JSON or SARIF report lists all of them.</p>")
        out.append("<table><tr><th>#</th><th>fragment A</th><th>fragment B</th><th>type</th>"
                   "<th>similarity</th><th>token sim.</th></tr>")
        for i, p in enumerate(rows):
            link = f'<a href="#pair-{i}">{i}</a>' if i < max_side_by_side else str(i)
            tsim = "" if p.t3_similarity is None else f"{p.t3_similarity:.3f}"
            out.append(
                f'<tr><td class="num">{link}</td><td>{_frag_cell(frags[p.a])}</td><td>{_frag_cell(frags[p.b])}</td>'
                f'<td>{_badge(p)}</td><td class="num">{p.similarity:.3f}</td><td class="num">{tsim}</td></tr>'
            )
        out.append("</table>")
    else:
        out.append('<p class="note">No clone pairs.</p>')

    out.append(f'<h2 id="classes">Clone classes ({len(report.classes)})</h2>')
    if report.classes:
        shown = report.classes[:max_rows]
        out.append("<table><tr><th>#</th><th>size</th><th>members</th></tr>")
        for ci, members in enumerate(shown):
            listed = ", ".join(_frag_cell(frags[m]) for m in members[:12])
            more = f" … and {len(members) - 12} more" if len(members) > 12 else ""
            out.append(f'<tr><td class="num">{ci}</td><td class="num">{len(members)}</td><td>{listed}{more}</td></tr>')
        out.append("</table>")
        if len(report.classes) > len(shown):
            out.append(f'<p class="note">Showing the {len(shown)} largest of {len(report.classes)} classes.</p>')
    else:
        out.append('<p class="note">No clone classes.</p>')

    if pairs:
        n_side = min(len(pairs), max(0, max_side_by_side))
        out.append(f'<h2 id="side-by-side">Side by side ({n_side} of {len(pairs)} pairs)</h2>')
        if len(pairs) > n_side:
            out.append(f'<p class="note">Only the {n_side} most similar pairs are shown side by side, '
                       "so that the page stays openable (--html-max-pairs).</p>")
        if n_side:
            out.append('<p class="note">Click a pair to open it; <span class="d">highlighted</span> lines '
                       "have no counterpart in the other fragment (whitespace ignored).</p>")
        for i, p in enumerate(pairs[:n_side]):
            fa, fb = frags[p.a], frags[p.b]
            da, db = differing_lines(_lines(fa), _lines(fb))
            out.append(
                f'<details id="pair-{i}"><summary>#{i} {_badge(p)} '
                f'<span class="badge sim">{p.similarity:.3f}</span> '
                f"{esc(fragment_label(fa))} ↔ {esc(fragment_label(fb))}</summary>"
                f'<div class="pair"><div class="side"><h3>{_frag_cell(fa)}</h3>{_code_block(fa, da)}</div>'
                f'<div class="side"><h3>{_frag_cell(fb)}</h3>{_code_block(fb, db)}</div></div></details>'
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_html(report: CloneReport, path: str | Path, max_side_by_side: int = HTML_MAX_SIDE_BY_SIDE) -> None:
    """Write the HTML report atomically to ``path`` (see :func:`to_html`; ``max_side_by_side``
    is the CLI's ``--html-max-pairs``)."""
    with atomic_write(path) as fh:
        fh.write(to_html(report, max_side_by_side=max_side_by_side))


# ------------------------------------------------------------------------------------- terminal
def summary_line(report: CloneReport) -> str:
    """One line: fragments, files, pairs by type (with ``--baseline``: the new ones, and how many
    known pairs are not shown), classes, time, and the duplicated-lines percentage when the stats
    have it."""
    st = report.stats
    by_type = st.get("pairs_by_type") or {}
    types = ", ".join(f"{t} {by_type.get(t, 0)}" for t in TYPES)
    files = f" in {st['files_parsed']} files" if "files_parsed" in st else ""
    total = (st.get("timings") or {}).get("total", (st.get("timings") or {}).get("detect"))
    took = f" in {total:.1f} s" if isinstance(total, (int, float)) else ""
    sizes = st.get("class_sizes") or {}
    dist = ", ".join(f"{k}: {v}" for k, v in sizes.items() if v)
    classes = f"{len(report.classes)} clone classes"
    if report.classes:
        classes += f" (largest {max(len(c) for c in report.classes)}; by size {dist})" if dist else \
            f" (largest {max(len(c) for c in report.classes)})"
    recall = st.get("index_recall")
    index = (f"; HNSW index, recall {recall:.3f} against exact search on {st.get('index_recall_queries')} queries"
             if isinstance(recall, float) else "")
    suppressed = st.get("baseline_pairs_suppressed")
    known = (f" (not shown: {suppressed} pairs in the baseline"
             + (f" and {st['baseline_groups_suppressed']} large exact-duplicate groups"
                if st.get("baseline_groups_suppressed") else "") + ")") if isinstance(suppressed, int) else ""
    pct = st.get("duplicated_lines_pct")
    counted = st.get("duplicated_types")  # --fail-over-types
    of = f" ({'/'.join(counted)} pairs)" if counted and len(counted) < len(TYPES) else ""
    copied = st.get("copied_lines_pct")
    copies = (f"; T1/T2 copies {copied:.1f} %" if isinstance(copied, (int, float)) and st.get("copied_lines")
              != st.get("duplicated_lines") and not (counted and set(counted) <= {"T1", "T2"}) else "")
    dup = (f"; duplicated lines{of} {pct:.1f} % ({st.get('duplicated_lines')} of {st.get('total_lines')}{copies})"
           if isinstance(pct, (int, float)) else "")
    n_sub = sum(1 for f in report.fragments if f.kind == SUBFUNCTION)
    sub_pairs = sum(1 for p in report.pairs if is_subfunction_pair(report, p))
    sub = (f", of which {sub_pairs} between copied regions inside functions ({n_sub} sub-function fragments)"
           if n_sub else "")
    ch = st.get("changed")
    if isinstance(ch, dict):  # a changed-files check (twinspect.code.incremental)
        n_files = ch["files_changed"] + ch["files_added"]
        removed = f", {ch['files_removed']} removed" if ch.get("files_removed") else ""
        updates = int(ch.get("state_updates") or 0)
        since = f" (updated by {updates} check{'s' if updates != 1 else ''} since)" if updates else ""
        head = (f"changed-files check against the scan of {ch.get('state_saved')}{since}: {n_files} files changed or added"
                f"{removed} ({ch['fragments_changed']} fragments, compared with {ch['fragments_retrieved']} similar "
                f"unchanged ones of {ch['state_fragments']})")
        return (f"{head}: {len(report.pairs)} {'new ' if known else ''}clone pairs involving them ({types}){sub}"
                f"{known}, {classes}{took}")
    return (f"{len(report.fragments)} fragments{files}: {len(report.pairs)} {'new ' if known else ''}clone pairs "
            f"({types}){sub}{known}, {classes}{took}{index}{dup}")


def pairs_table(report: CloneReport, limit: int = 20) -> Table:
    """A rich table of the ``limit`` most similar pairs (both sides' path:lines and names)."""
    table = Table(title=None, show_lines=False)
    for head, justify in (("#", "right"), ("fragment A", "left"), ("name A", "left"), ("fragment B", "left"),
                          ("name B", "left"), ("type", "left"), ("similarity", "right")):
        table.add_column(head, justify=cast("JustifyMethod", justify), overflow="fold")
    for i, p in enumerate(ranked_pairs(report)[: max(0, limit)]):
        fa, fb = report.fragments[p.a], report.fragments[p.b]
        table.add_row(str(i), Text(fragment_label(fa)), Text(fa.name), Text(fragment_label(fb)), Text(fb.name),
                      _type_label(p), f"{p.similarity:.3f}")
    return table


def output_console(file: Any = None) -> Console:
    """A rich console on ``file`` (stdout by default); piped output is not wrapped at 80 columns."""
    import sys

    file = file or sys.stdout
    tty = hasattr(file, "isatty") and file.isatty()
    return Console(file=file, width=None if tty else 200)


def print_terminal(report: CloneReport, console: Console | None = None, limit: int = 20) -> None:
    """Print the top pairs as a table and the summary line (stdout by default)."""
    console = console or Console()
    if report.pairs:
        console.print(pairs_table(report, limit=limit))
        if len(report.pairs) > limit:
            console.print(f"(showing {limit} of {len(report.pairs)} pairs; use --format json/html for all)",
                          highlight=False)
    # one line however long (a pipe, a file or a log keeps it whole; a terminal wraps it by itself)
    console.print(Text(summary_line(report)), highlight=False, soft_wrap=True)


def write_report(
    report: CloneReport,
    fmt: str,
    output: str | Path | None = None,
    *,
    quiet: bool = False,
    limit: int = 20,
    stdout: Any = None,
    html_max_pairs: int = HTML_MAX_SIDE_BY_SIDE,
) -> None:
    """Emit a report in one format: to ``output`` (atomically) or to stdout.

    ``table`` prints to stdout (or writes plain text to ``output``); ``json`` and ``sarif`` go to
    stdout when ``output`` is None (for pipes); ``html`` needs ``output`` and shows the first
    ``html_max_pairs`` pairs side by side. When a file is written the summary line goes to stderr
    unless ``quiet``.

    Raises:
        InputError: unknown format, or html without ``output``.
    """
    import sys

    from twinspect.errors import InputError

    stdout = stdout or sys.stdout
    if fmt not in FORMATS:
        raise InputError(f"unknown report format {fmt!r}", hint=f"choose one of {', '.join(FORMATS)}")
    if output is not None and Path(output).is_dir():
        raise InputError(f"{output}: is a directory, expected a report file path",
                         hint=f"pass a file, e.g. -o {Path(output) / ('report.' + ('txt' if fmt == 'table' else fmt))}")
    if fmt == "table":
        if output is None:
            if not quiet:
                print_terminal(report, output_console(stdout), limit=limit)
            return
        with atomic_write(output) as fh:
            print_terminal(report, Console(file=fh, width=200, no_color=True, force_terminal=False), limit=limit)
    elif fmt == "json":
        if output is None:
            _write_json(report, stdout)
            stdout.flush()
            return
        write_json_report(report, output)
    elif fmt == "sarif":
        text = json.dumps(to_sarif(report), indent=2, default=json_default)
        if output is None:
            stdout.write(text + "\n")
            stdout.flush()
            return
        with atomic_write(output) as fh:
            fh.write(text + "\n")
    else:
        if output is None:
            raise InputError("the html format needs an output file", hint="pass -o report.html")
        write_html(report, output, max_side_by_side=html_max_pairs)
    if not quiet:
        Console(stderr=True).print(Text(f"{summary_line(report)}; wrote {output}"), highlight=False, soft_wrap=True)
