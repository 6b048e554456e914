"""Seeds the original gets wrong, set aside (``skip_orig_wrong``, ``--skip-orig-wrong``) and counted apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.dl.affine_twins import Affine
from twinspect.cli import main
from twinspect.dl.deviate.margin import MarginSearch
from twinspect.dl.deviate.results import summarize, summary_rows

torch = pytest.importorskip("torch")


def test_a_seed_the_original_gets_wrong_is_set_aside_without_a_query():
    """Twins whose boundaries are 1 level apart: on a black seed both say 0. With the true label 1 the
    original is wrong there: with ``skip_orig_wrong`` the seed ends at once, no query and no trigger;
    without it (and with label 0, where the original is right) the seed is searched."""
    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")
    seed = np.zeros((8, 8))
    skip = MarginSearch(f, g, max_queries=300, timeout=None, minimize=False, skip_orig_wrong=True)
    keep = MarginSearch(f, g, max_queries=300, timeout=None, minimize=False, skip_orig_wrong=False)
    aside = skip.search(seed, seed=0, label=1)
    assert aside.status == "orig_wrong_at_seed" and not aside.success and aside.queries == 0
    assert aside.trigger is None and aside.orig_label == aside.comp_label == 0
    assert aside.record(0, 1, None)["status"] == "orig_wrong_at_seed"
    searched = keep.search(seed, seed=0, label=1)
    assert searched.status != "orig_wrong_at_seed" and searched.queries > 0
    # the original right: searched the same with and without the option
    a, b = skip.search(seed, seed=0, label=0), keep.search(seed, seed=0, label=0)
    assert a.status == b.status == "found" and a.queries == b.queries
    np.testing.assert_array_equal(a.trigger, b.trigger)
    # no label: nothing to set aside
    assert skip.search(seed, seed=0).status == "found"
    assert skip.params()["skip_orig_wrong"] is True and "skip_orig_wrong" not in keep.params()


def test_summary_counts_set_aside_seeds_apart_from_the_searched_ones():
    recs = [{"status": "found", "success": True, "queries": 10, "time_s": 0.1, "compressed_error": True},
            {"status": "timeout", "success": False, "queries": 50, "time_s": 1.0},
            {"status": "orig_wrong_at_seed", "success": False, "queries": 0, "time_s": 0.0},
            {"status": "disagree_at_seed", "success": False, "queries": 0, "time_s": 0.0}]
    s = summarize(recs)
    assert (s["seeds"], s["searched"], s["no_search_needed"], s["set_aside_orig_wrong"]) == (4, 2, 1, 1)
    assert s["success_rate"] == 0.5 and s["by_status"]["orig_wrong_at_seed"] == 1
    assert dict(summary_rows(s))["set aside: original wrong at seed (not searched; no compressed-model error possible)"] == 1


@pytest.fixture(scope="module")
def tiny_pair_files(tiny_torch, tmp_path_factory):
    """The conftest's TinyCNN and an 8-bit-rounded copy as TorchScript files with metadata (embedded
    and beside them)."""
    from tests.dl.conftest import TINY_META, save_rounded_twins
    from twinspect.dl.adapters.metadata import write_metadata

    paths = save_rounded_twins(tiny_torch, TINY_META, tmp_path_factory.mktemp("skip-twins"))
    for path in paths:
        write_metadata(path, TINY_META)
    return paths


def test_cli_sets_aside_the_seeds_the_original_gets_wrong_and_says_so(tiny_pair_files, mnist_test, tmp_path, capsys):
    """A real run on a small torch pair (labelled .npz of MNIST test images, some of which the tiny
    original gets wrong): ``--skip-orig-wrong`` gives those seeds status ``orig_wrong_at_seed`` with no
    queries and no trigger file, counts them apart in summary.json and says so under the table; the
    other seeds' records equal those of ``--search-orig-wrong`` (the old behaviour), which searches every seed."""
    from twinspect.dl.adapters import load_classifier

    orig_p, comp_p = tiny_pair_files
    f, g = load_classifier(orig_p), load_classifier(comp_p)
    x, y = mnist_test
    x, y = x[:400], y[:400]
    lf, lg = f.predict_proba(x).argmax(1), g.predict_proba(x).argmax(1)
    wrong = np.flatnonzero((lf != y) & (lf == lg))[:3]
    right = np.flatnonzero((lf == y) & (lf == lg))[:3]
    assert len(wrong) == 3 and len(right) == 3  # the tiny original is wrong on about 1 in 4
    data = tmp_path / "seeds.npz"
    idx = np.concatenate([wrong, right])
    np.savez(data, x=x[idx], y=y[idx])
    common = [str(orig_p), str(comp_p), "--data", str(data), "--seeds", "6", "-a", "margin", "--max-queries", "150",
              "--timeout", "0", "--no-minimize"]
    runs = {}
    for opt in ("--skip-orig-wrong", "--search-orig-wrong"):
        out = tmp_path / opt.strip("-")
        with pytest.raises(SystemExit) as exc:
            main(["deviate", *common, opt, "-o", str(out)])
        assert exc.value.code in (0, None)
        text = capsys.readouterr().out
        recs = {r["seed_index"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
        runs[opt] = (out, text, recs, json.loads((out / "summary.json").read_text()))
    out, text, recs, summary = runs["--skip-orig-wrong"]
    positions = {int(i): n for n, i in enumerate(idx)}  # dataset index in the .npz → its place
    aside = [r for r in recs.values() if r["status"] == "orig_wrong_at_seed"]
    assert sorted(r["seed_index"] for r in aside) == [positions[int(i)] for i in wrong] == [0, 1, 2]
    assert all(r["queries"] == 0 and r["trigger"] is None and not r["success"] for r in aside)
    assert not any((out / "triggers" / f"{r['seed_index']}.npz").exists() for r in aside)
    assert summary["set_aside_orig_wrong"] == 3 and summary["searched"] == 3
    assert "3 of 6 seeds were set aside" in text and "--search-orig-wrong" in text
    _, text_old, recs_old, summary_old = runs["--search-orig-wrong"]
    assert summary_old["set_aside_orig_wrong"] == 0 and summary_old["searched"] == 6
    assert not any(r["status"] == "orig_wrong_at_seed" for r in recs_old.values())
    assert "set aside, not searched" not in text_old
    for i in (3, 4, 5):
        keys = ("status", "success", "queries", "orig_label", "comp_label")
        assert {k: recs[i][k] for k in keys} == {k: recs_old[i][k] for k in keys}


@pytest.mark.parametrize("search_cls", ["DFlare", "DiffChaser"])
def test_every_search_sets_the_seed_aside_through_the_shared_seed_check(search_cls):
    """DFlare and DiffChaser (off by default, as their papers) set the seed aside the same way when asked:
    the check is the seed evaluation every search shares, not a step of one algorithm."""
    from twinspect.dl.deviate.dflare import DFlare
    from twinspect.dl.deviate.diffchaser import DiffChaser

    cls = {"DFlare": DFlare, "DiffChaser": DiffChaser}[search_cls]
    w = np.full(64, 1 / 64)
    f, g = Affine(w, 20.5 / 255, "f"), Affine(w, 21.5 / 255, "g")
    seed = np.zeros((8, 8))
    aside = cls(f, g, max_queries=50, timeout=None, minimize=False, skip_orig_wrong=True).search(seed, seed=0, label=1)
    assert aside.status == "orig_wrong_at_seed" and aside.queries == 0 and aside.trigger is None
    searched = cls(f, g, max_queries=50, timeout=None, minimize=False).search(seed, seed=0, label=1)
    assert searched.status != "orig_wrong_at_seed" and searched.queries > 0
