"""A layer's input gradient ``dX = G @ W^T`` fused with its folded update
``W = beta*W + alpha * X^T @ G`` (``MatMulInputGradUpdate``): one pass over W
at small batches. The input gradient must see the old W, the update must be
exact to float32 rounding, and anything reading dX or writing the operands
between the two keeps them apart. Oracles: NumPy float64 and PyTorch
float64 autograd."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl._core_loader import core

RNG = np.random.default_rng(23)


@pytest.fixture
def fuse(monkeypatch):
    """Where the pass fuses: "always" (within the kernel's batch range) or
    "never", instead of the core's measured per-level rules, so the kernel
    is checked at every shape on every machine."""
    def set_(mode):
        monkeypatch.setenv("IPUXL_FUSED_UPDATE", mode)
    return set_


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _same_graph_program(b, m, n, read_dx_between=False):
    """dX = G @ W^T, then scaled_add_(W, X^T @ G, a=0.9, b=-0.1), in one graph."""
    x, g, w0 = _f32(b, m), _f32(b, n), _f32(m, n)
    ir = popxl.Ir()
    with ir.main_graph:
        xv = popxl.variable(x, name="x")
        gv = popxl.variable(g, name="g")
        w = popxl.variable(w0, name="w")
        dx = gv @ ops.transpose(w)
        between = dx * 2.0 if read_dx_between else None
        ops.scaled_add_(w, ops.transpose(xv) @ gv, a=0.9, b=-0.1)
        outs = [dx] + ([between] if between is not None else [])
        streams = []
        for t in outs:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    return ir, streams, w, (x, g, w0)


@pytest.mark.parametrize("b,m,n", [(8, 96, 80), (5, 33, 72), (1, 64, 64), (16, 40, 130),
                                   (3, 20, 101), (8, 24, 512)])
def test_fused_pass_over_w_matches_numpy(b, m, n, fuse):
    fuse("always")
    ir, (s_dx,), w, (x, g, w0) = _same_graph_program(b, m, n)
    with popxl.Session(ir, "ipu_model") as sess:
        out = [sess.run()[s_dx] for _ in range(2)]
        text = sess.engine.describe(host=True)
        w_final = sess.get_tensor_data(w)
    assert "MatMulInputGradUpdate" in text
    x64, g64, w64 = (a.astype(np.float64) for a in (x, g, w0))
    w1 = 0.9 * w64 - 0.1 * x64.T @ g64
    w2 = 0.9 * w1 - 0.1 * x64.T @ g64
    np.testing.assert_allclose(out[0], g64 @ w64.T, rtol=1e-5, atol=1e-5)  # the old W
    np.testing.assert_allclose(out[1], g64 @ w1.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w_final, w2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b,n,mode,why", [(17, 80, "always", "batch above the kernel's 16"),
                                          (8, 80, "never", "the rules say no")])
def test_outside_the_fused_range_the_two_gemms_stay(b, n, mode, why, fuse):
    fuse(mode)
    ir, (s_dx,), w, (x, g, w0) = _same_graph_program(b, 48, n)
    with popxl.Session(ir, "ipu_model") as sess:
        dx = sess.run()[s_dx]
        text = sess.engine.describe(host=True)
        w_final = sess.get_tensor_data(w)
    assert "MatMulInputGradUpdate" not in text, why
    np.testing.assert_allclose(dx, g.astype(np.float64) @ w0.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w_final, 0.9 * w0 - 0.1 * (x.T.astype(np.float64) @ g),
                               rtol=1e-5, atol=1e-5)


def test_a_read_of_the_input_gradient_in_between_keeps_them_apart(fuse):
    fuse("always")
    ir, (s_dx, s_twice), w, (x, g, w0) = _same_graph_program(8, 64, 64, read_dx_between=True)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
        text = sess.engine.describe(host=True)
    assert "MatMulInputGradUpdate" not in text
    want = g.astype(np.float64) @ w0.T
    np.testing.assert_allclose(r[s_dx], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r[s_twice], 2 * want, rtol=1e-5, atol=1e-5)


def test_addons_training_step_fuses_hidden_layers_and_matches_torch(fuse):
    fuse("always")
    torch = pytest.importorskip("torch")
    layers, batch, lr, steps = (96, 80, 72, 64, 10), 8, 0.05, 3
    weights = [(0.1 * _f32(i, o), 0.1 * _f32(o)) for i, o in zip(layers[:-1], layers[1:])]
    images = [_f32(batch, 96) for _ in range(steps)]
    labels = [RNG.integers(0, 10, batch).astype(np.int32) for _ in range(steps)]

    class Linear(addons.Module):
        def __init__(self, w, b):
            super().__init__()
            self.w, self.b = w, b

        def build(self, x):
            w = self.add_variable_input("weight", lambda: self.w.copy(), x.dtype)
            b = self.add_variable_input("bias", lambda: self.b.copy(), x.dtype)
            return x @ w + b

    class Net(addons.Module):
        def __init__(self):
            super().__init__()
            self.fcs = [Linear(w, b) for w, b in weights]
            for i, fc in enumerate(self.fcs):
                setattr(self, f"fc{i}", fc)

        def build(self, x):
            for fc in self.fcs[:-1]:
                x = ops.gelu(fc(x))
            return self.fcs[-1](x)

    ir = popxl.Ir()
    with ir.main_graph:
        s_img = popxl.h2d_stream((batch, 96), popxl.float32, "img")
        s_lab = popxl.h2d_stream((batch,), popxl.int32, "lab")
        img, lab = ops.host_load(s_img), ops.host_load(s_lab)
        facts, fwd = Net().create_graph(img)
        bwd = addons.autodiff(fwd)
        variables = facts.init()
        info = fwd.bind(variables).call_with_info(img)
        loss, dlogits = addons.ops.cross_entropy_with_grad(info.outputs[0], lab)
        s_loss = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
        ops.host_store(s_loss, loss)
        bwd_info = bwd.call_with_info(dlogits, args=bwd.grad_graph_info.inputs_dict(info))
        grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(info, bwd_info)
        for v in variables.tensors:
            ops.scaled_add_(v, grads[v], b=-lr)
    named = variables.to_dict()
    with popxl.Session(ir, "ipu_model") as sess:
        losses = [float(sess.run({s_img: i, s_lab: y})[s_loss]) for i, y in zip(images, labels)]
        text = sess.engine.describe(host=True)
        got = sess.get_tensors_data([named[f"fc{i}.weight"] for i in range(4)])
    # Layers 2 to 4 (W 80x72, 72x64 and 64x10); layer 1's input gradient
    # is not needed.
    assert text.count("MatMulInputGradUpdate") == 3

    params = [(torch.tensor(w, dtype=torch.float64, requires_grad=True),
               torch.tensor(b, dtype=torch.float64, requires_grad=True)) for w, b in weights]
    want_losses = []
    for x, y in zip(images, labels):
        h = torch.tensor(x, dtype=torch.float64)
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = torch.nn.functional.gelu(h, approximate="tanh")
        loss = torch.nn.functional.cross_entropy(h, torch.tensor(y, dtype=torch.int64))
        want_losses.append(float(loss.detach()))
        loss.backward()
        with torch.no_grad():
            for w, b in params:
                w -= lr * w.grad
                b -= lr * b.grad
                w.grad, b.grad = None, None
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for i, (w, _) in enumerate(params):
        np.testing.assert_allclose(got[named[f"fc{i}.weight"]], w.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def _raw_program(g_shape, w_shape, x_shape, dx_shape, alias=True):
    d = core.ProgramDesc()
    gi = d.add_graph("main")
    g = d.add_tensor(gi, "g", 10, list(g_shape), 1)
    w = d.add_tensor(gi, "w", 10, list(w_shape), 1)
    x = d.add_tensor(gi, "x", 10, list(x_shape), 1)
    dx = d.add_tensor(gi, "dx", 10, list(dx_shape), 0)
    wo = d.add_tensor(gi, "w_out", 10, list(w_shape), 0)
    d.add_op(gi, "MatMulInputGradUpdate", "fused", [g, w, x], [dx, wo],
             {"alpha": -0.1, "beta": 1.0, "modified": [1]}, [], [(1, 1)] if alias else [])
    d.set_graph_io(gi, [], [])
    return d, gi


@pytest.mark.parametrize("shapes,alias,message", [
    (((8, 64), (32, 64), (8, 32), (8, 32)), False, "must alias the weight"),
    (((8, 64), (32, 64), (8, 31), (8, 32)), True, "x"),
    (((8, 64), (32, 64), (8, 32), (8, 33)), True, "dx"),
    (((17, 64), (32, 64), (17, 32), (17, 32)), True, "outside \\[1, 16\\]"),
])
def test_kernel_rejects_bad_operands_without_crashing(shapes, alias, message):
    d, gi = _raw_program(*shapes, alias=alias)
    with pytest.raises(ValueError, match=message):
        core.Engine(d, gi)


@pytest.mark.parametrize("b,m,n", [(8, 512, 512), (8, 512, 10), (4, 96, 80), (16, 784, 512),
                                   (1, 64, 64), (12, 40, 130)])
def test_the_pass_follows_the_cores_rules(b, m, n, monkeypatch):
    monkeypatch.delenv("IPUXL_FUSED_UPDATE", raising=False)
    ir, (s_dx,), w, _ = _same_graph_program(b, m, n)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        fused = "MatMulInputGradUpdate" in sess.engine.describe(host=True)
    assert fused == core.prefer_fused_input_grad_update(b, m, n)


def test_fusion_setting_is_checked(monkeypatch):
    assert not core.prefer_fused_input_grad_update(17, 64, 64)  # outside the kernel's range
    monkeypatch.setenv("IPUXL_FUSED_UPDATE", "sometimes")
    ir, _, _, _ = _same_graph_program(8, 64, 64)
    with pytest.raises(ValueError, match="IPUXL_FUSED_UPDATE=sometimes is not one of auto, "
                                         "always, never"):
        popxl.Session(ir, "ipu_model")
