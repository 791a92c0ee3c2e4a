"""Module.build_grad through GraphWithNamedArgs.autodiff: gradients of a
hand-written Linear gradient against NumPy, the GradGraphInfo connections,
"auto" choosing build_grad, and popxl_addons' errors (which programs match)."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons import GraphWithNamedArgs, Module


class HandLinear(Module):
    def __init__(self, features, grad_inlining_error="error"):
        super().__init__(grad_inlining_error=grad_inlining_error)
        self.features = features

    def build(self, x):
        w = self.add_variable_input("w", partial(np.zeros, (x.shape[-1], self.features)),
                                    popxl.float32)
        b = self.add_variable_input("b", partial(np.zeros, (self.features,)), popxl.float32)
        self.aux["x"] = x
        self.aux["w"] = w
        return x @ w + b

    def build_grad(self, dy):
        self.var_grad["w"] = self.aux["x"].T @ dy
        self.var_grad["b"] = ops.sum(dy, 0)
        return dy @ self.aux["w"].T


@pytest.mark.parametrize("method", ["build_grad", "auto"])
def test_build_grad_values_match_numpy(method):
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(4, 3)).astype(np.float32)
    dy_np = rng.normal(size=(4, 2)).astype(np.float32)
    w_np = rng.normal(size=(3, 2)).astype(np.float32)
    b_np = rng.normal(size=(2,)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(x_np)
        dy = popxl.variable(dy_np)
        facts, fwd = HandLinear(2).create_graph(x)
        bwd = fwd.autodiff(method=method)
        assert len(bwd.graph.outputs) == len(fwd.graph.inputs)
        info = bwd.grad_graph_info
        assert [c.fwd_tensor for c in info.expected_outputs] == list(fwd.graph.inputs)
        kinds = {c.fwd_tensor: c.connection_type.name for c in info.expected_inputs}
        assert sorted(kinds.values()) == ["Fwd", "Fwd", "FwdGrad"]
        variables = facts.init()
        call = fwd.bind(variables).call_with_info(x)
        y = call.outputs[0]
        dx, dw, db = bwd.call(dy, args=info.inputs_dict(call))
        streams = [addons.host_store(t) for t in (y, dx, dw, db)]
    with popxl.Session(ir, "ipu_model") as s:
        s.write_variables_data({variables.w: w_np, variables.b: b_np})
        out = s.run()
    y_, dx_, dw_, db_ = (out[st] for st in streams)
    np.testing.assert_allclose(y_, x_np @ w_np + b_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx_, dy_np @ w_np.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw_, x_np.T @ dy_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(db_, dy_np.sum(0), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="already been applied"):
        fwd.autodiff()


def _fwd(module, *shapes):
    ir = popxl.Ir()
    g = ir.main_graph
    with g:
        xs = [popxl.variable(np.ones(s, np.float32)) for s in shapes]
        _, fwd = module.create_graph(*xs)
    return ir, g, fwd


def test_errors():
    class Bad(HandLinear):
        def __init__(self, mode):
            super().__init__(2)
            self.mode = mode

        def build_grad(self, dy):
            if self.mode == "outside":
                pass
            self.var_grad["b"] = ops.sum(dy, 0)
            if self.mode != "missing_var":
                self.var_grad["w"] = self.aux["x"].T @ dy
            if self.mode == "type":
                self.var_grad["b"] = 0
            if self.mode == "key":
                self.var_grad["nope"] = ops.sum(dy, 0)
            if self.mode == "var_shape":
                self.var_grad["w"] = ops.sum(dy, 0)
            dx = dy @ self.aux["w"].T
            return {"too_many": (dx, dx), "too_few": (), "out_shape": ops.sum(dy, 0)}.get(
                self.mode, dx)

    cases = {"missing_var": "Not all variable gradients have been specified",
             "too_many": "Too many outputs in the grad graph",
             "too_few": "Not all forward graph inputs have been specified",
             "out_shape": "Shape or meta-shape of output Tensor at position 0",
             "type": "Not a tensor", "key": "Not a variable",
             "var_shape": "Shape or meta-shape of Tensor does not match variable"}
    for mode, msg in cases.items():
        ir, g, fwd = _fwd(Bad(mode), (4, 3))
        with g, pytest.raises(Exception, match=msg):
            fwd.autodiff(method="build_grad")


def test_context_and_argument_errors():
    m = HandLinear(2)
    ir, g, fwd = _fwd(m, (4, 3))
    with pytest.raises(Exception, match=" within the `build_graph` method"):
        m.var_grad["w"] = 0
    with pytest.raises(Exception, match="get items within the `build_graph`"):
        _ = m.aux["x"]
    with g:
        with pytest.raises(ValueError, match="is not a output of `fwd_graph`"):
            fwd.autodiff(method="build_grad", grads_provided=[fwd.graph.inputs[0]])
        with pytest.raises(ValueError, match="is not a input of `fwd_graph`"):
            fwd.autodiff(method="build_grad", grads_required=[fwd.graph.outputs[0]])
        with pytest.raises(ValueError, match="do not match the signature"):
            fwd.autodiff(method="build_grad", grads_provided=[])
        # a subset of gradients: only b and x
        bwd = fwd.autodiff(method="build_grad",
                           grads_required=[fwd.graph.inputs[0], fwd.args.b])
        assert [c.fwd_tensor for c in bwd.grad_graph_info.expected_outputs] == \
            [fwd.graph.inputs[0], fwd.args.b]
        plain = GraphWithNamedArgs(fwd.graph, args=fwd.args)
        with pytest.raises(Exception, match="`from_module` is specified"):
            plain.autodiff(method="build_grad", force=True)

    class Star(HandLinear):
        def build_grad(self, *args):
            return None

    ir, g, fwd = _fwd(Star(2), (4, 3))
    with g, pytest.raises(TypeError, match="fixed number of positional parameters"):
        fwd.autodiff(method="build_grad")
    with pytest.raises(ValueError, match="grad_inlining_error should be one of"):
        HandLinear(2, grad_inlining_error="")
