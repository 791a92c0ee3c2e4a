"""The host pass ``view_remote_loads``: a remote_load whose tensor can be its
Streaming Memory entry runs without copies, and the pass declines wherever
that could change a result. Every program runs twice with the pass alone
and without any pass, and both are checked against NumPy: the streams
stored and every entry of every remote buffer after each run."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

PASS = "view_remote_loads"


def _entries(sess, rb):
    eng, idx = sess._engine, sess._prog.remote_index[id(rb)]
    out = np.empty((rb.entries,) + tuple(rb.tensor_shape), rb.tensor_dtype.as_numpy())
    for e in range(rb.entries):
        eng.read_remote(idx, e, 0, out[e])
    return out


def _run(build, passes, runs, feeds_of=None):
    ir, streams, rb = build()
    results = []
    with popxl.Session(ir, "ipu_model", host_passes=passes) as s:
        for r in range(runs):
            feeds = feeds_of(streams, r) if feeds_of else {}
            got = s.run(feeds)
            results.append(({k: np.array(got[v]) for k, v in streams.items()
                             if v in got}, _entries(s, rb)))
        viewed = s._prog.host_passes.get(PASS, 0)
    return results, viewed


def _check(build, want, viewed, runs=2, feeds_of=None):
    """Both programs agree bit for bit with each other and with ``want(run)``
    (NumPy: ``(streams, entries)``), and the pass made ``viewed`` views."""
    with_pass, n = _run(build, PASS, runs, feeds_of)
    without, n0 = _run(build, "none", runs, feeds_of)
    assert n0 == 0
    assert n == viewed, f"{PASS} made {n} views, expected {viewed}"
    for r in range(runs):
        w_streams, w_entries = want(r)
        for got in (with_pass[r], without[r]):
            for k, v in w_streams.items():
                np.testing.assert_array_equal(got[0][k], v, err_msg=f"run {r}: stream {k}")
            np.testing.assert_array_equal(got[1], w_entries, err_msg=f"run {r}: entries")


def _stream(name, t):
    s = popxl.d2h_stream(t.shape, t.dtype, name=name)
    ops.host_store(s, t)
    return s


W0 = np.arange(3 * 16, dtype=np.float32).reshape(3, 16) / 7


def _buffer(entries=3, shape=(16,)):
    rb = popxl.remote_buffer(shape, popxl.float32, entries)
    for e in range(entries):
        value = W0[e, :int(np.prod(shape))].reshape(shape).copy()
        popxl.remote_variable(value, rb, e, name=f"w{e}")
    return rb


# ------------------------------------------------------------------ safe
def test_update_in_place_and_store_back_is_viewed():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 1)
            ops.scaled_add_(t, popxl.constant(np.ones(16, np.float32)), b=0.5)
            y = _stream("y", t * 2.0)
            ops.remote_store(rb, 1, t)
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        for _ in range(r + 1):  # float32 steps, as the program
            w[1] += np.float32(0.5)
        return {"y": w[1] * 2}, w

    _check(build, want, viewed=1, runs=3)


def test_read_only_load_and_a_store_elsewhere_are_viewed():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 0)
            ops.remote_store(rb, 2, t + 1.0)  # another entry: t unchanged
            y = _stream("y", t * 3.0)
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        w[2] = W0[0] + 1
        return {"y": W0[0] * 3}, w

    _check(build, want, viewed=1)


def test_unaligned_entry_is_copied_and_stays_exact():
    """Entries of 12 bytes: entry 1 is not 64-byte aligned, so the core
    copies it although the pass allows a view; the next run views nothing
    stale either way."""
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer(shape=(3,))
            for k in (0, 1):
                t = ops.remote_load(rb, k)
                ops.scaled_add_(t, popxl.constant(np.ones(3, np.float32)), b=float(k + 1))
                ops.remote_store(rb, k, t)
            y = _stream("y", ops.remote_load(rb, 1) + 0.0)
        return ir, {"y": y}, rb

    def want(r):
        w = W0[:, :3].copy()
        for _ in range(r + 1):
            w[0] += np.float32(1)
            w[1] += np.float32(2)
        return {"y": w[1]}, w

    _check(build, want, viewed=3)


def test_load_and_store_graphs_called_with_constant_offsets_are_viewed():
    """The phased-execution shape: a graph of loads called per row (inlined),
    an update, and a graph storing its input, called with the same row."""
    def build():
        ir = popxl.Ir()
        with ir.main_graph:
            rb = _buffer()
            load_g = ir.create_graph(lambda i: ops.remote_load(rb, i),
                                     popxl.TensorSpec((), popxl.int32))

            def store(i, x):
                ops.remote_store(rb, i, x)

            store_g = ir.create_graph(store, popxl.TensorSpec((), popxl.int32),
                                      popxl.TensorSpec((16,), popxl.float32))
            outs = {}
            with popxl.in_sequence(True):
                for row in (2, 0):
                    (t,) = ops.call(load_g, row)
                    ops.scaled_add_(t, popxl.constant(np.full(16, 2.0, np.float32)))
                    outs[f"y{row}"] = _stream(f"y{row}", t + 0.0)
                    ops.call(store_g, row, t)
        return ir, outs, rb

    def want(r):
        w = W0.copy()
        for _ in range(r + 1):
            w[[0, 2]] += np.float32(2)
        return {"y2": w[2], "y0": w[0]}, w

    _check(build, want, viewed=2)


# --------------------------------------------------------------- declined
def test_in_place_update_without_store_back_declines():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 1)
            ops.scaled_add_(t, popxl.constant(np.ones(16, np.float32)))
            y = _stream("y", t + 0.0)
        return ir, {"y": y}, rb

    _check(build, lambda r: ({"y": W0[1] + 1}, W0), viewed=0)


def test_written_view_without_store_back_declines_and_with_it_is_viewed():
    def build(store_back):
        def b():
            ir = popxl.Ir()
            with ir.main_graph, popxl.in_sequence(True):
                rb = _buffer()
                t = ops.remote_load(rb, 0)
                v = ops.reshape_(t, (4, 4))
                ops.scaled_add_(v, popxl.constant(np.ones((4, 4), np.float32)), b=3.0)
                y = _stream("y", t + 0.0)
                if store_back:
                    ops.remote_store(rb, 0, t)
            return ir, {"y": y}, rb
        return b

    def want(store_back):
        def w(r):
            entries = W0.copy()
            if store_back:
                for _ in range(r + 1):
                    entries[0] += np.float32(3)
                return {"y": entries[0]}, entries
            return {"y": W0[0] + 3}, entries
        return w

    _check(build(False), want(False), viewed=0)
    _check(build(True), want(True), viewed=1)


def test_write_after_the_last_store_declines():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 2)
            ops.remote_store(rb, 2, t)
            ops.scaled_add_(t, popxl.constant(np.ones(16, np.float32)))
            y = _stream("y", t + 0.0)
        return ir, {"y": y}, rb

    _check(build, lambda r: ({"y": W0[2] + 1}, W0), viewed=0)


def test_the_same_entry_stored_between_load_and_use_declines():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 0)
            ops.remote_store(rb, 0, popxl.constant(np.zeros(16, np.float32)))
            y = _stream("y", t + 0.0)
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        w[0] = 0
        return {"y": W0[0] if r == 0 else w[0]}, w

    _check(build, want, viewed=0)


def test_the_same_entry_loaded_again_after_a_write_declines():
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            t = ops.remote_load(rb, 1)
            ops.scaled_add_(t, popxl.constant(np.ones(16, np.float32)))
            u = ops.remote_load(rb, 1)  # must see the entry, not t
            y = _stream("y", u + 0.0)
            ops.remote_store(rb, 1, t)
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        for _ in range(r):
            w[1] += np.float32(1)
        y = w[1].copy()
        w[1] += np.float32(1)
        return {"y": y}, w

    # t declines (a load of its entry in its window); u is only read.
    _check(build, want, viewed=1)


@pytest.mark.parametrize("where", ["load", "store"])
def test_dynamic_offsets_decline(where):
    """An offset from a variable the program changes is no compile-time
    constant: a load at it is not viewed, and a store at it could hit the
    entry a view reads."""
    def build():
        ir = popxl.Ir()
        with ir.main_graph, popxl.in_sequence(True):
            rb = _buffer()
            i = popxl.variable(np.array(0, np.int32), name="i")
            if where == "load":
                t = ops.remote_load(rb, i)
                y = _stream("y", t + 0.0)
            else:
                t = ops.remote_load(rb, 1)
                ops.remote_store(rb, i, popxl.constant(np.zeros(16, np.float32)))
                y = _stream("y", t + 0.0)
            ops.var_updates.copy_var_update_(i, ops.increment_mod(i, 1, 3))
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        if where == "load":
            return {"y": W0[r]}, w
        w[:r + 1] = 0  # entry r zeroed in run r, after t was loaded (a copy)
        return {"y": W0[1]}, w

    _check(build, want, viewed=0)


def test_a_called_graph_storing_its_changed_input_declines():
    """The callee writes its (copied) input before storing it: the entry
    gets a value that is not the caller's tensor, which is read after."""
    def build():
        ir = popxl.Ir()
        with ir.main_graph:
            rb = _buffer()

            def store(x):
                ops.scaled_add_(x, popxl.constant(np.ones(16, np.float32)), b=5.0)
                ops.remote_store(rb, 0, x)

            g = ir.create_graph(store, popxl.TensorSpec((16,), popxl.float32))
            with popxl.in_sequence(True):
                t = ops.remote_load(rb, 0)
                ops.call(g, t)
                y = _stream("y", t + 0.0)
        return ir, {"y": y}, rb

    def want(r):
        w = W0.copy()
        for _ in range(r):
            w[0] += np.float32(5)
        y = w[0].copy()
        w[0] += np.float32(5)
        return {"y": y}, w

    _check(build, want, viewed=0)


def test_a_store_in_a_loop_with_a_carried_offset_declines():
    def build():
        ir = popxl.Ir()
        with ir.main_graph:
            rb = _buffer()

            def body(i):
                with popxl.in_sequence(True):
                    ops.remote_store(rb, i, popxl.constant(np.full(16, -1.0, np.float32)))
                    return i + popxl.constant(np.array(1, np.int32))

            g = ir.create_graph(body, popxl.TensorSpec((), popxl.int32))
            with popxl.in_sequence(True):
                t = ops.remote_load(rb, 2)
                ops.repeat(g, 3, popxl.constant(np.array(0, np.int32)))
                y = _stream("y", t + 0.0)
        return ir, {"y": y}, rb

    def want(r):
        return {"y": W0[2] if r == 0 else np.full(16, -1.0, np.float32)}, np.full_like(W0, -1.0)

    _check(build, want, viewed=0)


def test_the_core_refuses_a_view_into_an_existing_tensor():
    """The core checks what it relies on: only a load into a new tensor may
    view its entry (a remote_load_ writes a tensor that has other readers)."""
    from ipuxl._core_loader import core
    from ipuxl.lowering import lower
    from ipuxl.lowering.program import to_desc

    ir = popxl.Ir()
    with ir.main_graph:
        rb = _buffer()
        dst = popxl.variable(np.zeros(16, np.float32), name="dst")
        ops.remote_load_(rb, 0, dst)
    prog = lower(ir)
    entries = prog.entries[ir.main_graph]
    (i,) = [i for i, e in enumerate(entries) if e.kind == "remote_load"]
    entries[i] = entries[i].derive(view_streaming_memory=True)
    desc = to_desc(prog)[0]
    with pytest.raises(ValueError, match="RemoteLoad op 'remote_load_inplace': only a load into "
                                         "a new intermediate tensor can view Streaming Memory"):
        core.Engine(desc, 0, None)
