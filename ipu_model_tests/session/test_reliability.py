"""Issue 13: no silent wrong answers, no crash, nothing lost when a run fails.
Each case reproduced first, then fixed; numbers against NumPy."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.errors import popart_exception


def _io_program(shape, dtype):
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream(shape, dtype, name="x")
        x = ops.host_load(s)
        o = popxl.d2h_stream(shape, dtype, name="y")
        ops.host_store(o, x)
    return ir, s, o


# ---- 3. downcast feeds never overflow silently

def test_float32_beyond_float16_range_is_refused():
    ir, s, o = _io_program((3,), popxl.float16)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(ValueError, match="stream x.*100000.0.*become inf"):
            sess.run({s: np.array([1.0, 1e5, 2.0], np.float32)})
        # In range (and inf/nan themselves) still convert.
        got = sess.run({s: np.array([1.0, np.inf, 65504.0], np.float32)})[o]
        np.testing.assert_array_equal(got, np.array([1.0, np.inf, 65504.0], np.float16))


def test_int64_beyond_int32_range_wraps_as_in_popxl_with_one_warning():
    """PopXL's downcast_inputs (64 to 32 bits) casts whatever the values
    (issue 42, item 11): ipuxl does too, and warns once per stream."""
    ir, s, o = _io_program((2,), popxl.int32)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.warns(RuntimeWarning, match="stream x.*1099511627781.*wrap"):
            got = sess.run({s: np.array([2 ** 40 + 5, 1], np.int64)})[o]
        np.testing.assert_array_equal(got, np.array([2 ** 40 + 5, 1]).astype(np.int32))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per stream
            sess.run({s: np.array([2 ** 40 + 5, 1], np.int64)})
        got = sess.run({s: np.array([-2 ** 31, 2 ** 31 - 1], np.int64)})[o]
        np.testing.assert_array_equal(got, [-2 ** 31, 2 ** 31 - 1])


# ---- 4. transfers a program did not store are defined (zeros) and reported

def test_unstored_transfers_are_zero_and_warned():
    ir, s, o = _io_program((2,), popxl.float32)
    ir.num_host_transfers = 2
    with ir.main_graph:
        c = popxl.d2h_stream((2,), popxl.float32, name="once")
        ops.host_store(c, popxl.constant(np.array([7.0, 8.0], np.float32)))
    data = np.array([[1, 2], [3, 4]], np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.warns(RuntimeWarning, match="'once' was stored 1 of num_host_transfers=2"):
            out = sess.create_host_outputs()
            for a in out.values():
                a.fill(np.nan)  # garbage the program must not leave in place
            sess.run_with_outputs({s: data}, out)
    assert out[c].tolist() == [[7.0, 8.0], [0.0, 0.0]]
    assert out[o].tolist() == [[1.0, 2.0], [0.0, 0.0]]  # one load, one store per run


# ---- 5. shapes

@pytest.mark.parametrize("shape,err", [((2.5, 3), TypeError), ((True, 2), TypeError),
                                       ((-1, 2), ValueError), ((2 ** 40, 2 ** 40), ValueError)])
def test_bad_stream_shapes_are_refused(shape, err):
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(err, match="h2d_stream 'bad'"):
            popxl.h2d_stream(shape, popxl.float32, name="bad")


def test_bad_shapes_elsewhere():
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(TypeError, match="TensorSpec"):
            popxl.TensorSpec((2.0, 3), popxl.float32)
        with pytest.raises(ValueError, match="init.*too many"):
            ops.init((2 ** 31, 2 ** 31, 4), popxl.float32)


# ---- 6. constants are immutable

def test_inplace_op_on_a_constant_is_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        c = popxl.constant(np.ones(3, np.float32), name="c")
        with pytest.raises(ValueError, match="add_: cannot modify 'c' in place.*constant"):
            ops.add_(c, 1.0)
        v = ops.reshape_(c, (3, 1))
        with pytest.raises(ValueError, match="cannot modify .* in place"):
            ops.relu_(v)


# ---- 7. graphs and tensors of another Ir

def test_calling_a_graph_of_another_ir_is_refused():
    other = popxl.Ir()
    with other.main_graph:
        g = other.create_graph(lambda x: x + 1.0, popxl.TensorSpec((2,), popxl.float32))
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros(2, np.float32))
        with pytest.raises(ValueError, match="another Ir"):
            ops.call(g, x)


def test_tensor_of_another_ir_names_the_irs():
    other = popxl.Ir()
    with other.main_graph:
        t = popxl.variable(np.zeros(2, np.float32), name="foreign")
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(ValueError, match="'foreign'.*belongs to another Ir"):
            ops.exp(t)


# ---- 8. conditions and labels

def test_float_condition_of_a_conditional_is_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda: popxl.constant(np.float32(1)))
        h = ir.create_graph(lambda: popxl.constant(np.float32(2)))
        c = popxl.variable(np.float32(1.0), name="flag")
        with pytest.raises(popart_exception, match="'flag' must be a bool"):
            ops.conditional(c, g, h)


def test_where_casts_a_numeric_condition_as_popxl_does():
    ir = popxl.Ir()
    with ir.main_graph:
        c = popxl.variable(np.array([0.0, 2.0, -0.0], np.float32))
        out = ops.where(c, 1.0, popxl.constant(np.zeros(3, np.float32)))
        s = popxl.d2h_stream(out.shape, out.dtype)
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_array_equal(sess.run()[s], [0.0, 1.0, 0.0])


# ---- 9. nothing ignored

def test_autodiff_of_the_main_graph_is_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        popxl.variable(np.zeros(2, np.float32)) + 1.0
    with pytest.raises(popart_exception, match="nothing to differentiate"):
        popxl.transforms.autodiff(ir.main_graph)


def test_ops_added_after_the_session_was_created_are_not_ignored():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros(2, np.float32))
        ops.mul_(v, 2.0)
    sess = popxl.Session(ir, "ipu_model")
    with ir.main_graph:
        ops.add_(v, 1.0)
    with sess:
        with pytest.raises(RuntimeError, match="ops were added .* after this Session compiled"):
            sess.run()


# ---- failed runs lose nothing

def _failing_program():
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(3, np.float32), name="w")
        s = popxl.h2d_stream((3,), popxl.float32, name="x")
        ops.add_(w, ops.host_load(s))
        ops.add_(w, ops.host_load(s))  # the second load has no data: fails mid-run
    return ir, w, s


def test_failed_run_never_shows_stale_values_as_current():
    ir, w, s = _failing_program()
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(RuntimeError, match="did not provide input data"):
            sess.run({s: np.ones(3, np.float32)})
        with pytest.raises(RuntimeError, match="undefined.*weights_from_host"):
            sess.get_tensor_data(w)
        with pytest.raises(RuntimeError, match="undefined"):
            sess.run({s: np.ones(3, np.float32)})
        sess.weights_from_host()  # restores the last host values
        np.testing.assert_array_equal(sess.get_tensor_data(w), np.zeros(3))


def test_write_variables_data_restores_after_a_failed_run():
    """The error names write_variables_data() as a way back: it works, and
    the variables it does not write get their last host values."""
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(3, np.float32), name="w")
        u = popxl.variable(np.full(3, 7.0, np.float32), name="u")
        s = popxl.h2d_stream((3,), popxl.float32, name="x")
        ops.add_(w, ops.host_load(s))
        ops.add_(w, ops.host_load(s))  # the second load has no data: fails mid-run
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(RuntimeError, match="did not provide input data"):
            sess.run({s: np.ones(3, np.float32)})
        sess.write_variables_data({w: np.full(3, 2.0, np.float32)})
        np.testing.assert_array_equal(sess.get_tensor_data(w), np.full(3, 2.0))
        np.testing.assert_array_equal(sess.get_tensor_data(u), np.full(3, 7.0))


def test_validation_errors_before_running_leave_the_state_defined():
    ir, w, s = _failing_program()
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(ValueError, match="shape"):
            sess.run({s: np.ones(4, np.float32)})
        np.testing.assert_array_equal(sess.get_tensor_data(w), np.zeros(3))


# ---- clear errors

def test_huge_allocation_is_a_memory_error_naming_the_tensor():
    ir = popxl.Ir()
    with ir.main_graph:
        t = ops.init((2 ** 40,), popxl.float32, name="enormous")
        s = popxl.d2h_stream((1,), popxl.float32)
        ops.host_store(s, ops.slice(t, 0, 1))
    with pytest.raises(MemoryError, match="enormous.*4398046511104 bytes"):
        popxl.Session(ir, "ipu_model")


def test_read_only_and_big_endian_feeds_are_accepted():
    ir, s, o = _io_program((4,), popxl.float32)
    data = np.arange(4, dtype=np.float32)
    ro = data.copy()
    ro.flags.writeable = False
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_array_equal(sess.run({s: ro})[o], data)
        np.testing.assert_array_equal(sess.run({s: data.astype(">f4")})[o], data)


def test_feeding_by_stream_name_says_so():
    ir, s, o = _io_program((2,), popxl.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(TypeError, match="keyed by the stream objects.*'x'"):
            sess.run({"x": np.zeros(2, np.float32)})


def test_messages_do_not_stutter():
    ir = popxl.Ir()
    with ir.main_graph:
        i = popxl.variable(np.zeros(2, np.int32))
        with pytest.raises(TypeError) as e:
            ops.exp(i)
    assert "one of one of" not in str(e.value)


@pytest.mark.slow  # runs a subprocess
def test_ipuxl_run_without_a_script_prints_usage():
    out = subprocess.run([sys.executable, "-m", "ipuxl", "run"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "no script given. Usage: ipuxl run SCRIPT.py" in out.stderr
