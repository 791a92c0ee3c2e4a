"""ops.ipu_copy: values, gradients (the copy back), placement inference and
errors as PopXL's, the IPU count a Session asks for, and the Copy between
IPUs in the faithful program."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.errors import UndefinedValue


def _run(ir, feeds):
    with popxl.Session(ir, "ipu_model") as s:
        return s, s.run(feeds)


def test_values_across_two_ipus():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, popxl.float32, "x")
        with popxl.ipu(0):
            a = ops.host_load(xs) * 2.0
        b = ops.ipu_copy(a, 1)
        with popxl.ipu(1):
            c = b + 1.0
            d = c.copy_to_ipu(0)
        with popxl.ipu(0):
            e = d - a
        outs = {}
        for t in (b, c, e):
            s = popxl.d2h_stream(t.shape, t.dtype)
            with popxl.ipu(t.ipu):
                ops.host_store(s, t)
            outs[s] = t
    assert (b.ipu, c.ipu, d.ipu, e.ipu) == (1, 1, 0, 0)
    assert a.producer.ipu == 0 and b.producer.ipu == 0  # the copy runs on its source
    session, got = _run(ir, {xs: x})
    r = {outs[s]: v for s, v in got.items()}
    np.testing.assert_array_equal(r[b], x * 2)
    np.testing.assert_array_equal(r[c], x * 2 + 1)
    np.testing.assert_array_equal(r[e], (x * 2 + 1) - x * 2)  # float32, as NumPy rounds
    assert session._get_ipus_per_replica() == 2 and session._get_ipu_count() == 2


def test_ipu_count_rounds_to_power_of_two():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(0):
            a = popxl.variable(np.ones(2, np.float32)) + 0
        a = a.copy_to_ipu(2)
        with popxl.ipu(2):
            ops.host_store(popxl.d2h_stream(a.shape, a.dtype), a + 1)
    with popxl.Session(ir, "ipu_model") as s:
        assert s._get_ipus_per_replica() == 3
        assert s._get_ipu_count() == 4


def test_gradient_is_copied_back():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    w1 = rng.normal(size=(3, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        fwd = ir.create_empty_graph("fwd")
        with fwd:
            xi = popxl.graph_input(x.shape, popxl.float32, "x")
            wi = popxl.graph_input(w1.shape, popxl.float32, "w")
            with popxl.ipu(0):
                h = ops.matmul(xi, wi)
            h1 = h.copy_to_ipu(1)
            with popxl.ipu(1):
                y = ops.sum(h1 * h1)
            popxl.graph_output(y)
        info = popxl.transforms.autodiff(fwd, grads_required=[xi, wi])
    bwd = info.graph
    copies = [op for op in bwd._ops if op.type == "IpuCopy"]
    assert len(copies) == 1
    cp = copies[0]
    assert (cp.attrs["_source"], cp.attrs["_destination"]) == (1, 0)
    # Gradient ops run on the IPU of their forward op (h1 * h1's two partial
    # gradients are summed on IPU 1, where they are).
    assert {op.ipu for op in bwd._ops if op.type == "MatMul"} == {0}
    assert {op.ipu for op in bwd._ops if op.type == "Mul"} == {1}
    sums = [op for op in bwd._ops if "GradSum" in op.name]
    assert sums and all(op.ipu == 1 for op in sums)
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, popxl.float32, "xs")
        xt = ops.host_load(xs)
        wv = popxl.variable(w1, name="w1")
        call = ops.call_with_info(fwd, xt, wv)
        seed = popxl.constant(np.float32(1.0))
        with popxl.ipu(1):
            gx, gw = ops.call(bwd, seed, inputs_dict=info.inputs_dict(call))
        streams = []
        for t in (gx, gw):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    _, got = _run(ir, {xs: x})
    # y = sum((x w)^2): dy/dx = 2 (x w) w^T, dy/dw = 2 x^T (x w)
    hw = x.astype(np.float64) @ w1
    np.testing.assert_allclose(got[streams[0]], 2 * hw @ w1.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[streams[1]], 2 * x.T.astype(np.float64) @ hw, rtol=1e-5,
                               atol=1e-5)


def test_source_inference_and_errors():
    ir = popxl.Ir()
    g = ir.main_graph
    with g:
        a = popxl.variable(1)
        with pytest.raises(ValueError, match="Could not infer the ipu") as e:
            ops.ipu_copy(a, 1)
        assert "Please specify `source`" in str(e.value)
        a1 = ops.ipu_copy(a, 1, 0)            # explicit source
        assert a1.ipu == 1 and a.ipu == 0      # the variable is placed by its consumer
        back = a1.copy_to_ipu(0)               # source inferred: the copy's destination
        assert back.producer.ipu == 1 and back.ipu == 0
        c = popxl.constant(2)
        c1 = c.copy_to_ipu(1, 0)
        assert c1.ipu == 1
        with popxl.ipu(None):                  # unannotated: PopXL's ipu(None)
            u = popxl.variable(3) + 1
        with pytest.raises(ValueError, match="Could not infer the ipu"):
            ops.ipu_copy(u, 1)
        with pytest.raises(ValueError, match="destination must be a non-negative int"):
            ops.ipu_copy(a1, -1)
        with pytest.raises(TypeError, match="must be a Tensor"):
            ops.ipu_copy(np.ones(2), 1, 0)
    assert len(g.variables) == 2 and any(op.type == "IpuCopy" for op in g.ops)


def test_placement_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(0):
            a = popxl.variable(np.ones(3, np.float32)) + 1
            a2 = a.reshape((1, 3))
        with popxl.ipu(1):
            b = popxl.variable(np.ones(3, np.float32)) + 1
            with pytest.raises(ValueError, match="different IPUs: 0 != 1"):
                ops.add(a, b)
            with pytest.raises(ValueError, match="different IPUs"):
                ops.matmul(a2, b.reshape((3, 1)))
            # After a copy the operands agree.
            ok = ops.add(a.copy_to_ipu(1), b)
            assert ok.ipu == 1
        # A variable read on IPU 0 is on IPU 0 for PopXL's check.
        w = popxl.variable(np.ones(3, np.float32))
        with popxl.ipu(0):
            _ = w * 2
        with popxl.ipu(1):
            with pytest.raises(ValueError, match="different IPUs"):
                ops.mul(w, b)


def test_tensor_ipu_undefined_without_consumers():
    with popxl.Ir().main_graph:
        a = popxl.variable(1)
        with pytest.raises(UndefinedValue):
            _ = a.ipu
        with pytest.raises(UndefinedValue):
            _ = a.tile_set
        with popxl.ipu(1):
            b = a + 0
        assert a.ipu == 1 and b.ipu == 1


def test_describe_shows_copies_between_ipus():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((4,), popxl.float32, "x")
        with popxl.ipu(0):
            x = ops.host_load(xs)
        y = x.copy_to_ipu(1)
        with popxl.ipu(1):
            z = y * 3.0
            ops.host_store(popxl.d2h_stream(z.shape, z.dtype, "z"), z)
    with popxl.Session(ir, "ipu_model") as s:
        text = s.engine.describe()
        counts = s.engine.program_counts()
        out = s.run({xs: np.arange(4, dtype=np.float32)})
    line = [l for l in text.splitlines() if "ipu 0 -> ipu 1" in l]
    assert len(line) == 1 and line[0].strip().startswith("Copy(") and "_c1" in line[0], text
    assert counts.get("IpuCopy") == 1
    np.testing.assert_array_equal(list(out.values())[0], np.arange(4) * 3.0)


def test_copy_inside_subgraph_and_repeat():
    """A copy in a repeated graph moves a value to IPU 1 and back each step."""
    ir = popxl.Ir()
    with ir.main_graph:
        body = ir.create_empty_graph("body")
        with body:
            x = popxl.graph_input((2,), popxl.float32, "x")
            with popxl.ipu(0):
                x0 = x + 0.0
            with popxl.ipu(1):
                y = x0.copy_to_ipu(1) * 2.0
            popxl.graph_output(y.copy_to_ipu(0))
        v = popxl.variable(np.array([1.0, -1.0], np.float32))
        (out,) = ops.repeat(body, 5, v)
        ops.host_store(popxl.d2h_stream(out.shape, out.dtype, "o"), out)
    with popxl.Session(ir, "ipu_model") as s:
        got = list(s.run().values())[0]
    np.testing.assert_array_equal(got, np.array([32.0, -32.0], np.float32))


def test_unread_copy_compiles_and_runs():
    """A copy whose result nothing reads (the host passes skip dead kernels only)."""
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(0):
            a = popxl.variable(np.ones((2, 2), np.float32)) + 1
        a1 = a.copy_to_ipu(1)
        with popxl.ipu(1):
            _ = a1 @ popxl.variable(np.ones((2, 2), np.float32))
        ops.host_store(popxl.d2h_stream(a.shape, a.dtype, "a"), a)
    with popxl.Session(ir, "ipu_model") as s:
        np.testing.assert_array_equal(list(s.run().values())[0], np.full((2, 2), 2.0))
