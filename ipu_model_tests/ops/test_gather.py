"""gather, tied_gather, scatter, scatter_reduce, dynamic_slice,
dynamic_update(_) and onehot against NumPy / PyTorch."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

DTYPES = [np.float32, np.float16, np.int32, np.bool_]


def _data(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    return (rng.standard_normal(shape) * 10).astype(dt)


# ---------------------------------------------------------------- gather

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", [ops.gather, ops.tied_gather])
@pytest.mark.parametrize("shape,idx,axis", [
    ((4, 3), [3, 1, 2], 0),
    ((4, 3), [[0, 1], [1, 2]], 0),
    ((2, 3, 4), [3, 0, 0, 2], -1),
    ((2, 3, 4), [[2]], 1),
    ((5,), 3, 0),                 # scalar index: the axis disappears
    ((4, 3), [-1, -4], 0),        # negative: numpy.take semantics
    ((4, 3), np.zeros((0,), np.int32), 1),
])
def test_gather(dt, op, shape, idx, axis):
    x = _data(shape, dt)
    i = np.asarray(idx, dtype=np.int32)
    got = run_fn(lambda t, it: op(t, it, axis), x, i)
    want = np.take(x, i, axis=axis)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("idx_dt", [np.int32, np.uint32, np.int64, np.int8])
def test_gather_index_dtypes(idx_dt):
    x = _data((6, 2), np.float32)
    i = np.array([5, 0, 2], dtype=idx_dt)
    np.testing.assert_array_equal(run_fn(lambda t, it: ops.gather(t, it), x, i), x[i.astype(int)])


@pytest.mark.parametrize("idx_dt", [np.int32, np.uint32])
def test_gather_zero_oor(idx_dt):
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    raw = np.array([0, 4, 3, 100], dtype=np.int64)
    if idx_dt == np.int32:
        raw = np.append(raw, -1)
    i = raw.astype(idx_dt)
    want = np.stack([x[j] if 0 <= j < 4 else np.zeros(3, np.float32) for j in raw])
    for op in (ops.gather, ops.tied_gather):
        got = run_fn(lambda t, it: op(t, it, zero_OOR=True), x, i)
        np.testing.assert_array_equal(got, want)


def test_gather_oor_without_zero_is_clamped():
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    i = np.array([7, -9], dtype=np.int32)
    got = run_fn(lambda t, it: ops.gather(t, it), x, i)
    np.testing.assert_array_equal(got, x[[3, 0]])


def test_gather_host_indices():
    x = _data((5, 2), np.float32)
    np.testing.assert_array_equal(run_fn(lambda t: ops.gather(t, [4, 1]), x), x[[4, 1]])


def test_gather_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 3), np.float32))
        fi = popxl.variable(np.zeros((2,), np.float32))
        ii = popxl.variable(np.zeros((2,), np.int32))
        with pytest.raises(TypeError, match="indices must have"):
            ops.gather(t, fi)
        with pytest.raises(ValueError, match="out of range"):
            ops.gather(t, ii, axis=2)
        with pytest.raises(ValueError, match="available_memory_proportion"):
            ops.gather(t, ii, available_memory_proportion=1.5)
        with pytest.raises(TypeError, match="host integers"):
            ops.gather(t, [0.5])
        with pytest.raises(ValueError, match="scalar"):
            ops.gather(popxl.variable(np.float32(1)), ii)


# ---------------------------------------------------------------- scatter

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,idx,axis", [
    ((5,), [1, 2, 3], 0),
    ((3, 3), [[1, 0, 2], [0, 2, 1]], 0),
    ((3, 4), [[1, 3], [0, 2]], 1),
    ((2, 3, 4), [[[3], [0]], [[1], [2]]], -1),
    ((4, 2), [[-1, -4]], 0),     # negative indices count from the end (ONNX)
])
def test_scatter(dt, shape, idx, axis):
    x = _data(shape, dt)
    i = np.asarray(idx, dtype=np.int32)
    v = _data(i.shape, dt, seed=1)
    got = run_fn(lambda t, it, vt: ops.scatter(t, it, vt, axis), x, i, v)
    ax = axis % x.ndim
    want = torch.from_numpy(x.copy()).scatter(ax, torch.from_numpy((i % shape[ax]).astype(np.int64)),
                                              torch.from_numpy(v)).numpy()
    np.testing.assert_array_equal(got, want)


def test_scatter_oor_ignored():
    x = np.zeros((4,), np.float32)
    i = np.array([5, 1, -7], np.int32)
    v = np.array([9, 8, 7], np.float32)
    got = run_fn(lambda t, it, vt: ops.scatter(t, it, vt), x, i, v)
    np.testing.assert_array_equal(got, [0, 8, 0, 0])


def test_scatter_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 3), np.float32))
        i = popxl.variable(np.zeros((2, 3), np.int32))
        v = popxl.variable(np.zeros((2, 2), np.float32))
        vi = popxl.variable(np.zeros((2, 3), np.int32))
        with pytest.raises(ValueError, match="same shape"):
            ops.scatter(t, i, v)
        with pytest.raises(TypeError, match="same dtype"):
            ops.scatter(t, i, vi)
        with pytest.raises(ValueError, match="rank"):
            ops.scatter(t, popxl.variable(np.zeros((2,), np.int32)),
                        popxl.variable(np.zeros((2,), np.float32)))
        with pytest.raises(ValueError, match="larger than t"):
            ops.scatter(t, popxl.variable(np.zeros((1, 4), np.int32)),
                        popxl.variable(np.zeros((1, 4), np.float32)), axis=0)


# --------------------------------------------------------- scatter_reduce

def _torch_scatter_reduce(src, index, axis, reduction, axis_size=None, initial=None):
    """Reference with torch_scatter's conventions: empty slots are 0 (1 for
    mul) without initial values; initial values take part when given."""
    idx = torch.from_numpy(index.astype(np.int64))
    s = torch.from_numpy(src)
    if idx.shape != s.shape:  # broadcast a vector along `axis`
        shape = [1] * s.ndim
        shape[axis] = -1
        idx = idx.reshape(shape).expand(s.shape)
    if initial is not None:
        out = torch.from_numpy(initial.copy())
    else:
        shape = list(src.shape)
        shape[axis] = axis_size
        out = torch.full(shape, 1 if reduction == "mul" else 0, dtype=s.dtype)
    if reduction == "none":
        return out.scatter(axis, idx, s).numpy()
    name = {"sum": "sum", "max": "amax", "min": "amin", "mul": "prod"}[reduction]
    return out.scatter_reduce(axis, idx, s, name, include_self=initial is not None).numpy()


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("reduction", ["sum", "max", "min", "mul", "none"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("with_initial", [False, True])
def test_scatter_reduce(dt, reduction, axis, with_initial):
    rng = np.random.default_rng(3)
    src = (rng.standard_normal((6, 5)) * 3).astype(dt)
    ax = axis % 2
    axis_size = 4
    index = rng.integers(0, axis_size, size=src.shape).astype(np.int32)
    if reduction == "none":  # unique targets: the order of duplicates is undefined
        index = np.arange(src.shape[ax])[::-1].reshape([-1, 1] if ax == 0 else [1, -1])
        index = np.broadcast_to(index, src.shape).astype(np.int32)
        axis_size = src.shape[ax] + 1
    init_shape = list(src.shape)
    init_shape[ax] = axis_size
    initial = (rng.standard_normal(init_shape) * 3).astype(dt) if with_initial else None
    want = _torch_scatter_reduce(src, index, ax, reduction, axis_size, initial)
    if with_initial:
        got = run_fn(lambda d, i, iv: ops.scatter_reduce(d, i, reduction, initial_values=iv,
                                                          axis=axis), src, index, initial)
    else:
        got = run_fn(lambda d, i: ops.scatter_reduce(d, i, reduction, axis=axis,
                                                      axis_size=axis_size), src, index)
    tol = dict(rtol=1e-2, atol=1e-2) if dt == np.float16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **tol)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_reduce_index_broadcast(axis):
    rng = np.random.default_rng(4)
    src = rng.standard_normal((3, 4, 5)).astype(np.float32)
    index = rng.integers(0, 3, size=src.shape[axis]).astype(np.int32)
    want = _torch_scatter_reduce(src, index, axis, "sum", axis_size=3)
    got = run_fn(lambda d, i: ops.scatter_reduce(d, i, "sum", axis=axis, axis_size=3), src, index)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_scatter_reduce_oor_ignored():
    src = np.array([1, 2, 3, 4], np.float32)
    index = np.array([0, 5, -1, 0], np.int32)
    got = run_fn(lambda d, i: ops.scatter_reduce(d, i, "sum", axis_size=2), src, index)
    np.testing.assert_array_equal(got, [5, 0])


def test_scatter_reduce_errors():
    with popxl.Ir().main_graph:
        d = popxl.variable(np.zeros((4, 3), np.float32))
        i = popxl.variable(np.zeros((4, 3), np.int32))
        with pytest.raises(ValueError, match="one of initial_values and axis_size"):
            ops.scatter_reduce(d, i, "sum")
        with pytest.raises(ValueError, match="reduction must be one of"):
            ops.scatter_reduce(d, i, "avg", axis_size=2)
        with pytest.raises(ValueError, match="partial broadcasting"):
            ops.scatter_reduce(d, popxl.variable(np.zeros((4, 2), np.int32)), "sum", axis_size=2)
        with pytest.raises(NotImplementedError, match="enable_index_broadcast"):
            ops.scatter_reduce(d, popxl.variable(np.zeros((4,), np.int32)), "sum", axis_size=2,
                               enable_index_broadcast=False)
        with pytest.raises(ValueError, match="except on axis 0"):
            ops.scatter_reduce(d, i, "sum",
                               initial_values=popxl.variable(np.zeros((2, 2), np.float32)))
        with pytest.raises(TypeError, match="dtype"):
            ops.scatter_reduce(popxl.variable(np.zeros((4, 3), bool)), i, "sum", axis_size=2)


# ----------------------------------------------------------- dynamic ops

def _np_dynamic_index(shape, index, axes, sizes):
    """Poplar's rule: offsets >= the axis length become 0; slices wrap."""
    key = [np.arange(n) for n in shape]
    for o, a, s in zip(index, axes, sizes):
        o = int(o)
        if o < 0 or o >= shape[a]:
            o = 0
        key[a] = (o + np.arange(s)) % shape[a]
    return np.ix_(*key)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,index,axes,sizes", [
    ((5, 4), [1], [0], [2]),
    ((5, 4), [1, 2], [0, 1], [3, 2]),
    ((2, 5, 4), [3], [-1], [1]),
    ((5, 4), [4], [0], [3]),        # runs past the end: wraps
    ((5, 4), [9, 1], [0, 1], [2, 3]),  # offset out of range: 0
])
def test_dynamic_slice_and_update(dt, shape, index, axes, sizes):
    x = _data(shape, dt)
    idx = np.asarray(index, np.uint32)
    axes_n = [a % len(shape) for a in axes]
    key = _np_dynamic_index(shape, idx, axes_n, sizes)
    want = x[key]
    got = run_fn(lambda t, i: ops.dynamic_slice(t, i, axes, sizes, True), x, idx)
    np.testing.assert_array_equal(got, want)

    upd = _data(want.shape, dt, seed=2)
    want_u = x.copy()
    want_u[key] = upd
    got = run_fn(lambda t, i, u: ops.dynamic_update(t, i, u, axes, sizes, False), x, idx, upd)
    np.testing.assert_array_equal(got, want_u)

    def inplace(t, i, u):
        r = ops.dynamic_update_(t, i, u, axes, sizes, False)
        return t, r

    got_t, got_r = run_fn(inplace, x, idx, upd)
    np.testing.assert_array_equal(got_t, want_u)
    np.testing.assert_array_equal(got_r, want_u)


def test_dynamic_int32_negative_index_is_zero():
    x = np.arange(10, dtype=np.float32)
    idx = np.array([-3], np.int32)
    got = run_fn(lambda t, i: ops.dynamic_slice(t, i, [0], [2], False), x, idx)
    np.testing.assert_array_equal(got, [0, 1])


def test_dynamic_update_inplace_on_variable():
    x = np.zeros((3, 4), np.float32)
    upd = np.ones((3, 2), np.float32)

    def fn(t, i, u):
        ops.dynamic_update_(t, i, u, [1], [2], True)
        return t

    got = run_fn(fn, x, np.array([1], np.uint32), upd, as_variables=True)
    want = x.copy()
    want[:, 1:3] = 1
    np.testing.assert_array_equal(got, want)


def test_dynamic_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 3), np.float32))
        i1 = popxl.variable(np.zeros((1,), np.uint32))
        i2 = popxl.variable(np.zeros((2,), np.uint32))
        with pytest.raises(ValueError, match="one entry per axis"):
            ops.dynamic_slice(t, i2, [0], [1], False)
        with pytest.raises(ValueError, match="out of range"):
            ops.dynamic_slice(t, i1, [0], [5], False)
        with pytest.raises(ValueError, match="same length"):
            ops.dynamic_slice(t, i1, [0], [1, 1], False)
        with pytest.raises(ValueError, match="repeated axis"):
            ops.dynamic_slice(t, i2, [0, -2], [1, 1], False)
        with pytest.raises(TypeError, match="index must have"):
            ops.dynamic_slice(t, popxl.variable(np.zeros((1,), np.float32)), [0], [1], False)
        with pytest.raises(ValueError, match="has shape"):
            ops.dynamic_update(t, i1, popxl.variable(np.zeros((2, 2), np.float32)), [0], [2],
                               False)
        with pytest.raises(TypeError, match="same dtype"):
            ops.dynamic_update_(t, i1, popxl.variable(np.zeros((2, 3), np.int32)), [0], [2],
                                False)


# ---------------------------------------------------------------- onehot

@pytest.mark.parametrize("val_dt", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape,axis", [((5,), -1), ((5,), 0), ((2, 3), 1), ((2, 3), -1),
                                        ((2, 3), 0), ((), 0)])
def test_onehot(val_dt, shape, axis):
    depth = 4
    rng = np.random.default_rng(5)
    idx = rng.integers(-depth - 1, depth + 2, size=shape).astype(np.int32)
    values = np.array([-1, 3], dtype=val_dt)
    got = run_fn(lambda i, v: ops.onehot(i, popxl.constant(np.int32(depth)), v, axis), idx, values)
    # ONNX reference: negatives wrap, out of range rows are all "off".
    wrapped = np.where(idx < 0, idx + depth, idx)
    hot = np.arange(depth) == wrapped[..., None]
    want = np.where(hot, values[1], values[0]).astype(val_dt)
    want = np.moveaxis(want, -1, axis)
    assert got.dtype == val_dt
    np.testing.assert_array_equal(got, want)


def test_onehot_float_indices():
    idx = np.array([0.0, 2.7, 1.0], np.float32)
    got = run_fn(lambda i: ops.onehot(i, 3, popxl.constant(np.array([0, 1], np.float32)), 1), idx)
    np.testing.assert_array_equal(got, np.eye(3, dtype=np.float32)[[0, 2, 1]])


def test_onehot_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((3,), np.int32))
        v = popxl.constant(np.array([0, 1], np.float32))
        with pytest.raises(ValueError, match="must be a constant"):
            ops.onehot(t, popxl.variable(np.int32(3)), v, -1)
        with pytest.raises(ValueError, match="positive integer"):
            ops.onehot(t, popxl.constant(np.int32(0)), v, -1)
        with pytest.raises(ValueError, match=r"shape \(2,\)"):
            ops.onehot(t, 3, popxl.constant(np.array([0, 1, 2], np.float32)), -1)
        with pytest.raises(ValueError, match="out of range"):
            ops.onehot(t, 3, v, 2)
