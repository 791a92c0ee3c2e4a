"""The GradGraphInfo contract of ``popxl.transforms.autodiff``: the user
guide's Linear example, the mapping helpers, input/output order guarantees,
stitching (all call sites updated), recompute through repeat/conditional and
the documented errors. Gradients are checked against NumPy."""
import re

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.errors import popart_exception
from ipuxl.transforms.autodiff import (ExpectedConnection, ExpectedConnectionType,
                                       GradGraphInfo)


def _store(t):
    s = popxl.d2h_stream(t.shape, t.dtype)
    ops.host_store(s, t)
    return s


def _run(ir, feeds=None):
    with popxl.Session(ir, "ipu_model") as sess:
        return sess.run(feeds or {})


class Linear(popxl.Module):
    """y = x @ W (+ b), weights as graph inputs (user guide Listing 10.1)."""

    def __init__(self):
        self.W = None
        self.b = None

    def build(self, x, out_features: int, bias: bool = True):
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        y = x @ self.W
        if bias:
            self.b = popxl.graph_input((out_features,), popxl.float32, "b")
            y = y + self.b
        return y


def test_user_guide_linear_gradients_against_numpy():
    rng = np.random.default_rng(0)
    W_data = rng.normal(0, 0.1, (2, 2)).astype(np.float32)
    b_data = rng.normal(0, 0.4, (2,)).astype(np.float32)
    x_data = rng.random((2, 2)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        in_s = popxl.h2d_stream([2, 2], popxl.float32, name="input_stream")
        x = ops.host_load(in_s, "x")
        W = popxl.variable(W_data, name="W")
        b = popxl.variable(b_data, name="b")
        linear = Linear()
        graph = ir.create_graph(linear, x, out_features=2)
        fwd = ops.call_with_info(graph, x, inputs_dict={linear.W: W, linear.b: b})
        y = fwd.outputs[0]
        info = transforms.autodiff(graph)
        seed = popxl.constant(np.ones((2, 2), np.float32))
        gx, gW, gb = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(fwd))
        streams = [_store(t) for t in (y, gx, gW, gb)]
    r = _run(ir, {in_s: x_data})
    ones = np.ones((2, 2), np.float32)
    np.testing.assert_allclose(r[streams[0]], x_data @ W_data + b_data, rtol=1e-6)
    np.testing.assert_allclose(r[streams[1]], ones @ W_data.T, rtol=1e-6)
    np.testing.assert_allclose(r[streams[2]], x_data.T @ ones, rtol=1e-6)
    np.testing.assert_allclose(r[streams[3]], ones.sum(0), rtol=1e-6)
    assert all(ec.connection_type == ExpectedConnectionType.FwdGrad
               for ec in info.expected_outputs)


def test_mapping_helpers_api_reference_example():
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        x = popxl.variable(np.ones((2, 16), np.float32), name="x")
        W = popxl.variable(np.ones((16, 16), np.float32), name="W")
        b = popxl.variable(np.zeros((16,), np.float32), name="b")
        module = Linear()
        graph = ir.create_graph(module, x, out_features=16)
        call_info = ops.call_with_info(graph, x, inputs_dict={module.W: W, module.b: b})
        grads_graph = transforms.autodiff(graph)
        x_dash = popxl.constant(np.ones((2, 16), np.float32), name="x_dash")
        grads_call_info = ops.call_with_info(grads_graph.graph, x_dash,
                                             inputs_dict=grads_graph.inputs_dict(call_info))
        m = grads_graph.fwd_graph_ins_to_grad_parent_outs(grads_call_info)
        assert all(t in graph for t in m.keys())
        assert all(t in main for t in m.values())
        assert [t.id for t in m.keys()] == [f"{graph.name}/x", f"{graph.name}/W",
                                            f"{graph.name}/b"]
        assert [t.id for t in m.values()] == ["Gradient___x", "Gradient___W", "Gradient___b"]
        assert all(t.shape == g.shape for t, g in m.items())
        m2 = grads_graph.fwd_parent_ins_to_grad_parent_outs(call_info, grads_call_info)
        assert list(m2.keys()) == [x, W, b]
        assert list(m2.values()) == list(m.values())


class ScaleNShift(popxl.Module):
    def __init__(self):
        self.W = None
        self.b = None

    def build(self, x, out_features: int):
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        self.b = popxl.graph_input((out_features,), popxl.float32, "b")
        return ops.mul(x, self.W) + self.b


@pytest.mark.parametrize("order", [("W", "b"), ("b", "W")])
def test_required_order_and_stitching_adds_one_output(order):
    rng = np.random.default_rng(1)
    xd = rng.standard_normal((16, 16)).astype(np.float32)
    Wd = rng.standard_normal((16, 16)).astype(np.float32)
    bd = rng.standard_normal((16,)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xd, name="x")
        W = popxl.variable(Wd, name="W")
        b = popxl.variable(bd, name="b")
        ss = ScaleNShift()
        g = ir.create_graph(ss, x, out_features=16)
        call = ops.call_with_info(g, x, inputs_dict={ss.W: W, ss.b: b})
        assert len(g.outputs) == 1
        req = [getattr(ss, n) for n in order]
        info = transforms.autodiff(g, grads_required=req)
        assert [ec.fwd_tensor for ec in info.expected_outputs] == req
        assert all(ec.connection_type == ExpectedConnectionType.FwdGrad
                   for ec in info.expected_outputs)
        # x*W is needed by Mul's gradient and is internal: stitched.
        assert len(g.outputs) == 2
        assert len(call.op.outputs) == 2
        assert len(info.expected_inputs) == len(info.graph.inputs)
        assert len(info.expected_outputs) == len(info.graph.outputs)
        assert info.expected_inputs[0].connection_type == ExpectedConnectionType.FwdGrad
        seed = popxl.constant(np.ones((16, 16), np.float32))
        gcall = ops.call_with_info(info.graph, seed, inputs_dict=info.inputs_dict(call))
        m = info.fwd_graph_ins_to_grad_parent_outs(gcall)
        assert all(t.name in gg.name for t, gg in m.items())
        assert all(t.shape == gg.shape for t, gg in m.items())
        pm = info.fwd_parent_ins_to_grad_parent_outs(call, gcall)
        assert all(t.shape == gg.shape for t, gg in pm.items())
        assert set(pm.keys()) == set(getattr_map(order, W, b))
        streams = {n: _store(pm[p]) for n, p in zip(order, getattr_map(order, W, b))}
    r = _run(ir)
    np.testing.assert_allclose(r[streams["W"]], xd, rtol=1e-6)  # d(sum x*W)/dW with ones
    np.testing.assert_allclose(r[streams["b"]], np.full(16, 16.0), rtol=1e-6)


def getattr_map(order, W, b):
    return [W if n == "W" else b for n in order]


def _three_out_graph(ir):
    def fn(a, b):
        s = a * b
        return s + a, s - b, ops.sin(a) * b

    return ir.create_graph(fn, popxl.TensorSpec((3,), popxl.float32),
                           popxl.TensorSpec((3,), popxl.float32))


@pytest.mark.parametrize("prov_idx", [(0, 1, 2), (2, 0, 1), (1,), (2, 0), (1, 2)])
@pytest.mark.parametrize("req_idx", [(0, 1), (1, 0), (1,)])
def test_provided_prefix_and_required_order_guarantees(prov_idx, req_idx):
    ir = popxl.Ir()
    with ir.main_graph:
        g = _three_out_graph(ir)
        n_out_before = len(g.outputs)
        outs = list(g.outputs)
        prov = [outs[i] for i in prov_idx]
        req = [g.inputs[i] for i in req_idx]
        info = transforms.autodiff(g, grads_provided=prov, grads_required=req)
        ins = info.expected_inputs
        assert [(e.connection_type, e.fwd_tensor) for e in ins[:len(prov)]] == \
            [(ExpectedConnectionType.FwdGrad, t) for t in prov]
        assert [(e.connection_type, e.fwd_tensor) for e in info.expected_outputs] == \
            [(ExpectedConnectionType.FwdGrad, t) for t in req]
        rest = ins[len(prov):]
        assert all(e.connection_type == ExpectedConnectionType.Fwd for e in rest)
        # Fwd connections are forward inputs or outputs (after stitching),
        # in the documented order: inputs in input order, then outputs.
        keys = []
        for e in rest:
            t = e.fwd_tensor
            if t in g.inputs:
                keys.append((0, g.inputs.index(t)))
            else:
                assert t in g.outputs
                keys.append((1, g.outputs.index(t)))
        assert keys == sorted(keys)
        assert len(set(keys)) == len(keys)
        assert len(g.outputs) >= n_out_before


def test_stitching_updates_all_call_sites_and_both_still_run():
    rng = np.random.default_rng(2)
    a1, a2, bd = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    ir = popxl.Ir()
    with ir.main_graph:
        va, vb, vc = (popxl.variable(d, name=n) for d, n in ((a1, "a1"), (a2, "a2"), (bd, "b")))
        g = ir.create_graph(lambda x, w: ops.sin(x * w) + w, va.spec, vb.spec)
        c1 = ops.call_with_info(g, va, vc)
        c2 = ops.call_with_info(g, vb, vc)
        info = transforms.autodiff(g)
        assert len(g.outputs) > 1
        assert len(c1.op.outputs) == len(g.outputs) == len(c2.op.outputs)
        seed = popxl.constant(np.ones(4, np.float32))
        gx1, gw1 = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(c1))
        gx2, gw2 = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(c2))
        ss = [_store(t) for t in (c1.outputs[0], c2.outputs[0], gx1, gw1, gx2, gw2)]
    r = _run(ir)
    for k, a in enumerate((a1, a2)):
        np.testing.assert_allclose(r[ss[k]], np.sin(a * bd) + bd, rtol=1e-5)
        np.testing.assert_allclose(r[ss[2 + 2 * k]], np.cos(a * bd) * bd, rtol=1e-5)
        np.testing.assert_allclose(r[ss[3 + 2 * k]], np.cos(a * bd) * a + 1, rtol=1e-5)


def test_autodiff_twice_is_idempotent_for_stitching():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda x: ops.sin(x) * x, popxl.TensorSpec((3,), popxl.float32))
        transforms.autodiff(g)
        n = len(g.outputs)
        transforms.autodiff(g)
        assert len(g.outputs) == n


def _recompute_graph(ir):
    # Body suitable for repeat: one carried input, output of the same spec.
    return ir.create_graph(lambda x: ops.sin(x * x) * x, popxl.TensorSpec((4,), popxl.float32))


@pytest.mark.parametrize("site", ["repeat", "conditional"])
def test_recompute_when_called_through_repeat_or_conditional(site):
    xd = np.linspace(-1, 1, 4).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xd, name="x")
        g = _recompute_graph(ir)
        if site == "repeat":
            (y,) = ops.repeat(g, 1, x)
        else:
            other = ir.create_graph(lambda t: t * 1.0, popxl.TensorSpec((4,), popxl.float32))
            cond = popxl.constant(True, popxl.bool)
            (y,) = ops.conditional(cond, g, other, then_inputs=[x], else_inputs=[x])
        n_out = len(g.outputs)
        info = transforms.autodiff(g)
        assert len(g.outputs) == n_out  # nothing stitched: the call site is not a plain call
        for e in info.expected_inputs:
            assert e.fwd_tensor in g.inputs or e.fwd_tensor in g.outputs
        feeds = []
        for e in info.expected_inputs:
            if e.connection_type == ExpectedConnectionType.FwdGrad:
                feeds.append(popxl.constant(np.ones(4, np.float32)))
            elif e.fwd_tensor in g.inputs:
                feeds.append(x)
            else:
                feeds.append(y)
        (gx,) = ops.call(info.graph, *feeds)
        s_y, s_g = _store(y), _store(gx)
    r = _run(ir)
    np.testing.assert_allclose(r[s_y], np.sin(xd * xd) * xd, rtol=1e-5)
    want = np.cos(xd * xd) * 2 * xd * xd + np.sin(xd * xd)
    np.testing.assert_allclose(r[s_g], want, rtol=1e-5, atol=1e-6)


def test_inputs_dict_rejects_call_site_of_another_graph():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32))
        g = ir.create_graph(lambda t: t * t, x.spec)
        h = ir.create_graph(lambda t: t + t, x.spec)
        ops.call_with_info(g, x)
        hc = ops.call_with_info(h, x)
        info = transforms.autodiff(g)
        with pytest.raises(TypeError):
            info.inputs_dict(hc)


def test_direct_construction_raises_type_error():
    with pytest.raises(TypeError):
        ExpectedConnection()
    with pytest.raises(TypeError):
        GradGraphInfo()


def test_repr_format():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable([1.0], name="bob")
        g = ir.create_graph(lambda a: a + a, a.spec)
        c = ops.call_with_info(g, a)
        _store(c.outputs[0])
        info = transforms.autodiff(g)
    text = repr(info)
    assert re.match(r"GradGraphInfo\[(.|\n)*?graph\=(.|\n)*?expected_inputs\=(.|\n)*?"
                    r"expected_outputs\=(.|\n)*?\]", text)
    lines = text.splitlines()
    assert lines[0] == "GradGraphInfo["
    assert lines[1] == f"  graph={info.graph.id}"
    assert lines[2] == "  expected_inputs=["
    assert lines[3].startswith("    (ExpectedConnectionType.FwdGrad, ")
    assert lines[-1] == "]"
    assert repr(info.expected_outputs[0]) == \
        f"(ExpectedConnectionType.FwdGrad, {info.expected_outputs[0].fwd_tensor})"


def test_same_tensor_twice_gives_twice_the_seed():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.array([1.5, -2.0], np.float32), name="a")
        g = ir.create_graph(lambda a: a + a, a.spec)
        c = ops.call_with_info(g, a)
        info = transforms.autodiff(g)
        seed = popxl.constant(np.array([3.0, 5.0], np.float32))
        (ga,) = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(c))
        s = _store(ga)
    np.testing.assert_allclose(_run(ir)[s], [6.0, 10.0])


# ---- errors

def _mod1(a, b):
    a += b
    return a


def _mod2(a, b):
    return ops.gelu_(a) + b


def _mod3(a, b):
    return ops.var_updates.accumulate_(a, b, 0.1)


def _not_mod(a, b):
    return ops.concat_([a, b], axis=0)


@pytest.mark.parametrize("fn,raises", [(_mod1, True), (_mod2, True), (_mod3, True),
                                       (_not_mod, False)])
def test_modifying_ops_rejected(fn, raises):
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable([1.0], name="a")
        b = popxl.variable([1.0], name="b")
        g = ir.create_graph(fn, a.spec, b.spec)
        ops.call_with_info(g, a, b)
        n_graphs = len(ir._graphs)
        if raises:
            with pytest.raises(popart_exception) as e:
                transforms.autodiff(g)
            assert e.value.args[0].startswith(f"The graph {g.id} contains a modifying op")
            assert len(ir._graphs) == n_graphs  # nothing left behind
        else:
            transforms.autodiff(g)


def test_modifying_op_in_called_graph_rejected():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable([1.0], name="a")
        b = popxl.variable([1.0], name="b")
        inner = ir.create_graph(_mod1, a.spec, b.spec)
        outer = ir.create_graph(lambda x, y: ops.call(inner, x, y)[0] * x, a.spec, b.spec)
        ops.call(outer, a, b)
        with pytest.raises(popart_exception) as e:
            transforms.autodiff(outer)
        assert e.value.args[0].startswith(f"The graph {inner.id} contains a modifying op")


def test_empty_grads_required_raises():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda x: x * x, popxl.TensorSpec((2,), popxl.float32))
        with pytest.raises(popart_exception, match="empty"):
            transforms.autodiff(g, grads_required=[])


def test_required_gradient_without_path_raises():
    ir = popxl.Ir()
    with ir.main_graph:
        def fn(x, unused, idx):
            return x * x + ops.cast(idx, popxl.float32)

        g = ir.create_graph(fn, popxl.TensorSpec((2,), popxl.float32),
                            popxl.TensorSpec((2,), popxl.float32),
                            popxl.TensorSpec((2,), popxl.int32))
        n_graphs, n_out = len(ir._graphs), len(g.outputs)
        with pytest.raises(popart_exception, match="Unable to provide required gradient"):
            transforms.autodiff(g)  # default: all inputs, incl. the int one
        with pytest.raises(popart_exception, match="Unable to provide required gradient"):
            transforms.autodiff(g, grads_required=[g.inputs[1]])
        assert len(ir._graphs) == n_graphs and len(g.outputs) == n_out
        info = transforms.autodiff(g, grads_required=[g.inputs[0]])
        assert len(info.expected_outputs) == 1


def test_bad_arguments():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda x: x * x, popxl.TensorSpec((2,), popxl.float32))
        h = ir.create_graph(lambda x: x + x, popxl.TensorSpec((2,), popxl.float32))
        with pytest.raises(TypeError):
            transforms.autodiff("g")
        with pytest.raises(ValueError, match="not in graph"):
            transforms.autodiff(g, grads_required=[h.inputs[0]])
        with pytest.raises(TypeError):
            transforms.autodiff(g, grads_required=[1])
        with pytest.raises(TypeError):
            transforms.autodiff(g, called_graphs_grad_info={h: 3})


def _make_ruleless_op(x):
    from ipuxl.op import create_op
    from ipuxl.opdef import _REGISTRY, define_op
    from ipuxl.ops.rules import like_input
    if "AutodiffTestNoRule" not in _REGISTRY:  # an op type with no gradient rule
        define_op("AutodiffTestNoRule", like_input(0), kernel="Identity", cost="copy")
    return create_op("AutodiffTestNoRule", [x], [("out", x.shape, x.dtype)]).outputs[0]


def test_missing_rule_raises_naming_the_op_and_rolls_back():
    ir = popxl.Ir()
    with ir.main_graph:
        def fn(x, w):
            return ops.sin(x * w) + _make_ruleless_op(x)  # never run: no kernel

        g = ir.create_graph(fn, popxl.TensorSpec((2,), popxl.float32),
                            popxl.TensorSpec((2,), popxl.float32))
        x = popxl.variable(np.ones(2, np.float32))
        c = ops.call_with_info(g, x, x)
        n_graphs, n_out, n_call_out = len(ir._graphs), len(g.outputs), len(c.op.outputs)
        with pytest.raises(NotImplementedError, match="AutodiffTestNoRule"):
            transforms.autodiff(g)
        assert len(ir._graphs) == n_graphs
        assert len(g.outputs) == n_out and len(c.op.outputs) == n_call_out
        # Only w's gradient requested: the rule-less op is on x's branch only,
        # but x is not needed, so it must not raise.
        info = transforms.autodiff(g, grads_required=[g.inputs[1]])
        assert len(info.expected_outputs) == 1


def test_ruleless_op_on_constant_branch_does_not_raise():
    ir = popxl.Ir()
    with ir.main_graph:
        def fn(x):
            c = popxl.constant(np.ones(2, np.float32), name="c")
            return x * _make_ruleless_op(c)

        g = ir.create_graph(fn, popxl.TensorSpec((2,), popxl.float32))
        info = transforms.autodiff(g)
        assert len(info.expected_outputs) == 1
