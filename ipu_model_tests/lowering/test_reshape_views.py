"""A Reshape (a copy in PopXL) runs as a view of its input when nothing can
tell the difference: no op writes the input or the output, in place or
through another view, and the output is not a graph output. Every case that
could observe the sharing keeps the copy. Oracle: NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _run(build):
    ir = popxl.Ir()
    with ir.main_graph:
        tensors = build()
        streams = []
        for t in tensors:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
        text = sess.engine.describe(host=True)
    return [out[s] for s in streams], text


def test_read_only_reshape_is_a_view():
    def build():
        x = popxl.variable(X, name="x")
        y = x.reshape((2, 6))
        return [y * 2.0, x + 1.0]

    (y2, x1), text = _run(build)
    np.testing.assert_array_equal(y2, X.reshape(2, 6) * 2)
    np.testing.assert_array_equal(x1, X + 1)
    assert "Execute(ReshapeInplace:" in text and "Execute(Reshape:" not in text


def test_input_written_after_the_reshape_keeps_the_copy():
    def build():
        x = popxl.variable(X, name="x")
        y = x.reshape((2, 6))
        ops.add_(x, popxl.constant(np.float32(100.0)))
        return [y + 0.0, x + 0.0]

    (y, x), text = _run(build)
    np.testing.assert_array_equal(y, X.reshape(2, 6))  # the value before the write
    np.testing.assert_array_equal(x, X + 100)
    assert "Execute(Reshape:" in text


def test_output_written_in_place_keeps_the_copy():
    def build():
        x = popxl.variable(X, name="x")
        y = x.reshape((2, 6))
        ops.mul_(y, popxl.constant(np.float32(-1.0)))
        return [y + 0.0, x + 0.0]

    (y, x), text = _run(build)
    np.testing.assert_array_equal(y, -X.reshape(2, 6))
    np.testing.assert_array_equal(x, X)  # untouched by the write to y
    assert "Execute(Reshape:" in text


def test_write_through_another_view_of_the_input_keeps_the_copy():
    def build():
        x = popxl.variable(X, name="x")
        y = x.reshape((12,))
        v = x.reshape_((4, 3))  # a view of x
        ops.add_(v, popxl.constant(np.float32(1.0)))
        return [y + 0.0]

    (y,), text = _run(build)
    np.testing.assert_array_equal(y, X.reshape(12))
    assert "Execute(Reshape:" in text


@pytest.mark.parametrize("callee,shape", [
    (lambda t: t.reshape((4, 3)), (4, 3)),                    # the reshape is the output
    (lambda t: t.reshape((4, 3)).reshape_((2, 6)), (2, 6)),   # a view of it is
])
def test_graph_output_reshape_keeps_the_copy_and_the_caller_sees_its_value(callee, shape):
    # Sharing would make the callee's output alias its input, which the
    # caller then writes.
    def build():
        x = popxl.variable(X, name="x")
        g = popxl.gir().create_graph(callee, x)
        (y,) = ops.call(g, x)
        ops.add_(x, popxl.constant(np.float32(5.0)))
        return [y + 0.0]

    (y,), text = _run(build)
    np.testing.assert_array_equal(y, X.reshape(shape))
    assert "Execute(Reshape:" in text


# Plain copies (identity, io_tile_copy, detach) follow the same rules.
COPIES = {"Identity": ops.identity, "Detach": ops.detach}


@pytest.mark.parametrize("kernel", sorted(COPIES))
def test_read_only_copy_is_a_view(kernel):
    def build():
        x = popxl.variable(X, name="x")
        y = COPIES[kernel](x)
        return [y * 2.0, x + 1.0]

    (y2, x1), text = _run(build)
    np.testing.assert_array_equal(y2, X * 2)
    np.testing.assert_array_equal(x1, X + 1)
    assert f"Execute({kernel}Inplace:" in text and f"Execute({kernel}:" not in text


@pytest.mark.parametrize("kernel", sorted(COPIES))
@pytest.mark.parametrize("written", ["input", "output"])
def test_copy_written_on_either_side_keeps_the_copy(kernel, written):
    def build():
        x = popxl.variable(X, name="x")
        y = COPIES[kernel](x)
        ops.add_(x if written == "input" else y, popxl.constant(np.float32(100.0)))
        return [y + 0.0, x + 0.0]

    (y, x), text = _run(build)
    np.testing.assert_array_equal(y, X + 100 if written == "output" else X)
    np.testing.assert_array_equal(x, X + 100 if written == "input" else X)
    assert f"Execute({kernel}:" in text


def test_io_tile_copies_of_a_loop_body_are_views_unless_written():
    """The batch-serialised phase's shape: a host load moved to the compute
    tiles and back. The second body writes the copy in place: it keeps it."""
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph:
        xs = [popxl.h2d_stream((4,), popxl.float32, f"x{k}") for k in range(2)]
        out = [popxl.d2h_stream((4,), popxl.float32, f"y{k}") for k in range(2)]

        def body(write):
            def fn():
                with popxl.io_tiles():
                    x = ops.host_load(xs[write])
                c = ops.io_tile_copy(x)
                if write:
                    ops.add_(c, popxl.constant(np.float32(1.0)))
                y = c * 2.0
                with popxl.io_tiles():
                    ops.host_store(out[write], ops.io_tile_copy(y))
            return fn

        for write in (0, 1):
            ops.repeat(ir.create_graph(body(write)), 3)
    ir.num_host_transfers = 3
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs[0]: data, xs[1]: data})
        text = sess.engine.describe(host=True)
    np.testing.assert_array_equal(got[out[0]], data * 2)
    np.testing.assert_array_equal(got[out[1]], (data + 1) * 2)
    assert text.count("Execute(IdentityInplace:") == 3 and text.count("Execute(Identity:") == 1
