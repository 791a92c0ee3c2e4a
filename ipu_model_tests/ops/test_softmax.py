"""softmax against PyTorch."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

SHAPES_AXES = [((7,), [0, -1]), ((3, 5), [0, 1, -1]), ((2, 3, 4), [0, 1, 2, -2]),
               ((4, 1), [1]), ((0, 3), [0, 1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,axes", SHAPES_AXES)
def test_softmax_matches_torch(shape, axes, dtype):
    x = (np.random.default_rng(4).normal(size=shape) * 3).astype(dtype)
    got = run_fn(lambda t: [ops.softmax(t, a) for a in axes], x)
    for a, g in zip(axes, got):
        want = torch.softmax(torch.from_numpy(x.astype(np.float64)), dim=a).numpy()
        assert g.dtype == x.dtype and g.shape == x.shape
        tol = dict(rtol=2e-3, atol=1e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(g.astype(np.float64), want, **tol)


def test_softmax_is_stable_and_sums_to_one():
    x = np.array([[1000.0, 999.0, -1000.0], [-1e4, -1e4, -1e4]], np.float32)
    got = run_fn(lambda t: ops.softmax(t, 1), x)
    want = torch.softmax(torch.from_numpy(x), dim=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got.sum(1), [1.0, 1.0], rtol=1e-6)
    x16 = np.array([20.0, 10.0, 0.0], np.float16)  # exp(20) overflows float16
    got16 = run_fn(lambda t: ops.softmax(t, 0), x16)
    np.testing.assert_allclose(got16, torch.softmax(torch.tensor([20.0, 10.0, 0.0]), 0).numpy(),
                               rtol=1e-3, atol=1e-6)


def test_softmax_nan_and_inf():
    x = np.array([[np.nan, 1.0], [np.inf, 1.0], [-np.inf, 1.0]], np.float32)
    got = run_fn(lambda t: ops.softmax(t, 1), x)
    want = torch.softmax(torch.from_numpy(x), dim=1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[2], want[2])


def _build(fn, shape=(2, 3), dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        return fn(popxl.variable(np.zeros(shape, dtype.as_numpy()), dtype))


def test_bad_inputs():
    with pytest.raises(ValueError, match="softmax: axis 2 is out of range"):
        _build(lambda t: ops.softmax(t, 2))
    with pytest.raises(ValueError, match="softmax: tensor .* has rank 0"):
        _build(lambda t: ops.softmax(t, 0), shape=())
    with pytest.raises(TypeError, match="softmax: tensor .* has dtype int32"):
        _build(lambda t: ops.softmax(t, 0), dtype=popxl.int32)
    with pytest.raises(TypeError, match="softmax: axis must be an int"):
        _build(lambda t: ops.softmax(t, (0, 1)))
    with pytest.raises(TypeError):
        _build(lambda t: ops.softmax(t))  # axis is required, as in PopXL


@pytest.mark.parametrize("n", [1, 5, 16, 64, 67, 1000])
def test_softmax_float32_last_axis_is_the_rounded_float64_softmax(n):
    """float32 along the last axis (the vectorised double path) gives the
    float64 softmax rounded once to float32: every element equal, allowing
    a one-ulp difference in at most one element in 10^5 (where the exact
    result is within ~1e-16 of a rounding boundary). Rows span large
    ranges so that exp(x - max) reaches the underflow region."""
    rng = np.random.default_rng(7 + n)
    rows = 2000 if n < 100 else 200
    x = (rng.normal(size=(rows, n)) * rng.choice([0.1, 3.0, 40.0, 400.0], size=(rows, 1)))
    x = x.astype(np.float32)
    got = run_fn(lambda t: ops.softmax(t, 1), x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    assert got.dtype == np.float32
    diff = got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64)
    assert np.abs(diff).max() <= 1
    assert np.count_nonzero(diff) <= max(1, got.size // 100000)
