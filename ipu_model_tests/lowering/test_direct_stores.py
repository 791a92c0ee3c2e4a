"""The host pass ``direct_host_stores``: a large tensor the main program
stores to the host is computed straight into the run's output array, and
the pass (or, per run, the core) declines wherever that could change what
the host sees. Results are checked against NumPy, with the pass and
without any pass."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl._host_memory import aligned_empty

PASS = "direct_host_stores"

# 64 x 128 float32 = 32 KiB: above the pass's threshold.
X = (np.arange(64 * 96, dtype=np.float32).reshape(64, 96) % 13) / 8
W = (np.arange(96 * 128, dtype=np.float32).reshape(96, 128) % 7) / 16


def _matmul_program(after_store=None, stored=None):
    """y = x @ w from an input stream; ``stored(y)`` (default y itself) is
    stored; ``after_store(y)`` may add entries after the store."""
    ir = popxl.Ir()
    with ir.main_graph:
        sx = popxl.h2d_stream(X.shape, popxl.float32, name="x")
        w = popxl.variable(W, name="w")
        y = ops.matmul(ops.host_load(sx, "xl"), w)
        out = y if stored is None else stored(y)
        sy = popxl.d2h_stream(out.shape, out.dtype, name="y")
        ops.host_store(sy, out)
        if after_store is not None:
            after_store(y)
    return ir, sx, sy


def _marked(sess):
    return sess._prog.host_passes.get(PASS, 0)


@pytest.mark.parametrize("passes", [PASS, "none"])
def test_each_run_gets_its_own_result(passes):
    ir, sx, sy = _matmul_program()
    with popxl.Session(ir, "ipu_model", host_passes=passes) as s:
        assert _marked(s) == (1 if passes == PASS else 0)
        first = s.run({sx: X})[sy]
        second = s.run({sx: 2 * X})[sy]
    if passes == PASS:
        assert first.ctypes.data % 64 == 0 and second.ctypes.data % 64 == 0
    # The second run wrote its own array, not the first one.
    np.testing.assert_allclose(first, X.astype(np.float64) @ W, rtol=1e-6)
    np.testing.assert_allclose(second, 2 * X.astype(np.float64) @ W, rtol=1e-6)


def test_written_after_the_store_declines():
    """The host sees the value at the store, not the one an in-place update
    after it leaves."""
    ir, sx, sy = _matmul_program(lambda y: ops.add_(y, popxl.constant(1.0)))
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 0
        got = s.run({sx: X})[sy]
    np.testing.assert_allclose(got, X.astype(np.float64) @ W, rtol=1e-6)


def test_view_written_after_the_store_declines():
    def after(y):
        v = ops.reshape_(y, (128, 64))
        ops.mul_(v, popxl.constant(3.0))

    ir, sx, sy = _matmul_program(after)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 0
        got = s.run({sx: X})[sy]
    np.testing.assert_allclose(got, X.astype(np.float64) @ W, rtol=1e-6)


@pytest.mark.parametrize("passes", [PASS + ",reshape_views", PASS])
def test_a_stored_view_computes_into_the_array(passes):
    """A stored reshape that reshape_views made a view of the matmul's
    result: the result itself is computed in the host array."""
    ir, sx, sz = _matmul_program(stored=lambda y: ops.reshape(y, (128, 64)))
    with popxl.Session(ir, "ipu_model", host_passes=passes) as s:
        assert _marked(s) == 1
        assert s._prog.host_passes.get("reshape_views", 0) == (1 if "reshape" in passes else 0)
        for k in (1, 2):
            got = s.run({sx: k * X})[sz]
            np.testing.assert_allclose(got, (k * X.astype(np.float64) @ W).reshape(128, 64),
                                       rtol=1e-6)


def test_root_written_after_a_stored_view_declines():
    ir, sx, sz = _matmul_program(lambda y: ops.add_(y, popxl.constant(1.0)),
                                 stored=lambda y: ops.reshape_(y, (128, 64)))
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 0
        got = s.run({sx: X})[sz]
    np.testing.assert_allclose(got, (X.astype(np.float64) @ W).reshape(128, 64), rtol=1e-6)


def test_small_tensors_are_copied():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.ones((4, 4), np.float32))
        y = ops.add(v, v)
        sy = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(sy, y)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 0
        np.testing.assert_array_equal(s.run()[sy], 2 * np.ones((4, 4)))


def test_a_stream_stored_twice_is_copied():
    ir = popxl.Ir()
    ir.num_host_transfers = 2
    with ir.main_graph:
        v = popxl.variable(W, name="w")
        sy = popxl.d2h_stream(v.shape, v.dtype, name="y")
        a = ops.mul(v, popxl.constant(2.0))
        ops.host_store(sy, a)
        b = ops.mul(v, popxl.constant(3.0))
        ops.host_store(sy, b)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 0
        got = s.run()[sy]
    np.testing.assert_array_equal(got[0], 2 * W)
    np.testing.assert_array_equal(got[1], 3 * W)


def test_one_tensor_to_two_streams():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(W, name="w")
        y = ops.mul(v, popxl.constant(2.0))
        s1 = popxl.d2h_stream(y.shape, y.dtype, name="y1")
        s2 = popxl.d2h_stream(y.shape, y.dtype, name="y2")
        ops.host_store(s1, y)
        ops.host_store(s2, y)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 1
        for _ in range(2):
            got = s.run()
            np.testing.assert_array_equal(got[s1], 2 * W)
            np.testing.assert_array_equal(got[s2], 2 * W)


def test_output_array_shared_with_an_input_array():
    """The output array of y is the input array of x, which is loaded after
    y is computed: computing y in that array would change what x loads, so
    the core copies at the store for that run."""
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(X, name="w")
        y = ops.mul(w, popxl.constant(2.0))
        sx = popxl.h2d_stream(X.shape, popxl.float32, name="x")
        z = ops.add(ops.host_load(sx, "xl"), popxl.constant(1.0))
        sy = popxl.d2h_stream(y.shape, y.dtype, name="y")
        sz = popxl.d2h_stream(z.shape, z.dtype, name="z")
        ops.host_store(sz, z)
        ops.host_store(sy, y)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 2
        shared = aligned_empty(X.shape, np.float32)
        shared[...] = 5.0
        outs = {sy: shared, sz: aligned_empty(X.shape, np.float32)}
        s.run_with_outputs({sx: shared}, outs)
    np.testing.assert_array_equal(outs[sz], np.full(X.shape, 6.0, np.float32))
    np.testing.assert_array_equal(shared, 2 * X)


@pytest.mark.parametrize("offset", [0, 4])
def test_caller_arrays_aligned_or_not(offset):
    ir, sx, sy = _matmul_program()
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        buf = aligned_empty((64 * 128 + 16,), np.float32)
        out = buf[offset:offset + 64 * 128].reshape(64, 128)
        for k in (1, 3):
            s.run_with_outputs({sx: k * X}, {sy: out})
            np.testing.assert_allclose(out, k * X.astype(np.float64) @ W, rtol=1e-6)


def test_replicas_each_write_their_transfer():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        sx = popxl.h2d_stream(X.shape, popxl.float32, name="x")
        w = popxl.variable(W, name="w")
        y = ops.matmul(ops.host_load(sx, "xl"), w)
        sy = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(sy, y)
    xs = np.stack([X, X[::-1]])
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 1
        got = s.run({sx: xs})[sy]
    assert got.shape == (2, 64, 128)
    for r in range(2):
        np.testing.assert_allclose(got[r], xs[r].astype(np.float64) @ W, rtol=1e-6)


def test_a_failed_run_leaves_later_runs_right():
    """A run that fails after the stored tensor was computed (a remote load
    past the buffer's end): the next run computes into its own array."""
    ir = popxl.Ir()
    with ir.main_graph:
        sx = popxl.h2d_stream(X.shape, popxl.float32, name="x")
        si = popxl.h2d_stream((), popxl.int32, name="i")
        w = popxl.variable(W, name="w")
        y = ops.matmul(ops.host_load(sx, "xl"), w)
        sy = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(sy, y)
        rb = popxl.remote_buffer((2,), popxl.float32, entries=4)
        picked = ops.remote_load(rb, ops.host_load(si, "il"))
        sp = popxl.d2h_stream(picked.shape, picked.dtype, name="p")
        ops.host_store(sp, picked)
    with popxl.Session(ir, "ipu_model", host_passes=PASS) as s:
        assert _marked(s) == 1
        with pytest.raises(RuntimeError, match="out of range"):
            s.run({sx: X, si: np.array(7, np.int32)})
        s.write_variables_data({w: W})  # a failed run leaves the state undefined
        got = s.run({sx: 3 * X, si: np.array(1, np.int32)})
    np.testing.assert_allclose(got[sy], 3 * X.astype(np.float64) @ W, rtol=1e-6)
    np.testing.assert_array_equal(got[sp], [0.0, 0.0])
