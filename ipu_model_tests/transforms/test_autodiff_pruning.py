"""The gradient graph receives only the forward values its ops read, as
PopART's ``doPrune`` leaves it: a rule's gradient for an input that needs
none, and the forward values only it read, are gone, and so are the forward
outputs stitched for them. What PopART's gradient op reads although our rule
does not (both operands and the output of ``Mul``/``Div``/``Pow``/``Fmod``,
``OpDef.stash_outputs``) stays, so the inputs are PopXL's. Gradients are
checked against NumPy."""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.transforms.autodiff import ExpectedConnectionType

F32 = popxl.float32


def _mlp(x, p0, b0, p1, b1):
    h = ops.relu(x @ p0 + b0)
    return h @ p1 + b1


def _mlp_graph(ir, batch=2):
    specs = [popxl.TensorSpec(s, F32) for s in
             [(batch, 8), (8, 4), (4,), (4, 3), (3,)]]
    return ir.create_graph(_mlp, *specs)


def _names(ts):
    return [t.name for t in ts]


def _every_input_is_read(graph, pinned=()):
    for t in graph.inputs:
        assert t._consumers or t in graph.outputs or t.name in pinned, \
            f"gradient graph input {t.name} is read by no op"


def test_two_layer_mlp_weight_gradients_take_only_the_activations():
    ir = popxl.Ir()
    with ir.main_graph:
        g = _mlp_graph(ir)
        info = transforms.autodiff(g, grads_required=g.inputs[1:])
    # p0 (first layer's weight) is not read: dp0 = x^T dh needs x only, and
    # dx is not required. relu's gradient reads its output, as PopART's
    # ReluGradOp, which the second layer's dp1 reads anyway.
    assert _names(info.graph.inputs) == ["Gradient___add__t1", "x", "p1", "relu_out"]
    assert [(ec.connection_type, ec.fwd_tensor.name) for ec in info.expected_inputs] == [
        (ExpectedConnectionType.FwdGrad, "add__t1"), (ExpectedConnectionType.Fwd, "x"),
        (ExpectedConnectionType.Fwd, "p1"), (ExpectedConnectionType.Fwd, "relu_out")]
    assert _names(g.outputs) == ["add__t1", "relu_out"]  # one stitched activation
    _every_input_is_read(info.graph)
    assert _names(info.graph.outputs) == ["Gradient___p0", "Gradient___b0",
                                          "Gradient___p1", "Gradient___b1"]


def test_requiring_the_data_gradient_brings_the_first_weight_back():
    ir = popxl.Ir()
    with ir.main_graph:
        g = _mlp_graph(ir)
        info = transforms.autodiff(g)
    assert _names(info.graph.inputs) == ["Gradient___add__t1", "x", "p0", "p1", "relu_out"]
    _every_input_is_read(info.graph)


def test_pruned_mlp_gradients_against_numpy():
    rng = np.random.default_rng(3)
    data = {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in
            [("x", (2, 8)), ("p0", (8, 4)), ("b0", (4,)), ("p1", (4, 3)), ("b1", (3,))]}
    seed = rng.normal(0, 1, (2, 3)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        g = _mlp_graph(ir)
        info = transforms.autodiff(g, grads_required=g.inputs[1:])
        vs = [popxl.variable(data[k], name=k) for k in ("x", "p0", "b0", "p1", "b1")]
        fwd = ops.call_with_info(g, *vs)
        grads = ops.call(info.graph, popxl.constant(seed), inputs_dict=info.inputs_dict(fwd))
        streams = []
        for t in grads:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
    x, p0, b0, p1 = (data[k].astype(np.float64) for k in ("x", "p0", "b0", "p1"))
    a = x @ p0 + b0
    h = np.maximum(a, 0)
    dh = seed @ p1.T
    da = dh * (a > 0)
    want = [x.T @ da, da.sum(0), h.T @ seed, seed.sum(0)]
    for s, w in zip(streams, want):
        np.testing.assert_allclose(out[s], w, rtol=1e-5, atol=1e-6)


def test_value_only_a_dead_gradient_read_is_unstitched():
    """``p @ sin(x)`` with only dx required: the matmul rule reads both
    operands, but dp is not needed, so sin(x) (stitched for it) is not an
    output of the forward graph nor an input of the gradient graph, at the
    forward graph and at its existing call site."""
    ir = popxl.Ir()
    with ir.main_graph:
        def fn(x, p):
            return p @ ops.sin(x)

        g = ir.create_graph(fn, popxl.TensorSpec((3, 2), F32), popxl.TensorSpec((4, 3), F32))
        xv = popxl.variable(np.ones((3, 2), np.float32), name="xv")
        pv = popxl.variable(np.ones((4, 3), np.float32), name="pv")
        site = ops.call_with_info(g, xv, pv)
        n_tensors = len(ir.main_graph.tensors)
        info = transforms.autodiff(g, grads_required=[g.inputs[0]])
    assert _names(info.graph.inputs) == ["Gradient___matmul", "x", "p"]
    assert len(g.outputs) == 1 and len(site.outputs) == 1
    assert len(ir.main_graph.tensors) == n_tensors
    _every_input_is_read(info.graph)


def test_mul_keeps_what_popart_grad_op_reads():
    """PopART's MulArg1GradOp reads both operands and the output, so PopXL's
    gradient graph of ``x * w`` takes all three even when only dw is
    required (our rule reads only x)."""
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda x, w: x * w, popxl.TensorSpec((3,), F32),
                            popxl.TensorSpec((3,), F32))
        info = transforms.autodiff(g, grads_required=[g.inputs[1]])
    assert _names(info.graph.inputs) == ["Gradient___mul", "x", "w", "mul"]
    assert _names(g.outputs) == ["mul"]


def test_called_graph_gradient_is_pruned_too():
    """The gradient graph of a graph called from the differentiated one (a
    layer ``relu(x @ w)``) takes only what its ops read: w only because the
    caller needs dx, and the caller's gradients against NumPy."""
    rng = np.random.default_rng(5)
    xd = rng.normal(0, 1, (2, 4)).astype(np.float32)
    w0 = rng.normal(0, 0.5, (4, 4)).astype(np.float32)
    w1 = rng.normal(0, 0.5, (4, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        spec_x, spec_w = popxl.TensorSpec((2, 4), F32), popxl.TensorSpec((4, 4), F32)
        layer = ir.create_graph(lambda x, w: ops.relu(x @ w), spec_x, spec_w)

        def net(x, a, b):
            (h,) = ops.call(layer, x, a)
            (y,) = ops.call(layer, h, b)
            return y

        g = ir.create_graph(net, spec_x, spec_w, spec_w)
        infos = transforms.autodiff(g, grads_required=g.inputs[1:], return_all_grad_graphs=True)
        info = infos[g]
        for gi in infos.values():
            _every_input_is_read(gi.graph)
        vs = [popxl.variable(d, name=n) for d, n in ((xd, "xd"), (w0, "w0"), (w1, "w1"))]
        fwd = ops.call_with_info(g, *vs)
        seed = np.ones((2, 4), np.float32)
        grads = ops.call(info.graph, popxl.constant(seed), inputs_dict=info.inputs_dict(fwd))
        streams = []
        for t in grads:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
    x, a, b = (v.astype(np.float64) for v in (xd, w0, w1))
    z1 = x @ a
    h = np.maximum(z1, 0)
    z2 = h @ b
    dz2 = seed * (z2 > 0)
    dh = dz2 @ b.T
    dz1 = dh * (z1 > 0)
    np.testing.assert_allclose(out[streams[0]], x.T @ dz1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[streams[1]], h.T @ dz2, rtol=1e-5, atol=1e-6)
