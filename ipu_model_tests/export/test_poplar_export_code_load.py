"""``ipuxl export poplar`` of remote_code_load (PopART's RemoteCodeLoadOpx):
the loaded graph's Function gets a ``poplar::FunctionBuffer`` and each load
is ``Copy(buffer, function)``. Round trips (slow: they compile C++) compare
with ``Session.run`` and NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.export import export_poplar
from poplar_roundtrip import roundtrip


def _ir(load_first: bool = True):
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((3, 4), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        w = popxl.variable(np.linspace(-1, 1, 4).astype(np.float32), name="w")

        def body(t, v):
            return ops.tanh(t * v) + 1.0

        g = ir.create_graph(body, x, w)
        if load_first:
            ops.remote_code_load(g, "executable")
        y = ops.call(g, x, w)[0]
        if not load_first:
            ops.remote_code_load(g, "executable")
        z = ops.call(g, y, w)[0]
        ops.host_store(popxl.d2h_stream(z.shape, z.dtype, name="z"), z)
    return ir, xs


@pytest.mark.slow
def test_remote_code_load_round_trip(tmp_path):
    ir, xs = _ir()
    x = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    got, _, want, _, src, summary = roundtrip(ir, tmp_path, inputs={xs: x})
    assert src.count("graph.addFunctionBuffer(") == 1  # one buffer per Function
    assert src.count("poplar::program::Copy(ipuxl_export::FB[") == 1
    assert summary["functions"] == 1
    np.testing.assert_allclose(got["z"], want["z"], rtol=1e-6)
    w = np.linspace(-1, 1, 4)
    y = np.tanh(x.astype(np.float64) * w) + 1
    np.testing.assert_allclose(got["z"], np.tanh(y * w) + 1, rtol=1e-6)


@pytest.mark.slow
def test_call_before_the_code_load_runs(tmp_path):
    """As PopXL's user guide (code_loading_nested) does: the code comes with
    the executable, a later load rewrites it."""
    ir, xs = _ir(load_first=False)
    x = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    np.testing.assert_allclose(got["z"], want["z"], rtol=1e-6)


def test_code_load_of_an_uncalled_graph_is_refused(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32), name="x")
        g = ir.create_graph(lambda t: t + 1.0, x)
        ops.remote_code_load(g, "executable")
        ops.host_store(popxl.d2h_stream(x.shape, x.dtype, name="y"), x * 2.0)
    with pytest.raises(NotImplementedError, match=r"op RemoteCodeLoad \('remote_code_load'\) of a graph"):
        export_poplar(ir, str(tmp_path))
