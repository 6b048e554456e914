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
``modeldiff``      ModelDiff's DDV similarity (Li et al., ISSTA 2021)
``io_logprob``     mean cosine of the centred log-probability vectors ("dark knowledge")
=================  =============================================================================

Every feature ``x`` (a similarity, at most 1) enters the regression as ``−log(1 − x + 1e-6)``, which
spreads out the region near 1 where derived and independent models differ (agreements of 0.95 and
0.999 are far apart in that scale, 0.5 and 0.6 are not).

One coefficient set per *feature set* (``full``: all five; ``no_weights``: different architectures;
``io``: no activations either); a pair uses the largest set whose features it has. The shipped
coefficients (``reuse_calibration.json`` beside this module) were fitted by
``benchmarks/models_reuse.py`` on the *calibration split* of its labelled pairs and are reported on
the other split; without that file the hand-set defaults below are used. The score is a probability
in (0, 1); ``--threshold`` (default 0.5) flags suspected derived pairs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from twinspect.errors import InputError

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "full": ("weights", "cka", "io_jsd", "io_agreement", "modeldiff", "io_logprob"),
    "no_weights": ("cka", "io_jsd", "io_agreement", "modeldiff", "io_logprob"),
    "io": ("io_jsd", "io_agreement", "modeldiff", "io_logprob"),
}

#: Hand-set coefficients (intercept first, on the transformed features), used when no calibration
#: file is present.
DEFAULT_PARAMS: dict[str, list[float]] = {
    "full": [-6.0, 2.0, 0.2, 0.2, 0.2, 0.2, 0.5],
    "no_weights": [-8.0, 0.3, 0.2, 0.2, 0.2, 1.5],
    "io": [-8.0, 0.3, 0.3, 0.3, 1.5],
}


def transform(x: float) -> float:
    """The regression's input for a similarity ``x``: ``−log(1 − x + 1e-6)``."""
    return float(-math.log(max(1.0 - float(x), 0.0) + 1e-6))

CALIBRATION_FILE = Path(__file__).with_name("reuse_calibration.json")

DEFAULT_THRESHOLD = 0.5


def load_params(path: str | Path | None = None) -> dict[str, list[float]]:
    """Coefficients per feature set: from ``path`` (default: the shipped calibration file) or the defaults.

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
        params = {k: [float(v) for v in data["params"][k]] for k in FEATURE_SETS}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a valid reuse calibration ({exc})", p) from exc
    for k, names in FEATURE_SETS.items():
        if len(params[k]) != len(names) + 1:
            raise InputError(f"calibration for {k!r} needs {len(names) + 1} coefficients", p)
    return params


def feature_set(features: Mapping[str, float | None]) -> str | None:
    """The largest feature set whose features are all present and finite, or None."""
    for name, names in FEATURE_SETS.items():
        if all(features.get(f) is not None and math.isfinite(float(features[f])) for f in names):  # type: ignore[arg-type,misc]
            return name
    return None


def reuse_score(features: Mapping[str, float | None], params: Mapping[str, Sequence[float]] | None = None) -> float | None:
    """Probability that one model of the pair is derived from the other.

    Args:
        features: values of the features named in :data:`FEATURE_SETS` (None when not applicable).
        params: coefficients per feature set (default: :func:`load_params`).

    Returns:
        A float in (0, 1), or None when not even the ``io`` features are available.
    """
    fs = feature_set(features)
    if fs is None:
        return None
    coef = (params or load_params())[fs]
    z = coef[0] + sum(c * transform(features[f]) for c, f in zip(coef[1:], FEATURE_SETS[fs]))  # type: ignore[arg-type,misc]
    return float(1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0))))


def fit_params(rows: Sequence[Mapping[str, float | None]], labels: Sequence[int], C: float = 1.0) -> dict[str, list[float]]:
    """Fit one logistic regression per feature set on labelled pairs (scikit-learn, L2, ``C``).

    Each set is fitted on the pairs that have its features (a pair with weights contributes to all
    three). A set without both classes keeps its default coefficients.

    Args:
        rows: feature dicts of the calibration pairs.
        labels: 1 = derived, 0 = independent.

    Returns:
        ``{feature set: [intercept, coef...]}``.
    """
    from sklearn.linear_model import LogisticRegression

    out: dict[str, list[float]] = {}
    y_all = np.asarray(labels, dtype=int)
    for name, names in FEATURE_SETS.items():
        idx = [i for i, r in enumerate(rows) if all(r.get(f) is not None and math.isfinite(float(r[f])) for f in names)]  # type: ignore[arg-type,misc]
        y = y_all[idx]
        if len(set(y.tolist())) < 2:
            out[name] = list(DEFAULT_PARAMS[name])
            continue
        x = np.array([[transform(rows[i][f]) for f in names] for i in idx])  # type: ignore[arg-type,misc]
        clf = LogisticRegression(C=C, max_iter=1000).fit(x, y)
        out[name] = [float(clf.intercept_[0]), *map(float, clf.coef_[0])]
    return out
