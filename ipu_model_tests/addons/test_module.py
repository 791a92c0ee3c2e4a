"""Module, GraphWithNamedArgs, BoundGraph, GraphCache, the compat import
and the package namespace."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
from ipuxl import ops


class Linear(addons.Module):
    def __init__(self, out_features: int, bias: bool = True):
        super().__init__()
        self.out_features = out_features
        self.bias = bias

    def build(self, x):
        w = self.add_variable_input("weight", partial(np.random.normal, 0, 0.02,
                                                      (x.shape[-1], self.out_features)), x.dtype)
        y = x @ w
        if self.bias:
            y = y + self.add_variable_input("bias", partial(np.zeros, y.shape[-1]), x.dtype)
        return y


class Net(addons.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(8)
        self.fc2 = Linear(3)

    def build(self, x):
        return self.fc2(ops.gelu(self.fc1(x)))


class NetOutlined(addons.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(8)
        self.fc4 = Linear(3)

    def build(self, x):
        x = self.fc1(x)
        facts, sub = Linear(8).create_graph(x)
        fc2 = sub.bind(self.add_variable_inputs("fc2", facts))
        fc3 = sub.bind(self.add_variable_inputs("fc3", facts))
        x, = fc2.call(x)
        x, = fc3.call(x)
        return self.fc4(x)


def test_linear_graph_and_schedule():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 4), np.float32), name="x")
        facts, g = Linear(32).create_graph(x)
    assert isinstance(facts, addons.NamedVariableFactories)
    assert isinstance(g, addons.GraphWithNamedArgs)
    assert g.graph.name == "Linear_subgraph(0)"
    assert g.args.keys() == ["weight", "bias"]
    assert [t.name for t in g.graph.inputs] == ["x", "weight", "bias"]
    s = g.print_schedule()
    lines = s.split("\n")
    assert lines[0] == "Graph : Linear_subgraph(0)"
    assert lines[1] == "  (%1, weight=%2, bias=%3) -> (%5) {"
    assert lines[2].strip().startswith("MatMul.") and \
        lines[2].endswith("(%1 [(2, 4) float32], %2 [(4, 32) float32]) -> (%4 [(2, 32) float32])")
    assert lines[3].strip().startswith("Add.") and \
        lines[3].endswith("(%4 [(2, 32) float32], %3 [(32,) float32]) -> (%5 [(2, 32) float32])")
    assert lines[4] == "  }"
    with pytest.raises(AttributeError, match="not a gradient graph"):
        g.grad_graph_info


def test_inlined_submodules_names_and_reset():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 4), np.float32), name="x")
        net = Net()
        facts, g = net.create_graph(x)
        assert list(g.args.to_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
        assert g.args.fc1.weight.name == "fc1/weight"
        assert not any(op.type == "Call" for op in g.graph.ops)
        # module holds no state; submodule trees are emptied but still shared
        assert net._variable_factories.to_dict() == {} and net.fc1._named_inputs.to_dict() == {}
        facts2, g2 = net.create_graph(x)  # reusable
        assert list(g2.args.to_dict()) == list(g.args.to_dict())
        vs = facts.init()
        assert vs.fc1.weight.name == "fc1.weight"
        # same key order for tensors of subgraph and main graph (tutorial 3)
        assert [t.name.replace("/", ".") for t in g.args.tensors] == [t.name for t in vs.tensors]
        out, = g.bind(vs).call(x)
    assert out.shape == (2, 3)


def test_outlined_submodules():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 4), np.float32), name="x")
        facts, g = NetOutlined().create_graph(x)
        assert list(g.args.to_dict()) == ["fc1.weight", "fc1.bias", "fc4.weight", "fc4.bias",
                                          "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
        calls = [op for op in g.graph.ops if op.type == "Call"]
        assert len(calls) == 2 and calls[0].called_graphs[0] is calls[1].called_graphs[0]
        assert "Call." in g.print_schedule() and "(Linear_subgraph(" in g.print_schedule()
        # the copied factories share the data iterator: fc2 and fc3 differ
        vs = facts.init()
    with popxl.Session(ir, "ipu_model") as s:
        d = s.get_tensors_data([vs.fc2.weight, vs.fc3.weight])
    assert not np.allclose(d[vs.fc2.weight], d[vs.fc3.weight])


def test_module_errors_and_helpers():
    class NoInit(addons.Module):
        def __init__(self):
            pass

        def build(self, x):
            return x

    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2,), np.float32))
        with pytest.raises(RuntimeError, match="super"):
            NoInit().create_graph(x)
        with pytest.raises(ValueError, match="grad_inlining_error"):
            addons.Module(grad_inlining_error="x")

        class Dup(addons.Module):
            def build(self, x):
                self.add_variable_input("w", lambda: np.zeros(2, np.float32))
                self.add_variable_input("w", lambda: np.zeros(2, np.float32))
                return x

        with pytest.raises(ValueError, match="already exists"):
            Dup().create_graph(x)
        lst = addons.Module.from_list([Linear(2), Linear(3)])
        assert [m.out_features for m in lst] == [2, 3] and lst[1].out_features == 3
        with pytest.raises(AttributeError):
            iter(Linear(2))
        with pytest.raises(ValueError, match="non-negative"):
            addons.Module().add_variable_inputs(-1, addons.NamedVariableFactories())


def test_bound_graph_and_named_args_bind():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 4), np.float32), name="x")
        facts, g = Linear(3).create_graph(x)
        vs = facts.init()
        extra = addons.NamedTensors.from_dict({**vs.to_dict(), "unused": x})
        bg = g.bind(extra)  # intersection of keys
        assert set(bg.args) == {g.args.weight, g.args.bias}
        assert isinstance(bg, addons.BoundGraph)
        info = bg.call_with_info(x)
        assert info.called_graph is g.graph and len(info.outputs) == 1
        partial_b = g.bind(addons.NamedTensors(weight=vs.weight))
        y, = partial_b.call(x, args={g.args.bias: vs.bias})  # per-call args
        y2, = g.call(x, args={g.args.weight: vs.weight, g.args.bias: vs.bias})
        rebound = partial_b.bind({g.args.bias: vs.bias})
        assert len(rebound.args) == 2
        m = rebound.subgraph_io_map(x, outs=[y])
        assert m[g.graph.inputs[0]] is x and m[g.graph.outputs[0]] is y
        with pytest.raises(TypeError):
            g.bind({"weight": vs.weight})
        c = g.copy()
        assert c.graph is g.graph and c.args.to_dict() == g.args.to_dict()


def test_graph_cache_and_function():
    calls = []

    def fn(a, b, scale=2.0):
        calls.append(1)
        return a * b * scale

    cache = addons.GraphCache()
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones((2,), np.float32))
        b = popxl.variable(np.ones((2,), np.float32))
        c = popxl.variable(np.ones((3,), np.float32))
        g1 = cache.create_graph(fn, a, b)
        g2 = cache.create_graph(fn, b.spec, a)
        g3 = cache.create_graph(fn, c, c)
        g4 = cache.create_graph(fn, a, b, scale=3.0)
        with popxl.ipu(1):
            g5 = cache.create_graph(fn, a, b)
        assert g1 is g2 and len({g1, g3, g4, g5}) == 4 and len(calls) == 4
        assert addons.argument_hash([a, {"k": b}]) == addons.argument_hash([b, {"k": a}])

        @addons.function
        def mul(x, y):
            return x * y

        o1 = mul(a, b)
        o2 = mul(b, a)
        call_ops = [op for op in ir.main_graph.ops if op.type == "Call"]
        assert len(call_ops) == 2 and call_ops[0].called_graphs[0] is call_ops[1].called_graphs[0]
    assert o1[0].shape == (2,) and o2[0].shape == (2,)


def test_compat_namespace():
    import ipuxl.compat

    ipuxl.compat.install()
    import popxl_addons
    from popxl_addons.named_tensors import NamedTensors
    from popxl_addons.variable_factory import NamedVariableFactories
    from popxl_addons.layers import Linear as L
    from popxl_addons.optimizers.adam import AdamOptimizerStep  # noqa: F401

    assert popxl_addons is addons and NamedTensors is addons.NamedTensors
    assert NamedVariableFactories is addons.NamedVariableFactories and L is not None
    for name in ("Module", "NamedTensors", "VariableFactory", "GraphWithNamedArgs", "BoundGraph",
                 "GraphCache", "autodiff", "autodiff_with_accumulation", "add_variable_input",
                 "NamedVariableFactories", "DotTree", "OrderedDict", "WeightsDict", "timer",
                 "function", "cross_entropy_with_grad"):
        assert hasattr(popxl_addons, name), name
    import types

    for sub in ("module", "variable_factory", "graph", "graph_cache", "dot_tree", "named_tensors",
                "ops", "transforms", "utils", "named_replica_grouping"):
        assert isinstance(getattr(popxl_addons, sub), types.ModuleType), sub
    assert popxl_addons.ops.cross_entropy_with_grad is addons.cross_entropy_with_grad
    assert popxl_addons.ops.__name__ == "ipuxl.addons.ops"  # not popxl.ops
