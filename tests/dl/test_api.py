"""The curated twinspect.dl API: names exported lazily, importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from twinspect.errors import InputError


def test_dl_package_exports_main_entry_points_without_importing_torch():
    code = (
        "import sys, twinspect.dl as d, twinspect.dl.deviate as dv; "
        "assert 'torch' not in sys.modules, 'torch imported eagerly'; "
        "print(sorted(d.__all__)); print(sorted(dv.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in ("load_classifier", "Classifier", "DFlare", "DiffChaser", "run_search", "train_model",
                 "compress_model", "repair_run"):
        assert repr(name) in out.splitlines()[0]
    assert "'PairSearch'" in out.splitlines()[1]


def test_lazy_names_resolve_to_the_defining_objects():
    pytest.importorskip("torch")
    import twinspect.dl as d
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.deviate.dflare import DFlare

    assert d.load_classifier is load_classifier
    assert d.DFlare is DFlare
    with pytest.raises(AttributeError):
        d.no_such_name  # noqa: B018


def test_compress_dispatcher_rejects_unknown_method_and_option(tmp_path):
    pytest.importorskip("torch")
    from twinspect.dl.compress import compress_model

    with pytest.raises(InputError, match="unknown compression method"):
        compress_model(tmp_path / "m.pt", "sparsify", tmp_path / "o.pt")
    with pytest.raises(InputError, match="unknown compression option"):
        compress_model(tmp_path / "m.pt", "prune", tmp_path / "o.pt", sparsty=0.5)
    with pytest.raises(ValueError, match="does not exist"):  # InputError is a ValueError
        compress_model(tmp_path / "m.pt", "prune", tmp_path / "o.pt", sparsity=0.5)
