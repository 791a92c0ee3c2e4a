"""Conformance of subgraph control flow: call, call_with_info / CallSiteInfo,
TensorByRef, repeat, host IO inside repeated graphs, conditional, and the
errors for badly bound inputs. Results are checked against NumPy."""
from typing import List

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.errors import popart_exception


def _run(ir, feeds=None):
    with popxl.Session(ir, "ipu_model") as sess:
        return sess.run(feeds or {})


def _store(t, name):
    s = popxl.d2h_stream(t.shape, t.dtype, name)
    ops.host_store(s, t)
    return s


class TestCall:
    def test_call_multiple_outputs_and_inputs_dict(self):
        ir = popxl.Ir()

        def fn(x, y):
            scale = popxl.graph_input((), popxl.float32, "scale")
            return x * scale + y, x - y

        with ir.main_graph:
            a = popxl.variable(np.array([1, 2, 3], np.float32), name="a")
            b = popxl.variable(np.array([4, 5, 6], np.float32), name="b")
            s = popxl.constant(np.float32(10), name="s")
            g = ir.create_graph(fn, a, b)
            scale_in = g.inputs_by_name["scale"]
            o1, o2 = ops.call(g, a, inputs_dict={g.inputs[1]: b, scale_in: s})
            p1, _ = ops.call(g, b, a, s)
            outs = [_store(t, n) for t, n in ((o1, "o1"), (o2, "o2"), (p1, "p1"))]
        got = _run(ir)
        A, B = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
        np.testing.assert_allclose(got[outs[0]], A * 10 + B)
        np.testing.assert_allclose(got[outs[1]], A - B)
        np.testing.assert_allclose(got[outs[2]], B * 10 + A)
        assert o1.shape == (3,) and o1.dtype == popxl.float32
        assert o1.graph == ir.main_graph

    def test_list_inputs(self):
        ir = popxl.Ir()

        def fn(xs: List[popxl.Tensor]):
            total = xs[0]
            for x in xs[1:]:
                total = total + x
            return total

        with ir.main_graph:
            vs = [popxl.variable(np.float32(i + 1)) for i in range(3)]
            g = ir.create_graph(fn, vs)
            (y,) = ops.call(g, vs)
            s = _store(y, "y")
        assert _run(ir)[s] == 6

    def test_nested_calls(self):
        ir = popxl.Ir()

        def inner(x):
            return x * 2

        with ir.main_graph:
            v = popxl.variable(np.array([1.5, -2], np.float32))
            g_inner = ir.create_graph(inner, v)

            def outer(x):
                (y,) = ops.call(g_inner, x)
                (z,) = ops.call(g_inner, y)
                return z + 1

            g_outer = ir.create_graph(outer, v)
            (out,) = ops.call(g_outer, v)
            s = _store(out, "out")
        np.testing.assert_allclose(_run(ir)[s], np.array([1.5, -2]) * 4 + 1)

    def test_call_by_value_does_not_modify_parent(self):
        ir = popxl.Ir()

        def fn(x):
            ops.var_updates.copy_var_update_(x, x + 1)
            return x * 1

        with ir.main_graph, popxl.in_sequence():
            v = popxl.variable(np.array([1, 2], np.float32), name="v")
            g = ir.create_graph(fn, v)
            (y,) = ops.call(g, v)
            sv, sy = _store(v, "v"), _store(y, "y")
        got = _run(ir)
        np.testing.assert_allclose(got[sy], [2, 3])  # the write is seen inside the graph
        np.testing.assert_allclose(got[sv], [1, 2])  # but not by the caller

    def test_graph_with_no_inputs_or_outputs(self):
        ir = popxl.Ir()
        with ir.main_graph:
            d = popxl.d2h_stream((2,), popxl.float32, "d")

            def fn():
                ops.host_store(d, popxl.constant(np.array([3, 4], np.float32)))

            g = ir.create_graph(fn)
            assert ops.call(g) == ()
        np.testing.assert_allclose(_run(ir)[d], [3, 4])


class TestCallSiteInfo:
    def _build(self):
        ir = popxl.Ir()

        def fn(x, y):
            return x + y, x * y

        with ir.main_graph:
            a = popxl.variable(np.float32(2), name="a")
            b = popxl.variable(np.float32(5), name="b")
            g = ir.create_graph(fn, a, b)
            info = ops.call_with_info(g, a, b)
        return ir, g, info, a, b

    def test_helpers(self):
        ir, g, info, a, b = self._build()
        assert info.called_graph == g
        assert info.inputs == (a, b)
        assert len(info.outputs) == 2
        assert info.parent_input(0) == a and info.parent_input(1) == b
        assert info.parent_output(1) == info.outputs[1]
        for i in range(2):
            assert info.graph_to_parent_input_index(i) == i
            assert info.parent_to_graph_input_index(i) == i
            assert info.graph_to_parent_output_index(i) == i
            assert info.parent_to_graph_output_index(i) == i
        assert info.graph_to_parent(g.inputs[1]) == b
        assert info.graph_to_parent(g.outputs[0]) == info.outputs[0]
        assert info.parent_to_graph(a) == g.inputs[0]

    def test_graph_to_parent_unknown_tensor(self):
        ir, g, info, a, b = self._build()
        with pytest.raises(ValueError):
            info.graph_to_parent(a)  # a parent tensor, not a graph tensor

    def test_outputs_values(self):
        ir, g, info, a, b = self._build()
        with ir.main_graph:
            s0, s1 = _store(info.outputs[0], "s0"), _store(info.outputs[1], "s1")
        got = _run(ir)
        assert got[s0] == 7 and got[s1] == 10

    def test_set_parent_input_modified(self):
        ir = popxl.Ir()

        def fn(x):
            value = popxl.graph_input(x.shape, x.dtype, "value")
            ops.var_updates.copy_var_update_(x, x + value)

        with ir.main_graph, popxl.in_sequence():
            x = popxl.variable(np.array([1, 2], np.int32), name="x")
            k = popxl.constant(np.array([10, 20], np.int32), name="k")
            g = ir.create_graph(fn, x)
            info = ops.call_with_info(g, x, k)
            info.set_parent_input_modified(x)
            s = _store(x, "x_out")
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_array_equal(sess.run()[s], [11, 22])
            np.testing.assert_array_equal(sess.run()[s], [21, 42])
            np.testing.assert_array_equal(sess.get_tensor_data(x), [21, 42])

    def test_set_parent_input_modified_unknown(self):
        ir, g, info, a, b = self._build()
        with ir.main_graph:
            other = popxl.variable(1.0)
        with pytest.raises(ValueError):
            info.set_parent_input_modified(other)


class TestTensorByRef:
    def test_by_ref_write_visible_at_every_call_site(self):
        ir = popxl.Ir()

        def add_into(acc: popxl.TensorByRef, x: popxl.Tensor):
            ops.var_updates.copy_var_update_(acc, acc + x)

        with ir.main_graph, popxl.in_sequence():
            acc = popxl.variable(np.zeros(3, np.float32), name="acc")
            x1 = popxl.constant(np.array([1, 2, 3], np.float32))
            x2 = popxl.constant(np.array([10, 20, 30], np.float32))
            g = ir.create_graph(add_into, acc, x1)
            assert {t.name for t in g._by_ref_inputs} == {"acc"}
            ops.call(g, acc, x1)
            ops.call(g, acc, x2)
            s = _store(acc, "acc_out")
        np.testing.assert_allclose(_run(ir)[s], [11, 22, 33])


class TestRepeat:
    def test_loop_carried(self):
        ir = popxl.Ir()

        def step(x, k):
            return x * 2 + k

        with ir.main_graph:
            x = popxl.variable(np.array([1, -1], np.float32), name="x")
            k = popxl.variable(np.array([0.5, 3], np.float32), name="k")
            g = ir.create_graph(step, x, k)
            (y,) = ops.repeat(g, 5, x, k)
            s = _store(y, "y")
        ref = np.array([1, -1], np.float32)
        for _ in range(5):
            ref = ref * 2 + np.array([0.5, 3], np.float32)
        np.testing.assert_allclose(_run(ir)[s], ref)

    @pytest.mark.parametrize("count", [0, 1, 2, 3, 7])
    def test_swapped_outputs(self, count):
        ir = popxl.Ir()

        def swap(a, b):
            return b, a

        with ir.main_graph:
            a = popxl.variable(np.array([1, 2], np.int32), name="a")
            b = popxl.variable(np.array([3, 4], np.int32), name="b")
            g = ir.create_graph(swap, a, b)
            ya, yb = ops.repeat(g, count, a, b)
            sa, sb = _store(ya, "ya"), _store(yb, "yb")
        got = _run(ir)
        first, second = ([1, 2], [3, 4]) if count % 2 == 0 else ([3, 4], [1, 2])
        np.testing.assert_array_equal(got[sa], first)
        np.testing.assert_array_equal(got[sb], second)

    @pytest.mark.parametrize("count", [0, 1, 10])
    def test_fibonacci(self, count):
        ir = popxl.Ir()

        def fib(a, b):
            return b, a + b

        with ir.main_graph:
            a = popxl.variable(np.int32(0), name="a")
            b = popxl.variable(np.int32(1), name="b")
            g = ir.create_graph(fib, a, b)
            fa, fb = ops.repeat(g, count, a, b)
            sa, sb = _store(fa, "fa"), _store(fb, "fb")
        got = _run(ir)
        ra, rb = 0, 1
        for _ in range(count):
            ra, rb = rb, ra + rb
        assert got[sa] == ra and got[sb] == rb

    def test_repeat_count_zero_returns_inputs(self):
        ir = popxl.Ir()

        def fn(x):
            return x + 100

        with ir.main_graph:
            x = popxl.variable(np.array([1, 2], np.float32))
            g = ir.create_graph(fn, x)
            (y,) = ops.repeat(g, 0, x)
            s = _store(y, "y")
        np.testing.assert_allclose(_run(ir)[s], [1, 2])

    def test_repeat_by_ref_accumulates(self):
        ir = popxl.Ir()

        def add_into(acc: popxl.TensorByRef, x: popxl.Tensor):
            ops.var_updates.copy_var_update_(acc, acc + x)

        with ir.main_graph, popxl.in_sequence():
            acc = popxl.variable(np.zeros(2, np.float32), name="acc")
            x = popxl.constant(np.array([1, 0.5], np.float32))
            g = ir.create_graph(add_into, acc, x)
            ops.repeat(g, 4, acc, x)
            s = _store(acc, "acc_out")
        np.testing.assert_allclose(_run(ir)[s], [4, 2])

    def test_host_io_inside_repeat(self):
        n = 6
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((3,), popxl.float32, "h")
            d = popxl.d2h_stream((3,), popxl.float32, "d")
            d_sum = popxl.d2h_stream((3,), popxl.float32, "d_sum")

            def body(total):
                x = ops.host_load(h, "x")
                ops.host_store(d, x * x)
                return total + x

            start = popxl.constant(np.zeros(3, np.float32), name="start")
            g = ir.create_graph(body, start)
            (total,) = ops.repeat(g, n, start)
            ops.host_store(d_sum, total)
        ir.num_host_transfers = n
        data = np.random.default_rng(1).standard_normal((n, 3)).astype(np.float32)
        with popxl.Session(ir, "ipu_model") as sess:
            got = sess.run({h: data})
        assert got[d].shape == (n, 3) and got[d_sum].shape == (n, 3)
        np.testing.assert_allclose(got[d], data * data, rtol=1e-6)
        # host_store of d_sum ran once: only transfer 0 is defined.
        np.testing.assert_allclose(got[d_sum][0], data.sum(axis=0), rtol=1e-5, atol=1e-6)

    def test_carried_shape_mismatch(self):
        ir = popxl.Ir()

        def fn(x):
            return popxl.constant(np.zeros(3, np.float32))

        with ir.main_graph:
            x = popxl.variable(np.zeros(2, np.float32))
            g = ir.create_graph(fn, x)
            with pytest.raises(popart_exception):
                ops.repeat(g, 2, x)

    def test_more_outputs_than_inputs(self):
        ir = popxl.Ir()

        def fn(x):
            return x + 1, x + 2

        with ir.main_graph:
            x = popxl.variable(np.zeros(2, np.float32))
            g = ir.create_graph(fn, x)
            with pytest.raises((ValueError, popart_exception)):
                ops.repeat(g, 2, x)


class TestConditional:
    def _build(self):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((), popxl.bool, "cond")
            cond = ops.host_load(h, "cond")
            x = popxl.variable(np.array([1, 2, 3], np.float32), name="x")
            y = popxl.variable(np.array([10, 20, 30], np.float32), name="y")
            then_g = ir.create_graph(lambda a, b: a + b, x, y)
            else_g = ir.create_graph(lambda a: a * 3, x)
            (out,) = ops.conditional(cond, then_g, else_g, [x, y], [x])
            s = _store(out, "out")
        return ir, h, s

    @pytest.mark.parametrize("flag", [True, False])
    def test_both_branches(self, flag):
        ir, h, s = self._build()
        got = _run(ir, {h: np.array(flag)})[s]
        x, y = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)
        np.testing.assert_allclose(got, x + y if flag else x * 3)

    def test_both_branches_in_one_session(self):
        ir, h, s = self._build()
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_allclose(sess.run({h: np.array(True)})[s], [11, 22, 33])
            np.testing.assert_allclose(sess.run({h: np.array(False)})[s], [3, 6, 9])

    def test_site_info_index_maps_take_popxl_arguments(self):
        # PopXL's ConditionalSiteInfo: input 0 is the condition, then the
        # then-branch inputs, then the else-branch inputs; outputs map one to
        # one, and the output maps take `then_branch` like the input map.
        ir = popxl.Ir()
        with ir.main_graph:
            c = popxl.variable(True)
            x = popxl.variable(np.zeros(2, np.float32))
            y = popxl.variable(np.ones(2, np.float32))
            then_g = ir.create_graph(lambda a, b: a + b, x, y)
            else_g = ir.create_graph(lambda a: a * 2, x)
            info = ops.conditional_with_info(c, then_g, else_g, [x, y], [x])
        assert info.called_graph == (then_g, else_g)
        assert info.graph_to_parent_input_index(1, then_branch=True) == 2
        assert info.graph_to_parent_input_index(0, then_branch=False) == 3
        assert info.is_parent_index_in_then_branch(2) and not info.is_parent_index_in_then_branch(3)
        for branch in (True, False):
            assert info.graph_to_parent_output_index(0, branch) == 0
            assert info.parent_to_graph_output_index(0, then_branch=branch) == 0
        assert info.graph_to_parent(else_g.inputs[0]) is x
        assert info.parent_to_graph(y) is then_g.inputs[1]

    def test_branch_output_mismatch(self):
        ir = popxl.Ir()
        with ir.main_graph:
            c = popxl.variable(True)
            x = popxl.variable(np.zeros(2, np.float32))
            then_g = ir.create_graph(lambda a: a + 1, x)
            else_g = ir.create_graph(lambda a: popxl.constant(np.zeros(3, np.float32)), x)
            with pytest.raises(popart_exception):
                ops.conditional(c, then_g, else_g, [x], [x])


class TestBadInputs:
    def _graph(self):
        ir = popxl.Ir()

        def fn(x, y):
            return x + y

        with ir.main_graph:
            a = popxl.variable(np.zeros(2, np.float32), name="a")
            b = popxl.variable(np.zeros(2, np.float32), name="b")
            g = ir.create_graph(fn, a, b)
        return ir, g, a, b

    def test_too_many(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            with pytest.raises(ValueError):
                ops.call(g, a, b, a)

    def test_missing(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            with pytest.raises(ValueError):
                ops.call(g, a)
            with pytest.raises(ValueError):
                ops.repeat(g, 2, a)

    def test_duplicate(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            with pytest.raises(ValueError):
                ops.call(g, a, b, inputs_dict={g.inputs[0]: a})

    def test_inputs_dict_key_not_an_input(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            with pytest.raises(ValueError):
                ops.call(g, a, inputs_dict={a: b})

    def test_shape_mismatch(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            c = popxl.variable(np.zeros(3, np.float32))
            with pytest.raises(popart_exception):
                ops.call(g, a, c)

    def test_dtype_mismatch(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            c = popxl.variable(np.zeros(2, np.int32))
            with pytest.raises(popart_exception):
                ops.call(g, a, c)

    def test_parent_tensor_from_other_graph(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            g2 = ir.create_graph(lambda x: x * 2, a)
        with g2:
            with pytest.raises(ValueError):
                ops.call(g, a, b)  # a and b live in the main graph, not in g2

    def test_not_a_graph(self):
        ir, g, a, b = self._graph()
        with ir.main_graph:
            with pytest.raises(TypeError):
                ops.call("graph", a, b)
