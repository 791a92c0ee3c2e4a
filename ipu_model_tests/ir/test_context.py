"""Conformance of the graph-building context: gcg/gmg/gir, name_scope,
in_sequence, ipu and io_tiles."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


@pytest.mark.parametrize("fn", [popxl.gcg, popxl.gmg, popxl.gir, popxl.get_current_graph,
                                popxl.get_main_graph, popxl.get_ir])
def test_no_graph_raises(fn):
    with pytest.raises(RuntimeError):
        fn()


def test_current_main_ir():
    ir = popxl.Ir()
    g = ir.create_empty_graph()
    with ir.main_graph:
        assert popxl.gcg() == ir.main_graph and popxl.gir() is ir
        with g:
            assert popxl.gcg() == g
            assert popxl.gmg() == ir.main_graph
            assert popxl.gir() is ir


def test_subgraph_entered_alone():
    ir = popxl.Ir()
    g = ir.create_empty_graph()
    with g:
        assert popxl.gcg() == g and popxl.gmg() == ir.main_graph


class TestNameScope:
    def test_tensor_and_op_names(self):
        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.ones(2, np.float32), name="x")
            with popxl.name_scope("layer1") as scopes:
                assert scopes == ["layer1"]
                with popxl.name_scope("attn") as inner:
                    assert inner == ["layer1", "attn"]
                    y = x + 1
                    c = popxl.constant(2.0, name="c")
            z = x * 2
        assert y.id.startswith("layer1/attn/")
        assert y.producer.name.startswith("layer1/attn/")
        assert c.id == "layer1/attn/c"
        assert "/" not in z.id

    def test_in_subgraph(self):
        ir = popxl.Ir()
        g = ir.create_empty_graph("g")
        with g:
            with popxl.name_scope("s"):
                t = popxl.graph_input((2,), popxl.float32, "t")
                u = popxl.constant(1.0, name="u")
        assert t.id == f"{g.name}/s/t"
        assert t.name == "s/t"
        assert u.id == f"{g.name}/s/u"

    def test_scope_popped_on_exception(self):
        ir = popxl.Ir()
        with ir.main_graph:
            with pytest.raises(KeyError):
                with popxl.name_scope("oops"):
                    raise KeyError()
            v = popxl.variable(1, name="v")
        assert v.id == "v"


class TestInSequence:
    def test_none_raises(self):
        with popxl.Ir().main_graph:
            with pytest.raises(TypeError):
                with popxl.in_sequence(None):
                    pass

    @pytest.mark.parametrize("mode", [True, False, "pass"])
    def test_valid_modes(self, mode):
        with popxl.Ir().main_graph:
            with popxl.in_sequence(mode):
                _ = popxl.variable(1) + 1

    def test_orders_update_before_store(self):
        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.zeros(3, np.float32), name="x")
            with popxl.in_sequence():
                ops.var_updates.copy_var_update_(x, popxl.constant(np.full(3, 7, np.float32)))
                s = popxl.d2h_stream(x.shape, x.dtype, "s")
                ops.host_store(s, x)
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_array_equal(sess.run()[s], np.full(3, 7, np.float32))

    def test_as_decorator(self):
        ir = popxl.Ir()

        @popxl.in_sequence()
        def build():
            v = popxl.variable(np.ones(2, np.float32))
            s = popxl.d2h_stream(v.shape, v.dtype, "s")
            ops.host_store(s, v * 3)
            return s

        with ir.main_graph:
            s = build()
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_array_equal(sess.run()[s], [3, 3])


class TestPlacement:
    def test_ipu_recorded_on_ops(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(1.0)
            a = x + 1
            with popxl.ipu(1):
                b = x + 2
                with popxl.ipu(0):
                    c = x + 3
                d = x + 4
        assert a.producer.ipu == 0  # the default ipu is 0, never "unset"
        assert b.producer.ipu == 1 and b.ipu == 1
        assert c.producer.ipu == 0
        assert d.producer.ipu == 1

    def test_io_tiles_recorded_on_ops(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(1.0)
            a = x + 1
            with popxl.io_tiles():
                b = x + 2
            c = x + 3
        assert a.producer.tile_set == "compute" and a.tile_set == "compute"
        assert b.producer.tile_set == "io" and b.tile_set == "io"
        assert c.tile_set == "compute"
