"""Outlining as Poplar does it (shared/reference/ipu_model.md §4.4): a called
graph is one Function whose code exists once (call sites add control code
and copies), inlined code is paid per use, a repeat body exists once
whatever the trip count, and an If site inlines its branch graphs, so two
conditionals on one graph pay its code twice."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir

HIDDEN = 512


def _layer(x, W, b):
    return ops.gelu(x @ W + b)


def mnist_net(mode, layers=3, batch=16):
    """The PopXL MNIST tutorial's network (784 -> 512 ... -> 10, GELU) with
    its hidden 512x512 layers inlined, outlined (one graph, called per
    layer) or repeated (one graph, ``repeat``)."""
    rng = np.random.default_rng(0)

    def var(shape, name):
        return popxl.variable(rng.normal(0, 0.02, shape).astype(np.float32), name=name)

    ir = popxl.Ir()
    with ir.main_graph:
        img = popxl.h2d_stream((batch, 784), popxl.float32, name="img")
        x = _layer(ops.host_load(img), var((784, HIDDEN), "W0"), var((HIDDEN,), "b0"))
        if mode == "inlined":
            for i in range(layers):
                x = _layer(x, var((HIDDEN, HIDDEN), f"W{i + 1}"), var((HIDDEN,), f"b{i + 1}"))
        else:
            g = ir.create_graph(_layer, popxl.TensorSpec((batch, HIDDEN), popxl.float32),
                                popxl.TensorSpec((HIDDEN, HIDDEN), popxl.float32),
                                popxl.TensorSpec((HIDDEN,), popxl.float32))
            if mode == "outlined":
                for i in range(layers):
                    (x,) = ops.call(g, x, var((HIDDEN, HIDDEN), f"W{i + 1}"),
                                    var((HIDDEN,), f"b{i + 1}"))
            else:
                (x,) = ops.repeat(g, layers, x, var((HIDDEN, HIDDEN), "W1"), var((HIDDEN,), "b1"))
        y = x @ var((HIDDEN, 10), "Wout")
        out = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(out, y)
    return ir


def code_and_state(p):
    t = p.totals
    return t["code"] + t["vertexInstanceState"] + t["copyDescriptor"]


@pytest.fixture(scope="module")
def profiles():
    return {m: profile_ir(mnist_net(m), "ipu2") for m in ("inlined", "outlined")}


def test_outlined_has_less_always_live_memory_and_code(profiles):
    inl, out = profiles["inlined"], profiles["outlined"]
    assert code_and_state(out) < code_and_state(inl)
    assert out.totals["alwaysLive"] < inl.totals["alwaysLive"]
    # Vertex state and exchange code of the layer exist once, not per layer.
    assert out.totals["vertexInstanceState"] < inl.totals["vertexInstanceState"]


def test_outlined_costs_cycles(profiles):
    assert profiles["outlined"].cycles > profiles["inlined"].cycles


def test_outlined_graph_is_one_function_with_its_call_sites(profiles):
    (fn,) = profiles["outlined"].functions()
    assert fn["function"] and fn["code_instances"] == 1 and fn["call_sites"] == 3
    assert fn["executions"] == 3
    assert not profiles["inlined"].functions()


def test_vertex_code_is_shared_by_type(profiles):
    # Inlined layers use the same vertex types on the same tiles: vertex
    # code does not grow with the number of layers (§4.2, PopLiner).
    a = profile_ir(mnist_net("inlined", layers=1), "ipu2").totals["vertexCode"]
    b = profile_ir(mnist_net("inlined", layers=4), "ipu2").totals["vertexCode"]
    assert b < 1.5 * a


@pytest.mark.parametrize("mode", ["repeat"])
def test_repeat_code_does_not_grow_with_trip_count(mode):
    p2 = profile_ir(mnist_net(mode, layers=2), "ipu2")
    p8 = profile_ir(mnist_net(mode, layers=8), "ipu2")
    assert code_and_state(p2) == code_and_state(p8)
    assert p8.cycles > p2.cycles
    (fn,) = p8.functions()
    assert fn["executions"] == 8 and fn["code_instances"] == 1


def _cond_ir(sites):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((64, 256), popxl.float32, name="x")
        x = ops.host_load(xs)
        w = popxl.variable(np.ones((256, 256), np.float32), name="w")
        then_g = ir.create_graph(lambda a, m: ops.relu(a @ m) * 2.0,
                                 popxl.TensorSpec((64, 256), popxl.float32),
                                 popxl.TensorSpec((256, 256), popxl.float32))
        else_g = ir.create_graph(lambda a, m: a + 1.0, popxl.TensorSpec((64, 256), popxl.float32),
                                 popxl.TensorSpec((256, 256), popxl.float32))
        flag = popxl.variable(np.array(True), popxl.bool, name="flag")
        for _ in range(sites):
            (x,) = ops.conditional(flag, then_g, else_g, [x, w], [x, w])
        out = popxl.d2h_stream(x.shape, x.dtype, name="y")
        ops.host_store(out, x)
    return ir


def test_two_conditionals_pay_the_branch_code_twice():
    one, two = (profile_ir(_cond_ir(n), "ipu2") for n in (1, 2))
    g1 = {g["name"]: g for g in one.graphs}
    g2 = {g["name"]: g for g in two.graphs}
    then1 = [g for n, g in g1.items() if "lambda" in n][0]
    then2 = g2[then1["name"]]
    assert then1["code_instances"] == 1 and then2["code_instances"] == 2
    assert then2["if_sites"] == 2 and not then2["function"]
    # The second site adds at least the branch graphs' code once more.
    branch_code = sum(g["code_bytes"] for g in g1.values() if not g["main"])
    assert code_and_state(two) - code_and_state(one) >= branch_code


def test_remote_code_load_moves_code_out_of_always_live():
    def build(load):
        ir = popxl.Ir()
        with ir.main_graph:
            xs = popxl.h2d_stream((16, 512), popxl.float32, name="x")
            g = ir.create_graph(_layer, popxl.TensorSpec((16, 512), popxl.float32),
                                popxl.TensorSpec((512, 512), popxl.float32),
                                popxl.TensorSpec((512,), popxl.float32))
            w = popxl.variable(np.ones((512, 512), np.float32), name="w")
            b = popxl.variable(np.ones((512,), np.float32), name="b")
            if load:
                ops.remote_code_load(g, "executable")
            (y,) = ops.call(g, ops.host_load(xs), w, b)
            out = popxl.d2h_stream(y.shape, y.dtype, name="y")
            ops.host_store(out, y)
        return ir

    plain, loaded = profile_ir(build(False), "ipu2"), profile_ir(build(True), "ipu2")
    assert loaded.totals["controlCode"] < plain.totals["controlCode"]
    assert loaded.totals["internalExchangeCode"] < plain.totals["internalExchangeCode"]
    assert loaded.loaded_code.sum() > 0
    assert [g for g in loaded.graphs if g["code_loaded"]]
    # The loaded code is live while the function runs.
    assert loaded.totals["notAlwaysLive"] > plain.totals["notAlwaysLive"]
