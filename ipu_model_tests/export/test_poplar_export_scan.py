"""``ipuxl export poplar`` of CumSum (a generated ``CumSumRows`` vertex) and
ScatterReduce (``popops::groupedMultiUpdate*``, PopART's strategies):
exported, built with the generated Makefile against ipuxl's Poplar, run,
and compared with ``Session.run`` and with NumPy / PyTorch (float64), an
oracle apart from both. The round trips compile C++ and are marked slow.
"""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.export import export_poplar
from poplar_roundtrip import roundtrip

torch = pytest.importorskip("torch")


def _one_op_ir(shape, dtype, fn, extra=()):
    """x streamed in, y = fn(x, *extra_tensors) streamed out."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(shape, dtype, name="x")
        x = ops.host_load(xs, "x")
        y = fn(x)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, xs


CUMSUM_CASES = {
    "f32_axis1": ((3, 7, 5), popxl.float32, 1),
    "f32_last_many_rows": ((300, 6), popxl.float32, -1),  # more rows than tiles per vertex
    "f16_axis0": ((9, 4), popxl.float16, 0),
    "i32_wraps": ((2, 6), popxl.int32, 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CUMSUM_CASES))
def test_cumsum_roundtrip(case, tmp_path):
    shape, dt, axis = CUMSUM_CASES[case]
    ir, xs = _one_op_ir(shape, dt, lambda x: ops.cumsum(x, axis))
    rng = np.random.default_rng(3)
    if dt == popxl.int32:  # sums past 2^31 wrap around, as NumPy's int32
        x = rng.integers(2**30, 2**31 - 1, size=shape).astype(np.int32)
        x[0, 0] = -5
    else:
        x = rng.normal(size=shape).astype(dt.as_numpy())
    got, _, want, _, src, summary = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "ipuxl_export::cumSum(" in src and summary["codelets"] == ["CumSumRows"]
    np.testing.assert_array_equal(got["y"], want["y"])  # the same double running sum
    if dt == popxl.int32:
        oracle = np.cumsum(x.astype(np.int64), axis=axis).astype(np.int32)  # modular narrowing
        np.testing.assert_array_equal(got["y"], oracle)
    else:
        oracle = torch.cumsum(torch.tensor(x.astype(np.float64)), dim=axis).numpy()
        np.testing.assert_array_equal(got["y"], oracle.astype(dt.as_numpy()))


def _scatter_ir(data_shape, idx, axis, reduction, axis_size=None, init=None, dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        ds = popxl.h2d_stream(data_shape, dtype, name="data")
        d = ops.host_load(ds, "data")
        it = popxl.constant(idx, popxl.int32, name="idx")
        iv = None
        if init is not None:
            iv = popxl.variable(init, dtype, name="init")
        y = ops.scatter_reduce(d, it, reduction=reduction, initial_values=iv, axis=axis,
                               axis_size=axis_size)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, ds


def _torch_scatter(data, idx_full, axis, reduction, out_shape, init):
    """torch.scatter_reduce in float64 (include_self with initial values);
    without them, positions nothing reaches are 0, 1 for "mul" (PopXL's
    semantics)."""
    d = torch.tensor(data.astype(np.float64))
    ix = torch.tensor(idx_full.astype(np.int64))
    ok = (ix >= 0) & (ix < out_shape[axis])
    d = torch.where(ok, d, torch.zeros_like(d))
    red = {"sum": "sum", "max": "amax", "min": "amin", "mul": "prod"}[reduction]
    base = torch.full(out_shape, 1.0 if reduction == "mul" else 0.0, dtype=torch.float64) if init is None \
        else torch.tensor(init.astype(np.float64))
    # out-of-range indices are dropped: send them to a scratch row past the end
    pad = list(out_shape)
    pad[axis] += 1
    big = torch.cat([base, torch.zeros([*(pad[:axis]), 1, *(pad[axis + 1:])], dtype=torch.float64)],
                    dim=axis)
    ix = torch.where(ok, ix, torch.full_like(ix, out_shape[axis]))
    out = big.scatter_reduce(axis, ix, d, reduce=red, include_self=init is not None)
    return out.narrow(axis, 0, out_shape[axis]).numpy()


SCATTER_CASES = {  # (data shape, axis, reduction, axis_size, with initial values, index broadcast)
    "sum_axis0": ((6, 4), 0, "sum", 3, False, False),
    "sum_init_axis1_bcast": ((3, 5), 1, "sum", None, True, True),
    "max": ((6, 3), 0, "max", 4, False, False),   # row 3 untouched: 0
    "max_init": ((6, 3), 0, "max", None, True, False),
    "min": ((2, 7), 1, "min", 4, False, False),
    "min_init": ((2, 7), 1, "min", None, True, False),
    "mul": ((5, 2), 0, "mul", 3, False, False),
    "none_init": ((4, 3), 0, "none", None, True, False),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SCATTER_CASES))
def test_scatter_reduce_roundtrip(case, tmp_path):
    shape, axis, red, size, with_init, bcast = SCATTER_CASES[case]
    rng = np.random.default_rng(11)
    n_out = size if size is not None else shape[axis] - 1
    out_shape = list(shape)
    out_shape[axis] = n_out
    m = shape[axis]
    if bcast:
        idx = rng.integers(0, n_out, size=m).astype(np.int32)
        idx[0] = -1  # ignored
        idx_full = np.broadcast_to(idx.reshape([-1 if k == axis else 1 for k in range(len(shape))]),
                                   shape)
    else:
        idx = rng.integers(0, n_out, size=shape).astype(np.int32)
        if red == "max":
            idx[idx == 3] = 1  # position 3 never reached
        if red == "none":  # distinct targets per column: no order to depend on
            idx = np.stack([rng.permutation(m)[:m] % (n_out + 1) for _ in range(shape[1])], 1)
            idx = idx.astype(np.int32)
        idx.reshape(-1)[1] = n_out  # out of range: ignored
        idx_full = idx
    init = rng.normal(size=out_shape).astype(np.float32) if with_init else None
    ir, ds = _scatter_ir(shape, idx, axis, red, size, init)
    data = rng.normal(size=shape).astype(np.float32)
    if red == "mul":
        data = rng.choice([0.5, 2.0, -1.0, 4.0], size=shape).astype(np.float32)  # exact products
    got, _, want, _, src, summary = roundtrip(ir, tmp_path, inputs={ds: data})
    assert "ipuxl_export::scatterReduce(" in src and not summary["codelets"]
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)
    if red == "none":
        oracle = init.astype(np.float64).copy()
        for p in np.ndindex(*shape):
            j = idx_full[p]
            if 0 <= j < n_out:
                q = list(p)
                q[axis] = j
                oracle[tuple(q)] = data[p]
    else:
        oracle = _torch_scatter(data, np.asarray(idx_full), axis, red, out_shape, init)
    np.testing.assert_allclose(got["y"], oracle, rtol=1e-6, atol=1e-6)


def test_scatter_reduce_min_of_unsigned_is_refused(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        d = popxl.variable(np.ones((3, 2), np.uint32), popxl.uint32, name="d")
        y = ops.scatter_reduce(d, popxl.constant(np.zeros((3, 2), np.int32), name="i"), "min",
                               axis_size=2)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    with pytest.raises(NotImplementedError, match=r"op ScatterReduce \('scatter_reduce'\) 'min' of uint32"):
        export_poplar(ir, str(tmp_path))
