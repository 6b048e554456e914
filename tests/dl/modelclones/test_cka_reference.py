"""Linear CKA against independent implementations of Kornblith et al.'s published formulas (ICML 2019,
and the debiased form of their reference code) and its invariances, on real activations of the
trained TinyCNN on MNIST."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.modelclones.cka import cka_map, gram, linear_cka, model_cka
from twinspect.errors import InputError


def ref_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Feature-space linear CKA: ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F) on column-centred X, Y (Kornblith et al., eq. after (5))."""
    x = x - x.mean(0)
    y = y - y.mean(0)
    return float(np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))


def ref_debiased_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s ``feature_space_linear_cka(..., debiased=True)``: the unbiased HSIC of Song
    et al. written in feature space (the 1/(n(n−3)) factors cancel)."""
    n = x.shape[0]
    x = x - x.mean(0)
    y = y - y.mean(0)

    def debias(xty, rx, ry, nx, ny):
        return xty - n / (n - 2.0) * rx.dot(ry) + nx * ny / ((n - 1) * (n - 2))

    rx, ry = np.einsum("ij,ij->i", x, x), np.einsum("ij,ij->i", y, y)
    nx, ny = rx.sum(), ry.sum()
    xy = debias(np.linalg.norm(x.T @ y) ** 2, rx, ry, nx, ny)
    xx = debias(np.linalg.norm(x.T @ x) ** 2, rx, rx, nx, nx)
    yy = debias(np.linalg.norm(y.T @ y) ** 2, ry, ry, ny, ny)
    return float(xy / np.sqrt(xx * yy))


@pytest.fixture(scope="module")
def acts(tiny_torch, mnist_test):
    """float64 activations of 200 MNIST test images: relu(conv1) pooled (864), relu(conv2) pooled (192),
    logits (10), and the pooled conv2 output of an untrained re-initialisation (192)."""
    import copy

    import torch

    x = torch.from_numpy(mnist_test[0][:200].astype(np.float32).transpose(0, 3, 1, 2) / 255.0)
    other = copy.deepcopy(tiny_torch)
    torch.manual_seed(5)
    for m in other.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()

    def layers(m):
        with torch.no_grad():
            h1 = torch.max_pool2d(torch.relu(m.conv1(x)), 2)
            h2 = torch.max_pool2d(torch.relu(m.conv2(h1)), 2)
            return [h1.flatten(1).double().numpy(), h2.flatten(1).double().numpy(), m.fc(h2.flatten(1)).double().numpy()]

    h1, h2, logits = layers(tiny_torch)
    return {"h1": h1, "h2": h2, "logits": logits, "other_h2": layers(other)[1]}


PAIRS = [("h1", "h2"), ("h2", "logits"), ("h1", "logits"), ("h2", "other_h2")]


@pytest.mark.parametrize("a,b", PAIRS)
def test_biased_cka_equals_the_feature_space_formula(acts, a, b):
    want = ref_cka(acts[a], acts[b])
    assert 0.05 < want < 0.999  # a real, non-trivial value
    assert linear_cka(acts[a], acts[b], unbiased=False) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("a,b", PAIRS)
def test_unbiased_cka_equals_the_debiased_reference(acts, a, b):
    want = ref_debiased_cka(acts[a], acts[b])
    got = linear_cka(acts[a], acts[b])
    assert got == pytest.approx(want, rel=1e-9)
    assert abs(got - ref_cka(acts[a], acts[b])) > 1e-4  # the two estimators are different numbers


@pytest.mark.parametrize("unbiased", [True, False])
def test_copy_under_orthogonal_map_and_isotropic_scaling_is_one(acts, unbiased):
    x, y = acts["h2"], acts["logits"]
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(x.shape[1], x.shape[1])))
    xq = 3.7 * x @ q
    assert linear_cka(x, xq, unbiased=unbiased) == pytest.approx(1.0, abs=1e-10)
    assert linear_cka(xq, y, unbiased=unbiased) == pytest.approx(linear_cka(x, y, unbiased=unbiased), abs=1e-10)


@pytest.mark.parametrize("offset", [1e3, 1e4])
@pytest.mark.parametrize("unbiased", [True, False])
def test_an_activation_offset_moves_nothing(acts, offset, unbiased):
    x, y = acts["h1"], acts["other_h2"]
    base = linear_cka(x, y, unbiased=unbiased)
    assert np.isfinite(base)
    assert linear_cka(x + offset, y, unbiased=unbiased) == pytest.approx(base, abs=1e-9)
    assert linear_cka(x + offset, y - offset, unbiased=unbiased) == pytest.approx(base, abs=1e-9)
    # the offset stored in float32 rounds the activations themselves: the change stays at that size
    assert linear_cka((x + offset).astype(np.float32), y, unbiased=unbiased) == pytest.approx(base, abs=1e-4)


def test_constant_layer_is_flagged_and_left_out_of_the_model_score(acts):
    x = acts["h2"]
    const = np.full((len(x), 7), 3.25)
    g = gram(const)
    assert g.constant and not gram(x).constant
    assert np.isnan(linear_cka(x, const)) and np.isnan(linear_cka(x, const, unbiased=False))
    a = {"h2": gram(x), "const": g}
    b = {"h2": gram(x), "logits": gram(acts["logits"])}
    m = cka_map(a, b)
    assert np.isnan(m[1]).all()
    assert np.isnan(model_cka(m))  # unflagged NaN: undefined, not averaged away
    assert model_cka(m, [False, True], [False, False]) == pytest.approx((1.0 + (1.0 + m[0, 1]) / 2) / 2)


def test_activations_without_an_input_axis_are_refused():
    with pytest.raises(InputError, match="no input axis"):
        gram(np.float32(0.5))
    with pytest.raises(InputError, match="NaN"):
        gram(np.array([[1.0], [2.0], [np.inf], [4.0]]))
