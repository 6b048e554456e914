"""Mutation operators: range, dtype, shape, determinism under a seed, and that they change images."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.deviate.mutations import (
    DEFAULT_OPERATORS,
    REGISTRY,
    AverageBlur,
    GaussianBlur,
    MedianBlur,
    MutationOperator,
    PixelChange,
    get_operators,
    register,
)
from twinspect.errors import InputError


def _images():
    rng = np.random.default_rng(123)
    # a textured grey image, a colour image, and an image with saturated pixels at both ends
    grey = rng.integers(0, 256, size=(28, 28, 1)).astype(np.float32)
    colour = rng.integers(0, 256, size=(32, 32, 3)).astype(np.uint8)
    sat = np.zeros((16, 16, 1), np.float32)
    sat[:8] = 255.0
    return [grey, colour, sat]


@pytest.mark.parametrize("name", DEFAULT_OPERATORS + ("salt_pepper",))
def test_operator_output_range_dtype_shape(name):
    op = REGISTRY[name]()
    for img in _images():
        for s in range(20):
            out = op(img, np.random.default_rng(s))
            assert out.shape == img.shape
            assert out.dtype == np.float32
            assert np.isfinite(out).all()
            assert out.min() >= 0.0 and out.max() <= 255.0


@pytest.mark.parametrize("name", DEFAULT_OPERATORS + ("salt_pepper",))
def test_operator_is_deterministic_under_a_seed_and_varies_across_seeds(name):
    op = REGISTRY[name]()
    img = _images()[1]
    a = op(img, np.random.default_rng(7))
    b = op(img, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    outs = [op(img, np.random.default_rng(s)) for s in range(10)]
    assert any(not np.array_equal(outs[0], o) for o in outs[1:]), "random parameter never varies"


@pytest.mark.parametrize("name", DEFAULT_OPERATORS + ("salt_pepper",))
def test_operator_changes_the_image_and_leaves_input_untouched(name):
    op = REGISTRY[name]()
    for img in _images()[:2]:
        before = img.copy()
        for s in range(10):
            out = op(img, np.random.default_rng(s))
            assert not np.array_equal(out, img.astype(np.float32)), (name, s)
        np.testing.assert_array_equal(img, before)


def test_pixel_change_changes_at_most_max_pixels():
    img = np.full((10, 10, 1), 128.0, np.float32)
    for s in range(50):
        out = PixelChange(max_pixels=3)(img, np.random.default_rng(s))
        assert np.count_nonzero(out != img) <= 3
        assert np.all(out == np.round(out))  # new values are integer intensities


def test_blurs_preserve_a_constant_image_and_smooth_an_impulse():
    const = np.full((12, 12, 3), 77.0, np.float32)
    impulse = np.zeros((15, 15, 1), np.float32)
    impulse[7, 7] = 255.0
    for op in (AverageBlur(), GaussianBlur(), MedianBlur()):
        np.testing.assert_allclose(op(const, np.random.default_rng(0)), const, atol=1e-3)
    # box and Gaussian blur spread a single bright pixel (mass is kept away from the border) ...
    for op in (AverageBlur(kernels=[3]), GaussianBlur(kernels=[5])):
        out = op(impulse, np.random.default_rng(0))
        assert out[7, 7, 0] < 255.0 and out[7, 8, 0] > 0.0
        assert out.sum() == pytest.approx(255.0, rel=1e-4)
    # ... the median removes it
    assert MedianBlur(kernels=[3])(impulse, np.random.default_rng(0)).max() == 0.0


def test_gaussian_blur_uses_opencv_sigma_for_kernel_3():
    # cv2.GaussianBlur(k=3, sigma=0) uses sigma 0.8: weights of the 1-D kernel [0.2741, 0.4519, 0.2741]
    img = np.zeros((9, 9, 1), np.float32)
    img[4, 4] = 1000.0
    out = GaussianBlur(kernels=[3]).apply(img, np.random.default_rng(0))
    w = np.exp(-np.array([1.0, 0.0, 1.0]) / (2 * 0.8**2))
    w /= w.sum()
    np.testing.assert_allclose(out[3:6, 4, 0], 1000.0 * w * w[1], rtol=1e-3)


def test_get_operators_defaults_unknown_and_custom_registration():
    assert [op.name for op in get_operators()] == list(DEFAULT_OPERATORS)
    with pytest.raises(InputError, match="unknown mutation operator"):
        get_operators(["no_such_op"])
    with pytest.raises(InputError, match="duplicate"):
        get_operators(["median_blur", "median_blur"])
    with pytest.raises(InputError):
        get_operators([])

    class Invert(MutationOperator):
        name = "test_invert"

        def apply(self, x, rng):
            return 300.0 - x  # goes out of range on purpose: __call__ must clip

    register(Invert)
    try:
        (op,) = get_operators(["test_invert"])
        out = op(np.zeros((2, 2, 1), np.float32), np.random.default_rng(0))
        assert out.max() == 255.0
    finally:
        REGISTRY.pop("test_invert")


def test_operator_rejects_batches():
    with pytest.raises(InputError, match=r"\(H, W, C\)"):
        PixelChange()(np.zeros((2, 4, 4, 1)), np.random.default_rng(0))


# -- reference-compatible uint8 casting (pixels="uint8-wrap") -------------------------------------

def test_uint8_wrap_mode_wraps_noise_like_the_reference_and_keeps_whole_levels():
    from twinspect.dl.deviate.mutations import MultiplicativeNoise, Uint8Cast

    bright = np.full((8, 8, 1), 250.0, dtype=np.float32)
    wrapped = Uint8Cast(MultiplicativeNoise())
    clipped = MultiplicativeNoise()
    # find a seed whose noise has a positive mean: the reference's astype(uint8) wraps 250·(1+n) > 255
    for s in range(50):
        a = wrapped(bright, np.random.default_rng(s))
        b = clipped(bright, np.random.default_rng(s))
        if np.all(b == 255.0):
            break
    else:  # pragma: no cover
        pytest.fail("no positive-mean draw in 50 seeds")
    assert np.all(a == np.floor(a)) and a.min() >= 0 and a.max() <= 255
    assert a.max() < 255 and a.mean() < 200  # wrapped around to dark values, where clipping saturates
    # the same generator state gives the same image
    assert np.array_equal(a, wrapped(bright, np.random.default_rng(s)))


def test_uint8_wrap_mode_only_floors_blurs_and_rejects_unknown_modes():
    from twinspect.dl.deviate.mutations import Uint8Cast, get_operators

    ops = get_operators(None, pixels="uint8-wrap")
    assert all(isinstance(op, Uint8Cast) for op in ops)
    assert {op.name for op in ops if op.wraps} == {"gaussian_noise", "multiplicative_noise"}
    img = np.random.default_rng(0).integers(0, 256, size=(12, 12, 3)).astype(np.float32)
    blur = next(op for op in ops if op.name == "average_blur")
    out = blur(img, np.random.default_rng(1))
    assert np.all(out == np.floor(out)) and out.min() >= img.min() and out.max() <= img.max()
    with pytest.raises(InputError, match="unknown pixel mode"):
        get_operators(None, pixels="int4")


# -- the public DFlare code's operators, verbatim, as the oracle of the reference cast ------------
# github.com/yqtianust/DFlare, myLib/img_mutations.py (image_noise_gd, image_noise_ml); only numpy.

def _reference_image_noise_gd(img):  # Gaussian-distributed additive noise.
    row, col, ch = img.shape
    mean = 0
    var = 0.1
    sigma = var ** 0.5
    gauss = np.random.normal(mean, sigma, (row, col, ch))
    gauss = gauss.reshape([row, col, ch])
    noisy = img + gauss
    return noisy.astype(np.uint8)


def _reference_image_noise_ml(img):
    row, col, ch = img.shape
    mean = -0.5 + np.random.rand()
    var = 0.05 * np.random.rand()
    sigma = var ** 0.5
    gauss = np.random.normal(mean, sigma, (row, col, ch))
    gauss = gauss.reshape([row, col, ch])
    noisy = img + img * gauss
    return noisy.astype(np.uint8)


class _Replay(MutationOperator):
    """Returns a fixed float result (what the reference computed before its cast), under a given name."""

    def __init__(self, name, result):
        self.name = name
        self.result = result

    def apply(self, x, rng):
        return self.result.copy()


@pytest.mark.parametrize("reference, name", [(_reference_image_noise_gd, "gaussian_noise"),
                                             (_reference_image_noise_ml, "multiplicative_noise")])
def test_uint8_cast_matches_the_reference_operators_numpy_cast(reference, name):
    from twinspect.dl.deviate.mutations import Uint8Cast

    rng = np.random.default_rng(0)
    black_and_bright = rng.choice([0, 1, 2, 250, 255], size=(28, 28, 1)).astype(np.uint8)
    for trial in range(20):
        np.random.seed(trial)
        expected = reference(black_and_bright)  # the reference's own output
        np.random.seed(trial)
        if name == "gaussian_noise":
            before_cast = black_and_bright + np.random.normal(0, 0.1 ** 0.5, black_and_bright.shape)
        else:
            mean, var = -0.5 + np.random.rand(), 0.05 * np.random.rand()
            before_cast = black_and_bright + black_and_bright * np.random.normal(mean, var ** 0.5, black_and_bright.shape)
        got = Uint8Cast(_Replay(name, before_cast))(black_and_bright, np.random.default_rng(0))
        assert np.array_equal(got, expected.astype(np.float32)), trial


def test_uint8_cast_truncates_toward_zero_then_wraps():
    from twinspect.dl.deviate.mutations import Uint8Cast

    values = np.array([-0.3, -5.7, 0.9, 254.6, 255.2, 256.3, 300.2, -255.5], dtype=np.float64).reshape(8, 1, 1)
    got = Uint8Cast(_Replay("gaussian_noise", values))(np.zeros((8, 1, 1)), np.random.default_rng(0)).ravel()
    assert got.tolist() == [0, 251, 0, 254, 255, 0, 44, 1]
    assert got.tolist() == values.astype(np.uint8).ravel().tolist()  # numpy's own cast, here
    # a black background under small Gaussian noise stays black (the floor rule turned half of it white)
    black = np.zeros((28, 28, 1), dtype=np.float32)
    from twinspect.dl.deviate.mutations import GaussianNoise

    out = Uint8Cast(GaussianNoise(0.1, fixed=True))(black, np.random.default_rng(3))
    assert (out > 0).mean() < 0.01


def test_reference_operator_set_has_the_public_codes_ranges():
    from twinspect.dl.deviate.mutations import reference_operators

    ops = reference_operators()
    assert [op.name for op in ops] == ["gaussian_noise", "salt_pepper", "multiplicative_noise", "pixel_change",
                                       "average_blur", "gaussian_blur", "median_blur"]
    by = {op.name: op for op in ops}
    assert by["pixel_change"].min_pixels == 0 and by["pixel_change"].max_pixels == 9
    assert by["gaussian_noise"].fixed and by["gaussian_noise"].max_variance == 0.1
    assert by["average_blur"].kernels == (1, 2, 3, 4, 5)
    assert by["gaussian_blur"].kernels == (1, 3, 5, 7) and by["median_blur"].kernels == (1, 3, 5, 7)
    img = np.random.default_rng(0).integers(0, 256, size=(10, 10, 1)).astype(np.float32)
    for name in ("average_blur", "gaussian_blur", "median_blur"):  # k = 1 is the identity, kept as in the reference
        op = type(by[name])(kernels=(1,))
        assert np.array_equal(op(img, np.random.default_rng(0)), img)
