"""slice, slice_, subsample, split, concat and concat_ against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

DTYPES = [np.float32, np.float16, np.int32, np.bool_]


def _data(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    return (rng.standard_normal(shape) * 10).astype(dt)


def _np_slice(x, start, stop, step, axis):
    """Reference: PopXL's argument rules expressed as a NumPy index."""
    as_list = lambda v: [v] if isinstance(v, int) else v
    start, stop, step, axis = map(as_list, (start, stop, step, axis))
    n = next(len(v) for v in (start, stop, step, axis) if v is not None)
    start = start or [None] * n
    stop = stop or [None] * n
    step = step or [None] * n
    axis = axis if axis is not None else list(range(n))
    key = [slice(None)] * x.ndim
    for a, b, e, s in zip(axis, start, stop, step):
        key[a] = slice(b, e, s)
    return x[tuple(key)]


CASES = [
    (1, None, None, None),
    (None, -2, None, None),
    (None, 3, -1, None),
    ([1, 0], [3, 2], None, None),
    ([0, 1], [2, None], None, [2, 0]),
    (-3, None, None, 1),
    (None, None, -1, 2),
    (-100, 100, None, 0),
    (5, 1, None, 1),          # empty
    (None, None, 2, 2),       # step 2 (beyond PopXL's documented +-1)
    ([None], [None], [-3], [1]),
    (2, 0, -1, 1),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("start,stop,step,axis", CASES)
def test_slice(dt, start, stop, step, axis):
    x = _data((3, 4, 5), dt)
    want = _np_slice(x, start, stop, step, axis)
    got = run_fn(lambda t: ops.slice(t, start, stop, step, axis), x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    got = run_fn(lambda t: ops.slice_(t, start, stop, step, axis), x)
    np.testing.assert_array_equal(got, want)


def test_slice_no_args_returns_input():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 3), np.float32))
        assert ops.slice(t) is t
        assert ops.slice(t, axis=1) is t
        assert ops.slice_(t) is t


def test_slice_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match="same length"):
            ops.slice(t, start=[0, 1], stop=[1])
        with pytest.raises(ValueError, match="step must not be zero"):
            ops.slice(t, start=0, step=0)
        with pytest.raises(ValueError, match="out of range"):
            ops.slice(t, start=0, axis=2)
        with pytest.raises(ValueError, match="repeated axis"):
            ops.slice(t, start=[0, 1], axis=[1, -1])
        with pytest.raises(ValueError, match="3 slices"):
            ops.slice(t, start=[0, 0, 0])
        with pytest.raises(TypeError, match="start must be an int"):
            ops.slice(t, start=0.5)


def test_slice_inplace_is_read_only_view():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 3), np.float32))
        v = ops.slice_(t, 1, 3)
        with pytest.raises(NotImplementedError, match="in-place view"):
            ops.add_(v, popxl.constant(np.float32(1)))
        ops.add(v, popxl.constant(np.float32(1)))


def test_slice_inplace_whole_tensor_is_alias():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def fn(t):
        v = ops.slice_(t, start=[0, -5], stop=[2, 3])  # selects everything
        ops.add_(v, popxl.constant(np.float32(1)))
        return t

    np.testing.assert_array_equal(run_fn(fn, x), x + 1)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,strides", [((7,), 2), ((7,), [3]), ((4, 5), [1, 2]),
                                           ((4, 5, 6), [3, 1, 4]), ((0, 5), [2, 2]),
                                           ((3, 3), [5, 5]), ((4, 6), 2), ((4, 6, 2), [3])])
def test_subsample(dt, shape, strides):
    x = _data(shape, dt)
    s = [strides] if isinstance(strides, int) else strides
    want = x[tuple(slice(None, None, k) for k in s)]
    got = run_fn(lambda t: ops.subsample(t, strides), x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_subsample_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 4), np.float32))
        with pytest.raises(ValueError, match="must not be greater than the rank"):
            ops.subsample(t, [2, 2, 2])
        with pytest.raises(ValueError, match=">= 1"):
            ops.subsample(t, [1, 0])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,splits,axis", [((6, 4), 3, 0), ((6, 4), 2, 1), ((6, 4), [1, 2, 3], 0),
                                               ((2, 3, 5), [2, 0, 3], -1), ((4,), 1, 0),
                                               ((3, 0), [0], 1)])
def test_split(dt, shape, splits, axis):
    x = _data(shape, dt)
    if isinstance(splits, int):
        want = np.split(x, splits, axis=axis)
    else:
        want = np.split(x, np.cumsum(splits)[:-1], axis=axis)
    got = run_fn(lambda t: ops.split(t, splits, axis), x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_split_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((6, 4), np.float32))
        with pytest.raises(ValueError, match="does not equally divide"):
            ops.split(t, 4)
        with pytest.raises(ValueError, match="sum to 5"):
            ops.split(t, [2, 3])
        with pytest.raises(ValueError, match="out of range"):
            ops.split(t, 2, axis=2)
        s = popxl.variable(np.float32(1))
        with pytest.raises(ValueError, match="scalar"):
            ops.split(s, 1)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shapes,axis", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 2)], 1),
                                         ([(2, 3, 4), (2, 3, 1)], -1), ([(5,)], 0),
                                         ([(0, 3), (2, 3)], 0)])
def test_concat(dt, shapes, axis):
    xs = [_data(s, dt, seed=i) for i, s in enumerate(shapes)]
    want = np.concatenate(xs, axis=axis)
    got = run_fn(lambda *ts: ops.concat(ts, axis), *xs)
    np.testing.assert_array_equal(got, want)
    got = run_fn(lambda *ts: ops.concat_(ts, axis), *xs)
    np.testing.assert_array_equal(got, want)


def test_concat_inplace_is_read_only_view():
    with popxl.Ir().main_graph:
        a = popxl.variable(np.zeros((2, 3), np.float32))
        b = popxl.variable(np.zeros((2, 3), np.float32))
        c = ops.concat_([a, b], 0)
        with pytest.raises(NotImplementedError, match="in-place view"):
            ops.add_(c, popxl.constant(np.float32(1)))
        single = ops.concat_([a], 1)
        ops.add_(single, popxl.constant(np.float32(1)))  # a true alias: allowed


def test_concat_errors():
    with popxl.Ir().main_graph:
        a = popxl.variable(np.zeros((2, 3), np.float32))
        b = popxl.variable(np.zeros((2, 4), np.float32))
        c = popxl.variable(np.zeros((2, 3), np.int32))
        d = popxl.variable(np.zeros((2, 3, 1), np.float32))
        with pytest.raises(ValueError, match="must match except on axis 0"):
            ops.concat([a, b], 0)
        with pytest.raises(TypeError, match="same type"):
            ops.concat([a, c], 0)
        with pytest.raises(ValueError, match="same rank"):
            ops.concat([a, d], 0)
        with pytest.raises(ValueError, match="at least one"):
            ops.concat([], 0)
        with pytest.raises(TypeError, match="single Tensor"):
            ops.concat(a, 0)
        with pytest.raises(ValueError, match="out of range"):
            ops.concat([a, a], 2)
