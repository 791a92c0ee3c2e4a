"""argmax / argmin against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

SHAPES_DIMS = [((5,), [0, -1]), ((3, 4), [0, 1, -1, -2]), ((2, 3, 4), [0, 1, 2, -1]),
               ((4, 1), [1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("shape,dims", SHAPES_DIMS)
def test_argminmax_matches_numpy(shape, dims, dtype):
    rng = np.random.default_rng(len(shape))
    # Few distinct values, so ties are common: the first index must win.
    x = rng.integers(0, 4, size=shape).astype(dtype)
    combos = [(f, d, k) for f in ("argmax", "argmin") for d in dims for k in (False, True)]
    got = run_fn(lambda t: [getattr(ops, f)(t, d, k) for f, d, k in combos], x)
    for (f, d, k), g in zip(combos, got):
        want = getattr(np, f)(x, axis=d)
        if k:
            want = np.expand_dims(want, d)
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, want, err_msg=f"{f} dim={d} keepdim={k}")


def test_defaults_and_nan():
    x = np.array([[1.0, 5.0, np.nan], [7.0, np.nan, 0.0], [2.0, 2.0, 2.0]], np.float32)
    got = run_fn(lambda t: [ops.argmax(t), ops.argmax(t, 1), ops.argmin(t, 1)], x)
    np.testing.assert_array_equal(got[0], np.argmax(x, 0))
    np.testing.assert_array_equal(got[1], np.argmax(x, 1))  # [2, 1, 0]: first NaN wins
    np.testing.assert_array_equal(got[2], np.argmin(x, 1))


def test_empty_outer_dimension_is_fine():
    got = run_fn(lambda t: ops.argmax(t, 1), np.zeros((0, 3), np.float32))
    assert got.shape == (0,) and got.dtype == np.int32


def _build(fn, shape=(2, 3), dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        return fn(popxl.variable(np.zeros(shape, dtype.as_numpy()), dtype))


def test_bad_inputs():
    with pytest.raises(ValueError, match="argmax: dim 2 is out of range"):
        _build(lambda t: ops.argmax(t, 2))
    with pytest.raises(ValueError, match="argmin: dim -3 is out of range"):
        _build(lambda t: ops.argmin(t, -3))
    with pytest.raises(TypeError, match="argmax: dim must be an int"):
        _build(lambda t: ops.argmax(t, 0.5))
    with pytest.raises(ValueError, match="argmax: tensor .* has rank 0"):
        _build(lambda t: ops.argmax(t), shape=())
    with pytest.raises(ValueError, match="argmin of an empty sequence is undefined"):
        _build(lambda t: ops.argmin(t, 0), shape=(0, 3))
    with pytest.raises(TypeError, match="argmax: tensor .* has dtype bool"):
        _build(lambda t: ops.argmax(t), dtype=popxl.bool)
    with pytest.raises(TypeError, match="keepdim must be a bool"):
        _build(lambda t: ops.argmax(t, 0, "no"))
