"""Data loading: named shared data sets, user .npz files and their validation, DFlare pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinspect.dl.data import dflare_pair, find_shared_data, load_images, load_npz
from twinspect.errors import InputError

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.fixture
def shared():
    if not (SHARED_DATA / "mnist" / "test.npz").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA}")
    return SHARED_DATA


def test_load_mnist_test(shared):
    x, y = load_images("mnist")
    assert x.shape == (10000, 28, 28, 1) and x.dtype == np.uint8
    assert y.shape == (10000,) and y.dtype == np.int64
    raw = np.load(shared / "mnist" / "test.npz")
    assert np.array_equal(x[..., 0], raw["x"]) and np.array_equal(y, raw["y"])
    assert set(np.unique(y).tolist()) == set(range(10))


def test_load_cifar_train_with_limit(shared):
    x, y = load_images("cifar10", split="train", limit=50)
    assert x.shape == (50, 32, 32, 3) and x.dtype == np.uint8 and y.shape == (50,)


def test_unknown_dataset_and_split(shared):
    with pytest.raises(InputError, match="unknown data set"):
        load_images("imagenet")
    with pytest.raises(InputError, match="split"):
        load_images("mnist", split="validation")


def test_find_shared_data_respects_env(monkeypatch, tmp_path, shared):
    monkeypatch.setenv("TWINSPECT_DATA", str(tmp_path))
    assert find_shared_data() == tmp_path
    (tmp_path / "mnist").mkdir()
    np.savez(tmp_path / "mnist" / "test.npz", x=np.full((3, 28, 28), 7, np.uint8), y=np.array([1, 2, 3]))
    x, y = load_images("mnist")
    assert x.shape == (3, 28, 28, 1) and y.tolist() == [1, 2, 3]
    monkeypatch.setenv("TWINSPECT_DATA", str(tmp_path / "missing"))
    with pytest.raises(InputError, match="TWINSPECT_DATA"):
        load_images("mnist")


def test_npz_round_trip_without_labels(tmp_path):
    p = tmp_path / "imgs.npz"
    x = np.random.default_rng(0).integers(0, 256, (4, 8, 8, 3)).astype(np.int32)
    np.savez(p, x=x)
    got, y = load_images(p)
    assert y is None and got.dtype == np.uint8 and np.array_equal(got, x)


def test_float_pixels_are_kept_when_not_whole(tmp_path):
    p = tmp_path / "trig.npz"
    x = np.array([[[0.5, 254.25], [3.0, 7.0]]], dtype=np.float32)
    np.savez(p, x=x, y=np.array([4]))
    got, y = load_npz(p)
    assert got.dtype == np.float32 and got.shape == (1, 2, 2, 1) and got[0, 0, 1, 0] == 254.25
    np.savez(p, x=np.array([[[1.0, 2.0]]]))
    assert load_npz(p)[0].dtype == np.uint8


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"x": np.zeros((2, 4, 4), dtype=np.complex64)}, "numeric"),
        ({"x": np.array([["a", "b"]])}, "numeric"),
        ({"x": np.zeros((4, 4))}, "3-D"),
        ({"x": np.zeros((1, 2, 4, 4, 3))}, "3-D"),
        ({"x": np.full((2, 4, 4), 300.0)}, "0–255"),
        ({"x": np.full((2, 4, 4), -1, dtype=np.int16)}, "0–255"),
        ({"x": np.full((2, 4, 4), np.nan)}, "NaN"),
        ({"y": np.zeros(3)}, "no array named 'x'"),
        ({"x": np.zeros((2, 4, 4, 7))}, "channels-last"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.zeros(3)}, r"labels y must have shape \(2,\)"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.array([0.5, 1])}, "whole numbers"),
        ({"x": np.zeros((0, 4, 4), np.uint8)}, "no images"),
    ],
)
def test_bad_npz_is_an_input_error_naming_the_file(tmp_path, arrays, message):
    p = tmp_path / "bad.npz"
    np.savez(p, **arrays)
    with pytest.raises(InputError, match=message) as err:
        load_images(p)
    assert str(p) in str(err.value)


def test_not_an_npz(tmp_path):
    p = tmp_path / "junk.npz"
    p.write_bytes(b"this is not a zip archive at all")
    with pytest.raises(InputError, match="junk.npz"):
        load_images(p)
    q = tmp_path / "single.npy"
    np.save(q, np.zeros((2, 4, 4), np.uint8))
    with pytest.raises(InputError, match="not an .npz archive"):
        load_images(q)
    with pytest.raises(InputError, match="does not exist"):
        load_images(tmp_path / "missing.npz")


def test_dflare_pairs(shared):
    for name, pre, ds in [("lenet1", "unit", "mnist"), ("lenet5", "unit", "mnist"), ("resnet", "cifar10-dflare", "cifar10")]:
        orig, comp, p, d = dflare_pair(name)
        assert orig.name == f"{name}.h5" and comp.name == f"{name}-quan.lite"
        assert orig.is_file() and comp.is_file() and (p, d) == (pre, ds)
    with pytest.raises(InputError, match="lenet1, lenet5, resnet"):
        dflare_pair("vgg16")
