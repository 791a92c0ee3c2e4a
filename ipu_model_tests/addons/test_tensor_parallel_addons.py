"""The tensor-parallel addons (``cross_entropy_sharded_loss``,
``layer_norm_distributed`` and its layer, ``replicated_all_reduce_TP``,
``patterns``) on several replicas, against PyTorch float64 on the unsharded
tensors."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons.layers.layer_norm_distributed import LayerNormDistributed
from ipuxl.addons.ops.cross_entropy_sharded_loss import cross_entropy_sharded_loss
from ipuxl.addons.ops.layer_norm_distributed import layer_norm_distributed
from ipuxl.addons.ops.replicated_all_reduce_TP import (
    replicated_all_reduce, replicated_all_reduce_identical_grad_inputs,
    replicated_all_reduce_identical_inputs)
from ipuxl.addons.patterns import apply_pre_alias_patterns

torch = pytest.importorskip("torch")

SHARDS = 4


def _ce_run(logits_full, labels, dtype, reduction, ignore):
    """The sharded loss and logits gradient (seed = 1 per loss element) for
    ``logits_full`` (n, classes) split over SHARDS replicas."""
    n, classes = logits_full.shape
    per = classes // SHARDS
    npdt = dtype.as_numpy()
    ir = popxl.Ir(replication=SHARDS)
    with ir.main_graph:
        ls = popxl.h2d_stream((n, per), dtype, name="logits")
        ix = popxl.h2d_stream((n,), popxl.int32, name="labels")
        logits, idx = ops.host_load(ls), ops.host_load(ix)
        args = [logits, idx]
        if ignore:
            offs = popxl.variable(np.arange(SHARDS, dtype=np.int32) * per, popxl.int32,
                                  replica_grouping=ir.replica_grouping(group_size=1))
            args.append(-1 * offs)

        def loss_fn(lg, lb, *ig):
            return cross_entropy_sharded_loss(lg, lb, ig[0] if ig else None, reduction=reduction)

        graph = ir.create_graph(loss_fn, *args)
        ginfo = popxl.transforms.autodiff(graph, grads_required=[graph.inputs[0]])
        info = ops.call_with_info(graph, *args)
        loss = info.outputs[0]
        seed = ops.init(loss.shape, loss.dtype, "seed", "zero") + 1.0
        (dlogits,) = ops.call(ginfo.graph, seed, inputs_dict=ginfo.inputs_dict(info))
        outs = {}
        for k, t in (("loss", loss), ("grad", dlogits)):
            outs[k] = popxl.d2h_stream(t.shape, t.dtype, name=k)
            ops.host_store(outs[k], t)
    shards = np.stack(np.split(logits_full, SHARDS, axis=1)).astype(npdt)
    adj = np.stack([labels - r * per for r in range(SHARDS)]).astype(np.int32)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({ls: shards, ix: adj})
    return got[outs["loss"]], np.concatenate(list(got[outs["grad"]]), axis=1)


@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_sharded_loss_against_torch(dtype, reduction, ignore):
    rng = np.random.default_rng(3)
    n, classes = 9, 20
    logits = (rng.standard_normal((n, classes)) * 3).astype(dtype.as_numpy())
    labels = rng.integers(0, classes, n)
    labels[-1] = 0
    loss, grad = _ce_run(logits, labels, dtype, reduction, ignore)
    t = torch.tensor(logits.astype(np.float64), requires_grad=True)
    ref = torch.nn.functional.cross_entropy(t, torch.tensor(labels),
                                            ignore_index=0 if ignore else -100,
                                            reduction=reduction)
    ref.backward(torch.ones_like(ref))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == popxl.float32 else dict(rtol=5e-3, atol=5e-3)
    for r in range(SHARDS):  # every member has the same loss
        np.testing.assert_array_equal(loss[r], loss[0])
    np.testing.assert_allclose(loss[0].astype(np.float64), ref.detach().numpy(), **tol)
    np.testing.assert_allclose(grad.astype(np.float64), t.grad.numpy(), **tol)


def test_cross_entropy_sharded_loss_bad_input():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        lg = popxl.variable(np.zeros((3, 4), np.float32))
        lb = popxl.variable(np.zeros((3,), np.int32))
        with pytest.raises(ValueError, match="reduction"):
            cross_entropy_sharded_loss(lg, lb, reduction="max")
        with pytest.raises(ValueError, match="indices"):
            cross_entropy_sharded_loss(lg, popxl.variable(np.zeros((4,), np.int32)))
        with pytest.raises(ValueError, match="logits"):
            cross_entropy_sharded_loss(popxl.variable(np.zeros((3,), np.float32)), lb)


@pytest.mark.parametrize("layer", [False, True])
def test_layer_norm_distributed_against_torch(layer):
    rng = np.random.default_rng(5)
    n, hidden, eps = 6, 16, 1e-5
    x = rng.standard_normal((n, hidden)).astype(np.float32) * 2 + 0.5
    dy = rng.standard_normal((n, hidden)).astype(np.float32)
    w = rng.standard_normal(hidden).astype(np.float32)
    b = rng.standard_normal(hidden).astype(np.float32)
    shard = lambda a, ax: np.stack(np.split(a, SHARDS, axis=ax))
    ir = popxl.Ir(replication=SHARDS)
    rg = ir.replica_grouping(group_size=SHARDS)
    with ir.main_graph:
        xv = popxl.variable(shard(x, 1), name="x", replica_grouping=rg.transpose())
        dyv = popxl.variable(shard(dy, 1), name="dy", replica_grouping=rg.transpose())
        if layer:
            facts, graph = LayerNormDistributed(replica_grouping=rg).create_graph(xv)
            dgraph = addons.autodiff(graph)
            fwd = graph.bind(facts.init("ln")).call_with_info(xv)
            grads = dgraph.call(dyv, args=dgraph.grad_graph_info.inputs_dict(fwd))
        else:
            wv = popxl.variable(shard(w, 0), name="w", replica_grouping=rg.transpose())
            bv = popxl.variable(shard(b, 0), name="b", replica_grouping=rg.transpose())
            graph = ir.create_graph(lambda a, c, d: layer_norm_distributed(a, c, d, eps, rg),
                                    xv, wv, bv)
            ginfo = popxl.transforms.autodiff(graph)
            fwd = ops.call_with_info(graph, xv, wv, bv)
            grads = ops.call(ginfo.graph, dyv, inputs_dict=ginfo.inputs_dict(fwd))
        outs = [fwd.outputs[0]] + list(grads)
        streams = []
        for i, t in enumerate(outs):
            streams.append(popxl.d2h_stream(t.shape, t.dtype, name=f"o{i}"))
            ops.host_store(streams[-1], t)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    if layer:
        w, b = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    tx, tw, tb = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.layer_norm(tx, (hidden,), tw, tb, eps)
    ty.backward(torch.tensor(dy.astype(np.float64)))
    want = [ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()]
    for s, ref, ax in zip(streams, want, (1, 1, 0, 0)):
        np.testing.assert_allclose(np.concatenate(list(got[s]), axis=ax), ref,
                                   rtol=2e-5, atol=2e-5)


def test_replicated_all_reduce_TP_forward_and_gradients():
    R = 4
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((R, 3)).astype(np.float32)
    dy_np = rng.standard_normal((R, 3)).astype(np.float32)
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        dys = popxl.h2d_stream((3,), popxl.float32, name="dy")
        x, dy = ops.host_load(xs), ops.host_load(dys)
        outs = {}
        for name, fn in (("ii", replicated_all_reduce_identical_inputs),
                         ("igi", replicated_all_reduce_identical_grad_inputs),
                         ("ar", replicated_all_reduce)):
            graph = ir.create_graph(fn, x)
            ginfo = popxl.transforms.autodiff(graph)
            info = ops.call_with_info(graph, x)
            (dx,) = ops.call(ginfo.graph, dy, inputs_dict=ginfo.inputs_dict(info))
            for k, t in (("y", info.outputs[0]), ("dx", dx)):
                outs[name + k] = popxl.d2h_stream(t.shape, t.dtype, name=name + k)
                ops.host_store(outs[name + k], t)
    apply_pre_alias_patterns(ir, level="default")
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs: x_np, dys: dy_np})
    total = lambda a: np.broadcast_to(a.astype(np.float64).sum(0), a.shape)
    np.testing.assert_array_equal(got[outs["iiy"]], x_np)
    np.testing.assert_allclose(got[outs["iidx"]], total(dy_np), rtol=1e-6)
    np.testing.assert_allclose(got[outs["igiy"]], total(x_np), rtol=1e-6)
    np.testing.assert_array_equal(got[outs["igidx"]], dy_np)
    np.testing.assert_allclose(got[outs["ary"]], total(x_np), rtol=1e-6)
    np.testing.assert_allclose(got[outs["ardx"]], total(dy_np), rtol=1e-6)


def test_apply_pre_alias_patterns_checks_the_level():
    ir = popxl.Ir()
    apply_pre_alias_patterns(ir, "all")
    with pytest.raises(KeyError, match="patterns level 'everything'"):
        apply_pre_alias_patterns(ir, "everything")
