"""Call sites use caller tensors in place where that cannot change results.

The engine skips the copy of a call input when the called graph never
writes it (or writes it by reference, which must reach the caller anyway),
and writes a call output straight into the caller's tensor. These tests pin
the semantics that must survive: results as if every value were copied.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def _run(ir, *tensors):
    streams = []
    with ir.main_graph:
        for t in tensors:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
        counts = sess.engine.program_counts()
    return [out[s] for s in streams], counts


def test_read_only_inputs_and_outputs_are_not_copied():
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.full((4, 4), 2.0, np.float32), name="w")
        x = popxl.variable(np.ones((4, 4), np.float32), name="x")
        g = ir.create_graph(lambda a, b: a @ b, x, w)
        (y1,) = ops.call(g, x, w)
        (y2,) = ops.call(g, y1, w)
    (r1, r2), counts = _run(ir, y1, y2)
    np.testing.assert_allclose(r1, np.full((4, 4), 8.0))
    np.testing.assert_allclose(r2, np.full((4, 4), 64.0))
    assert counts.get("ElidedCopy", 0) == 6  # 2 inputs + 1 output at each call site


def test_local_write_to_an_input_does_not_reach_the_caller():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32), name="x")

        def bump(t):
            t += 1.0  # in place on the graph's own copy
            return t * 2.0

        g = ir.create_graph(bump, x)
        (y,) = ops.call(g, x)
        z = x + 0.0
    (ry, rz), _ = _run(ir, y, z)
    np.testing.assert_allclose(ry, [4.0, 4.0, 4.0])
    np.testing.assert_allclose(rz, [1.0, 1.0, 1.0])


def test_by_reference_write_reaches_the_caller_and_other_inputs_see_the_old_value():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32), name="x")

        def inc(a: popxl.TensorByRef, b: popxl.Tensor):
            ops.var_updates.copy_var_update_(a, a + 5.0)
            return b + 0.0  # must read the value before the write

        g = ir.create_graph(inc, x, x)
        (old,) = ops.call(g, x, x)
        new = x + 0.0
    (r_old, r_new), _ = _run(ir, old, new)
    np.testing.assert_allclose(r_old, [1.0, 1.0])
    np.testing.assert_allclose(r_new, [6.0, 6.0])


def test_graph_called_by_call_and_repeat_sites_stays_consistent():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.float32(1.0), name="x")
        k = popxl.variable(np.float32(3.0), name="k")

        def step(a, b):
            return a * b

        g = ir.create_graph(step, x, k)
        (a1,) = ops.call(g, x, k)          # 3
        (a2,) = ops.repeat(g, 2, a1, k)    # 27
        (a3,) = ops.call(g, a2, k)         # 81
        (a4,) = ops.repeat(g, 0, a3, k)    # 81
    (r1, r2, r3, r4), _ = _run(ir, a1, a2, a3, a4)
    assert [float(v) for v in (r1, r2, r3, r4)] == [3.0, 27.0, 81.0, 81.0]


def test_nested_calls_and_passthrough_and_constant_outputs():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.arange(4, dtype=np.float32), name="x")

        def inner(a):
            return a + 1.0, a  # computed output and a passthrough

        gi = ir.create_graph(inner, x)

        def outer(a):
            b, same = ops.call(gi, a)
            c, _ = ops.call(gi, b)
            return c, same, popxl.constant(np.full(4, 7.0, np.float32))

        go = ir.create_graph(outer, x)
        c1, s1, k1 = ops.call(go, x)
        c2, s2, k2 = ops.call(go, c1)
    (rc1, rs1, rk1, rc2, rs2, rk2), _ = _run(ir, c1, s1, k1, c2, s2, k2)
    base = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(rc1, base + 2)
    np.testing.assert_allclose(rs1, base)
    np.testing.assert_allclose(rc2, base + 4)
    np.testing.assert_allclose(rs2, base + 2)
    np.testing.assert_allclose(rk1, 7.0)
    np.testing.assert_allclose(rk2, 7.0)


def test_output_used_inside_the_graph_after_it_is_produced():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.full(3, 2.0, np.float32), name="x")

        def f(a):
            y = a * a
            z = y + y  # reads the output after it is written
            return y, z

        g = ir.create_graph(f, x)
        y1, z1 = ops.call(g, x)
        y2, z2 = ops.call(g, z1)
    (ry1, rz1, ry2, rz2), _ = _run(ir, y1, z1, y2, z2)
    np.testing.assert_allclose(ry1, 4.0)
    np.testing.assert_allclose(rz1, 8.0)
    np.testing.assert_allclose(ry2, 64.0)
    np.testing.assert_allclose(rz2, 128.0)
