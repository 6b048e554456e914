"""The minimisation's flat-region pass (step 6, ``minimize_trigger(flat=...)``; issue 19, SSIM on MNIST)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dl.query_counter import Counter, compressed_error_of, labels_differ, raw_triggers
from twinspect.dl.deviate.distance import trigger_distances, visibility_cost
from twinspect.dl.deviate.minimize import DEFAULT_FLAT, FLAT_MARGIN, _margin, flat_mask, minimize_trigger

pytest.importorskip("skimage")


def test_flat_mask_on_an_mnist_digit(mnist_test):
    """On a real MNIST digit the mask keeps the stroke and its neighbourhood and drops the far background;
    a wider window keeps more; a seed with texture everywhere is kept everywhere."""
    x, _ = mnist_test
    seed = x[0].astype(np.float32)
    stroke = seed[..., 0] > 128
    for side in DEFAULT_FLAT:
        m = flat_mask(seed, side)
        assert m.shape == seed.shape[:2] and m.dtype == bool
        assert m[stroke].all()  # every stroke pixel has contrast around it
        assert not m[0, 0] and not m[-1, -1]  # the corners of an MNIST image are flat black
    assert flat_mask(seed, 3).sum() < flat_mask(seed, 5).sum() < flat_mask(seed, 7).sum()
    noise = np.random.default_rng(0).uniform(0, 255, (28, 28, 1)).astype(np.float32)
    assert flat_mask(noise, 3).all()
    with pytest.raises(ValueError, match="flat"):
        minimize_trigger(seed, seed, (np.ones(10) / 10, np.ones(10) / 10), lambda b: (b, b), labels_differ, flat=(0,))


def test_flat_pass_on_a_real_small_pair(tiny_twins, mnist_test):
    """On a real pair (a small CNN and its 8-bit-weight copy): step 1–5's result is the same with and without
    step 6 (deterministic), so step 6's output is compared with it. It still triggers, with the mover past
    its boundary by the pass's margin when it changed anything; a compressed-model error stays one; its L∞
    grows by at most 1.25× and never past 48 levels (nor at all above them); its visibility cost is never
    higher; it spends at most its own 60 queries more; and on some seeds it raises SSIM."""
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = tiny_twins
    x, y = mnist_test
    search = MarginSearch(f, g, max_queries=3000, timeout=None, minimize=False)
    found = improved = 0
    for label, raw in raw_triggers(search, f, g, x, y, scan=80):
        found += 1
        seed = raw.seed
        compressed_error = compressed_error_of(label)

        out = {}
        for flat in ((), DEFAULT_FLAT):
            q = Counter(f, g)
            m = minimize_trigger(seed, raw.trigger, (raw.orig_probs, raw.comp_probs), q, labels_differ,
                                 prefer=compressed_error, flat=flat)
            assert m.queries == q.calls > 0
            out[flat] = m
        m0, m1 = out[()], out[DEFAULT_FLAT]
        lf, lg = f.predict(m1.x)[0], g.predict(m1.x)[0]
        assert lf != lg
        if m0.preferred:
            assert m1.preferred and lf == label  # a compressed-model error stays one
        assert m0.queries <= m1.queries <= m0.queries + 60 + 1
        d0, d1 = trigger_distances(seed, m0.x), trigger_distances(seed, m1.x)
        cap = max(d0["linf"], min(48.0, 1.25 * d0["linf"]))
        assert d1["linf"] <= cap + 1e-3
        assert visibility_cost(d1["linf"], d1["ssim"]) <= visibility_cost(d0["linf"], d0["ssim"]) + 1e-9
        if not np.array_equal(m0.x, m1.x):
            improved += int(d1["ssim"] > d0["ssim"])
            c = int(np.argmax(f.predict_proba(seed[None])[0]))
            pf, pg = f.predict_proba(m1.x[None])[0], g.predict_proba(m1.x[None])[0]
            mover = pg if int(np.argmax(pf)) == c else pf
            assert _margin(mover, c) <= -FLAT_MARGIN + 1e-6
    assert found >= 5
    assert improved >= 1
