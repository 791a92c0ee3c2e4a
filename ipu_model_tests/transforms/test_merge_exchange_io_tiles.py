"""merge_exchange, io_tile_exchange, io_tile_copy and numIOTiles: PopXL's
structure and errors, and the merged program computing what the unmerged
one does."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def _types(g):
    return [op.type for op in g.ops]


def test_host_and_remote_exchanges_merge_into_one_op():
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        with popxl.transforms.merge_exchange():
            ops.host_load(popxl.h2d_stream((), popxl.float32), "x")
            ops.host_store(popxl.d2h_stream((), popxl.float32), popxl.constant(1.0))
    assert _types(main) == ["MultiExchange"]
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        ops.host_store(popxl.d2h_stream((), popxl.float32), popxl.constant(1.0))
        with popxl.transforms.merge_exchange():
            buffer = popxl.remote_buffer((), popxl.float32, 1)
            x = ops.remote_load(buffer, 0, "x")
            ops.remote_store(buffer, 0, popxl.constant(1.0))
    assert _types(main) == ["HostStore", "MultiExchange"]
    multi = main.ops[1]
    assert x.producer is multi and [m.type for m in multi.attrs["_members"]] == \
        ["RemoteLoad", "RemoteStore"]


def test_a_data_dependency_ends_the_group():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.transforms.merge_exchange():
            buffer = popxl.remote_buffer((), popxl.float32, 2)
            a = ops.remote_load(buffer, 0)
            b = ops.remote_load(buffer, 1)
            ops.remote_store(buffer, 0, b)  # reads b: a new group starts here
            ops.remote_store(buffer, 1, popxl.constant(2.0))
    assert _types(ir.main_graph) == ["MultiExchange", "MultiExchange"]
    assert a.producer is b.producer


def test_non_exchange_ops_and_context_changes_end_groups():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.transforms.merge_exchange():
            buffer = popxl.remote_buffer((2,), popxl.float32, 2)
            a = ops.remote_load(buffer, 0)
            ops.remote_load(buffer, 1)
            c = a + 1.0
            ops.remote_store(buffer, 0, c)
    assert _types(ir.main_graph) == ["MultiExchange", "Add", "RemoteStore"]


def test_nested_merges_flatten_and_in_sequence_orders_the_result():
    ir = popxl.Ir()
    main = ir.main_graph
    with main, popxl.in_sequence(True):
        w = popxl.variable(np.zeros(2, np.float32))
        with popxl.transforms.merge_exchange(), popxl.in_sequence(False):
            buffer = popxl.remote_buffer((2,), popxl.float32, 3)
            with popxl.transforms.merge_exchange():
                ops.remote_load(buffer, 0)
                ops.remote_load(buffer, 1)
            ops.remote_store(buffer, 2, w)
        y = w + 1.0
    multi = main.ops[0]
    assert _types(main) == ["MultiExchange", "Add"]
    assert len(multi.attrs["_members"]) == 3
    assert (multi, y.producer) in main._topo_cons


def test_merged_exchanges_compute_what_separate_ones_do():
    def program(merge: bool):
        ir = popxl.Ir()
        with ir.main_graph:
            rb = popxl.remote_buffer((3,), popxl.float32, 2)
            popxl.remote_variable(np.array([1, 2, 3], np.float32), rb, 0)
            popxl.remote_variable(np.array([4, 5, 6], np.float32), rb, 1)
            xs = popxl.h2d_stream((3,), popxl.float32, "x")
            ys = popxl.d2h_stream((3,), popxl.float32, "y")
            ctx = popxl.transforms.merge_exchange() if merge else popxl.in_sequence(True)
            with ctx:
                a = ops.remote_load(rb, 0)
                b = ops.remote_load(rb, 1)
                x = ops.host_load(xs)
            with popxl.in_sequence(True):
                s = a * b + x
                with (popxl.transforms.merge_exchange() if merge else popxl.in_sequence(True)):
                    ops.remote_store(rb, 0, s)
                    ops.host_store(ys, s)
        return ir, xs, ys

    outs = []
    for merge in (False, True):
        ir, xs, ys = program(merge)
        if merge:
            assert [op.type for op in ir.main_graph.ops].count("MultiExchange") == 2
        with popxl.Session(ir, "ipu_model") as s:
            s.run({xs: np.ones(3, np.float32)})
            outs.append(s.run({xs: np.ones(3, np.float32)})[ys])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[1], (np.array([1, 2, 3]) * [4, 5, 6] + 1) * [4, 5, 6] + 1)


def test_io_tile_exchange_leaves_one_op_on_the_io_tiles():
    ir = popxl.Ir()
    main = ir.main_graph
    with main, popxl.in_sequence(True):
        with popxl.transforms.io_tile_exchange():
            buffer = popxl.remote_buffer((), popxl.float32, 1)
            x = ops.remote_load(buffer, 0, "x")
            ops.remote_store(buffer, 0, popxl.constant(1.0))
    assert _types(main) == ["MultiExchange"]
    assert main.ops[0].tile_set == "io" and x.tile_set == "io"


def test_io_tile_exchange_that_cannot_merge_names_the_ops():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        with pytest.raises(RuntimeError, match=r"More than one Op remained after "
                                               r"`io_tile_exchange`(.|\n)*RemoteLoad\(remote_load: "
                                               r"(.|\n)*RemoteStore\(remote_store: \[x_remote_loaded"):
            with popxl.transforms.io_tile_exchange():
                buffer = popxl.remote_buffer((), popxl.float32, 1)
                x = ops.remote_load(buffer, 0, "x")
                ops.remote_store(buffer, 0, x)
    # verify_overlap=False accepts it
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        with popxl.transforms.io_tile_exchange(verify_overlap=False):
            buffer = popxl.remote_buffer((), popxl.float32, 1)
            x = ops.remote_load(buffer, 0, "x")
            ops.remote_store(buffer, 0, x)
    assert _types(ir.main_graph) == ["RemoteLoad", "RemoteStore"]


def test_io_tile_copy_moves_between_tile_sets_and_keeps_values():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((2, 2), popxl.float32, "x")
        ys = popxl.d2h_stream((2, 2), popxl.float32, "y")
        with popxl.io_tiles():
            x = ops.host_load(xs)
        assert x.tile_set == "io"
        c = ops.io_tile_copy(x)
        assert c.tile_set == "compute" and c.id.endswith("_iotilecopy")
        d = ops.io_tile_copy(c * 2.0)
        assert d.tile_set == "io"
        with popxl.io_tiles():
            ops.host_store(ys, d)
    x_h = np.arange(4, dtype=np.float32).reshape(2, 2)
    with popxl.Session(ir, "ipu_model") as s:
        np.testing.assert_array_equal(s.run({xs: x_h})[ys], x_h * 2)


def test_num_io_tiles_is_the_popart_session_option_path():
    ir = popxl.Ir()
    opts = ir._pb_ir.getSessionOptions()
    assert opts.numIOTiles == 0
    opts.numIOTiles = 32
    assert ir._pb_ir.getSessionOptions().numIOTiles == 32 and ir.num_io_tiles == 32
    for bad in (33, 16):
        with pytest.raises(RuntimeError, match="invalid number of IO tiles"):
            opts.numIOTiles = bad
    with pytest.raises(AttributeError, match="offers only 'numIOTiles'"):
        opts.enableOutlining = False
    with pytest.raises(AttributeError, match="offers only getSessionOptions"):
        ir._pb_ir.getAllRemoteBufferInfos()
