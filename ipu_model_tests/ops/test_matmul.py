"""matmul against NumPy (values, every rank combination, dtypes) and PyTorch
(gradients); the errors of bad operands."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from grad_harness import grads_of
from harness import run_fn

SHAPES = [
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((4,), (3, 4, 5)), ((2, 3, 4), (4,)),
    ((2, 1, 3, 4), (5, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((2, 3, 4), (2, 4, 5)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_matches_numpy(sa, sb, dtype):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    if np.issubdtype(dtype, np.integer):
        a = rng.integers(-5, 5, sa).astype(dtype)
        b = rng.integers(-5, 5, sb).astype(dtype)
    else:
        a = rng.standard_normal(sa).astype(dtype)
        b = rng.standard_normal(sb).astype(dtype)
    got = run_fn(lambda x, y: x @ y, a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == dtype
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)),
                                   ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_gradients_match_torch(sa, sb):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    seed = rng.standard_normal(np.matmul(a, b).shape).astype(np.float32)
    (out,), (da, db) = grads_of(lambda x, y: x @ y, a, b, seeds=[seed])
    ta = torch.tensor(a.astype(np.float64), requires_grad=True)
    tb = torch.tensor(b.astype(np.float64), requires_grad=True)
    (torch.matmul(ta, tb) * torch.from_numpy(seed.astype(np.float64))).sum().backward()
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(da, ta.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_matmul_output_type_casts_the_result():
    a = np.ones((2, 3), np.float32)
    got = run_fn(lambda x: ops.matmul(x, x.T, output_type=popxl.float16), a)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.full((2, 2), 3, np.float16))


@pytest.mark.parametrize("sa,sb,match", [
    ((3, 4), (5, 6), "contraction dimensions differ"),
    ((2, 3, 4), (3, 4, 5), "batch dimensions do not broadcast"),
    ((), (3,), "rank >= 1"),
])
def test_matmul_rejects_bad_shapes_naming_the_tensors(sa, sb, match):
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros(sa, np.float32), name="lhs_t")
        b = popxl.variable(np.zeros(sb, np.float32), name="rhs_t")
        with pytest.raises(ValueError, match=match) as e:
            ops.matmul(a, b)
        assert "lhs_t" in str(e.value)


def test_matmul_rejects_mixed_dtypes():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros((2, 2), np.float32))
        b = popxl.variable(np.zeros((2, 2), np.float16))
        with pytest.raises(TypeError, match="matmul"):
            ops.matmul(a, b)
