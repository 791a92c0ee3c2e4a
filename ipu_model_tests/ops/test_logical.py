"""logical_and/or/not, equal and greater against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

RNG = np.random.default_rng(7)
BCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((), (2, 2)), ((0, 3), (1, 3)),
         ((5,), ())]


def _bools(shape):
    return RNG.integers(0, 2, size=shape).astype(np.bool_)


def _vals(shape, dtype):
    # Few distinct values so that equal/greater see ties.
    return RNG.integers(-2, 3, size=shape).astype(dtype)


@pytest.mark.parametrize("shapes", BCAST)
def test_and_or(shapes):
    a, b = _bools(shapes[0]), _bools(shapes[1])
    got = run_fn(lambda x, y: (ops.logical_and(x, y), ops.logical_or(x, y), x & y, x | y), a, b)
    for g, want in zip(got, (a & b, a | b, a & b, a | b)):
        assert g.dtype == np.bool_
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("shape", [(), (0, 3), (7,), (2, 3, 4)])
def test_not(shape):
    a = _bools(shape)
    got = run_fn(lambda x: (ops.logical_not(x), ~x), a)
    for g in got:
        assert g.dtype == np.bool_ and g.shape == shape
        np.testing.assert_array_equal(g, ~a)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_logical_casts_non_bool(dtype):
    # PopXL casts non-bool inputs to bool (x != 0) first.
    a = _vals((3, 4), dtype)
    b = _vals((4,), dtype)
    got = run_fn(lambda x, y: (ops.logical_and(x, y), ops.logical_or(x, y), ops.logical_not(x)),
                 a, b)
    np.testing.assert_array_equal(got[0], np.logical_and(a, b))
    np.testing.assert_array_equal(got[1], np.logical_or(a, b))
    np.testing.assert_array_equal(got[2], np.logical_not(a))


@pytest.mark.parametrize("shapes", BCAST)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.int64])
def test_equal_greater(shapes, dtype):
    a, b = _vals(shapes[0], dtype), _vals(shapes[1], dtype)
    got = run_fn(lambda x, y: (ops.equal(x, y), ops.greater(x, y)), a, b)
    np.testing.assert_array_equal(got[0], np.equal(a, b))
    np.testing.assert_array_equal(got[1], np.greater(a, b))
    for g in got:
        assert g.dtype == np.bool_ and g.shape == np.broadcast_shapes(shapes[0], shapes[1])


def test_equal_bool_and_nan():
    a, b = _bools((5,)), _bools((5,))
    np.testing.assert_array_equal(run_fn(ops.equal, a, b), a == b)
    f = np.array([np.nan, 1.0, np.inf, -0.0], np.float32)
    g = np.array([np.nan, 1.0, 3.0, 0.0], np.float32)
    got = run_fn(lambda x, y: (ops.equal(x, y), ops.greater(x, y)), f, g)
    np.testing.assert_array_equal(got[0], f == g)
    np.testing.assert_array_equal(got[1], f > g)


def test_host_operand():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    got = run_fn(lambda x: (ops.equal(x, 2.0), ops.greater(x, 1.5)), a)
    np.testing.assert_array_equal(got[0], a == 2.0)
    np.testing.assert_array_equal(got[1], a > 1.5)


def test_bad_inputs():
    ir = popxl.Ir()
    with ir.create_empty_graph("other"):
        foreign = popxl.graph_input((3,), popxl.bool, "x")
    with ir.main_graph:
        f = popxl.variable(np.ones(3, np.float32), name="f")
        i = popxl.variable(np.ones(3, np.int32), name="i")
        b = popxl.variable(np.ones(3, np.bool_), name="b")
        b4 = popxl.variable(np.ones(4, np.bool_), name="b4")
        with pytest.raises(TypeError, match="equal: inputs must have the same dtype"):
            ops.equal(f, i)
        with pytest.raises(TypeError, match="greater: tensor 'b' has dtype bool"):
            ops.greater(b, b)
        with pytest.raises(ValueError, match="logical_and: shapes do not broadcast"):
            ops.logical_and(b, b4)
        with pytest.raises(ValueError, match="equal: shapes do not broadcast"):
            ops.equal(b, b4)
        with pytest.raises(TypeError, match="logical_or: argument 'lhs' must be a Tensor"):
            ops.logical_or([True], b)
        for fn in (ops.logical_and, ops.logical_or, ops.equal):
            with pytest.raises(ValueError, match="in graph 'other"):
                fn(b, foreign)
        with pytest.raises(ValueError, match="logical_not: .*in graph 'other"):
            ops.logical_not(foreign)
