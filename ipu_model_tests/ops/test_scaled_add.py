"""scaled_add / scaled_add_ against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

RNG = np.random.default_rng(11)


def _data(shape, dtype):
    return RNG.uniform(-4, 4, size=shape).astype(dtype)


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else dict(rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(), (0, 3), (7,), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("ab", [(1.0, 1.0), (0.5, -2.0), (0.0, 3.0)])
def test_scaled_add_floats(shape, dtype, ab):
    x, y = _data(shape, dtype), _data(shape, dtype)
    a, b = ab
    got = run_fn(lambda X, Y: ops.scaled_add(X, Y, a, b), x, y)
    want = (np.float32(a) * x.astype(np.float32) + np.float32(b) * y.astype(np.float32))
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(dtype).astype(np.float32),
                               **_tol(dtype))


def test_scaled_add_defaults_and_mixed_types():
    x = _data((3, 4), np.float32)
    y = _data((3, 4), np.float16)
    got = run_fn(ops.scaled_add, x, y)
    np.testing.assert_allclose(got, x + y.astype(np.float32), rtol=1e-6)
    assert got.dtype == np.float32


@pytest.mark.parametrize("a_shape", [(), (1,)])
def test_scaled_add_tensor_scales(a_shape):
    x, y = _data((2, 5), np.float32), _data((2, 5), np.float32)
    a = np.full(a_shape, 0.25, np.float32)
    b = np.array(-1.5, np.float16)
    got = run_fn(lambda X, Y, A, B: (ops.scaled_add(X, Y, A, B), ops.scaled_add(X, Y, A, 2.0),
                                     ops.scaled_add(X, Y, 3.0, B)), x, y, a, b)
    np.testing.assert_allclose(got[0], 0.25 * x - 1.5 * y, rtol=1e-6)
    np.testing.assert_allclose(got[1], 0.25 * x + 2.0 * y, rtol=1e-6)
    np.testing.assert_allclose(got[2], 3.0 * x - 1.5 * y, rtol=1e-6)


def test_scaled_add_int():
    x = np.array([1, -2, 3, 100], np.int32)
    y = np.array([10, 20, -30, 5], np.int32)
    got = run_fn(lambda X, Y: ops.scaled_add(X, Y, 2.0, 0.5), x, y)
    np.testing.assert_array_equal(got, np.trunc(2.0 * x + 0.5 * y).astype(np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_scaled_add_inplace(dtype):
    x, y = _data((3, 3), dtype), _data((3, 3), dtype)
    seen = []

    def body(X, Y, A):
        out = ops.scaled_add_(X, Y, A, 0.5)
        seen.append(out.producer)
        return out, X

    got, modified = run_fn(body, x, y, np.array(2.0, np.float32))
    want = 2.0 * x.astype(np.float32) + 0.5 * y.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(dtype).astype(np.float32),
                               **_tol(dtype))
    np.testing.assert_array_equal(modified, got)
    op = seen[0]
    assert op.type == "ScaledAddLhsInplace" and op.aliases == [(0, 0)] and op.modified == {0}


def test_scaled_add_inplace_variable():
    x = np.array([1.0, 2.0], np.float32)
    y = np.array([10.0, 20.0], np.float32)
    got = run_fn(lambda X, Y: (ops.scaled_add_(X, Y, 0.5, 0.1), X)[1], x, y, as_variables=True)
    np.testing.assert_allclose(got, 0.5 * x + 0.1 * y, rtol=1e-6)


def test_scaled_add_bad():
    ir = popxl.Ir()
    with ir.create_empty_graph("other"):
        foreign = popxl.graph_input((3,), popxl.float32, "x")
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32), name="x")
        y4 = popxl.variable(np.ones(4, np.float32), name="y4")
        v = popxl.variable(np.ones(2, np.float32), name="v")
        flags = popxl.variable(np.ones(3, np.bool_), name="flags")
        with pytest.raises(ValueError, match="scaled_add: .*same shape"):
            ops.scaled_add(x, y4)
        with pytest.raises(ValueError, match="scaled_add_: b 'v' must be a scalar"):
            ops.scaled_add_(x, x, 1.0, v)
        with pytest.raises(TypeError, match="scaled_add: a must be a float or a scalar Tensor"):
            ops.scaled_add(x, x, "2")
        with pytest.raises(TypeError, match="scaled_add: tensor 'flags' has dtype bool"):
            ops.scaled_add(x, flags)
        with pytest.raises(ValueError, match="scaled_add: .*in graph 'other"):
            ops.scaled_add(x, foreign)
        with pytest.raises(ValueError, match="scaled_add_: .*in graph 'other"):
            ops.scaled_add_(x, x, foreign)
        with pytest.raises(TypeError, match="scaled_add_: X must be a Tensor"):
            ops.scaled_add_(np.ones(3), x)
