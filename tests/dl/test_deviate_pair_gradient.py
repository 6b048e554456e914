"""The guided search's pair direction (``pair_gradient``): PGD on both models' margins when the compressed model gives a gradient."""

from __future__ import annotations

import numpy as np
import pytest

from tests.dl.affine_twins import Affine

pytest.importorskip("skimage")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pruned_twin_files(tiny_torch, tiny_meta, tmp_path_factory):
    """The conftest's TinyCNN and its 50 %-magnitude-pruned copy (``twinspect compress -m prune``'s
    function, no fine-tuning), saved as TorchScript files with their metadata embedded."""
    from twinspect.dl.adapters.metadata import extra_files
    from twinspect.dl.compress import prune_magnitude

    d = tmp_path_factory.mktemp("pruned-twins")
    out = []
    for name, m in (("orig.pt", tiny_torch), ("prune50.pt", prune_magnitude(tiny_torch, 0.5))):
        torch.jit.save(torch.jit.trace(m.eval(), torch.zeros(1, 1, 28, 28)), str(d / name), _extra_files=extra_files(tiny_meta))
        out.append(d / name)
    return tuple(out)


@pytest.fixture(scope="module")
def pruned_twins(pruned_twin_files):
    """The two files above loaded through twinspect's adapter."""
    from twinspect.dl.adapters import load_classifier

    return tuple(load_classifier(p) for p in pruned_twin_files)


def test_pair_direction_finds_the_compressed_model_error_where_the_original_crosses_first(pruned_twins, mnist_test):
    """On MNIST seeds both models get right, the guided search without the pair direction ends some
    seeds with a trigger in which the *original* left the true label (it crosses first on every
    direction of its own gradient, and the margin loop finds nothing better). With
    ``pair_gradient`` every one of those seeds gives a compressed-model error instead, checked by
    re-running the trigger through both models, in fewer search queries; on the other seeds it still
    finds a compressed-model error, by the same search where the original never crossed first."""
    from twinspect.dl.deviate.guided import GuidedSearch

    f, g = pruned_twins
    x, y = mnist_test
    lf, lg = f.predict_proba(x[:80]).argmax(1), g.predict_proba(x[:80]).argmax(1)
    seeds = [i for i in range(80) if lf[i] == lg[i] == y[i]][:30]
    common = {"max_queries": 1000, "timeout": None, "minimize": False, "second": None}
    old = GuidedSearch(f, g, pair_gradient=False, **common)
    # this little-trained pair's boundaries are far from its seeds (compressed-model errors at radii 40-96):
    # the pair's direction may grow past the default 48 levels here
    new = GuidedSearch(f, g, pair_gradient=True, pair_max_eps=255, **common)
    assert new.params()["pair_gradient"] is True and "pair_gradient" not in old.params()
    missed, same = [], 0
    for i in seeds:
        a = old.search(x[i], seed=[0, i], label=int(y[i]))
        assert a.status == "found"
        if a.extra["compressed_error"] is False:
            missed.append((i, a.queries))
            continue
        b = new.search(x[i], seed=[0, i], label=int(y[i]))
        assert b.extra["compressed_error"] is True
        if "pair_directions" not in b.extra:  # the original never crossed first: the same search
            assert b.queries == a.queries
            np.testing.assert_array_equal(a.trigger, b.trigger)
            same += 1
    assert len(missed) >= 2 and same >= 5
    for i, old_queries in missed:
        b = new.search(x[i], seed=[0, i], label=int(y[i]))
        assert b.status == "found" and b.extra["compressed_error"] is True and b.extra["guided"] is True
        assert f.predict(b.trigger)[0] == y[i] != g.predict(b.trigger)[0]
        assert b.extra["pair_directions"] >= 1 and b.extra["pair_eps"] >= b.extra["guide_eps"]
        assert b.queries < old_queries


def test_pair_direction_does_nothing_without_the_compressed_models_gradient():
    """A compressed model with no input gradient (here an affine black box; an ONNX Runtime or TFLite
    model alike): ``pair_gradient`` changes nothing, and ``params`` says the direction was unavailable."""
    from tests.dl.test_deviate_guided import affine_surrogate
    from twinspect.dl.deviate.guided import GuidedSearch

    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")  # the original crosses first
    kw = {"surrogate": affine_surrogate(w, 20.5 / 255), "max_queries": 300, "timeout": None, "minimize": False,
          "second": None}
    a = GuidedSearch(f, g, **kw).search(np.zeros((8, 8)), seed=0, label=0)
    s = GuidedSearch(f, g, pair_gradient=True, **kw)
    b = s.search(np.zeros((8, 8)), seed=0, label=0)
    assert s.params()["pair_gradient"] is False and "pair_directions" not in b.extra
    assert (a.status, a.queries, a.orig_label, a.comp_label) == (b.status, b.queries, b.orig_label, b.comp_label)
    np.testing.assert_array_equal(a.trigger, b.trigger)


def test_pair_direction_stops_at_its_radius_cap(pruned_twins, mnist_test):
    """With the default cap (48 levels) the pair's direction never queries a radius above it unless the
    original crossed first beyond it; ``pair_max_eps`` must be positive."""
    from twinspect.dl.deviate.guided import PAIR_MAX_EPS, GuidedSearch
    from twinspect.errors import InputError

    f, g = pruned_twins
    x, y = mnist_test
    s = GuidedSearch(f, g, pair_gradient=True, max_queries=1000, timeout=None, minimize=False, second=None)
    assert s.params()["pair_max_eps"] == PAIR_MAX_EPS == 48
    for i in range(12):
        res = s.search(x[i], seed=[0, i], label=int(y[i]))
        if "pair_eps" in res.extra:
            assert res.extra["pair_eps"] <= max(PAIR_MAX_EPS, res.extra["guide_eps"])
    with pytest.raises(InputError):
        GuidedSearch(f, g, pair_gradient=True, pair_max_eps=0, timeout=1)


def test_pair_gradient_option_from_the_cli(pruned_twin_files, tmp_path, capsys):
    """``--pair-gradient`` reaches the guided search (run.json records it, and that the compressed model
    gave a gradient); with ``-a margin`` it is a one-line error, exit 2, nothing written."""
    import json

    from twinspect.cli import main

    orig_p, comp_p = pruned_twin_files
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["deviate", str(orig_p), str(comp_p), "--data", "mnist", "--seeds", "2", "-a", "guided", "--pair-gradient",
              "--max-queries", "300", "--timeout", "0", "--no-minimize", "-o", str(out), "--quiet"])
    assert exc.value.code in (0, None)
    params = json.loads((out / "run.json").read_text())["params"]
    assert params["pair_gradient"] is True and params["pair_max_eps"] == 48
    bad = tmp_path / "bad"
    with pytest.raises(SystemExit) as exc:
        main(["deviate", str(orig_p), str(comp_p), "--data", "mnist", "--seeds", "1", "-a", "margin", "--pair-gradient",
              "-o", str(bad), "--quiet"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--pair-gradient applies to --algorithm guided or auto" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not bad.exists()


def test_pair_restarts_find_compressed_model_errors_the_pair_direction_misses(pruned_twins, mnist_test):
    """Where the pair's direction (bounded at 48 levels) ends without a compressed-model error, the
    pair restarts (hinge PGD on both models from several starts, ``pair_restarts``, on by default) find one on some
    seeds, checked by re-running the trigger through both models, within the restarts' largest
    radius; on seeds where the pair's direction already succeeded they change nothing."""
    from twinspect.dl.deviate.guided import PAIR_MAX_EPS, GuidedSearch

    f, g = pruned_twins
    x, y = mnist_test
    lf, lg = f.predict_proba(x[:120]).argmax(1), g.predict_proba(x[:120]).argmax(1)
    seeds = [i for i in range(120) if lf[i] == lg[i] == y[i]][:40]
    common = {"max_queries": 1000, "timeout": None, "minimize": False, "second": None}
    old = GuidedSearch(f, g, pair_restarts=0, **common)
    new = GuidedSearch(f, g, **common)  # the default: 8 starts
    assert new.params()["pair_restarts"] == 8 and old.params()["pair_restarts"] == 0
    gained = same = 0
    for i in seeds:
        a = old.search(x[i], seed=[0, i], label=int(y[i]))
        b = new.search(x[i], seed=[0, i], label=int(y[i]))
        if "pair_directions" not in a.extra or a.extra.get("compressed_error") is True and "pair_eps" in a.extra:
            # the pair's direction never ran or succeeded: the restarts are never reached
            assert b.queries == a.queries and b.status == a.status
            same += 1
            continue
        if "pair_restart_eps" in b.extra and b.extra.get("compressed_error") is True and "pair_eps" in b.extra:
            assert f.predict(b.trigger)[0] == y[i] != g.predict(b.trigger)[0]
            assert b.extra["pair_eps"] <= PAIR_MAX_EPS and float(np.abs(b.trigger - x[i]).max()) <= PAIR_MAX_EPS + 1e-3
            gained += 1
    assert gained >= 2 and same >= 5, (gained, same)


def test_pair_restarts_must_not_be_negative(pruned_twins):
    from twinspect.dl.deviate.guided import GuidedSearch
    from twinspect.errors import InputError

    with pytest.raises(InputError, match="pair_restarts"):
        GuidedSearch(*pruned_twins, pair_restarts=-1)
