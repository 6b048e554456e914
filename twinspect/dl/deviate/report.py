"""A deviation run as a page a person reads: ``twinspect deviate report RUN_DIR --format html``.

One self-contained HTML file (images inlined as PNG data URIs, no scripts, no network): the run's
configuration and summary, then one card per triggering input, sorted by how small the change is
(L2 to the seed, then L∞): seed | trigger | difference map (``|trigger − seed|`` stretched to full
range), both models' top-3 probabilities, L0/L2/L∞/SSIM, queries (search and minimisation) and
whether it is a *compressed-model error* (the original keeps the seed's true label).
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from twinspect._io import atomic_write, read_json
from twinspect.dl.deviate.distance import trigger_distances
from twinspect.dl.deviate.results import RunDir, load_trigger, summarize, summary_rows
from twinspect.errors import InputError


def _open_run(run_dir: str | Path) -> tuple[RunDir, dict, list[dict]]:
    run = RunDir(run_dir)
    if not run.path.is_dir():
        raise InputError("run directory does not exist", run.path)
    if not run.results_jsonl.exists():
        raise InputError("not a deviation run directory (no results.jsonl)", run.path)
    config = read_json(run.run_json) if run.run_json.exists() else {}
    if not isinstance(config, dict):
        raise InputError("run.json is not a JSON object", run.run_json)
    done = run.load_records()
    order = [int(i) for i in config.get("seed_indices", [])] or sorted(done)
    records = [done[i] for i in order if i in done] + [r for i, r in done.items() if i not in set(order)]
    return run, config, records


def run_summary(run_dir: str | Path) -> dict:
    """The summary (:func:`~twinspect.dl.deviate.results.summarize`) of the records of a run directory.

    Raises:
        InputError: not a run directory, or an unreadable results.jsonl/run.json.
    """
    _, config, records = _open_run(run_dir)
    return {"algorithm": config.get("algorithm"), **summarize(records)}


def _png(img: np.ndarray, scale: int) -> str:
    from PIL import Image

    a = np.round(np.clip(np.nan_to_num(np.asarray(img, dtype=np.float64)), 0, 255)).astype(np.uint8)
    a = a[..., 0] if a.ndim == 3 and a.shape[2] == 1 else a
    pil = Image.fromarray(a)
    if scale > 1:
        pil = pil.resize((pil.width * scale, pil.height * scale), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _top3(p: np.ndarray, names: list[str] | None) -> str:
    p = np.asarray(p, dtype=np.float64)
    if p.size == 0 or np.isnan(p).all():
        return "NaN"
    idx = np.argsort(-np.nan_to_num(p, nan=-1.0))[:3]
    return "<br>".join(
        f"{html.escape(names[i] if names and i < len(names) else str(i))}: {p[i]:.3f}" for i in idx
    )


_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.card{display:flex;gap:1.5em;border:1px solid #bbb;border-radius:6px;padding:.8em;margin:.8em 0}
.imgs img{image-rendering:pixelated;margin-right:6px}.ce{color:#070;font-weight:bold}.bc{color:#a50}
.small{color:#666;font-size:90%}"""


def html_report(run_dir: str | Path, scale: int | None = None) -> str:
    """The report page of a run directory as one HTML string (see the module docstring).

    Args:
        run_dir: a ``twinspect deviate`` run directory (run.json, results.jsonl, triggers/).
        scale: image upscaling factor (default: so that a 28-pixel image is 112 pixels wide).

    Returns:
        A complete, self-contained HTML document.

    Raises:
        InputError: not a run directory, unreadable files, or a trigger file that is missing/corrupt.
    """
    from twinspect.dl.data import class_names

    run, config, records = _open_run(run_dir)
    summary = {"algorithm": config.get("algorithm"), **summarize(records)}
    dataset = str(config.get("dataset") or "").split(":")[0]
    names = class_names(dataset) if dataset else None
    cards = []
    for rec in records:
        if not rec.get("trigger"):
            continue
        path = run.path / rec["trigger"]
        seed, trig, pf, pg = load_trigger(path, "seed", "trigger", "orig_probs", "comp_probs")
        dist = rec.get("distances") or trigger_distances(seed, trig)
        cards.append((dist["l2"], dist["linf"], rec, seed, trig, pf, pg, dist))
    cards.sort(key=lambda c: (c[0], c[1], c[2]["seed_index"]))

    models = config.get("models", {})
    title = f"twinspect deviate: {config.get('algorithm', '?')} on {run.path.name}"
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
           f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    out.append("<table>")
    for role in ("original", "compressed"):
        m = models.get(role, {})
        out.append(f"<tr><th>{role}</th><td>{html.escape(str(m.get('path', m.get('name', '?'))))}</td></tr>")
    out.append(f"<tr><th>dataset</th><td>{html.escape(str(config.get('dataset')))}</td></tr>")
    out.append(f"<tr><th>parameters</th><td class='small'>{html.escape(str(config.get('params', {})))}</td></tr>")
    out.append("</table><h2>Summary</h2><table>")
    for k, v in summary_rows(summary):
        val = f"{v:.3f}" if isinstance(v, float) else ("-" if v is None else str(v))
        out.append(f"<tr><th>{html.escape(k)}</th><td>{html.escape(val)}</td></tr>")
    out.append("</table>")
    out.append(f"<h2>{len(cards)} triggering inputs, smallest change first</h2>")
    out.append("<p class='small'>Each card: seed | trigger | difference map (|trigger − seed| stretched to full "
               "range, black = unchanged). A <span class='ce'>compressed-model error</span> is a trigger on which "
               "the original still gives the seed's true label; <span class='bc'>both changed</span> otherwise.</p>")
    for _, _, rec, seed, trig, pf, pg, dist in cards:
        sc = scale or max(1, int(round(112 / max(seed.shape[1], 1))))
        diff = np.abs(trig.astype(np.float64) - seed)
        diff = diff / diff.max() * 255.0 if diff.max() > 0 else diff
        tl = rec.get("true_label", -1)
        ce = rec.get("compressed_error")
        kind = ("<span class='ce'>compressed-model error</span>" if ce else "<span class='bc'>both changed</span>"
                if ce is not None else "true label unknown")
        label = (names[tl] if names and 0 <= tl < len(names) else str(tl))
        out.append("<div class='card'><div class='imgs'>")
        for img, alt in ((seed, "seed"), (trig, "trigger"), (diff, "difference")):
            out.append(f"<img src='{_png(img, sc)}' alt='{alt}' title='{alt}'>")
        out.append("</div><div>")
        out.append(f"<b>seed {rec['seed_index']}</b> (true label {html.escape(label)}) — {kind}<br>")
        out.append(f"L0 {dist['l0']} px · L2 {dist['l2']:.1f} · L∞ {dist['linf']:.1f} · SSIM {dist['ssim']:.3f}<br>")
        out.append(f"<span class='small'>queries: search {rec['queries']}, minimisation "
                   f"{rec.get('minimize_queries', 0)}; status {html.escape(rec['status'])}</span>")
        out.append("<table><tr><th>original top-3</th><th>compressed top-3</th></tr>")
        out.append(f"<tr><td>{_top3(pf, names)}</td><td>{_top3(pg, names)}</td></tr></table></div></div>")
    out.append("</body></html>")
    return "\n".join(out)


def write_html_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write :func:`html_report` of ``run_dir`` to ``output`` (default ``RUN_DIR/report.html``), atomically.

    Returns:
        The path written.

    Raises:
        InputError: see :func:`html_report`; ``output`` is a directory.
    """
    from twinspect._io import check_output_file

    path = Path(output) if output is not None else Path(run_dir) / "report.html"
    if path.is_dir():
        raise InputError("report output is a directory; give a file name", path)
    if output is not None:  # the default lies in the run directory, which html_report checks first
        check_output_file(path, "report file")
    page = html_report(run_dir)
    with atomic_write(path) as fh:
        fh.write(page)
    return path
