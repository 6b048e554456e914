"""Change budgets, trigger minimisation, distances and compressed-model errors (issue 7, points 2–4)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dl.affine_twins import Affine
from twinspect.dl.adapters.base import PRESETS, Classifier
from twinspect.dl.deviate.dflare import DFlare
from twinspect.dl.deviate.diffchaser import DiffChaser
from twinspect.dl.deviate.distance import ChangeBudget, trigger_distances
from twinspect.dl.deviate.minimize import minimize_trigger
from twinspect.dl.deviate.results import summarize
from twinspect.errors import InputError

pytest.importorskip("skimage")


class Linear(Classifier):
    """softmax(flatten(x/255) @ W + b); records every image it is asked about."""

    def __init__(self, W, name, shape=(8, 8, 1)):
        super().__init__(shape, W.shape[1], PRESETS["unit"], output="logits", name=name)
        self.W = np.asarray(W, dtype=np.float64)
        self.seen: list[np.ndarray] = []

    def _forward(self, batch):
        self.seen.extend(np.asarray(batch, dtype=np.float64) * 255.0)
        return batch.reshape(len(batch), -1).astype(np.float64) @ self.W


def pair(seed=0, noise=0.6, shape=(8, 8, 1), k=3):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(int(np.prod(shape)), k))
    return Linear(W, "f", shape), Linear(W + rng.normal(scale=noise, size=W.shape), "g", shape)


def agreeing(f, g, n=4, shape=(8, 8, 1), seed=1):
    x = np.random.default_rng(seed).integers(0, 256, size=(300,) + shape).astype(np.uint8)
    return x[np.flatnonzero(f.predict(x) == g.predict(x))[:n]]


# -- distances on hand-made images -------------------------------------------------------------


def test_distances_on_hand_made_images():
    seed = np.full((8, 8, 1), 100, np.float32)
    x = seed.copy()
    x[0, 0, 0] = 103.0  # +3
    x[7, 7, 0] = 96.0  # -4
    x[4, 4, 0] = 100.3  # below half a level: not counted in L0
    d = trigger_distances(seed, x)
    assert d["l0"] == 2
    assert d["linf"] == pytest.approx(4.0)
    assert d["l2"] == pytest.approx(np.sqrt(9 + 16 + 0.09), rel=1e-5)
    assert 0 < d["ssim"] < 1
    same = trigger_distances(seed, seed)
    assert same == {"l0": 0, "l2": 0.0, "linf": 0.0, "ssim": 1.0}
    # colour images: L0 counts pixel positions, not values
    rgb = np.zeros((8, 8, 3), np.float32)
    moved = rgb.copy()
    moved[2, 3, :] = 255
    d = trigger_distances(rgb, moved)
    assert d["l0"] == 1 and d["linf"] == 255 and d["l2"] == pytest.approx(255 * np.sqrt(3))
    # an inverted image is structurally far from its seed
    grad = np.tile(np.linspace(0, 255, 8, dtype=np.float32), (8, 1))[..., None]
    assert trigger_distances(grad, 255 - grad)["ssim"] < 0
    with pytest.raises(InputError, match="cannot be compared"):
        trigger_distances(seed, rgb)


def test_budget_bounds_are_checked():
    for bad in (0, 256, -3):
        with pytest.raises(InputError, match="max-linf"):
            ChangeBudget(max_linf=bad)
    for bad in (0, -0.1, 1.5):
        with pytest.raises(InputError, match="min-ssim"):
            ChangeBudget(min_ssim=bad)
    f, g = pair()
    with pytest.raises(InputError, match="max-linf"):
        DFlare(f, g, max_queries=10, max_linf=300)
    with pytest.raises(InputError, match="requirement"):
        DFlare(f, g, max_queries=10, require="everything")
    x = agreeing(f, g, 1)[0]
    with pytest.raises(InputError, match="true label"):
        DFlare(f, g, max_queries=10, require="compressed-error").search(x)


# -- budgets: no candidate outside reaches a model ------------------------------------------------


@pytest.mark.parametrize("algorithm", ["dflare", "diffchaser"])
def test_no_candidate_outside_the_linf_budget_reaches_a_model(algorithm):
    f, g = pair()
    for i, x in enumerate(agreeing(f, g, 3)):
        f.seen.clear(), g.seen.clear()
        kw = {"pop_size": 12} if algorithm == "diffchaser" else {}
        cls = DiffChaser if algorithm == "diffchaser" else DFlare
        res = cls(f, g, max_queries=600, timeout=None, seed=i, max_linf=12, **kw).search(x)
        seen = np.stack(f.seen)
        assert np.abs(seen - x.astype(np.float64)).max() <= 12 + 1e-3  # every image the model saw
        if res.trigger is not None:
            assert res.extra["distances"]["linf"] <= 12 + 1e-3


def test_ssim_budget_rejects_without_querying_and_ends_as_budget():
    f, g = pair()
    x = agreeing(f, g, 1)[0]
    f.seen.clear()
    res = DFlare(f, g, max_queries=300, timeout=None, seed=0, min_ssim=0.9).search(x)
    from twinspect.dl.deviate.distance import ssim

    assert all(ssim(x, s) >= 0.9 - 1e-9 for s in f.seen)
    # a budget nothing fits (SSIM 1 = no change at all) ends as "budget", never as a false success
    res = DFlare(f, g, max_queries=300, timeout=None, seed=0, min_ssim=1.0).search(x)
    assert res.status == "budget" and not res.success and res.queries == 0 and res.trigger is None


# -- minimisation ---------------------------------------------------------------------------------


def test_minimisation_still_triggers_and_is_never_farther():
    f, g = pair()
    for i, x in enumerate(agreeing(f, g, 4)):
        raw = DFlare(f, g, max_queries=3000, timeout=None, seed=i, minimize=False).search(x)
        mini = DFlare(f, g, max_queries=3000, timeout=None, seed=i).search(x)
        assert raw.status == mini.status == "found"
        assert mini.queries == raw.queries  # same search; minimisation counted apart
        assert mini.extra["minimize_queries"] > 0
        t = mini.trigger
        assert f.predict(t)[0] != g.predict(t)[0]  # still triggers
        before, after = mini.extra["distances_before"], mini.extra["distances"]
        assert before == raw.extra["distances"]
        for m in ("l0", "l2", "linf"):
            assert after[m] <= before[m] + 1e-4
        assert after["l2"] < before["l2"]  # random-walk triggers always have slack


def test_minimize_trigger_on_a_threshold_model_finds_the_boundary():
    # "trigger" when the mean brightness is above 100: the seed is at 0, the trigger at 255
    seed = np.zeros((8, 8, 1), np.float32)
    trig = np.full((8, 8, 1), 255, np.float32)

    def query(b):
        m = float(b.mean())
        return np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]) if m > 100 else np.array([[1.0, 0.0]])

    def triggers(pf, pg):
        return int(np.argmax(pf)) != int(np.argmax(pg))

    m = minimize_trigger(seed, trig, (np.array([1.0, 0]), np.array([0, 1.0])), query, triggers, patch=4,
                         linf_steps=0, pixels=False, method="restore")
    assert m.x.mean() > 100 and triggers(*[p[0] for p in query(m.x[None])])
    assert m.x.mean() < 255 * 0.5  # bisection + restored patches got well below the trigger
    assert m.queries == 8 + 4  # 8 halvings, then one try per 4x4 patch
    assert np.all((m.x == 0) | (m.x == m.x.max()))  # patches are either restored or kept


def test_minimize_pixel_and_linf_passes_reach_a_one_pixel_trigger():
    # triggers when pixel (2, 5) is above 40: everything else must go back to the seed, and the
    # L-inf passes must bring that pixel close to 40 (the bisection on alpha alone stops near 40/255)
    seed = np.zeros((8, 8, 1), np.float32)
    trig = np.full((8, 8, 1), 255, np.float32)

    def query(b):
        hit = float(b[0, 2, 5, 0]) > 40
        return np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]) if hit else np.array([[1.0, 0.0]])

    def triggers(pf, pg):
        return int(np.argmax(pf)) != int(np.argmax(pg))

    m = minimize_trigger(seed, trig, (np.array([1.0, 0]), np.array([0, 1.0])), query, triggers)
    d = trigger_distances(seed, m.x)
    assert d["l0"] == 1 and m.x[2, 5, 0] > 40
    assert d["linf"] < 45  # from 255
    assert m.queries <= 600


def test_minimize_prefers_a_compressed_model_error_on_the_way():
    # along the line seed -> trigger (mean brightness m): f leaves label 0 for 60 < m < 90 and for
    # m > 120, g for m > 100. So 60..90 triggers with the original wrong, 100..120 is a
    # compressed-model error, above 120 both changed. Plain bisection ends near 60 (original wrong);
    # with `prefer` the minimiser finds the compressed-model error.
    seed = np.zeros((4, 4, 1), np.float32)
    trig = np.full((4, 4, 1), 255, np.float32)

    def query(b):
        m = float(b.mean())
        pf = np.array([[0.0, 1.0, 0.0]]) if (60 < m < 90 or m > 120) else np.array([[1.0, 0.0, 0.0]])
        pg = np.array([[0.0, 0.0, 1.0]]) if m > 100 else np.array([[1.0, 0.0, 0.0]])
        return pf, pg

    def triggers(pf, pg):
        return int(np.argmax(pf)) != int(np.argmax(pg))

    def compressed_error(pf, pg):
        return triggers(pf, pg) and int(np.argmax(pf)) == 0

    pf, pg = query(trig[None])
    kw = {"patch": 0, "pixels": False}
    plain = minimize_trigger(seed, trig, (pf[0], pg[0]), query, triggers, **kw)
    pref = minimize_trigger(seed, trig, (pf[0], pg[0]), query, triggers, prefer=compressed_error, **kw)
    assert triggers(plain.orig_probs, plain.comp_probs) and not compressed_error(plain.orig_probs, plain.comp_probs)
    assert 60 < plain.x.mean() < 90
    assert pref.preferred and compressed_error(pref.orig_probs, pref.comp_probs)
    assert 100 < pref.x.mean() <= 120
    assert not minimize_trigger(seed, trig, (pf[0], pg[0]), query, triggers, prefer=lambda a, b: False, **kw).preferred


# -- compressed-model errors ----------------------------------------------------------------------


def test_compressed_error_flag_and_requirement():
    f, g = pair(noise=0.9)
    xs = agreeing(f, g, 6)
    labels = f.predict(xs)  # the seed's "true" label: what the original says on it
    plain = [DFlare(f, g, max_queries=3000, timeout=None, seed=i).search(x, label=int(y))
             for i, (x, y) in enumerate(zip(xs, labels))]
    assert all("compressed_error" in r.extra for r in plain if r.success)
    for r, y in zip(plain, labels):
        if r.success:
            assert r.extra["compressed_error"] == (r.orig_label == y)
    req = [DFlare(f, g, max_queries=3000, timeout=None, seed=i, require="compressed-error").search(x, label=int(y))
           for i, (x, y) in enumerate(zip(xs, labels))]
    assert sum(r.success for r in req) >= 2
    for r, y in zip(req, labels):
        if r.success:
            assert r.orig_label == y != r.comp_label and r.extra["compressed_error"]
    records = [r.record(i, int(y), None) for i, (r, y) in enumerate(zip(req, labels))]
    s = summarize(records)
    assert s["compressed_error_share"] == 1.0
    assert s["median_linf"] is not None and 0 < s["median_ssim"] <= 1


# -- the HTML report ------------------------------------------------------------------------------


def test_html_report_of_a_small_run_sorted_by_change(tmp_path):
    from twinspect.dl.deviate.report import html_report, run_summary, write_html_report
    from twinspect.dl.deviate.runner import run_search

    f, g = pair()
    xs = agreeing(f, g, 5)
    labels = f.predict(xs)
    summary = run_search(f, g, xs, labels, list(range(5)), "dflare", tmp_path / "run", models=(f, g),
                         params={"max_queries": 3000, "timeout": None})
    assert summary["successes"] >= 3
    assert run_summary(tmp_path / "run")["successes"] == summary["successes"]
    path = write_html_report(tmp_path / "run")
    page = path.read_text()
    assert path == tmp_path / "run" / "report.html"
    assert page.count("<div class='card'>") == summary["successes"]
    assert page.count("data:image/png;base64,") == 3 * summary["successes"]
    # cards sorted by L2 to the seed, smallest first
    l2 = [float(part.split(" ·")[0]) for part in page.split("px · L2 ")[1:]]
    assert l2 == sorted(l2) and len(l2) == summary["successes"]
    assert "compressed-model error" in page and "original top-3" in page
    assert html_report(tmp_path / "run") == page
    with pytest.raises(InputError, match="results.jsonl"):
        html_report(tmp_path)


# -- the margin search (the default) --------------------------------------------------------------


def test_margin_search_finds_closer_triggers_and_more_compressed_errors_than_dflare():
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = pair(noise=0.9)
    xs = agreeing(f, g, 8)
    labels = f.predict(xs)
    runs = {}
    for name, cls in (("margin", MarginSearch), ("dflare", DFlare)):
        runs[name] = [cls(f, g, max_queries=3000, timeout=None, seed=i).search(x, label=int(y))
                      for i, (x, y) in enumerate(zip(xs, labels))]
    for r in runs["margin"]:
        assert r.status == "found"
        assert f.predict(r.trigger)[0] != g.predict(r.trigger)[0]
        assert r.extra["distances"]["linf"] <= r.extra["final_eps"] + 1e-3  # never left its ball
    s = {k: summarize([r.record(i, int(y), None) for i, (r, y) in enumerate(zip(v, labels))]) for k, v in runs.items()}
    assert s["margin"]["median_linf"] < s["dflare"]["median_linf"]
    assert s["margin"]["compressed_error_share"] >= s["dflare"]["compressed_error_share"]
    assert s["margin"]["compressed_error_share"] >= 0.75


def test_margin_search_respects_the_linf_budget_and_the_requirement():
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = pair(noise=0.9)
    xs = agreeing(f, g, 4)
    labels = f.predict(xs)
    for i, (x, y) in enumerate(zip(xs, labels)):
        f.seen.clear()
        res = MarginSearch(f, g, max_queries=2000, timeout=None, seed=i, max_linf=20,
                           require="compressed-error").search(x, label=int(y))
        seen = np.stack(f.seen)
        assert np.abs(seen - x.astype(np.float64)).max() <= 20 + 1e-3  # nothing outside reached a model
        assert res.status in ("found", "max_queries")
        if res.success:
            assert res.orig_label == y != res.comp_label and res.extra["compressed_error"]


def test_margin_search_is_reproducible_and_rejects_bad_options():
    from twinspect.dl.deviate.margin import MarginSearch, margin, window_side

    f, g = pair()
    x = agreeing(f, g, 1)[0]
    a = MarginSearch(f, g, max_queries=500, timeout=None, seed=3).search(x)
    b = MarginSearch(f, g, max_queries=500, timeout=None, seed=3).search(x)
    assert a.status == b.status and a.queries == b.queries
    assert a.trigger is None or np.array_equal(a.trigger, b.trigger)
    assert margin(np.array([0.2, 0.5, 0.3]), 1) == pytest.approx(0.2)
    assert margin(np.array([0.2, 0.5, 0.3]), 0) == pytest.approx(-0.3)
    assert window_side(0.1, 28, 28) == 9 and window_side(1e-6, 28, 28) == 1 and window_side(1.0, 8, 4) == 4
    for kw in ({"eps": 0}, {"eps": 300}, {"window": 0}, {"stall": 0}, {"patience": -1}):
        with pytest.raises(InputError):
            MarginSearch(f, g, max_queries=10, **kw)


def test_refinement_finds_the_band_where_only_the_compressed_model_has_crossed():
    from twinspect.dl.deviate.margin import MarginSearch

    w = np.ones(64) / 64.0
    seed = np.full((8, 8, 1), 50, np.float32)  # w·x/255 ≈ 0.196: class 0 for both
    far = np.full((8, 8, 1), 200, np.float32)  # ≈ 0.784: class 1 for both
    f = Affine(w, 0.50, "f")
    g_first = Affine(w, 0.49, "g")  # crosses slightly before the original along seed → far
    s = MarginSearch(f, g_first, max_queries=10, timeout=None)
    spent, got = s._refine(seed, seed, far, 0, 0.0)
    assert got is not None and spent <= s.refine_steps
    x, pf, pg = got
    assert np.argmax(pf) == 0 and np.argmax(pg) == 1
    assert 0.49 <= float(x.reshape(-1).astype(np.float64) @ w / 255.0) <= 0.50
    # the original crosses first: the bisection sees it and gives up early
    g_late = Affine(w, 0.60, "g")
    s = MarginSearch(f, g_late, max_queries=10, timeout=None)
    spent, got = s._refine(seed, seed, far, 0, 0.0)
    assert got is None and spent < s.refine_steps
    with pytest.raises(InputError):
        MarginSearch(f, g_first, max_queries=10, refine_steps=0)
    with pytest.raises(InputError):
        MarginSearch(f, g_first, max_queries=10, orig_weight=1.0)


def test_the_originals_margin_in_the_objective_brings_more_compressed_model_errors():
    """Weighting the original's margin (m_g − λ·m_f) steers toward changes the original is surer of,
    so more triggers are errors of the compressed model than with g's margin alone (the search before
    issue 19: fixed ε schedule, no refinement)."""
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = pair(seed=4, noise=0.1)
    xs = agreeing(f, g, 8, seed=2)
    labels = f.predict(xs)
    ce = {}
    for name, kw in (("before", {"refine": False, "adaptive": False, "orig_weight": 0.0}), ("weighted", {"orig_weight": 0.8})):
        res = [MarginSearch(f, g, max_queries=1000, timeout=None, seed=i, minimize=False, **kw).search(x, label=int(y))
               for i, (x, y) in enumerate(zip(xs, labels))]
        assert all(r.success and f.predict(r.trigger)[0] != g.predict(r.trigger)[0] for r in res)
        ce[name] = sum(bool(r.extra["compressed_error"]) for r in res)
    assert ce["weighted"] > ce["before"]


def test_texture_map_keeps_flat_regions_of_the_seed_flat():
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = pair(noise=0.9)
    rng = np.random.default_rng(5)
    seeds = []
    for _ in range(40):
        x = np.zeros((8, 8, 1), np.uint8)
        x[:, 5:] = rng.integers(0, 256, size=(8, 3, 1))  # texture on the right, flat black on the left
        if f.predict(x)[0] == g.predict(x)[0]:
            seeds.append(x)
    flat = MarginSearch._local_sd(seeds[0].astype(np.float32)) == 0  # columns 0-3: σ = 0 in every 3 × 3 window
    assert flat[:, :4].all() and not flat[:, 5:].any()
    found = 0
    for i, x in enumerate(seeds[:8]):
        f.seen.clear()
        res = MarginSearch(f, g, max_queries=150, timeout=None, seed=i, texture=0.0, minimize=False).search(x)
        seen = np.stack(f.seen)[1:]  # every candidate after the seed itself
        assert np.array_equal(seen[:, flat], np.broadcast_to(x.astype(np.float64)[flat], seen[:, flat].shape))
        found += res.success
    assert found >= 4
    with pytest.raises(InputError):
        MarginSearch(f, g, max_queries=10, texture=1.5)
