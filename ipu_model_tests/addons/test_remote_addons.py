"""ipuxl.addons' remote tooling: named buffers, load/store graphs, remote
variables from factories (memory-mapped too), batch serialisation (every
io_mode) against NumPy."""
from functools import partial

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons import NamedTensors
from ipuxl.addons.remote import (create_remote_buffer, load_remote, load_remote_graph,
                                 named_variable_buffers, store_remote, store_remote_graph)
from ipuxl.addons.rts import replica_sharded_spec
from ipuxl.addons.transforms import RemoteHandle, batch_serial_buffer, batch_serialise


class Scale(addons.Module):
    def build(self, x):
        w = self.add_variable_input("w", partial(np.full, x.shape, 2.0, np.float32), x.dtype)
        b = self.add_variable_input("b", partial(np.arange, x.shape[-1], dtype=np.float32),
                                    x.dtype)
        return x * w + b


def test_remote_graphs_load_and_store_every_buffer():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        facts, g = Scale().create_graph(popxl.TensorSpec((3,), popxl.float32))
        buffers = named_variable_buffers(facts, entries=2)
        assert sorted(buffers.to_dict()) == ["b", "w"]
        v0 = facts.init_remote(buffers, 0, "row0")
        v1 = facts.init_remote(buffers, 1, "row1")
        load, names = load_remote_graph(buffers, entries=2)
        store = store_remote_graph(buffers, entries=2)
        assert [op.type for op in load.graph.ops] == ["MultiExchange"]
        loaded = NamedTensors.pack(names, load.call(1))
        ops.var_updates.accumulate_(loaded.w, popxl.constant(np.ones(3, np.float32)))
        store.bind(loaded).call(0)  # row 1's values, plus one, into row 0
        xs = popxl.h2d_stream((3,), popxl.float32, "x")
        ys = popxl.d2h_stream((3,), popxl.float32, "y")
        (y,) = g.bind(load_remote(buffers, 0)).call(ops.host_load(xs))
        ops.host_store(ys, y)
    x = np.array([1, 2, 3], np.float32)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({xs: x})[ys]
        np.testing.assert_array_equal(out, x * 3.0 + np.arange(3))
        np.testing.assert_array_equal(s.get_tensor_data(v0.w), np.full(3, 3.0))
        np.testing.assert_array_equal(s.get_tensor_data(v1.w), np.full(3, 2.0))


def test_buffers_are_sharded_only_when_asked_and_divisible():
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((4, 2), popxl.float32)
        plain = create_remote_buffer(spec, entries=3)
        assert plain.tensor_shape == (4, 2) and plain.meta_shape == () and plain.entries == 3
        t = popxl.variable(np.zeros((4, 2), np.float32))
        assert replica_sharded_spec(t, ir.replica_grouping()) == t.spec  # one replica
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        sharded = create_remote_buffer(popxl.TensorSpec((4, 2), popxl.float32), shard_over=4)
        assert sharded.tensor_shape == (2,) and sharded.meta_shape == (4, 2)
        with pytest.raises(ValueError, match="Can't shard tensor with 6 elements over 4"):
            create_remote_buffer(popxl.TensorSpec((6,), popxl.float32), shard_over=4)


def test_memory_mapped_remote_variables(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        facts, g = Scale().create_graph(popxl.TensorSpec((3,), popxl.float32))
        buffers = named_variable_buffers(facts)
        variables = facts.init_remote(buffers, 0, "m", memmap_dir=str(tmp_path))
        loaded = load_remote(buffers)
        ops.var_updates.accumulate_(loaded.w, popxl.constant(np.ones(3, np.float32)))
        store_remote(buffers, loaded)
    w = variables.w
    assert isinstance(w._memmap_arr, np.memmap) and (tmp_path / "m.w.npy").exists()
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        got = s.get_tensor_data(w)
    assert got is w._memmap_arr
    np.testing.assert_array_equal(np.memmap(tmp_path / "m.w.npy", np.float32, "r", shape=(3,)),
                                  np.full(3, 3.0))


@pytest.mark.parametrize("io_mode", ["compute", "io", "io_overlapped"])
def test_batch_serialise_against_numpy(io_mode):
    """y = 2x + b over 4 steps: x from a host stream, y into row 1 of a
    remote buffer (entries row * steps + step), then read back."""
    steps = 4
    ir = popxl.Ir()
    if io_mode != "compute":
        ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph, popxl.in_sequence(True):
        facts, g = Scale().create_graph(popxl.TensorSpec((3,), popxl.float32))
        xs = popxl.h2d_stream((3,), popxl.float32, "x")
        ybuf = batch_serial_buffer(g.graph.outputs[0], steps=steps, rows=2)
        result = batch_serialise(g, steps, {g.graph.inputs[0]: xs}, {},
                                 {g.graph.outputs[0]: RemoteHandle(ybuf, 1)}, io_mode=io_mode)
        assert ybuf.entries == 2 * steps
        variables = facts.init()
        result.graph.bind(variables).call(0)
        outs = popxl.d2h_stream((3,), popxl.float32, "y")
        for k in range(steps):
            ops.host_store(outs, ops.remote_load(ybuf, steps + k))
    ir.num_host_transfers = steps
    x = np.arange(steps * 3, dtype=np.float32).reshape(steps, 3)
    with popxl.Session(ir, "ipu_model") as s:
        y = s.run({xs: x})[outs]
    np.testing.assert_array_equal(y, 2 * x + np.arange(3))


def test_batch_serialise_checks_its_arguments():
    ir = popxl.Ir()
    with ir.main_graph:
        facts, g = Scale().create_graph(popxl.TensorSpec((3,), popxl.float32))
        xs = popxl.h2d_stream((3,), popxl.float32, "x")
        with pytest.raises(ValueError, match="IR must have IO tiles"):
            batch_serialise(g, 2, {g.graph.inputs[0]: xs}, {}, {}, io_mode="io")
        with pytest.raises(ValueError, match="Unknown 'io_mode'"):
            batch_serialise(g, 2, {g.graph.inputs[0]: xs}, {}, {}, io_mode="fast")
        with pytest.raises(ValueError, match="rows must be >0"):
            batch_serialise(g, 2, {g.graph.inputs[0]: xs}, {}, {}, rows=0, io_mode="compute")
