"""The C++ core: lowering structure, memory planning and engine safety."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl._core_loader import core


def _chain_ir(n, shape=(64, 64)):
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream(shape, popxl.float32, name="x")
        x = ops.host_load(s)
        w = popxl.variable(np.full(shape, 0.5, np.float32), name="w")
        for _ in range(n):
            x = ops.mul(ops.add(x, w), w)
        o = popxl.d2h_stream(shape, popxl.float32, name="y")
        ops.host_store(o, x)
    return ir, s, o


def test_memory_planning_reuses_dead_intermediates_and_keeps_results():
    ir, s, o = _chain_ir(20)
    data = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({s: data})[o]
        eng = sess.engine
        planned, unplanned = eng.arena_bytes, eng.unplanned_bytes
    expect = data.copy()
    for _ in range(20):
        expect = (expect + np.float32(0.5)) * np.float32(0.5)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    # 41 intermediates of 16 KiB live one or two at a time: the plan must
    # need a small fraction of the naive total.
    assert planned < unplanned / 4


def test_subgraph_called_twice_has_one_function_and_copies_per_call_site():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones((2, 2), np.float32), name="a")

        def f(x):
            return x + x

        g = ir.create_graph(f, a)
        (b,) = ops.call(g, a)
        (c,) = ops.call(g, b)
        o = popxl.d2h_stream(c.shape, c.dtype, name="c")
        ops.host_store(o, c)
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_array_equal(sess.run()[o], np.full((2, 2), 4.0, np.float32))
        counts = sess.engine.program_counts()
        text = sess.engine.describe()
    assert counts["Function"] == 1
    assert counts["Call"] == 2
    assert g.name.endswith("f_subgraph(0)")
    assert text.count(f"Function {g.name}:") == 1


def test_repeat_with_swapped_loop_carried_outputs():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.array([1.0], np.float32), name="a")
        b = popxl.variable(np.array([10.0], np.float32), name="b")

        def swap_and_add(x, y):
            return y + 0.0, x + 1.0

        g = ir.create_graph(swap_and_add, a, b)
        x3, y3 = ops.repeat(g, 3, a, b)
        x0, y0 = ops.repeat(g, 0, a, b)
        outs = []
        for t in (x3, y3, x0, y0):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            outs.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    # (1, 10) -> (10, 2) -> (2, 11) -> (11, 3)
    assert [float(r[s][0]) for s in outs] == [11.0, 3.0, 1.0, 10.0]


def test_kernel_registry_lists_core_kernels():
    names = set(core.kernel_names())
    assert {"Add", "MatMul", "Init", "Identity"} <= names


def test_core_rejects_bad_program_without_crashing():
    d = core.ProgramDesc()
    g = d.add_graph("main")
    a = d.add_tensor(g, "a", 10, [2, 3], 0)
    b = d.add_tensor(g, "b", 10, [4, 5], 0)
    out = d.add_tensor(g, "o", 10, [2, 3], 0)
    d.add_op(g, "Add", "add", [a, b], [out], {}, [], [])
    d.set_graph_io(g, [], [])
    with pytest.raises(ValueError, match="do not broadcast"):
        core.Engine(d, g)
    with pytest.raises(ValueError, match="no tensor"):
        d.add_op(g, "Add", "add2", [a, 99], [out], {}, [], [])
    with pytest.raises(ValueError, match="invalid dtype"):
        d.add_tensor(g, "bad", 42, [1], 0)


def test_core_unknown_op_type_is_not_implemented():
    d = core.ProgramDesc()
    g = d.add_graph("main")
    a = d.add_tensor(g, "a", 10, [2], 0)
    d.add_op(g, "NoSuchOp", "x", [], [a], {}, [], [])
    with pytest.raises(NotImplementedError, match="NoSuchOp"):
        core.Engine(d, g)


def test_remote_code_load_records_and_runs():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.float32(2.0), name="x")

        def double(t):
            return t + t

        g = ir.create_graph(double, x.spec)
        with popxl.in_sequence():
            ops.remote_code_load(g, destination="executable")
            (y,) = ops.call(g, x)
        s = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(s, y)
        with pytest.raises(NotImplementedError, match="compute_buffer"):
            ops.remote_code_load(g, destination="compute_buffer")
        with pytest.raises(ValueError, match="destination"):
            ops.remote_code_load(g, destination="nowhere")
        with pytest.raises(TypeError, match="Graph"):
            ops.remote_code_load(x, destination="executable")
    assert [op.type for op in ir.main_graph.ops][:2] == ["RemoteCodeLoad", "Call"]
    with popxl.Session(ir, "ipu_model") as sess:
        assert float(sess.run()[s]) == 4.0


def test_weight_only_written_by_host_is_repacked_after_each_host_write():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w1 = rng.standard_normal((64, 48)).astype(np.float32)
    w2 = rng.standard_normal((64, 48)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, popxl.float32, name="x")
        w = popxl.variable(w1, name="w")
        y = ops.host_load(xs) @ w
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_allclose(sess.run({xs: x})[ys], x @ w1, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(sess.run({xs: x})[ys], x @ w1, rtol=1e-5, atol=1e-5)
        sess.write_variable_data(w, w2)
        np.testing.assert_allclose(sess.run({xs: x})[ys], x @ w2, rtol=1e-5, atol=1e-5)
    sess.write_variable_data(w, w1)  # detached: reaches the device on the next attach
    with sess:
        np.testing.assert_allclose(sess.run({xs: x})[ys], x @ w1, rtol=1e-5, atol=1e-5)
