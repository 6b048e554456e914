"""Measures of model clone analysis on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.modelclones.cka import cka_map, gram, hsic_unbiased, linear_cka, model_cka
from twinspect.dl.modelclones.modeldiff import ddv, ddv_similarity, profiling_pairs
from twinspect.dl.modelclones.outputs import class_jaccard, jsd, label_jsd, mean_input_jsd, top1_agreement
from twinspect.dl.modelclones.weights import DifferentArchitectures, compare_weights
from twinspect.errors import InputError


def _rng(seed=0):
    return np.random.default_rng(seed)


# --- CKA -------------------------------------------------------------------------------------
def test_cka_of_identical_representations_is_one():
    x = _rng().normal(size=(50, 20))
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)


def test_cka_invariant_to_orthogonal_maps_and_isotropic_scaling():
    rng = _rng(1)
    x = rng.normal(size=(60, 16))
    q, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    assert linear_cka(x, 3.7 * x @ q) == pytest.approx(1.0, abs=1e-10)
    perm = x[:, rng.permutation(16)]  # a permuted-neuron copy
    assert linear_cka(x, perm) == pytest.approx(1.0, abs=1e-12)


def test_cka_is_not_invariant_to_anisotropic_scaling():
    rng = _rng(2)
    x = rng.normal(size=(60, 8))
    y = x * np.array([10.0, 1, 1, 1, 1, 1, 1, 0.1])
    assert linear_cka(x, y) < 0.9


def test_cka_of_independent_noise_is_near_zero_unbiased():
    rng = _rng(3)
    vals = [linear_cka(rng.normal(size=(200, 50)), rng.normal(size=(200, 50))) for _ in range(5)]
    # the unbiased estimator is centred on 0 for independent features (the biased one is not:
    # ~p/(n) here); each estimate within a few standard errors
    assert abs(np.mean(vals)) < 0.02 and max(abs(v) for v in vals) < 0.06


def test_unbiased_hsic_matches_the_quadruple_formula_on_a_tiny_case():
    rng = _rng(4)
    x, y = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    n = 6
    k, l_ = x @ x.T, y @ y.T
    np.fill_diagonal(k, 0)
    np.fill_diagonal(l_, 0)
    one = np.ones(n)
    want = (np.trace(k @ l_) + (one @ k @ one) * (one @ l_ @ one) / ((n - 1) * (n - 2)) - 2 / (n - 2) * one @ k @ l_ @ one) / (n * (n - 3))
    assert hsic_unbiased(x, y) == pytest.approx(want, rel=1e-12)


def test_cka_needs_four_inputs_and_finite_values():
    with pytest.raises(InputError, match="at least 4"):
        gram(np.zeros((3, 2)))
    with pytest.raises(InputError, match="NaN"):
        gram(np.full((5, 2), np.nan))


def test_cka_map_and_model_score():
    rng = _rng(5)
    layers = {f"l{i}": gram(rng.normal(size=(40, 10))) for i in range(3)}
    m = cka_map(layers, layers)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-12)
    assert m.shape == (3, 3) and model_cka(m) == pytest.approx(1.0)
    other = {f"m{i}": gram(rng.normal(size=(40, 10))) for i in range(2)}
    assert model_cka(cka_map(layers, other)) < 0.5


# --- weights ---------------------------------------------------------------------------------
def _w(rng, shapes):
    return {f"layer{i}": {"weight": rng.normal(size=s).astype(np.float32)} for i, s in enumerate(shapes)}


def test_identical_weights_cosine_one_distance_zero():
    w = _w(_rng(), [(4, 1, 3, 3), (10, 36)])
    c = compare_weights(w, w)
    assert c.cosine == pytest.approx(1.0) and c.euclidean == 0.0
    assert [lay["cosine"] for lay in c.layers] == pytest.approx([1.0, 1.0])


def test_permuted_neuron_copy_has_weight_cosine_below_one():
    rng = _rng(6)
    w1, w2 = rng.normal(size=(8, 5)), rng.normal(size=(3, 8))
    p = rng.permutation(8)
    a = {"fc1": {"weight": w1}, "fc2": {"weight": w2}}
    b = {"fc1": {"weight": w1[p]}, "fc2": {"weight": w2[:, p]}}  # same function, neurons permuted
    x = rng.normal(size=(5, 5))
    np.testing.assert_allclose(np.maximum(x @ w1.T, 0) @ w2.T, np.maximum(x @ w1[p].T, 0) @ w2[:, p].T, atol=1e-12)
    assert compare_weights(a, b).cosine < 0.9


def test_euclidean_distance_is_the_norm_of_the_difference():
    a = {"l": {"w": np.array([1.0, 2.0, 2.0])}}
    b = {"l": {"w": np.array([1.0, 0.0, 0.0])}}
    c = compare_weights(a, b)
    assert c.euclidean == pytest.approx(np.sqrt(8.0)) and c.cosine == pytest.approx(1 / 3)


def test_normalised_euclidean_is_the_rms_difference_per_weight():
    a = {"l1": {"w": np.array([[1.0, 2.0], [2.0, 0.0]]), "b": np.array([0.0, 0.0])}}
    b = {"l1": {"w": np.array([[1.0, 0.0], [0.0, 0.0]]), "b": np.array([0.0, 2.0])}}
    c = compare_weights(a, b)
    assert c.n_weights == 6
    assert c.euclidean_rms == pytest.approx(np.sqrt(12.0 / 6))
    # the same per-weight difference on a model 100× larger gives the same normalised distance
    big_a = {"l": {"w": np.tile(a["l1"]["w"].ravel(), 100)}, "m": {"w": np.tile(a["l1"]["b"], 100)}}
    big_b = {"l": {"w": np.tile(b["l1"]["w"].ravel(), 100)}, "m": {"w": np.tile(b["l1"]["b"], 100)}}
    big = compare_weights(big_a, big_b)
    assert big.euclidean == pytest.approx(10 * c.euclidean)
    assert big.euclidean_rms == pytest.approx(c.euclidean_rms)


def test_different_architectures_are_refused():
    rng = _rng(7)
    with pytest.raises(DifferentArchitectures, match="shape"):
        compare_weights(_w(rng, [(4, 3)]), _w(rng, [(4, 2)]))
    with pytest.raises(DifferentArchitectures, match="numbers"):
        compare_weights(_w(rng, [(4, 3)]), _w(rng, [(4, 3), (2, 2)]))


# --- outputs ---------------------------------------------------------------------------------
def _onehot(labels, k=3):
    return np.eye(k)[labels]


def test_jsd_identical_zero_disjoint_one():
    assert jsd([0.2, 0.8], [0.2, 0.8]) == pytest.approx(0.0, abs=1e-12)
    assert jsd([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)
    assert jsd([0.5, 0.5, 0], [0, 0.5, 0.5]) == pytest.approx(0.5)


def test_label_jsd_ignores_which_input_gets_which_label_but_per_input_jsd_does_not():
    pa = _onehot([0, 1, 2, 0, 1, 2])
    pb = _onehot([1, 2, 0, 1, 2, 0])  # the same label histogram, every input different
    assert label_jsd(pa, pb) == pytest.approx(0.0, abs=1e-12)
    assert mean_input_jsd(pa, pb) == pytest.approx(1.0)
    assert top1_agreement(pa, pb) == 0.0 and class_jaccard(pa, pb) == 0.0
    assert mean_input_jsd(pa, pa) == pytest.approx(0.0, abs=1e-12)


def test_jaccard_and_agreement_known_values():
    pa = _onehot([0, 0, 1, 1])
    pb = _onehot([0, 1, 1, 1])
    # class 0: {0,1} vs {0} → 1/2; class 1: {2,3} vs {1,2,3} → 2/3
    assert class_jaccard(pa, pb) == pytest.approx((0.5 + 2 / 3) / 2)
    assert top1_agreement(pa, pb) == 0.75


def test_output_shapes_must_match():
    with pytest.raises(InputError):
        label_jsd(np.ones((3, 2)) / 2, np.ones((4, 2)) / 2)


# --- ModelDiff -------------------------------------------------------------------------------
def test_ddv_identical_models_similarity_one_and_pairs_disjoint():
    rng = _rng(8)
    out = rng.dirichlet(np.ones(10), size=40)
    left, right = profiling_pairs(40, 100, seed=1)
    assert len(left) == 20 and not set(left) & set(right)
    d = ddv(out, left, right)
    assert ddv_similarity(d, d) == pytest.approx(1.0)
    other = rng.dirichlet(np.ones(10), size=40)
    assert ddv_similarity(d, ddv(other, left, right)) < 0.99


def test_ddv_known_value():
    out = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    assert list(ddv(out, np.array([0, 2]), np.array([1, 3]))) == [1.0, 0.0]


def test_weight_order_inside_a_layer_does_not_matter():
    rng = _rng(9)
    w, b = rng.normal(size=(4, 3)), rng.normal(size=4)
    pruned_order = {"fc": {"bias": b, "weight": w}}  # torch pruning re-registers weight after bias
    assert compare_weights({"fc": {"weight": w, "bias": b}}, pruned_order).cosine == pytest.approx(1.0)


def test_logprob_cosine_sees_the_other_classes():
    from twinspect.dl.modelclones.outputs import logprob_cosine

    def soft(z):
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    rng = _rng(10)
    z = rng.normal(size=(20, 5))
    z[:, 0] += 8.0  # the same confident top class for both models
    assert logprob_cosine(soft(z), soft(z + 3.0)) == pytest.approx(1.0)  # a per-input shift changes nothing
    other = z.copy()
    other[:, 1:] = rng.normal(size=(20, 4))  # same top-1, different ranking of the other classes
    assert top1_agreement(soft(z), soft(other)) == 1.0
    assert mean_input_jsd(soft(z), soft(other)) < 0.01  # probabilities hardly differ
    assert logprob_cosine(soft(z), soft(other)) < 0.97  # log-probabilities do (1 − cos ≫ JSD)


# --- reuse score -------------------------------------------------------------------------------
def test_reuse_score_uses_the_largest_available_feature_set_and_fits(tmp_path):
    from twinspect.dl.modelclones.reuse import FEATURE_SETS, feature_set, fit_params, load_params, reuse_score

    full = {"weights": 0.99, "cka": 0.99, "io_jsd": 0.99, "io_agreement": 0.99, "ddv_random": 0.99, "io_logprob": 0.99}
    assert feature_set(full) == "full"
    assert feature_set(dict(full, weights=None)) == "no_weights"
    assert feature_set(dict(full, weights=None, cka=float("nan"))) == "io"
    assert reuse_score({"weights": 1.0}) is None
    rng = _rng(11)
    rows, labels = [], []
    for i in range(60):  # derived pairs near 1 on every feature, independent ones lower
        y = i % 2
        rows.append({k: float(1 - (rng.uniform(0, 0.01) if y else rng.uniform(0.05, 0.3))) for k in FEATURE_SETS["full"]})
        labels.append(y)
    params = fit_params(rows, labels)
    scores = [reuse_score(r, params) for r in rows]
    assert all((s >= 0.5) == bool(y) for s, y in zip(scores, labels))
    bad = tmp_path / "cal.json"
    bad.write_text('{"params": {"full": [1, 2]}}')
    with pytest.raises(InputError, match="cal.json"):
        load_params(bad)


def test_fit_params_fits_each_set_on_the_pairs_it_scores_and_caps_false_positives():
    """A rare derived kind among cross-architecture pairs (distillation) is separable on one feature;
    fitted on all pairs it is outvoted by the easy same-architecture pairs, fitted on its own
    population it is detected, and the calibration false-positive rate stays within the budget."""
    from twinspect.dl.modelclones.reuse import FEATURE_SETS, fit_params, reuse_score

    rng = _rng(5)
    rows, labels = [], []
    for i in range(80):  # same architecture: derived pairs near 1 everywhere, independent ones far
        y = i % 2
        rows.append({k: float(1 - (rng.uniform(0, 0.002) if y else rng.uniform(0.05, 0.3))) for k in FEATURE_SETS["full"]})
        labels.append(y)
    cross = []
    for i in range(300):  # different architectures: 6 distilled pairs, 294 independent ones
        y = int(i < 6)
        r = {k: float(1 - rng.uniform(0.01, 0.05)) for k in FEATURE_SETS["no_weights"]}  # uninformative
        r["io_logprob"] = float(rng.uniform(0.975, 0.99) if y else rng.uniform(0.85, 0.97))
        r["weights"] = None
        cross.append((r, y))
    rows += [r for r, _ in cross]
    labels += [y for _, y in cross]
    params = fit_params(rows, labels)
    neg = [reuse_score(r, params) for r, y in cross if y == 0]
    pos = [reuse_score(r, params) for r, y in cross if y == 1]
    assert all(s >= 0.5 for s in pos), pos
    assert sum(s >= 0.5 for s in neg) <= 0.01 * len(neg)
    old = fit_params(rows, labels, min_positives=10**6, max_fpr=None)  # every set on every pair that has it
    assert min(reuse_score(r, old) for r, y in cross if y == 1) < min(pos)
    # the cap lowers an intercept that flags too many independent pairs, and never raises one
    loose = fit_params(rows, labels, max_fpr=None)
    assert params["no_weights"][0] <= loose["no_weights"][0]
    assert params["full"][0] == loose["full"][0]  # separable set: already within budget


def test_per_input_jsd_keeps_near_identical_rows():
    """Rounding makes the divergence of almost equal rows slightly negative; those rows count as 0,
    they are not dropped from the mean (scipy's jensenshannon turns them into NaN)."""
    import warnings

    from scipy.spatial.distance import jensenshannon

    rng = _rng(9)
    z = rng.normal(size=(200, 10)) * 8
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = p * (1 + 1e-9 * rng.normal(size=p.shape))
    q /= q.sum(1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(jensenshannon(p, q, base=2.0, axis=1)).sum() > 20  # the failure mode exists here
    pa = np.vstack([p, [[1.0] + [0.0] * 9]])
    pb = np.vstack([q, [[0.0] * 9 + [1.0]]])  # one disjoint row: JSD 1
    assert mean_input_jsd(pa, pb) == pytest.approx(1.0 / 201, rel=1e-6)
    assert jsd(p[0], p[0]) == 0.0


def test_same_layer_names_in_another_order_are_paired_by_name(tiny_torch):
    """A quantiser may emit parallel branches in another valid order; same names pair by name."""
    from twinspect.dl.adapters import TorchModel

    w = TorchModel(tiny_torch).weights()
    shuffled = {k: w[k] for k in ["fc", "conv1", "conv2"]}
    c = compare_weights(w, shuffled)
    assert c.cosine == pytest.approx(1.0) and c.euclidean == 0.0
    renamed = {f"x{i}": v for i, v in enumerate(shuffled.values())}  # other names: order decides, shapes differ
    with pytest.raises(DifferentArchitectures, match="shape"):
        compare_weights(w, renamed)
