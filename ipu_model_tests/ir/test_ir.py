"""Conformance of ``Ir`` (popxl.Ir): identity, create_graph naming and
argument binding, return-value rules, create_empty_graph, num_host_transfers,
replication_factor and the stream listings."""
from typing import List

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


class TestIrIdentity:
    def test_main_graph(self):
        ir = popxl.Ir()
        g = ir.main_graph
        assert isinstance(g, popxl.Graph)
        assert g.name == "" and g.id == ""
        assert g.ir is ir and g.main_graph == g
        assert ir.main_graph == g  # stable

    def test_ids_eq_hash_repr(self):
        a, b = popxl.Ir(), popxl.Ir()
        assert a.id != b.id
        assert a != b and a == a
        assert len({a, b}) == 2
        assert repr(a) == f"Ir[id={a.id}]"

    def test_eq_with_non_ir_raises(self):
        with pytest.raises(TypeError):
            _ = popxl.Ir() == 1

    def test_defaults(self):
        ir = popxl.Ir()
        assert ir.num_host_transfers == 1
        assert ir.replication_factor == 1
        assert ir.instance_replication_factor == 1


def _increment(x):
    return x + 1


class _Holder:
    @staticmethod
    def method(x):
        return x * 2


class TestGraphNames:
    def test_qualname_and_counter(self):
        ir = popxl.Ir()

        def local_fn(x):
            return x + 1

        with ir.main_graph:
            v = popxl.variable(1.0)
            g0 = ir.create_graph(_increment, v)
            g1 = ir.create_graph(_increment, v)
            g2 = ir.create_graph(local_fn, v)
            g3 = ir.create_graph(_Holder.method, v)
        assert g0.name == "_increment_subgraph(0)"
        assert g1.name == "_increment_subgraph(1)"
        # ".<locals>" is removed from the qualified name.
        assert g2.name == "TestGraphNames.test_qualname_and_counter.local_fn_subgraph(2)"
        assert g3.name == "_Holder.method_subgraph(3)"
        assert g0.id == g0.name
        assert g0 != g1

    def test_counter_is_per_ir(self):
        for _ in range(2):
            ir = popxl.Ir()
            with ir.main_graph:
                g = ir.create_graph(_increment, popxl.variable(1))
            assert g.name == "_increment_subgraph(0)"

    def test_module_name(self):
        class Scale(popxl.Module):
            def build(self, x):
                return x * 3

        ir = popxl.Ir()
        with ir.main_graph:
            g = ir.create_graph(Scale(), popxl.variable(1.0))
        assert g.name == "TestGraphNames.test_module_name.Scale_subgraph(0)"

    def test_create_empty_graph(self):
        ir = popxl.Ir()
        g = ir.create_empty_graph()
        h = ir.create_empty_graph("mine")
        assert g.name == "graph_subgraph(0)"
        assert h.name == "mine_subgraph(1)"
        assert g.inputs == () and g.outputs == ()
        with h:
            x = popxl.graph_input((2,), popxl.float32, "x")
            popxl.graph_output(x + 1)
        assert [t.name for t in h.inputs] == ["x"]
        assert len(h.outputs) == 1

    def test_not_callable(self):
        ir = popxl.Ir()
        with ir.main_graph:
            with pytest.raises(TypeError):
                ir.create_graph(5)


class TestArgumentBinding:
    def test_tensors_and_non_tensor_args(self):
        ir = popxl.Ir()
        seen = {}

        def fn(x, y: popxl.Tensor, c: int, graph_arg=None):
            seen["c"] = c
            seen["graph_arg"] = graph_arg
            return x * c + y

        with ir.main_graph:
            a = popxl.variable(np.ones((2, 3), np.float32), name="a")
            b = popxl.variable(np.ones((3,), np.float32), name="b")
            other = ir.create_empty_graph()
            g = ir.create_graph(fn, a, b, 5, graph_arg=other)
        assert seen == {"c": 5, "graph_arg": other}
        assert [t.name for t in g.inputs] == ["x", "y"]
        assert [t.id for t in g.inputs] == [f"{g.name}/x", f"{g.name}/y"]
        assert g.inputs[0].shape == (2, 3) and g.inputs[1].shape == (3,)
        assert g.inputs[0].dtype == popxl.float32
        assert g.inputs[0] is not a  # a new tensor in the subgraph
        assert len(g.outputs) == 1 and g.outputs[0].shape == (2, 3)
        assert not g._by_ref_inputs

    def test_tensor_spec(self):
        ir = popxl.Ir()

        def fn(x, ys: List[popxl.Tensor]):
            return [x + y for y in ys]

        with ir.main_graph:
            spec = popxl.TensorSpec((4,), popxl.int32)
            g = ir.create_graph(fn, spec, [spec, spec])
        assert [t.name for t in g.inputs] == ["x", "ys_0", "ys_1"]
        assert all(t.spec == spec for t in g.inputs)
        assert len(g.outputs) == 2

    def test_tensor_spec_without_graph_context(self):
        ir = popxl.Ir()

        def fn(x):
            return x + x

        g = ir.create_graph(fn, popxl.TensorSpec((2, 2), popxl.float16))
        assert g.inputs[0].dtype == popxl.float16 and g.inputs[0].shape == (2, 2)

    def test_var_args_and_kwargs(self):
        ir = popxl.Ir()

        def fn(a, *args, e, f: int = 0, **kwargs):
            x = a + f
            for t in list(args) + [e] + list(kwargs.values()):
                x = x + t
            return x

        with ir.main_graph:
            v = [popxl.variable(i, name=f"v{i}") for i in range(6)]
            g = ir.create_graph(fn, v[0], v[1], v[2], e=v[3], p=v[4], q=v[5])
            (out,) = ops.call(g, *v)
            s = popxl.d2h_stream(out.shape, out.dtype, "out")
            ops.host_store(s, out)
        assert [t.name for t in g.inputs] == ["a", "args_0", "args_1", "e", "p", "q"]
        with popxl.Session(ir, "ipu_model") as sess:
            assert sess.run()[s] == sum(range(6))

    def test_by_ref_annotations(self):
        ir = popxl.Ir()

        def fn(x: popxl.TensorByRef, ys: List[popxl.TensorByRef], z: popxl.Tensor,
               *rest: popxl.TensorByRef):
            return None

        with ir.main_graph:
            v = [popxl.variable(i) for i in range(5)]
            g = ir.create_graph(fn, v[0], [v[1], v[2]], v[3], v[4])
        by_ref = {t.name for t in g._by_ref_inputs}
        assert by_ref == {"x", "ys_0", "ys_1", "rest_0"}

    def test_default_args_used(self):
        ir = popxl.Ir()

        def fn(x, a=3):
            return x + a

        with ir.main_graph:
            g = ir.create_graph(fn, popxl.variable(1))
        assert len(g.inputs) == 1 and len(g.outputs) == 1 and len(g.constants) == 1

    @pytest.mark.parametrize("bad", [[1, "tensor"], ["tensor", 1]])
    def test_mixed_list_raises(self, bad):
        ir = popxl.Ir()

        def fn(xs):
            return None

        with ir.main_graph:
            v = popxl.variable(1)
            args = [v if a == "tensor" else a for a in bad]
            with pytest.raises(TypeError):
                ir.create_graph(fn, args)

    def test_mixed_var_args_raises(self):
        ir = popxl.Ir()

        def fn(*xs):
            return None

        with ir.main_graph:
            v = popxl.variable(1)
            with pytest.raises(TypeError):
                ir.create_graph(fn, v, 5)
            with pytest.raises(TypeError):
                ir.create_graph(fn, 5, v)

    def test_signature_mismatch(self):
        ir = popxl.Ir()

        def fn(x, y, c: int):
            return x

        with ir.main_graph:
            v1, v2, v3 = (popxl.variable(i) for i in range(3))
            with pytest.raises(ValueError):
                ir.create_graph(fn, v1, 5)  # missing
            with pytest.raises(ValueError):
                ir.create_graph(fn, v1, v2, v3, 5)  # too many
            with pytest.raises(ValueError):
                ir.create_graph(fn, v1, v2, 1, bogus=3)  # unknown keyword


class TestReturnValues:
    def _graph(self, fn):
        ir = popxl.Ir()
        with ir.main_graph:
            return ir.create_graph(fn, popxl.variable(np.zeros(3, np.float32)))

    def test_none(self):
        assert self._graph(lambda x: None).outputs == ()

    def test_single_tensor(self):
        g = self._graph(lambda x: x + 1)
        assert len(g.outputs) == 1

    def test_tuple_and_list(self):
        assert len(self._graph(lambda x: (x + 1, x + 2)).outputs) == 2
        assert len(self._graph(lambda x: [x + 1, x + 2, x]).outputs) == 3

    def test_input_returned_directly(self):
        g = self._graph(lambda x: x)
        assert g.outputs == g.inputs

    @pytest.mark.parametrize("value", [True, 3, [True, True], "abc"])
    def test_bad_outputs(self, value):
        with pytest.raises(ValueError):
            self._graph(lambda x: value)

    def test_mixed_output_list(self):
        with pytest.raises(ValueError):
            self._graph(lambda x: [x + 1, 2])


class TestIrSettings:
    def test_num_host_transfers(self):
        ir = popxl.Ir()
        ir.num_host_transfers = 11
        assert ir.num_host_transfers == 11

    def test_replication_factor_setter_after_session(self):
        ir = popxl.Ir()
        with ir.main_graph:
            v = popxl.variable(1)
            s = popxl.d2h_stream(v.shape, v.dtype)
            ops.host_store(s, v + 1)
        ir.replication_factor = 1  # allowed before a Session exists
        popxl.Session(ir, "ipu_model")
        with pytest.raises(RuntimeError):
            ir.replication_factor = 2
        assert ir.replication_factor == 1

    def test_stream_listings(self):
        ir = popxl.Ir()
        with ir.main_graph:
            v = popxl.variable(1)
            h_used = popxl.h2d_stream(v.shape, v.dtype, "h_used")
            h_unused = popxl.h2d_stream(v.shape, v.dtype, "h_unused")
            d_used = popxl.d2h_stream(v.shape, v.dtype, "d_used")
            popxl.d2h_stream(v.shape, v.dtype, "d_unused")
            x = ops.host_load(h_used)
            ops.host_store(d_used, x + v)
        assert ir.get_all_h2d_streams() == {h_used}
        assert ir.get_all_d2h_streams() == {d_used}
        assert h_unused not in ir.get_all_h2d_streams()

    def test_streams_used_in_subgraph_are_listed(self):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((2,), popxl.float32, "h")
            d = popxl.d2h_stream((2,), popxl.float32, "d")

            def body():
                ops.host_store(d, ops.host_load(h) * 2)

            g = ir.create_graph(body)
            ops.call(g)
        assert ir.get_all_h2d_streams() == {h}
        assert ir.get_all_d2h_streams() == {d}
