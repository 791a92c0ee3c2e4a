"""conv, conv_transpose, average_pool and max_pool against PyTorch, in value
and gradient (first order against autograd, second order of conv against
autograd's double backward)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import ipuxl as popxl  # noqa: E402
import ipuxl.ops as ops  # noqa: E402
from grad_harness import grads_of, second_order_of  # noqa: E402
from harness import run_fn  # noqa: E402

RNG = np.random.default_rng(7)


def _seed(shape):
    return np.random.default_rng(1234).standard_normal(shape).astype(np.float32)


def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    y = fn(*ts)
    (y * torch.tensor(_seed(tuple(y.shape)).astype(np.float64))).sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _tpad(x, pads):
    n = len(pads) // 2
    tp = []
    for i in reversed(range(n)):
        tp += [pads[i], pads[n + i]]
    return F.pad(x, tp)


CONV_CASES = [
    # x shape, w shape, stride, pads, dilation, groups
    ((2, 3, 9), (4, 3, 3), (1,), (0, 0), (1,), 1),
    ((2, 4, 11), (6, 2, 3), (2,), (1, 2), (2,), 2),
    ((2, 3, 8, 7), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 10, 9), (6, 2, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),
    ((3, 6, 5, 5), (6, 1, 3, 3), (1, 2), (0, 1, 1, 0), (1, 1), 6),
    ((2, 8, 6, 6), (4, 8, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), (1, 2, 1), (1, 0, 1, 0, 1, 0), (2, 1, 1), 1),
    # enough images for the batch-parallel path (threads over images)
    ((9, 4, 7, 6), (6, 2, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 2),
    ((8, 6, 5, 5), (4, 6, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    # a short reduction (C/groups * kernel <= 64): the direct forward kernel
    ((2, 1, 9, 12), (5, 1, 3, 3), (2, 1), (1, 1, 1, 1), (1, 2), 1),
    ((3, 2, 20), (7, 2, 5), (1,), (2, 2), (1,), 1),
    ((2, 4, 6, 10), (8, 2, 2, 3), (1, 1), (0, 1, 0, 1), (1, 1), 2),
    ((2, 3, 11, 21), (6, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((2, 2, 9, 30), (12, 2, 2, 3), (1, 3), (0, 1, 1, 2), (1, 2), 1),
    # the direct kernel's tails at every level (16 lanes x up to 3 vectors and
    # 8 channels at AVX-512, 8 x 3 and 4 at AVX2, 4 x 2 and 4 below): MNIST's
    # layer, output widths ending mid-vector and mid-strip, channel counts
    # that are not a multiple of the block, strides 2 and 3 with dilation
    ((2, 1, 28, 28), (32, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),
    ((2, 3, 23, 71), (13, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 9, 50), (10, 2, 3, 3), (1, 1), (0, 2, 1, 0), (2, 3), 2),
    ((2, 2, 7, 40), (7, 2, 1, 5), (1, 3), (0, 0, 3, 1), (1, 2), 1),
    ((1, 1, 5, 103), (9, 1, 2, 7), (1, 1), (1, 3, 0, 2), (1, 1), 1),
    # stride 2 at both column phases' edges: no / 2 columns of begin padding,
    # more at the end, odd and even widths, dilation (the de-interleaving copy)
    ((2, 3, 13, 33), (8, 3, 3, 3), (2, 2), (0, 2, 1, 3), (1, 1), 1),
    ((1, 2, 10, 34), (5, 2, 3, 4), (2, 2), (2, 0, 0, 1), (1, 2), 1),
    # output rows in several L2-sized blocks: one large image, and per image
    ((1, 64, 40, 40), (8, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((4, 32, 30, 30), (4, 32, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    # unit strides and 16+ channels: the tap-decomposed products (all three ops)
    ((5, 16, 9, 11), (16, 16, 3, 2), (1, 1), (1, 0, 1, 1), (2, 1), 1),
    ((2, 32, 8, 8), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    ((4, 16, 30), (16, 16, 5), (1,), (2, 2), (1,), 1),
    ((1, 16, 7, 6), (24, 16, 3, 3), (1, 1), (0, 2, 1, 0), (1, 1), 1),
    # long reductions on the direct kernels (forward at any stride; data
    # gradient as a forward convolution of dy with flipped weights and weight
    # gradient over padded rows, both at unit strides): widths ending
    # mid-vector, channel counts not a multiple of the block, one image (the
    # channel blocks split over threads), dilation, groups, no padding, a
    # 5-wide kernel row (tap blocks of 3 + 2), 1-D
    ((2, 24, 9, 37), (20, 24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 20, 8, 40), (40, 20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 16, 11, 19), (24, 16, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 32, 12, 20), (16, 32, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    ((2, 32, 10, 17), (32, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),
    ((2, 16, 10, 21), (8, 16, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 12, 9, 23), (9, 12, 3, 5), (1, 1), (1, 2, 0, 1), (1, 1), 1),
    ((2, 16, 45), (12, 16, 5), (1,), (2, 1), (2,), 1),
    # widths whose form (flat or strips per row, conv.cpp flat_pays) turns
    # on the level's strips: 14 (one vector of 8 chains at AVX-512, 2 of 8
    # at AVX2: flat), 56 (3 + 2 + 2 vectors at AVX2: flat), 112 (strips)
    ((1, 16, 5, 14), (12, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 3, 56), (8, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 2, 112), (8, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    # widths below a vector: the weight gradient's direct kernel
    ((3, 20, 6, 5), (18, 10, 3, 3), (1, 1), (2, 0, 1, 1), (1, 1), 2),
    ((2, 3, 7, 3), (5, 3, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),
]


def _torch_conv(x, w, stride, pads, dil, groups):
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
    return conv(_tpad(x, pads), w, stride=stride, dilation=dil, groups=groups)


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups", CONV_CASES)
def test_conv_value_and_grad(xs, ws, stride, pads, dil, groups):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    fn = lambda a, b: ops.conv(a, b, stride, pads, dil, groups)  # noqa: E731
    outs, grads = grads_of(fn, x, w)
    want, (dx, dw) = _torch_grads(lambda a, b: _torch_conv(a, b, stride, pads, dil, groups), x, w)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[1], dw, rtol=1e-4, atol=2e-4)


def _check_same_bits_at_any_thread_count(x, w, stride, pads, dil, groups):
    """Runs conv's value and both gradients at 1, 2 and 3 threads, checks
    that they are the same bits and agree with PyTorch's float64 result, and
    returns them (those of 1 thread)."""
    from ipuxl import _core as core
    fn = lambda a, b: ops.conv(a, b, stride, pads, dil, groups)  # noqa: E731
    n0 = core.num_threads()
    results = []
    try:
        for t in (1, 2, 3):
            core.set_num_threads(t)
            outs, grads = grads_of(fn, x, w)
            results.append([outs[0], grads[0], grads[1]])
    finally:
        core.set_num_threads(n0)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
    want, (dx, dw) = _torch_grads(lambda a, b: _torch_conv(a, b, stride, pads, dil, groups), x, w)
    np.testing.assert_allclose(results[0][0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(results[0][1], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(results[0][2], dw, rtol=1e-4, atol=5e-4)
    return results[0]


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups", [
    ((8, 32, 14, 28), (64, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),   # direct, all three
    ((1, 24, 9, 37), (20, 24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),    # one image
    ((3, 8, 9, 37), (12, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),      # direct weight grad
    ((6, 1, 28, 28), (32, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),     # MNIST's layer
    ((4, 3, 23, 45), (16, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),     # short, strided
    ((2, 16, 20, 40), (40, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),   # chunks split images
    ((5, 16, 9, 11), (16, 16, 3, 2), (1, 1), (1, 0, 1, 1), (2, 1), 1),    # taps, narrow
    ((9, 4, 7, 6), (6, 2, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 2),        # batched
])
def test_conv_bit_identical_at_any_thread_count(xs, ws, stride, pads, dil, groups):
    """Value and both gradients are the same bits at 1, 2 and 3 threads:
    the chunking of every path depends on the shapes only."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    _check_same_bits_at_any_thread_count(x, w, stride, pads, dil, groups)


def _conv_grads_and_torch(x, w, pads):
    """ipuxl's conv value and gradients at unit strides, and PyTorch's
    float64 ones: (outs, grads, want, (dx, dw))."""
    fn = lambda a, b: ops.conv(a, b, (1, 1), pads)  # noqa: E731
    outs, grads = grads_of(fn, x, w)
    want, dxw = _torch_grads(lambda a, b: _torch_conv(a, b, (1, 1), pads, (1, 1), 1), x, w)
    return outs, grads, want, dxw


@pytest.mark.parametrize("cin", [16, 6])  # the tap products; the direct kernel
def test_conv_weight_grad_with_infinite_input(cin):
    """An infinity in x reaches only the weight-gradient taps that read it:
    the padded-row forms (whose wasted positions would multiply it by zero)
    decline and the unfold + GEMM form runs; the pattern of inf / NaN /
    finite values matches PyTorch's float64 result."""
    x = RNG.standard_normal((2, cin, 6, 20)).astype(np.float32)
    x[0, 3, 2, 0] = np.inf   # column 0: read by tap kw=0 only (no padding)
    x[1, 5, 4, 19] = -np.inf  # last column: read by tap kw=2 only
    w = RNG.standard_normal((8, cin, 3, 3)).astype(np.float32)
    _, grads, _, (_, dw) = _conv_grads_and_torch(x, w, (0, 0, 0, 0))
    assert np.isfinite(dw[:, :, :, 1]).all() and not np.isfinite(dw).all()
    np.testing.assert_array_equal(np.isfinite(grads[1]), np.isfinite(dw))
    np.testing.assert_array_equal(np.isnan(grads[1]), np.isnan(dw))
    fin = np.isfinite(dw)
    np.testing.assert_allclose(grads[1][fin], dw[fin], rtol=1e-4, atol=2e-4)


def test_conv_data_grad_with_infinite_weight():
    """An infinite weight reaches only the input positions its tap touches:
    the direct data gradient (dy padded with zeros) declines and another form
    runs; inf / NaN / finite pattern and values as PyTorch's float64 result."""
    x = RNG.standard_normal((2, 16, 7, 19)).astype(np.float32)
    w = RNG.standard_normal((8, 16, 3, 3)).astype(np.float32)
    w[2, 4, 0, 0] = np.inf
    outs, grads, want, (dx, dw) = _conv_grads_and_torch(x, w, (1, 1, 1, 1))
    assert np.isfinite(dx[:, 4, -1, :]).all() and not np.isfinite(dx).all()
    np.testing.assert_array_equal(np.isfinite(grads[0]), np.isfinite(dx))
    fin = np.isfinite(dx)
    np.testing.assert_allclose(grads[0][fin], dx[fin], rtol=1e-4, atol=1e-4)


def test_conv_second_order():
    x = RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    args = ((2, 1), (1, 1, 0, 1), (1, 1), 2)
    v = [RNG.standard_normal(x.shape).astype(np.float32),
         RNG.standard_normal(w.shape).astype(np.float32)]
    got, _, _ = second_order_of(lambda a, b: ops.conv(a, b, *args), x, w, v=v)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    wt = torch.tensor(w.astype(np.float64), requires_grad=True)
    y = _torch_conv(xt, wt, *args)
    loss = (y * torch.tensor(_seed(tuple(y.shape)).astype(np.float64))).sum()
    gx, gw = torch.autograd.grad(loss, [xt, wt], create_graph=True)
    s = (gx * torch.tensor(v[0].astype(np.float64))).sum() + \
        (gw * torch.tensor(v[1].astype(np.float64))).sum()
    hx, hw = torch.autograd.grad(s, [xt, wt])
    np.testing.assert_allclose(got[0], hx.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], hw.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups", [
    ((2, 1, 28, 28), (32, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),      # direct
    ((2, 3, 15, 37), (13, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),      # direct, strided
    ((2, 32, 9, 13), (24, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 2), 2),     # taps
    ((2, 16, 10, 11), (8, 16, 3, 3), (2, 1), (1, 0, 1, 2), (1, 1), 1),    # unfold + GEMM
    ((2, 24, 9, 37), (20, 24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),     # direct, all three
])
def test_conv_float16_value_and_grad(xs, ws, stride, pads, dil, groups):
    """float16 operands compute in float32 and round once: values and both
    gradients within a few float16 ulps of float64 on the same inputs."""
    x = RNG.standard_normal(xs).astype(np.float16)
    w = (RNG.standard_normal(ws) * 0.3).astype(np.float16)
    fn = lambda a, b: ops.conv(a, b, stride, pads, dil, groups)  # noqa: E731
    outs, grads = grads_of(fn, x, w)
    assert outs[0].dtype == np.float16 and grads[0].dtype == np.float16
    want, (dx, dw) = _torch_grads(lambda a, b: _torch_conv(a, b, stride, pads, dil, groups), x, w)
    # _torch_grads seeds with float32 normals; the harness seeds float16 ones
    seed = _seed(want.shape).astype(np.float16).astype(np.float64)
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w)]
    (_torch_conv(*ts, stride, pads, dil, groups) * torch.tensor(seed)).sum().backward()
    dx, dw = ts[0].grad.numpy(), ts[1].grad.numpy()
    for got, ref in ((outs[0], want), (grads[0], dx), (grads[1], dw)):
        scale = float(np.max(np.abs(ref)))
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-3, atol=2e-3 * scale)


def test_conv_float16_and_pad_types():
    x = RNG.random((2, 3, 12, 10)).astype(np.float16)
    w = RNG.random((4, 3, 3, 2)).astype(np.float16)
    want = F.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32),
                    padding="same").numpy()
    got = run_fn(lambda a, b: ops.conv(a, b, pad_type="same_upper", partials_types=["half"],
                                       available_memory_proportions=[0.5],
                                       enable_conv_dithering=[1]), x, w)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    got = run_fn(lambda a, b: ops.conv(a.astype if False else a, b, (3, 2), pad_type="valid"),
                 x.astype(np.float32), w.astype(np.float32))
    want = F.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32),
                    stride=(3, 2)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups,out_pad", [
    ((2, 4, 5, 6), (4, 3, 3, 3), (2, 2), (1, 0, 1, 0), (1, 1), 1, (1, 0)),
    ((1, 4, 7), (4, 2, 4), (3,), (1, 1), (1,), 2, (2,)),
    ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), (1, 2, 1), (0, 0, 0, 0, 0, 0), (1, 1, 2), 1, (0, 1, 0)),
    ((7, 4, 5, 4), (4, 2, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 2, (1, 0)),
])
def test_conv_transpose_value_and_grad(xs, ws, stride, pads, dil, groups, out_pad):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    n = len(stride)
    assert pads[:n] == pads[n:]  # torch takes symmetric padding
    tconv = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}[len(xs)]
    fn = lambda a, b: ops.conv_transpose(a, b, stride, pads, dil, groups,  # noqa: E731
                                         output_padding=out_pad)
    outs, grads = grads_of(fn, x, w)
    want, (dx, dw) = _torch_grads(lambda a, b: tconv(a, b, stride=stride, padding=pads[:n],
                                                     output_padding=out_pad, groups=groups,
                                                     dilation=dil), x, w)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[1], dw, rtol=1e-4, atol=1e-4)


def test_conv_transpose_output_shape():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    got = run_fn(lambda a, b: ops.conv_transpose(a, b, (2, 2), output_shape=(8, 8)), x, w)
    # ONNX: total padding 1 per axis, the odd unit at the beginning (not same_upper)
    full = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2).numpy()
    np.testing.assert_allclose(got, full[:, :, 1:, 1:], rtol=1e-5, atol=1e-5)


def test_conv_errors():
    with popxl.Ir().main_graph:
        x = popxl.variable(np.zeros((1, 4, 5, 5), np.float32))
        w = popxl.variable(np.zeros((2, 4, 3, 3), np.float32))
        with pytest.raises(ValueError, match="pad type bogus is not valid"):
            ops.conv(x, w, pad_type="bogus")
        with pytest.raises(TypeError, match="conv: .*same dtype"):
            ops.conv(x, popxl.variable(np.zeros((2, 4, 3, 3), np.float16)))
        with pytest.raises(TypeError, match="conv: .*int32"):
            ops.conv(popxl.variable(np.zeros((1, 4, 5, 5), np.int32)),
                     popxl.variable(np.zeros((2, 4, 3, 3), np.int32)))
        with pytest.raises(ValueError, match="Conv: the weight .*input channels"):
            ops.conv(x, w, groups=2)
        with pytest.raises(ValueError, match="does not fit"):
            ops.conv(x, popxl.variable(np.zeros((2, 4, 7, 7), np.float32)))
        with pytest.raises(ValueError, match="`stride` .* must have 2 values"):
            ops.conv(x, w, stride=(1, 2, 3))
        with pytest.raises(ValueError, match="partials_types"):
            ops.conv(x, w, partials_types=["double"])


POOL_CASES = [
    ((2, 3, 11), (3,), (1,), (0, 0), False),
    ((2, 3, 12), (4,), (2,), (1, 1), True),
    ((2, 3, 13, 11), (3, 3), (2, 2), (1, 1, 1, 1), True),
    ((1, 2, 10, 9), (2, 3), (2, 1), (1, 0, 1, 0), False),
    ((1, 2, 7, 6, 5), (3, 2, 2), (2, 2, 1), (1, 1, 0, 1, 1, 0), True),
]


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("xs,k,s,pads,ceil", POOL_CASES)
def test_pool_value_and_grad(kind, xs, k, s, pads, ceil):
    x = RNG.standard_normal(xs).astype(np.float32)
    n = len(k)
    assert pads[:n] == pads[n:]
    if kind == "avg":
        fn = lambda a: ops.average_pool(a, k, s, pads, ceil_mode=ceil)  # noqa: E731
        tf = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
        tfn = lambda a: tf(a, k, s, pads[:n], ceil_mode=ceil, count_include_pad=False)  # noqa
    else:
        fn = lambda a: ops.max_pool(a, k, s, pads, ceil_mode=ceil)  # noqa: E731
        tf = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        tfn = lambda a: tf(a, k, s, pads[:n], ceil_mode=ceil)  # noqa: E731
    outs, grads = grads_of(fn, x)
    want, (dx,) = _torch_grads(tfn, x)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_pool_second_order_and_float16(kind):
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    f = (lambda a: ops.average_pool(a, (3, 3), (2, 2), (1, 1, 1, 1))) if kind == "avg" else \
        (lambda a: ops.max_pool(a, (3, 3), (2, 2), (1, 1, 1, 1)))
    # second order of a linear (avg) or piecewise linear (max) map is zero
    v = [RNG.standard_normal(x.shape).astype(np.float32)]
    got, _, _ = second_order_of(lambda a: f(a) * f(a), x, v=v)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    tf = (lambda a: F.avg_pool2d(a, 3, 2, 1, count_include_pad=False)) if kind == "avg" else \
        (lambda a: F.max_pool2d(a, 3, 2, 1))
    y = tf(xt) * tf(xt)
    loss = (y * torch.tensor(_seed(tuple(y.shape)).astype(np.float64))).sum()
    (gx,) = torch.autograd.grad(loss, [xt], create_graph=True)
    (hx,) = torch.autograd.grad((gx * torch.tensor(v[0].astype(np.float64))).sum(), [xt])
    np.testing.assert_allclose(got[0], hx.numpy(), rtol=1e-4, atol=1e-4)
    h = x.astype(np.float16)
    got16 = run_fn(f, h)
    want16 = tf(torch.tensor(h, dtype=torch.float32)).numpy()
    assert got16.dtype == np.float16
    np.testing.assert_allclose(got16.astype(np.float32), want16, rtol=2e-3, atol=2e-3)


def test_pool_auto_pad_and_errors():
    x = RNG.standard_normal((1, 2, 9, 9)).astype(np.float32)
    got = run_fn(lambda a: ops.max_pool(a, (3, 3), (2, 2), auto_pad="same_upper"), x)
    want = F.max_pool2d(F.pad(torch.tensor(x), (1, 1, 1, 1), value=-np.inf), 3, 2).numpy()
    np.testing.assert_allclose(got, want)
    with popxl.Ir().main_graph:
        t = popxl.variable(x)
        with pytest.raises(NotImplementedError, match="average_pool: out_pads"):
            ops.average_pool(t, (2, 2), out_pads=(1, 1, 1, 1))
        with pytest.raises(ValueError, match="max_pool: kernel_size"):
            ops.max_pool(t, (2,))
        with pytest.raises(ValueError, match="smaller than the"):
            ops.max_pool(t, (2, 2), padding=(2, 2, 2, 2))
        with pytest.raises(TypeError, match="average_pool: .*int32"):
            ops.average_pool(popxl.variable(np.zeros((1, 1, 4, 4), np.int32)), (2, 2))


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups", [
    ((3, 1, 28, 28), (32, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1),     # MNIST's layer
    ((2, 3, 30, 30), (20, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),     # stem, stride 2
    ((2, 2, 17, 40), (7, 2, 3, 2), (3, 2), (2, 0, 1, 3), (2, 3), 1),      # row phases of 3
    ((2, 4, 9, 21), (6, 2, 2, 3), (1, 1), (0, 1, 1, 0), (1, 1), 2),       # groups, odd plane
    ((3, 2, 45), (5, 2, 5), (2,), (2, 1), (1,), 1),                        # 1-D
])
def test_conv_column_unfolded_form(monkeypatch, xs, ws, stride, pads, dil, groups):
    """Short reductions run on the column-unfolded direct form: value and
    both gradients agree with PyTorch, and are the same bits as the
    row-padded direct form (IPUXL_CONV_NO_COLS=1), which sums every output
    element over the same taps in the same order."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    fn = lambda a, b: ops.conv(a, b, stride, pads, dil, groups)  # noqa: E731
    outs, grads = grads_of(fn, x, w)
    monkeypatch.setenv("IPUXL_CONV_NO_COLS", "1")
    outs_rows, grads_rows = grads_of(fn, x, w)
    np.testing.assert_array_equal(outs[0], outs_rows[0])
    np.testing.assert_array_equal(grads[0], grads_rows[0])
    np.testing.assert_array_equal(grads[1], grads_rows[1])
    want, (dx, dw) = _torch_grads(lambda a, b: _torch_conv(a, b, stride, pads, dil, groups), x, w)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[1], dw, rtol=1e-4, atol=5e-4)


def _assert_same_nonfinite_pattern(got, want):
    """got has NaN, +inf and -inf exactly where the reference want has them,
    and the reference's finite values elsewhere (want must hold both kinds)."""
    assert not np.isfinite(want).all() and np.isfinite(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4)


def _check_nonfinite_conv(x, w, stride, pads):
    """conv(x, w) has PyTorch's float64 pattern of NaN and infinities, and
    its finite values elsewhere."""
    got = run_fn(lambda a, b: ops.conv(a, b, stride, pads), x, w)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = _torch_conv(torch.tensor(x.astype(np.float64)), torch.tensor(w.astype(np.float64)),
                       stride, pads, (1, 1), 1).numpy()
    _assert_same_nonfinite_pattern(got, want)


def test_conv_column_unfolded_form_with_inf_and_nan():
    """An infinity or NaN in x reaches exactly the outputs whose taps read it
    (the unfolded planes hold real values and the padding's zeros only;
    lanes past the plane's end are never stored): pattern and values as
    PyTorch's float64 result."""
    x = RNG.standard_normal((2, 3, 20, 26)).astype(np.float32)
    x[0, 1, 0, 0] = np.inf
    x[1, 2, 19, 25] = np.nan
    x[1, 0, 7, 13] = -np.inf
    w = RNG.standard_normal((12, 3, 3, 3)).astype(np.float32)
    _check_nonfinite_conv(x, w, (2, 2), (1, 1, 1, 1))


def test_conv_short_reduction_too_large_to_unfold():
    """A wide kernel row over a large image (1x33 over 200x1000: the
    column-unfolded planes would be 26 MB per image) runs on the row-padded
    form instead; the value agrees with PyTorch."""
    x = RNG.standard_normal((1, 1, 200, 1000)).astype(np.float32)
    w = RNG.standard_normal((4, 1, 1, 33)).astype(np.float32)
    got = run_fn(lambda a, b: ops.conv(a, b, (1, 1), (0, 0, 0, 0)), x, w)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = F.conv2d(torch.tensor(x.astype(np.float64)), torch.tensor(w.astype(np.float64))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_flat_form_with_inf_and_nan():
    """An infinity or NaN in x reaches exactly the outputs whose taps read it:
    the flat form's dropped positions (the reach's columns, where such a
    value meets a zero of the padding or another row) are never stored, and
    the padded buffer (not zero-filled first) holds the image's values and
    zeros only; at 2 threads, pattern and values as PyTorch's float64
    result."""
    from ipuxl import _core as core
    x = RNG.standard_normal((2, 24, 12, 37)).astype(np.float32)
    x[0, 1, 0, 0] = np.inf
    x[0, 5, 4, 36] = np.nan
    x[1, 7, 11, 36] = -np.inf
    x[1, 20, 6, 0] = np.inf
    w = RNG.standard_normal((16, 24, 3, 3)).astype(np.float32)
    n0 = core.num_threads()
    try:
        core.set_num_threads(2)
        got = run_fn(lambda a, b: ops.conv(a, b, (1, 1), (1, 1, 1, 1)), x, w)
    finally:
        core.set_num_threads(n0)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = _torch_conv(torch.tensor(x.astype(np.float64)), torch.tensor(w.astype(np.float64)),
                       (1, 1), (1, 1, 1, 1), (1, 1), 1).numpy()
    _assert_same_nonfinite_pattern(got, want)


@pytest.mark.parametrize("xs,ws,stride,pads,dil,groups", [
    ((2, 32, 14, 14), (32, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),   # forward and data grad
    ((1, 20, 12, 14), (64, 20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),   # a channel block of 4
    ((2, 64, 9, 12), (64, 32, 3, 3), (1, 1), (1, 0, 1, 2), (1, 1), 2),    # groups, uneven pads
    ((1, 16, 13, 14), (32, 16, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),   # dilation
    ((2, 16, 25, 19), (32, 16, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),   # stride 2, 10 wide
    ((3, 16, 6, 9), (32, 16, 2, 5), (1, 1), (0, 2, 1, 2), (1, 1), 1),     # 2x5 kernel, 9 wide
])
def test_conv_channels_in_vectors_form(monkeypatch, xs, ws, stride, pads, dil, groups):
    """Narrow outputs with 16+ input channels and whole blocks of output
    channels run on the channels-in-vectors direct form (the forward, and
    the data gradient as a forward of dy; at AVX-512 and AVX2): value and
    both gradients agree with PyTorch and with the row forms
    (IPUXL_CONV_NO_OC=1), and are the same bits at 1, 2 and 3 threads.
    (The Winograd form, which would take the 3x3 shapes with 32+ channels,
    is turned off.)"""
    monkeypatch.setenv("IPUXL_CONV_NO_WINOGRAD", "1")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    fn = lambda a, b: ops.conv(a, b, stride, pads, dil, groups)  # noqa: E731
    value, dx, _ = _check_same_bits_at_any_thread_count(x, w, stride, pads, dil, groups)
    monkeypatch.setenv("IPUXL_CONV_NO_OC", "1")
    outs_rows, grads_rows = grads_of(fn, x, w)
    np.testing.assert_allclose(value, outs_rows[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dx, grads_rows[0], rtol=1e-5, atol=1e-4)


def test_conv_channels_in_vectors_form_with_inf_and_nan(monkeypatch):
    """An infinity or NaN in x reaches exactly the outputs whose taps read it
    through the channels-in-vectors form (its channels-last copy holds the
    image's values and the padding's zeros only): pattern and values as
    PyTorch's float64 result."""
    monkeypatch.setenv("IPUXL_CONV_NO_WINOGRAD", "1")
    x = RNG.standard_normal((2, 32, 14, 14)).astype(np.float32)
    x[0, 1, 0, 0] = np.inf
    x[0, 17, 5, 13] = np.nan
    x[1, 31, 13, 13] = -np.inf
    w = RNG.standard_normal((64, 32, 3, 3)).astype(np.float32)
    _check_nonfinite_conv(x, w, (1, 1), (1, 1, 1, 1))


@pytest.mark.parametrize("xs,ws,pads,groups", [
    ((2, 32, 14, 14), (32, 32, 3, 3), (1, 1, 1, 1), 1),    # forward and data grad
    ((1, 40, 13, 11), (36, 40, 3, 3), (1, 1, 1, 1), 1),    # odd sizes, channels not whole vectors
    ((2, 64, 9, 12), (64, 32, 3, 3), (1, 0, 1, 2), 2),     # groups, uneven pads
    ((3, 32, 33, 7), (48, 32, 3, 3), (0, 0, 0, 0), 1),     # no padding, blocks across images
    ((1, 32, 2, 2), (32, 32, 3, 3), (1, 1, 1, 1), 1),      # one tile
    ((2, 32, 40, 40), (32, 32, 3, 3), (2, 1, 0, 3), 1),    # blocks across rows of tiles
])
def test_conv_winograd_form(monkeypatch, xs, ws, pads, groups):
    """3x3 convolutions at unit strides with 32+ channels per group run on
    the Winograd F(2x2, 3x3) form (the forward, the data gradient as a
    forward of dy, and the weight gradient): value and both gradients agree
    with PyTorch's float64 result and with the other forms
    (IPUXL_CONV_NO_WINOGRAD=1), and are the same bits at 1, 2 and 3
    threads."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    fn = lambda a, b: ops.conv(a, b, (1, 1), pads, (1, 1), groups)  # noqa: E731
    value, dx, dw = _check_same_bits_at_any_thread_count(x, w, (1, 1), pads, (1, 1), groups)
    monkeypatch.setenv("IPUXL_CONV_NO_WINOGRAD", "1")
    outs_direct, grads_direct = grads_of(fn, x, w)
    # a different summation: agreement to float32 rounding, not the same bits
    assert not np.array_equal(value, outs_direct[0])
    assert not np.array_equal(dw, grads_direct[1])
    np.testing.assert_allclose(value, outs_direct[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dx, grads_direct[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dw, grads_direct[1], rtol=1e-5, atol=5e-4)


def test_conv_winograd_form_with_inf_and_nan():
    """An infinity or NaN in x (or in the weights, for the data gradient)
    makes the Winograd form decline (its transforms would turn inf - inf
    into NaN where the direct sum keeps inf): the other forms run, with
    PyTorch's float64 pattern of NaN and infinities, for the value and
    both gradients."""
    x = RNG.standard_normal((2, 32, 16, 16)).astype(np.float32)
    x[0, 1, 0, 0] = np.inf
    x[0, 17, 5, 13] = np.nan
    x[1, 31, 15, 15] = -np.inf
    x[1, 3, 7, 8] = np.inf
    w = np.abs(RNG.standard_normal((32, 32, 3, 3))).astype(np.float32)
    _check_nonfinite_conv(x, w, (1, 1), (1, 1, 1, 1))
    x = RNG.standard_normal((2, 32, 16, 16)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    w[2, 4, 1, 1] = np.inf
    outs, grads, want, (dx, _) = _conv_grads_and_torch(x, w, (1, 1, 1, 1))
    _assert_same_nonfinite_pattern(outs[0], want)
    _assert_same_nonfinite_pattern(grads[0], dx)
    # the weight gradient: infinities in x's first and last columns reach
    # only the taps that read them (no padding)
    x = RNG.standard_normal((2, 32, 6, 20)).astype(np.float32)
    x[0, 3, 2, 0] = np.inf
    x[1, 5, 4, 19] = -np.inf
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    _, grads, _, (_, dw) = _conv_grads_and_torch(x, w, (0, 0, 0, 0))
    assert np.isfinite(dw[:, :, :, 1]).all() and not np.isfinite(dw).all()
    _assert_same_nonfinite_pattern(grads[1], dw)
