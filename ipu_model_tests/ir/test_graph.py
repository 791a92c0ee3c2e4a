"""Conformance of ``Graph`` (popxl.Graph): construction, contents, the graph
context, membership, equality and op-created hooks."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def test_graph_cannot_be_constructed():
    with pytest.raises(TypeError):
        popxl.Graph()


def test_inputs_outputs_by_name():
    ir = popxl.Ir()

    def fn(x, y):
        z = popxl.graph_input((2,), popxl.float32, "z")
        return x + y, y + z

    with ir.main_graph:
        a = popxl.variable(np.zeros(2, np.float32))
        g = ir.create_graph(fn, a, a)
    assert isinstance(g.inputs, tuple) and isinstance(g.outputs, tuple)
    assert [t.name for t in g.inputs] == ["x", "y", "z"]
    assert set(g.inputs_by_name) == {"x", "y", "z"}
    assert g.inputs_by_name["z"] is g.inputs[2]
    assert len(g.outputs) == 2
    assert all(t in g for t in g.inputs + g.outputs)


def test_tensors_variables_constants():
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        v = popxl.variable([1.0, 2.0], name="v")
        c = popxl.constant([3.0, 4.0], name="c")
        y = v + c
    assert main.variables == (v,)
    assert main.constants == (c,)
    assert set(main.tensors) == {v, c, y}
    assert main.get_tensor("v") is v
    assert main.get_tensor(y.id) is y


def test_subgraph_constants_and_no_variables():
    ir = popxl.Ir()

    def fn(x):
        return x + popxl.constant(2.0, name="two")

    with ir.main_graph:
        g = ir.create_graph(fn, popxl.variable(1.0))
    assert g.variables == ()
    assert [t.name for t in g.constants] == ["two"]
    assert g.constants[0].id == f"{g.name}/two"


def test_with_graph_pushes_and_pops():
    ir = popxl.Ir()
    g = ir.create_empty_graph("g")
    h = ir.create_empty_graph("h")
    with ir.main_graph as m:
        assert m is ir.main_graph
        assert popxl.gcg() == ir.main_graph
        with g:
            assert popxl.gcg() == g
            assert popxl.gmg() == ir.main_graph
            with h:
                assert popxl.gcg() == h
            assert popxl.gcg() == g
        assert popxl.gcg() == ir.main_graph
    with pytest.raises(RuntimeError):
        popxl.gcg()


def test_graph_of_another_ir_cannot_be_entered():
    ir1, ir2 = popxl.Ir(), popxl.Ir()
    with ir1.main_graph:
        with pytest.raises(RuntimeError):
            with ir2.main_graph:
                pass
        # The failed push left the stack intact.
        assert popxl.gcg() == ir1.main_graph


def test_graph_popped_on_exception():
    ir = popxl.Ir()
    with pytest.raises(KeyError):
        with ir.main_graph:
            raise KeyError("boom")
    with pytest.raises(RuntimeError):
        popxl.gcg()


def test_contains():
    ir = popxl.Ir()

    def fn(x):
        return x + 1

    with ir.main_graph:
        a = popxl.variable(1)
        g = ir.create_graph(fn, a)
    assert a in ir.main_graph
    assert a not in g
    assert g.inputs[0] in g and g.inputs[0] not in ir.main_graph
    with pytest.raises(TypeError):
        _ = 1 in g
    with pytest.raises(TypeError):
        _ = "x" in g


def test_eq_hash_repr():
    ir = popxl.Ir()
    g = ir.create_empty_graph("g")
    h = ir.create_empty_graph("h")
    assert g == g and g != h
    assert len({g, h, g}) == 2
    assert repr(g) == "Graph[id=g_subgraph(0) name=g_subgraph(0)]"
    # Graphs of different Irs with the same name differ.
    other = popxl.Ir().create_empty_graph("g")
    assert other.name == g.name and other != g


def test_eq_with_non_graph_raises():
    g = popxl.Ir().create_empty_graph()
    with pytest.raises(TypeError):
        _ = g == 1


def test_op_created_hooks():
    ir = popxl.Ir()
    main = ir.main_graph
    sub = ir.create_empty_graph("sub")
    seen_main, seen_sub = [], []
    h_main = main.register_op_created_hook(seen_main.append)
    sub.register_op_created_hook(seen_sub.append)
    with main:
        x = popxl.variable(np.ones(3, np.float32))
        y = x + 1
        _ = y * 2
    with sub:
        t = popxl.graph_input((3,), popxl.float32, "t")
        _ = t - 1
    assert len(seen_main) == 2  # Add, Mul (variables and constants are not ops)
    assert len(seen_sub) == 1
    main.remove_op_created_hook(h_main)
    with main:
        _ = x + 3
    assert len(seen_main) == 2


def test_hooks_see_ops_created_in_call():
    ir = popxl.Ir()
    main = ir.main_graph
    calls = []
    main.register_op_created_hook(lambda op: calls.append(op))

    def fn(x):
        return x + 1

    with main:
        x = popxl.variable(1.0)
        g = ir.create_graph(fn, x)  # the Add is in g, not main
        assert calls == []
        ops.call(g, x)
    assert len(calls) == 1
