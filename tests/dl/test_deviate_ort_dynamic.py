"""The differentiable stand-in for ONNX Runtime dynamic-int8 models (``twinspect.dl.deviate.ort_dynamic``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def _export(module, shape_chw, path):
    """torch → ONNX (the TorchScript exporter, as ``benchmarks/deviate_suite.py``), dynamic batch."""
    torch.onnx.export(module.eval(), (torch.zeros(1, *shape_chw),), str(path), dynamo=False, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    return path


def _quantize(src, dst):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    return dst


@pytest.fixture(scope="module")
def mnist_dyn_pair(tiny_torch, tmp_path_factory):
    """The conftest's trained TinyCNN exported to ONNX and its ORT ``quantize_dynamic`` int8 copy."""
    d = tmp_path_factory.mktemp("ort-dyn")
    f = _export(tiny_torch, (1, 28, 28), d / "tiny.onnx")
    return f, _quantize(f, d / "tiny-dyn.onnx")


@pytest.fixture(scope="module")
def cifar_dyn_pair(tmp_path_factory):
    """A quarter-width ResNet-8 (residual Adds, global average pooling, a linear head; random weights,
    seed 0) exported to ONNX, and its ORT dynamic-int8 copy."""
    from twinspect.dl.architectures import build_model

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("ort-dyn-cifar")
    f = _export(build_model("resnet8", (32, 32, 3), 10, 0.25), (3, 32, 32), d / "r8.onnx")
    return f, _quantize(f, d / "r8-dyn.onnx")


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _agreement(pair, x_nchw):
    """One image at a time (ORT's activation scales are per batch): float, int8 and stand-in logits."""
    from twinspect.dl.deviate.ort_dynamic import DynamicInt8StandIn

    fp, qp = pair
    sf, sq, st = _session(fp), _session(qp), DynamicInt8StandIn(qp)
    zf = np.concatenate([sf.run(None, {"x": x_nchw[i:i + 1]})[0] for i in range(len(x_nchw))])
    zq = np.concatenate([sq.run(None, {"x": x_nchw[i:i + 1]})[0] for i in range(len(x_nchw))])
    with torch.no_grad():
        zs = np.concatenate([st(torch.from_numpy(x_nchw[i:i + 1])).numpy() for i in range(len(x_nchw))])
    return zf, zq, zs


def test_dynamic_quantize_linear_matches_onnx_runtime():
    """The stand-in's DynamicQuantizeLinear equals ONNX Runtime's on random tensors (values, scale, zero
    point), including all-positive, all-negative and all-zero ones; its gradient is straight-through."""
    from onnx import TensorProto, helper

    from twinspect.dl.deviate.ort_dynamic import dynamic_quantize_linear

    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    graph = helper.make_graph([node], "dql", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [None, 7]),
                               helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    cases = [rng.normal(0, 3, (5, 7)), rng.uniform(0.5, 2, (5, 7)), -rng.uniform(0.5, 2, (5, 7)), np.zeros((5, 7))]
    for x in cases:
        x = x.astype(np.float32)
        y, s, z = sess.run(None, {"x": x})
        xt = torch.from_numpy(x).requires_grad_(True)
        ys, ss, zs = dynamic_quantize_linear(xt)
        np.testing.assert_array_equal(ys.detach().numpy(), y.astype(np.float32))
        assert float(ss) == pytest.approx(float(s), rel=1e-6) and float(zs) == float(z)
        ((ys - zs) * ss).sum().backward()
        np.testing.assert_allclose(xt.grad.numpy(), 1.0, rtol=1e-5)


def test_saturated_pair_matmul_is_onnx_runtimes_avx2_kernel_arithmetic():
    """``saturated_pair_matmul`` against the kernel's arithmetic written out in int64 numpy on random operands
    (odd and even K, zero points): every element equal; with operands too small to saturate it equals ONNX's
    exact definition, and two adjacent 255·127 products come out as 32767 (the int16 bound)."""
    from twinspect.dl.deviate.ort_dynamic import saturated_pair_matmul

    rng = np.random.default_rng(0)
    for k, n, m, a_zp, b_zp in ((7, 5, 2, 0, 0), (256, 120, 3, 113, 0), (25, 4, 1, 255, -3)):
        a = rng.integers(0, 256, (m, k)).astype(np.int64)
        b = rng.integers(-128, 128, (k, n)).astype(np.int64)
        prod = np.zeros((m, k + k % 2, n), np.int64)
        prod[:, :k] = a[:, :, None] * b[None]
        want = (np.clip(prod.reshape(m, -1, 2, n).sum(2), -32768, 32767).sum(1) - a_zp * b.sum(0)
                - b_zp * a.sum(1, keepdims=True) + k * a_zp * b_zp)
        got = saturated_pair_matmul(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64),
                                    float(a_zp), float(b_zp)).numpy()
        np.testing.assert_array_equal(got, want)
        assert (want != (a - a_zp) @ (b - b_zp)).any()  # these operands do saturate
        small = saturated_pair_matmul(torch.tensor(a % 16, dtype=torch.float64), torch.tensor(b % 16, dtype=torch.float64),
                                      float(a_zp), float(b_zp)).numpy()
        np.testing.assert_array_equal(small, (a % 16 - a_zp) @ (b % 16 - b_zp))
    pair = saturated_pair_matmul(torch.tensor([[255.0, 255.0]]), torch.tensor([[127.0], [127.0]]))
    assert float(pair[0, 0]) == 32767.0


def test_standin_follows_this_machines_onnx_runtime_on_a_saturating_product(tmp_path):
    """A one-layer ``MatMulInteger`` graph whose products saturate int16 pair sums: the stand-in gives ONNX Runtime's
    own output on this machine (saturated or exact, whichever its kernel computes, as the probe says), and the
    other mode does not."""
    from onnx import TensorProto, helper, numpy_helper

    from twinspect.dl.deviate.ort_dynamic import DynamicInt8StandIn, ort_saturates_u8s8_pairs

    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (64, 10)).astype(np.int8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["y"]),
             helper.make_node("Cast", ["y"], ["out"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "sat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])],
                          initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, np.int8), "wz")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "sat.onnx"
    path.write_bytes(m.SerializeToString())
    x = rng.uniform(0.0, 1.0, (1, 64)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    here = ort_saturates_u8s8_pairs()
    same = DynamicInt8StandIn(path)(torch.from_numpy(x)).numpy()
    other = DynamicInt8StandIn(path, saturate=not here)(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(same, want)
    assert not np.array_equal(other, want)


@pytest.mark.parametrize("which", ["mnist", "cifar"])
def test_standin_agrees_with_the_int8_model_far_better_than_the_float_original(which, request, mnist_test, cifar_test):
    """On 300 real test images, run one at a time, the stand-in's top-1 labels and logits agree with the ORT
    int8 model's far better than the float ONNX original's do: every label the same, and a max logit
    difference under 1 % of the original's (the integer kernels are reproduced, not approximated)."""
    if which == "mnist":
        pair = request.getfixturevalue("mnist_dyn_pair")
        x = (mnist_test[0][:300].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()
    else:
        pair = request.getfixturevalue("cifar_dyn_pair")
        x = (cifar_test[0][:300].astype(np.float32) / 255.0).transpose(0, 3, 1, 2).copy()
    zf, zq, zs = _agreement(pair, x)
    float_diff, standin_diff = np.abs(zf - zq).max(), np.abs(zs - zq).max()
    assert float_diff > 0  # the int8 copy does differ from its original
    assert (zs.argmax(1) == zq.argmax(1)).all()
    assert (zs.argmax(1) == zq.argmax(1)).mean() >= (zf.argmax(1) == zq.argmax(1)).mean()
    assert standin_diff < 0.01 * float_diff


def test_standin_logit_fn_through_the_adapter_gives_gradients(mnist_dyn_pair, mnist_test):
    """Through twinspect's ONNX adapter: ``standin_logit_fn`` of the int8 model gives its logits from unit
    pixels (N, H, W, C), equal to the adapter's, with a non-zero input gradient; the float ONNX original and
    a torch model are not dynamic-int8 models and get none (with the reason)."""
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.deviate.ort_dynamic import is_dynamic_int8, standin_logit_fn

    fp, qp = mnist_dyn_pair
    g = load_classifier(qp, preprocess="unit", output="logits")
    f = load_classifier(fp, preprocess="unit", output="logits")
    assert is_dynamic_int8(g) and not is_dynamic_int8(f)
    fn, why = standin_logit_fn(g)
    assert fn is not None and why is None
    x = mnist_test[0][:4]
    xu = torch.from_numpy(x[:1].astype(np.float32) / 255.0).requires_grad_(True)
    z = fn(xu)
    np.testing.assert_allclose(torch.softmax(z.detach().double(), 1).numpy(), g.predict_proba(x[:1]), atol=1e-6)
    (grad,) = torch.autograd.grad(z[0, 3] - z[0, 5], xu)
    assert float(grad.abs().sum()) > 0
    none, reason = standin_logit_fn(f)
    assert none is None and "DynamicQuantizeLinear" in reason


def test_unsupported_operator_is_a_model_error(tmp_path):
    """A graph with an operator the stand-in does not run is refused with a ModelError naming it."""
    from onnx import TensorProto, helper

    from twinspect.dl.deviate.ort_dynamic import DynamicInt8StandIn
    from twinspect.errors import ModelError

    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "erf.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(ModelError, match="Erf"):
        DynamicInt8StandIn(path)


def test_guided_search_uses_the_standin_only_when_asked(mnist_dyn_pair, tiny_torch, tmp_path, mnist_test):
    """With ``pair_gradient`` the guided search gives an ORT dynamic-int8 compressed model the stand-in's
    gradient (``params`` records it); ``pair_standin=False`` keeps the earlier behaviour (no gradient)."""
    from tests.dl.conftest import TINY_META
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.adapters.metadata import extra_files
    from twinspect.dl.deviate.guided import GuidedSearch

    fp, qp = mnist_dyn_pair
    pt = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.trace(tiny_torch.eval(), torch.zeros(1, 1, 28, 28)), str(pt), _extra_files=extra_files(TINY_META))
    f = load_classifier(fp, preprocess="unit", output="logits")
    g = load_classifier(qp, preprocess="unit", output="logits")
    sur = load_classifier(pt)
    kw = {"surrogate": sur, "max_queries": 300, "timeout": None, "minimize": False, "second": None}
    on = GuidedSearch(f, g, pair_gradient=True, **kw)
    off = GuidedSearch(f, g, pair_gradient=True, pair_standin=False, **kw)
    assert on.params()["pair_gradient"] is True and on.params()["pair_standin"] is True
    assert off.params()["pair_gradient"] is False and off.params()["pair_standin"] is False
    x, y = mnist_test
    res = on.search(x[0], seed=[0, 0], label=int(y[0]))
    assert res.status in ("found", "not_found", "orig_wrong_at_seed", "disagree_at_seed")
