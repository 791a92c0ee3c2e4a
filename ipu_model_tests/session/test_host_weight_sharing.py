"""Device storage of variables in their host arrays.

Variables no op writes always use their host array as device storage: host
and device copies are equal there, so PopXL's semantics hold unchanged.
``share_host_weights=True`` extends this to variables the program updates,
trading PopXL's separate (possibly stale) host copy for one copy of the
weights. Oracles: the values PopXL's rules give, computed by hand.
"""
import gc

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def _inference_ir():
    """y = x @ w + b with w, b only written by the host."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((6, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((4, 6), popxl.float32, "x")
        w, b = popxl.variable(w0, name="w"), popxl.variable(b0, name="b")
        y = ops.host_load(xs) @ w + b
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    return ir, xs, ys, w, b, w0, b0


def _counter_ir():
    """w (int32) incremented in place by every run; w + 10 is stored."""
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.array([0, 1], np.int32), name="w")
        d = popxl.d2h_stream((2,), popxl.int32, "out")
        ops.host_store(d, w + popxl.constant(np.array([10, 10], np.int32)))
        ops.add_(w, popxl.constant(np.array([1, 1], np.int32)))
    return ir, w, d


X = np.arange(24, dtype=np.float32).reshape(4, 6) / 10


def test_variables_only_the_host_writes_are_shared_and_host_writes_reach_the_device():
    ir, xs, ys, w, b, w0, b0 = _inference_ir()
    sess = popxl.Session(ir, "ipu_model")
    assert sess.shared_variables == {w, b}
    w1 = (w0 * 2).astype(np.float32)
    with sess:
        np.testing.assert_allclose(sess.run({xs: X})[ys], X @ w0 + b0, rtol=1e-5, atol=1e-5)
        sess.write_variable_data(w, w1)  # attached: reaches the device now
        np.testing.assert_allclose(sess.run({xs: X})[ys], X @ w1 + b0, rtol=1e-5, atol=1e-5)
        got = sess.get_tensor_data(w)
        got[...] = 0  # a copy: the device keeps w1
        np.testing.assert_allclose(sess.run({xs: X})[ys], X @ w1 + b0, rtol=1e-5, atol=1e-5)
    sess.write_variable_data(w, w0)  # detached: reaches the device on the next attach
    with sess:
        np.testing.assert_allclose(sess.run({xs: X})[ys], X @ w0 + b0, rtol=1e-5, atol=1e-5)


def test_the_callers_array_is_copied_when_the_variable_is_created():
    ir, xs, ys, w, b, w0, b0 = _inference_ir()
    w0[...] = 100.0  # the caller's array, not the Ir's
    with popxl.Session(ir, "ipu_model") as sess:
        assert np.all(sess.get_tensor_data(w) != 100.0)


def test_updated_variables_keep_popxl_host_semantics_by_default():
    ir, w, d = _counter_ir()
    with popxl.Session(ir, "ipu_model") as sess:
        assert w not in sess.shared_variables
        sess.run()
        sess.weights_from_host()  # the host copy is still [0, 1]
        np.testing.assert_array_equal(sess.run()[d], [10, 11])


def test_share_host_weights_holds_one_copy_that_is_always_current():
    ir, w, d = _counter_ir()
    sess = popxl.Session(ir, "ipu_model", share_host_weights=True)
    assert sess.shared_variables == {w}
    with sess:
        np.testing.assert_array_equal(sess.run()[d], [10, 11])
        np.testing.assert_array_equal(sess.run()[d], [11, 12])
        np.testing.assert_array_equal(sess.get_tensor_data(w), [2, 3])
        sess.weights_from_host()  # nothing older to restore: the device keeps [2, 3]
        np.testing.assert_array_equal(sess.run()[d], [12, 13])
        sess.write_variable_data(w, np.array([7, 7], np.int32))
        np.testing.assert_array_equal(sess.run()[d], [17, 17])
    np.testing.assert_array_equal(sess.get_tensor_data(w), [8, 8])
    with pytest.raises(KeyError):
        with sess:
            sess.run()
            raise KeyError()
    np.testing.assert_array_equal(sess.get_tensor_data(w), [9, 9])  # no stale host copy


def test_shared_training_matches_the_default_session():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)

    def build():
        ir = popxl.Ir()
        with ir.main_graph:
            xv, w = popxl.variable(x, name="x"), popxl.variable(w0, name="w")
            g = ir.create_graph(lambda a, b: ops.sum(a @ b), xv, w)
            grad = popxl.transforms.autodiff(g)
            info = ops.call_with_info(g, xv, w)
            _, dw = ops.call(grad.graph, popxl.constant(np.float32(1.0)),
                             inputs_dict=grad.inputs_dict(info))
            ops.scaled_add_(w, dw, b=-0.1)
        return ir, w

    finals = []
    for share in (False, True):
        ir, w = build()
        with popxl.Session(ir, "ipu_model", share_host_weights=share) as sess:
            for _ in range(3):
                sess.run()
        finals.append(sess.get_tensor_data(w))
    want = w0.astype(np.float64) - 3 * 0.1 * (x.T @ np.ones((5, 3)))
    np.testing.assert_allclose(finals[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(finals[0], finals[1])


@pytest.mark.slow  # trains two sessions
def test_with_two_live_sessions_on_one_ir_neither_shares():
    ir, xs, ys, w, b, w0, b0 = _inference_ir()
    first = popxl.Session(ir, "ipu_model")
    assert first.shared_variables == {w, b}
    with first:
        np.testing.assert_allclose(first.run({xs: X})[ys], X @ w0 + b0, rtol=1e-5, atol=1e-5)
        second = popxl.Session(ir, "ipu_model")
        assert not first.shared_variables and not second.shared_variables
        second.write_variable_data(w, np.zeros_like(w0))  # the Ir's host copy changes ...
        # ... but first's device keeps its values until its next weights_from_host.
        np.testing.assert_allclose(first.run({xs: X})[ys], X @ w0 + b0, rtol=1e-5, atol=1e-5)
        first.weights_from_host()
        np.testing.assert_allclose(first.run({xs: X})[ys], np.broadcast_to(b0, (4, 3)), rtol=1e-6)
    del first, second
    gc.collect()
    assert popxl.Session(ir, "ipu_model").shared_variables == {w, b}
