"""addons.autodiff / autodiff_with_accumulation / cross_entropy / build_grad
/ call_module, structure and numerics against PyTorch."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
from ipuxl import ops

torch = pytest.importorskip("torch")


class Lin(addons.Module):
    def build(self, x):
        w = self.add_variable_input("weight", partial(np.random.normal, 0, 0.5, (x.shape[-1], 3)),
                                    x.dtype)
        b = self.add_variable_input("bias", partial(np.random.normal, 0, 0.5, (3,)), x.dtype)
        return ops.gelu(x @ w + b)


def test_autodiff_structure():
    np.random.seed(0)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 4), np.float32), name="x")
        facts, fwd = Lin().create_graph(x)
        bwd = addons.autodiff(fwd)
        info = bwd.grad_graph_info
        assert info.forward_graph is fwd.graph and bwd.graph is info.graph
        assert [ec.fwd_tensor for ec in info.expected_outputs] == list(fwd.graph.inputs)
        # named args: the forward variables the gradient graph reads
        assert set(bwd.args.keys_flat()) <= {"weight", "bias"} and "weight" in bwd.args
        assert fwd.autodiff_applied is False
        bwd2 = fwd.autodiff(grads_required=[fwd.args.weight])
        assert fwd.autodiff_applied
        assert [ec.fwd_tensor for ec in bwd2.grad_graph_info.expected_outputs] == [fwd.args.weight]
        with pytest.raises(RuntimeError, match="already been applied"):
            fwd.autodiff()
        with pytest.raises(TypeError):
            addons.autodiff("not a graph")
        with pytest.raises(RuntimeError, match="`from_module` is specified"):
            fwd.autodiff(method="build_grad", force=True)   # Lin has no build_grad
        all_g = addons.autodiff(fwd.graph, return_all_grad_graphs=True)
        assert fwd.graph in all_g and isinstance(all_g[fwd.graph], addons.GraphWithNamedArgs)


def test_autodiff_with_accumulation_matches_torch():
    np.random.seed(1)
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(2, 4)).astype(np.float32) for _ in range(3)]
    ir = popxl.Ir()
    with ir.main_graph:
        xs_t = [popxl.variable(v, name=f"x{i}") for i, v in enumerate(xs)]
        facts, fwd = Lin().create_graph(xs_t[0])
        gfacts, bwd = addons.autodiff_with_accumulation(fwd, fwd.args.tensors,
                                                        grads_required=[fwd.graph.inputs[0]])
        assert list(gfacts.to_dict()) == ["mean_accum_counter", "accum.bias", "accum.weight"]
        assert len(bwd.graph.outputs) == 1  # only dx remains
        vs = facts.init()
        acc = gfacts.init()
        assert acc.tensors[-1] is acc.mean_accum_counter  # sorts last by name
        for xt in xs_t:
            info = fwd.bind(vs).call_with_info(xt)
            seed = popxl.constant(np.ones((2, 3), np.float32))
            dx, = bwd.bind(acc).call(seed, args=bwd.grad_graph_info.inputs_dict(info))
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        d = s.get_tensors_data([vs.weight, vs.bias, acc.accum.weight, acc.accum.bias,
                                acc.mean_accum_counter])
    w = torch.tensor(d[vs.weight], requires_grad=True)
    b = torch.tensor(d[vs.bias], requires_grad=True)
    gw, gb = 0, 0
    for v in xs:
        y = torch.nn.functional.gelu(torch.tensor(v) @ w + b, approximate="tanh")
        a, c = torch.autograd.grad(y.sum(), (w, b))
        gw, gb = gw + a / 3, gb + c / 3
    np.testing.assert_allclose(d[acc.accum.weight], gw.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d[acc.accum.bias], gb.numpy(), rtol=1e-5, atol=1e-6)
    assert d[acc.mean_accum_counter] == 3


@pytest.mark.parametrize("ignore_index,scale", [(None, 1.0), (2, 64.0)])
def test_cross_entropy_matches_torch(ignore_index, scale):
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 5)).astype(np.float32)
    labels = np.array([0, 2, 4, 2, 1, 3], np.int32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(logits)
        t = popxl.variable(labels)
        loss, dx = addons.ops.cross_entropy_with_grad(x, t, loss_scaling=scale,
                                                      ignore_index=ignore_index)
        loss2 = addons.ops.cross_entropy(x, t, ignore_index=ignore_index)
        outs = {}
        for k, v in (("loss", loss), ("dx", dx), ("loss2", loss2)):
            s = popxl.d2h_stream(v.shape, v.dtype, k)
            ops.host_store(s, v)
            outs[k] = s
        with pytest.raises(ValueError, match="targets"):
            addons.ops.cross_entropy(x, popxl.variable(np.zeros(5, np.int32)))
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    tl = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(
        tl, torch.tensor(labels, dtype=torch.long),
        ignore_index=-100 if ignore_index is None else ignore_index)
    g, = torch.autograd.grad(tloss, tl)
    np.testing.assert_allclose(r[outs["loss"]], tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(r[outs["loss2"]], tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(r[outs["dx"]], g.numpy() * scale, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_grad_takes_n_by_1_targets(reduction):
    # popxl-addons passes the targets to nll_loss_with_softmax_grad, whose
    # PopART op takes one label per row in any shape: BERT's (n, 1) labels.
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 5)).astype(np.float32)
    labels = np.array([[0], [2], [4], [2], [1], [3]], np.int32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(logits)
        t = popxl.variable(labels)
        loss, dx = addons.ops.cross_entropy_with_grad(x, t, loss_scaling=4.0, ignore_index=2,
                                                      reduction=reduction)
        outs = {}
        for k, v in (("loss", loss), ("dx", dx)):
            s = popxl.d2h_stream(v.shape, v.dtype, k)
            ops.host_store(s, v)
            outs[k] = s
        with pytest.raises(ValueError, match="one label per row"):
            addons.ops.cross_entropy_with_grad(x, popxl.variable(np.zeros((5, 1), np.int32)))
        with pytest.raises(ValueError, match=r"must have shape logits.shape\[:-1\]"):
            addons.ops.cross_entropy(x, t)   # nll_loss checks the label shape, as PopART
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    tl = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(
        tl, torch.tensor(labels.reshape(-1), dtype=torch.long), ignore_index=2,
        reduction=reduction)
    g, = torch.autograd.grad(tloss.sum(), tl)
    want = tloss.detach().numpy()
    if reduction == "none":
        want = want.reshape(6, 1)
    assert r[outs["loss"]].shape == np.shape(want)
    np.testing.assert_allclose(r[outs["loss"]], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r[outs["dx"]], g.numpy() * 4.0, rtol=1e-5, atol=1e-6)


class HandGrad(addons.Module):
    """y = x * w with a hand-written gradient (build_grad)."""

    def build(self, x):
        w = self.add_variable_input("w", partial(np.full, x.shape, 3.0), x.dtype)
        self.aux["x"] = x
        self.aux["w"] = w
        return x * w

    def build_grad(self, dy):
        self.var_grad["w"] = dy * self.aux["x"]
        return dy * self.aux["w"]


def test_build_grad_and_call_module():
    xd = np.array([1.0, -2.0, 0.5], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xd, name="x")
        m = HandGrad()
        with pytest.raises(RuntimeError, match="build_grad"):
            m(x)  # inlining a build_grad module is refused
        facts, fwd = m.create_graph(x)
        bwd = fwd.autodiff()
        info = bwd.grad_graph_info
        assert [ec.fwd_tensor for ec in info.expected_outputs] == [fwd.graph.inputs[0], fwd.args.w]
        vs = facts.init()
        finfo = fwd.bind(vs).call_with_info(x)
        dy = popxl.constant(np.ones(3, np.float32))
        binfo = bwd.call_with_info(dy, args=info.inputs_dict(finfo))
        grads = info.fwd_parent_ins_to_grad_parent_outs(finfo, binfo)
        sx = popxl.d2h_stream((3,), popxl.float32, "dx")
        sw = popxl.d2h_stream((3,), popxl.float32, "dw")
        ops.host_store(sx, grads[x])
        ops.host_store(sw, grads[vs.w])

        class Outer(addons.Module):
            def build(self, x):
                y, = self.call_module(HandGrad(), name="inner")(x)
                return y + x

        ofacts, ofwd = Outer().create_graph(x)
        assert list(ofwd.args.to_dict()) == ["inner.w"]
        assert len(ofwd.called_graphs_grad_info) == 1  # inner's hand-written gradient recorded
        obwd = addons.autodiff(ofwd)
        ov = ofacts.init()
        oinfo = ofwd.bind(ov).call_with_info(x)
        ob = obwd.call_with_info(dy, args=obwd.grad_graph_info.inputs_dict(oinfo))
        og = obwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(oinfo, ob)
        so = popxl.d2h_stream((3,), popxl.float32, "odx")
        ops.host_store(so, og[x])
    with popxl.Session(ir, "ipu_model") as s:
        r = s.run()
    np.testing.assert_allclose(r[sx], np.full(3, 3.0))
    np.testing.assert_allclose(r[sw], xd)
    np.testing.assert_allclose(r[so], np.full(3, 4.0))  # d(3x + x)/dx
