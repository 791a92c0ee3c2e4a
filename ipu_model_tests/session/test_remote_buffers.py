"""Remote buffers and remote variables: PopXL's API and errors, loads and
stores against NumPy, round trips of remote variables through the host
(per entry, per replica), and nothing lost when a run fails."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl._remote_state import RemoteVariables
from ipuxl._sharding import shard, shard_rank, unshard
from ipuxl.lowering import build


# ---------------------------------------------------------------- RemoteBuffer
def test_buffer_ids_shape_dtype_entries():
    with popxl.Ir().main_graph:
        a = popxl.remote_buffer((2, 3), popxl.float16, 4)
        b = popxl.RemoteBuffer((5,), popxl.int32, 1)
        assert (a.remote_buffer_id, b.remote_buffer_id) == (1, 2)
        assert a.tensor_shape == (2, 3) and a.tensor_dtype == popxl.float16 and a.entries == 4
        a.entries = 7
        assert a.entries == 7 and a.tensor_shape == (2, 3)
        with pytest.raises(AttributeError, match="can't set attribute 'tensor_shape'"):
            a.tensor_shape = (1,)
        with pytest.raises(AttributeError, match="can't set attribute 'tensor_dtype'"):
            a.tensor_dtype = popxl.int8
        for bad in (0, -1):
            with pytest.raises(ValueError, match="Entries must be a non-zero, positive integer"):
                popxl.remote_buffer((1,), popxl.float32, bad)
            with pytest.raises(ValueError, match="Entries must be a non-zero, positive integer"):
                a.entries = bad
        with pytest.raises(ValueError, match="negative dimension"):
            popxl.remote_buffer((-1,), popxl.float32)
    with popxl.Ir().main_graph:  # ids restart per Ir
        assert popxl.remote_buffer((1,), popxl.float32).remote_buffer_id == 1


def test_validate_tensor_matches_buffer_names_the_tensor():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.zeros((2, 3), np.float32), name="w")
        popxl.remote_buffer((2, 3), popxl.float32).validate_tensor_matches_buffer(t)
        for shape, dt in (((3, 2), popxl.float32), ((2, 3), popxl.float16)):
            with pytest.raises(ValueError, match=r"Tensor w does not match buffer"):
                popxl.remote_buffer(shape, dt).validate_tensor_matches_buffer(t)


# ------------------------------------------------------------ loads and stores
def test_store_then_load_several_buffers_and_offsets():
    """The public-API part of PopXL's test_remote_buffer_store_load.py."""
    rng = np.random.default_rng(0)
    s1 = rng.random((1, 3, 5)).astype(np.float32)
    s2 = rng.random((7, 11)).astype(np.float16)
    s3 = rng.random((7, 11)).astype(np.float16)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        v1, v2, v3 = (popxl.variable(a) for a in (s1, s2, s3))
        dst1 = popxl.variable(np.zeros_like(s1), name="dst1")
        dst3 = popxl.variable(np.zeros_like(s3), name="dst3")
        rb1 = popxl.RemoteBuffer(s1.shape, popxl.float32, 1)
        rb2 = popxl.RemoteBuffer(s2.shape, popxl.float16, 2)
        off = popxl.constant(0, name="offset_1")
        ops.remote_store(rb1, off, v1)
        out1 = ops.remote_load(rb1, off, name="load_out_1")
        out1_ = ops.remote_load_(rb1, off, dst1)
        ops.remote_store(rb2, popxl.constant(0), v2)
        ops.remote_store(rb2, 1, v3)
        out2 = ops.remote_load(rb2, 0)
        out3_ = ops.remote_load_(rb2, 1, dst3)
        streams = {}
        for k, t in dict(out1=out1, out1_=out1_, dst1=dst1, out2=out2, out3_=out3_).items():
            streams[k] = popxl.d2h_stream(t.shape, t.dtype, name=k)
            ops.host_store(streams[k], t)
    assert out1.id.endswith("load_out_1_remote_loaded")
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run()
        after = s.get_tensors_data([dst1, dst3])
    np.testing.assert_array_equal(got[streams["out1"]], s1)
    np.testing.assert_array_equal(got[streams["out1_"]], s1)
    np.testing.assert_array_equal(got[streams["dst1"]], s1)  # loaded in place
    np.testing.assert_array_equal(got[streams["out2"]], s2)
    np.testing.assert_array_equal(got[streams["out3_"]], s3)
    np.testing.assert_array_equal(after[dst1], s1)
    np.testing.assert_array_equal(after[dst3], s3)


def test_dynamic_offsets_in_a_loop_against_numpy():
    """A ring of 5 entries: each iteration loads entry i, adds x and stores
    it in entry (i + 1) % 5; the offsets are tensors read at run time."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ir = popxl.Ir()
    with ir.main_graph:
        rb = popxl.remote_buffer((2, 3), popxl.float32, 5)
        xs = popxl.h2d_stream((2, 3), popxl.float32, "x")
        table = popxl.remote_variable(np.zeros((2, 3), np.float32), rb, 0, name="table")
        counter = popxl.variable(np.array(0, np.int32), name="i")

        def body(i, xv):
            with popxl.in_sequence(True):
                cur = ops.remote_load(rb, i)
                nxt = ops.increment_mod(i, 1, 5)
                ops.remote_store(rb, nxt, cur + xv)
                ops.var_updates.copy_var_update_(i, nxt)
            return i

        xv = ops.host_load(xs)
        g = ir.create_graph(body, counter, xv)
        ops.repeat(g, 7, counter, xv, inputs_dict={})
    del table
    want = np.zeros((5, 2, 3), np.float32)
    i = 0
    for _ in range(7):
        want[(i + 1) % 5] = want[i] + x
        i = (i + 1) % 5
    with popxl.Session(ir, "ipu_model") as s:
        s.run({xs: x})
        eng = s._engine
        got = np.empty((5, 2, 3), np.float32)
        for e in range(5):
            eng.read_remote(s._prog.remote_index[id(rb)], e, 0, got[e])
    np.testing.assert_array_equal(got, want)


def test_remote_load_keeps_the_meta_shape_and_outputs_name():
    with popxl.Ir().main_graph:
        rb = popxl.remote_buffer((4,), popxl.float32)
        rb.meta_shape = (2, 4)
        t = ops.remote_load(rb, 0, "w")
        assert t.meta_shape == (2, 4) and t.shape == (4,)
        assert t.id == "w_remote_loaded"


def test_bad_offsets_and_mismatches_are_clear_errors():
    with popxl.Ir().main_graph:
        rb = popxl.remote_buffer((2,), popxl.float32, 2)
        t = popxl.variable(np.zeros(3, np.float32), name="t3")
        with pytest.raises(ValueError, match="RemoteStore: Tensor t3 does not match buffer"):
            ops.remote_store(rb, 0, t)
        with pytest.raises(ValueError, match="RemoteLoad: Tensor t3 does not match buffer"):
            ops.remote_load_(rb, 0, t)
        with pytest.raises(ValueError, match="offset must be >= 0"):
            ops.remote_load(rb, -1)
        f = popxl.variable(np.zeros((), np.float32), name="fo")
        with pytest.raises(TypeError, match="offset 'fo' must be an integer scalar"):
            ops.remote_load(rb, f)
        with pytest.raises(TypeError, match="must be a popxl.RemoteBuffer"):
            ops.remote_load("rb", 0)
        with pytest.raises(ValueError, match=r"Tensor t3b does not match buffer"):
            popxl.remote_variable(np.zeros(3, np.float32), rb, 0, name="t3b")
        assert "t3b" not in popxl.gcg()._tensors


def test_a_constant_offset_past_the_entries_fails_at_compile_time():
    ir = popxl.Ir()
    with ir.main_graph:
        rb = popxl.remote_buffer((2,), popxl.float32, 2)
        ops.remote_store(rb, 2, popxl.variable(np.ones(2, np.float32), name="v"))
    with pytest.raises(ValueError, match=r"RemoteStore 'remote_store': offset 2 .* out of "
                                         r"range for remote buffer 1 \(RB_1\) of 2 entries"):
        popxl.Session(ir, "ipu_model")


def test_remote_variable_placement_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        rb = popxl.remote_buffer((2,), popxl.float32, 1)
        a = popxl.remote_variable(np.ones(2, np.float32), rb, 0, name="a")
        with pytest.raises(ValueError, match="'a' is a remote variable: its value lives in entry 0 "
                                             "of remote buffer 1"):
            ops.add(a, a)
        popxl.remote_variable(np.ones(2, np.float32), rb, 0, name="b")
        ops.remote_load(rb, 0)
        with pytest.raises(ValueError, match="remote_replica_sharded_variable|replication factor"):
            popxl.remote_replica_sharded_variable(np.ones(4, np.float32), rb)
    with pytest.raises(ValueError, match="remote variables 'a' and 'b' both live in entry 0"):
        popxl.Session(ir, "ipu_model")
    ir = popxl.Ir()
    with ir.main_graph:
        rb = popxl.remote_buffer((2,), popxl.float32, 1)
        popxl.remote_variable(np.ones(2, np.float32), rb, 3, name="far")
        ops.remote_load(rb, 0)
    with pytest.raises(ValueError, match="remote variable 'far': offset 3 is out of range"):
        popxl.Session(ir, "ipu_model")


# ------------------------------------------------------------ remote variables
def _accumulate_program(values):
    """Remote variables in entries of one buffer; each run adds entry+1 to
    every entry through remote_load / accumulate_ / remote_store."""
    ir = popxl.Ir()
    n = len(values)
    with ir.main_graph, popxl.in_sequence(True):
        rb = popxl.remote_buffer(values[0].shape, popxl.float32, n)
        vs = [popxl.remote_variable(v, rb, k, name=f"rv{k}") for k, v in enumerate(values)]
        outs = []
        for k in range(n):
            x = ops.remote_load(rb, k)
            ops.var_updates.accumulate_(x, popxl.constant(np.full(x.shape, k + 1, np.float32)))
            ops.remote_store(rb, k, x)
            s = popxl.d2h_stream(x.shape, x.dtype, name=f"o{k}")
            ops.host_store(s, x)
            outs.append(s)
    return ir, rb, vs, outs


def test_remote_variables_round_trip_per_entry():
    vals = [np.arange(6, dtype=np.float32).reshape(2, 3) * (k + 1) for k in range(3)]
    ir, rb, vs, outs = _accumulate_program(vals)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run()
        for k in range(3):
            np.testing.assert_array_equal(got[outs[k]], vals[k] + k + 1)
            np.testing.assert_array_equal(s.get_tensor_data(vs[k]), vals[k] + k + 1)
        s.write_variable_data(vs[1], np.full((2, 3), 10, np.float32))
        got = s.run()
        np.testing.assert_array_equal(got[outs[1]], np.full((2, 3), 12, np.float32))
        np.testing.assert_array_equal(got[outs[0]], vals[0] + 2)
        s.weights_to_host()
    # After the context: the host copies hold the device values.
    assert s.get_tensor_data(vs[2])[0, 0] == vals[2][0, 0] + 6
    # weights_from_host restores the host values to Streaming Memory.
    s.write_variable_data(vs[0], np.zeros((2, 3), np.float32))
    with s:
        got = s.run()
    np.testing.assert_array_equal(got[outs[0]], np.ones((2, 3), np.float32))


def test_the_user_guide_remote_variable_program():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        x = np.array(1).astype(np.int32)
        buffer = popxl.remote_buffer(x.shape, popxl.int32, 1)
        remote_x = popxl.remote_variable(x, buffer, 0)
        loaded_x = ops.remote_load(buffer, 0)
        ops.var_updates.accumulate_(loaded_x, popxl.variable(2))
        ops.remote_store(buffer, 0, loaded_x)
        y_d2h = popxl.d2h_stream(loaded_x.shape, loaded_x.dtype)
        ops.host_store(y_d2h, loaded_x)
    with popxl.Session(ir, "ipu_model") as session:
        outputs = session.run({})
        final_weight = session.get_tensor_data(remote_x)
    assert outputs[y_d2h] == 3 and final_weight == 3


def test_checkpoints_hold_remote_variables(tmp_path):
    vals = [np.full((2,), k, np.float32) for k in range(2)]
    ir, rb, vs, outs = _accumulate_program(vals)
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        s.save_checkpoint(tmp_path / "c.npz")
        s.run()
        s.load_checkpoint(tmp_path / "c.npz")
        np.testing.assert_array_equal(s.get_tensor_data(vs[1]), [3, 3])
        got = s.run()
    np.testing.assert_array_equal(got[outs[1]], [5, 5])


def test_a_failed_run_loses_no_remote_variable():
    """A dynamic offset out of range fails part-way (after an entry was
    stored): the device values are undefined, the host values are intact
    and weights_from_host restores them."""
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        rb = popxl.remote_buffer((2,), popxl.float32, 2)
        v = popxl.remote_variable(np.array([1, 2], np.float32), rb, 0, name="v")
        idx = popxl.h2d_stream((), popxl.int32, "idx")
        x = ops.remote_load(rb, 0)
        ops.remote_store(rb, 0, x + 100.0)
        i = ops.host_load(idx)
        ops.remote_store(rb, i, x)
    with popxl.Session(ir, "ipu_model") as s:
        s.run({idx: np.array(1, np.int32)})
        assert s.get_tensor_data(v).tolist() == [101, 102]
        with pytest.raises(RuntimeError, match=r"RemoteStore op 'remote_store_1': offset 5 is out "
                                               r"of range for remote buffer 'RB_1' of 2 entries"):
            s.run({idx: np.array(5, np.int32)})
        with pytest.raises(RuntimeError, match="undefined"):
            s.get_tensor_data(v)
        s.weights_from_host()
        assert s.get_tensor_data(v).tolist() == [101, 102]
        s.run({idx: np.array(1, np.int32)})
        assert s.get_tensor_data(v).tolist() == [201, 202]


# ---------------------------------------------------------------- per replica
def test_sharding_math():
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    rows = shard(a, 4)
    assert rows.shape == (4, 3)
    np.testing.assert_array_equal(rows.reshape(-1), np.r_[np.arange(10), 0, 0])
    np.testing.assert_array_equal(unshard(rows, (2, 5)), a)
    # group of replicas [1, 3, 5, 7] sharded over 2: ranks 0 1 0 1
    assignment = [0, 1, 0, 1, 0, 1, 0, 1]
    assert [shard_rank(r, assignment, 2) for r in (1, 3, 5, 7)] == [(1, 0), (1, 1), (1, 0), (1, 1)]


def test_remote_variables_per_replica_and_group():
    """Four replicas: a variable with two groups (stride 1, size 2 ->
    groups [0,0,1,1]) and a replica-sharded variable over all four. Each
    replica's Streaming Memory holds its group's value (its shard), and
    reading back takes the first replica of each group."""
    ir = popxl.Ir(replication=4)
    g2 = ir.replica_grouping(group_size=2)
    grouped = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    full = np.arange(10, dtype=np.float32).reshape(2, 5) + 0.5
    with ir.main_graph:
        rb = popxl.remote_buffer((2, 3), popxl.float32, 2)
        v = popxl.remote_variable(grouped, rb, 1, replica_grouping=g2, name="grouped")
        srb = popxl.replica_sharded_buffer((2, 5), popxl.float32)
        assert srb.tensor_shape == (3,) and srb.meta_shape == (2, 5)
        sv = popxl.remote_replica_sharded_variable(full, srb, 0, name="sharded")
        ops.remote_store(rb, 0, ops.remote_load(rb, 1))
    lp = build(ir, "none")
    rv = RemoteVariables(lp)
    host = {v: grouped.copy(), sv: full.copy()}
    rv.write(host)
    eng = lp.engine
    for r, grp in enumerate(g2.assignment):
        e = np.empty((2, 3), np.float32)
        eng.read_remote(lp.remote_index[id(rb)], 1, r, e)
        np.testing.assert_array_equal(e, grouped[grp])
        s = np.empty(3, np.float32)
        eng.read_remote(lp.remote_index[id(srb)], 0, r, s)
        np.testing.assert_array_equal(s, shard(full, 4)[r])
    # Replica 2 (group 1) changes its entry; replica 3 (group 1 too) does not
    # count: one value per group, from the group's first replica.
    eng.write_remote(lp.remote_index[id(rb)], 1, 2, np.full((2, 3), -1, np.float32))
    eng.write_remote(lp.remote_index[id(rb)], 1, 3, np.full((2, 3), -9, np.float32))
    eng.write_remote(lp.remote_index[id(srb)], 0, 3, np.full(3, 7, np.float32))
    back = {v: np.zeros_like(grouped), sv: np.zeros_like(full)}
    rv.read(back)
    np.testing.assert_array_equal(back[v][0], grouped[0])
    np.testing.assert_array_equal(back[v][1], np.full((2, 3), -1))
    want = full.copy().reshape(-1)
    want[9:] = 7  # replica 3 holds elements 9..11 (10 and 11 are padding)
    np.testing.assert_array_equal(back[sv], want.reshape(2, 5))


def test_replica_sharded_buffer_checks_the_group():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        with pytest.raises(ValueError, match="must be less than or equal to the replica group"):
            popxl.replica_sharded_buffer((8,), popxl.float32, shard_over=8)
        with pytest.raises(ValueError, match="must be divisible by the sharding group size"):
            popxl.replica_sharded_buffer((8,), popxl.float32, shard_over=3)
        b = popxl.replica_sharded_buffer((2, 9), popxl.float32, ir.replica_grouping(group_size=2),
                                         entries=3)
        assert b.tensor_shape == (5,) and b.meta_shape == (9,) and b.entries == 3


def test_scalar_remote_variable_per_group_reads_back():
    """A scalar remote variable with one value per group (a per-group step
    counter, as Graphcore's GPT-3 keeps): each group's value is a 0-d entry
    of the host array, written back in place."""
    ir = popxl.Ir(replication=4)
    g2 = ir.replica_grouping(group_size=2)
    steps = np.array([3, 5], np.int32)
    with ir.main_graph:
        rb = popxl.remote_buffer((), popxl.int32, 1)
        v = popxl.remote_variable(steps, rb, 0, replica_grouping=g2, name="step")
        ops.remote_store(rb, 0, ops.remote_load(rb, 0) + 1)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    np.testing.assert_array_equal(session.get_tensor_data(v), steps + 1)
