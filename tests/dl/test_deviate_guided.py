"""The guided deviation search (``-a guided``): the margin search started on the original's input gradient."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dl.affine_twins import Affine
from twinspect.errors import IncompatibleModelsError, InputError

pytest.importorskip("skimage")
torch = pytest.importorskip("torch")


def affine_surrogate(w, b, shape=(8, 8, 1)):
    """A torch classifier computing :class:`Affine`'s logits ``(0, w·x/255 − b)`` (differentiable)."""
    from twinspect.dl.adapters.torch import TorchClassifier

    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(np.asarray(w, np.float32)), requires_grad=False)

        def forward(self, x):  # (N, H, W, C) in [0, 1]
            z = x.reshape(len(x), -1) @ self.w - float(b)
            return torch.stack([torch.zeros_like(z), z], dim=1)

    return TorchClassifier.from_module(Lin(), shape, 2, preprocess={"scale": 255.0, "layout": "NHWC"},
                                       output="logits", name="surrogate")


def test_first_crossing_on_the_gradient_path_is_a_compressed_model_error():
    """Twins with the same weights whose thresholds differ by one level: g crosses at +20.5 levels on
    every pixel, f at +21.5. The approach's radii 4, 6, …, 20 keep both at class 0, radius 24 takes
    both across, and the bisection between them finds the band (20.5, 21.5) where only g has
    crossed — found before any random step, in a handful of queries."""
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 21.5 / 255, "f"), Affine(w, 20.5 / 255, "g")
    search = GuidedSearch(f, g, surrogate=affine_surrogate(w, 21.5 / 255), max_queries=500, timeout=None,
                          minimize=False)
    res = search.search(np.zeros((8, 8)), label=0)
    assert res.status == "found" and res.extra["guided"] is True and res.extra["set_aside"] is False
    assert res.orig_label == 0 and res.comp_label == 1 and res.extra["compressed_error"] is True
    linf = float(np.abs(res.trigger - 0).max())
    assert 20.5 - 1e-4 <= linf < 21.5  # at or just past g's boundary, short of f's
    assert res.extra["guide_eps"] == 24 and res.extra["guide_gradients"] >= 1
    assert res.queries <= 8 + search.refine_steps  # 8 radii, then one bisection


def test_when_the_original_always_crosses_first_its_trigger_is_kept_aside():
    """Mirror twins (f crosses at +20.5, g at +21.5): no compressed-model error exists on any path, so
    the trigger found is one in which the original changed, returned as set aside."""
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")
    search = GuidedSearch(f, g, surrogate=affine_surrogate(w, 20.5 / 255), max_queries=300, timeout=None,
                          minimize=False, second=None)  # steps 1-4 alone
    res = search.search(np.zeros((8, 8)), label=0)
    assert res.status == "found" and res.extra["set_aside"] is True
    assert res.orig_label == 1 and res.comp_label == 0 and res.extra["compressed_error"] is False
    assert res.extra["guided"] is False  # the margin search's loop ran after the approach
    # without the seed's label any trigger ends the search at once, in the approach
    res = search.search(np.zeros((8, 8)))
    assert res.status == "found" and res.extra["guided"] is True and res.orig_label == 1


def test_guided_search_needs_a_gradient_and_a_compatible_surrogate():
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 0.2, "f"), Affine(w, 0.1, "g")
    with pytest.raises(InputError, match="surrogate"):
        GuidedSearch(f, g, timeout=1)  # an Affine original has no gradient
    with pytest.raises(IncompatibleModelsError):
        GuidedSearch(f, g, timeout=1, surrogate=affine_surrogate(np.full(16, 1 / 16), 0.2, shape=(4, 4, 1)))
    sur = affine_surrogate(w, 0.2)
    for bad in ({"levels": ()}, {"levels": (8, 4)}, {"levels": (0, 4)}, {"steps": 0}, {"targets": -1}, {"top": 0},
                {"top": 1.5}, {"restarts": -1}, {"fallback": "anywhere"}):
        with pytest.raises(InputError):
            GuidedSearch(f, g, timeout=1, surrogate=sur, **bad)


def test_guided_search_on_a_real_small_pair_is_closer_than_the_margin_search(tiny_twins, mnist_test):
    """A small CNN and its 8-bit-weight copy, on the first seeds both get right: every guided
    trigger is verified through both models (labels differ, a compressed-model error keeps the
    original right, the gradient evaluations are counted), and against the margin search on the
    same seeds it succeeds as often with a lower median L∞. (It is not always cheaper in queries:
    where the original crosses first on every gradient path, the margin loop runs after the
    approach's queries.)"""
    from twinspect.dl.deviate.guided import GuidedSearch
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = tiny_twins
    x, y = mnist_test
    searches = {"margin": MarginSearch(f, g, max_queries=3000, timeout=None),
                "guided": GuidedSearch(f, g, max_queries=3000, timeout=None)}
    seeds = [i for i in range(40) if f.predict(x[i])[0] == y[i] == g.predict(x[i])[0]][:10]
    out: dict[str, list] = {k: [] for k in searches}
    for i in seeds:
        for name, s in searches.items():
            res = s.search(x[i], seed=[0, i], label=int(y[i]))
            if res.status != "found":
                out[name].append(None)
                continue
            lf, lg = f.predict(res.trigger)[0], g.predict(res.trigger)[0]
            assert lf != lg
            assert res.extra["compressed_error"] == (lf == y[i])
            if name == "guided":
                assert res.extra["guide_gradients"] > 0
            out[name].append((res.queries, res.extra["distances"]["linf"]))
    ok = {k: [r for r in v if r is not None] for k, v in out.items()}
    assert len(ok["guided"]) >= len(ok["margin"]) >= 8
    assert np.median([r[1] for r in ok["guided"]]) < np.median([r[1] for r in ok["margin"]])


def test_a_nan_output_on_the_approach_ends_the_search_as_nan():
    """A compressed model that answers NaN once the input is bright enough: the approach's first
    probe past that point ends the seed with status ``nan`` (a deviation DFlare counts), as the
    margin search's loop does."""
    from twinspect.dl.deviate.guided import GuidedSearch

    class NanAbove(Affine):
        def _forward(self, batch):
            out = super()._forward(batch)
            out[batch.reshape(len(batch), -1).mean(axis=1) > 10 / 255] = np.nan  # the batch is x / 255
            return out

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 100 / 255, "f"), NanAbove(w, 100 / 255, "g")
    res = GuidedSearch(f, g, surrogate=affine_surrogate(w, 100 / 255), max_queries=100, timeout=None,
                       minimize=False).search(np.zeros((8, 8)), label=0)
    assert res.status == "nan" and res.success and res.extra["guided"] is True
    assert res.queries == 5  # radii 4, 6, 8, 10 pass; 12 is the first past 10 levels


def test_second_search_runs_on_a_seed_without_a_compressed_model_error():
    """Mirror twins (the original always crosses first): the guided trigger is not a compressed-model
    error, so with ``second="margin"`` the margin search runs from the seed as well; both searches'
    queries count, and the record says which trigger was kept. Without it, nothing changes."""
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")
    sur = affine_surrogate(w, 20.5 / 255)
    plain = GuidedSearch(f, g, surrogate=sur, max_queries=300, timeout=None, minimize=False, second=None)
    two = GuidedSearch(f, g, surrogate=sur, max_queries=300, timeout=None, minimize=False)  # second="margin": the default
    a = plain.search(np.zeros((8, 8)), seed=0, label=0)
    b = two.search(np.zeros((8, 8)), seed=0, label=0)
    assert "second_search" not in a.extra and a.extra["compressed_error"] is False
    info = b.extra["second_search"]
    assert info["kept"] in ("guided", "margin") and info["queries"] >= 1
    assert b.queries == a.queries + info["queries"] <= 300 + a.queries
    assert b.record(0, 0, None)["second_search"] == info
    assert b.extra["guide_gradients"] == a.extra["guide_gradients"]  # the approach's, whichever was kept
    assert two.max_queries == 300 and two.timeout is None  # the budgets lent to step 5 are given back
    for bad in ({"second": "dflare"}, {"second_linf": 0}, {"second_max_queries": 0}):
        with pytest.raises(InputError):
            GuidedSearch(f, g, timeout=1, surrogate=sur, **bad)


def test_second_search_cap_bounds_its_queries_and_keeps_the_first_trigger():
    """Mirror twins: with ``second_max_queries`` the margin search of step 5 stops after that many queries; when
    it found nothing by then, the guided trigger is kept and the queries are the first search's plus the cap. A
    cap above what step 5 needs changes nothing."""
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")
    sur = affine_surrogate(w, 20.5 / 255)
    kw = {"surrogate": sur, "max_queries": 300, "timeout": None, "minimize": False}
    full = GuidedSearch(f, g, second_max_queries=None, **kw).search(np.zeros((8, 8)), seed=0, label=0)
    need = full.extra["second_search"]["queries"]
    first = GuidedSearch(f, g, second=None, **kw).search(np.zeros((8, 8)), seed=0, label=0)
    assert need > 2
    capped = GuidedSearch(f, g, second_max_queries=2, **kw).search(np.zeros((8, 8)), seed=0, label=0)
    assert capped.extra["second_search"]["queries"] == 2 and capped.extra["second_search"]["status"] != "found"
    assert capped.extra["second_search"]["kept"] == "guided" and capped.queries == first.queries + 2
    np.testing.assert_array_equal(capped.trigger, first.trigger)
    roomy = GuidedSearch(f, g, second_max_queries=need, **kw).search(np.zeros((8, 8)), seed=0, label=0)
    assert roomy.queries == full.queries and roomy.extra["second_search"] == full.extra["second_search"]


def test_second_search_keeps_the_better_trigger_and_replays_the_margin_search(tiny_twins, mnist_test):
    """On a real small pair with every found trigger sent to step 5 (``second_linf`` 1 level): the kept
    trigger is never ranked below the guided one (a compressed-model error first, then the lower
    visibility cost); when the margin search's is kept, it is exactly what the margin search alone
    finds from the same seed generator (its draws are replayed, not continued)."""
    from twinspect.dl.deviate.distance import visibility_cost
    from twinspect.dl.deviate.guided import GuidedSearch
    from twinspect.dl.deviate.margin import MarginSearch

    f, g = tiny_twins
    x, y = mnist_test
    kw = {"max_queries": 2000, "timeout": None}
    guided, margin = GuidedSearch(f, g, second=None, **kw), MarginSearch(f, g, **kw)
    both = GuidedSearch(f, g, second="margin", second_linf=1.0, second_max_queries=None, **kw)
    seeds = [i for i in range(40) if f.predict(x[i])[0] == y[i] == g.predict(x[i])[0]][:6]
    kept = []
    for i in seeds:
        a = guided.search(x[i], seed=np.random.default_rng([0, i]), label=int(y[i]))
        m = margin.search(x[i], seed=np.random.default_rng([0, i]), label=int(y[i]))
        b = both.search(x[i], seed=np.random.default_rng([0, i]), label=int(y[i]))
        assert a.status == "found"
        info = b.extra["second_search"]
        kept.append(info["kept"])
        assert b.queries == a.queries + m.queries and info["queries"] == m.queries
        rank = [(not r.extra["compressed_error"], visibility_cost(r.extra["distances"]["linf"], r.extra["distances"]["ssim"]))
                for r in (a, m, b)]
        assert rank[2] == min(rank[0], rank[1])
        same = m if info["kept"] == "margin" else a
        np.testing.assert_array_equal(b.trigger, same.trigger)
    assert set(kept) == {"guided", "margin"}  # on these seeds each search wins somewhere
