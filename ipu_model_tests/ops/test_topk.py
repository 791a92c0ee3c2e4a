"""topk against PyTorch / NumPy."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

CASES = [((10,), 0, 3), ((10,), -1, 10), ((4, 6), 1, 2), ((4, 6), 0, 4), ((2, 5, 3), 1, 5),
         ((2, 5, 3), -1, 1), ((3, 4), 1, 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape,axis,k", CASES)
def test_topk_matches_torch(shape, axis, k, dtype):
    rng = np.random.default_rng(5)
    # distinct values: the order and indices are then unique
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(dtype)
    combos = [(lg, s) for lg in (True, False) for s in (True, False)]
    got = run_fn(lambda t: [o for lg, s in combos for o in ops.topk(t, k, axis, lg, s)], x)
    for i, (lg, s) in enumerate(combos):
        vals, idx = got[2 * i], got[2 * i + 1]
        wv, wi = torch.topk(torch.from_numpy(x.astype(np.float64)), k, dim=axis, largest=lg,
                            sorted=True)
        assert vals.dtype == x.dtype and idx.dtype == np.int32
        np.testing.assert_array_equal(vals.astype(np.float64), wv.numpy())
        np.testing.assert_array_equal(idx, wi.numpy())


def test_topk_ties_keep_index_order_and_nan_is_largest():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [np.nan, 1.0, 5.0, np.nan, 0.0]], np.float32)
    v1, i1, v2, i2 = run_fn(lambda t: [*ops.topk(t, 3, 1, True, True),
                                       *ops.topk(t, 3, 1, False, True)], x)
    np.testing.assert_array_equal(i1, [[1, 2, 4], [0, 3, 2]])
    np.testing.assert_array_equal(v1[0], [3, 3, 3])
    assert np.isnan(v1[1, :2]).all() and v1[1, 2] == 5
    np.testing.assert_array_equal(i2, [[0, 3, 1], [4, 1, 2]])


def test_topk_values_match_gather_of_indices():
    x = np.random.default_rng(6).normal(size=(3, 7, 4)).astype(np.float32)
    vals, idx = run_fn(lambda t: ops.topk(t, 3, 1, True, False), x)
    np.testing.assert_array_equal(np.take_along_axis(x, idx, axis=1), vals)


def _build(fn, shape=(2, 3), dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        return fn(popxl.variable(np.zeros(shape, dtype.as_numpy()), dtype))


def test_bad_inputs():
    with pytest.raises(ValueError, match="topk: cannot take top-4 on axis 1 of size 3"):
        _build(lambda t: ops.topk(t, 4, 1, True, True))
    with pytest.raises(ValueError, match="cannot take top--1"):
        _build(lambda t: ops.topk(t, -1, 1, True, True))
    with pytest.raises(TypeError, match="topk: k must be an int"):
        _build(lambda t: ops.topk(t, 1.5, 1, True, True))
    with pytest.raises(ValueError, match="topk: axis 2 is out of range"):
        _build(lambda t: ops.topk(t, 1, 2, True, True))
    with pytest.raises(ValueError, match="topk: tensor .* has rank 0"):
        _build(lambda t: ops.topk(t, 1, 0, True, True), shape=())
    with pytest.raises(TypeError, match="topk: tensor .* has dtype bool"):
        _build(lambda t: ops.topk(t, 1, 0, True, True), dtype=popxl.bool)
    with pytest.raises(ValueError, match="amp .* must be in"):
        _build(lambda t: ops.topk(t, 1, 0, True, True, amp=2.0))
