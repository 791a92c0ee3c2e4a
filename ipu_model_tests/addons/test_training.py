"""End to end: an MLP built from addons Modules, differentiated with
addons.autodiff, trained for a few steps with SGD (scaled_add_, inline as in
tutorial 1, and SGDOptimizerStep with momentum) and Adam (the tutorial 2
module and AdamOptimizerStep), compared step by step with the same model in
PyTorch (same initial weights, same batches)."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
from ipuxl import ops
from ipuxl.addons.optimizers import AdamOptimizerStep, SGDOptimizerStep

torch = pytest.importorskip("torch")

BATCH, IN, HID, OUT, STEPS = 6, 12, 16, 5, 4


class Linear(addons.Module):
    """The tutorials' Linear (normal(0, 0.2) weights, zero bias)."""

    def __init__(self, out_features: int):
        super().__init__()
        self.out_features = out_features

    def build(self, x):
        w = self.add_variable_input("weight", partial(np.random.normal, 0, 0.2,
                                                      (x.shape[-1], self.out_features)), x.dtype)
        b = self.add_variable_input("bias", partial(np.random.normal, 0, 0.1, (self.out_features,)),
                                    x.dtype)
        return x @ w + b


class Net(addons.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(HID)
        self.fc2 = Linear(HID)
        self.fc3 = Linear(OUT)

    def build(self, x):
        x = x.reshape((BATCH, IN))
        x = ops.gelu(self.fc1(x))
        x = ops.gelu(self.fc2(x))
        return self.fc3(x)


class TorchNet(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.fcs = torch.nn.ModuleList()
        for i in (1, 2, 3):
            w = weights[f"fc{i}.weight"]
            lin = torch.nn.Linear(w.shape[0], w.shape[1])
            with torch.no_grad():
                lin.weight.copy_(torch.tensor(w.T))
                lin.bias.copy_(torch.tensor(weights[f"fc{i}.bias"]))
            self.fcs.append(lin)

    def forward(self, x):
        x = x.reshape(BATCH, IN)
        x = torch.nn.functional.gelu(self.fcs[0](x), approximate="tanh")
        x = torch.nn.functional.gelu(self.fcs[1](x), approximate="tanh")
        return self.fcs[2](x)

    def named_weights(self):
        out = {}
        for i, lin in enumerate(self.fcs, 1):
            out[f"fc{i}.weight"] = lin.weight.detach().numpy().T
            out[f"fc{i}.bias"] = lin.bias.detach().numpy()
        return out


class TutorialAdam(addons.Module):
    """Tutorial 2's Adam module, verbatim in structure."""

    @popxl.in_sequence()
    def build(self, weight: popxl.TensorByRef, grad, *, lr, beta1=0.9, beta2=0.999, eps=1e-5,
              weight_decay=0.0, first_order_dtype=popxl.float32, bias_correction=True):
        first_order = self.add_variable_input("first_order", partial(np.zeros, weight.shape),
                                              first_order_dtype, by_ref=True)
        ops.var_updates.accumulate_moving_average_(first_order, grad, f=beta1)
        second_order = self.add_variable_input("second_order", partial(np.zeros, weight.shape),
                                               popxl.float32, by_ref=True)
        ops.var_updates.accumulate_moving_average_square_(second_order, grad, f=beta2)
        step = None
        if bias_correction:
            step = self.add_variable_input("step", partial(np.zeros, ()), popxl.float32, by_ref=True)
        dw = ops.var_updates.adam_updater(first_order, second_order, weight=weight,
                                          weight_decay=weight_decay, time_step=step, beta1=beta1,
                                          beta2=beta2, epsilon=eps)
        ops.scaled_add_(weight, dw, b=-lr)


def _build(optimiser: str, lr: float):
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((BATCH, 3, 4), popxl.float32, "x")
        y_s = popxl.h2d_stream((BATCH,), popxl.int32, "y")
        x = ops.host_load(x_s, "x")
        labels = ops.host_load(y_s, "y")
        facts, fwd = Net().create_graph(x)
        bwd = addons.autodiff(fwd)
        variables = facts.init()
        fwd_info = fwd.bind(variables).call_with_info(x)
        loss, dx = addons.ops.cross_entropy_with_grad(fwd_info.outputs[0], labels)
        loss_s = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
        ops.host_store(loss_s, loss)
        acts = bwd.grad_graph_info.inputs_dict(fwd_info)
        bwd_info = bwd.call_with_info(dx, args=acts)
        grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(fwd_info, bwd_info)
        if optimiser == "sgd_inline":
            for t in variables.tensors:
                ops.scaled_add_(t, grads[t], b=-lr)
        elif optimiser == "sgd_momentum":
            opt = SGDOptimizerStep(cache=True)
            for name, t in variables.named_tensors.items():
                ofacts, og = opt.create_graph(t, t.spec, lr=lr, momentum=0.9, weight_decay=0.01)
                og.bind(ofacts.init(prefix=f"opt.{name}")).call(t, grads[t])
        elif optimiser == "adam_tutorial":
            opt = TutorialAdam(cache=True)
            for name, t in variables.named_tensors.items():
                ofacts, og = opt.create_graph(t, t.spec, lr=lr, weight_decay=0.0)
                og.bind(ofacts.init()).call(t, grads[t])
        elif optimiser == "adamw_addons":
            opt = AdamOptimizerStep(cache=True)
            for name, t in variables.named_tensors.items():
                ofacts, og = opt.create_graph(t, t.spec, lr=lr, weight_decay=0.05,
                                              first_order_dtype=popxl.float32)
                og.bind(ofacts.init()).call(t, grads[t])
        else:
            raise AssertionError(optimiser)
    return ir, x_s, y_s, loss_s, variables


def _torch_opt(optimiser, params, lr):
    if optimiser == "sgd_inline":
        return torch.optim.SGD(params, lr=lr)
    if optimiser == "sgd_momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=0.01)
    if optimiser == "adam_tutorial":
        return torch.optim.Adam(params, lr=lr, eps=1e-5)
    return torch.optim.AdamW(params, lr=lr, eps=1e-5, weight_decay=0.05)


@pytest.mark.slow  # trains an MLP
@pytest.mark.parametrize("optimiser,lr", [("sgd_inline", 0.1), ("sgd_momentum", 0.05),
                                          ("adam_tutorial", 1e-2), ("adamw_addons", 1e-2)])
def test_mlp_training_matches_torch(optimiser, lr):
    np.random.seed(1234)
    ir, x_s, y_s, loss_s, variables = _build(optimiser, lr)
    rng = np.random.default_rng(7)
    batches = [(rng.normal(size=(BATCH, 3, 4)).astype(np.float32),
                rng.integers(0, OUT, size=(BATCH,)).astype(np.int32)) for _ in range(STEPS)]
    with popxl.Session(ir, "ipu_model") as sess:
        init = {k: v for k, v in zip(variables.named_tensors,
                                     sess.get_tensors_data(variables.named_tensors.values()).values())}
        tnet = TorchNet(init)
        topt = _torch_opt(optimiser, tnet.parameters(), lr)
        for step, (xb, yb) in enumerate(batches):
            loss = sess.run({x_s: xb, y_s: yb})[loss_s]
            topt.zero_grad()
            tloss = torch.nn.functional.cross_entropy(tnet(torch.tensor(xb)),
                                                      torch.tensor(yb, dtype=torch.long))
            tloss.backward()
            topt.step()
            np.testing.assert_allclose(loss, tloss.item(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"loss at step {step}")
            data = sess.get_tensors_data(variables.tensors)
            tw = tnet.named_weights()
            for key, t in variables.named_tensors.items():
                np.testing.assert_allclose(data[t], tw[key], rtol=1e-4, atol=1e-5,
                                           err_msg=f"{key} after step {step}")
    # training makes progress on these fixed batches
    assert loss < 10


def test_graph_cache_shares_optimiser_graphs():
    np.random.seed(0)
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones((3, 4), np.float32), name="a")
        b = popxl.variable(np.ones((3, 4), np.float32), name="b")
        c = popxl.variable(np.ones((4,), np.float32), name="c")
        opt = TutorialAdam(cache=True)
        _, ga = opt.create_graph(a, a.spec, lr=1e-3)
        _, gb = opt.create_graph(b, b.spec, lr=1e-3)
        _, gc = opt.create_graph(c, c.spec, lr=1e-3)
        _, gd = opt.create_graph(a, a.spec, lr=1e-2)
    assert ga.graph is gb.graph
    assert gc.graph is not ga.graph and gd.graph is not ga.graph
    assert ga.args.keys_flat() == ["first_order", "second_order", "step"]
    assert ga.args is not gb.args  # each call returns copies


def test_adam_state_after_one_step_matches_tutorial():
    """Tutorial 2's recorded state after one step (grad 0.1, float16 m):
    first_order 0.009995, second_order 9.9998715e-06, step 1."""
    ir = popxl.Ir()
    with ir.main_graph:
        var = popxl.variable(np.ones((2, 2)), popxl.float32)
        grad = popxl.variable(np.full((2, 2), 0.1), popxl.float32)
        facts, adam = TutorialAdam(cache=True).create_graph(var, var.spec, lr=1e-3,
                                                            first_order_dtype=popxl.float16)
        state = facts.init()
        adam.bind(state).call(var, grad)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        data = sess.get_tensors_data(state.tensors)
    np.testing.assert_allclose(data[state.first_order], 0.009995, rtol=1e-3)
    # The IPU computes (1 - beta2) in float32 (1 - 0.999f = 0.00099998713), the
    # simulator more precisely: 1e-5 vs the recorded 9.9998715e-06.
    np.testing.assert_allclose(data[state.second_order], 9.9998715e-06, rtol=2e-5)
    np.testing.assert_allclose(data[state.step], 1.0)


def test_layers_match_torch():
    from ipuxl.addons.layers import Embedding, LayerNorm, Linear as ALinear

    np.random.seed(3)
    rng = np.random.default_rng(3)
    xd = rng.normal(size=(4, 6)).astype(np.float32)
    idx = rng.integers(0, 20, size=(4, 3)).astype(np.int32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xd, name="x")
        i = popxl.variable(idx, name="i")
        lf, lg = ALinear(5).create_graph(x)
        nf, ng = LayerNorm().create_graph(x)
        ef, eg = Embedding(popxl.float32, 20, 7).create_graph(i)
        lv, nv, ev = lf.init("lin"), nf.init("ln"), ef.init("emb")
        out = {}
        for k, g, v, a in (("lin", lg, lv, x), ("ln", ng, nv, x), ("emb", eg, ev, i)):
            y, = g.bind(v).call(a)
            s = popxl.d2h_stream(y.shape, y.dtype, k)
            ops.host_store(s, y)
            out[k] = s
    with popxl.Session(ir, "ipu_model") as sess:
        data = sess.get_tensors_data([lv.weight, lv.bias, nv.weight, nv.bias, ev.weight])
        # non-trivial LayerNorm parameters
        wln = rng.normal(size=(6,)).astype(np.float32)
        bln = rng.normal(size=(6,)).astype(np.float32)
        sess.write_variables_data({nv.weight: wln, nv.bias: bln})
        res = sess.run()
    w = data[lv.weight]
    assert np.all(np.abs(w) <= 0.04 + 1e-7) and w.std() > 0.005  # truncated normal(0, 0.02)
    np.testing.assert_allclose(res[out["lin"]], xd @ w + data[lv.bias], rtol=1e-5, atol=1e-6)
    tln = torch.nn.functional.layer_norm(torch.tensor(xd), (6,), torch.tensor(wln), torch.tensor(bln))
    np.testing.assert_allclose(res[out["ln"]], tln.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res[out["emb"]], data[ev.weight][idx], rtol=0, atol=0)
    assert data[ev.weight].shape == (32, 7)  # vocab padded to a multiple of 16
