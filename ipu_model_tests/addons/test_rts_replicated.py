"""The addons replicated-tensor-sharding helpers (rts, remote, variable
factories, named_replica_grouping) on several replicas, against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons.named_replica_grouping import (NamedReplicaGrouping,
                                                 get_instance_replica_grouping,
                                                 is_cross_instance)
from ipuxl.addons.named_tensors import NamedTensors
from ipuxl.addons.rts import (all_gather_replica_sharded_graph, reduce_replica_sharded_graph,
                              replica_sharded_spec)


@pytest.mark.parametrize("op", ["add", "mean"])
def test_reduce_then_gather_over_named_shard_groups(op):
    R = 4
    ir = popxl.Ir(replication=R)
    rng = np.random.default_rng(0)
    data = {"a": rng.normal(size=(R, 8)).astype(np.float32),
            "b": rng.normal(size=(R, 2, 3)).astype(np.float32)}
    with ir.main_graph:
        streams = {k: popxl.h2d_stream(v.shape[1:], popxl.float32, name=k) for k, v in data.items()}
        ts = NamedTensors.from_dict({k: ops.host_load(s) for k, s in streams.items()})
        groups = NamedReplicaGrouping.from_dict({"a": ir.replica_grouping(group_size=4),
                                                 "b": ir.replica_grouping(group_size=2)})
        red, names = reduce_replica_sharded_graph(ts, op, shard_groups=groups)
        shards = NamedTensors.pack(names, red.bind(ts).call())
        assert shards.a.shape == (2,) and shards.a.meta_shape == (8,)
        assert shards.b.shape == (3,) and shards.b.meta_shape == (2, 3)
        assert replica_sharded_spec(ts.a, groups.a).shape == (2,)
        gat, gnames = all_gather_replica_sharded_graph(shards, replica_groups=groups)
        full = NamedTensors.pack(gnames, gat.bind(shards).call())
        outs = {}
        for k in data:
            outs[k] = popxl.d2h_stream(full.to_dict()[k].shape, popxl.float32, name="out_" + k)
            ops.host_store(outs[k], full.to_dict()[k])
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({streams[k]: v for k, v in data.items()})
    for k, v in data.items():
        want = v.sum(0) if op == "add" else v.mean(0)
        np.testing.assert_allclose(got[outs[k]], np.broadcast_to(want, v.shape), rtol=1e-5,
                                   atol=1e-6)


def test_remote_rts_variables_from_factories_round_trip():
    R = 4
    ir = popxl.Ir(replication=R)
    w_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    with ir.main_graph, popxl.in_sequence():
        f = addons.variable_factory.VariableFactory(lambda: w_np, popxl.float32, "w",
                                                    shard_over=R)
        facts = addons.NamedVariableFactories.from_dict({"w": f})
        buffers = addons.named_variable_buffers(facts, shard_over_dict=R)
        variables = facts.init_remote(buffers, 0)
        load, load_names = addons.load_remote_graph(buffers)
        shards = NamedTensors.pack(load_names, load.call(0))
        assert shards.w.shape == (3,) and shards.w.meta_shape == (3, 4)
        gat, gnames = all_gather_replica_sharded_graph(shards)
        (full,) = gat.bind(shards).call()
        s = popxl.d2h_stream(full.shape, full.dtype, name="full")
        ops.host_store(s, full)
        new = NamedTensors.from_dict({"w": shards.w + 1})
        store = addons.store_remote_graph(buffers)
        store.bind(new).call(0)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()[s]
        np.testing.assert_array_equal(out, np.broadcast_to(w_np, (R, 3, 4)))
        np.testing.assert_array_equal(sess.get_tensor_data(variables.w), w_np + 1)


def test_instance_groupings():
    ir = popxl.Ir(replication=8)
    with ir.main_graph:
        rg = ir.replica_grouping(stride=2, group_size=4)
        assert not is_cross_instance(rg)
        inst = get_instance_replica_grouping(rg)
        assert inst.stride == 2 and inst.group_size == 4
        assert get_instance_replica_grouping().group_size == 8


def test_strided_collectives_and_identical_variants_grads():
    from ipuxl.addons.ops import replicated_strided_collectives as S
    from ipuxl.transforms import autodiff

    R = 4
    ir = popxl.Ir(replication=R)
    rng = np.random.default_rng(1)
    x_np = rng.normal(size=(R, 3)).astype(np.float32)
    dy_np = rng.normal(size=(R, 3)).astype(np.float32)
    with ir.main_graph:
        g = ir.replica_grouping(stride=2, group_size=2)  # [0, 1, 0, 1]
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        dys = popxl.h2d_stream((3,), popxl.float32, name="dy")
        x, dy = ops.host_load(xs), ops.host_load(dys)
        outs = {}
        for name, fn in (("ii", S.replicated_all_reduce_strided_identical_inputs),
                         ("igi", S.replicated_all_reduce_strided_identical_grad_inputs)):
            graph = ir.create_graph(lambda t: fn(t, "add", g), x)
            ginfo = autodiff(graph)
            info = ops.call_with_info(graph, x)
            (dx,) = ops.call(ginfo.graph, dy, inputs_dict=ginfo.inputs_dict(info))
            for k, t in (("y", info.outputs[0]), ("dx", dx)):
                outs[name + k] = popxl.d2h_stream(t.shape, t.dtype, name=name + k)
                ops.host_store(outs[name + k], t)
        gathered = S.replicated_all_gather_strided(x, g)
        outs["gather"] = popxl.d2h_stream(gathered.shape, gathered.dtype, name="gather")
        ops.host_store(outs["gather"], gathered)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs: x_np, dys: dy_np})
    pair = lambda a: np.stack([a[0] + a[2], a[1] + a[3], a[0] + a[2], a[1] + a[3]])
    np.testing.assert_array_equal(got[outs["iiy"]], x_np)           # identity forward
    np.testing.assert_allclose(got[outs["iidx"]], pair(dy_np), rtol=1e-6)  # all-reduce grad
    np.testing.assert_allclose(got[outs["igiy"]], pair(x_np), rtol=1e-6)   # all-reduce forward
    np.testing.assert_array_equal(got[outs["igidx"]], dy_np)        # identity grad
    for r in range(R):
        np.testing.assert_array_equal(got[outs["gather"]][r],
                                      np.concatenate([x_np[r % 2], x_np[r % 2 + 2]]))


def test_seed_variable_one_seed_per_group():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        rg = ir.replica_grouping(stride=2, group_size=2)  # [0, 1, 0, 1]
        seed_v, seed = addons.seed_variable(7, rg)
        s = popxl.d2h_stream(seed.shape, seed.dtype)
        ops.host_store(s, seed)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()[s]
        want = popxl.create_seeds(7, replicas=2)
        for r in range(4):
            np.testing.assert_array_equal(out[r], want[r % 2])
        np.testing.assert_array_equal(sess.get_tensor_data(seed_v), want)
        sess.write_variable_data(seed_v, want[::-1].copy())
        np.testing.assert_array_equal(sess.run()[s][0], want[1])


def test_numpy_integers_are_accepted_as_counts():
    # PopXL tutorials 5 and 6 compute shard_over with NumPy
    # (np.prod(meta_shape) // np.prod(shape)), which PopXL accepts.
    import ipuxl.addons as addons

    ir = popxl.Ir(replication=np.int64(2))
    assert ir.replication_factor == 2 and type(ir.replication_factor) is int
    with ir.main_graph:
        f = addons.VariableFactory(lambda: np.zeros((4,), np.float32), popxl.float32,
                                   name="w", shard_over=np.int64(2))
        with pytest.raises(ValueError, match="shard_over must be a positive int"):
            addons.VariableFactory(lambda: np.zeros((4,), np.float32), popxl.float32,
                                   name="w", shard_over=1.5)
    assert f.shard_over == 2 and type(f.shard_over) is int
