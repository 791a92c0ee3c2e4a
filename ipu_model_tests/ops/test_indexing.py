"""Tensor.__getitem__ (slicing, integer and boolean indexing) against NumPy."""
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


KEYS = [
    0, -1, 2, slice(1, 3), slice(None, None, -1), slice(None, None, 2), slice(-2, None),
    (1, 2), (slice(None), 1), (slice(None), slice(None, None, -2)), (slice(3, 0, -2), 0, 1),
    (Ellipsis, 1), (1, Ellipsis), (Ellipsis,), (slice(None), Ellipsis, slice(1, 5, 3)),
    (0, 1, 2), (slice(10, 20),), (slice(-100, 100, 3), slice(None), -4),
    (np.int64(1), np.int32(-1)), (slice(None),) * 3, Ellipsis,
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_basic_indexing(dt, key):
    x = _data((4, 3, 5), dt)
    want = x[key]
    got = run_fn(lambda t: t[key], x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_step_uses_slice_subsample_squeeze():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((6, 4), np.float32))
        y = t[1, ::-3]
        assert y.shape == (2,)
        ops_types = [op.type for op in t.graph._ops]
        assert ops_types == ["Slice", "Subsample", "Reshape"]


def test_diag():
    x = _data((4, 4), np.float32)
    np.testing.assert_array_equal(run_fn(lambda t: t.diag(), x), np.diag(x))


@pytest.mark.parametrize("dt", [np.float32, np.int32])
@pytest.mark.parametrize("idx", [[0, 2], [[3], [1]], [-1, 0, 0]])
def test_integer_indexing(dt, idx):
    x = _data((4, 3), dt)
    i = np.asarray(idx, np.int32)
    np.testing.assert_array_equal(run_fn(lambda t, it: t[it], x, i), x[i])
    np.testing.assert_array_equal(run_fn(lambda t: t[idx], x), x[i])
    np.testing.assert_array_equal(run_fn(lambda t: t[i], x), x[i])


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape,mask_shape", [((3,), (3,)), ((3, 2), (3, 2)), ((2, 3), (3,))])
def test_boolean_mask(dt, shape, mask_shape):
    x = _data(shape, dt)
    m = _data(mask_shape, np.bool_, seed=7)
    want = np.where(m, x, np.zeros((), dt))
    np.testing.assert_array_equal(run_fn(lambda t, mt: t[mt], x, m), want)
    np.testing.assert_array_equal(run_fn(lambda t: t[m], x), want)


def test_boolean_mask_broadcasts_like_popxl_docs():
    # PopXL doc example: x.shape == (3, 2), mask [True, False, True] zeroes row 1.
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    m = np.array([[True], [False], [True]])
    np.testing.assert_array_equal(run_fn(lambda t: t[m], x), x * m)


def test_getitem_errors():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((4, 3), np.float32))
        with pytest.raises(IndexError, match="out of bounds"):
            t[4]
        with pytest.raises(IndexError, match="out of bounds"):
            t[:, -4]
        with pytest.raises(IndexError, match="too many indices"):
            t[0, 0, 0]
        with pytest.raises(IndexError, match="single ellipsis"):
            t[..., 0, ...]
        with pytest.raises(TypeError, match="valid indices"):
            t[True]
        with pytest.raises(TypeError, match="valid indices"):
            t["a"]
        with pytest.raises(TypeError, match="valid indices"):
            t[1.5]
        with pytest.raises(TypeError, match="valid indices"):
            t[popxl.variable(np.zeros((2,), np.float32))]
        with pytest.raises(TypeError, match="slice indices must be integers"):
            t[0.5:2]
        with pytest.raises(ValueError, match="step cannot be zero"):
            t[::0]


def test_forward_step_only_needs_subsample():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((9,), np.float32))
        y = t[::4]
        assert y.shape == (3,)
        assert [op.type for op in t.graph._ops] == ["Subsample"]
