"""Replication in one process: R replica states running one program, host
arrays with the replica dimension, replica-grouped variables and their
retrieval modes, replica-varying seeds, replicated tensor sharding, data-
parallel training against the single-replica run, the IPU model's
collective costs and the errors for bad replication setups."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir
from ipuxl.transforms import autodiff

C = ops.collectives


# ---------------------------------------------------------------- streams
@pytest.mark.parametrize("R,n", [(2, 1), (4, 1), (2, 3), (4, 2)])
def test_each_replica_computes_on_its_own_data(R, n):
    ir = popxl.Ir(replication=R)
    ir.num_host_transfers = n
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        w = popxl.variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")
        ys = popxl.d2h_stream((3,), popxl.float32, name="y")
        with popxl.in_sequence():
            for _ in range(n):
                x = ops.host_load(xs)
                ops.host_store(ys, x * w)
    data = np.random.default_rng(0).normal(size=((n,) if n > 1 else ()) + (R, 3)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess._full_shape((3,)) == ((n,) if n > 1 else ()) + (R, 3)
        assert sess.create_host_outputs()[ys].shape == data.shape
        out = sess.run({xs: data})[ys]
    np.testing.assert_array_equal(out, data * np.array([1, 2, 3], np.float32))


def test_host_array_without_the_replica_dimension_is_refused():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        ops.host_store(popxl.d2h_stream((3,), popxl.float32), ops.host_load(xs))
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(ValueError, match=r"stream x has shape \(3,\), expected \(4, 3\).*"
                                             r"replication_factor=4"):
            sess.run({xs: np.zeros(3, np.float32)})
        with pytest.raises(ValueError, match=r"expected \(4, 3\)"):
            sess.run({xs: np.zeros((2, 3), np.float32)})
        bad_out = {s: np.zeros((3,), np.float32) for s in sess.create_host_outputs()}
        with pytest.raises(ValueError, match=r"shape \(4, 3\) \(num_host_transfers=1, "
                                             r"replication_factor=4\)"):
            sess.run_with_outputs({xs: np.zeros((4, 3), np.float32)}, bad_out)


def test_bad_replication_setups():
    with pytest.raises(ValueError, match="replication must be a positive int"):
        popxl.Ir(replication=0)
    with pytest.raises(RuntimeError, match=r"instance layout is not set.*ipuxl poprun"):
        popxl.Ir(replication="popdist")  # no launcher (tests/test_popdist.py: with one)
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        popxl.variable(1.0) + 1
    with pytest.raises(ValueError, match="'cpu' device does not support replication"):
        popxl.Session(ir, "cpu")
    ir = popxl.Ir(replication=6)
    with pytest.raises(ValueError, match="Stride must be a factor of the number of replicas"):
        ir.replica_grouping(stride=4)
    with pytest.raises(ValueError, match=r"stride \* group_size \(8\) must divide"):
        ir.replica_grouping(stride=2, group_size=4)
    with ir.main_graph:
        with pytest.raises(ValueError, match=r"3 replica groups the host data must have shape"):
            popxl.variable(np.zeros((2, 4), np.float32),
                           replica_grouping=ir.replica_grouping(group_size=2))


def test_grouping_changed_after_the_ops_is_caught_when_lowered():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
        y = C.replicated_all_reduce(x, group=ir.replica_grouping(group_size=2))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype), y)
    ir.replication_factor = 2
    with pytest.raises(Exception, match="replica grouping names 4 replicas, the program has 2"):
        popxl.Session(ir, "ipu_model")


# ---------------------------------------------------------------- variables
def test_grouped_variables_one_value_per_group():
    R = 8
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        rg = ir.replica_grouping(stride=2, group_size=2)  # [0, 1, 0, 1, 2, 3, 2, 3]
        init = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
        v = popxl.variable(init, name="v", replica_grouping=rg)
        assert v.shape == (3,) and v.shape_on_host == (4, 3)
        ys = popxl.d2h_stream((3,), popxl.float32, name="y")
        ops.host_store(ys, v)
        ops.var_updates.accumulate_(v, popxl.constant(np.ones(3, np.float32)))
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()[ys]
        for r, g in enumerate(rg.assignment):
            np.testing.assert_array_equal(out[r], init[g])
        np.testing.assert_array_equal(sess.get_tensor_data(v), init + 1)
        sess.write_variable_data(v, np.full((4, 3), 7, np.float32))
        out = sess.run()[ys]
        np.testing.assert_array_equal(out, np.full((R, 3), 7, np.float32))
        with pytest.raises(ValueError, match=r"does not match the shape of variable"):
            sess.write_variable_data(v, np.zeros(3, np.float32))
    np.testing.assert_array_equal(sess.get_tensor_data(v), np.full((4, 3), 8, np.float32))


def test_non_constant_grouping_variables():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        rg = ir.replica_grouping_from_assignments([0, 1, 1, 0])
        v = popxl.variable(np.array([[10.0], [20.0]], np.float32), replica_grouping=rg)
        ys = popxl.d2h_stream((1,), popxl.float32)
        ops.host_store(ys, v)
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_array_equal(sess.run()[ys].ravel(), [10, 20, 20, 10])
        np.testing.assert_array_equal(sess.get_tensor_data(v), [[10.0], [20.0]])


def test_all_replicas_retrieval_reads_every_replica():
    R = 4
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        xs = popxl.h2d_stream((2,), popxl.float32, name="x")
        a = popxl.variable(np.zeros(2, np.float32), name="a", retrieval_mode="all_replicas")
        rg = ir.replica_grouping(group_size=2)
        b = popxl.variable(np.zeros((2, 2), np.float32), name="b", replica_grouping=rg,
                           retrieval_mode="all_replicas")
        c = popxl.variable(np.zeros(2, np.float32), name="c")  # one_per_group
        x = ops.host_load(xs)
        for v in (a, b, c):
            ops.var_updates.accumulate_(v, x)
    data = np.arange(R * 2, dtype=np.float32).reshape(R, 2)
    with popxl.Session(ir, "ipu_model") as sess:
        # Before any run: the host values, per replica.
        assert sess.get_tensor_data(a).shape == (R, 2)
        sess.run({xs: data})
        np.testing.assert_array_equal(sess.get_tensor_data(a), data)
        np.testing.assert_array_equal(sess.get_tensor_data(b), data)
        np.testing.assert_array_equal(sess.get_tensor_data(c), data[0])  # replica 0's
        with pytest.raises(NotImplementedError, match='"all_replicas" retreval mode'):
            sess.write_variable_data(a, np.zeros((2,), np.float32))


def test_replica_varying_seeds_give_replica_varying_randomness():
    """As PopXL: the seeds come from the host, one per replica
    (``create_seeds(replicas=R)``) through a stream with the replica dim."""
    R = 4
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        ss = popxl.h2d_stream((2,), popxl.uint32, name="seed")
        seed = ops.host_load(ss)
        x = ops.random_uniform(seed, (64,))
        ys = popxl.d2h_stream(x.shape, x.dtype)
        ops.host_store(ys, x)
    seeds = popxl.create_seeds(1984, replicas=R)
    assert seeds.shape == (R, 2)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({ss: seeds})[ys]
        same = sess.run({ss: np.broadcast_to(seeds[0], (R, 2)).copy()})[ys]
    for r in range(1, R):
        assert not np.array_equal(out[0], out[r])
        np.testing.assert_array_equal(same[r], out[0])


def test_checkpoint_of_grouped_variables(tmp_path):
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        rg = ir.replica_grouping(group_size=2)
        v = popxl.variable(np.arange(4, dtype=np.float32).reshape(2, 2), name="v",
                           replica_grouping=rg)
        ops.var_updates.accumulate_(v, popxl.constant(np.ones(2, np.float32)))
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.save_checkpoint(tmp_path / "ck")
        sess.run()
        sess.load_checkpoint(tmp_path / "ck")
        np.testing.assert_array_equal(sess.get_tensor_data(v),
                                      np.arange(4, dtype=np.float32).reshape(2, 2) + 1)


# ---------------------------------------------------------------- RTS
@pytest.mark.parametrize("R,group_size,shard_over", [(2, 2, 2), (4, 4, 4), (4, 4, 2),
                                                      (8, 4, 4), (8, 4, 2)])
def test_replica_sharded_variable_shards_and_gathers(R, group_size, shard_over):
    ir = popxl.Ir(replication=R)
    shape = (3, 5)
    with ir.main_graph, popxl.in_sequence():
        rg = ir.replica_grouping(group_size=group_size)
        ng = rg.num_groups
        init = np.arange(ng * 15, dtype=np.float32).reshape((ng,) + shape if ng > 1 else shape)
        var, shard = popxl.replica_sharded_variable(init, popxl.float32, "w",
                                                    replica_grouping=rg, shard_over=shard_over)
        m = -(-15 // shard_over)
        assert shard.shape == (m,) and shard.meta_shape == shape
        assert var.shape_on_host == init.shape
        s_shard = popxl.d2h_stream(shard.shape, shard.dtype, name="shard")
        ops.host_store(s_shard, shard)
        gather_group = ir.replica_grouping(group_size=shard_over)
        full = C.replicated_all_gather(shard, group=gather_group)
        s_full = popxl.d2h_stream(full.shape, full.dtype, name="full")
        ops.host_store(s_full, full)
        ops.var_updates.accumulate_(shard, popxl.constant(np.ones(m, np.float32)))
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
        for r in range(R):
            g = rg.assignment[r]
            value = init[g] if ng > 1 else init
            flat = np.concatenate([value.reshape(-1), np.zeros(m * shard_over - 15, np.float32)])
            rank = [q for q in range(R) if rg.assignment[q] == g].index(r)
            k = rank % shard_over
            np.testing.assert_array_equal(out[s_shard][r], flat[k * m:(k + 1) * m])
            np.testing.assert_array_equal(out[s_full][r], value)
        # The shards were updated in place; weights_to_host stores them back.
        np.testing.assert_array_equal(sess.get_tensor_data(var), init + 1)
        sess.write_variable_data(var, np.zeros_like(init))
        np.testing.assert_array_equal(sess.run()[s_full], np.zeros((R,) + shape, np.float32))


def test_replica_sharded_variable_errors():
    with pytest.raises(ValueError, match="must be greater than 1"):
        with popxl.Ir().main_graph:
            popxl.replica_sharded_variable(np.zeros(4, np.float32))
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        with pytest.raises(ValueError, match=r"sharding group size \(8\) must be less than"):
            popxl.replica_sharded_variable(np.zeros(4, np.float32), shard_over=8)
        with pytest.raises(ValueError, match=r"must be divisible by the sharding group size \(3\)"):
            popxl.replica_sharded_variable(np.zeros(4, np.float32), shard_over=3)
        var, _ = popxl.replica_sharded_variable(np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="remote variable"):
            var + 1


# ---------------------------------------------------------------- training
def _mlp_loss(x, labels, W0, W1):
    h = ops.gelu(x @ W0)
    return ops.nll_loss(ops.softmax(h @ W1, axis=-1), labels)


def _train(R, X, Y, W0, W1, steps, lr, rts=False):
    """SGD on the mean loss; each replica gets B / R rows; gradients are
    mean-all-reduced (with ``rts``: the weights are replica-sharded, the
    gradients reduce-scattered into the shards and the weights gathered)."""
    B = X.shape[1]
    local = B // R
    ir = popxl.Ir(replication=R)
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((local, X.shape[2]), popxl.float32, name="x")
        ls = popxl.h2d_stream((local,), popxl.int32, name="labels")
        x, labels = ops.host_load(xs), ops.host_load(ls)
        if rts:
            (v0, s0), (v1, s1) = (popxl.replica_sharded_variable(W0, name="W0"),
                                  popxl.replica_sharded_variable(W1, name="W1"))
            w0 = C.replicated_all_gather(s0)
            w1 = C.replicated_all_gather(s1)
        else:
            v0, v1 = popxl.variable(W0, name="W0"), popxl.variable(W1, name="W1")
            w0, w1 = v0, v1
        graph = popxl.gcg().ir.create_graph(_mlp_loss, x, labels, w0, w1)
        ginfo = autodiff(graph, grads_required=graph.inputs[2:])
        call = ops.call_with_info(graph, x, labels, w0, w1)
        grads = ops.call(ginfo.graph, popxl.constant(1.0), inputs_dict=ginfo.inputs_dict(call))
        if rts:
            for shard, g in zip((s0, s1), grads):
                g = C.replicated_reduce_scatter(g, "mean",
                                                configure_output_for_replicated_tensor_sharding=True)
                ops.scaled_add_(shard, g, b=-lr)
        else:
            for v, g in zip((v0, v1), grads):
                if R > 1:
                    g = C.replicated_all_reduce_(g, "mean")
                ops.scaled_add_(v, g, b=-lr)
    with popxl.Session(ir, "ipu_model") as sess:
        for t in range(steps):
            xb, yb = X[t], Y[t]
            if R > 1:
                xb, yb = xb.reshape(R, local, -1), yb.reshape(R, local)
            sess.run({xs: xb, ls: yb})
    return sess.get_tensor_data(v0), sess.get_tensor_data(v1)


def _numpy_train(X, Y, W0, W1, steps, lr):
    """The same SGD in float64 NumPy (tanh-approximated GELU, as PopART's)."""
    W0, W1 = W0.astype(np.float64), W1.astype(np.float64)
    c = np.sqrt(2 / np.pi)
    for t in range(steps):
        x, y = X[t].astype(np.float64), Y[t]
        a = x @ W0
        u = c * (a + 0.044715 * a ** 3)
        th = np.tanh(u)
        h = 0.5 * a * (1 + th)
        z = h @ W1
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        dz = p.copy()
        dz[np.arange(len(y)), y] -= 1
        dz /= len(y)
        dW1 = h.T @ dz
        dh = dz @ W1.T
        dgelu = 0.5 * (1 + th) + 0.5 * a * (1 - th ** 2) * c * (1 + 3 * 0.044715 * a ** 2)
        dW0 = x.T @ (dh * dgelu)
        W0 -= lr * dW0
        W1 -= lr * dW1
    return W0, W1


def test_data_parallel_training_equals_the_single_replica_run_on_the_whole_batch():
    rng = np.random.default_rng(7)
    steps, B, D, H, K = 5, 16, 12, 8, 4
    X = rng.normal(size=(steps, B, D)).astype(np.float32)
    Y = rng.integers(0, K, size=(steps, B)).astype(np.int32)
    W0 = (rng.normal(size=(D, H)) * 0.3).astype(np.float32)
    W1 = (rng.normal(size=(H, K)) * 0.3).astype(np.float32)
    ref = _numpy_train(X, Y, W0, W1, steps, 0.5)
    one = _train(1, X, Y, W0, W1, steps, 0.5)
    np.testing.assert_allclose(one[0], ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(one[1], ref[1], rtol=1e-4, atol=1e-5)
    for R in (2, 4, 8):
        got = _train(R, X, Y, W0, W1, steps, 0.5)
        for a, b in zip(got, one):
            # float32 rounding: the slices' means summed in another order.
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)
    rts = _train(4, X, Y, W0, W1, steps, 0.5, rts=True)
    for a, b in zip(rts, one):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)


# ---------------------------------------------------------------- IPU model
def _profile_all_reduce(R, group_size, nelms=1 << 16, op="add", kind="all_reduce"):
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        x = popxl.variable(np.ones(nelms, np.float32))
        g = ir.replica_grouping(group_size=group_size)
        if kind == "all_reduce":
            y = C.replicated_all_reduce(x, op, g)
        elif kind == "reduce_scatter":
            y = C.replicated_reduce_scatter(x, op, g)
        else:
            y = C.replicated_all_gather(x, group=g)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype), y)
    return profile_ir(ir, "ipu2")


def _collective_cycles(p):
    steps = p.steps
    return sum(int(c) for k, c in zip(steps["kind"], steps["cycles"]) if k == "Collective")


def test_ipu_model_charges_collectives_by_the_ring_formula():
    sync = 500  # ipu2 sync_global_cycles
    one = _collective_cycles(_profile_all_reduce(4, 1))
    two = _collective_cycles(_profile_all_reduce(4, 2))
    four = _collective_cycles(_profile_all_reduce(4, 4))
    assert 0 < one < two < four
    # All-reduce: 2(G-1) syncs plus 2(G-1)/G of the bytes over the links.
    assert four - 6 * sync > two - 2 * sync
    rs = _collective_cycles(_profile_all_reduce(4, 4, kind="reduce_scatter"))
    ag = _collective_cycles(_profile_all_reduce(4, 4, nelms=1 << 14, kind="all_gather"))
    assert 3 * sync < rs < four and 3 * sync < ag


def test_checkpoint_refuses_all_replicas_variables(tmp_path):
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        v = popxl.variable(np.zeros(2, np.float32), name="v", retrieval_mode="all_replicas")
        w = popxl.variable(np.zeros(2, np.float32), name="w")
        ops.var_updates.accumulate_(v, popxl.constant(np.ones(2, np.float32)))
        ops.var_updates.accumulate_(w, popxl.constant(np.ones(2, np.float32)))
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        with pytest.raises(NotImplementedError, match="variable 'v' has retrieval_mode"):
            sess.save_checkpoint(tmp_path / "ck")
        sess.save_checkpoint(tmp_path / "ck", [w])
