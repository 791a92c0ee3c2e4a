"""``popxl_addons.ops.grad_reduce_square_add``: ``sum(t**2) / loss_scaling**2``
as a float32 scalar, against NumPy float64."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.addons.ops.grad_reduce_square_add import grad_reduce_square_add


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("scale_as_tensor", [False, True])
def test_matches_numpy(dtype, scale_as_tensor):
    rng = np.random.default_rng(0)
    g = (rng.standard_normal((7, 33)) * 64).astype(dtype)
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(g, name="g")
        ls = popxl.constant(np.array(64, dtype)) if scale_as_tensor else 64
        out = grad_reduce_square_add(t, ls)
        assert out.dtype == popxl.float32 and out.shape == ()
        s = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run()[s]
    want = np.sum(g.astype(np.float64) ** 2) / 64 ** 2
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_float16_squares_do_not_overflow():
    # 300**2 * 1000 overflows float16 (max 65504): accumulation is float32
    ir = popxl.Ir()
    with ir.main_graph:
        out = grad_reduce_square_add(popxl.variable(np.full(1000, 300, np.float16)), 1)
        s = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as session:
        np.testing.assert_allclose(session.run()[s], 300.0 ** 2 * 1000, rtol=1e-6)


def test_bad_loss_scaling_is_refused():
    with popxl.Ir().main_graph:
        t = popxl.variable(np.ones(3, np.float32))
        with pytest.raises(ValueError, match="loss_scaling must be a non-zero number"):
            grad_reduce_square_add(t, 0)
