"""The order of the minimisation's single-pixel pass (step 4, ``minimize_trigger(pixel_order=...)``; issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from tests.dl.query_counter import Counter, compressed_error_of, labels_differ, raw_triggers
from twinspect.dl.deviate.distance import ssim, trigger_distances
from twinspect.dl.deviate.minimize import minimize_trigger, ssim_restore_order
from twinspect.errors import InputError

pytest.importorskip("skimage")


def _restore_gain(seed: np.ndarray, x: np.ndarray, pos: int) -> float:
    r, c = divmod(int(pos), seed.shape[1])
    y = x.copy()
    y[r, c] = seed[r, c]
    return ssim(seed, y) - ssim(seed, x)


def test_ssim_order_ranks_pixels_by_their_real_ssim_gain(mnist_test):
    """On a real MNIST digit with a random change of 120 pixels: the order holds exactly the changed
    positions; its ranking agrees with each pixel's SSIM gain measured by restoring it alone (Spearman
    ≥ 0.8); the first pixels gain more than the last; a change on the far background comes before the
    same change on the stroke."""
    x, _ = mnist_test
    seed = x[0].astype(np.float32)
    rng = np.random.default_rng(0)
    pos = rng.choice(seed.shape[0] * seed.shape[1], size=120, replace=False)
    trig = seed.copy()
    flat_view = trig.reshape(-1, seed.shape[2])
    flat_view[pos] = np.clip(flat_view[pos] + rng.choice([-30.0, 30.0], size=(120, 1)), 0, 255)
    changed = np.flatnonzero(np.abs(trig - seed).max(axis=-1).ravel() > 0)
    order = ssim_restore_order(seed, trig)
    assert order.dtype == np.int64 and sorted(order.tolist()) == sorted(changed.tolist())
    gains = np.array([_restore_gain(seed, trig, p) for p in order])
    rho = spearmanr(np.arange(len(order)), -gains).statistic
    assert rho >= 0.8
    assert gains[:10].mean() > gains[-10:].mean()

    stroke = np.argwhere(seed[..., 0] > 200)[0]
    two = seed.copy()
    two[0, 0] += 20.0  # the corner: flat black
    two[stroke[0], stroke[1]] -= 20.0  # on the stroke
    assert ssim_restore_order(seed, two).tolist() == [0, int(stroke[0]) * seed.shape[1] + int(stroke[1])]
    assert ssim_restore_order(seed, seed).size == 0


def test_ssim_order_on_a_real_small_pair(tiny_twins, mnist_test):
    """On a real pair (a small CNN and its 8-bit-weight copy): with the SSIM order the result still
    triggers, a compressed-model error stays one, the query cap holds, and L∞ never grows past the
    trigger's; unknown orders are refused."""
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = tiny_twins
    x, y = mnist_test
    search = MarginSearch(f, g, max_queries=3000, timeout=None, minimize=False)
    found = 0
    for label, raw in raw_triggers(search, f, g, x, y, scan=40):
        found += 1
        q = Counter(f, g)
        m = minimize_trigger(raw.seed, raw.trigger, (raw.orig_probs, raw.comp_probs), q, labels_differ,
                             prefer=compressed_error_of(label), pixel_order="ssim", max_queries=300)
        assert m.queries == q.calls <= 300
        lf, lg = f.predict(m.x)[0], g.predict(m.x)[0]
        assert lf != lg
        if m.preferred:
            assert lf == label
        assert trigger_distances(raw.seed, m.x)["linf"] <= trigger_distances(raw.seed, raw.trigger)["linf"] + 1e-3
    assert found >= 3
    seed = x[0].astype(np.float32)
    probs = (np.ones(10) / 10, np.ones(10) / 10)
    with pytest.raises(ValueError, match="pixel order"):
        minimize_trigger(seed, seed, probs, lambda b: (b, b), labels_differ, pixel_order="random")
    with pytest.raises(InputError, match="minimize_pixel_order"):
        MarginSearch(f, g, max_queries=10, minimize_pixel_order="random")
    assert MarginSearch(f, g, max_queries=10, minimize_pixel_order="ssim").params()["minimize_pixel_order"] == "ssim"

