"""cumsum against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

SHAPES_DIMS = [((6,), [0, -1]), ((3, 4), [0, 1, -1]), ((2, 3, 4), [0, 1, 2, -2]),
               ((0, 3), [0, 1]), ((3, 0), [1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8])
@pytest.mark.parametrize("shape,dims", SHAPES_DIMS)
def test_cumsum_matches_numpy(shape, dims, dtype):
    rng = np.random.default_rng(3)
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(-50, 50, size=shape).astype(dtype)
    else:
        x = rng.normal(size=shape).astype(dtype)
    got = run_fn(lambda t: [ops.cumsum(t, d) for d in dims], x)
    for d, g in zip(dims, got):
        assert g.dtype == x.dtype and g.shape == x.shape
        if np.issubdtype(dtype, np.integer):
            # NumPy accumulates in int64; the op wraps in its own type.
            np.testing.assert_array_equal(g, np.cumsum(x, axis=d, dtype=np.int64).astype(dtype))
        else:
            want = np.cumsum(x.astype(np.float64), axis=d)
            tol = dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else dict(rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(g.astype(np.float64), want, **tol)


def test_default_dim_and_float16_accumulation():
    x = np.ones((3000, 2), np.float16)  # a float16 running sum would stall at 2048
    got = run_fn(lambda t: ops.cumsum(t), x)
    np.testing.assert_array_equal(got[:, 0], np.arange(1, 3001).astype(np.float16))


def _build(fn, shape=(2, 3), dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        return fn(popxl.variable(np.zeros(shape, dtype.as_numpy()), dtype))


def test_bad_inputs():
    with pytest.raises(ValueError, match="cumsum: dim 2 is out of range"):
        _build(lambda t: ops.cumsum(t, 2))
    with pytest.raises(ValueError, match="cumsum: tensor .* has rank 0"):
        _build(lambda t: ops.cumsum(t), shape=())
    with pytest.raises(TypeError, match="cumsum: dim must be an int"):
        _build(lambda t: ops.cumsum(t, None))
    with pytest.raises(TypeError, match="cumsum: tensor .* has dtype bool"):
        _build(lambda t: ops.cumsum(t), dtype=popxl.bool)
