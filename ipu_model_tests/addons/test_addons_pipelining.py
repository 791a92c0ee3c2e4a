"""addons.pipelined_execution, recompute_graph and repeat_graph against NumPy
oracles and against the same model without the transform."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons.transforms.autodiff import autodiff_with_accumulation
from ipuxl.addons.transforms.repeat_graph import repeat_graph


def _chain(stages: int, steps: int, x: np.ndarray, dtype=popxl.float32):
    ir = popxl.Ir()
    with ir.main_graph:
        ins = popxl.h2d_stream(x.shape[1:], dtype, "in")
        outs = popxl.d2h_stream(x.shape[1:], dtype, "out")
        with addons.pipelined_execution(steps) as p:
            t = None
            for s in range(stages):
                with p.stage(s), popxl.ipu(s):
                    if s == 0:
                        t = ops.host_load(ins)
                    t = t * 2 + 1
                    if s < stages - 1:
                        t = t.copy_to_ipu(s + 1)
                    else:
                        ops.host_store(outs, t)
    ir.num_host_transfers = steps
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run({ins: x})[outs]
        text = session.engine.describe()
    return ir, got, text


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_chain_of_stages(stages):
    steps = 2 * stages + 3
    x = np.arange(steps * 3, dtype=np.float32).reshape(steps, 3)
    ir, got, text = _chain(stages, steps, x)
    want = x.astype(np.float64)
    for _ in range(stages):
        want = want * 2 + 1
    np.testing.assert_array_equal(got, want.astype(np.float32))
    names = sorted(n.split("_subgraph(")[0] for n in ir._graphs)
    for s in range(stages):
        assert f"stage_{s}" in names
    assert {"pipeline_graph", "ipu_copies", "loads_stage_0", f"stores_stage_{stages - 1}",
            "main_repeat"} <= set(names)
    # The program: ramp-up, Repeat(steps - (S-1)), ramp-down; copies between IPUs.
    assert f"Repeat({steps - (stages - 1)})" in text
    assert "ipu 0 -> ipu 1" in text
    # The main graph holds only the call of the pipeline.
    assert [op.type for op in ir.main_graph.ops] == ["Call"]


def test_stash_and_restore_tensor():
    """Stage 2 (IPU 0) reads stage 0's value of the same micro-batch through a stash."""
    steps = 8
    x = np.random.default_rng(3).normal(size=(steps, 2)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        ins = popxl.h2d_stream((2,), popxl.float32, "in")
        outs = popxl.d2h_stream((2,), popxl.float32, "out")
        with addons.pipelined_execution(steps) as p:
            with p.stage(0), popxl.ipu(0):
                a = ops.host_load(ins)
                b = (a * 2).copy_to_ipu(1)
            with p.stage(1), popxl.ipu(1):
                c = (b + 1).copy_to_ipu(0)
            with p.stage(2), popxl.ipu(0):
                r = p.stash_and_restore_tensor(a)
                ops.host_store(outs, c - r)
    ir.num_host_transfers = steps
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run({ins: x})[outs]
    np.testing.assert_allclose(got, x + 1, rtol=1e-6, atol=1e-6)


def test_reading_an_earlier_stage_without_stash_is_an_error():
    ir = popxl.Ir()
    with ir.main_graph:
        ins = popxl.h2d_stream((2,), popxl.float32, "in")
        with pytest.raises(ValueError, match="stage_2.*reads.*mul.*computed in pipeline stage 0"
                                             ".*ipu_copy or stash_and_restore"):
            with addons.pipelined_execution(6) as p:
                with p.stage(0), popxl.ipu(0):
                    a = ops.host_load(ins) * 2
                    b = a.copy_to_ipu(1)
                with p.stage(1), popxl.ipu(1):
                    c = (b + 1).copy_to_ipu(0)
                with p.stage(2), popxl.ipu(0):
                    _ = c - a


def test_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
        with pytest.raises(RuntimeError, match="Operation must be created in a stage context"):
            with addons.pipelined_execution(4):
                _ = x + 1
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
        with pytest.raises(ValueError, match="at least 2x the number of stages.*steps=3 stages=2"):
            with addons.pipelined_execution(3) as p:
                with p.stage(0), popxl.ipu(0):
                    y = (x + 1).copy_to_ipu(1)
                with p.stage(1), popxl.ipu(1):
                    _ = y + 1
    with popxl.Ir().main_graph:
        with pytest.raises(RuntimeError, match="must be called in a stage context"):
            with addons.pipelined_execution(4) as p:
                with p.stage(0):
                    a = popxl.variable(1.0) + 1
                p.stash_and_restore_tensor(a)


class Linear(addons.Module):
    def __init__(self, out_features: int):
        super().__init__()
        self.out_features = out_features

    def build(self, x):
        x = x + 1
        w = self.add_variable_input(
            "weight", partial(np.random.normal, 0, 0.02, (x.shape[-1], self.out_features)),
            x.dtype)
        return x @ w


def _training(pipelined: bool, steps: int, data: np.ndarray):
    np.random.seed(42)
    ir = popxl.Ir()
    with ir.main_graph:
        def body(p=None):
            def stage(i, dev):
                if p is None:
                    return popxl.ipu(dev)
                return _both(p.stage(i), popxl.ipu(dev))
            with stage(0, 0):
                x_stream = popxl.h2d_stream(data.shape[1:], popxl.float32, "x")
                x = ops.host_load(x_stream)
                args, graph = Linear(4).create_graph(x)
                dargs, dgraph = autodiff_with_accumulation(graph, [graph.args.weight])
                fwd_vars, bwd_vars = args.init(), dargs.init()
                call_info = graph.bind(fwd_vars).call_with_info(x)
                y = call_info.outputs[0].copy_to_ipu(1)
            with stage(1, 1):
                y = (y + 1).copy_to_ipu(0)
            with stage(2, 0):
                acts = (dgraph.grad_graph_info.inputs_dict(call_info) if p is None else
                        p.stash_and_restore_activations(call_info, dgraph.grad_graph_info))
                dgraph.bind(bwd_vars).call(y, args=acts)
            return x_stream, fwd_vars, bwd_vars
        if pipelined:
            with addons.pipelined_execution(steps) as p:
                x_stream, fwd_vars, bwd_vars = body(p)
        else:
            x_stream, fwd_vars, bwd_vars = body()
    ir.num_host_transfers = steps if pipelined else 1
    with popxl.Session(ir, "ipu_model") as session:
        if pipelined:
            session.run({x_stream: data})
        else:
            for n in range(steps):
                session.run({x_stream: data[n]})
        return (session.get_tensor_data(bwd_vars.accum.weight).copy(),
                session.get_tensor_data(fwd_vars.weight).copy())


class _both:
    def __init__(self, *cms):
        self.cms = cms

    def __enter__(self):
        for c in self.cms:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.cms):
            c.__exit__(*exc)


def test_pipelined_training_equals_unpipelined_and_numpy():
    steps = 6
    data = np.random.default_rng(7).normal(size=(steps, 1, 4)).astype(np.float32)
    plain_acc, w = _training(False, steps, data)
    pipe_acc, w2 = _training(True, steps, data)
    np.testing.assert_array_equal(w, w2)
    np.testing.assert_allclose(pipe_acc, plain_acc, rtol=1e-6, atol=1e-7)
    # NumPy: y = (x+1) w; the seed is y + 1; dW = (x+1)^T seed; accum = mean over steps.
    xs = data.astype(np.float64) + 1
    grads = [xs[n].T @ (xs[n] @ w + 1) for n in range(steps)]
    np.testing.assert_allclose(pipe_acc, np.mean(grads, axis=0), rtol=1e-5, atol=1e-6)


class DoubleLinear(addons.Module):
    def build(self, x):
        y = x + 2
        w1 = self.add_variable_input("w1", partial(np.random.normal, 0, 0.1, (2, 2)), x.dtype)
        w2 = self.add_variable_input("w2", partial(np.random.normal, 0, 0.1, (2, 2)), x.dtype)
        return ops.gelu(y @ w1) @ w2


def _recompute_grads(recompute: bool):
    np.random.seed(1984)
    ir = popxl.Ir()
    with ir.main_graph:
        xd = np.random.normal(0, 0.1, (2, 2)).astype(np.float32)
        _, xs, x = addons.host_load(xd, popxl.float32, "x")
        args, graph = DoubleLinear().create_graph(x)
        dgraph = addons.autodiff(graph)
        if recompute:
            dgraph = addons.recompute_graph(dgraph)
        vars_ = args.init()
        call_info = graph.bind(vars_).call_with_info(x)
        seed = popxl.constant(np.ones((2, 2), np.float32), name="seed")
        outs = dgraph.call(seed, args=dgraph.grad_graph_info.inputs_dict(call_info))
        streams = [addons.host_store(t) for t in outs]
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run({xs: xd})
        w1, w2 = session.get_tensor_data(vars_.w1), session.get_tensor_data(vars_.w2)
    return dgraph, [got[s] for s in streams], xd, w1, w2


def test_recompute_gives_the_same_gradients():
    import torch

    plain, g_plain, xd, w1, w2 = _recompute_grads(False)
    recomp, g_recomp, _, _, _ = _recompute_grads(True)
    assert "_recomp" in recomp.graph.name
    # The recomputing graph reads forward inputs and seeds only, no activations.
    fwd_inputs = set(recomp.grad_graph_info.forward_graph.inputs)
    for ec in recomp.grad_graph_info.expected_inputs:
        assert ec.connection_type.name == "FwdGrad" or ec.fwd_tensor in fwd_inputs
    assert any(ec.connection_type.name == "Fwd" and ec.fwd_tensor not in fwd_inputs
               for ec in plain.grad_graph_info.expected_inputs)
    for a, b in zip(g_plain, g_recomp):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # PyTorch oracle (float64).
    x = torch.tensor(xd, dtype=torch.float64, requires_grad=True)
    t1 = torch.tensor(w1, dtype=torch.float64, requires_grad=True)
    t2 = torch.tensor(w2, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.gelu((x + 2) @ t1, approximate="tanh") @ t2
    y.backward(torch.ones_like(y))
    want = {"x": x.grad.numpy(), "w1": t1.grad.numpy(), "w2": t2.grad.numpy()}
    got = dict(zip(["x", "w1", "w2"], g_recomp))
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-3, atol=2e-4)


def test_repeat_graph_equals_the_unrolled_loop():
    steps = 5
    xs = np.random.default_rng(5).normal(size=(steps, 3)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros(3, np.float32), name="v")
        s_in = popxl.h2d_stream((3,), popxl.float32, "x")
        x = ops.host_load(s_in)
        new = v * 0.5 + x
        ops.var_updates.copy_var_update_(v, new)
        s_out = addons.host_store(new)
    g = repeat_graph(ir.main_graph, steps)
    assert g.name.startswith("repeat_graph") and [op.type for op in ir.main_graph.ops] == ["Repeat"]
    ir.num_host_transfers = steps
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run({s_in: xs})[s_out]
        final = session.get_tensor_data(v)
    want, acc = [], np.zeros(3)
    for n in range(steps):
        acc = acc * 0.5 + xs[n]
        want.append(acc.copy())
    np.testing.assert_allclose(got, np.array(want), rtol=1e-6)
    np.testing.assert_allclose(final, acc, rtol=1e-6)


def test_repeat_graph_keeps_order_and_count_one():
    ir = popxl.Ir()
    with ir.main_graph:
        small = popxl.variable(1, name="small")
        big = popxl.variable(np.ones((2, 2), np.float32), name="big")
        with popxl.in_sequence():
            _ = big + 1
            _ = small * 1
    assert repeat_graph(ir.main_graph, 1) is ir.main_graph
    g = repeat_graph(ir.main_graph, 5)
    assert [op.type for op in g.get_op_schedule()] == ["Add", "Mul"]
    assert len(g._topo_cons) == 1
    sub = ir.create_empty_graph("with_output")
    with sub:
        i = popxl.graph_input((2,), popxl.float32, "i")
        popxl.graph_output(i + 1)
    with pytest.raises(NotImplementedError, match="has outputs"):
        repeat_graph(sub, 2)


def test_available_memory_proportion_by_ipu():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(0):
            a = popxl.variable(np.ones((2, 2)), dtype=popxl.float32)
            b = popxl.variable(np.full((2, 2), 2.0), dtype=popxl.float32)
            g = ir.create_graph(lambda x, y: x @ y, a, b)
            (c,) = ops.call(g, a, b)
        c1 = c.copy_to_ipu(1)
        with popxl.ipu(1):
            d = popxl.variable(np.ones((2, 2)), dtype=popxl.float32)
            e = c1 @ d
            s = addons.host_store(e)
    addons.set_graph_available_memory_proportion_by_ipu(ir.main_graph, [0.1, 0.2])
    mms = [op for gr in ir._graphs.values() for op in gr._ops if op.type == "MatMul"]
    assert sorted((op.ipu, op.attrs["available_memory_proportion"]) for op in mms) == \
        [(0, 0.1), (1, 0.2)]
    addons.set_available_memory_proportion_by_ipu(ir, [0.3])  # IPU 1: the first one
    assert {op.attrs["available_memory_proportion"] for op in mms} == {0.3}
    with pytest.raises(ValueError, match=r"must be in \(0, 1\]"):
        addons.set_available_memory_proportion_by_ipu(ir, [1.5])
    addons.disable_fc_pass(ir)
    assert all(op.attrs["_use_fully_connected_pass"] is False for op in mms)
    with popxl.Session(ir, "ipu_model") as session:
        np.testing.assert_array_equal(session.run()[s], np.full((2, 2), 8.0))
