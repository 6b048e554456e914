"""Drepair: repairing deviated behaviours of a compressed model with the triggering inputs found.

Follows the repair experiment of Tian et al., "Finding Deviated Behaviors of the Compressed DNN
Models for Image Classifications" (TOSEM 2023, DFlare): a perceptron with one hidden layer is put
on top of the compressed model. It takes the compressed model's probability vector of an input and
predicts the *original* model's label. It is trained on the seed inputs and the triggering inputs
of a deviation run (``twinspect deviate`` output directory), and evaluated by k-fold
cross-validation (5 folds in the paper) with three ratios.

Metric definitions (our reading of the paper; the paper's text was not available to us verbatim).
On the held-out inputs of a fold, an input is *deviated* when the compressed model's top-1 label
differs from the original's (the triggering inputs, and seeds on which the models already
disagree), *non-deviated* otherwise (the other seeds). With ``r`` the repaired label:

* repair ratio = #{deviated inputs with r = original label} / #deviated;
* inducing ratio = #{non-deviated inputs with r ≠ original label} / #non-deviated (deviations the
  repair introduces);
* improvement ratio = (#repaired − #induced) / #deviated: the net fraction of deviated behaviours
  removed (can be negative).

Seeds and their triggering inputs always fall in the same fold (folds are drawn over seed indices),
so a fold never tests on a near copy of a training image.

The perceptron is scikit-learn's :class:`~sklearn.neural_network.MLPClassifier` (one hidden ReLU
layer, L-BFGS by default, seeded). :class:`RepairedClassifier` wraps it with the compressed model into a
:class:`~twinspect.dl.adapters.base.Classifier`, so the repaired model can be searched again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect._io import atomic_directory, check_output_dir, read_json, write_json
from twinspect.dl.adapters.base import PRESETS, Classifier
from twinspect.dl.deviate.results import load_trigger
from twinspect.errors import InputError, ModelError

MODEL_FILE = "repair_model.joblib"
REPORT_FILE = "repair.json"
DATA_FILE = "repair_data.npz"


# -- metrics ----------------------------------------------------------------------------------------


def repair_metrics(orig_labels: Sequence[int], comp_labels: Sequence[int], repaired_labels: Sequence[int]) -> dict:
    """Repair, inducing and improvement ratios of one evaluation set (definitions in the module doc).

    Args:
        orig_labels: (N,) original model's top-1 labels (the reference).
        comp_labels: (N,) compressed model's top-1 labels before repair.
        repaired_labels: (N,) labels after repair.

    Returns:
        ``{"n": N, "n_deviated", "n_non_deviated", "n_repaired", "n_induced", "repair_ratio",
        "inducing_ratio", "improvement_ratio"}``; a ratio whose denominator is 0 is ``None``.

    Raises:
        InputError: the three arrays do not have the same length.
    """
    o, c, r = (np.asarray(a).astype(np.int64).ravel() for a in (orig_labels, comp_labels, repaired_labels))
    if not (len(o) == len(c) == len(r)):
        raise InputError(f"label arrays differ in length: {len(o)}, {len(c)}, {len(r)}")
    deviated = c != o
    n_dev, n_non = int(deviated.sum()), int((~deviated).sum())
    n_rep = int(np.sum(deviated & (r == o)))
    n_ind = int(np.sum(~deviated & (r != o)))
    return {
        "n": int(len(o)),
        "n_deviated": n_dev,
        "n_non_deviated": n_non,
        "n_repaired": n_rep,
        "n_induced": n_ind,
        "repair_ratio": n_rep / n_dev if n_dev else None,
        "inducing_ratio": n_ind / n_non if n_non else None,
        "improvement_ratio": (n_rep - n_ind) / n_dev if n_dev else None,
    }


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def group_folds(groups: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """Split sample indices into ``k`` folds so that samples of one group stay together.

    Args:
        groups: (N,) group id per sample (the seed index).
        k: number of folds (2 <= k <= number of groups).
        seed: seed of the random assignment of groups to folds.

    Returns:
        ``k`` arrays of sample indices (test indices of each fold).

    scikit-learn's ``GroupKFold`` with shuffled group order (balanced fold sizes).
    """
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(groups)
    splitter = GroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return [np.sort(test) for _, test in splitter.split(np.zeros(len(groups)), groups=groups)]


# -- the repair model ---------------------------------------------------------------------------------


def make_perceptron(hidden: int = 64, max_iter: int = 500, seed: int = 0, solver: str = "lbfgs"):
    """The repair perceptron: one hidden ReLU layer of ``hidden`` units, seeded.

    ``solver="lbfgs"`` (default) suits the few hundred to few thousand inputs of a run and converges in
    a fraction of a second; ``"adam"`` is the stochastic alternative for large runs.
    """
    from sklearn.neural_network import MLPClassifier

    if solver not in ("lbfgs", "adam", "sgd"):
        raise InputError(f"unknown perceptron solver {solver!r}; choose lbfgs, adam or sgd")
    return MLPClassifier(hidden_layer_sizes=(int(hidden),), activation="relu", solver=solver, max_iter=int(max_iter),
                         random_state=int(seed), tol=1e-5, n_iter_no_change=20)


def _fit_quietly(mlp, x: np.ndarray, y: np.ndarray):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(x, y)
    return mlp


def _proba_full(mlp, feats: np.ndarray, num_classes: int) -> np.ndarray:
    """MLP probabilities placed in a (N, num_classes) array (classes unseen in training get 0)."""
    p = mlp.predict_proba(feats)
    out = np.zeros((len(feats), num_classes), dtype=np.float64)
    out[:, np.asarray(mlp.classes_, dtype=np.int64)] = p
    return out


class RepairedClassifier(Classifier):
    """The compressed model followed by the repair perceptron (a :class:`Classifier` itself).

    ``predict_proba(x)`` = the perceptron's class probabilities on the compressed model's
    probability vector of ``x``; so the repaired model can be searched again (``twinspect deviate``).

    Args:
        compressed: the compressed model (any Classifier).
        mlp: a fitted scikit-learn ``MLPClassifier`` whose classes are labels in [0, K).
        name: display name.

    Raises:
        ModelError: the perceptron's input size or classes do not fit the compressed model.
    """

    def __init__(self, compressed: Classifier, mlp: Any, name: str | None = None):
        k = compressed.num_classes
        if getattr(mlp, "n_features_in_", k) != k:
            raise ModelError(
                f"the repair perceptron takes {mlp.n_features_in_} inputs but {compressed.name} outputs {k} classes"
            )
        if np.any(np.asarray(mlp.classes_) >= k) or np.any(np.asarray(mlp.classes_) < 0):
            raise ModelError(f"the repair perceptron predicts labels outside [0, {k})")
        # raw preprocessing: pixels go unchanged to the compressed model, which preprocesses them itself
        super().__init__(compressed.input_shape, k, PRESETS["raw"], "probabilities", name or f"{compressed.name}+repair")
        self.compressed = compressed
        self.mlp = mlp

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        probs = self.compressed.predict_proba(batch)
        out = np.full((len(batch), self.num_classes), np.nan)
        ok = np.all(np.isfinite(probs), axis=1)
        if ok.any():
            out[ok] = _proba_full(self.mlp, probs[ok], self.num_classes)
        return out

    def describe(self) -> dict:
        d = super().describe()
        d.update(compressed=self.compressed.describe(), repair="Drepair MLP", hidden=list(self.mlp.hidden_layer_sizes))
        return d


# -- reading a run directory -------------------------------------------------------------------------


def _load_model(spec: Mapping[str, Any], run_dir: Path, role: str) -> Classifier:
    from twinspect.dl.deviate.runner import load_model

    if not spec.get("path") and not spec.get("factory"):
        raise InputError(f"run.json gives no path for the {role} model", run_dir / "run.json")
    return load_model(dict(spec))


def read_records(run_dir: Path) -> list[dict]:
    """The finished seeds of a run (``results.jsonl``; a torn last line is ignored).

    Raises:
        InputError: the file is missing or a complete line is not valid JSON.
    """
    path = run_dir / "results.jsonl"
    if not path.exists():
        raise InputError("not a deviation run directory: results.jsonl is missing", run_dir)
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                break  # interrupted while writing the last line
            raise InputError(f"line {i + 1} is not valid JSON: {exc}", path) from exc
    return records


def collect_inputs(run_dir: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Seed and triggering inputs of a run directory.

    Seeds come from ``triggers/<i>.npz`` (array ``seed``) or, for seeds without a trigger file, from
    the run's dataset (``run.json`` ``dataset``, row ``seed_index``) when it can be loaded.

    Returns:
        ``(x, groups, kinds, config)``: x float32 (N, H, W, C) pixel-scale images; groups (N,) the
        seed index of each image; kinds (N,) 0 = seed, 1 = trigger; config the run.json dict.

    Raises:
        InputError: missing run.json/results.jsonl, unreadable trigger files, or no inputs at all.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError("run directory does not exist", run_dir)
    config = read_json(run_dir / "run.json")
    if not isinstance(config, dict) or "models" not in config:
        raise InputError("run.json has no 'models' entry", run_dir / "run.json")
    records = read_records(run_dir)
    images, groups, kinds = [], [], []
    dataset_x = None
    dataset_failed = False
    for rec in records:
        idx = int(rec["seed_index"])
        trig = rec.get("trigger")
        if trig:
            path = run_dir / trig
            seed, trigger = (np.asarray(a, np.float32) for a in load_trigger(path, "seed", "trigger"))
            images.append(seed)
            groups.append(idx)
            kinds.append(0)
            if not np.array_equal(seed, trigger):
                images.append(trigger)
                groups.append(idx)
                kinds.append(1)
            continue
        if dataset_x is None and not dataset_failed and config.get("dataset"):
            try:
                from twinspect.dl.data import load_images

                dataset_x, _ = load_images(config["dataset"], split="test")
            except Exception:  # noqa: BLE001 - dataset is optional: seeds without triggers are skipped
                dataset_failed = True
        if dataset_x is not None and 0 <= idx < len(dataset_x):
            img = np.asarray(dataset_x[idx], np.float32)
            images.append(img if img.ndim == 3 else img[..., None])
            groups.append(idx)
            kinds.append(0)
    if not images:
        raise InputError("the run has no seed or triggering inputs to learn from", run_dir)
    return np.stack(images), np.asarray(groups, np.int64), np.asarray(kinds, np.int8), config


# -- the whole repair ----------------------------------------------------------------------------------


def repair_run(
    run_dir: str | Path,
    output: str | Path,
    *,
    folds: int = 5,
    hidden: int = 64,
    max_iter: int = 500,
    seed: int = 0,
    solver: str = "lbfgs",
    quiet: bool = True,
    original: Classifier | None = None,
    compressed: Classifier | None = None,
) -> dict:
    """Drepair on a deviation run: cross-validated metrics, then a final repair model on all inputs.

    Args:
        run_dir: ``twinspect deviate`` output directory (run.json, results.jsonl, triggers/).
        output: directory for ``repair.json`` (config, per-fold and mean metrics),
            ``repair_model.joblib`` (the perceptron fitted on all inputs) and ``repair_data.npz``
            (features ``comp_probs`` (N, K), ``orig_labels``, ``groups``, ``kinds``).
        folds: k of k-fold cross-validation (>= 2; folds are drawn over seeds).
        hidden: hidden units of the perceptron.
        max_iter: maximum training iterations of the perceptron.
        seed: seed of the fold assignment and of the perceptron's initialisation.
        solver: ``"lbfgs"`` (default), ``"adam"`` or ``"sgd"`` (scikit-learn MLP solvers).
        quiet: no progress output.
        original, compressed: already loaded models (default: loaded from run.json).

    Returns:
        The ``repair.json`` content: ``{"folds": [...], "mean": {...}, "final": {...}, ...}``.

    Raises:
        InputError: bad run directory, bad parameters, too few inputs/seeds for the folds, or only
            one original label among the inputs; ``output`` is a file, an unrelated non-empty
            directory (no repair.json), the run directory itself, or cannot be written (all checked
            before any model is loaded; the directory is then written atomically as a whole).
        ModelError: the models in run.json cannot be loaded.
    """
    from twinspect.progress import progress

    run_dir, output = Path(run_dir), Path(output)
    if folds < 2:
        raise InputError(f"folds must be >= 2, got {folds}")
    if hidden < 1 or max_iter < 1:
        raise InputError(f"hidden and max_iter must be >= 1, got {hidden} and {max_iter}")
    make_perceptron(hidden, max_iter, seed, solver)  # validates the solver before any work
    if not run_dir.is_dir():
        raise InputError("run directory does not exist", run_dir)
    if output.resolve() == run_dir.resolve():
        raise InputError("the repair output must be a directory of its own, not the run directory", output)
    check_output_dir(output, "repair directory", marker=REPORT_FILE)  # before the models are loaded
    t0 = time.perf_counter()
    x, groups, kinds, config = collect_inputs(run_dir)
    models = config["models"]
    orig = original or _load_model(models["original"], run_dir, "original")
    comp = compressed or _load_model(models["compressed"], run_dir, "compressed")
    p_orig, p_comp = orig.predict_proba(x), comp.predict_proba(x)
    finite = np.all(np.isfinite(p_orig), axis=1) & np.all(np.isfinite(p_comp), axis=1)
    dropped = int((~finite).sum())
    x, groups, kinds, p_orig, p_comp = x[finite], groups[finite], kinds[finite], p_orig[finite], p_comp[finite]
    y_orig, y_comp = p_orig.argmax(1), p_comp.argmax(1)
    n_groups = len(np.unique(groups))
    if n_groups < folds:
        raise InputError(f"{n_groups} seeds with usable inputs: too few for {folds}-fold cross-validation", run_dir,
                         hint=(f"use at most {n_groups} folds, or a run with more seeds" if n_groups >= 2
                               else "use a run with more seeds"))
    if len(np.unique(y_orig)) < 2:
        raise InputError("all inputs have the same original label; nothing to learn", run_dir)

    fold_rows = []
    all_idx = np.arange(len(x))
    with progress("repair folds", total=folds, quiet=quiet) as bar:
        for i, test_idx in enumerate(group_folds(groups, folds, seed)):
            train_idx = np.setdiff1d(all_idx, test_idx)
            if len(np.unique(y_orig[train_idx])) < 2:
                raise InputError(f"fold {i + 1} has a single original label in its training part", run_dir)
            mlp = _fit_quietly(make_perceptron(hidden, max_iter, seed, solver), p_comp[train_idx], y_orig[train_idx])
            repaired = mlp.predict(p_comp[test_idx])
            row = {"fold": i + 1, "n_train": int(len(train_idx)), "n_test": int(len(test_idx))}
            row.update(repair_metrics(y_orig[test_idx], y_comp[test_idx], repaired))
            fold_rows.append(row)
            bar.advance()

    final = _fit_quietly(make_perceptron(hidden, max_iter, seed, solver), p_comp, y_orig)
    final_metrics = repair_metrics(y_orig, y_comp, final.predict(p_comp))
    report = {
        "method": "Drepair (Tian et al., TOSEM 2023): one-hidden-layer perceptron, compressed probabilities -> original label",
        "metric_definitions": {
            "repair_ratio": "#deviated test inputs whose repaired label equals the original's / #deviated",
            "inducing_ratio": "#non-deviated test inputs whose repaired label differs from the original's / #non-deviated",
            "improvement_ratio": "(#repaired - #induced) / #deviated",
            "note": "our reading of the paper; deviated = compressed top-1 != original top-1 before repair",
        },
        "run_dir": str(run_dir.resolve()),
        "models": {"original": models["original"], "compressed": models["compressed"]},
        "config": {"folds": folds, "hidden": hidden, "max_iter": max_iter, "seed": seed, "solver": solver,
                   "fold_unit": "seed (a seed and its triggering input share a fold)"},
        "inputs": {"total": int(len(x)), "seeds": int(np.sum(kinds == 0)), "triggers": int(np.sum(kinds == 1)),
                   "deviated": int(np.sum(y_orig != y_comp)), "seeds_distinct": n_groups,
                   "dropped_non_finite": dropped},
        "folds": fold_rows,
        "mean": {k: _mean([f[k] for f in fold_rows]) for k in ("repair_ratio", "inducing_ratio", "improvement_ratio")},
        "final": {"training_fit": final_metrics, "model_file": MODEL_FILE},
        "time_s": round(time.perf_counter() - t0, 2),
    }
    _save(output, final, report, p_comp, y_orig, groups, kinds)
    return report


def _save(output: Path, mlp, report: dict, p_comp, y_orig, groups, kinds) -> None:
    import joblib

    with atomic_directory(output) as tmp:  # the whole directory appears at once, or not at all
        joblib.dump(mlp, tmp / MODEL_FILE)
        np.savez_compressed(tmp / DATA_FILE, comp_probs=p_comp, orig_labels=y_orig, groups=groups, kinds=kinds)
        write_json(tmp / REPORT_FILE, report)  # its presence marks a complete repair directory


def load_repaired(repair_dir: str | Path, compressed: Classifier | None = None) -> RepairedClassifier:
    """Load a repaired model written by :func:`repair_run`.

    The perceptron is a joblib (pickle) file: load repair directories you trust only.

    Args:
        repair_dir: the repair output directory.
        compressed: the compressed model (default: loaded from the spec recorded in repair.json).

    Returns:
        A :class:`RepairedClassifier`.

    Raises:
        InputError: repair.json or the model file is missing.
        ModelError: the model file cannot be unpickled or does not fit the compressed model.
    """
    import joblib

    repair_dir = Path(repair_dir)
    report = read_json(repair_dir / REPORT_FILE)
    model_path = repair_dir / MODEL_FILE
    if not model_path.exists():
        raise InputError("repair model file is missing", model_path)
    try:
        mlp = joblib.load(model_path)
    except Exception as exc:  # noqa: BLE001 - unpickling raises many types
        raise ModelError(f"cannot load the repair perceptron ({type(exc).__name__}: {exc})", model_path) from exc
    if not hasattr(mlp, "predict_proba") or not hasattr(mlp, "classes_"):
        raise ModelError("not a fitted scikit-learn classifier", model_path)
    if compressed is None:
        compressed = _load_model(report["models"]["compressed"], repair_dir, "compressed")
    return RepairedClassifier(compressed, mlp)
