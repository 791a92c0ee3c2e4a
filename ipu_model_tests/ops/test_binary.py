"""add, sub, mul, div and their in-place forms against NumPy (broadcasting,
dtypes, integer division), gradients against PyTorch, and PopXL's errors."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from grad_harness import grads_of
from harness import run_fn

NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 3), (4, 1)),
          ((0, 3), (3,))]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("sa,sb", SHAPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_binary_matches_numpy(name, sa, sb, dtype):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 9, sa).astype(dtype)
    b = rng.integers(0, 9, sb).astype(dtype)
    got = run_fn(lambda x, y: getattr(ops, name)(x, y), a, b)
    with np.errstate(over="ignore"):
        want = NP[name](a, b)  # same dtype: unsigned wraps as on the device
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_division_floats_and_integers():
    a = np.array([7, -7, 7, -7, 5, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, 0], np.int32)
    got = run_fn(lambda x, y: x / y, a, b)
    # Integer division truncates toward zero; by zero it gives 0 (documented).
    np.testing.assert_array_equal(got, [3, -3, -3, 3, 0, 0])
    x = np.array([1.0, -1.0, 0.0, 3.0], np.float32)
    y = np.array([0.0, 0.0, 0.0, 4.0], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(run_fn(lambda p, q: p / q, x, y), x / y)


@pytest.mark.parametrize("name,fn", [("add_", np.add), ("sub_", np.subtract),
                                     ("mul_", np.multiply), ("div_", np.divide)])
def test_inplace_forms_write_the_left_operand(name, fn):
    a = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    b = np.array([2.0, 4.0, 8.0], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(a, name="x")
        y = popxl.constant(b)
        out = getattr(ops, name)(x, y)
        s = popxl.d2h_stream(out.shape, out.dtype)
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()[s]
        np.testing.assert_allclose(got, fn(a, b), rtol=1e-6)
        np.testing.assert_allclose(sess.get_tensor_data(x), fn(a, b), rtol=1e-6)


@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4))])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_gradients_match_torch(name, sa, sb):
    rng = np.random.default_rng(11)
    a = rng.uniform(0.5, 2.0, sa).astype(np.float32)
    b = rng.uniform(0.5, 2.0, sb).astype(np.float32)
    seed = rng.standard_normal(np.broadcast_shapes(sa, sb)).astype(np.float32)
    _, (da, db) = grads_of(lambda x, y: getattr(ops, name)(x, y), a, b, seeds=[seed])
    ta = torch.tensor(a.astype(np.float64), requires_grad=True)
    tb = torch.tensor(b.astype(np.float64), requires_grad=True)
    tf = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[name]
    (tf(ta, tb) * torch.from_numpy(seed.astype(np.float64))).sum().backward()
    np.testing.assert_allclose(da, ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_binary_errors_name_the_op_and_tensors():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros((3, 4), np.float32), name="a")
        b = popxl.variable(np.zeros((5,), np.float32), name="b")
        h = popxl.variable(np.zeros((3, 4), np.float16), name="h")
        with pytest.raises(ValueError, match="add: shapes do not broadcast.*'a'.*'b'"):
            ops.add(a, b)
        with pytest.raises(TypeError, match="mul: inputs must have the same dtype"):
            ops.mul(a, h)
        with pytest.raises(ValueError, match="add_: the result shape"):
            ops.add_(popxl.variable(np.zeros((4,), np.float32)), a)
        with pytest.raises(TypeError, match="at least one operand must be a Tensor"):
            ops.add(1, 2)
