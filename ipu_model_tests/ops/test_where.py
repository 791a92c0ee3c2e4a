"""where against numpy.where."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

RNG = np.random.default_rng(3)
SHAPES3 = [
    ((2, 3), (2, 3), (2, 3)),
    ((3,), (2, 3), (2, 1)),
    ((4, 1, 1), (1, 3, 1), (2,)),
    ((), (2, 2), ()),
    ((2, 2), (), ()),
    ((0, 3), (1, 3), (3,)),
    ((1,), (0,), ()),
]


def _vals(shape, dtype):
    return RNG.uniform(-5, 5, size=shape).astype(dtype)


@pytest.mark.parametrize("shapes", SHAPES3)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_, np.int64,
                                   np.uint8])
def test_where(shapes, dtype):
    c = RNG.integers(0, 2, size=shapes[0]).astype(np.bool_)
    a, b = _vals(shapes[1], dtype), _vals(shapes[2], dtype)
    got = run_fn(ops.where, c, a, b)
    want = np.where(c, a, b)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cdtype", [np.int32, np.float32])
def test_where_casts_condition(cdtype):
    c = np.array([0, 2, -1, 0], cdtype)
    a = np.arange(4, dtype=np.float32)
    got = run_fn(lambda x, y: ops.where(x, y, -y), c, a)
    np.testing.assert_array_equal(got, np.where(c != 0, a, -a))


def test_where_host_operand():
    c = np.array([True, False, True])
    a = np.arange(3, dtype=np.float32)
    got = run_fn(lambda x, y: (ops.where(x, y, 0.5), ops.where(x, 7.0, y)), c, a)
    np.testing.assert_array_equal(got[0], np.where(c, a, np.float32(0.5)))
    np.testing.assert_array_equal(got[1], np.where(c, np.float32(7.0), a))


def test_where_bad():
    ir = popxl.Ir()
    with ir.create_empty_graph("other"):
        foreign = popxl.graph_input((3,), popxl.float32, "x")
    with ir.main_graph:
        c = popxl.variable(np.ones(3, np.bool_), name="c")
        f = popxl.variable(np.ones(3, np.float32), name="f")
        i = popxl.variable(np.ones(3, np.int32), name="i")
        f4 = popxl.variable(np.ones(4, np.float32), name="f4")
        with pytest.raises(TypeError, match="where: inputs must have the same dtype"):
            ops.where(c, f, i)
        with pytest.raises(ValueError, match="where: shapes do not broadcast"):
            ops.where(c, f, f4)
        with pytest.raises(ValueError, match="where: .*in graph 'other"):
            ops.where(c, f, foreign)
        with pytest.raises(TypeError, match="where: argument 'condition' must be a Tensor"):
            ops.where([True, False, True], f, f)
        with pytest.raises(TypeError, match="where: at least one of lhs and rhs"):
            ops.where(c, 1.0, 2.0)
