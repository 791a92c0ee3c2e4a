"""The core runs one compiled program over several replica states, in
lockstep: per-replica stream slots, collectives across replicas (against
NumPy), conditionals whose replicas disagree, remote buffers per replica."""
import numpy as np
import pytest

from ipuxl._core_loader import core

F32, I32, BOOL = 10, 5, 0
INTERMEDIATE, INPUT, CONSTANT, VARIABLE = 0, 1, 2, 3
KERNEL, CALL, REPEAT, IF, HOST_LOAD, HOST_STORE, COLLECTIVE, REMOTE_LOAD, REMOTE_STORE = range(9)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = range(3)
ADD, MEAN, MUL, MIN, MAX, AND, OR, SQUARE_ADD, LOCAL = range(9)


def _collective_program(replicas, n, out_n, kind, op, group_of=()):
    d = core.ProgramDesc()
    d.replicas = replicas
    g = d.add_graph("main")
    sin = d.add_stream("x", F32, [n], True)
    sout = d.add_stream("y", F32, [out_n], False)
    x = d.add_tensor(g, "x", F32, [n], INTERMEDIATE)
    y = d.add_tensor(g, "y", F32, [out_n], INTERMEDIATE)
    d.add_op(g, "HostLoad", "load", [], [x], {}, [], [], kind=HOST_LOAD, stream=sin,
             side_effects=True)
    d.add_op(g, "Coll", "coll", [x], [y], {}, [], [], kind=COLLECTIVE, collective_kind=kind,
             reduce_op=op, group_of=list(group_of))
    d.add_op(g, "HostStore", "store", [y], [], {}, [], [], kind=HOST_STORE, stream=sout,
             side_effects=True)
    return core.Engine(d, 0), n, out_n


def _run(engine, x, out_shape):
    y = np.zeros(out_shape, np.float32)
    engine.run([np.ascontiguousarray(x, np.float32), y], 1, [x[0].nbytes, y[0].nbytes])
    return y


REDUCE = {ADD: lambda a: a.sum(0), MEAN: lambda a: a.mean(0), MUL: lambda a: a.prod(0),
          MIN: lambda a: a.min(0), MAX: lambda a: a.max(0),
          SQUARE_ADD: lambda a: (a * a).sum(0)}


@pytest.mark.parametrize("op", sorted(REDUCE))
@pytest.mark.parametrize("groups", [(), (0, 0, 1, 1), (0, 1, 0, 1)])
def test_all_reduce_over_groups(op, groups):
    x = np.random.default_rng(op).uniform(0.5, 2, (4, 6)).astype(np.float32)
    eng, n, _ = _collective_program(4, 6, 6, ALL_REDUCE, op, groups)
    got = _run(eng, x, (4, 6))
    gid = groups or (0,) * 4
    for r in range(4):
        members = [m for m in range(4) if gid[m] == gid[r]]
        np.testing.assert_allclose(got[r], REDUCE[op](x[members].astype(np.float64)), rtol=1e-6)


def test_all_gather_and_reduce_scatter():
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    eng, _, _ = _collective_program(4, 5, 10, ALL_GATHER, ADD, (0, 1, 0, 1))
    got = _run(eng, x, (4, 10))
    np.testing.assert_array_equal(got[0], np.concatenate([x[0], x[2]]))
    np.testing.assert_array_equal(got[3], np.concatenate([x[1], x[3]]))
    # Reduce-scatter of 5 elements over 2 replicas: slices of 3, zero-padded.
    eng, _, _ = _collective_program(4, 5, 3, REDUCE_SCATTER, ADD, (0, 1, 0, 1))
    got = _run(eng, x, (4, 3))
    total02 = np.concatenate([x[0] + x[2], [0.0]])
    np.testing.assert_array_equal(got[0], total02[:3])
    np.testing.assert_array_equal(got[2], total02[3:])
    eng, _, _ = _collective_program(2, 5, 3, REDUCE_SCATTER, LOCAL)
    got = _run(eng, x[:2], (2, 3))
    np.testing.assert_array_equal(got[0], x[0][:3])
    np.testing.assert_array_equal(got[1], np.concatenate([x[1][3:], [0.0]]))


def test_collective_shapes_and_groups_are_validated():
    with pytest.raises(ValueError, match="all-gather over groups of 2 gives 10 elements"):
        _collective_program(4, 5, 11, ALL_GATHER, ADD, (0, 1, 0, 1))
    # Fewer elements: a replica-sharded tensor's meta shape drops the padding
    # of the last shard (PopXL's output_shape="meta_shape").
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    eng, _, _ = _collective_program(4, 5, 9, ALL_GATHER, ADD, (0, 1, 0, 1))
    np.testing.assert_array_equal(_run(eng, x, (4, 9))[1], np.concatenate([x[1], x[3]])[:9])
    with pytest.raises(ValueError, match="replica groups must all have the same size"):
        _collective_program(4, 5, 5, ALL_REDUCE, ADD, (0, 0, 0, 1))
    with pytest.raises(ValueError, match="names 3 replicas, the program has 4"):
        _collective_program(4, 5, 5, ALL_REDUCE, ADD, (0, 0, 0))


def _diverging_program(replicas):
    """y = x * 2 where x > 0 else x - 1, with a scalar condition per replica."""
    d = core.ProgramDesc()
    d.replicas = replicas
    main = d.add_graph("main")
    then_g = d.add_graph("then")
    else_g = d.add_graph("else")
    sin = d.add_stream("x", F32, [], True)
    sout = d.add_stream("y", F32, [], False)
    x = d.add_tensor(main, "x", F32, [], INTERMEDIATE)
    zero = d.add_tensor(main, "zero", F32, [], CONSTANT)
    d.set_tensor_data(zero, np.zeros((), np.float32))
    c = d.add_tensor(main, "c", BOOL, [], INTERMEDIATE)
    y = d.add_tensor(main, "y", F32, [], INTERMEDIATE)
    ti, to = d.add_tensor(then_g, "ti", F32, [], INPUT), d.add_tensor(then_g, "to", F32, [], INTERMEDIATE)
    two = d.add_tensor(then_g, "two", F32, [], CONSTANT)
    d.set_tensor_data(two, np.array(2, np.float32))
    d.add_op(then_g, "Mul", "mul", [ti, two], [to], {}, [], [])
    d.set_graph_io(then_g, [ti], [to])
    ei, eo = d.add_tensor(else_g, "ei", F32, [], INPUT), d.add_tensor(else_g, "eo", F32, [], INTERMEDIATE)
    one = d.add_tensor(else_g, "one", F32, [], CONSTANT)
    d.set_tensor_data(one, np.array(1, np.float32))
    d.add_op(else_g, "Sub", "sub", [ei, one], [eo], {}, [], [])
    d.set_graph_io(else_g, [ei], [eo])
    d.add_op(main, "HostLoad", "load", [], [x], {}, [], [], kind=HOST_LOAD, stream=sin)
    d.add_op(main, "Greater", "gt", [x, zero], [c], {}, [], [])
    d.add_op(main, "If", "if", [c, x], [y], {}, [then_g, else_g], [], kind=IF,
             branch_inputs=[[1], [1]])
    d.add_op(main, "HostStore", "store", [y], [], {}, [], [], kind=HOST_STORE, stream=sout)
    return core.Engine(d, 0)


def test_replicas_that_disagree_on_a_condition_each_take_their_branch():
    eng = _diverging_program(4)
    x = np.array([3.0, -1.0, 0.5, -4.0], np.float32)
    got = _run(eng, x, (4,))
    np.testing.assert_array_equal(got, np.where(x > 0, x * 2, x - 1))
    assert "If(c)" in eng.describe()


def test_remote_buffers_are_per_replica():
    d = core.ProgramDesc()
    d.replicas = 2
    g = d.add_graph("main")
    rb = d.add_remote_buffer("rb", F32, [3], 2)
    sout = d.add_stream("y", F32, [3], False)
    off = d.add_tensor(g, "off", I32, [], CONSTANT)
    d.set_tensor_data(off, np.array(1, np.int32))
    t = d.add_tensor(g, "t", F32, [3], INTERMEDIATE)
    t2 = d.add_tensor(g, "t2", F32, [3], INTERMEDIATE)
    d.add_op(g, "RemoteLoad", "load", [-1, off], [t], {}, [], [], kind=REMOTE_LOAD,
             remote_buffer=rb)
    d.add_op(g, "Neg", "neg", [t], [t2], {}, [], [])
    d.add_op(g, "RemoteStore", "store", [t2, -1], [], {}, [], [], kind=REMOTE_STORE,
             remote_buffer=rb, side_effects=True)
    d.add_op(g, "HostStore", "out", [t], [], {}, [], [], kind=HOST_STORE, stream=sout)
    eng = core.Engine(d, 0)
    for r in range(2):
        eng.write_remote(rb, 1, r, np.full(3, r + 1.0, np.float32))
    y = np.zeros((2, 3), np.float32)
    eng.run([y], 1, [12])
    np.testing.assert_array_equal(y, [[1, 1, 1], [2, 2, 2]])
    back = np.zeros(3, np.float32)
    eng.read_remote(rb, 0, 1, back)
    np.testing.assert_array_equal(back, [-2, -2, -2])
    with pytest.raises(ValueError, match="entry 2 is out of range for remote buffer 'rb'"):
        eng.write_remote(rb, 2, 0, np.zeros(3, np.float32))
    assert "RemoteCopy(rb[off] -> t)" in eng.describe()
