"""addons.route_tensor_into_graph / is_subgraph: structure (inputs added
once per graph, every call site on a path passes the tensor) and values
through a Session against NumPy, including writes with modified=True."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.addons import is_subgraph, route_tensor_into_graph


def test_is_subgraph():
    ir = popxl.Ir()
    g = ir.main_graph
    sg1, sg2, sg3 = (ir.create_empty_graph(n) for n in ("sg1", "sg2", "sg3"))
    with g:
        ops.call(sg1)
        ops.call(sg3)
    with sg1:
        ops.call(sg2)
    assert is_subgraph(g, sg1) and is_subgraph(g, sg2) and is_subgraph(sg1, sg2)
    assert is_subgraph(g, g)
    assert not is_subgraph(sg1, sg3) and not is_subgraph(sg3, sg2) and not is_subgraph(sg2, g)


def test_nested_calls_read_the_routed_value():
    ir = popxl.Ir()
    g = ir.main_graph
    sg1, sg2 = ir.create_empty_graph("sg1"), ir.create_empty_graph("sg2")
    a_np = np.array([1.5, -2.0], np.float32)
    with g:
        a = popxl.variable(a_np, name="a")
        acc = popxl.variable(np.zeros(2, np.float32), name="acc")
        c1 = ops.call_with_info(sg1)
    with sg1:
        c2 = ops.call_with_info(sg2)
    with sg2:
        b = route_tensor_into_graph(a) * 3
        again = route_tensor_into_graph(a)           # a second route reuses the input
        ops.var_updates.accumulate_(route_tensor_into_graph(acc, modified=True), b + again)
    assert len(sg1.inputs) == 2 and len(sg2.inputs) == 2
    assert c1._op.inputs[0] is a and c2._op.inputs[0] is sg1.inputs[0]
    assert c1._op.inputs[1] is acc
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        got = s.get_tensor_data(acc)
    np.testing.assert_allclose(got, a_np * 3 + a_np)


def test_every_path_and_repeat_sites():
    ir = popxl.Ir()
    g = ir.main_graph
    sg1, sg2, sg3 = (ir.create_empty_graph(n) for n in ("sg1", "sg2", "sg3"))
    with g:
        a = popxl.variable(np.float32(1), name="a")
        ops.call(sg1)
    with sg1:
        ops.call(sg2)
        ops.repeat(sg3, 2)
    with sg3:
        ops.call(sg2)
    with sg2:
        route_tensor_into_graph(a)
    assert [len(x.inputs) for x in (sg1, sg2, sg3)] == [1, 1, 1]
    for h in (sg1, sg2, sg3):
        for site in h._call_sites:
            assert len(site.inputs) == len(h.inputs)


def test_modified_write_reaches_the_variable():
    ir = popxl.Ir()
    g = ir.main_graph
    sg = ir.create_empty_graph("sg")
    with g:
        v = popxl.variable(np.array([1.0, 2.0], np.float32), name="v")
        ops.repeat(sg, 3)
    with sg:
        inner = route_tensor_into_graph(v, modified=True)
        ops.var_updates.accumulate_(inner, popxl.constant(np.array([0.5, 1.0], np.float32)))
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        got = s.get_tensor_data(v)
    np.testing.assert_allclose(got, np.array([1.0, 2.0]) + 3 * np.array([0.5, 1.0]))


def test_not_a_parent_graph():
    ir = popxl.Ir()
    sg = ir.create_empty_graph("sg")
    with ir.main_graph:
        a = popxl.variable(1)
    with pytest.raises(ValueError, match="is not in a known parent graph"):
        route_tensor_into_graph(a, sg)
    with ir.main_graph:
        assert route_tensor_into_graph(a) is a
