"""Fresh-process confirmation of fuzz findings: each bundle's ``repro.py`` run anew, its verdict kept in the bundle.

A campaign finds a symptom in its long-lived worker processes, which have built and converted hundreds of
models before; a symptom can depend on that state (seen in a 60-minute MEMO_o campaign: an ONNX Runtime
``Concat`` failure on the batch axis that its own minimiser re-ran in the worker, but that the bundle's
``repro.py`` in a fresh process did not show). ``twinspect fuzz confirm`` runs every bundle's ``repro.py``
(which runs each system in a new Python process and judges with the bundle's copy of the campaign's oracle)
and writes ``confirm.json`` beside it: ``{"reproduces", "exit_code", "seconds", "checked", "recorded",
"findings"}``. The campaign summary (:func:`twinspect.dl.fuzz.report.summary`) shows each finding as
reproduced, not reproduced or unconfirmed. A finding that does not reproduce stays in the campaign (its
bundle is evidence of a state-dependent symptom), marked as such.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from twinspect._io import write_json
from twinspect.dl.fuzz import triage
from twinspect.errors import InputError

CONFIRM_FILE = "confirm.json"


def run(bundle: str | Path, timeout_s: float = 1800.0, recorded: bool = False) -> dict:
    """Run a bundle's ``repro.py --json`` in a fresh Python process and record the verdict (``confirm.json``).

    Args:
        bundle: the finding's bundle directory (holds ``repro.py``).
        timeout_s: limit for the whole script, seconds (each system's own limit is the one the bundle was
            written with); over it, the finding counts as not reproduced, with ``exit_code`` None.
        recorded: pass ``--recorded``: judge the outputs recorded in the bundle instead of running the
            systems (numpy only; checks the bundle's rule, not the libraries).

    Returns:
        The record written: ``reproduces`` (bool), ``exit_code`` (1 reproduces, 0 not, other = the script
        failed), ``seconds`` (wall), ``checked`` (ISO time, UTC), ``recorded`` and ``findings`` (what the
        script's judge found; empty when it failed), plus ``error`` (last stderr line) when it failed.

    Raises:
        InputError: no ``repro.py`` in ``bundle``.
    """
    bundle = Path(bundle)
    script = bundle / "repro.py"
    if not script.is_file():
        raise InputError(f"{bundle}: not a finding bundle (no repro.py)")
    cmd = [sys.executable, str(script), "--json"] + (["--recorded"] if recorded else [])
    t0 = time.perf_counter()
    rec: dict = {"reproduces": False, "exit_code": None, "recorded": recorded, "findings": []}
    try:
        p = subprocess.run(cmd, cwd=bundle, capture_output=True, text=True, timeout=timeout_s)
        rec["exit_code"] = p.returncode
        out = json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout.strip() else None
        if isinstance(out, dict):
            rec["reproduces"] = bool(out.get("reproduces")) and p.returncode == 1
            rec["findings"] = out.get("findings", [])
        else:
            lines = (p.stderr or p.stdout).strip().splitlines()
            rec["error"] = lines[-1] if lines else f"exit code {p.returncode}, no output"
    except subprocess.TimeoutExpired:
        rec["error"] = f"repro.py ran over {timeout_s:.0f} s"
    except ValueError as exc:  # not JSON
        rec["error"] = f"unreadable repro.py output ({exc})"
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    rec["checked"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    write_json(bundle / CONFIRM_FILE, rec)
    return rec


def confirm_all(campaign: str | Path, ids: list[str] | None = None, timeout_s: float = 1800.0,
                recorded: bool = False, skip_done: bool = False,
                on_done: Callable[[Path, dict], None] | None = None) -> dict[str, dict]:
    """:func:`run` on every bundle of a campaign (:func:`twinspect.dl.fuzz.triage.bundle_dirs`), or on the
    bundles ``ids`` name (:func:`twinspect.dl.fuzz.triage.bundle_dir`), one after another.

    Args:
        campaign: campaign directory.
        ids: finding ids or unique prefixes; None = all.
        timeout_s, recorded: as :func:`run`.
        skip_done: keep bundles that already have a ``confirm.json`` as they are (resume an interrupted run).
        on_done: called with (bundle, record) after each bundle (progress).

    Returns:
        finding id → record (the kept ones included when ``skip_done``).

    Raises:
        InputError: not a campaign, or an id that matches no bundle or several.
    """
    found = list(dict.fromkeys(triage.bundle_dir(campaign, i) for i in ids)) if ids else triage.bundle_dirs(campaign)
    out: dict[str, dict] = {}
    for b in found:
        old = read(b) if skip_done else None
        rec = old if old is not None else run(b, timeout_s=timeout_s, recorded=recorded)
        out[b.name] = rec
        if on_done is not None:
            on_done(b, rec)
    return out


def read(bundle: str | Path) -> dict | None:
    """A bundle's confirmation record, or None when it was not confirmed (or the file is unreadable)."""
    try:
        rec = json.loads((Path(bundle) / CONFIRM_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and "reproduces" in rec else None
