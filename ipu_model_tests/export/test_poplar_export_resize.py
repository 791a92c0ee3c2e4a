"""``ipuxl export poplar`` of Resize (``ops.interpolate``) and its
gradient (the taps as ``popops::multiSlice`` / ``multiUpdateAdd`` passes;
checked against a float64 NumPy implementation of ONNX Resize's formulas
and the adjoint identity <R x, g> = <x, R^T g>), and of RoiAlign and its
gradient (one generated vertex; checked against a float64 transcription of
torchvision's roi_align): built against ipuxl's Poplar, run, and compared
with ``Session.run`` (slow)."""
import math

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from poplar_roundtrip import roundtrip


def _onnx_axis(v, axis, n_out, scale, mode, nearest, ctm, a=-0.75):
    """float64 ONNX Resize along one axis (edge-clamped taps)."""
    n_in = v.shape[axis]
    out = []
    for o in range(n_out):
        if ctm == "half_pixel":
            x = (o + 0.5) / scale - 0.5
        elif ctm == "align_corners":
            x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:  # asymmetric
            x = o / scale
        fl = math.floor(x)
        if mode == "nearest":
            i = {"floor": fl, "ceil": math.ceil(x)}.get(nearest)
            if i is None:  # round_prefer_floor
                i = fl if x - fl == 0.5 else math.floor(x + 0.5)
            taps = [(i, 1.0)]
        elif mode == "linear":
            r = x - fl
            taps = [(fl, 1 - r), (fl + 1, r)]
        else:
            r = x - fl
            taps = [(fl - 1, ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a),
                    (fl, ((a + 2) * r - (a + 3)) * r * r + 1),
                    (fl + 1, ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1),
                    (fl + 2, ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a)]
        out.append(sum(w * np.take(v, min(max(i, 0), n_in - 1), axis=axis) for i, w in taps))
    return np.stack(out, axis=axis)


CASES = {  # shape, scales, mode, nearest_mode, coordinate mode
    "nearest_up": ((1, 2, 3, 4), (1.0, 1.0, 2.0, 1.5), "nearest", "round_prefer_floor", "half_pixel"),
    "nearest_floor_down": ((2, 1, 6, 5), (1.0, 1.0, 0.5, 0.6), "nearest", "floor", "asymmetric"),
    "linear_half_pixel": ((1, 2, 4, 3), (1.0, 1.0, 1.75, 2.0), "linear", "round_prefer_floor", "half_pixel"),
    "cubic_align_corners": ((1, 1, 5, 4), (1.0, 1.0, 1.6, 2.0), "cubic", "round_prefer_floor", "align_corners"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_resize_and_its_gradient_roundtrip(case, tmp_path):
    shape, scales, mode, nearest, ctm = CASES[case]
    out_shape = tuple(int(math.floor(d * s)) for d, s in zip(shape, scales))
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(shape, popxl.float32, name="x")
        gs = popxl.h2d_stream(out_shape, popxl.float32, name="g")
        x, g = ops.host_load(xs, "x"), ops.host_load(gs, "g")
        fwd = ir.create_graph(lambda t: ops.interpolate(t, scales, mode, nearest, ctm), x)
        bwd = popxl.transforms.autodiff(fwd)
        info = ops.call_with_info(fwd, x)
        y = info.outputs[0]
        dx = ops.call(bwd.graph, g, inputs_dict=bwd.inputs_dict(info))[0]
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
        ops.host_store(popxl.d2h_stream(dx.shape, dx.dtype, name="dx"), dx)
    rng = np.random.default_rng(21)
    xv = rng.normal(size=shape).astype(np.float32)
    gv = rng.normal(size=out_shape).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: xv, gs: gv})
    assert src.count("ipuxl_export::resizeAxis(") >= 2  # forward and adjoint passes
    ref = xv.astype(np.float64)
    for ax in range(len(shape)):
        if out_shape[ax] != shape[ax] or scales[ax] != 1.0:
            ref = _onnx_axis(ref, ax, out_shape[ax], scales[ax], mode, nearest, ctm)
    np.testing.assert_allclose(got["y"], ref, rtol=1e-5, atol=1e-5)
    if mode == "nearest":
        np.testing.assert_array_equal(got["y"], want["y"])  # elements copied
    else:
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)
    # the gradient is the adjoint: <R x, g> = <x, R^T g>, in float64
    lhs = float(np.sum(got["y"].astype(np.float64) * gv))
    rhs = float(np.sum(xv.astype(np.float64) * got["dx"].astype(np.float64)))
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))
    np.testing.assert_allclose(got["dx"], want["dx"], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("ratio", [2, 0])
def test_roi_align_and_its_gradient_roundtrip(ratio, dt, tmp_path):
    # RoiAlign has no PopLibs call: one generated vertex, forward and
    # gradient, against Session.run and torchvision's algorithm in float64.
    from roi_reference import roi_align_reference

    rng = np.random.default_rng(7)
    npdt = dt.as_numpy()
    x = rng.normal(size=(2, 3, 9, 11)).astype(npdt)
    rois = rng.uniform(0, 7, (4, 4)).astype(np.float32)
    rois[:, 2:] += rois[:, :2]
    rois[1] = [-3.0, -2.0, 12.0, 15.0]  # partly outside the map
    rois = rois.astype(npdt)
    bidx = np.array([1, 0, 1, 1], np.int32)
    seed = rng.normal(size=(4, 3, 3, 2)).astype(npdt)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, dt, name="x")
        xt = ops.host_load(xs, "x")
        g = ir.create_graph(lambda a: ops.roi_align(a, popxl.constant(rois, dt), popxl.constant(bidx),
                                                    (3, 2), 0.5, ratio), xt)
        info = popxl.transforms.autodiff(g)
        fwd = ops.call_with_info(g, xt)
        (dx,) = ops.call(info.graph, popxl.constant(seed, dt), inputs_dict=info.inputs_dict(fwd))
        ops.host_store(popxl.d2h_stream((4, 3, 3, 2), dt, name="y"), fwd.outputs[0])
        ops.host_store(popxl.d2h_stream(x.shape, dt, name="dx"), dx)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert 'graph.addVertex(cs, "RoiAlign")' in src
    ref_y = roi_align_reference(x.astype(np.float64), rois.astype(np.float64), bidx, 3, 2, 0.5, ratio)
    # the gradient: the adjoint of the (linear) forward, column by column
    basis = np.eye(x.size).reshape((x.size,) + x.shape)
    jac = np.stack([roi_align_reference(e, rois.astype(np.float64), bidx, 3, 2, 0.5, ratio).ravel()
                    for e in basis], axis=1)
    ref_dx = (seed.astype(np.float64).ravel() @ jac).reshape(x.shape)
    tol = dict(rtol=1e-5, atol=1e-6) if dt == popxl.float32 else dict(rtol=1e-2, atol=4e-3)
    np.testing.assert_allclose(got["y"].astype(np.float64), ref_y, **tol)
    np.testing.assert_allclose(got["dx"].astype(np.float64), ref_dx, **tol)
    # the Session's algorithm, arithmetic and roundings: the same bits
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["dx"], want["dx"])


@pytest.mark.slow
def test_roi_align_bad_batch_index_fails_the_run(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((1, 1, 4, 4), popxl.float32, name="x")
        y = ops.roi_align(ops.host_load(xs, "x"), popxl.constant(np.array([[0, 0, 2, 2]], np.float32)),
                          popxl.constant(np.array([3], np.int32)), (2, 2), 1.0, 1)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    with pytest.raises(Exception, match="RoiAlign"):
        roundtrip(ir, tmp_path, inputs={xs: np.ones((1, 1, 4, 4), np.float32)})
