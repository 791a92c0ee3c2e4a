"""Gradients of repeat and conditional (PopART's LoopGradOp / IfGradOp)
against PyTorch autograd in float64, and finite differences."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from grad_harness import default_seeds, grads_of

RNG = np.random.default_rng(7)


def _torch_grads(fn, arrays, outs):
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    ys = fn(*ts)
    ys = ys if isinstance(ys, (tuple, list)) else (ys,)
    seeds = default_seeds([(o.shape, np.float32) for o in outs])
    sum(((y * torch.tensor(s.astype(np.float64))).sum() for y, s in zip(ys, seeds))).backward()
    return [y.detach().numpy() for y in ys], [
        t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in ts]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_repeat_gradient_matches_torch(n):
    c0 = RNG.standard_normal((2, 3)).astype(np.float32)
    w0 = (RNG.standard_normal((3, 3)) * 0.5).astype(np.float32)
    b0 = RNG.standard_normal(3).astype(np.float32)

    def fn(c, w, b):
        g = popxl.gcg().ir.create_graph(lambda s, w, b: ops.tanh(s @ w) + b, c, w, b)
        return ops.repeat(g, n, c, w, b)[0]

    def ref(c, w, b):
        for _ in range(n):
            c = torch.tanh(c @ w) + b
        return c

    outs, grads = grads_of(fn, c0, w0, b0)
    want_y, want_g = _torch_grads(ref, [c0, w0, b0], outs)
    np.testing.assert_allclose(outs[0], want_y[0], rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_g):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_repeat_gradient_with_two_carried_values_and_an_integer_counter():
    a0 = RNG.standard_normal(4).astype(np.float32)
    b0 = RNG.standard_normal(4).astype(np.float32)
    k0 = np.int32(0)

    def fn(a, b, k):
        def body(a, b, k, w):
            return a * w + ops.sin(b), b - a * 0.5, k + popxl.constant(np.int32(1))
        g = popxl.gcg().ir.create_graph(body, a, b, k, a)
        a_out, b_out, _ = ops.repeat(g, 3, a, b, k, a)  # the first a is carried, the last not
        return a_out, b_out

    def ref(a, b):
        w = a
        for _ in range(3):
            a, b = a * w + torch.sin(b), b - a * 0.5
        return a, b

    outs, grads = grads_of(fn, a0, b0, k0)
    assert grads[2] is None  # integers carry no gradient
    want_y, want_g = _torch_grads(ref, [a0, b0], outs)
    for got, want in zip(outs, want_y):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads[:2], want_g):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_repeat_gradient_by_finite_differences():
    from ipuxl.testing import check_grads

    w0 = (RNG.standard_normal((3, 3)) * 0.3).astype(np.float64)
    c0 = RNG.standard_normal((3,)).astype(np.float64)

    def fn(c, w):
        g = popxl.gcg().ir.create_graph(lambda s, w: ops.sin(s @ w), c, w)
        return ops.repeat(g, 3, c, w)[0]

    check_grads(fn, [c0, w0])
    check_grads(fn, [c0, w0], order=2)  # the gradient graph differentiates again


@pytest.mark.parametrize("flag", [True, False])
def test_conditional_gradient_matches_torch(flag):
    x0 = RNG.standard_normal((2, 3)).astype(np.float32)
    w0 = RNG.standard_normal((2, 3)).astype(np.float32)

    def fn(x, w):
        ir = popxl.gcg().ir
        then_g = ir.create_graph(lambda a, b: ops.sin(a) * b, x, w)
        else_g = ir.create_graph(lambda a: ops.exp(a) * 2.0, x)
        c = popxl.constant(np.bool_(flag))
        return ops.conditional(c, then_g, else_g, then_inputs=[x, w], else_inputs=[x])[0]

    def ref(x, w):
        return torch.sin(x) * w if flag else torch.exp(x) * 2.0

    outs, grads = grads_of(fn, x0, w0)
    want_y, want_g = _torch_grads(ref, [x0, w0], outs)
    np.testing.assert_allclose(outs[0], want_y[0], rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_g):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conditional_inside_a_repeat_differentiates():
    x0 = RNG.standard_normal(3).astype(np.float32)

    def fn(x):
        ir = popxl.gcg().ir

        def body(s):
            pos = ops.greater(ops.sum(s), popxl.constant(np.float32(0)))
            t = ir.create_graph(lambda a: a * 0.5, s)
            e = ir.create_graph(lambda a: a * a, s)
            return ops.conditional(pos, t, e, then_inputs=[s], else_inputs=[s])[0]

        g = ir.create_graph(body, x)
        return ops.repeat(g, 3, x)[0]

    def ref(x):
        for _ in range(3):
            x = x * 0.5 if float(x.sum()) > 0 else x * x
        return x

    outs, grads = grads_of(fn, x0)
    want_y, want_g = _torch_grads(ref, [x0], outs)
    np.testing.assert_allclose(outs[0], want_y[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[0], want_g[0], rtol=1e-4, atol=1e-5)
