"""cast between every pair of supported dtypes, against numpy's astype."""
import itertools

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

NP_TYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
            np.uint64, np.float16, np.float32, np.float64]


def _is_signed(t):
    return np.issubdtype(t, np.floating) or np.issubdtype(t, np.signedinteger)


def _values(src, dst):
    """Values of ``src`` whose conversion to ``dst`` numpy defines."""
    if src == np.bool_:
        return np.array([True, False, True], np.bool_)
    if np.issubdtype(src, np.floating):
        vals = [0.0, 1.0, 2.75, 5.5, 100.25, 127.0]
        if _is_signed(dst):
            vals += [-3.5, -100.75, -0.0]
        if dst == np.bool_:
            vals += [0.5, -2.0]
    else:
        vals = [0, 1, 5, 100, 127]
        if _is_signed(src) and _is_signed(dst):
            vals += [-3, -100, -128]
    return np.array(vals, dtype=src)


@pytest.mark.parametrize("src,dst", list(itertools.product(NP_TYPES, NP_TYPES)))
def test_cast_pairs(src, dst):
    x = _values(src, dst)
    got = run_fn(lambda t: ops.cast(t, popxl.dtypes.dtype.as_dtype(dst)), x)
    assert got.dtype == dst and got.shape == x.shape
    np.testing.assert_array_equal(got, x.astype(dst))


@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3, 4)])
def test_cast_shapes(shape):
    x = np.random.default_rng(0).uniform(-50, 50, size=shape).astype(np.float32)
    got = run_fn(lambda t: (ops.cast(t, popxl.int32), ops.cast(t, popxl.float16)), x)
    np.testing.assert_array_equal(got[0], x.astype(np.int32))
    np.testing.assert_array_equal(got[1], x.astype(np.float16))
    assert got[0].shape == shape


def test_float_to_int_saturates():
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 300.7, -300.7, 2.9, -2.9], np.float32)
    got = run_fn(lambda t: (ops.cast(t, popxl.int32), ops.cast(t, popxl.int8),
                            ops.cast(t, popxl.uint8), ops.cast(t, popxl.int64)), x)
    i32 = np.iinfo(np.int32)
    i64 = np.iinfo(np.int64)
    np.testing.assert_array_equal(got[0], [0, i32.max, i32.min, i32.max, i32.min, 300, -300, 2, -2])
    np.testing.assert_array_equal(got[1], [0, 127, -128, 127, -128, 127, -128, 2, -2])
    np.testing.assert_array_equal(got[2], [0, 255, 0, 255, 0, 255, 0, 2, 0])
    np.testing.assert_array_equal(got[3], [0, i64.max, i64.min, 10**10, -10**10, 300, -300, 2, -2])


def test_int_to_int_wraps():
    x = np.array([300, -1, 65537, -129, 2**31 - 1], np.int64)
    got = run_fn(lambda t: (ops.cast(t, popxl.int8), ops.cast(t, popxl.uint16),
                            ops.cast(t, popxl.uint32)), x)
    np.testing.assert_array_equal(got[0], x.astype(np.int8))
    np.testing.assert_array_equal(got[1], x.astype(np.uint16))
    np.testing.assert_array_equal(got[2], x.astype(np.uint32))


def test_to_bool_and_float16():
    x = np.array([np.nan, 0.0, -0.0, 1e-30, np.inf], np.float32)
    np.testing.assert_array_equal(run_fn(lambda t: ops.cast(t, popxl.bool), x),
                                  [True, False, False, True, True])
    big = np.array([70000.0, 65504.0, 1e-8, 0.1, -2.5], np.float32)
    with np.errstate(over="ignore"):
        want = big.astype(np.float16)  # 70000 overflows to inf
    np.testing.assert_array_equal(run_fn(lambda t: ops.cast(t, popxl.float16), big), want)
    u = np.array([2**64 - 1, 2**40], np.uint64)
    np.testing.assert_array_equal(run_fn(lambda t: ops.cast(t, popxl.float32), u),
                                  u.astype(np.float32))


def test_cast_names_and_bad():
    ir = popxl.Ir()
    with ir.create_empty_graph("other"):
        foreign = popxl.graph_input((3,), popxl.float32, "x")
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.float32), name="w")
        c = ops.cast(t, popxl.float16)
        assert c.name == "w_float16" and c.producer.type == "Cast"
        assert ops.cast(t, "int32").dtype == popxl.int32
        with pytest.raises(TypeError, match="float8_143 not supported for cast, please "
                                            "consider pow2scale_cast_to_fp8"):
            ops.cast(t, popxl.float8_143)
        with pytest.raises(TypeError, match="cast: .*complex64"):
            ops.cast(t, popxl.complex64)
        with pytest.raises(TypeError, match="cast: data_type must be a popxl dtype"):
            ops.cast(t, "not_a_type")
        with pytest.raises(ValueError, match="cast: .*in graph 'other"):
            ops.cast(foreign, popxl.int32)
        with pytest.raises(TypeError, match="cast: argument 't' must be a Tensor"):
            ops.cast(np.ones(3), popxl.int32)
        with pytest.raises(ValueError, match="Log2 scale argument must be a scalar tensor"):
            ops.pow2scale_then_cast(t, t, popxl.float8_143)
        with pytest.raises(TypeError, match="not supported for pow2scale_cast_from_fp8"):
            ops.cast_then_pow2scale(t, t, popxl.int32)
