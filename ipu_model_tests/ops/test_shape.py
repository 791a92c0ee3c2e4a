"""Shape ops (reshape, flatten, squeeze, transpose and in-place views)
checked against NumPy."""
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


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,new", [((2, 3, 4), (4, 6)), ((2, 3, 4), (-1, 4)),
                                       ((6,), (1, 6, 1)), ((), (1,)), ((1,), ()),
                                       ((0, 3), (3, 0)), ((0, 3), (-1, 3))])
def test_reshape(dt, shape, new):
    x = _data(shape, dt)
    got = run_fn(lambda t: ops.reshape(t, new), x)
    np.testing.assert_array_equal(got, x.reshape(new))
    got = run_fn(lambda t: t.reshape(new), x)
    np.testing.assert_array_equal(got, x.reshape(new))


@pytest.mark.parametrize("dt", DTYPES)
def test_flatten(dt):
    x = _data((2, 3, 4), dt)
    np.testing.assert_array_equal(run_fn(ops.flatten, x), x.reshape(-1))
    np.testing.assert_array_equal(run_fn(lambda t: t.flatten(), x), x.reshape(-1))


def test_reshape_inplace_aliases_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def fn(t):
        v = ops.reshape_(t, (3, 2))
        ops.add_(v, popxl.constant(np.float32(1)))
        return t, v

    t_out, v_out = run_fn(fn, x)
    np.testing.assert_array_equal(t_out, x + 1)
    np.testing.assert_array_equal(v_out, (x + 1).reshape(3, 2))


def test_flatten_inplace_aliases_input_both_ways():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)

    def fn(t):
        v = ops.flatten_(t)
        ops.mul_(t, popxl.constant(np.int32(2)))  # written through the original
        return v

    np.testing.assert_array_equal(run_fn(fn, x), x.reshape(-1) * 2)


def test_reshape_inplace_on_variable():
    x = np.arange(4, dtype=np.float32)
    got = run_fn(lambda t: (ops.add_(ops.reshape_(t, (2, 2)), popxl.constant(np.float32(3))), t)[1],
                 x, as_variables=True)
    np.testing.assert_array_equal(got, x + 3)


@pytest.mark.parametrize("shape,bad,match", [
    ((2, 3), (4, 2), "cannot reshape"),
    ((2, 3), (-1, -1), "at most one '-1'"),
    ((2, 3), (-2, 3), "invalid shape value"),
    ((2, 3), (-1, 4), "cannot infer"),
    ((0, 3), (-1, 0), "cannot infer"),
])
def test_reshape_errors(shape, bad, match):
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros(shape, np.float32))
        with pytest.raises(ValueError, match=match):
            ops.reshape(t, bad)
        with pytest.raises(ValueError, match=match):
            ops.reshape_(t, bad)


def test_reshape_type_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 3), np.float32))
        with pytest.raises(TypeError, match="shape must be a tuple of ints"):
            ops.reshape(t, (2.0, 3))
        with pytest.raises(TypeError, match="must be a Tensor"):
            ops.reshape(np.zeros(6), (6,))


@pytest.mark.parametrize("dt", [np.float32, np.int32])
@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [0]),
                                        ((1, 3, 1, 2), [-2, 0]), ((3, 2), None),
                                        ((1, 1), None), ((0, 1), [1]), ((), None)])
def test_squeeze(dt, shape, axes):
    x = _data(shape, dt)
    got = run_fn(lambda t: ops.squeeze(t, axes), x)
    want = np.squeeze(x, axis=None if axes is None else tuple(axes))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_squeeze_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((1, 3, 1), np.float32))
        with pytest.raises(ValueError, match="length is 3, not 1"):
            ops.squeeze(t, [1])
        with pytest.raises(ValueError, match="duplicates"):
            ops.squeeze(t, [0, -3])
        with pytest.raises(ValueError, match="out of range"):
            ops.squeeze(t, [3])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,perm", [((2, 3), None), ((2, 3, 4), None), ((2, 3, 4), (1, 0, 2)),
                                        ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, -1, 1)),
                                        ((5,), None), ((), None), ((0, 3), None),
                                        ((2, 1, 3, 2), (3, 1, 0, 2))])
def test_transpose(dt, shape, perm):
    x = _data(shape, dt)
    got = run_fn(lambda t: ops.transpose(t, perm), x)
    want = np.transpose(x, None if perm is None else perm)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run_fn(lambda t: ops.transpose_(t, perm), x), want)


def test_tensor_T_methods():
    x = _data((3, 4), np.float32)
    np.testing.assert_array_equal(run_fn(lambda t: t.T, x), x.T)
    np.testing.assert_array_equal(run_fn(lambda t: t.T_, x), x.T)
    np.testing.assert_array_equal(run_fn(lambda t: t.transpose((1, 0)), x), x.T)


def test_transpose_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 3, 4), np.float32))
        with pytest.raises(ValueError, match="less than the tensor's rank"):
            ops.transpose(t, (0, 1, 3))
        with pytest.raises(ValueError, match="not a permutation"):
            ops.transpose(t, (0, 1, 1))
        with pytest.raises(ValueError, match="has 2 entries"):
            ops.transpose_(t, (0, 1))
        with pytest.raises(TypeError, match="sequence of ints"):
            ops.transpose(t, (0, 1.0, 2))


def test_transpose_inplace_is_read_only_view():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 3), np.float32))
        v = ops.transpose_(t)
        assert v.producer.attrs.get("_view_copy") is True
        with pytest.raises(NotImplementedError, match="in-place view"):
            ops.add_(v, popxl.constant(np.float32(1)))
        # A view of the copied view cannot be written through either.
        r = ops.reshape_(v, (6,))
        with pytest.raises(NotImplementedError, match="in-place view"):
            ops.add_(r, popxl.constant(np.float32(1)))
        # Out-of-place use of the result is fine.
        ops.add(v, popxl.constant(np.float32(1)))


def test_transpose_inplace_of_unit_axes_is_alias():
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1)

    def fn(t):
        v = ops.transpose_(t, (2, 1, 0))  # only moves length-1 axes
        assert not v.producer.attrs.get("_view_copy")
        ops.add_(v, popxl.constant(np.float32(1)))
        return t

    np.testing.assert_array_equal(run_fn(fn, x), x + 1)
