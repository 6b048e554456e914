"""Public issue-tracker verdicts of fuzz findings, kept in each finding's bundle (``tracker.json``).

A finding is worth a maintainer's time when nobody reported it yet. After a campaign, whoever triages a
finding searches the trackers of the libraries involved (Keras, TensorFlow, JAX, PyTorch, ONNX Runtime,
tf2onnx) for the same symptom and records the outcome with ``twinspect fuzz tracker``: **known** (a thread
with the same library, operator and failure mode; its link), **related** (a similar thread; what differs
goes in the note) or **not found** (the queries tried). The campaign summary (:func:`twinspect.dl.fuzz.report.summary`)
shows each finding's verdict, or ``unchecked``. twinspect does not search the trackers itself: it runs
without network access to them, and a verdict needs a reader.

``tracker.json``: ``{"verdict", "links": [url, ...], "queries": [text, ...], "note", "checked": ISO date,
"signature"}`` — the signature is the finding's, so a verdict copied to another campaign's bundle of the
same signature can be recognised.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from twinspect._io import write_json
from twinspect.errors import InputError

VERDICTS = ("known", "related", "not found")
TRACKER_FILE = "tracker.json"


def _finding(bundle: Path) -> dict:
    path = bundle / "finding.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{bundle}: not a finding bundle (no finding.json)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable finding ({exc})") from None


def record(bundle: str | Path, verdict: str, links: list[str] | None = None, queries: list[str] | None = None,
           note: str = "", checked: str | None = None) -> dict:
    """Write a finding's tracker verdict into its bundle (``tracker.json``, replaced atomically).

    Args:
        bundle: the finding's bundle directory.
        verdict: one of :data:`VERDICTS` (``"not-found"`` is accepted for ``"not found"``).
        links: thread URLs (http/https); at least one for ``known`` and ``related``.
        queries: the searches tried; at least one for ``not found``.
        note: free text (what differs for ``related``; the library version checked, ...).
        checked: ISO date of the search; default today (UTC).

    Returns:
        The record written.

    Raises:
        InputError: not a bundle, an unknown verdict, a link that is not an http(s) URL, ``known``/``related``
            without a link, or ``not found`` without a query.
    """
    bundle = Path(bundle)
    finding = _finding(bundle)
    verdict = verdict.replace("-", " ").replace("_", " ").strip().lower()
    if verdict not in VERDICTS:
        raise InputError(f"unknown tracker verdict {verdict!r}; choose from known, related, not-found")
    links = [u.strip() for u in links or [] if u.strip()]
    queries = [q.strip() for q in queries or [] if q.strip()]
    bad = [u for u in links if not u.startswith(("http://", "https://"))]
    if bad:
        raise InputError(f"--link {bad[0]!r} is not an http(s) URL")
    if verdict in ("known", "related") and not links:
        raise InputError(f"a {verdict!r} verdict needs the thread: give --link URL")
    if verdict == "not found" and not queries:
        raise InputError("a 'not found' verdict needs the searches tried: give --query TEXT")
    rec = {"verdict": verdict, "links": links, "queries": queries, "note": note,
           "checked": checked or _dt.datetime.now(_dt.UTC).date().isoformat(),
           "signature": finding.get("signature")}
    write_json(bundle / TRACKER_FILE, rec)
    return rec


def read(bundle: str | Path) -> dict | None:
    """A bundle's tracker verdict (:func:`record`'s dict), or None when it was not checked (or the file is
    unreadable: a verdict is advice, never a reason to fail a report)."""
    try:
        rec = json.loads((Path(bundle) / TRACKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("verdict") in VERDICTS else None
