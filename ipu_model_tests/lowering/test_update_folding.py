"""Weight updates folded into the GEMM of their gradient.

``scaled_add_(W, lhs @ rhs, a, b)`` runs as one GEMM accumulating into W
(``W = a*W + b*lhs@rhs``), also when the product is an output of a gradient
graph called once: the update then moves into that graph after its last read
of W. These tests pin what must not change: every read of W sees the value
it would see unfolded. Oracle: NumPy in float64.
"""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

RNG = np.random.default_rng(17)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _variables(**arrays):
    """One variable per keyword, named after it (in the current graph)."""
    return [popxl.variable(v, name=k) for k, v in arrays.items()]


def _store(*tensors):
    streams = []
    for t in tensors:
        s = popxl.d2h_stream(t.shape, t.dtype)
        ops.host_store(s, t)
        streams.append(s)
    return streams


def _run(ir, streams, runs=1, variables=()):
    with popxl.Session(ir, "ipu_model") as sess:
        outs = [sess.run() for _ in range(runs)]
        text = sess.engine.describe(host=True)
        final = sess.get_tensors_data(list(variables)) if variables else {}
    return [[o[s] for s in streams] for o in outs], text, final


def _main_program(text):
    return text.split("Program:")[1]


def test_update_in_the_same_graph_is_one_gemm_and_reads_around_it_see_the_right_values():
    x, g, w0 = _f32(6, 5), _f32(6, 4), _f32(5, 4)
    ir = popxl.Ir()
    with ir.main_graph:
        xv, gv, w = _variables(x=x, g=g, w=w0)
        before = xv @ w                       # reads the old w
        dw = ops.transpose(xv) @ gv
        w_new = ops.scaled_add_(w, dw, a=0.9, b=-0.1)
        after = xv @ w_new                    # reads the updated w
        streams = _store(before, after)
    (r1, r2), text, final = _run(ir, streams, runs=2, variables=[w])
    w1 = 0.9 * w0.astype(np.float64) - 0.1 * (x.T @ g)
    w2 = 0.9 * w1 - 0.1 * (x.T @ g)
    np.testing.assert_allclose(r1[0], x @ w0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r1[1], x @ w1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r2[0], x @ w1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[w], w2, rtol=1e-5, atol=1e-5)
    assert "ScaledAdd" not in text
    assert text.count("Execute(MatMul") == 3


def test_operand_written_between_product_and_update_keeps_the_product_where_it_was():
    x, g, w0 = _f32(6, 5), _f32(6, 4), _f32(5, 4)
    ir = popxl.Ir()
    with ir.main_graph:
        xv, gv, w = _variables(x=x, g=g, w=w0)
        dw = ops.transpose(xv) @ gv
        ops.add_(gv, popxl.constant(np.float32(1.0)))  # the product's operand changes here
        ops.scaled_add_(w, dw, b=-0.5)
        streams = _store(w + 0.0)
    (r,), text, _ = _run(ir, streams)
    np.testing.assert_allclose(r[0], w0 - 0.5 * (x.T @ g), rtol=1e-5, atol=1e-5)
    assert "ScaledAddLhsInplace" in text  # not folded: the GEMM would read the new g


def _linear_training_step(n_in=7, n_out=3, batch=5, lr=0.05, with_bias=True):
    """One SGD step of y = x @ W (+ b), loss = sum(y * t): gradient graph
    from autodiff, updates in the main graph, as popxl_addons programs do."""
    x, t, w0, b0 = _f32(batch, n_in), _f32(batch, n_out), _f32(n_in, n_out), _f32(n_out)
    ir = popxl.Ir()
    with ir.main_graph:
        xv, tv = popxl.variable(x, name="x"), popxl.variable(t, name="t")
        w, b = popxl.variable(w0, name="w"), popxl.variable(b0, name="b")

        def fwd(xi, ti, wi, bi):
            y = xi @ wi
            if with_bias:
                y = y + bi
            return ops.sum(y * ti)

        g = ir.create_graph(fwd, xv, tv, w, b)
        grad = popxl.transforms.autodiff(g, grads_required=g.inputs)  # dx needs w
        info = ops.call_with_info(g, xv, tv, w, b)
        one = popxl.constant(np.float32(1.0))
        dx, dt, dw, db = ops.call(grad.graph, one, inputs_dict=grad.inputs_dict(info))
        ops.scaled_add_(w, dw, b=-lr)
        ops.scaled_add_(b, db, b=-lr)
        streams = _store(dx, info.outputs[0])
    return ir, streams, (x, t, w0, b0, lr), (w, b), grad.graph


def _reference_steps(x, t, w0, b0, lr, steps):
    w, b = w0.astype(np.float64), b0.astype(np.float64)
    out = []
    for _ in range(steps):
        dx = t @ w.T            # uses W before its update
        loss = np.sum((x @ w + b) * t)
        out.append((dx, loss))
        w = w - lr * (x.T @ t)
        b = b - lr * t.sum(0)
    return out, w, b


def test_update_moves_into_the_gradient_graph_after_its_last_read_of_the_weight():
    ir, streams, (x, t, w0, b0, lr), (w, b), bwd = _linear_training_step()
    runs, text, final = _run(ir, streams, runs=3, variables=[w, b])
    ref, w3, b3 = _reference_steps(x, t, w0, b0, lr, 3)
    for (dx, loss), (rdx, rloss) in zip(runs, ref):
        np.testing.assert_allclose(dx, rdx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss, rloss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[w], w3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[b], b3, rtol=1e-5, atol=1e-5)
    main = _main_program(text)
    assert main.count("ScaledAddLhsInplace") == 1  # the bias update stays: its gradient is a sum
    bwd_text = text.split(f"Function {bwd.name}:")[1].split("Function ")[0]
    assert bwd_text.count("Execute(MatMul") == 2  # dx, then dW accumulating into W


def test_product_computed_before_the_callee_reads_the_weight_is_applied_after_that_read():
    a, c, w0 = _f32(4, 6), _f32(4, 3), _f32(6, 3)
    ir = popxl.Ir()
    with ir.main_graph:
        av, cv, w = _variables(a=a, c=c, w=w0)

        def grads(p, q, wi):
            dw = ops.transpose(p) @ q            # the weight gradient comes first ...
            dx = q @ ops.transpose(wi)           # ... then the weight is read
            return dw, dx + 0.0

        g = ir.create_graph(grads, av, cv, w)
        dw, dx = ops.call(g, av, cv, w)
        ops.scaled_add_(w, dw, b=-1.0)
        streams = _store(dx)
    runs, text, final = _run(ir, streams, runs=2, variables=[w])
    w1 = w0.astype(np.float64) - a.T @ c
    np.testing.assert_allclose(runs[0][0], c @ w0.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(runs[1][0], c @ w1.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[w], w1 - a.T @ c, rtol=1e-5, atol=1e-5)
    assert "ScaledAdd" not in text


def test_update_of_a_weight_the_gradient_graph_does_not_read_adds_an_input():
    a, c, w0 = _f32(4, 6), _f32(4, 3), _f32(6, 3)
    ir = popxl.Ir()
    with ir.main_graph:
        av, cv, w = _variables(a=a, c=c, w=w0)
        g = ir.create_graph(lambda p, q: ops.transpose(p) @ q, av, cv)
        (prod,) = ops.call(g, av, cv)
        ops.scaled_add_(w, prod, a=0.5, b=2.0)
        streams = _store(w + 0.0)
    runs, text, final = _run(ir, streams, runs=2, variables=[w])
    w1 = 0.5 * w0.astype(np.float64) + 2.0 * (a.T @ c)
    np.testing.assert_allclose(runs[0][0], w1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[w], 0.5 * w1 + 2.0 * (a.T @ c), rtol=1e-5, atol=1e-5)
    assert "ScaledAdd" not in text
    assert "w__updated_in_place" in text or "Bind(" in text


@pytest.mark.parametrize("case", ["read_between", "two_call_sites", "tensor_scale",
                                  "grad_also_read"])
def test_updates_that_cannot_move_stay_where_they_are(case):
    a, c, w0 = _f32(4, 6), _f32(4, 3), _f32(6, 3)
    ir = popxl.Ir()
    with ir.main_graph:
        av, cv, w = _variables(a=a, c=c, w=w0)
        lr = popxl.variable(np.float32(-0.25), name="lr")
        g = ir.create_graph(lambda p, q: ops.transpose(p) @ q, av, cv)
        (prod,) = ops.call(g, av, cv)
        extra = []
        if case == "read_between":
            extra.append(w * 1.0)  # must see W before the update
        if case == "two_call_sites":
            (prod2,) = ops.call(g, av, cv)
            extra.append(prod2)
        if case == "grad_also_read":
            extra.append(prod)
        ops.scaled_add_(w, prod, b=lr if case == "tensor_scale" else -0.25)
        streams = _store(w + 0.0, *extra)
    (r,), text, _ = _run(ir, streams)
    ref = a.astype(np.float64).T @ c
    np.testing.assert_allclose(r[0], w0 - 0.25 * ref, rtol=1e-5, atol=1e-5)
    if case == "read_between":
        np.testing.assert_allclose(r[1], w0, rtol=1e-6)
    if case in ("two_call_sites", "grad_also_read"):
        np.testing.assert_allclose(r[1], ref, rtol=1e-5, atol=1e-5)
    assert "ScaledAddLhsInplace" in _main_program(text)


def test_no_fusion_switch_keeps_the_unfolded_program(monkeypatch):
    monkeypatch.setenv("IPUXL_HOST_PASSES", "none")
    ir, streams, (x, t, w0, b0, lr), (w, b), _ = _linear_training_step()
    runs, text, final = _run(ir, streams, runs=2, variables=[w])
    _, w2, _ = _reference_steps(x, t, w0, b0, lr, 2)
    np.testing.assert_allclose(final[w], w2, rtol=1e-5, atol=1e-5)
    assert _main_program(text).count("ScaledAddLhsInplace") == 2
