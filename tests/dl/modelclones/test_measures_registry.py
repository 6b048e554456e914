"""The measure registry (:mod:`twinspect.dl.modelclones.measures`) is the one definition of measure
names, levels, directions and reuse-score features: ``compare_models``, the reuse score, the CLI and
the report agree with it."""

from __future__ import annotations

import csv
import inspect
import io
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import pytest  # noqa: E402

from twinspect.dl.modelclones import CompareConfig, compare_models, measures, report, reuse  # noqa: E402
from twinspect.dl.modelclones import cli as models_cli  # noqa: E402
from twinspect.dl.modelclones import compare as compare_mod  # noqa: E402

PROG_A = '''
import numpy as np

def build(width, depth):
    layers = []
    for i in range(depth):
        layers.append(("conv", width * (i + 1)))
    return layers

def train(model, data, epochs=3):
    loss = 0.0
    for e in range(epochs):
        for x, y in data:
            loss += float(np.sum((x - y) ** 2))
    return loss / max(epochs, 1)
'''


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, torchscript_file, onnx_file):
    """Every level on two real models (TorchScript and its ONNX export) with training programs and a
    distilled student: a run in which every measure compare_models knows is computed."""
    d = tmp_path_factory.mktemp("registry")
    progs = [d / "a.py", d / "b.py"]
    progs[0].write_text(PROG_A)
    progs[1].write_text(PROG_A.replace("width", "w").replace("layers", "blocks"))
    cfg = CompareConfig(data="mnist", n_inputs=64, cka_inputs=32, modeldiff_pairs=32, seed=0,
                        distill_student="lenet1", distill_epochs=1, distill_train=256)
    return compare_models([torchscript_file, onnx_file], code=progs, config=cfg)


def test_every_measure_compare_models_outputs_is_registered_with_its_level_and_direction(full_run):
    # the full run reports every registered measure, in registry order, with the registry's level/direction
    assert list(full_run.measures) == [m.name for m in measures.REGISTRY]
    for name, meas in full_run.measures.items():
        m = measures.BY_NAME[name]
        assert (meas["level"], meas["higher_is_similar"]) == (m.level, m.higher_is_similar)
        assert meas["level"] in measures.LEVELS
    # and compare_models cannot report an unregistered one (it refuses the name)
    mx = compare_mod._Matrices(2)
    with pytest.raises(KeyError, match="not in twinspect.dl.modelclones.measures.REGISTRY"):
        mx.put("io_new_measure", 0, 1, 0.5)
    # the old view, re-exported where it always was
    assert compare_mod.MEASURES is measures.MEASURES
    assert compare_mod.MEASURES["weights_euclidean"] == ("weights", False)


def test_every_reuse_feature_maps_to_a_registered_measure():
    assert set(measures.FEATURES) == set(reuse.FEATURE_SETS["full"]) | set(reuse.ZOO_FEATURES)
    assert set(measures.FEATURES) == {f for names in reuse.FEATURE_SETS.values() for f in names}
    for names in reuse.FEATURE_SETS.values():
        assert set(names) <= set(measures.FEATURES)
    for feature, name in measures.FEATURES.items():
        m = measures.BY_NAME[name]
        assert m.feature == feature and m.higher_is_similar != m.complement  # a feature is a similarity
    assert measures.reuse_features({"io_mean_jsd": 0.25, "cka": float("nan"), "weights_cosine": 0.9}) == {
        "weights": 0.9, "cka": None, "io_jsd": 0.75, "io_agreement": None, "io_logprob": None, "ddv_random": None,
        "margin_one": None, "margin_both": None}
    with pytest.raises(ValueError, match="feeds no reuse-score feature"):
        measures.BY_NAME["io_jaccard"].feature_value(0.5)


def test_features_from_the_reported_measures_give_the_reported_reuse_score(full_run):
    # what benchmarks/models_reuse.py does: features from the result's matrices, then the score
    m = {k: full_run.matrix(k)[0, 1] for k in full_run.measures}
    feats = measures.reuse_features(m)
    assert reuse.feature_set(feats) == "full"
    assert reuse.reuse_score(feats, reuse.load_params()) == pytest.approx(full_run.matrix("reuse")[0, 1], abs=1e-12)


def test_levels_are_the_ones_of_the_config_the_cli_and_the_report(full_run):
    assert {m.level for m in measures.REGISTRY} == set(measures.LEVELS)
    assert CompareConfig().levels == measures.LEVELS
    assert full_run.config["levels"] == list(measures.LEVELS)
    assert models_cli._LEVELS is measures.LEVELS
    default = inspect.signature(models_cli.compare_cmd).parameters["levels"].default
    assert default.default == ",".join(measures.LEVELS)
    assert measures.names("code") == ("code_pycode_similar", "code_copydetect", "code_token_lcs")
    with pytest.raises(ValueError, match="unknown level"):
        measures.names("structure")
    # the report: its summary columns are registered measures, and the CSV's level column is the registry's
    assert set(report.SUMMARY) <= set(measures.BY_NAME)
    rows = list(csv.DictReader(io.StringIO(report.to_csv(full_run))))
    assert {(r["measure"], r["level"]) for r in rows} == {(m.name, m.level) for m in measures.REGISTRY}


def test_heatmap_scale_follows_the_registry(full_run, tmp_path, monkeypatch):
    # one heatmap per reported measure; unbounded distances get a free colour scale, the rest 0-1
    from twinspect.dl.modelclones import write_plots
    from twinspect.reports import plots

    scales: dict[str, tuple] = {}
    real = plots.heatmap

    def spy(m, path, *args, vmin=None, vmax=None, **kw):
        scales[path.stem] = (vmin, vmax)
        return real(m, path, *args, vmin=vmin, vmax=vmax, **kw)

    monkeypatch.setattr(plots, "heatmap", spy)
    written = write_plots(full_run, tmp_path / "plots")
    assert all(p.is_file() for p in written)
    measure_plots = {k: v for k, v in scales.items() if not k.startswith("cka_")}
    assert set(measure_plots) == set(measures.BY_NAME)
    assert {k for k, v in measure_plots.items() if v == (None, None)} == {
        "weights_euclidean", "distill_euclidean", "io_logprob_margin_one", "io_logprob_margin_both", "io_peer_z_min",
        "io_peer_z_max"}
    assert all(v == (0.0, 1.0) for k, v in measure_plots.items() if measures.BY_NAME[k].unit_range)
