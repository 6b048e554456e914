"""All-pairs clone analysis of DL models at every level that applies: ``twinspect models compare``.

Follows the three levels of Wu et al., "How are Deep Learning Models Similar? An Empirical Study on
Clone Analysis of Deep Learning Software" (ICPC 2020) — source code, structure (weights, distilled
students) and I/O semantics — plus representation similarity (linear CKA, Kornblith et al. 2019),
two published reuse detectors as their papers run them — ModelDiff (Li et al., ISSTA 2021,
:mod:`~twinspect.dl.modelclones.modeldiff`) and DeepJudge's black-box metrics (Chen et al., S&P 2022,
:mod:`~twinspect.dl.modelclones.deepjudge`), the ``baselines`` level — and a calibrated reuse score
(:mod:`twinspect.dl.modelclones.reuse`).

The ``baselines`` matrices are directional: cell (i, j) tests model j as a suspect copy of model i,
on test inputs generated with model i's gradients (only a float torch model has them; a row whose
model has none is skipped with the reason). In an all-pairs run both directions are computed; with
``pairs``, only the direction each pair is given in.

Per model, once: load (:func:`~twinspect.dl.adapters.load_classifier`), class probabilities on the
comparison inputs, canonical weights, and the Gram matrix of every layer's activations on the first
``cka_inputs`` inputs. Per pair: the measures of :data:`MEASURES` (the registry
:mod:`twinspect.dl.modelclones.measures`, re-exported here). A measure that does not apply to
a pair (different architectures for weights, different input shapes or class counts for I/O
measures, a format without activations for CKA, outputs with NaN/infinity, a runtime failure of one
model, a CKA that is undefined) is ``None`` in its matrix and listed in ``skipped`` with a one-line
reason; one model that cannot be measured never ends the all-pairs run. Per model, layers whose
activations cannot enter CKA are listed in ``models[i]["cka_layers_skipped"]`` (``{"layer",
"reason"}``) and layers constant over the inputs (CKA undefined, left out of the model score) in
``models[i]["cka_constant_layers"]``.

The result (:class:`Comparison`) serialises to the JSON contract of issue 9::

    {"models": [{"id", "path", "format", "params", "input_shape", "classes", ...}],
     "measures": {"<name>": {"level", "higher_is_similar", "matrix": [[float|null]]}},
     "skipped": [{"measure", "a", "b", "reason"}],
     "cka_maps": {"<i>,<j>": {"layers_a", "layers_b", "matrix"}}, "config": {...}}
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.adapters.loaded import NotSupportedError
from twinspect.dl.modelclones import cka as cka_mod
from twinspect.dl.modelclones import deepjudge, measures, modeldiff, outputs, reuse
from twinspect.dl.modelclones.measures import LEVELS, MEASURES
from twinspect.dl.modelclones.weights import (
    DifferentArchitectures,
    architecture_signature,
    compare_weights,
    shared_kernels,
)
from twinspect.errors import InputError

#: Names accepted by ``--data`` besides a path to an ``.npz``.
DATA_NAMES = ("mnist", "cifar10", "uniform")


@dataclass
class CompareConfig:
    """Settings of :func:`compare_models`.

    Attributes:
        data: ``"mnist"``/``"cifar10"`` (test split from the shared data), ``"uniform"`` (seeded
            uniform random pixels in each model's input shape), a path to an ``.npz`` (``x`` in the
            0–255 pixel scale), or None: the data set named in every model's metadata when they
            agree, else ``"uniform"``.
        n_inputs: number of comparison inputs (I/O measures, the random-pair DDV, and the candidate
            seeds of the baselines).
        cka_inputs: inputs whose activations feed CKA (the first ones of the comparison inputs).
        preprocess: preprocessing preset for every model (default: model metadata, else x/255).
        seed: seeds input sampling, uniform inputs, DDV pairs, the baselines' attacks and distillation.
        modeldiff_pairs: random input pairs of ``io_ddv_random_pairs``.
        modeldiff_search_pairs: input pairs of ModelDiff's search (the ISSTA artifact: 50).
        deepjudge_seeds: DeepJudge's seeds (its default: 1,000; capped by ``n_inputs``).
        distill_student: zoo architecture of the common student (Wu et al.'s distillation level), or
            None to skip it (it trains one student per model).
        distill_epochs: epochs of each distillation.
        distill_train: training images for distillation (from the data set's train split).
        threshold: reuse score above which a pair is reported as suspected derived.
        calibration: reuse calibration file (default: the shipped one).
        peer_rule: apply the architecture-peer rule to the reuse score
            (:func:`~twinspect.dl.modelclones.reuse.with_peer_outlier`); off by default: on a hold-out it was
            not tuned on it flagged 3 more distilled students and 10 more independent pairs
            (``benchmarks/results/models_reuse_holdout4.md``). The ``io_peer_z_*`` measures are reported either way.
        levels: levels to compute (a subset of :data:`~twinspect.dl.modelclones.measures.LEVELS`).
        verbose: 0 = quiet, 1 = progress bars on stderr.
    """

    data: str | None = None
    n_inputs: int = 500
    cka_inputs: int = 256
    preprocess: str | None = None
    seed: int = 0
    modeldiff_pairs: int = 100
    modeldiff_search_pairs: int = modeldiff.N_PAIRS
    deepjudge_seeds: int = deepjudge.N_SEEDS
    distill_student: str | None = None
    distill_epochs: int = 2
    distill_train: int = 5000
    threshold: float = reuse.DEFAULT_THRESHOLD
    calibration: str | None = None
    peer_rule: bool = False
    levels: tuple[str, ...] = LEVELS
    verbose: int = 0


@dataclass
class Comparison:
    """All-pairs result; :meth:`to_json` gives the issue-9 contract."""

    models: list[dict]
    measures: dict[str, dict]
    skipped: list[dict]
    cka_maps: dict[str, dict] = field(default_factory=dict)
    weight_layers: dict[str, list[dict]] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    shared_weights: dict[str, list[dict]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "models": self.models,
            "measures": self.measures,
            "skipped": self.skipped,
            "cka_maps": self.cka_maps,
            "weight_layers": self.weight_layers,
            "shared_weights": self.shared_weights,
            "config": self.config,
            "timings": self.timings,
        }

    def matrix(self, name: str) -> np.ndarray:
        """A measure's matrix as float64 with NaN for ``null``."""
        m = self.measures[name]["matrix"]
        return np.array([[np.nan if v is None else v for v in row] for row in m], dtype=np.float64)

    def suspected(self, threshold: float | None = None) -> list[tuple[int, int, float]]:
        """Pairs (i < j) whose reuse score is at least ``threshold``, highest first."""
        t = self.config.get("threshold", reuse.DEFAULT_THRESHOLD) if threshold is None else threshold
        if "reuse" not in self.measures:
            return []
        m = self.matrix("reuse")
        out = [(i, j, float(m[i, j])) for i in range(len(m)) for j in range(i + 1, len(m)) if np.isfinite(m[i, j]) and m[i, j] >= t]
        return sorted(out, key=lambda t_: -t_[2])


@dataclass
class _ModelState:
    clf: Classifier
    info: dict
    probs: np.ndarray | None = None
    probs_reason: str | None = None
    weights: Any = None
    weights_reason: str | None = None
    grams: dict[str, cka_mod.Gram] | None = None
    grams_reason: str | None = None
    ddv: np.ndarray | None = None
    student: Any = None
    student_reason: str | None = None
    x: np.ndarray | None = None  # the comparison inputs of this model's input shape
    baseline_done: bool = False
    baseline_reason: str | None = None
    md_inputs: modeldiff.ProfilingInputs | None = None
    dj_cases: deepjudge.TestCases | None = None


def _nan_to_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _reason(what: str, exc: BaseException) -> str:
    """One line for a ``skipped`` entry: what failed and why (the exception's first line)."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{what}: {msg}"


def _prepare_grams(st: _ModelState, x: np.ndarray) -> None:
    """Gram matrices of every layer of one model on ``x`` (pixel scale), into ``st``.

    A layer whose activations cannot enter CKA (no input axis, NaN/inf) is listed in
    ``st.info["cka_layers_skipped"]`` with the reason; layers constant over the inputs (CKA undefined)
    in ``st.info["cka_constant_layers"]``. When no layer is left, ``st.grams_reason`` says why.
    """
    try:
        acts = st.clf.activations(x)
    except NotSupportedError as exc:
        st.grams_reason = exc.reason
        return
    except Exception as exc:  # noqa: BLE001 - one model's runtime failure must not end the run
        st.grams_reason = _reason("activations could not be computed", exc)
        return
    grams: dict[str, cka_mod.Gram] = {}
    dropped: list[dict] = []
    for k, v in acts.items():
        v = np.asarray(v)
        if v.ndim < 1 or v.shape[0] != len(x):
            dropped.append({"layer": k, "reason": f"output of shape {tuple(v.shape)} has no axis of the {len(x)} inputs"})
            continue
        try:
            grams[k] = cka_mod.gram(v)
        except InputError as exc:
            dropped.append({"layer": k, "reason": str(exc)})
    if dropped:
        st.info["cka_layers_skipped"] = dropped
    constant = [k for k, g in grams.items() if g.constant]
    if constant:
        st.info["cka_constant_layers"] = constant
    if not grams:
        st.grams_reason = "the model exposes no usable layer activations" + (f" ({dropped[0]['layer']}: {dropped[0]['reason']})" if dropped else "")
        return
    if len(constant) == len(grams):
        st.grams_reason = "every layer's activations are constant over the inputs (CKA undefined)"
        return
    st.grams = grams


def _inputs_for(cfg: CompareConfig, metas: list[dict], shapes: list[tuple[int, ...]]) -> tuple[str, dict[tuple[int, ...], np.ndarray]]:
    """The comparison inputs per input shape: ``(data description, {shape: x (N, H, W, C)})``."""
    from twinspect.dl import data as dl_data

    spec = cfg.data
    if spec is None:
        named = {m.get("dataset") for m in metas}
        only = next(iter(named)) if len(named) == 1 else None
        spec = only if only in dl_data.DATASETS else "uniform"
    rng = np.random.default_rng(cfg.seed)
    out: dict[tuple[int, ...], np.ndarray] = {}
    if spec == "uniform":
        for s in sorted(set(shapes)):
            out[s] = rng.uniform(0, 255, size=(cfg.n_inputs, *s)).astype(np.float32)
        return "uniform", out
    x, _ = dl_data.load_images(spec, "test")
    if len(x) > cfg.n_inputs:
        x = x[np.sort(rng.choice(len(x), cfg.n_inputs, replace=False))]
    s = tuple(int(v) for v in x.shape[1:])
    if s not in set(shapes):
        where = spec if spec in dl_data.DATASETS else Path(spec)
        raise InputError(
            f"data of shape {s} fits none of the models (input shapes: {', '.join(map(str, sorted(set(shapes))))})",
            None if spec in dl_data.DATASETS else where,
        )
    out[s] = x
    return str(spec), out


def _model_info(i: int, path: Path, clf: Classifier) -> dict:
    d = clf.describe()
    info = {
        "id": i,
        "name": clf.name,
        "path": str(path),
        "format": d.get("format"),
        "runtime": d.get("runtime"),
        "params": None,
        "input_shape": list(clf.input_shape),
        "classes": clf.num_classes,
    }
    return info


def load_models(paths: Sequence[str | Path], preprocess: str | None = None) -> list[Classifier]:
    """Load every model file as a classifier (one clear error naming the first bad file).

    Raises:
        InputError: fewer than two models, a missing/unreadable file.
        ModelError: a file no adapter can load.
    """
    from twinspect.dl.adapters import load_classifier

    if len(paths) < 2:
        raise InputError(f"model comparison needs at least two models, got {len(paths)}")
    return [load_classifier(p, preprocess=preprocess) for p in paths]


def _distill_student(cfg: CompareConfig, st: _ModelState, index: int, dataset: str | None):
    """Distil one model into the common student (Hinton et al. 2015, T = 4); returns canonical weights."""
    import torch

    from twinspect.dl import data as dl_data
    from twinspect.dl.adapters.torch import TorchModel
    from twinspect.dl.architectures import build_model
    from twinspect.dl.compress import distill
    from twinspect.dl.train import FitConfig, default_preprocess

    if dataset not in dl_data.DATASETS:
        raise NotSupportedError("distillation needs a named training set (mnist or cifar10) in --data or the metadata")
    x, y = dl_data.load_images(dataset, "train", limit=cfg.distill_train)
    assert y is not None
    clf = st.clf
    torch.manual_seed(cfg.seed + index)
    h, w, c = clf.input_shape
    student = build_model(cfg.distill_student or "lenet1", (h, w, c), clf.num_classes)
    pre = default_preprocess(dataset, clf.input_shape[-1])

    def teacher(xb: np.ndarray):
        p = clf.predict_proba(xb)
        return torch.from_numpy(np.log(np.clip(p, 1e-12, 1.0)).astype(np.float32))

    fc = FitConfig(epochs=cfg.distill_epochs, batch_size=64, lr=3e-3, optimizer="adam", weight_decay=1e-4, seed=cfg.seed + index)
    distill(teacher, student, x, y, pre, fc, temperature=4.0, alpha=1.0, quiet=cfg.verbose < 1)
    return TorchModel(student).canonical_weights()


class _Matrices:
    """The measure matrices and ``skipped`` entries of one all-pairs run, filled cell by cell."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.mats: dict[str, list[list[float | None]]] = {}
        self.skipped: list[dict] = []

    def touch(self, name: str) -> list[list[float | None]]:
        """The matrix of ``name``, created full of ``None`` on first use (the measure is then reported).

        Raises:
            KeyError: ``name`` is not in the registry :data:`~twinspect.dl.modelclones.measures.REGISTRY`
                (a programming error: every reported measure must be registered).
        """
        if name not in self.mats and name not in measures.BY_NAME:
            raise KeyError(f"measure {name!r} is not in twinspect.dl.modelclones.measures.REGISTRY")
        return self.mats.setdefault(name, [[None] * self.n for _ in range(self.n)])

    def put(self, name: str, i: int, j: int, v: float | None, symmetric: bool = True) -> None:
        """Store ``v`` in cell (i, j) (and (j, i) when ``symmetric``); a NaN/inf value becomes ``None``
        and, for i < j, a ``skipped`` entry."""
        m = self.touch(name)
        m[i][j] = _nan_to_none(v)
        if v is not None and m[i][j] is None and i < j:  # a measure that came out NaN/inf is reported
            self.skipped.append({"measure": name, "a": i, "b": j, "reason": f"{name} is NaN or infinite for this pair"})
        if symmetric:
            m[j][i] = m[i][j]

    def skip(self, name: str, i: int, j: int, reason: str) -> None:
        """Leave cell (i, j) of ``name`` empty and record why."""
        self.touch(name)
        self.skipped.append({"measure": name, "a": i, "b": j, "reason": reason})


def _validate(paths: Sequence[str | Path], code: Sequence[str | Path] | None, cfg: CompareConfig) -> list[Any] | None:
    """Check the arguments of :func:`compare_models` before any model is loaded.

    Returns:
        The training programs (:class:`~twinspect.dl.modelclones.source.Program`, one per model) when
        ``code`` is given and the code level is wanted, else None.

    Raises:
        InputError: fewer than two models, a ``code`` list of another length, an unknown level,
            ``n_inputs``/``cka_inputs`` below 4, a missing or unreadable code file.
    """
    if len(paths) < 2:
        raise InputError(f"model comparison needs at least two models, got {len(paths)}")
    if code is not None and len(code) != len(paths):
        raise InputError(f"--code needs one program per model: {len(paths)} models, {len(code)} programs")
    bad_levels = set(cfg.levels) - set(LEVELS)
    if bad_levels:
        raise InputError(f"unknown level(s) {', '.join(sorted(bad_levels))}")
    if cfg.n_inputs < 4 or cfg.cka_inputs < 4:
        raise InputError("n_inputs and cka_inputs must be at least 4")
    if code is None or "code" not in cfg.levels:
        return None
    from twinspect.dl.modelclones.source import read_program

    return [read_program(c) for c in code]  # missing files fail before any model is loaded


def _load_states(model_paths: list[Path], cfg: CompareConfig,
                 classifiers: Sequence[Classifier] | None) -> tuple[list[_ModelState], list[dict]]:
    """Load the models (unless ``classifiers`` are given) and read their metadata.

    Returns:
        ``(one _ModelState per model, one metadata dict per model ({} when none))``.

    Raises:
        ModelError: a model file that cannot be loaded (named).
    """
    from twinspect.dl.adapters.metadata import read_metadata

    if classifiers is None:
        classifiers = load_models(model_paths, cfg.preprocess)
    metas = [(read_metadata(p) or {}) if p.exists() else {} for p in model_paths]
    states = [_ModelState(c, _model_info(i, p, c)) for i, (p, c) in enumerate(zip(model_paths, classifiers))]
    return states, metas


def _prepare_outputs(st: _ModelState, x: np.ndarray | None, data_name: str, cfg: CompareConfig) -> None:
    """Class probabilities of one model on its comparison inputs ``x`` and its DDV on random input pairs, into ``st``.

    ``x`` is None when no comparison input fits the model's input shape; a runtime failure or outputs
    with NaN/infinity leave ``st.probs`` None with the reason in ``st.probs_reason``.
    """
    if x is None:
        st.probs_reason = f"the {data_name} inputs do not fit input shape {tuple(st.clf.input_shape)}"
        return
    try:
        st.probs = st.clf.predict_proba(x)
    except Exception as exc:  # noqa: BLE001 - one model's runtime failure must not end the run
        st.probs_reason = _reason("outputs could not be computed", exc)
    if st.probs is not None and not np.all(np.isfinite(st.probs)):
        bad = int(np.sum(~np.all(np.isfinite(st.probs), axis=1)))
        st.probs_reason = f"the model's outputs contain NaN or infinity on {bad} of {len(x)} inputs"
        st.probs = None
    if st.probs is not None and len(x) >= 4:
        lft, rgt = modeldiff.profiling_pairs(len(x), cfg.modeldiff_pairs, seed=cfg.seed)
        st.ddv = modeldiff.ddv(st.probs, lft, rgt)


def _prepare_weights(st: _ModelState) -> None:
    """Canonical weights of one model and its parameter count (``st.info["params"]``), into ``st``;
    weights with NaN/infinity or a format without readable weights leave ``st.weights`` None with the
    reason in ``st.weights_reason``."""
    try:
        st.weights = st.clf.loaded.canonical_weights()
        st.info["params"] = int(sum(a.size for ps in st.weights.values() for a in ps.values()))
        bad_w = int(sum(np.sum(~np.isfinite(a)) for ps in st.weights.values() for a in ps.values()))
        if bad_w:
            st.weights, st.weights_reason = None, f"the weights contain {bad_w} NaN or infinite values"
    except NotSupportedError as exc:
        st.weights_reason = exc.reason
    except Exception as exc:  # noqa: BLE001
        st.weights_reason = _reason("weights could not be read", exc)


def _prepare_models(states: list[_ModelState], inputs: dict[tuple[int, ...], np.ndarray], data_name: str,
                    cfg: CompareConfig, quiet: bool) -> None:
    """Per model, once: outputs and DDV (always), weights (weights or reuse level), Gram matrices of
    the layer activations on the first ``cfg.cka_inputs`` inputs (representation or reuse level)."""
    from twinspect.progress import progress

    with progress("models: outputs, weights, activations", total=len(states), quiet=quiet) as bar:
        for st in states:
            x = inputs.get(tuple(st.clf.input_shape))
            st.x = x
            _prepare_outputs(st, x, data_name, cfg)
            if "weights" in cfg.levels or "reuse" in cfg.levels:
                _prepare_weights(st)
            if ("representation" in cfg.levels or "reuse" in cfg.levels) and x is not None:
                _prepare_grams(st, x[: cfg.cka_inputs])
            elif x is None:
                st.grams_reason = st.probs_reason
            bar.advance()


def _prepare_students(states: list[_ModelState], metas: list[dict], cfg: CompareConfig, quiet: bool) -> None:
    """Distil every model into the common student (``st.student``, or the reason in ``st.student_reason``)."""
    from twinspect.progress import progress

    dataset = cfg.data if cfg.data in ("mnist", "cifar10") else (metas[0].get("dataset") if metas else None)
    with progress("models: distilling", total=len(states), quiet=quiet) as bar:
        for i, st in enumerate(states):
            try:
                st.student = _distill_student(cfg, st, i, dataset)
            except NotSupportedError as exc:
                st.student_reason = exc.reason
            except Exception as exc:  # noqa: BLE001
                st.student_reason = _reason("distillation failed", exc)
            bar.advance()


def _code_level(programs: list[Any], mx: _Matrices) -> None:
    """The source-code measures of every ordered pair of training programs (asymmetric matrices)."""
    from twinspect.dl.modelclones.source import (
        NotApplicable,
        copydetect_scores,
        pycode_similar_score,
        token_lcs_scores,
    )

    n = mx.n
    cd = copydetect_scores(programs)
    tw = token_lcs_scores(programs)
    for i in range(n):
        for j in range(n):
            if i == j:
                for name in measures.names("code"):
                    mx.put(name, i, j, 1.0, symmetric=False)
                continue
            try:
                mx.put("code_pycode_similar", i, j, pycode_similar_score(programs[i], programs[j]), symmetric=False)
            except NotApplicable as exc:
                if i < j:
                    mx.skip("code_pycode_similar", i, j, str(exc))
                else:
                    mx.touch("code_pycode_similar")
            mx.put("code_copydetect", i, j, cd[i][j], symmetric=False)
            mx.put("code_token_lcs", i, j, tw[i][j], symmetric=False)
            if i < j and cd[i][j] is None:
                mx.skip("code_copydetect", i, j, "a program is too short or not tokenisable for winnowing")
            if i < j and tw[i][j] is None:
                mx.skip("code_token_lcs", i, j, "a program is in a language twinspect.code does not parse")


def _pair_weights(cfg: CompareConfig, mx: _Matrices, i: int, j: int, a: _ModelState, b: _ModelState,
                  weight_layers: dict[str, list[dict]], shared: dict[str, list[dict]],
                  values: dict[str, float | None]) -> None:
    """Weight cosine/Euclidean of pair (i, j) (same architecture only) and the per-layer breakdown, and the
    share of hidden-layer kernels the two have in common (any architectures; the matched kernels go into
    ``shared``); the cosine and the share go into ``values`` for the reuse score even when the weights
    level is not reported."""
    report = "weights" in cfg.levels
    if a.weights is None or b.weights is None:
        reason = a.weights_reason or b.weights_reason or "weights unavailable"
        if report and i < j:
            for name in ("weights_cosine", "weights_euclidean", "weights_shared"):
                mx.skip(name, i, j, reason)
        return
    sk = shared_kernels(a.weights, b.weights)
    values["weights_shared"] = sk.share
    if report:
        mx.put("weights_shared", i, j, sk.share)
        if i < j and sk.matches:
            shared[f"{i},{j}"] = sk.matches
    try:
        wc = compare_weights(a.weights, b.weights)
    except DifferentArchitectures as exc:
        if report and i < j:
            mx.skip("weights_cosine", i, j, f"different architectures: {exc}")
            mx.skip("weights_euclidean", i, j, f"different architectures: {exc}")
        return
    if report:
        mx.put("weights_cosine", i, j, wc.cosine)
        mx.put("weights_euclidean", i, j, wc.euclidean)
        if i < j:
            weight_layers[f"{i},{j}"] = wc.layers
    values["weights_cosine"] = wc.cosine


def _pair_distill(mx: _Matrices, i: int, j: int, a: _ModelState, b: _ModelState) -> None:
    """Weight cosine/Euclidean of the two models' distilled students."""
    if a.student is None or b.student is None:
        if i < j:
            reason = a.student_reason or b.student_reason or "no student"
            mx.skip("distill_cosine", i, j, reason)
            mx.skip("distill_euclidean", i, j, reason)
        return
    dc = compare_weights(a.student, b.student)
    mx.put("distill_cosine", i, j, dc.cosine)
    mx.put("distill_euclidean", i, j, dc.euclidean)


def _pair_cka(cfg: CompareConfig, mx: _Matrices, i: int, j: int, a: _ModelState, b: _ModelState,
              cka_maps: dict[str, dict], values: dict[str, float | None]) -> None:
    """Model-level CKA of pair (i, j) and its layer × layer map (needs the same inputs for both models);
    the score goes into ``values`` for the reuse score even when the representation level is not reported."""
    report = "representation" in cfg.levels
    if a.grams is None or b.grams is None:
        if report and i < j:
            mx.skip("cka", i, j, a.grams_reason or b.grams_reason or "no activations")
        return
    if next(iter(a.grams.values())).n != next(iter(b.grams.values())).n or tuple(a.clf.input_shape) != tuple(b.clf.input_shape):
        if report and i < j:
            mx.skip("cka", i, j, "different input shapes: no common inputs")
        return
    cm = cka_mod.cka_map(a.grams, b.grams)
    la, lb = list(a.grams), list(b.grams)
    ca = [g.constant for g in a.grams.values()]
    cb = [g.constant for g in b.grams.values()]
    score: float | None = cka_mod.model_cka(cm, ca, cb)
    if score is not None and not math.isfinite(score):
        score = None
        if report and i < j:
            cells = cka_mod.undefined_cells(cm, la, lb, ca, cb)
            why = (f"CKA undefined (non-finite) for {len(cells)} layer pair(s), e.g. {cells[0]}" if cells
                   else "every layer of a model is constant over the inputs")
            mx.skip("cka", i, j, why)
    if report:
        mx.put("cka", i, j, score)
        if i < j:
            cka_maps[f"{i},{j}"] = {
                "layers_a": la,
                "layers_b": lb,
                "matrix": [[_nan_to_none(v) for v in row] for row in cm.tolist()],
            }
    values["cka"] = score


#: The zoo-relative margins of ``io_logprob_cosine`` (:func:`~twinspect.dl.modelclones.reuse.zoo_margins`).
MARGINS: tuple[str, str] = ("io_logprob_margin_one", "io_logprob_margin_both")
#: Its architecture-peer z of pairs of different architectures (:func:`~twinspect.dl.modelclones.reuse.peer_outliers`).
PEERS: tuple[str, str] = ("io_peer_z_min", "io_peer_z_max")


def _zoo_margins(states: list[_ModelState], params: dict[str, list[float]] | None = None,
                 mode: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The zoo-relative measures of every pair of the run: ``io_logprob_cosine`` of every two models with
    outputs of the same input shape and class count (all of them, also in a run limited to some
    ``pairs``: the zoo is every model given), then :func:`~twinspect.dl.modelclones.reuse.zoo_margins` and,
    with each model's architecture (:func:`~twinspect.dl.modelclones.weights.architecture_signature` of
    its weights; unknown when they were not read), :func:`~twinspect.dl.modelclones.reuse.peer_outliers`.

    With ``mode`` ``"unrelated"`` (a calibration fitted so, :func:`~twinspect.dl.modelclones.reuse.zoo_mode`)
    and ``params`` holding the ``io`` set, the third models of a pair leave out those the ``io`` set flags
    as derived from either model (:func:`~twinspect.dl.modelclones.reuse.related_by_outputs`, on every
    pair's I/O features).

    Returns:
        ``(margin_one, margin_both, peer_z_min, peer_z_max)``, (M, M) float64 with NaN where undefined.
    """
    n = len(states)
    unrelated = mode == "unrelated" and params is not None and "io" in params
    names = ("io_jsd", "io_agreement", "ddv_random", "io_logprob")
    io = {k: np.full((n, n), np.nan) for k in names}
    for i in range(n):
        for j in range(i + 1, n):
            a, b = states[i], states[j]
            if (a.probs is None or b.probs is None or tuple(a.clf.input_shape) != tuple(b.clf.input_shape)
                    or a.clf.num_classes != b.clf.num_classes):
                continue
            io["io_logprob"][i, j] = io["io_logprob"][j, i] = outputs.logprob_cosine(a.probs, b.probs)
            if unrelated:
                vals = (1.0 - outputs.mean_input_jsd(a.probs, b.probs), outputs.top1_agreement(a.probs, b.probs),
                        modeldiff.ddv_similarity(a.ddv, b.ddv) if a.ddv is not None and b.ddv is not None else np.nan)
                for k, v in zip(names, vals):
                    io[k][i, j] = io[k][j, i] = v
    related = reuse.related_by_outputs(io, params) if unrelated and params is not None else None
    groups = [None if st.weights is None else architecture_signature(st.weights) for st in states]
    return (*reuse.zoo_margins(io["io_logprob"], related), *reuse.peer_outliers(io["io_logprob"], groups))


def _pair_io(cfg: CompareConfig, mx: _Matrices, i: int, j: int, a: _ModelState, b: _ModelState,
             values: dict[str, float | None], zoo: tuple[np.ndarray, ...] | None = None) -> str | None:
    """The I/O measures (with the random-pair DDV similarity and, from ``zoo``, the zoo-relative margins) of
    pair (i, j) (same input shape and class count).

    Returns:
        Why the I/O measures do not apply to the pair (None when they were computed, into ``values``
        and, when the io level is reported, into the matrices; also None when neither model says why).
    """
    io_ok = a.probs is not None and b.probs is not None
    io_reason: str | None = None
    if not io_ok:
        io_reason = a.probs_reason or b.probs_reason
    elif tuple(a.clf.input_shape) != tuple(b.clf.input_shape):
        io_ok, io_reason = False, f"different input shapes {tuple(a.clf.input_shape)} and {tuple(b.clf.input_shape)}"
    elif a.clf.num_classes != b.clf.num_classes:
        io_ok, io_reason = False, f"different class counts {a.clf.num_classes} and {b.clf.num_classes}"
    if not io_ok:
        if "io" in cfg.levels and i < j:
            for k in measures.names("io"):
                mx.skip(k, i, j, io_reason or "no outputs")
        return io_reason
    assert a.probs is not None and b.probs is not None
    vals = {
        "io_label_jsd": outputs.label_jsd(a.probs, b.probs),
        "io_mean_jsd": outputs.mean_input_jsd(a.probs, b.probs),
        "io_jaccard": outputs.class_jaccard(a.probs, b.probs),
        "io_top1_agreement": outputs.top1_agreement(a.probs, b.probs),
        "io_logprob_cosine": outputs.logprob_cosine(a.probs, b.probs),
        "io_ddv_random_pairs": modeldiff.ddv_similarity(a.ddv, b.ddv) if a.ddv is not None and b.ddv is not None else None,
    }
    if "io" in cfg.levels:
        for k, v in vals.items():
            mx.put(k, i, j, v)
    values.update(vals)
    if zoo is not None:
        for k, m in zip(MARGINS + PEERS, zoo):
            v = _nan_to_none(m[i, j]) if i != j else None
            if "io" in cfg.levels:
                if v is None and i < j:
                    mx.skip(k, i, j, "a zoo-relative margin needs a third model with comparable outputs (unrelated to both, with an 'unrelated' calibration)"
                            if k in MARGINS else
                            f"architecture-peer z needs two different known architectures (weights read) with at least {reuse.PEER_MIN} other models of each")
                else:
                    mx.put(k, i, j, v)
            values[k] = v
    return None


def _prepare_victim(st: _ModelState, cfg: CompareConfig) -> None:
    """ModelDiff's input pairs and DeepJudge's test cases on one model as the victim (once, on first
    use), or the reason there are none in ``st.baseline_reason``."""
    if st.baseline_done:
        return
    st.baseline_done = True
    if st.x is None or st.probs is None:
        st.baseline_reason = st.probs_reason or "no comparison inputs fit the model"
        return
    from twinspect.dl.adapters.differentiable import logit_fn

    f, why = logit_fn(st.clf)
    if f is None:
        st.baseline_reason = why
        return
    try:
        st.md_inputs = modeldiff.search_pairs(st.clf, f, st.x, cfg.modeldiff_search_pairs, seed=cfg.seed)
        st.dj_cases = deepjudge.generate(st.clf, f, st.x, cfg.deepjudge_seeds, seed=cfg.seed)
    except Exception as exc:  # noqa: BLE001 - one model's runtime failure must not end the run
        st.md_inputs, st.dj_cases = None, None
        st.baseline_reason = _reason("test input generation on the first model failed", exc)


def _pair_baselines(cfg: CompareConfig, mx: _Matrices, i: int, j: int, a: _ModelState, b: _ModelState) -> None:
    """ModelDiff and DeepJudge's black-box metrics with model i as the victim and model j as the
    suspect, into cell (i, j) only (the measures are directional); 1 / 0 / 0 on the diagonal."""
    names = measures.names("baselines")
    _prepare_victim(a, cfg)
    reason = a.baseline_reason
    if reason is None and i != j:
        if b.probs is None:
            reason = b.probs_reason or "no outputs of the second model"
        elif tuple(a.clf.input_shape) != tuple(b.clf.input_shape):
            reason = f"different input shapes {tuple(a.clf.input_shape)} and {tuple(b.clf.input_shape)}"
        elif a.clf.num_classes != b.clf.num_classes:
            reason = f"different class counts {a.clf.num_classes} and {b.clf.num_classes}"
    if reason is not None:
        if i != j:
            for k in names:
                mx.skip(k, i, j, reason)
        else:
            for k in names:
                mx.touch(k)
        return
    assert a.md_inputs is not None and a.dj_cases is not None
    try:
        vals: dict[str, float | None] = {"modeldiff": modeldiff.similarity(a.md_inputs, b.clf)}
        dj = deepjudge.metrics(a.dj_cases, b.clf)
        vals["deepjudge_robd"], vals["deepjudge_jsd"] = dj["robd"], dj["jsd"]
    except Exception as exc:  # noqa: BLE001
        for k in names:
            mx.skip(k, i, j, _reason("the second model failed on the generated inputs", exc))
        return
    for k, v in vals.items():
        if v is None or not math.isfinite(v):
            mx.skip(k, i, j, "no adversarial example of the first model succeeded (DeepJudge has no test case)"
                    if k.startswith("deepjudge") else f"{k} is NaN for this pair")
        else:
            mx.put(k, i, j, v, symmetric=False)


def _pair_reuse(mx: _Matrices, i: int, j: int, values: dict[str, float | None], params: dict[str, list[float]] | None,
                io_reason: str | None, peer_rule: bool = False) -> None:
    """The reuse score of pair (i, j) from the measure ``values`` computed for it (1 on the diagonal;
    :func:`~twinspect.dl.modelclones.reuse.with_shared_weights` for models sharing hidden-layer kernels; with
    ``peer_rule``, :func:`~twinspect.dl.modelclones.reuse.with_peer_outlier` after it)."""
    if i == j:
        mx.put("reuse", i, j, 1.0)
        return
    score = reuse.with_shared_weights(reuse.reuse_score(measures.reuse_features(values), params),
                                      values.get("weights_shared"))
    if peer_rule:
        score = reuse.with_peer_outlier(score, values.get("io_peer_z_min"), values.get("io_peer_z_max"))
    mx.put("reuse", i, j, score)
    if score is None:
        mx.skip("reuse", i, j, io_reason or "no level with enough measures applies")


def _all_pairs(states: list[_ModelState], cfg: CompareConfig, mx: _Matrices, pairs: Sequence[tuple[int, int]] | None,
               params: dict[str, list[float]] | None, quiet: bool
               ) -> tuple[dict[str, dict], dict[str, list[dict]], dict[str, list[dict]]]:
    """Every measure of every pair i <= j (or of ``pairs`` and the diagonal), level by level;
    ``params`` are the reuse-score coefficients (:func:`~twinspect.dl.modelclones.reuse.load_params`).

    Returns:
        ``(cka_maps, weight_layers, shared_weights)``, keyed ``"i,j"`` for i < j (``shared_weights``: the
        hidden-layer kernels the pair shares, for pairs that share any).
    """
    from twinspect.progress import progress

    n = mx.n
    cka_maps: dict[str, dict] = {}
    weight_layers: dict[str, list[dict]] = {}
    shared: dict[str, list[dict]] = {}
    zoo = None
    if "io" in cfg.levels or "reuse" in cfg.levels:
        mode = reuse.zoo_mode(cfg.calibration)
        zoo_params = params if params is not None else (reuse.load_params(cfg.calibration) if mode == "unrelated" else None)
        zoo = _zoo_margins(states, zoo_params, mode)
    wanted = None if pairs is None else {(min(i, j), max(i, j)) for i, j in pairs}
    ordered = None if pairs is None else {(int(i), int(j)) for i, j in pairs}
    n_pairs = n * (n - 1) // 2 if wanted is None else len({p for p in wanted if p[0] != p[1]})
    with progress("models: pairs", total=n_pairs, quiet=quiet) as bar:
        for i in range(n):
            for j in range(i, n):
                if wanted is not None and i != j and (i, j) not in wanted:
                    continue
                a, b = states[i], states[j]
                values: dict[str, float | None] = {}  # raw measure values of the pair (feed the reuse score)
                if "weights" in cfg.levels or "reuse" in cfg.levels:
                    _pair_weights(cfg, mx, i, j, a, b, weight_layers, shared, values)
                if cfg.distill_student and "weights" in cfg.levels:
                    _pair_distill(mx, i, j, a, b)
                if "representation" in cfg.levels or "reuse" in cfg.levels:
                    _pair_cka(cfg, mx, i, j, a, b, cka_maps, values)
                io_reason = _pair_io(cfg, mx, i, j, a, b, values, zoo)
                if "baselines" in cfg.levels:
                    for p, q in ((i, j),) if i == j else ((i, j), (j, i)):
                        if ordered is None or (p, q) in ordered or p == q:
                            _pair_baselines(cfg, mx, p, q, states[p], states[q])
                if "reuse" in cfg.levels:
                    _pair_reuse(mx, i, j, values, params, io_reason, cfg.peer_rule)
                if i < j:
                    bar.advance()
    return cka_maps, weight_layers, shared


def _assemble(states: list[_ModelState], mx: _Matrices, cka_maps: dict[str, dict], weight_layers: dict[str, list[dict]],
              shared: dict[str, list[dict]], cfg: CompareConfig, data_name: str, timings: dict[str, float]) -> Comparison:
    """The :class:`Comparison`: the measures computed, in registry order, each with its level and direction."""
    result_measures = {
        m.name: {"level": m.level, "higher_is_similar": m.higher_is_similar, "matrix": mx.mats[m.name]}
        for m in measures.REGISTRY
        if m.name in mx.mats
    }
    conf = asdict(cfg)
    conf["data"] = data_name
    conf["levels"] = list(cfg.levels)
    return Comparison([s.info for s in states], result_measures, mx.skipped, cka_maps, weight_layers, conf, timings,
                      shared)


def compare_models(
    paths: Sequence[str | Path],
    *,
    code: Sequence[str | Path] | None = None,
    config: CompareConfig | None = None,
    classifiers: Sequence[Classifier] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> Comparison:
    """Compare every pair of models at every level that applies.

    The steps: check the arguments (:func:`_validate`), load the models (:func:`_load_states`), choose
    the comparison inputs (:func:`_inputs_for`), compute each model's outputs, weights and activations
    once (:func:`_prepare_models`) and, with ``distill_student``, its distilled student
    (:func:`_prepare_students`), the code level on the training programs (:func:`_code_level`), every
    pair's measures level by level (:func:`_all_pairs`), and the result (:func:`_assemble`).

    Args:
        paths: model files (any adapter format), at least two.
        code: one training program (file or folder) per model, same order, or None.
        config: :class:`CompareConfig` (defaults when None).
        classifiers: already loaded classifiers for ``paths`` (skips loading; tests, benchmarks).
        pairs: compute only these (i, j) pairs (and the diagonal); the other cells stay ``None``
            without a ``skipped`` entry (benchmarks on many models).

    Returns:
        A :class:`Comparison`.

    Raises:
        InputError: fewer than two models, a ``--code`` list of another length or a missing code
            file, data of a shape that fits no model, unknown data name.
        ModelError: a model file that cannot be loaded (named).
    """
    cfg = config or CompareConfig()
    quiet = cfg.verbose < 1
    model_paths = [Path(p) for p in paths]
    programs = _validate(paths, code, cfg)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    states, metas = _load_states(model_paths, cfg, classifiers)
    timings["load_s"] = time.perf_counter() - t0
    data_name, inputs = _inputs_for(cfg, metas, [tuple(s.clf.input_shape) for s in states])

    t1 = time.perf_counter()
    _prepare_models(states, inputs, data_name, cfg, quiet)
    timings["per_model_s"] = time.perf_counter() - t1
    if cfg.distill_student and "weights" in cfg.levels:
        t2 = time.perf_counter()
        _prepare_students(states, metas, cfg, quiet)
        timings["distill_s"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    mx = _Matrices(len(states))
    params = reuse.load_params(cfg.calibration) if "reuse" in cfg.levels else None
    if programs is not None:
        _code_level(programs, mx)
    cka_maps, weight_layers, shared = _all_pairs(states, cfg, mx, pairs, params, quiet)
    timings["pairs_s"] = time.perf_counter() - t3
    timings["total_s"] = time.perf_counter() - t0
    return _assemble(states, mx, cka_maps, weight_layers, shared, cfg, data_name, timings)


def write_plots(result: Comparison, directory: str | Path) -> list[Path]:
    """One heatmap PNG per measure (``<measure>.png``) and one CKA map per pair (``cka_<i>_<j>.png``).

    Returns:
        The files written (each atomically).
    """
    from twinspect.reports.plots import heatmap

    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise InputError("--plots needs a directory, not a file", d)
    d.mkdir(parents=True, exist_ok=True)
    labels = [f"{m['id']}:{m['name']}" for m in result.models]
    out = []
    for name, meas in result.measures.items():
        m = result.matrix(name)
        bounded = measures.BY_NAME[name].unit_range
        out.append(heatmap(m, d / f"{name}.png", labels, labels, title=f"{name} ({meas['level']})",
                           vmin=0.0 if bounded else None, vmax=1.0 if bounded else None))
    for key, cm in result.cka_maps.items():
        i, j = key.split(",")
        mat = np.array([[np.nan if v is None else v for v in row] for row in cm["matrix"]], dtype=float)
        out.append(heatmap(mat, d / f"cka_{i}_{j}.png", cm["layers_a"], cm["layers_b"],
                           title=f"CKA {result.models[int(i)]['name']} × {result.models[int(j)]['name']}", vmin=0.0, vmax=1.0))
    return out


__all__ = ["DATA_NAMES", "MEASURES", "CompareConfig", "Comparison", "compare_models", "load_models", "write_plots"]
