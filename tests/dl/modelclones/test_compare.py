"""``compare_models`` / ``twinspect models compare``: known answers on small real models, the JSON
contract, plots, the source-code level and every bad input."""

from __future__ import annotations

import copy
import json
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.cli import main  # noqa: E402
from twinspect.dl.adapters.metadata import extra_files, write_metadata  # noqa: E402
from twinspect.dl.modelclones import CompareConfig, compare_models  # noqa: E402


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def _save_ts(module, path, meta, shape=(1, 1, 28, 28)):
    import torch

    ts = torch.jit.trace(module.eval(), torch.zeros(*shape))
    torch.jit.save(ts, str(path), _extra_files=extra_files(meta))
    write_metadata(path, meta)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_torch, torchscript_file, onnx_file, tiny_meta):
    import torch

    d = tmp_path_factory.mktemp("cmp")
    meta = dict(tiny_meta, dataset=None)
    perm = copy.deepcopy(tiny_torch)
    p = torch.randperm(6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():  # permute conv1's output channels and conv2's input channels: same function
        perm.conv1.weight.copy_(tiny_torch.conv1.weight[p])
        perm.conv1.bias.copy_(tiny_torch.conv1.bias[p])
        perm.conv2.weight.copy_(tiny_torch.conv2.weight[:, p])
    other = copy.deepcopy(tiny_torch)
    torch.manual_seed(11)
    for m in other.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    return {
        "ts": torchscript_file,
        "onnx": onnx_file,
        "perm": _save_ts(perm, d / "perm.pt", meta),
        "other": _save_ts(other, d / "other.pt", meta),
    }


def _cfg(**kw):
    base = dict(data="uniform", n_inputs=64, cka_inputs=32, modeldiff_pairs=32, seed=0)
    base.update(kw)
    return CompareConfig(**base)


def test_identical_permuted_and_independent_models(models):
    paths = [models["ts"], models["onnx"], models["perm"], models["other"]]
    r = compare_models(paths, config=_cfg())
    cos, euc = r.matrix("weights_cosine"), r.matrix("weights_euclidean")
    # the TorchScript and ONNX files hold the same weights
    assert cos[0, 1] == pytest.approx(1.0, abs=1e-6) and euc[0, 1] == pytest.approx(0.0, abs=1e-4)
    # the permuted copy computes the same function: I/O identical, CKA 1, weight cosine < 1
    assert r.matrix("io_top1_agreement")[0, 2] == 1.0
    assert r.matrix("io_mean_jsd")[0, 2] == pytest.approx(0.0, abs=1e-9)
    assert r.matrix("cka")[0, 2] == pytest.approx(1.0, abs=1e-6)
    assert cos[0, 2] < 0.95
    # an untrained re-initialisation is far at every level
    assert cos[0, 3] < 0.3 and r.matrix("cka")[0, 3] < r.matrix("cka")[0, 2]
    reuse = r.matrix("reuse")
    assert reuse[0, 1] > reuse[0, 3] and reuse[0, 2] > reuse[0, 3]
    np.testing.assert_allclose(np.diag(r.matrix("io_top1_agreement")), 1.0)
    # the CKA map of the identical pair has a diagonal of ones for the shared layers
    cm = r.cka_maps["0,2"]
    assert cm["layers_a"][0] == "conv1" and cm["matrix"][0][0] == pytest.approx(1.0, abs=1e-6)


def test_json_contract_written_atomically_with_plots(models, tmp_path, capsys):
    out, plots = tmp_path / "r.json", tmp_path / "plots"
    code, stdout, err = run(["models", "compare", str(models["ts"]), str(models["other"]), "--data", "uniform",
                             "--inputs", "40", "--cka-inputs", "20", "--format", "json", "-o", str(out),
                             "--plots", str(plots), "--quiet"], capsys)
    assert code in (0, None), err
    doc = json.loads(out.read_text())
    assert set(doc) >= {"models", "measures", "skipped"}
    for m in doc["models"]:
        assert set(m) >= {"id", "path", "format", "params", "input_shape", "classes"}
        assert m["format"] == "torchscript" and m["classes"] == 10 and m["input_shape"] == [28, 28, 1]
    assert doc["models"][0]["params"] == 6 * 25 + 6 + 12 * 6 * 25 + 12 + 192 * 10 + 10
    for meas in doc["measures"].values():
        assert meas["level"] in ("code", "weights", "representation", "io", "baselines", "reuse")
        assert isinstance(meas["higher_is_similar"], bool)
        assert len(meas["matrix"]) == 2 and all(len(row) == 2 for row in meas["matrix"])
    assert doc["measures"]["io_mean_jsd"]["higher_is_similar"] is False
    assert "reuse" in doc["measures"]
    pngs = sorted(p.name for p in plots.iterdir())
    assert "reuse.png" in pngs and "cka_0_1.png" in pngs
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_different_input_shapes_are_skipped_with_reasons(models, tmp_path, tiny_meta):
    import torch

    class Cifar(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.fc = torch.nn.Linear(4 * 30 * 30, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    meta = dict(tiny_meta, input_shape=[32, 32, 3], dataset=None)
    c = _save_ts(Cifar(), tmp_path / "cifar.pt", meta, shape=(1, 3, 32, 32))
    r = compare_models([models["ts"], c], config=_cfg())
    reasons = {s["measure"]: s["reason"] for s in r.skipped}
    assert "different input shapes" in reasons["io_top1_agreement"]
    assert "different input shapes" in reasons["cka"] or "no common inputs" in reasons["cka"]
    assert "different architectures" in reasons["weights_cosine"]
    assert r.measures["io_top1_agreement"]["matrix"][0][1] is None
    assert r.measures["reuse"]["matrix"][0][1] is None


PROG_A = '''
import numpy as np

def build(width):
    layers = []
    for i in range(3):
        layers.append(("conv", width * (i + 1)))
    return layers

def train(model, data, epochs=3):
    loss = 0.0
    for e in range(epochs):
        for x, y in data:
            loss += float(np.sum((x - y) ** 2))
    return loss / max(epochs, 1)
'''

PROG_RENAMED = PROG_A.replace("width", "w").replace("layers", "blocks").replace("loss", "total")

PROG_OTHER = '''
import json

def load_config(path):
    with open(path) as fh:
        return json.load(fh)

class Reporter:
    def __init__(self, name):
        self.name = name

    def report(self, values):
        return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
'''


def test_code_level_known_answers(models, tmp_path):
    files = []
    for name, text in (("a.py", PROG_A), ("b.py", PROG_RENAMED), ("c.py", PROG_OTHER)):
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    paths = [models["ts"], models["perm"], models["other"]]
    r = compare_models(paths, code=files, config=_cfg(levels=("code",)))
    pc, cd, tw = r.matrix("code_pycode_similar"), r.matrix("code_copydetect"), r.matrix("code_token_lcs")
    assert pc[0, 1] == pytest.approx(1.0)  # renaming leaves the AST unchanged
    assert tw[0, 1] == pytest.approx(1.0)  # T2 tokens abstract identifiers
    assert cd[0, 1] > 0.9
    assert pc[0, 2] < 0.5 and cd[0, 2] < 0.2 and tw[0, 2] < 0.6
    assert set(r.measures) == {"code_pycode_similar", "code_copydetect", "code_token_lcs"}


def assert_user_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err


def test_bad_inputs_exit_2_naming_the_file(models, tmp_path, capsys):
    ts = str(models["ts"])
    corrupt = tmp_path / "bad.onnx"
    corrupt.write_bytes(b"not a model")
    npz = tmp_path / "wrong.npz"
    np.savez(npz, x=np.zeros((5, 32, 32, 3), np.uint8))
    out = tmp_path / "o.json"
    cases = [
        (["models", "compare", ts], "at least two models"),
        (["models", "compare", ts, str(tmp_path / "missing.pt")], "missing.pt"),
        (["models", "compare", ts, str(corrupt)], "bad.onnx"),
        (["models", "compare", ts, ts, "--code", str(tmp_path / "nope.py"), "--code", str(tmp_path / "nope.py")], "nope.py"),
        (["models", "compare", ts, ts, "--code", str(tmp_path / "x.py")], "one program per model"),
        (["models", "compare", ts, ts, "--data", str(npz)], "wrong.npz"),
        (["models", "compare", ts, ts, "--format", "xml"], "--format"),
    ]
    for argv, needle in cases:
        code, _, err = run([*argv, "--quiet", "-o", str(out)], capsys)
        assert_user_error(code, err, needle)
        assert not out.exists()


def test_terminal_summary_keeps_long_names_whole_at_80_columns(models, tmp_path, capsys, monkeypatch):
    """Issue 17: names were cut to '0:lene…' at 80 columns; they are listed once above an index table."""
    import shutil

    long_a = tmp_path / "a_rather_long_model_file_name_original.pt"
    long_b = tmp_path / "a_rather_long_model_file_name_reinitialised.pt"
    shutil.copy(models["ts"], long_a)
    shutil.copy(models["other"], long_b)
    for p in (models["ts"], models["other"]):  # the metadata sidecar travels with the model
        for side in p.parent.glob(p.name + "*"):
            if side != p:
                shutil.copy(side, tmp_path / side.name.replace(p.name, (long_a if p == models["ts"] else long_b).name))
    monkeypatch.setenv("COLUMNS", "80")
    code, stdout, err = run(["models", "compare", str(long_a), str(long_b), "--data", "uniform", "--inputs", "40",
                             "--cka-inputs", "20"], capsys)
    assert code in (0, None), err
    assert f"  0  {long_a.name}" in stdout and f"  1  {long_b.name}" in stdout
    assert "…" not in stdout and max(len(line) for line in stdout.splitlines()) <= 80
