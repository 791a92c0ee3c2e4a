"""Reductions (sum, mean, max, min, median, prod, l1, l2, logsum, logsumexp,
sumsquare), lamb_square and histogram against NumPy references."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

# Every (axis, keepdims) case is computed in one graph per op/dtype/shape.
CASES = {
    (3, 4, 5): [None, 0, 1, -1, (0, 2), [-1, 0], (0, 1, 2), ()],
    (7,): [None, 0, -1],
    (): [None, ()],
    (2, 1, 3): [1, (0, 1)],
}


def _np_axes(axis, rank):
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % rank for a in axis))


def _to_last(x, axes):
    """x with the reduced axes moved last and flattened: shape (..., n)."""
    kept = [i for i in range(x.ndim) if i not in axes]
    y = np.transpose(x, kept + list(axes))
    return y.reshape([x.shape[i] for i in kept] + [-1])


def _keep(r, x_shape, axes, keepdims):
    if keepdims:
        return np.reshape(r, [1 if i in axes else d for i, d in enumerate(x_shape)])
    return np.reshape(r, [d for i, d in enumerate(x_shape) if i not in axes])


def _median_ref(x, axes):
    y = np.sort(_to_last(x, axes), axis=-1)
    n = y.shape[-1]
    return y[..., (n - 1) // 2]


def _lse_ref(x, axes):
    y = _to_last(x, axes)
    m = np.max(y, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(y - m), axis=-1, keepdims=True)))[..., 0]


def reference(name, x, axis, keepdims):
    """NumPy result, computed in float64 (int64 for integers), cast back."""
    axes = _np_axes(axis, x.ndim)
    is_int = np.issubdtype(x.dtype, np.integer)
    w = x.astype(np.int64 if is_int else np.float64)
    if name == "sum":
        r = np.sum(w, axis=axes)
    elif name == "mean":
        if is_int:
            n = int(np.prod([x.shape[a] for a in axes]))
            s = np.sum(w, axis=axes)
            r = np.sign(s) * (np.abs(s) // n)  # truncation toward zero
        else:
            r = np.mean(w, axis=axes)
    elif name == "max":
        r = np.max(w, axis=axes)
    elif name == "min":
        r = np.min(w, axis=axes)
    elif name == "median":
        r = _median_ref(w, axes)
    elif name == "prod":
        r = np.prod(w, axis=axes)
    elif name == "l1":
        r = np.sum(np.abs(w), axis=axes)
    elif name == "l2":
        r = np.sqrt(np.sum(w * w, axis=axes))
    elif name == "logsum":
        r = np.log(np.sum(w, axis=axes))
    elif name == "logsumexp":
        r = _lse_ref(w, axes)
    elif name == "sumsquare":
        r = np.sum(w * w, axis=axes)
    else:
        raise AssertionError(name)
    return _keep(r, x.shape, axes, keepdims).astype(x.dtype)


ALL = ["sum", "mean", "max", "min", "median", "prod", "l1", "l2", "logsum", "logsumexp",
       "sumsquare"]
FLOAT_ONLY = {"l2", "logsum", "logsumexp"}


def _data(name, shape, dtype, rng):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-6, 7, size=shape).astype(dtype)
    if name in ("logsum", "prod"):
        return rng.uniform(0.6, 1.4, size=shape).astype(dtype)  # positive, tame products
    return rng.normal(size=shape).astype(dtype)


def _tol(dtype):
    if dtype == np.float16:
        return dict(rtol=1e-2, atol=1e-2)
    return dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("shape", list(CASES))
def test_reduce_matches_numpy(name, dtype, shape):
    if name in FLOAT_ONLY and dtype == np.int32:
        pytest.skip("floating-point only")
    rng = np.random.default_rng(hash((name, shape)) % 2**32)
    x = _data(name, shape, dtype, rng)
    fn = getattr(ops, name)
    combos = [(a, k) for a in CASES[shape] for k in (False, True)]
    got = run_fn(lambda t: [fn(t, axis=a, keepdims=k) for a, k in combos], x)
    for (a, k), g in zip(combos, got):
        want = reference(name, x, a, k)
        assert g.dtype == x.dtype
        assert g.shape == want.shape, (name, a, k)
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(g, want, err_msg=f"{name} axis={a} keepdims={k}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64),
                                       err_msg=f"{name} axis={a} keepdims={k}", **_tol(dtype))


def test_default_axis_reduces_everything():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = run_fn(lambda t: [ops.sum(t), ops.mean(t, keepdims=True)], x)
    assert got[0].shape == () and got[0] == x.sum()
    assert got[1].shape == (1, 1, 1) and got[1].item() == pytest.approx(x.mean())


def test_median_even_count_takes_lower_middle():
    x = np.array([[4.0, 1.0, 3.0, 2.0], [10.0, 40.0, 20.0, 30.0]], np.float32)
    got = run_fn(lambda t: [ops.median(t, axis=1), ops.median(t)], x)
    np.testing.assert_array_equal(got[0], [2.0, 20.0])
    assert got[1] == 4.0  # sorted: 1 2 3 4 10 20 30 40 -> lower middle


def test_logsumexp_is_stable_for_large_values():
    x = np.array([[1000.0, 1000.0, 999.0], [-1000.0, -1001.0, -np.inf]], np.float32)
    got = run_fn(lambda t: ops.logsumexp(t, axis=1), x)
    want = _lse_ref(x.astype(np.float64), (1,))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    x16 = np.array([[60.0, 60.0], [-60.0, -61.0]], np.float16)  # exp(60) overflows f16
    got16 = run_fn(lambda t: ops.logsumexp(t, axis=1), x16)
    np.testing.assert_allclose(got16, _lse_ref(x16.astype(np.float64), (1,)), rtol=1e-3)


def test_logsumexp_all_minus_inf_and_nan():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 0.0]], np.float32)
    got = run_fn(lambda t: ops.logsumexp(t, axis=1), x)
    assert got[0] == -np.inf and got[1] == np.inf and np.isnan(got[2])


def test_max_min_propagate_nan():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
    got = run_fn(lambda t: [ops.max(t, axis=1), ops.min(t, axis=1), ops.median(t, axis=1)], x)
    for g, want in zip(got, [np.max(x, 1), np.min(x, 1), [np.nan, 2.0]]):
        np.testing.assert_array_equal(g, np.asarray(want, np.float32))


def test_float16_sum_accumulates_wider_than_float16():
    # 4096 ones: a float16 running sum would stall at 2048.
    x = np.ones(4096, np.float16)
    got = run_fn(lambda t: [ops.sum(t), ops.mean(t), ops.sumsquare(t)], x)
    assert got[0] == 4096 and got[1] == 1 and got[2] == 4096


def test_integer_sum_wraps_like_numpy_cast():
    x = np.array([2**31 - 1, 1, 5], np.int32)
    got = run_fn(lambda t: [ops.sum(t), ops.prod(t), ops.mean(t)], x)
    assert got[0] == np.int64(x.astype(np.int64).sum()).astype(np.int32)
    assert got[1] == np.int32(np.int64(2**31 - 1) * 5 % 2**32 - 2**32 * (
        (np.int64(2**31 - 1) * 5 % 2**32) >= 2**31))
    assert got[2] == (2**31 - 1 + 1 + 5) // 3


def test_uint8_and_float64_reductions():
    x8 = np.array([[200, 100], [3, 4]], np.uint8)
    got = run_fn(lambda t: [ops.sum(t, axis=1), ops.max(t, axis=0)], x8)
    np.testing.assert_array_equal(got[0], np.array([44, 7], np.uint8))  # 300 wraps to 44
    np.testing.assert_array_equal(got[1], [200, 100])
    x64 = np.random.default_rng(0).normal(size=(5, 6))
    got = run_fn(lambda t: [ops.l2(t, axis=0), ops.logsumexp(t, axis=1)], x64)
    np.testing.assert_allclose(got[0], np.sqrt((x64 ** 2).sum(0)), rtol=1e-12)
    np.testing.assert_allclose(got[1], _lse_ref(x64, (1,)), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_empty_reductions_follow_numpy(dtype):
    x = np.zeros((0, 3), dtype)
    fns = [ops.sum, ops.prod, ops.sumsquare, ops.l1]
    got = run_fn(lambda t: [f(t, axis=0) for f in fns] + [ops.sum(t, axis=1),
                                                          ops.max(t, axis=1)], x)
    for g, want in zip(got, [0, 1, 0, 0]):
        assert g.shape == (3,) and g.dtype == dtype
        np.testing.assert_array_equal(g, np.full(3, want, dtype))
    assert got[4].shape == (0,) and got[5].shape == (0,)  # nothing to reduce into


def test_empty_float_only_reductions():
    x = np.zeros((0, 2), np.float32)
    got = run_fn(lambda t: [ops.mean(t, axis=0), ops.logsumexp(t, axis=0), ops.logsum(t),
                            ops.l2(t, axis=0, keepdims=True)], x)
    assert np.isnan(got[0]).all() and got[0].shape == (2,)
    assert (got[1] == -np.inf).all()
    assert got[2] == -np.inf
    np.testing.assert_array_equal(got[3], np.zeros((1, 2), np.float32))


def _build(fn, shape=(2, 3), dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.zeros(shape, dtype.as_numpy()), dtype)
        return fn(t)


@pytest.mark.parametrize("name", ["max", "min", "median"])
def test_empty_extremes_are_rejected(name):
    with pytest.raises(ValueError, match=f"{name} of nothing is undefined"):
        _build(lambda t: getattr(ops, name)(t, axis=0), shape=(0, 3))
    with pytest.raises(ValueError, match="no elements"):
        _build(lambda t: getattr(ops, name)(t), shape=(2, 0))


def test_empty_integer_mean_is_rejected():
    with pytest.raises(ValueError, match="NaN, which int32 cannot hold"):
        _build(lambda t: ops.mean(t, axis=1), shape=(2, 0), dtype=popxl.int32)


def test_bad_axes():
    with pytest.raises(ValueError, match="sum: axis 2 is out of range"):
        _build(lambda t: ops.sum(t, axis=2))
    with pytest.raises(ValueError, match="mean: axis -3 is out of range"):
        _build(lambda t: ops.mean(t, axis=[0, -3]))
    with pytest.raises(ValueError, match="max: repeated axis"):
        _build(lambda t: ops.max(t, axis=(1, -1)))
    with pytest.raises(TypeError, match="prod: axis must be None, an int or a sequence"):
        _build(lambda t: ops.prod(t, axis=1.0))
    with pytest.raises(TypeError, match="l1: axis must be None"):
        _build(lambda t: ops.l1(t, axis=[0, "1"]))
    with pytest.raises(ValueError, match="has rank 0 and no axis 0"):
        _build(lambda t: ops.sum(t, axis=0), shape=())
    with pytest.raises(TypeError, match="keepdims must be a bool"):
        _build(lambda t: ops.sum(t, keepdims="yes"))


def test_bad_dtypes_and_inputs():
    with pytest.raises(TypeError, match="l2: tensor .* has dtype int32"):
        _build(lambda t: ops.l2(t), dtype=popxl.int32)
    with pytest.raises(TypeError, match="logsumexp: tensor .* has dtype int32"):
        _build(lambda t: ops.logsumexp(t), dtype=popxl.int32)
    with pytest.raises(TypeError, match="sum: tensor .* has dtype bool"):
        _build(lambda t: ops.sum(t), dtype=popxl.bool)
    with pytest.raises(TypeError, match="sum: argument 't' must be a Tensor"):
        _build(lambda t: ops.sum(np.ones(3)))


def test_lamb_square():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 5)).astype(np.float16)
    y = rng.normal(size=(7,)).astype(np.float32)
    got = run_fn(lambda a, b: [ops.lamb_square(a), ops.lamb_square(b)], x, y)
    assert got[0].dtype == np.float32 and got[0].shape == ()
    np.testing.assert_allclose(got[0], (x.astype(np.float64) ** 2).sum(), rtol=1e-6)
    np.testing.assert_allclose(got[1], (y.astype(np.float64) ** 2).sum(), rtol=1e-6)
    with pytest.raises(TypeError, match="lamb_square: tensor .* has dtype int32"):
        _build(lambda t: ops.lamb_square(t), dtype=popxl.int32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("absolute", [False, True])
def test_histogram(dtype, absolute):
    rng = np.random.default_rng(2)
    x = rng.normal(scale=2.0, size=(6, 50)).astype(dtype)
    x[0, :4] = [-1.0, 0.0, 1.0, 2.5]  # values on the edges go to the upper bin
    x[1, 0] = np.nan
    levels = [-1.0, 0.0, 1.0, 2.5]
    got = run_fn(lambda t: ops.histogram(t, levels, absolute), x)
    v = np.abs(x) if absolute else x
    bins = np.where(np.isnan(v), len(levels),
                    np.searchsorted(np.asarray(levels, dtype), v, side="right"))
    want = np.bincount(bins.ravel(), minlength=len(levels) + 1)
    assert got.dtype == np.uint32 and got.shape == (5,)
    np.testing.assert_array_equal(got, want)


def test_histogram_bad_levels():
    with pytest.raises(ValueError, match="not a monotonically increasing"):
        _build(lambda t: ops.histogram(t, [0.0, 2.0, 1.0], False))
    with pytest.raises(ValueError, match="not distinct once rounded to float16"):
        _build(lambda t: ops.histogram(t, [1.0, 1.0001], False), dtype=popxl.float16)
    with pytest.raises(TypeError, match="histogram: tensor .* has dtype int32"):
        _build(lambda t: ops.histogram(t, [0.0], False), dtype=popxl.int32)
    got = run_fn(lambda t: ops.histogram(t, [], False), np.ones(5, np.float32))
    np.testing.assert_array_equal(got, [5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_and_mean_over_leading_axes_of_a_large_input(dtype):
    # The bias-gradient shape: the kernel's contiguous row-accumulation path.
    x = np.random.default_rng(5).standard_normal((128, 4, 130)).astype(dtype)
    got = run_fn(lambda t: [ops.sum(t, axis=0), ops.mean(t, axis=(0, 1)),
                            ops.sum(t, axis=[0, 1], keepdims=True)], x)
    w = x.astype(np.float64)
    np.testing.assert_allclose(got[0], w.sum(axis=0), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(got[1], w.mean(axis=(0, 1)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[2], w.sum(axis=(0, 1), keepdims=True), rtol=1e-6, atol=1e-5)
