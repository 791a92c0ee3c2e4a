"""group_norm, layer_norm, batch_norm_inference, interpolate and roi_align
against PyTorch (and, for roi_align, a NumPy transcription of
torchvision's aligned=False algorithm), in value and gradient."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import ipuxl as popxl  # noqa: E402
import ipuxl.ops as ops  # noqa: E402
from grad_harness import grads_of, second_order_of  # noqa: E402
from harness import run_fn  # noqa: E402
from roi_reference import roi_align_reference  # noqa: E402

RNG = np.random.default_rng(11)


def _seed(shape):
    return np.random.default_rng(1234).standard_normal(shape)


def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    y = fn(*ts)
    (y * torch.tensor(_seed(tuple(y.shape)))).sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("shape,groups", [((4, 6), 1), ((3, 6), 3), ((2, 6, 5), 2),
                                          ((2, 4, 3, 5), 4), ((2, 8, 2, 3, 2), 2)])
def test_group_norm_value_and_grad(shape, groups):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    w = RNG.standard_normal(shape[1]).astype(np.float32)
    b = RNG.standard_normal(shape[1]).astype(np.float32)
    outs, grads = grads_of(lambda a, c, d: ops.group_norm(a, c, d, groups, eps=1e-4), x, w, b)
    want, (dx, dw, db) = _torch_grads(lambda a, c, d: F.group_norm(a, groups, c, d, eps=1e-4),
                                      x, w, b)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(grads[1], dw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[2], db, rtol=1e-4, atol=1e-4)


def test_layer_norm_matches_torch_and_second_order():
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    w = RNG.standard_normal(7).astype(np.float32)
    b = RNG.standard_normal(7).astype(np.float32)
    outs, grads = grads_of(lambda a, c, d: ops.layer_norm(a, c, d), x, w, b)
    want, tg = _torch_grads(lambda a, c, d: F.layer_norm(a, (7,), c, d), x, w, b)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-5)
    for g, t in zip(grads, tg):
        np.testing.assert_allclose(g, t, rtol=1e-3, atol=1e-4)
    v = [RNG.standard_normal(a.shape).astype(np.float32) for a in (x, w, b)]
    got, _, _ = second_order_of(lambda a, c, d: ops.layer_norm(a, c, d), x, w, b, v=v)
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b)]
    y = F.layer_norm(ts[0], (7,), ts[1], ts[2])
    gs = torch.autograd.grad((y * torch.tensor(_seed(y.shape))).sum(), ts, create_graph=True)
    s = sum((g * torch.tensor(vv.astype(np.float64))).sum() for g, vv in zip(gs, v))
    hs = torch.autograd.grad(s, ts, allow_unused=True)
    for g, h in zip(got, hs):
        h = np.zeros_like(g) if h is None else h.numpy()
        np.testing.assert_allclose(g, h, rtol=2e-3, atol=2e-4)


def test_norm_float16_and_errors():
    x = RNG.standard_normal((4, 6, 3)).astype(np.float16)
    w = np.ones(6, np.float16)
    b = np.zeros(6, np.float16)
    got = run_fn(lambda a, c, d: ops.group_norm(a, c, d, 2), x, w, b)
    want = F.group_norm(torch.tensor(x, dtype=torch.float32), 2).numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=5e-3, atol=5e-3)
    with popxl.Ir().main_graph:
        t = popxl.variable(np.zeros((2, 6), np.float32))
        p = popxl.variable(np.zeros(6, np.float32))
        with pytest.raises(ValueError, match="group_norm: num_groups 4 must divide"):
            ops.group_norm(t, p, p, 4)
        with pytest.raises(ValueError, match="group_norm: weight .* expected \\(6,\\)"):
            ops.group_norm(t, popxl.variable(np.zeros(5, np.float32)), p, 1)
        with pytest.raises(TypeError, match="layer_norm|group_norm"):
            ops.layer_norm(t, popxl.variable(np.zeros(6, np.float16)), p)


def test_batch_norm_inference_value_and_grad():
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    s, b, m = (RNG.standard_normal(4).astype(np.float32) for _ in range(3))
    v = RNG.random(4).astype(np.float32) + 0.5
    outs, grads = grads_of(lambda *a: ops.batch_norm_inference(*a, epsilon=1e-3), x, s, b, m, v)
    want, tg = _torch_grads(
        lambda a, c, d, e, f: (a - e[:, None]) / torch.sqrt(f[:, None] + 1e-3) * c[:, None]
        + d[:, None], x, s, b, m, v)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    for g, t in zip(grads, tg):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode,scales,ctm,tmode,align", [
    ("nearest", (1, 1, 2.0, 3.0), "asymmetric", "nearest", None),
    ("linear", (1, 1, 0.5), "half_pixel", "linear", False),
    ("linear", (1, 1, 2.0, 1.5), "half_pixel", "bilinear", False),
    ("linear", (1, 1, 1.7, 2.0), "align_corners", "bilinear", True),
    ("cubic", (1, 1, 2.0, 2.0), "half_pixel", "bicubic", False),
    ("linear", (1, 1, 2.0, 2.0, 0.5), "half_pixel", "trilinear", False),
])
def test_interpolate_value_and_grad(mode, scales, ctm, tmode, align):
    shape = {3: (2, 3, 7), 4: (2, 3, 5, 6), 5: (1, 2, 3, 4, 6)}[len(scales)]
    x = RNG.standard_normal(shape).astype(np.float32)
    fn = lambda a: ops.interpolate(a, scales, mode,  # noqa: E731
                                   "floor" if mode == "nearest" else "round_prefer_floor",
                                   ctm)
    outs, grads = grads_of(fn, x)
    kw = {} if align is None else {"align_corners": align}
    size = tuple(int(np.floor(d * s)) for d, s in zip(shape[2:], scales[2:]))
    if ctm == "align_corners":
        tfn = lambda a: F.interpolate(a, size=size, mode=tmode, **kw)  # noqa: E731
    else:
        tfn = lambda a: F.interpolate(a, scale_factor=scales[2:], mode=tmode,  # noqa: E731
                                      recompute_scale_factor=False, **kw)
    want, (dx,) = _torch_grads(tfn, x)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0], dx, rtol=1e-5, atol=1e-5)


def test_interpolate_nearest_modes_and_errors():
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    # half_pixel at scale 2: x_orig = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, ...
    got = run_fn(lambda a: ops.interpolate(a, (1, 1, 2.0), "nearest", "round_prefer_ceil"), x)
    np.testing.assert_array_equal(got[0, 0], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    got = run_fn(lambda a: ops.interpolate(a, (1, 1, 2.0), "nearest", "ceil"), x)
    np.testing.assert_array_equal(got[0, 0], [0, 1, 1, 2, 2, 3, 3, 4, 4, 4])
    with popxl.Ir().main_graph:
        t = popxl.variable(x)
        with pytest.raises(ValueError, match="interpolate type bad is not valid"):
            ops.interpolate(t, (1, 1, 2), "bad")
        with pytest.raises(NotImplementedError, match="tf_crop_and_resize"):
            ops.interpolate(t, (1, 1, 2), coordinate_transformation_mode="tf_crop_and_resize")
        with pytest.raises(ValueError, match="one value per axis"):
            ops.interpolate(t, (2.0,))


@pytest.mark.slow  # large ROI gradients
@pytest.mark.parametrize("ratio", [2, 0])
def test_roi_align_value_and_grad(ratio):
    x = RNG.uniform(0, 2, (2, 3, 9, 8)).astype(np.float32)
    rois = RNG.uniform(0, 20, (5, 4)).astype(np.float32)
    rois[:, 2:] += rois[:, :2]
    bidx = np.array([0, 1, 1, 0, 1], np.int32)
    fn = lambda a, r, i: ops.roi_align(a, r, i, (3, 2), 0.5, ratio)  # noqa: E731
    got = run_fn(fn, x, rois, bidx)
    want = roi_align_reference(x, rois, bidx, 3, 2, 0.5, ratio)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the op is linear in x: its gradient is the reference's transpose
    seed = _seed(want.shape)
    eye = np.eye(x.size).reshape((x.size,) + x.shape)
    jac = np.stack([(roi_align_reference(e, rois, bidx, 3, 2, 0.5, ratio) * seed).sum()
                    for e in eye]).reshape(x.shape)
    def on_x(a):
        return ops.roi_align(a, popxl.constant(rois), popxl.constant(bidx), (3, 2), 0.5, ratio)

    outs, grads = grads_of(on_x, x, seeds=[seed.astype(np.float32)])
    np.testing.assert_allclose(grads[0], jac, rtol=1e-4, atol=1e-5)


def test_roi_align_bad_batch_index_is_a_run_error():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(Exception, match="batch_index\\[0\\] = 3"):
        run_fn(lambda a, r, i: ops.roi_align(a, r, i, (2, 2), 1.0, 1), x,
               np.zeros((1, 4), np.float32), np.array([3], np.int32))
