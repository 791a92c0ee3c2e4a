"""addons.testing_utils: run_module against NumPy/PyTorch, ops_of_type."""
import numpy as np
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.addons import Module
from ipuxl.addons.layers import Linear
from ipuxl.addons.testing_utils import TensorInput, ops_of_type, run_module


def test_run_module_linear_matches_torch():
    rng = np.random.default_rng(0)
    x = rng.random((3, 4))
    lin = torch.nn.Linear(4, 2)
    want = lin(torch.tensor(x, dtype=torch.float32)).detach().numpy()

    def weights(v):
        return {v.weight: lin.weight.detach().numpy().T.copy(), v.bias: lin.bias.detach().numpy()}

    (got,) = run_module(Linear(2), TensorInput(x, popxl.float32), weights=weights)
    assert got.dtype == np.float32 and got.shape == (3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_run_module_in_place_and_inferred_dtype():
    class AddInPlace(Module):
        def build(self, x: popxl.TensorByRef, a: popxl.Tensor):
            ops.add_(x, a)
            return x, x * 2

    x = np.arange(4, dtype=np.float32)
    a = np.full(4, 0.5, np.float32)
    out, twice = run_module(AddInPlace(), TensorInput(x), TensorInput(a))  # dtype from the arrays
    np.testing.assert_allclose(out, x + a)
    np.testing.assert_allclose(twice, 2 * (x + a))


def test_ops_of_type():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones(2, np.float32))
        b = a + a
        _ = b * a + b
    ops_list = list(ir.main_graph.ops)
    assert ops_of_type(ops_list, "Add") == 2
    assert ops_of_type(ops_list, "Mul") == 1
    assert ops_of_type(ops_list, type(ops_list[0])) == len(ops_list)
