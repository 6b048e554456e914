"""Search results and the deviation run directory (``twinspect deviate -o RUN_DIR``).

Layout of a run directory (read by ``twinspect repair``; keep it exact)::

    RUN_DIR/
      run.json              config: algorithm, models (path + preprocess), dataset, seed list, params,
                            twinspect version
      results.jsonl         one JSON line per finished seed, appended and flushed as seeds finish
      triggers/<i>.npz      arrays seed, trigger (float32 (H, W, C), 0–255 pixel scale, exactly what
                            was fed to the models), orig_probs, comp_probs (float64 (K,))
      triggers/<i>.png      seed | trigger | amplified difference, side by side
      summary.json          success rate, average/median queries and time, counts by status

A line of ``results.jsonl``::

    {"seed_index": int, "true_label": int, "status": "found"|"timeout"|"max_queries"|"nan"|
     "disagree_at_seed"|"orig_wrong_at_seed", "success": bool, "queries": int, "time_s": float, "orig_label": int,
     "comp_label": int, "trigger": "triggers/<i>.npz" | null}

``seed_index`` indexes the dataset; ``queries`` counts generated inputs each sent once to both
models (the seed's own evaluation is not counted, as in DFlare's code). A seed on which the two
models already disagree gets status ``disagree_at_seed`` and its trigger file holds the seed itself.
A seed set aside because the original is wrong on it (``skip_orig_wrong``; the labels known) gets
status ``orig_wrong_at_seed`` and no trigger file.
``orig_label``/``comp_label`` are −1 for a model that answered NaN.

Everything is written atomically (whole lines + flush for the JSONL, temporary file + rename for
the rest), so an interrupted run never leaves a half-written file and can be resumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twinspect._io import atomic_path, read_json, write_json
from twinspect.errors import InputError

#: Statuses of a finished seed.
STATUSES = ("found", "nan", "timeout", "max_queries", "budget", "disagree_at_seed", "orig_wrong_at_seed")
#: Statuses of seeds that were not searched: counted apart, not in the success rate's denominator.
UNSEARCHED_STATUSES = ("disagree_at_seed", "orig_wrong_at_seed")
#: Statuses that count as a success (a deviated behaviour was found by the search).
SUCCESS_STATUSES = ("found", "nan")


@dataclass
class SearchResult:
    """Outcome of searching one seed input.

    Attributes:
        success: a triggering input (labels differ, or a model answered NaN) was found by the search.
        status: one of :data:`STATUSES`.
        queries: generated inputs evaluated, each sent once to both models (iterations of DFlare,
            evaluated individuals of DiffChaser); the seed's own evaluation is not counted.
        time_s: wall-clock seconds of the search, the seed's evaluation included.
        trigger: (H, W, C) float32 triggering input in the 0–255 pixel scale, or None.
        orig_label: original model's top-1 label on ``trigger`` (on the seed without a trigger);
            −1 when it answered NaN.
        comp_label: compressed model's label, likewise.
        seed: (H, W, C) float32 seed image as fed to the models.
        orig_probs: (K,) float64 probabilities of the original model on ``trigger`` (or the seed).
        comp_probs: (K,) float64 probabilities of the compressed model.
        operators: per-operator ``{"selected": n, "improved": m}`` counts (DFlare).
        extra: algorithm-specific details (e.g. generations of DiffChaser).
    """

    success: bool
    status: str
    queries: int
    time_s: float
    trigger: np.ndarray | None
    orig_label: int
    comp_label: int
    seed: np.ndarray | None = None
    orig_probs: np.ndarray | None = None
    comp_probs: np.ndarray | None = None
    operators: dict[str, dict[str, int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self, seed_index: int, true_label: int, trigger_path: str | None) -> dict:
        """The ``results.jsonl`` line of this result (a dict)."""
        return {
            "seed_index": int(seed_index),
            "true_label": int(true_label),
            "status": self.status,
            "success": bool(self.success),
            "queries": int(self.queries),
            "time_s": round(float(self.time_s), 6),
            "orig_label": int(self.orig_label),
            "comp_label": int(self.comp_label),
            "trigger": trigger_path,
            **({"generation_queries": int(self.extra["generation_queries"])}
               if "generation_queries" in self.extra else {}),
            **({"minimize_queries": int(self.extra["minimize_queries"])} if "minimize_queries" in self.extra else {}),
            **({"gradient_evaluations": int(self.extra["guide_gradients"])} if "guide_gradients" in self.extra else {}),
            **({k: self.extra[k] for k in ("distances", "distances_before") if k in self.extra}),
            **({"compressed_error": bool(self.extra["compressed_error"])} if "compressed_error" in self.extra else {}),
            **({"second_search": dict(self.extra["second_search"])} if "second_search" in self.extra else {}),
        }


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def summarize(records: Iterable[dict]) -> dict:
    """Per-run metrics, as DFlare reports them.

    Seeds with status ``disagree_at_seed`` need no search and are counted apart ("no search
    needed"); seeds with status ``orig_wrong_at_seed`` (the original wrong on the seed, set aside
    with ``skip_orig_wrong``) are counted apart too ("set aside"); the success rate is over the searched seeds, and average/median queries and time are
    over the successful seeds (DFlare's ``summary_attack_results``).

    Args:
        records: ``results.jsonl`` lines (dicts with at least status, success, queries, time_s).

    Returns:
        dict with ``seeds``, ``searched``, ``no_search_needed``, ``set_aside_orig_wrong``, ``successes``, ``success_rate``
        (fraction in [0, 1], None when nothing was searched), ``avg_queries``, ``median_queries``,
        ``avg_time_s``, ``median_time_s`` (None without successes), ``min_queries``,
        ``max_queries``, ``total_queries`` and ``by_status`` (count per status); also
        ``avg_queries_all`` and ``median_queries_all``: over *every* searched seed, a failed seed
        counted with the queries it spent (its budget), so that a low success rate cannot hide
        behind a low average; and ``avg_generation_queries`` (DiffChaser: whole generations
        evaluated, successful seeds) when the records carry it; ``avg_minimize_queries`` (trigger
        minimisation, apart from the search's), ``avg_gradient_evaluations`` (the guided search's
        back-propagations through the original or its surrogate, successful seeds; not queries of
        the pair) when the records carry it, ``median_l0``/``median_l2``/``median_linf``/
        ``median_ssim`` of the triggers to their seeds, and ``compressed_error_share`` (fraction of
        triggers on which the original keeps the seed's true label; None without labels).
    """
    records = list(records)
    by_status = {s: 0 for s in STATUSES}
    for r in records:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    searched = [r for r in records if r["status"] not in UNSEARCHED_STATUSES]
    ok = [r for r in searched if r["success"]]
    q = np.array([r["queries"] for r in ok], dtype=np.float64)
    t = np.array([r["time_s"] for r in ok], dtype=np.float64)
    q_all = np.array([r["queries"] for r in searched], dtype=np.float64)
    q_gen = np.array([r["generation_queries"] for r in ok if "generation_queries" in r], dtype=np.float64)
    q_min = np.array([r["minimize_queries"] for r in ok if "minimize_queries" in r], dtype=np.float64)
    grads = np.array([r["gradient_evaluations"] for r in ok if "gradient_evaluations" in r], dtype=np.float64)
    dist = {m: np.array([r["distances"][m] for r in ok if "distances" in r], dtype=np.float64)
            for m in ("l0", "l2", "linf", "ssim")}
    ce = [r["compressed_error"] for r in ok if "compressed_error" in r]

    def stat(fn, arr):
        return None if arr.size == 0 else float(fn(arr))

    return {
        "seeds": len(records),
        "searched": len(searched),
        "no_search_needed": by_status.get("disagree_at_seed", 0),
        "set_aside_orig_wrong": by_status.get("orig_wrong_at_seed", 0),
        "successes": len(ok),
        "success_rate": (len(ok) / len(searched)) if searched else None,
        "avg_queries": stat(np.mean, q),
        "median_queries": stat(np.median, q),
        "min_queries": stat(np.min, q),
        "max_queries": stat(np.max, q),
        "avg_queries_all": stat(np.mean, q_all),
        "median_queries_all": stat(np.median, q_all),
        **({"avg_generation_queries": stat(np.mean, q_gen)} if q_gen.size else {}),
        "avg_minimize_queries": stat(np.mean, q_min),
        **({"avg_gradient_evaluations": stat(np.mean, grads)} if grads.size else {}),
        **{f"median_{m}": stat(np.median, v) for m, v in dist.items()},
        "compressed_error_share": (sum(ce) / len(ce)) if ce else None,
        "avg_time_s": stat(np.mean, t),
        "median_time_s": stat(np.median, t),
        "total_queries": int(sum(r["queries"] for r in records)),
        "by_status": by_status,
    }


def _triple(summary: dict) -> str:
    vals = [summary.get(f"median_{m}") for m in ("l0", "l2", "linf")]
    return "-" if any(v is None for v in vals) else " / ".join(f"{v:.1f}" for v in vals)


def summary_rows(summary: dict) -> list[tuple[str, Any]]:
    """(metric, value) rows of a summary for a terminal table."""
    rate = summary["success_rate"]
    rows: list[tuple[str, Any]] = [
        ("seeds", summary["seeds"]),
        ("no search needed (disagree at seed)", summary["no_search_needed"]),
        ("set aside: original wrong at seed (not searched; no compressed-model error possible)",
         summary.get("set_aside_orig_wrong", 0)),
        ("searched", summary["searched"]),
        ("successes", summary["successes"]),
        ("success rate", "-" if rate is None else f"{100 * rate:.2f} %"),
        ("avg queries (successful)", summary["avg_queries"]),
        ("median queries (successful)", summary["median_queries"]),
        ("avg queries (all searched; failures at their budget)", summary.get("avg_queries_all")),
        *([("avg queries incl. whole generations (successful)", summary["avg_generation_queries"])]
          if "avg_generation_queries" in summary else []),
        ("avg minimisation queries (successful)", summary.get("avg_minimize_queries")),
        *([("avg gradient evaluations of the original (successful; not queries)", summary["avg_gradient_evaluations"])]
          if "avg_gradient_evaluations" in summary else []),
        ("median L0 / L2 / Linf to seed", _triple(summary)),
        ("median SSIM to seed", summary.get("median_ssim")),
        ("compressed-model errors (original right)",
         "-" if summary.get("compressed_error_share") is None else f"{100 * summary['compressed_error_share']:.1f} %"),
        ("avg time s (successful)", summary["avg_time_s"]),
        ("median time s (successful)", summary["median_time_s"]),
    ]
    for status, n in summary["by_status"].items():
        rows.append((f"status {status}", n))
    return rows


# --------------------------------------------------------------------------------------------
# Run directory
# --------------------------------------------------------------------------------------------


def _comparable(config: dict) -> dict:
    """The part of a run config that must match for a resume (everything but the seed list)."""
    return {k: v for k, v in config.items() if k not in ("seed_indices", "num_seeds", "twinspect_version")}


class RunDir:
    """A deviation run directory (see the module docstring).

    Args:
        path: the directory (created by :meth:`start`).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def results_jsonl(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def summary_json(self) -> Path:
        return self.path / "summary.json"

    @property
    def triggers(self) -> Path:
        return self.path / "triggers"

    def check_location(self, resume: bool) -> bool:
        """Check that a run may be written here (the configuration aside), without writing anything.

        Returns:
            True when the directory holds a run (to be resumed), False for a new or empty directory.

        Raises:
            InputError: the path is a file; a directory that is not empty and holds no run (an
                unrelated folder is never written into); a run without ``resume``.
        """
        if self.path.exists() and not self.path.is_dir():
            raise InputError("output path exists and is not a directory", self.path)
        has_run = self.run_json.exists() or self.results_jsonl.exists()
        if not has_run:
            try:
                unrelated = self.path.is_dir() and any(self.path.iterdir())
            except OSError as exc:
                raise InputError(f"cannot read the run directory: {exc.strerror or exc}", self.path) from None
            if unrelated:
                raise InputError("output directory exists, is not empty and is not a deviation run", self.path,
                                 hint="choose a new or empty directory")
            return False
        if not resume:
            raise InputError(
                "output directory already holds a deviation run",
                self.path,
                hint="pass --resume to continue it, or choose another directory",
            )
        return True

    def check_start(self, config: dict, resume: bool) -> None:
        """Validate that a run with ``config`` may start here, without writing anything.

        Raises:
            InputError: see :meth:`check_location`; or ``resume`` is True and the existing
                run.json has a different configuration (the message names the differing keys).
        """
        if not self.check_location(resume):
            return
        if not self.run_json.exists():
            raise InputError("cannot resume: run.json is missing", self.path)
        old = read_json(self.run_json)
        if not isinstance(old, dict):
            raise InputError("cannot resume: run.json is not a JSON object", self.run_json)
        a, b = _comparable(old), _comparable(config)
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if diff:
            raise InputError(
                f"cannot resume: the existing run has a different configuration ({', '.join(diff)})",
                self.run_json,
                hint="use the same options as the original run, or another output directory",
            )

    def start(self, config: dict, resume: bool) -> dict[int, dict]:
        """Create/validate the directory, write run.json and return the finished seeds.

        Args:
            config: the run configuration (JSON-serialisable).
            resume: continue an existing run.

        Returns:
            ``{seed_index: record}`` of seeds already in results.jsonl (empty for a new run).

        Raises:
            InputError: see :meth:`check_start`; results.jsonl unreadable.
        """
        self.check_start(config, resume)
        done = self.load_records() if resume else {}
        self.path.mkdir(parents=True, exist_ok=True)
        if resume and self.run_json.exists():
            old = read_json(self.run_json)
            merged = list(dict.fromkeys(list(old.get("seed_indices", [])) + list(config.get("seed_indices", []))))
            config = {**config, "seed_indices": merged, "num_seeds": len(merged)}
        write_json(self.run_json, config)
        return done

    def load_records(self) -> dict[int, dict]:
        """Read results.jsonl into ``{seed_index: record}`` (a torn last line is ignored).

        Raises:
            InputError: a complete line is not valid JSON.
        """
        out: dict[int, dict] = {}
        if not self.results_jsonl.exists():
            return out
        with open(self.results_jsonl, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                if n == len(lines):  # an unterminated last line: the writer was killed mid-write
                    continue
                raise InputError(f"line {n} is not valid JSON: {exc}", self.results_jsonl) from exc
            out[int(rec["seed_index"])] = rec
        return out

    def write_trigger(self, seed_index: int, result: SearchResult) -> str | None:
        """Write ``triggers/<i>.npz`` and ``.png`` for a result with a trigger; return the relative npz path."""
        if result.trigger is None:
            return None
        rel = f"triggers/{int(seed_index)}.npz"
        seed = np.asarray(result.seed, dtype=np.float32)
        trig = np.asarray(result.trigger, dtype=np.float32)
        k = 0 if result.orig_probs is None else np.asarray(result.orig_probs).size
        with atomic_path(self.path / rel) as tmp:
            np.savez(
                tmp,
                seed=seed,
                trigger=trig,
                orig_probs=np.asarray(result.orig_probs if result.orig_probs is not None else np.full(k, np.nan), dtype=np.float64),
                comp_probs=np.asarray(result.comp_probs if result.comp_probs is not None else np.full(k, np.nan), dtype=np.float64),
            )
        write_trigger_png(self.path / f"triggers/{int(seed_index)}.png", seed, trig)
        return rel

    def append(self, record: dict) -> None:
        """Append one whole line to results.jsonl and flush it to disk."""
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with open(self.results_jsonl, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def write_summary(self, summary: dict) -> None:
        write_json(self.summary_json, summary)


def write_trigger_png(path: str | Path, seed: np.ndarray, trigger: np.ndarray, gap: int = 2, scale: int = 4) -> None:
    """Save ``seed | trigger | amplified |difference|`` side by side as a PNG (atomically).

    The difference panel is ``|trigger − seed|`` stretched to the full 0–255 range (black = equal).

    Args:
        path: output .png path.
        seed: (H, W, C) image, 0–255 scale (C = 1 or 3).
        trigger: (H, W, C) image, same shape.
        gap: white columns between panels (before upscaling).
        scale: nearest-neighbour upscaling factor (MNIST digits are tiny).
    """
    from PIL import Image

    s = np.clip(np.nan_to_num(np.asarray(seed, dtype=np.float64)), 0, 255)
    t = np.clip(np.nan_to_num(np.asarray(trigger, dtype=np.float64)), 0, 255)
    d = np.abs(t - s)
    d = d / d.max() * 255.0 if d.max() > 0 else d
    h, w, c = s.shape
    sep = np.full((h, gap, c), 255.0)
    img = np.concatenate([s, sep, t, sep, d], axis=1)
    img = np.round(img).astype(np.uint8)
    img = img[..., 0] if c == 1 else img
    pil = Image.fromarray(img)
    if scale > 1:
        pil = pil.resize((pil.width * scale, pil.height * scale), Image.Resampling.NEAREST)
    with atomic_path(path) as tmp:
        pil.save(tmp, format="PNG")


def load_trigger(path: str | Path, *names: str) -> tuple[np.ndarray, ...]:
    """Read arrays ``names`` of a trigger file (``triggers/<i>.npz``), whole, before it is closed.

    Raises:
        InputError: naming the file, when it is missing, truncated, not an ``.npz`` archive, or
            lacks one of the arrays (``zipfile.BadZipFile``, ``EOFError``, ``zlib.error`` and the
            like become this one-line error).
    """
    import zipfile
    import zlib

    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [n for n in names if n not in z.files]
            if missing:
                raise InputError(f"trigger file lacks array(s) {', '.join(missing)}", path)
            return tuple(np.asarray(z[n]) for n in names)
    except FileNotFoundError:
        raise InputError("trigger file is missing", path) from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise InputError(f"cannot read the trigger file (truncated or not an .npz): {exc}", path) from None


def seed_list(n_images: int, count: int, seed: int) -> list[int]:
    """The first ``count`` indices of a seeded permutation of ``range(n_images)``.

    Prefix-stable: the list for a larger ``count`` extends the one for a smaller count, so a run can
    be resumed with more seeds.

    Raises:
        InputError: ``count`` < 1 or larger than the dataset.
    """
    if count < 1:
        raise InputError(f"the number of seeds must be >= 1, got {count}")
    if count > n_images:
        raise InputError(f"{count} seeds requested, more than the {n_images} images of the dataset")
    perm = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED])).permutation(n_images)
    return [int(i) for i in perm[:count]]


def records_in_order(done: dict[int, dict], seed_indices: Sequence[int]) -> list[dict]:
    """The records of ``seed_indices`` that are finished, in seed-list order."""
    return [done[i] for i in seed_indices if i in done]
