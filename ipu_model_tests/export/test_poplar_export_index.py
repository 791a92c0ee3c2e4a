"""``ipuxl export poplar`` of Gather / TiedGather (``popops::multiSlice``),
ArgMax / ArgMin (``popnn::argMax`` / ``argMin``), Onehot
(``popops::encodeOneHot``), IncrementMod and ReduceL1 / L2 / LogSum /
LogSumExp: exported, built with the generated Makefile against ipuxl's
Poplar, run, and compared with ``Session.run`` and with NumPy / PyTorch in
float64, an oracle apart from both. The round trips compile C++ and are
marked slow; the emission checks are not.
"""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.export import export_poplar
from poplar_roundtrip import roundtrip

torch = pytest.importorskip("torch")


def _ir(inputs, fn):
    """Streams in ``inputs`` ({name: (shape, dtype)}), y = fn(*loaded) out."""
    ir = popxl.Ir()
    with ir.main_graph:
        streams = [popxl.h2d_stream(s, dt, name=n) for n, (s, dt) in inputs.items()]
        xs = [ops.host_load(s, s.tensor_id) for s in streams]
        y = fn(*xs)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, streams


GATHER_CASES = {  # data shape, index array, axis, zero_OOR, tied
    "rows": ((7, 5), np.array([3, 0, 6, 3], np.int32), 0, False, False),
    "middle_axis_2d_indices": ((3, 6, 4), np.array([[5, 1], [0, 2], [4, 4]], np.int32), 1, False, False),
    "negative_and_clamped": ((6, 3), np.array([-1, -6, 9, -20, 2], np.int32), 0, False, False),
    "zero_oor": ((5, 4), np.array([1, -1, 5, 4, 70], np.int32), 0, True, False),
    "zero_oor_last_axis": ((2, 3, 4), np.array([3, 4, 0], np.int32), 2, True, True),
    "uint32_clamped": ((4, 2), np.array([1, 3, 8], np.uint32), 0, False, True),
}


def _take_oracle(x, idx, axis, zero_oor):
    n = x.shape[axis]
    i = idx.astype(np.int64)
    if zero_oor:
        ok = (i >= 0) & (i < n)
        got = np.take(x.astype(np.float64), np.where(ok, i, 0), axis=axis)
        mask = ok.reshape((1,) * axis + idx.shape + (1,) * (x.ndim - axis - 1))
        return np.where(mask, got, 0.0)
    i = np.clip(np.where(i < 0, i + n, i), 0, n - 1)
    return np.take(x.astype(np.float64), i, axis=axis)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(GATHER_CASES))
def test_gather_roundtrip(case, tmp_path):
    shape, idx, axis, zero_oor, tied = GATHER_CASES[case]
    dt = popxl.int32 if idx.dtype == np.int32 else popxl.uint32

    def fn(x, i):
        g = ops.tied_gather if tied else ops.gather
        return g(x, i, axis=axis, zero_OOR=zero_oor)

    ir, (xs, js) = _ir({"x": (shape, popxl.float32), "i": (idx.shape, dt)}, fn)
    x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x, js: idx})
    assert "ipuxl_export::gatherAxis(" in src and "popops::multiSlice(" in src
    np.testing.assert_array_equal(got["y"], want["y"])  # the data's own elements
    np.testing.assert_array_equal(got["y"], _take_oracle(x, idx, axis, zero_oor).astype(np.float32))


ARG_CASES = {  # shape, axis, keepdims, dtype
    "max_last": ((4, 9), -1, False, popxl.float32),
    "min_axis0_keep": ((5, 3, 2), 0, True, popxl.float32),
    "max_middle_f16": ((2, 7, 3), 1, False, popxl.float16),
    "min_int_ties": ((3, 6), 1, False, popxl.int32),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(ARG_CASES))
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_extreme_roundtrip(case, kind, tmp_path):
    shape, axis, keep, dt = ARG_CASES[case]
    ir, (xs,) = _ir({"x": (shape, dt)}, lambda x: getattr(ops, kind)(x, axis, keep))
    rng = np.random.default_rng(5)
    if dt == popxl.int32:
        x = rng.integers(0, 3, size=shape).astype(np.int32)  # many ties: the first index wins
    else:
        x = rng.normal(size=shape).astype(dt.as_numpy())
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert f"popnn::arg{'Max' if kind == 'argmax' else 'Min'}(" in src
    oracle = getattr(torch, kind)(torch.tensor(x.astype(np.float64)), dim=axis, keepdim=keep).numpy()
    if dt == popxl.int32:  # torch's ties are unspecified: NumPy returns the first
        oracle = getattr(np, kind)(x, axis=axis)
        if keep:
            oracle = np.expand_dims(oracle, axis)
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], oracle.astype(np.int32))


ONEHOT_CASES = {  # index array, depth, axis, values dtype
    "int_last": (np.array([0, 3, 1, 3], np.int32), 4, -1, popxl.float32),
    "negative_and_oor_axis0": (np.array([[-1, 2], [5, -4]], np.int32), 4, 0, popxl.float32),
    "float_truncated_middle": (np.array([[1.7, -0.5, 2.2]], np.float32), 3, 1, popxl.float16),
    "uint_int_values": (np.array([2, 0, 9], np.uint32), 3, 1, popxl.int32),
}


def _onehot_oracle(idx, depth, axis, off, on):
    i = np.trunc(idx.astype(np.float64)).astype(np.int64)
    i = np.where(i < 0, i + depth, i)
    hot = i[..., None] == np.arange(depth)
    out = np.where(hot, on, off)
    return np.moveaxis(out, -1, axis % (idx.ndim + 1))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(ONEHOT_CASES))
def test_onehot_roundtrip(case, tmp_path):
    idx, depth, axis, vdt = ONEHOT_CASES[case]
    idt = {np.int32: popxl.int32, np.uint32: popxl.uint32, np.float32: popxl.float32}[idx.dtype.type]
    vals = np.array([-2, 5], dtype=vdt.as_numpy())

    def fn(i):
        return ops.onehot(i, popxl.constant(np.int32(depth)), popxl.constant(vals, vdt), axis)

    ir, (js,) = _ir({"i": (idx.shape, idt)}, fn)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={js: idx})
    assert "popops::encodeOneHot(" in src
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], _onehot_oracle(idx, depth, axis, vals[0], vals[1]))


@pytest.mark.slow
@pytest.mark.parametrize("dt,inc,mod", [(popxl.int32, 3, 5), (popxl.float32, 0.75, 2.5),
                                         (popxl.int32, -4, 3)])
@pytest.mark.parametrize("inplace", [False, True])
def test_increment_mod_roundtrip(dt, inc, mod, inplace, tmp_path):
    fn = (lambda x: ops.increment_mod_(x, inc, mod)) if inplace else (lambda x: ops.increment_mod(x, inc, mod))
    ir, (xs,) = _ir({"x": ((3, 5), dt)}, fn)
    rng = np.random.default_rng(7)
    x = (rng.integers(-20, 20, size=(3, 5)) if dt == popxl.int32 else rng.normal(size=(3, 5)) * 6).astype(
        dt.as_numpy())
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "popops::expr::Rem(" in src
    oracle = np.fmod(x.astype(np.float64) + np.trunc(inc) if dt == popxl.int32 else x.astype(np.float64) + inc,
                     np.trunc(mod) if dt == popxl.int32 else mod)
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_allclose(got["y"], oracle.astype(dt.as_numpy()), rtol=1e-6, atol=1e-6)


NORM_CASES = {  # op, shape, axes, keepdims
    "l1": ("l1", (4, 6), [1], False),
    "l2_all_keep": ("l2", (3, 4, 5), [0, 2], True),
    "log_sum": ("logsum", (5, 3), [0], False),
    "log_sum_exp": ("logsumexp", (2, 8, 3), [1], False),
}


def _norm_oracle(op, x, axes, keep):
    t = torch.tensor(x.astype(np.float64))
    if op == "l1":
        r = t.abs().sum(dim=axes, keepdim=keep)
    elif op == "l2":
        r = (t * t).sum(dim=axes, keepdim=keep).sqrt()
    elif op == "logsum":
        r = t.sum(dim=axes, keepdim=keep).log()
    else:
        r = torch.logsumexp(t, dim=axes, keepdim=keep)
    return r.numpy()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(NORM_CASES))
def test_norm_reduce_roundtrip(case, tmp_path):
    op, shape, axes, keep = NORM_CASES[case]
    ir, (xs,) = _ir({"x": (shape, popxl.float32)}, lambda x: getattr(ops, op)(x, axes, keep))
    rng = np.random.default_rng(13)
    x = rng.normal(size=shape).astype(np.float32)
    if op == "logsum":
        x = np.abs(x) + 0.1
    if op == "logsumexp":
        x[0, :, 0] = -np.inf   # a group of -inf: -inf
        x[1, 3, 2] = np.inf    # a group holding +inf: +inf
        x[1, :, 1] *= 40       # large values: the maximum is subtracted
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "ipuxl_export::normReduce(" in src
    oracle = _norm_oracle(op, x, axes, keep).astype(np.float32)
    np.testing.assert_allclose(got["y"], oracle, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(got["y"], want["y"], rtol=2e-6, atol=1e-6)


def test_emission_names_the_poplibs_calls(tmp_path):
    """Without building: each op is emitted through the PopLibs call PopART's
    opx would use, and an index type the export lacks is refused naming
    the op."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((4, 3), np.float32), name="x")
        i = popxl.constant(np.array([1, 2], np.int32), name="i")
        outs = [ops.gather(x, i), ops.argmin(x, 1), ops.logsumexp(x, [0]),
                ops.onehot(i, popxl.constant(np.int32(3)), popxl.constant(np.array([0.0, 1.0], np.float32)), 0),
                ops.increment_mod(x, 1.0, 2.0)]
        for k, y in enumerate(outs):
            ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name=f"y{k}"), y)
    export_poplar(ir, str(tmp_path / "p"))
    src = (tmp_path / "p" / "program.cpp").read_text()
    for call in ("popops::multiSlice(", "popnn::argMin(", "popops::encodeOneHot(",
                 "popops::Operation::MAX", "popops::expr::Rem("):
        assert call in src, call
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((4, 3), np.float32), name="x")
        i = popxl.constant(np.array([1, 2], np.int64), popxl.int64, name="i")
        y = ops.gather(x, i)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    with pytest.raises(NotImplementedError, match="dtype int64"):
        export_poplar(ir, str(tmp_path / "q"))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["add", "const", "tensor"])
def test_sparse_accumulate_roundtrip(mode, tmp_path):
    """var_updates.sparse_accumulate_: the gather-gradient layout's slices
    added into an accumulator at the indices along axis 1, repeated
    indices accumulating, out-of-range ones skipped."""
    idx = np.array([[2, 0], [2, 7]], np.int32)  # 7 is outside [0, 4)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((3, 2, 2, 5), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        acc = popxl.variable(np.arange(60, dtype=np.float32).reshape(3, 4, 5) * 0.1, name="acc")
        f = {"add": None, "const": 0.5, "tensor": popxl.constant(np.float32(-1.5), name="f")}[mode]
        ops.var_updates.sparse_accumulate_(acc, x, popxl.constant(idx, name="idx"), axis=1, f=f)
        ops.host_store(popxl.d2h_stream(acc.shape, acc.dtype, name="y"), acc + 0.0)
    x = np.random.default_rng(4).normal(size=(3, 2, 2, 5)).astype(np.float32)
    got, got_w, want, want_w, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "popops::multiUpdateAdd(graph, target" in src
    fv = {"add": 1.0, "const": 0.5, "tensor": -1.5}[mode]
    oracle = np.arange(60, dtype=np.float64).reshape(3, 4, 5) * np.float32(0.1)
    for (a, b), i in np.ndenumerate(idx):
        if 0 <= i < 4:
            oracle[:, i, :] += fv * x[:, a, b, :]
    np.testing.assert_allclose(got["y"], oracle, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_w["acc"], want_w["acc"], rtol=1e-6, atol=1e-6)
