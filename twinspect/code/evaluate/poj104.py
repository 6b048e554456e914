"""POJ-104 (CodeXGLUE splits): programs and the MAP@R runner (:func:`~twinspect.code.evaluate.metrics.map_at_r`)."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.code.evaluate.common import Embedder, config_embedder, default_data_dir, require_data_dir
from twinspect.code.evaluate.metrics import map_at_r
from twinspect.errors import InputError


def load_poj104(root: str | Path, name: str = "dev_81_92.jsonl.gz") -> list[dict[str, Any]]:
    """Read POJ-104 programs: records ``{"label": str, "index": str, "code": str}``.

    Raises:
        InputError: missing or malformed file.
    """
    path = Path(root) / name
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            out = [json.loads(line) for line in fh if line.strip()]
        for rec in out:
            rec["label"], rec["code"] = str(rec["label"]), str(rec["code"])
        return out
    except OSError as exc:
        raise InputError(f"cannot read POJ-104 programs: {exc.strerror or exc}", path) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"malformed POJ-104 record ({exc})", path) from exc


def poj104_fragments(programs: Sequence[dict[str, Any]]) -> list[Any]:
    """Each POJ-104 program as one whole-file Fragment (language ``"cpp"``, path ``<label>/<index>.cpp``)."""
    from twinspect.code.fragments import Fragment

    out: list[Any] = []
    for rec in programs:
        code = rec["code"]
        n = max(1, code.count("\n") + (0 if code.endswith("\n") else 1))
        out.append(Fragment(f"{rec['label']}/{rec.get('index', len(out))}.cpp", 1, n, "", "cpp", code))
    return out


def run_poj104(
    data: str | Path | None = None,
    config: Any = None,
    *,
    embed: Embedder | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """MAP@R of the configured encoder on POJ-104 (each program against all the others).

    Args:
        data: the POJ-104 folder (``dev_81_92.jsonl.gz``); default ``../shared/data/clones/poj104``.
        config: a :class:`~twinspect.code.clones.DetectConfig` (its ``encoder``/``encoder_params``).
        embed: override of the embedder (tuning).
        limit: score a reproducible random subset of this many programs (quick runs).
        seed: subsampling seed.

    Returns:
        ``{"map_at_r": fraction, "programs", "labels", "seconds"}``.
    """
    from twinspect.code.clones import DetectConfig

    root = require_data_dir(data or default_data_dir("poj104"), "POJ-104")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    programs = load_poj104(root)
    if limit is not None and limit < len(programs):
        idx = np.random.default_rng(seed).choice(len(programs), size=limit, replace=False)
        programs = [programs[i] for i in sorted(idx)]
    frags = poj104_fragments(programs)
    (vecs,) = (embed or config_embedder(config))(frags, [frags])
    score = map_at_r(vecs, [p["label"] for p in programs])
    return {
        "map_at_r": score,
        "programs": len(programs),
        "labels": len({p["label"] for p in programs}),
        "seconds": time.perf_counter() - t0,
    }
