"""The reuse score: one calibrated probability per pair that one model is derived from the other.

Derived models (fine-tuned, pruned, quantised, distilled, weight-perturbed, or chains of these) keep
their parent's weights where the architecture is kept, its internal representations, and its
per-input behaviour, including on inputs far from the training data; independently trained models
of the same task agree with each other on natural test inputs (both are accurate) but not in those
finer respects. The score is a logistic regression over the levels that apply to a pair:

=================  =============================================================================
feature            what
=================  =============================================================================
``weights``        cosine similarity of all weights (same architecture only)
``cka``            model-level linear CKA (unbiased HSIC) of the layer × layer map
``io_jsd``         1 − mean per-input JSD of the probability vectors
``io_agreement``   top-1 agreement
``ddv_random``     similarity of decision distance vectors on random input pairs (ModelDiff's DDV
                   without its input-pair search)
``io_logprob``     mean cosine of the centred log-probability vectors ("dark knowledge")
``margin_one``     zoo-relative: how much closer the two models are (``io_logprob``) than the
                   *nearer* of them is to any third model of the comparison
``margin_both``    zoo-relative: the same against the *farther* of them (≥ 0 when the two are
                   each other's nearest neighbours)
=================  =============================================================================

Each feature is one measure of :mod:`twinspect.dl.modelclones.measures` (its registry says which, and
:func:`~twinspect.dl.modelclones.measures.reuse_features` derives the features from a pair's measure
values). Every feature ``x`` (a similarity, at most 1) enters the regression as ``−log(1 − x + 1e-6)``, which
spreads out the region near 1 where derived and independent models differ (agreements of 0.95 and
0.999 are far apart in that scale, 0.5 and 0.6 are not).

The two *zoo* features (:func:`zoo_margins`) compare a pair with the other models of the same run,
in the spirit of ModelDiff's ranking rule and DeepJudge's per-victim thresholds: models of one kind
(e.g. MLPs, which share a near-linear decision geometry) agree closely with *every* model of that
kind, a student agrees most with its own teacher. They are differences on the ``−log(1 − x)`` scale
and enter the regression as they are. With fewer than three comparable models they are undefined
and the score falls back to the sets without them, so a run of two models still gets a score. A
calibration file may say ``"zoo_margins": "unrelated"`` (:func:`zoo_mode`): its zoo sets were fitted
with margins against *unrelated* third models only — those the score's ``io`` set (outputs alone) does not
flag as derived from either model of the pair (:func:`related_by_outputs`) — so that a model's own
quantised or fine-tuned copy does not set its reference; ``models compare`` then computes them so.
:func:`fit_params` can constrain every coefficient to be ≥ 0 (``nonneg``), so that a higher similarity
never lowers the score.

One coefficient set per *feature set* (``full``: weights and the five below; ``no_weights_zoo`` /
``no_weights``: different architectures, with / without the zoo features; ``io_zoo`` / ``io``: no
activations either); a pair uses the first set in :data:`FEATURE_SETS` order whose features it has
and whose coefficients the calibration holds (a calibration file without the zoo sets, as written
before they existed, scores every pair with the other three). The shipped
coefficients (``reuse_calibration.json`` beside this module) were fitted by
``benchmarks/models_reuse_holdout3.py calibrate`` on 7,668 labelled pairs of 221 MNIST models (43
families: the first two hold-outs), with non-negative coefficients and the zoo margins against every
third model (chosen there by leave-one-family-out), frozen before one run on a third hold-out of new
kinds (``benchmarks/results/models_reuse_holdout3.md``); without that file the hand-set defaults below
are used. Each set is fitted on the
pairs it scores (``no_weights`` on pairs of different architectures, whose only derived kind is
distillation), with balanced class weights and an intercept capped so that at most
:data:`DEFAULT_MAX_FPR` of those calibration pairs' independent ones reach the default threshold
(:func:`fit_params`). The score is therefore a balanced-prior score in (0, 1), not a probability
at the base rate of any particular zoo; ``--threshold`` (default 0.5) flags suspected derived pairs.

A pair whose models share hidden-layer kernels (the ``weights_shared`` measure) is scored 1.0 whatever the
calibrated score says, or when no feature set applies (different class counts): :func:`with_shared_weights`.
A pair of different architectures in which each model stands out among the other's architecture-mates of the
same comparison (a distilled student and its teacher: :func:`peer_outliers`, the ``io_peer_z_min`` /
``io_peer_z_max`` measures) can be scored at least :data:`PEER_RULE_SCORE`: :func:`with_peer_outlier`, applied
only on request (``models compare --peer-rule``): on the fourth hold-out, built after its thresholds were fixed,
it found 3 more of 18 distilled students and flagged 10 more of 1,149 independent pairs. Both are rules with
fixed floors, not part of the fitted coefficients.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from twinspect.errors import InputError

#: The zoo-relative features (:func:`zoo_margins`): they enter the regression untransformed.
ZOO_FEATURES: tuple[str, ...] = ("margin_one", "margin_both")

#: Feature set → its features, in coefficient order (the calibration file's order: do not reorder),
#: in order of preference (:func:`feature_set`).
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "full": ("weights", "cka", "io_jsd", "io_agreement", "ddv_random", "io_logprob"),
    "no_weights_zoo": ("cka", "io_jsd", "io_agreement", "ddv_random", "io_logprob", *ZOO_FEATURES),
    "no_weights": ("cka", "io_jsd", "io_agreement", "ddv_random", "io_logprob"),
    "io_zoo": ("io_jsd", "io_agreement", "ddv_random", "io_logprob", *ZOO_FEATURES),
    "io": ("io_jsd", "io_agreement", "ddv_random", "io_logprob"),
}

#: The sets every calibration file must hold (the zoo sets are optional: older files lack them).
REQUIRED_SETS: tuple[str, ...] = ("full", "no_weights", "io")

#: Hand-set coefficients (intercept first, on the transformed features), used when no calibration
#: file is present.
DEFAULT_PARAMS: dict[str, list[float]] = {
    "full": [-6.0, 2.0, 0.2, 0.2, 0.2, 0.2, 0.5],
    "no_weights_zoo": [-8.0, 0.3, 0.2, 0.2, 0.2, 1.5, 1.0, 1.0],
    "no_weights": [-8.0, 0.3, 0.2, 0.2, 0.2, 1.5],
    "io_zoo": [-8.0, 0.3, 0.3, 0.3, 1.5, 1.0, 1.0],
    "io": [-8.0, 0.3, 0.3, 0.3, 1.5],
}


def transform(x: float) -> float:
    """The regression's input for a similarity ``x``: ``−log(1 − x + 1e-6)``."""
    return float(-math.log(max(1.0 - float(x), 0.0) + 1e-6))


def transform_array(x: np.ndarray) -> np.ndarray:
    """:func:`transform` of every element: float64 array of ``x``'s shape (NaN stays NaN)."""
    with np.errstate(invalid="ignore"):
        return -np.log(np.clip(1.0 - np.asarray(x, dtype=np.float64), 0.0, None) + 1e-6)


def _regressor(feature: str, value: float) -> float:
    """A feature's value as the regression takes it: zoo features as they are, similarities transformed."""
    return float(value) if feature in ZOO_FEATURES else transform(value)


def _transformed(sim: np.ndarray) -> np.ndarray:
    """``t`` of a square similarity matrix (:func:`transform_array`), NaN where ``sim`` is not finite and on the
    diagonal.

    Raises:
        ValueError: ``sim`` is not square.
    """
    s = np.asarray(sim, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"a similarity matrix must be square, got shape {s.shape}")
    t = transform_array(s)
    t[~np.isfinite(s)] = np.nan
    np.fill_diagonal(t, np.nan)
    return t


def zoo_margins(sim: np.ndarray, related: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The zoo-relative margins of every pair of a run from its matrix of one similarity.

    On the scale ``t(x) = −log(1 − x + 1e-6)``: for a pair (i, j), ``o_i`` is the largest ``t`` of model i
    with any third model k ∉ {i, j} (likewise ``o_j``); ``margin_one = t(s_ij) − min(o_i, o_j)`` (≥ 0 when at
    least one of the two is nearer to the other than to any third model) and ``margin_both = t(s_ij) −
    max(o_i, o_j)`` (≥ 0 when they are each other's nearest neighbours).

    With ``related``, the third models of a pair are its *unrelated* ones only: a model k related to i or to
    j (``related[i, k]`` or ``related[j, k]``, e.g. flagged as derived from one of them by the score without
    zoo features) is not a third model of (i, j). A model's own quantised or fine-tuned copy then no longer
    sets its reference (its nearest third model would otherwise be that near-duplicate, and a pair of the
    model with its student would look no nearer than the model with its copy).

    Args:
        sim: (M, M) float similarity matrix (at most 1; the reuse score uses ``io_logprob_cosine``); NaN
            where a pair is not comparable. The diagonal is ignored.
        related: optional (M, M) bool matrix (symmetric; the diagonal is ignored).

    Returns:
        ``(margin_one, margin_both)``, two (M, M) float64 arrays, symmetric when ``sim`` (and ``related``)
        are; NaN on the diagonal, where ``s_ij`` is NaN, and where model i or j has no finite similarity with
        a third model.

    Raises:
        ValueError: ``sim`` is not square, or ``related`` has another shape.
    """
    t = _transformed(sim)
    m = len(t)
    filled = np.where(np.isfinite(t), t, -np.inf)
    if related is None:
        order = np.argsort(-filled, axis=1)
        first = order[:, 0] if m else np.zeros(0, int)
        top1 = filled[np.arange(m), first] if m > 0 else np.zeros(0)
        top2 = filled[np.arange(m), order[:, 1]] if m > 1 else np.full(m, -np.inf)
        # best of row i with j left out: the second best where the best is j itself
        best = np.where(first[:, None] == np.arange(m)[None, :], top2[:, None], top1[:, None])
    else:
        rel = np.asarray(related, dtype=bool)
        if rel.shape != t.shape:
            raise ValueError(f"related must have the similarity matrix's shape {t.shape}, got {rel.shape}")
        free = ~(rel | rel.T)
        np.fill_diagonal(free, False)  # a model is no third model of its own pairs
        best = np.full((m, m), -np.inf)
        for i in range(m):
            # third models k of pair (i, j): k ≠ i, j and unrelated to both
            allowed = free[i][None, :] & free  # (j, k)
            best[i] = np.max(np.where(allowed, filled[i][None, :], -np.inf), axis=1, initial=-np.inf)
    oi, oj = best, best.T
    with np.errstate(invalid="ignore"):
        one = t - np.minimum(oi, oj)
        both = t - np.maximum(oi, oj)
    bad = ~np.isfinite(t) | ~np.isfinite(oi) | ~np.isfinite(oj)
    one[bad] = np.nan
    both[bad] = np.nan
    return one, both

CALIBRATION_FILE = Path(__file__).with_name("reuse_calibration.json")

DEFAULT_THRESHOLD = 0.5

#: False-positive budget per feature set on the calibration pairs (see :func:`fit_params`).
DEFAULT_MAX_FPR = 0.01


def related_by_outputs(features: Mapping[str, np.ndarray], params: Mapping[str, Sequence[float]],
                       threshold: float | None = None) -> np.ndarray:
    """Which pairs of a run the score's ``io`` set (outputs alone, no zoo features) flags as derived: the
    *related* models :func:`zoo_margins` leaves out of a pair's third models.

    Args:
        features: the ``io`` set's features (``io_jsd``, ``io_agreement``, ``ddv_random``, ``io_logprob``),
            each an (M, M) float matrix of similarities; NaN where a pair is not comparable.
        params: coefficients holding the ``io`` set.
        threshold: score at or above which a pair is related (default :data:`DEFAULT_THRESHOLD`).

    Returns:
        (M, M) bool, False on the diagonal and wherever a feature is NaN.

    Raises:
        KeyError: ``params`` has no ``io`` set or ``features`` lacks one of its features.
    """
    coef = params["io"]
    names = FEATURE_SETS["io"]
    mats = [np.asarray(features[f], dtype=np.float64) for f in names]
    ok = np.all([np.isfinite(m) for m in mats], axis=0)
    z = np.full(mats[0].shape, float(coef[0]))
    for c, m in zip(coef[1:], mats):
        z = z + float(c) * transform_array(np.nan_to_num(m, nan=0.0))
    th = DEFAULT_THRESHOLD if threshold is None else threshold
    rel = ok & (z >= math.log(th / (1.0 - th)))
    np.fill_diagonal(rel, False)
    return rel


def zoo_mode(path: str | Path | None = None) -> str:
    """How a calibration's zoo sets were fitted: ``"unrelated"`` (margins against third models that the ``io`` set
    does not flag as derived from either model, :func:`related_by_outputs`) or ``"all"`` (every third model; files
    without the key, written before it existed).

    Raises:
        InputError: the file exists but is not JSON, or names another mode.
    """
    p = Path(path) if path is not None else CALIBRATION_FILE
    if not p.exists():
        return "all"
    try:
        mode = json.loads(p.read_text(encoding="utf-8")).get("zoo_margins", "all")
    except (OSError, ValueError, AttributeError) as exc:
        raise InputError(f"not a valid reuse calibration ({exc})", p) from exc
    if mode not in ("all", "unrelated"):
        raise InputError(f"unknown zoo_margins {mode!r} (expected 'all' or 'unrelated')", p)
    return str(mode)


def load_params(path: str | Path | None = None) -> dict[str, list[float]]:
    """Coefficients per feature set: from ``path`` (default: the shipped calibration file) or the defaults.

    A file must hold the sets of :data:`REQUIRED_SETS`; a zoo set it lacks is left out of the result
    (the pairs it would score use the set without the zoo features).

    Raises:
        InputError: the file exists but is not a valid calibration (names the file).
    """
    p = Path(path) if path is not None else CALIBRATION_FILE
    if not p.exists():
        if path is not None:
            raise InputError("reuse calibration file does not exist", p)
        return dict(DEFAULT_PARAMS)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        params = {k: [float(v) for v in data["params"][k]] for k in FEATURE_SETS
                  if k in REQUIRED_SETS or k in data["params"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a valid reuse calibration ({exc})", p) from exc
    for k, vs in params.items():
        names = FEATURE_SETS[k]
        if len(vs) != len(names) + 1:
            raise InputError(f"calibration for {k!r} needs {len(names) + 1} coefficients", p)
    return params


def feature_set(features: Mapping[str, float | None], available: Iterable[str] | None = None) -> str | None:
    """The first feature set (in :data:`FEATURE_SETS` order) whose features are all present and finite.

    Args:
        features: feature name → value (None when not applicable).
        available: the sets to choose from (default: all), e.g. the sets a calibration holds.

    Returns:
        The set's name, or None when no set applies.
    """
    allowed = set(FEATURE_SETS) if available is None else set(available)
    for name, names in FEATURE_SETS.items():
        if name in allowed and all(features.get(f) is not None and math.isfinite(float(features[f])) for f in names):  # type: ignore[arg-type,misc]
            return name
    return None


def with_shared_weights(score: float | None, shared: float | None) -> float | None:
    """The reuse score of a pair whose models may share hidden-layer kernels: 1.0 when they share any.

    Shared hidden kernels (``weights_shared`` > 0, :func:`twinspect.dl.modelclones.weights.shared_kernels`:
    element-wise near-identical weights of a layer that independent trainings cannot reproduce) are
    direct evidence that one model was built from the other's weights, or both from a common one — a
    frozen or lightly fine-tuned backbone under a new head, a quantised or pruned copy — at any
    architecture and any number of classes, where the calibrated score may have no feature set that
    applies. The rule is not fitted: the calibrated score is kept for every other pair.

    Args:
        score: the calibrated score (:func:`reuse_score`), or None when no feature set applies.
        shared: the pair's ``weights_shared`` share in [0, 1], or None when its weights are unavailable.

    Returns:
        1.0 when ``shared`` > 0, else ``score``.
    """
    if shared is not None and shared > 0.0:
        return 1.0
    return score


#: Models of an architecture, besides the pair's two, that :func:`peer_outliers` needs on each side.
PEER_MIN = 5
#: Smallest spread (standard deviation, on the ``t`` scale) a peer group's similarities are divided by:
#: a tight group would otherwise turn a small lead into a large z.
PEER_STD_FLOOR = 0.15
#: The peer-outlier rule (:func:`with_peer_outlier`): the larger of the pair's two z at least this ...
PEER_Z_HIGH = 2.5
#: ... and the smaller at least this.
PEER_Z_LOW = 0.7
#: The reuse score a pair the peer-outlier rule flags gets at least (a rule, not a fitted probability).
PEER_RULE_SCORE = 0.9


def peer_outliers(sim: np.ndarray, groups: Sequence[object | None]) -> tuple[np.ndarray, np.ndarray]:
    """How far each model of a pair of *different* architectures stands out among its own architecture's
    models, as seen from the other model: the zoo evidence for a distilled student.

    A student distilled into another architecture inherits its teacher's per-input behaviour (Hinton et al.,
    "Distilling the Knowledge in a Neural Network", 2015), but every model of one architecture also shares
    that architecture's own inductive bias, so an absolute output similarity does not tell a student from an
    independent model of the student's architecture (``io_logprob_cosine`` of test v3's independent
    cross-architecture pairs reaches 0.966, its students 0.867). Against the models of the student's own
    architecture that bias cancels: seen from model i, ``z(i → j) = (t(s_ij) − median_k t(s_ik)) / max(sd_k
    t(s_ik), PEER_STD_FLOOR)`` over the *peers* k of j (the other models of j's group, k ∉ {i, j}, with a
    finite similarity to i; ``t(x) = −log(1 − x + 1e-6)``, :func:`transform_array`). A teacher sees its
    student far above the student's architecture-mates, and the student sees its teacher above the teacher's.
    Peer-relative scores in the spirit of DeepJudge's per-victim thresholds (Chen et al., IEEE S&P 2022);
    the rule built on them (:func:`with_peer_outlier`) is twinspect's.

    Args:
        sim: (M, M) similarity matrix (at most 1; ``models compare`` uses ``io_logprob_cosine``), NaN where a
            pair is not comparable; the diagonal is ignored.
        groups: M architecture labels (``models compare``: :func:`~twinspect.dl.modelclones.weights.architecture_signature`
            of the weights), None for a model of unknown architecture (never a peer, no z).

    Returns:
        ``(z_min, z_max)``: two (M, M) float64 arrays, symmetric, the smaller and the larger of ``z(i → j)``
        and ``z(j → i)``; NaN on the diagonal, for pairs of one group or with an unknown one, and where either
        side has fewer than :data:`PEER_MIN` peers.

    Raises:
        ValueError: ``sim`` is not square, or ``groups`` has another length.
    """
    t = _transformed(sim)
    m = len(t)
    if len(groups) != m:
        raise ValueError(f"need one group per model: {m} models, {len(groups)} groups")
    members: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        if g is not None:
            members.setdefault(g, []).append(i)
    z = np.full((m, m), np.nan)  # z[i, j] = z(i → j)
    for i in range(m):
        for j in range(m):
            gi, gj = groups[i], groups[j]
            if i == j or gi is None or gj is None or gi == gj or not np.isfinite(t[i, j]):
                continue
            peers = [k for k in members[gj] if k != j and k != i and np.isfinite(t[i, k])]
            if len(peers) < PEER_MIN:
                continue
            v = t[i, peers]
            z[i, j] = (t[i, j] - float(np.median(v))) / max(float(np.std(v)), PEER_STD_FLOOR)
    both = np.isfinite(z) & np.isfinite(z.T)
    return np.where(both, np.minimum(z, z.T), np.nan), np.where(both, np.maximum(z, z.T), np.nan)


def peer_rule_holds(z_min: float | None, z_max: float | None) -> bool:
    """Whether the peer-outlier rule (:func:`with_peer_outlier`) holds for a pair's :func:`peer_outliers` values:
    ``z_max`` ≥ :data:`PEER_Z_HIGH` and ``z_min`` ≥ :data:`PEER_Z_LOW` (False when either is None or NaN)."""
    if z_min is None or z_max is None or not (math.isfinite(z_min) and math.isfinite(z_max)):
        return False
    return z_max >= PEER_Z_HIGH and z_min >= PEER_Z_LOW


def with_peer_outlier(score: float | None, z_min: float | None, z_max: float | None) -> float | None:
    """The reuse score of a pair of different architectures, lifted when each model stands out among the other's
    architecture-mates (:func:`peer_outliers`): at least :data:`PEER_RULE_SCORE` when ``z_max`` ≥
    :data:`PEER_Z_HIGH` and ``z_min`` ≥ :data:`PEER_Z_LOW`.

    The thresholds were chosen on test v3 of ``benchmarks/models_reuse_holdout3.py``, which had been read before
    (there the rule holds for 23 of its 24 distilled pairs and 9 of its 2,424 independent cross-architecture
    pairs, 0.37 %), and fixed before the fourth hold-out (``benchmarks/models_reuse_holdout4.py``) was built.
    The rule needs a zoo: at least :data:`PEER_MIN` other models of each of the two architectures in one
    comparison. On the fourth hold-out it lifted 3 of 18 distilled pairs over the threshold (the students of one
    new architecture, LeNet-1, stand out from no teacher: z ≈ 0) and 10 of 1,149 independent pairs, all with a
    model of a *clustered* peer group (six students and two label-trained models of one architecture: the two are
    outliers of their group from every model's view), so ``models compare`` applies it only with ``--peer-rule``.
    Its known weak spot: a student also stands out among its own architecture's models as seen from
    any model *like* its teacher, so when the teacher's architecture-mates are near-identical (a tight group,
    e.g. one recipe run from several seeds), one of them can pass ``z_min`` by a small lead and the student is
    flagged with it too.

    Args:
        score: the reuse score so far (None when no feature set applies).
        z_min, z_max: the pair's :func:`peer_outliers` values (None or NaN when undefined).

    Returns:
        ``max(score, PEER_RULE_SCORE)`` (or :data:`PEER_RULE_SCORE` when ``score`` is None) when the rule holds,
        else ``score``.
    """
    if not peer_rule_holds(z_min, z_max):
        return score
    return PEER_RULE_SCORE if score is None else max(score, PEER_RULE_SCORE)


def reuse_score(features: Mapping[str, float | None], params: Mapping[str, Sequence[float]] | None = None) -> float | None:
    """Probability that one model of the pair is derived from the other.

    Args:
        features: values of the features named in :data:`FEATURE_SETS` (None when not applicable).
        params: coefficients per feature set (default: :func:`load_params`).

    Returns:
        A float in (0, 1), or None when not even the ``io`` features are available.
    """
    params = params or load_params()
    fs = feature_set(features, params.keys())
    if fs is None:
        return None
    coef = params[fs]
    z = coef[0] + sum(c * _regressor(f, features[f]) for c, f in zip(coef[1:], FEATURE_SETS[fs]))  # type: ignore[arg-type,misc]
    return float(1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0))))


def fit_params(
    rows: Sequence[Mapping[str, float | None]],
    labels: Sequence[int],
    C: float = 1.0,
    max_fpr: float | None = DEFAULT_MAX_FPR,
    min_positives: int = 3,
    nonneg: bool = False,
) -> dict[str, list[float]]:
    """Fit one logistic regression per feature set on labelled pairs (scikit-learn, L2, ``C``).

    Each set is fitted on the pairs it will score: those whose first available set it is
    (:func:`feature_set`) — the ``no_weights`` sets on pairs of different architectures, where the
    only derived kind is distillation, not on the same-architecture pairs that dominate a labelled
    set; a set without the zoo features on the pairs it scores when the zoo sets are not used (the
    pairs whose first set it is once the zoo sets are left out). When that population has fewer than ``min_positives`` derived or no independent pairs, the
    set is fitted on every pair that has its features instead (a pair with weights then contributes
    to all three sets). Classes are weighted inversely to their frequency (``class_weight=
    "balanced"``), so a rare derived kind is not outvoted by the independent pairs. Then, when
    ``max_fpr`` is given, the intercept is lowered (never raised) until at most that fraction of the
    fitting population's independent pairs scores ≥ :data:`DEFAULT_THRESHOLD` — a Neyman–Pearson
    operating point chosen on the calibration pairs only.

    Args:
        rows: feature dicts of the calibration pairs.
        labels: 1 = derived, 0 = independent.
        C: inverse L2 strength.
        max_fpr: false-positive budget per feature set at the default threshold, or None for none.
        min_positives: fewest derived pairs for fitting a set on its own population.
        nonneg: constrain every coefficient (not the intercept) to be ≥ 0, so that a higher similarity or
            margin never lowers the score (:func:`_fit_nonneg`; the same objective as scikit-learn's).

    Returns:
        ``{feature set: [intercept, coef...]}``; a set without both classes keeps its defaults.
    """
    from sklearn.linear_model import LogisticRegression

    out: dict[str, list[float]] = {}
    y_all = np.asarray(labels, dtype=int)
    own = [feature_set(r) for r in rows]
    # the set a pair falls back to when a calibration lacks the zoo sets (or a run has < 3 models)
    own_plain = [feature_set(r, [k for k in FEATURE_SETS if not set(FEATURE_SETS[k]) & set(ZOO_FEATURES)]) for r in rows]
    for name, names in FEATURE_SETS.items():
        zoo_set = bool(set(names) & set(ZOO_FEATURES))
        has = [i for i, r in enumerate(rows) if all(r.get(f) is not None and math.isfinite(float(r[f])) for f in names)]  # type: ignore[arg-type,misc]
        idx = [i for i in has if (own if zoo_set else own_plain)[i] == name]
        yi = y_all[idx]
        if int(yi.sum()) < min_positives or int((yi == 0).sum()) < 1:
            idx = has
        y = y_all[idx]
        if len(set(y.tolist())) < 2:
            out[name] = list(DEFAULT_PARAMS[name])
            continue
        x = np.array([[_regressor(f, rows[i][f]) for f in names] for i in idx])  # type: ignore[arg-type,misc]
        if nonneg:
            b, w = _fit_nonneg(x, y, C)
        else:
            clf = LogisticRegression(C=C, max_iter=5000, class_weight="balanced").fit(x, y)
            b = float(clf.intercept_[0])
            w = np.asarray(clf.coef_[0], dtype=float)
        if max_fpr is not None:
            z_neg = x[y == 0] @ w + b
            z_cut = math.log(DEFAULT_THRESHOLD / (1.0 - DEFAULT_THRESHOLD))
            # smallest shift that leaves at most max_fpr of the negatives at or above the threshold
            k = int(math.floor(max_fpr * len(z_neg)))
            top = np.sort(z_neg)[::-1]
            if k < len(top) and top[k] >= z_cut:
                b -= float(top[k] - z_cut) + 1e-6
        out[name] = [b, *map(float, w)]
    return out


def _fit_nonneg(x: np.ndarray, y: np.ndarray, C: float) -> tuple[float, np.ndarray]:
    """Balanced L2 logistic regression with coefficients ≥ 0 (intercept free): scikit-learn's objective
    ``½‖w‖² + C · Σ_i c_{y_i} · logloss_i`` with ``c_k = n / (2 n_k)``, minimised by L-BFGS-B with bounds.

    Args:
        x: (n, d) float regressors; y: (n,) labels 0/1 with both present; C: inverse L2 strength.

    Returns:
        ``(intercept, coefficients (d,))``.
    """
    from scipy.optimize import minimize

    n, d = x.shape
    cw = np.where(y == 1, n / (2.0 * max(int(y.sum()), 1)), n / (2.0 * max(int((y == 0).sum()), 1)))
    sgn = np.where(y == 1, 1.0, -1.0)

    def loss(v: np.ndarray) -> tuple[float, np.ndarray]:
        b, w = v[0], v[1:]
        z = sgn * (x @ w + b)
        ll = np.logaddexp(0.0, -z)  # log(1 + e^-z)
        g = -sgn * cw * (1.0 / (1.0 + np.exp(np.clip(z, -500, 500))))  # d loss / d (x·w + b)
        f = 0.5 * float(w @ w) + C * float(cw @ ll)
        grad = np.concatenate([[C * g.sum()], w + C * (x.T @ g)])
        return f, grad

    res = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=[(None, None)] + [(0.0, None)] * d,
                   options={"maxiter": 5000})
    return float(res.x[0]), np.asarray(res.x[1:], dtype=float)
