"""The boundary-following trigger minimisation (issue 19): ``minimize_trigger(method="boundary")``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dl.affine_twins import Affine
from tests.dl.query_counter import Counter, compressed_error_of, labels_differ, raw_triggers
from twinspect.dl.deviate.distance import trigger_distances
from twinspect.dl.deviate.minimize import minimize_trigger
from twinspect.errors import InputError

pytest.importorskip("skimage")


def test_boundary_following_drops_a_block_that_pushes_away_where_restoring_cannot():
    """Twins whose boundaries are 0.01 apart; the trigger changes block A (toward the boundary) and
    block B (away from it) by +151. At the trigger, restoring any pixel takes the input out of the
    thin band where only the compressed model has crossed, so the restoring passes keep both blocks;
    the boundary-following step sees that restoring B lowers the margin, drops B and brings A down
    along the ray to the band."""
    w = np.zeros((8, 8))
    w[:4, :4] = 1 / 16  # block A: +1/255 of z per level over the block
    w[4:, 4:] = -0.5 / 16  # block B: pushes away from the boundary at half the rate
    w = w.reshape(-1)
    f, g = Affine(w, 0.30, "f"), Affine(w, 0.29, "g")  # g crosses first
    seed = np.zeros((8, 8, 1), np.float32)
    trig = seed.copy()
    trig[:4, :4] = 151.0
    trig[4:, 4:] = 151.0  # z = 0.5·151/255 ≈ 0.296: g gives 1, f still 0
    assert f.predict(trig)[0] == 0 and g.predict(trig)[0] == 1

    def compressed_error(pf, pg):
        return labels_differ(pf, pg) and int(np.argmax(pf)) == 0

    out = {}
    for method in ("restore", "boundary"):
        q = Counter(f, g)
        pf, pg = q(trig[None])
        q.calls = 0
        m = minimize_trigger(seed, trig, (pf[0], pg[0]), q, labels_differ, prefer=compressed_error, method=method)
        assert m.queries == q.calls > 0  # every query counted, the seed's evaluation included
        assert f.predict(m.x)[0] == 0 and g.predict(m.x)[0] == 1 and m.preferred  # still a compressed-model error
        out[method] = trigger_distances(seed, m.x)
    assert out["restore"]["l0"] == 32  # nothing could be restored at the boundary
    assert out["boundary"]["l0"] == 16  # block B dropped
    assert out["boundary"]["linf"] < 0.6 * out["restore"]["linf"]  # A alone needs about half the strength
    assert out["boundary"]["ssim"] > out["restore"]["ssim"]


def test_boundary_minimisation_on_a_real_small_pair(tiny_twins, mnist_test):
    """On a real pair (a small CNN and its 8-bit-weight copy): every minimised trigger still triggers,
    its L∞ and L0 never exceed the unminimised trigger's, a compressed-model error stays one, the
    queries are counted; and over the seeds the boundary-following step leaves less visible changes
    (the cost it minimises, L∞/48 + (1 − SSIM)/0.2) than the restoring passes it replaces."""
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = tiny_twins
    x, y = mnist_test
    search = MarginSearch(f, g, max_queries=3000, timeout=None, minimize=False)
    cost = {"restore": [], "boundary": []}
    raw_found = 0
    for label, raw in raw_triggers(search, f, g, x, y, scan=60):
        raw_found += 1
        seed = raw.seed
        before = trigger_distances(seed, raw.trigger)
        ce = raw.orig_label == label
        compressed_error = compressed_error_of(label)

        for method in cost:
            q = Counter(f, g)
            m = minimize_trigger(seed, raw.trigger, (raw.orig_probs, raw.comp_probs), q, labels_differ,
                                 prefer=compressed_error, method=method)
            assert m.queries == q.calls > 0
            lf, lg = f.predict(m.x)[0], g.predict(m.x)[0]
            assert lf != lg  # still triggers
            if ce:
                assert lf == label  # a compressed-model error stays one
            after = trigger_distances(seed, m.x)
            assert after["linf"] <= before["linf"] + 1e-3 and after["l0"] <= before["l0"]
            cost[method].append(after["linf"] / 48 + (1 - after["ssim"]) / 0.2)
    assert raw_found >= 5
    assert np.median(cost["boundary"]) < np.median(cost["restore"])


def test_bad_minimisation_options():
    w = np.ones(64) / 64
    f, g = Affine(w, 0.3, "f"), Affine(w, 0.29, "g")
    seed = np.zeros((8, 8, 1), np.float32)
    trig = np.full((8, 8, 1), 76.0, np.float32)
    probs = (f.predict_proba(trig[None])[0], g.predict_proba(trig[None])[0])
    with pytest.raises(ValueError, match="method"):
        minimize_trigger(seed, trig, probs, Counter(f, g), labels_differ, method="sideways")
    with pytest.raises(ValueError, match="block"):
        minimize_trigger(seed, trig, probs, Counter(f, g), labels_differ, block=0)
    from twinspect.dl.deviate.margin import MarginSearch

    with pytest.raises(InputError, match="minimize_method"):
        MarginSearch(f, g, max_queries=10, minimize_method="sideways")
    assert MarginSearch(f, g, max_queries=10).params()["minimize_method"] == "boundary"
    with pytest.raises(ValueError, match="descent"):
        minimize_trigger(seed, trig, probs, Counter(f, g), labels_differ, descent=-1)
    with pytest.raises(InputError, match="descent"):
        MarginSearch(f, g, max_queries=10, descent=-1)


def test_linf_descent_spreads_a_sparse_trigger_under_a_lower_linf():
    """Twins that read the image's mean (boundaries at 0.29 and 0.30 of full scale). The trigger
    changes the top half by +151 (L∞ 151); a change spread over all 64 pixels needs only about 75
    levels. Restoring and re-weighting keep the changed half, so without step 1a the L∞ stays near
    148; step 1a (levels 0.85× the last, down to linf_ref 80) rebuilds it over more blocks, and the
    result is still a compressed-model error."""
    w = np.ones(64) / 64
    f, g = Affine(w, 0.30, "f"), Affine(w, 0.29, "g")
    seed = np.zeros((8, 8, 1), np.float32)
    trig = seed.copy()
    trig[:4] = 151.0  # mean 75.5 levels = 0.296 of full scale: g gives 1, f still 0
    assert f.predict(trig)[0] == 0 and g.predict(trig)[0] == 1

    def compressed_error(pf, pg):
        return labels_differ(pf, pg) and int(np.argmax(pf)) == 0

    linf = {}
    for descent in (0, 3):
        q = Counter(f, g)
        pf, pg = q(trig[None])
        q.calls = 0
        m = minimize_trigger(seed, trig, (pf[0], pg[0]), q, labels_differ, prefer=compressed_error,
                             descent=descent, linf_ref=80.0, max_queries=2000)
        assert m.queries == q.calls
        assert f.predict(m.x)[0] == 0 and g.predict(m.x)[0] == 1 and m.preferred
        linf[descent] = trigger_distances(seed, m.x)["linf"]
    assert linf[0] > 140
    assert 73.9 < linf[3] <= 80.5  # the lowest level it may aim for, and above what any trigger needs
