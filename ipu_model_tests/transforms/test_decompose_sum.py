"""``transforms.decompose_sum``: Sum of N > 2 tensors -> Init + N Adds."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.ops.sum_n import sum_n


def test_op_counts_as_popxl():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = [popxl.constant(1.0) for _ in range(4)]
        ys = [popxl.constant(1.0) for _ in range(4)]
        sum_n([sum_n(xs), *ys])
    assert len(ir.main_graph.ops) == 2
    assert transforms.decompose_sum(ir.main_graph) is ir.main_graph
    # A sum of N inputs becomes N Adds + 1 Init: 4 -> 5 ops, 5 -> 6 ops.
    assert len(ir.main_graph.ops) == 5 + 6
    assert sorted({op.type for op in ir.main_graph.ops}) == ["Add", "Init"]


@pytest.mark.parametrize("n", [4, 8])
def test_numerics_and_schedule(n):
    rng = np.random.default_rng(n)
    data = [rng.standard_normal(3).astype(np.float32) for _ in range(n)]
    ir = popxl.Ir()
    with ir.main_graph:
        vs = [popxl.variable(d, name=f"v{i}") for i, d in enumerate(data)]
        # Each summand has its own producer, interleaved with other work.
        parts = []
        for v in vs:
            ops.sin(v)
            parts.append(v * 2.0)
        out = sum_n(parts, out_name="total")
        y = out + 1.0
        s = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(s, y)
        transforms.decompose_sum(ir.main_graph)
    sched = list(ir.main_graph.ops)
    assert not any(op.type == "Sum" for op in sched)
    adds = [op for op in sched if op.type == "Add" and op.name.startswith("total")]
    assert len(adds) == n
    assert sum(op.type == "Init" for op in sched) == 1
    # The last addition writes the original tensor, consumers untouched.
    assert adds[-1].outputs[0] is out and out.producer is adds[-1]
    assert y.producer.inputs[0] is out
    # Each addition right after its summand's producer.
    # (the first one after the Init, which follows the first producer).
    init = next(op for op in sched if op.type == "Init")
    assert sched.index(init) == sched.index(parts[0].producer) + 1
    assert sched.index(adds[0]) == sched.index(init) + 1
    for add, p in zip(adds[1:], parts[1:]):
        assert sched.index(add) == sched.index(p.producer) + 1
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()[s]
    np.testing.assert_allclose(r, sum(d * 2 for d in data) + 1, rtol=1e-5)


def test_gradient_sums_decompose_and_keep_values():
    xd = np.array([0.2, -0.4, 0.9], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((3,), popxl.float32)
        g = ir.create_graph(lambda x: ops.sin(x) + x * x + ops.exp(x) + x, spec)
        x = popxl.variable(xd)
        c = ops.call_with_info(g, x)
        info = transforms.autodiff(g)
        assert any(op.type == "Sum" and len(op.inputs) > 2 for op in info.graph.ops)
        transforms.decompose_sum(info.graph)
        assert not any(op.type == "Sum" for op in info.graph.ops)
        (gx,) = ops.call(info.graph, popxl.constant(np.ones(3, np.float32)),
                         inputs_dict=info.inputs_dict(c))
        s = popxl.d2h_stream(gx.shape, gx.dtype)
        ops.host_store(s, gx)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()[s]
    np.testing.assert_allclose(r, np.cos(xd) + 2 * xd + np.exp(xd) + 1, rtol=1e-5)
