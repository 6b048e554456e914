"""Drepair: metrics on hand-made labels, and the whole repair on a synthetic run directory built from
the real DFlare LeNet-1 pair (no dependency on the search itself)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinspect.dl.adapters.base import Classifier
from twinspect.dl.deviate.repair import (
    RepairedClassifier,
    collect_inputs,
    group_folds,
    load_repaired,
    repair_metrics,
    repair_run,
)
from twinspect.errors import InputError

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
DFLARE = SHARED / "data" / "models" / "dflare"


def test_metrics_on_hand_made_labels():
    orig = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    comp = [0, 1, 2, 3, 4, 5, 9, 9, 9, 0]  # 4 deviated (indices 6-9), 6 non-deviated
    rep = [0, 1, 2, 3, 4, 0, 6, 7, 9, 0]  # repairs 6 and 7, induces a deviation at 5
    m = repair_metrics(orig, comp, rep)
    assert (m["n_deviated"], m["n_non_deviated"], m["n_repaired"], m["n_induced"]) == (4, 6, 2, 1)
    assert m["repair_ratio"] == pytest.approx(0.5)
    assert m["inducing_ratio"] == pytest.approx(1 / 6)
    assert m["improvement_ratio"] == pytest.approx(0.25)


def test_metrics_edge_cases():
    perfect = repair_metrics([1, 2, 3], [1, 0, 0], [1, 2, 3])
    assert perfect["repair_ratio"] == 1.0 and perfect["inducing_ratio"] == 0.0 and perfect["improvement_ratio"] == 1.0
    harmful = repair_metrics([1, 2, 3, 4], [1, 2, 3, 0], [0, 0, 3, 0])  # repairs nothing, induces 2 of 3
    assert harmful["repair_ratio"] == 0.0 and harmful["inducing_ratio"] == pytest.approx(2 / 3)
    assert harmful["improvement_ratio"] == pytest.approx(-2.0)
    none_deviated = repair_metrics([1, 2], [1, 2], [1, 2])
    assert none_deviated["repair_ratio"] is None and none_deviated["improvement_ratio"] is None
    with pytest.raises(InputError, match="length"):
        repair_metrics([1, 2], [1], [1, 2])


def test_group_folds_keep_groups_together_and_cover_everything():
    groups = np.repeat(np.arange(12), 2)
    folds = group_folds(groups, 5, seed=3)
    assert len(folds) == 5 and all(len(f) for f in folds)
    assert sorted(np.concatenate(folds).tolist()) == list(range(24))
    for f in folds:
        assert all(np.isin(np.flatnonzero(groups == g), f).all() for g in np.unique(groups[f]))
    assert all(np.array_equal(a, b) for a, b in zip(folds, group_folds(groups, 5, seed=3)))


class SwappedLabels(Classifier):
    """A 'compressed' model that is the original with classes a and b swapped: a known deviation."""

    def __init__(self, base: Classifier, a: int, b: int):
        from twinspect.dl.adapters.base import PRESETS

        super().__init__(base.input_shape, base.num_classes, PRESETS["raw"], "probabilities", "swapped")
        self.base, self.perm = base, np.arange(base.num_classes)
        self.perm[[a, b]] = [b, a]

    def _forward(self, batch):
        return self.base.predict_proba(batch)[:, self.perm]


@pytest.fixture(scope="module")
def lenet1_pair():
    for f in ("lenet1.h5", "lenet1-quan.lite"):
        if not (DFLARE / f).exists():
            pytest.skip(f"DFlare model {f} not found in ../shared")
    pytest.importorskip("keras")
    pytest.importorskip("ai_edge_litert")
    from twinspect.dl.adapters import load_classifier

    return (load_classifier(DFLARE / "lenet1.h5", preprocess="unit"),
            load_classifier(DFLARE / "lenet1-quan.lite", preprocess="unit"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, lenet1_pair):
    """A run directory in the exact `twinspect deviate` format: 40 MNIST seeds, mildly noised 'triggers'."""
    from twinspect.dl.data import load_images

    orig, comp = lenet1_pair
    x, y = load_images("mnist", limit=40)
    root = tmp_path_factory.mktemp("run")
    (root / "triggers").mkdir()
    rng = np.random.default_rng(0)
    spec = lambda p: {"path": str(p), "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NHWC"},  # noqa: E731
                      "name": Path(p).name, "input_shape": [28, 28, 1], "num_classes": 10}
    config = {"algorithm": "dflare", "models": {"original": spec(DFLARE / "lenet1.h5"),
                                                "compressed": spec(DFLARE / "lenet1-quan.lite")},
              "dataset": "mnist", "seed": 0, "params": {}, "seed_indices": list(range(40)), "num_seeds": 40,
              "twinspect_version": "test"}
    (root / "run.json").write_text(json.dumps(config))
    lines = []
    for i in range(40):
        seed = x[i].astype(np.float32)
        if i % 8 == 7:  # some seeds end without a trigger: repair reads them from the dataset
            lines.append({"seed_index": i, "true_label": int(y[i]), "status": "timeout", "success": False,
                          "queries": 10, "time_s": 0.1, "orig_label": -1, "comp_label": -1, "trigger": None})
            continue
        trig = np.clip(seed + rng.normal(0, 12, seed.shape), 0, 255).astype(np.float32)
        po, pc = orig.predict_proba(trig)[0], comp.predict_proba(trig)[0]
        np.savez(root / "triggers" / f"{i}.npz", seed=seed, trigger=trig, orig_probs=po, comp_probs=pc)
        lines.append({"seed_index": i, "true_label": int(y[i]), "status": "found", "success": True, "queries": 3,
                      "time_s": 0.1, "orig_label": int(po.argmax()), "comp_label": int(pc.argmax()),
                      "trigger": f"triggers/{i}.npz"})
    text = "".join(json.dumps(r) + "\n" for r in lines)
    (root / "results.jsonl").write_text(text + '{"seed_index": 99, "stat')  # torn last line (interrupted run)
    return root


def test_collect_inputs_reads_seeds_triggers_and_dataset_seeds(run_dir):
    x, groups, kinds, config = collect_inputs(run_dir)
    assert x.shape == (35 * 2 + 5, 28, 28, 1) and x.dtype == np.float32
    assert int(np.sum(kinds == 1)) == 35 and int(np.sum(kinds == 0)) == 40
    assert sorted(set(groups.tolist())) == list(range(40))
    assert config["algorithm"] == "dflare"


def test_repair_on_the_real_pair_writes_outputs_and_loads(run_dir, tmp_path, lenet1_pair):
    out = tmp_path / "rep"
    report = repair_run(run_dir, out, folds=5, hidden=32, max_iter=300, seed=0, quiet=True)
    assert {p.name for p in out.iterdir()} >= {"repair.json", "repair_model.joblib", "repair_data.npz"}
    saved = json.loads((out / "repair.json").read_text())
    assert saved["mean"] == report["mean"] and len(saved["folds"]) == 5
    assert sum(f["n_test"] for f in saved["folds"]) == saved["inputs"]["total"] == 75
    for f in saved["folds"]:
        assert f["n_deviated"] + f["n_non_deviated"] == f["n_test"]
        assert f["inducing_ratio"] is None or 0.0 <= f["inducing_ratio"] <= 1.0
    # the pair agrees almost everywhere: the perceptron must mostly reproduce the compressed label
    assert report["final"]["training_fit"]["inducing_ratio"] <= 0.2
    repaired = load_repaired(out)
    assert isinstance(repaired, RepairedClassifier)
    x, _, _, _ = collect_inputs(run_dir)
    p = repaired.predict_proba(x[:10])
    assert p.shape == (10, 10) and np.allclose(p.sum(1), 1.0)
    assert repaired.queries == 10
    expected = repaired.mlp.predict(lenet1_pair[1].predict_proba(x[:10]))
    np.testing.assert_array_equal(repaired.predict(x[:10]), expected)


def test_repair_learns_a_known_deviation(run_dir, tmp_path, lenet1_pair):
    """A 'compressed' model that swaps two digits deviates on them; the perceptron should undo the swap."""
    orig, comp = lenet1_pair
    x, _, _, _ = collect_inputs(run_dir)
    labels = orig.predict(x)
    a, b = np.unique(labels, return_counts=True)[0][np.argsort(-np.unique(labels, return_counts=True)[1])[:2]]
    swapped = SwappedLabels(comp, int(a), int(b))
    report = repair_run(run_dir, tmp_path / "rep", folds=3, hidden=32, max_iter=1000, seed=1, quiet=True,
                        original=orig, compressed=swapped)
    assert report["inputs"]["deviated"] >= 10
    assert report["mean"]["repair_ratio"] >= 0.8
    assert report["mean"]["inducing_ratio"] <= 0.1
    assert report["mean"]["improvement_ratio"] >= 0.7


def test_bad_run_directories_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        repair_run(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "run").mkdir()
    with pytest.raises(InputError, match="run.json"):
        repair_run(tmp_path / "run", tmp_path / "out")
    with pytest.raises(InputError, match="folds"):
        repair_run(tmp_path / "run", tmp_path / "out", folds=1)
    with pytest.raises(InputError, match="solver"):
        repair_run(tmp_path / "run", tmp_path / "out", solver="newton")
    assert not (tmp_path / "out").exists()


def test_cli_repair(run_dir, tmp_path, capsys):
    from twinspect.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["repair", str(run_dir), "-o", str(tmp_path / "r"), "--folds", "4", "--hidden", "16", "-q", "-f", "json"])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    report = json.loads(out.out)  # -q hides the table; -f json is the report itself
    assert len(report["folds"]) == 4 and "repair_ratio" in report["mean"]
    assert (tmp_path / "r" / "repair.json").exists()
    with pytest.raises(SystemExit) as exc:
        main(["repair", str(tmp_path / "missing"), "-o", str(tmp_path / "r2")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "missing" in err and len(err.strip().splitlines()) == 1
