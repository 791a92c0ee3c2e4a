"""Conformance of ``Session`` (popxl.Session): running, stream validation,
num_host_transfers, weight synchronisation, tensor data access, contexts and
devices. Expected behaviour is PopXL's (python/popxl/python_files/session.py)."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def _scale_ir(shape=(2, 3), factor=2.0):
    """x (h2d 'x') * factor -> d2h 'y'."""
    ir = popxl.Ir()
    with ir.main_graph:
        h = popxl.h2d_stream(shape, popxl.float32, "x")
        d = popxl.d2h_stream(shape, popxl.float32, "y")
        ops.host_store(d, ops.host_load(h) * factor)
    return ir, h, d


def _counter_ir():
    """A variable w (int32 [0, 1]) incremented in place by every run; w + 10 is stored."""
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.array([0, 1], np.int32), name="w")
        c = popxl.constant(np.array([10, 10], np.int32), name="c")
        d = popxl.d2h_stream((2,), popxl.int32, "out")
        ops.host_store(d, w + c)
        ops.add_(w, popxl.constant(np.array([1, 1], np.int32), name="one"))
    return ir, w, c, d


X = np.arange(6, dtype=np.float32).reshape(2, 3)


class TestRun:
    def test_run(self):
        ir, h, d = _scale_ir()
        sess = popxl.Session(ir, "ipu_model")
        assert sess.ir is ir and not sess.is_attached
        with sess:
            assert sess.is_attached
            out = sess.run({h: X})
        assert set(out) == {d}
        assert out[d].dtype == np.float32 and out[d].shape == (2, 3)
        np.testing.assert_allclose(out[d], X * 2)

    def test_run_with_outputs_writes_in_place(self):
        ir, h, d = _scale_ir()
        buf = np.zeros((2, 3), np.float32)
        with popxl.Session(ir, "ipu_model") as sess:
            assert sess.run_with_outputs({h: X}, {d: buf}) is None
        np.testing.assert_allclose(buf, X * 2)

    def test_create_host_outputs_and_expected_inputs(self):
        ir, h, d = _scale_ir()
        sess = popxl.Session(ir, "ipu_model")
        outs = sess.create_host_outputs()
        assert set(outs) == {d}
        assert outs[d].shape == (2, 3) and outs[d].dtype == np.float32
        assert set(sess.expected_inputs()) == {h}

    def test_repeated_runs_restart_streams(self):
        ir, h, d = _scale_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            for k in range(3):
                np.testing.assert_allclose(sess.run({h: X + k})[d], (X + k) * 2)

    def test_input_downcast(self):
        ir, h, d = _scale_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({h: X.astype(np.float64)})
        np.testing.assert_allclose(out[d], X * 2)

    def test_int64_input_downcast(self):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((3,), popxl.int32, "h")
            d = popxl.d2h_stream((3,), popxl.int32, "d")
            ops.host_store(d, ops.host_load(h) + 1)
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({h: np.array([1, 2, 3], np.int64)})[d]
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, [2, 3, 4])

    def test_program_without_streams(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_array_equal(sess.run()[d], [10, 11])
            np.testing.assert_array_equal(sess.run({})[d], [11, 12])

    def test_program_without_outputs(self):
        ir = popxl.Ir()
        with ir.main_graph:
            w = popxl.variable(np.zeros(2, np.float32), name="w")
            ops.add_(w, popxl.constant(np.ones(2, np.float32)))
        with popxl.Session(ir, "ipu_model") as sess:
            assert sess.run() == {}
            np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 1])


class TestValidation:
    def test_missing_input(self):
        ir, h, d = _scale_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError, match="Missing"):
                sess.run({})
            with pytest.raises(ValueError, match="Missing"):
                sess.run()

    def test_unexpected_input(self):
        ir, h, d = _scale_ir()
        with ir.main_graph:
            unused = popxl.h2d_stream((1,), popxl.float32, "unused")
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError, match="Unexpected"):
                sess.run({h: X, unused: np.zeros(1, np.float32)})

    def test_missing_and_unexpected_output(self):
        ir, h, d = _scale_ir()
        with ir.main_graph:
            other = popxl.d2h_stream((1,), popxl.float32, "other")
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError, match="Missing"):
                sess.run_with_outputs({h: X}, {})
            with pytest.raises(ValueError, match="Unexpected"):
                sess.run_with_outputs({h: X}, {d: np.empty((2, 3), np.float32),
                                               other: np.empty(1, np.float32)})

    @pytest.mark.parametrize("shape", [(3, 2), (6,), (2, 3, 1), (1, 2, 3), (2, 2)])
    def test_wrong_input_shape(self, shape):
        ir, h, d = _scale_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError):
                sess.run({h: np.zeros(shape, np.float32)})

    def test_wrong_output_shape(self):
        ir, h, d = _scale_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError):
                sess.run_with_outputs({h: X}, {d: np.empty((3, 2), np.float32)})

    def test_all_ones_shape_special_case(self):
        # PopXL accepts any array whose dimensions are all 1 for a one-element stream.
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((1,), popxl.float32, "h")
            d = popxl.d2h_stream((1,), popxl.float32, "d")
            ops.host_store(d, ops.host_load(h) + 1)
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_allclose(sess.run({h: np.full((1, 1), 2, np.float32)})[d], [3])
            np.testing.assert_allclose(sess.run({h: np.float32(4)})[d], [5])

    def test_run_outside_context(self):
        ir, h, d = _scale_ir()
        sess = popxl.Session(ir, "ipu_model")
        with pytest.raises(ValueError, match="attached"):
            sess.run({h: X})
        with pytest.raises(ValueError, match="attached"):
            sess.run_with_outputs({h: X}, sess.create_host_outputs())
        with pytest.raises(ValueError, match="attached"):
            sess.weights_to_host()
        with pytest.raises(ValueError, match="attached"):
            sess.weights_from_host()
        with sess:
            sess.run({h: X})
        with pytest.raises(ValueError, match="attached"):
            sess.run({h: X})


class TestNumHostTransfers:
    def _repeat_ir(self, n, loads_per_iteration=1):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((2,), popxl.float32, "h")
            d = popxl.d2h_stream((2,), popxl.float32, "d")

            def body():
                x = ops.host_load(h, "x")
                for _ in range(loads_per_iteration - 1):
                    x = x + ops.host_load(h, "x")
                ops.host_store(d, x * 3)

            g = ir.create_graph(body)
            ops.repeat(g, n)
        ir.num_host_transfers = n
        return ir, h, d

    def test_shapes_and_values(self):
        ir, h, d = self._repeat_ir(4)
        data = np.arange(8, dtype=np.float32).reshape(4, 2)
        with popxl.Session(ir, "ipu_model") as sess:
            assert sess.create_host_outputs()[d].shape == (4, 2)
            out = sess.run({h: data})[d]
        assert out.shape == (4, 2)
        np.testing.assert_allclose(out, data * 3)

    def test_longer_leading_dimension_accepted(self):
        ir, h, d = self._repeat_ir(3)
        data = np.arange(10, dtype=np.float32).reshape(5, 2)
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({h: data})[d]
        np.testing.assert_allclose(out, data[:3] * 3)

    @pytest.mark.parametrize("shape", [(2,), (2, 2), (3, 3)])
    def test_short_or_wrong_input(self, shape):
        ir, h, d = self._repeat_ir(3)
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(ValueError):
                sess.run({h: np.zeros(shape, np.float32)})

    def test_too_many_loads_raise(self):
        ir, h, d = self._repeat_ir(3, loads_per_iteration=2)  # 6 loads, 3 transfers
        data = np.zeros((3, 2), np.float32)
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(RuntimeError):
                sess.run({h: data})

    def test_too_many_loads_in_main_graph(self):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((2,), popxl.float32, "h")
            d = popxl.d2h_stream((2,), popxl.float32, "d")
            ops.host_store(d, ops.host_load(h) + ops.host_load(h))
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(RuntimeError):
                sess.run({h: np.zeros(2, np.float32)})

    def test_two_loads_two_transfers(self):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((2,), popxl.float32, "h")
            d = popxl.d2h_stream((2,), popxl.float32, "d")
            a = ops.host_load(h)
            b = ops.host_load(h)
            ops.host_store(d, a - b)
        ir.num_host_transfers = 2
        data = np.array([[5, 7], [1, 2]], np.float32)
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({h: data})[d]
        np.testing.assert_allclose(out[0], [4, 5])


class TestWeights:
    def test_lazy_sync_in_context(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            np.testing.assert_array_equal(sess.get_tensor_data(w), [0, 1])
            sess.run()
            np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 2])
            datas = sess.get_tensors_data([w, c])
            np.testing.assert_array_equal(datas[w], [1, 2])
            np.testing.assert_array_equal(datas[c], [10, 10])
        # Exit ran weights_to_host.
        np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 2])

    def test_exit_copies_weights_back(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        with sess:
            sess.run()
            sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(w), [2, 3])
        # Re-entering uploads the host weights again: the device continues from them.
        with sess:
            np.testing.assert_array_equal(sess.run()[d], [12, 13])

    def test_weights_to_host_on_exit_false(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model", weights_to_host_on_exit=False)
        with sess:
            sess.run()
        np.testing.assert_array_equal(sess.get_tensor_data(w), [0, 1])

    def test_explicit_weights_to_host(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            sess.run()
            sess.weights_to_host()
            np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 2])

    def test_weights_from_host_resets_device(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            sess.run()  # device w = [1, 2], host still [0, 1]
            sess.weights_from_host()  # device w = [0, 1] again
            np.testing.assert_array_equal(sess.run()[d], [10, 11])

    def test_exception_in_context_skips_weights_to_host(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        with pytest.raises(KeyError):
            with sess:
                sess.run()
                raise KeyError()
        assert not sess.is_attached
        np.testing.assert_array_equal(sess.get_tensor_data(w), [0, 1])

    def test_get_tensor_data_types(self):
        ir, w, c, d = _counter_ir()
        with ir.main_graph:
            act = w + 1
        with popxl.Session(ir, "ipu_model") as sess:
            with pytest.raises(TypeError):
                sess.get_tensor_data(act)
            with pytest.raises(TypeError):
                sess.get_tensors_data([w, act])

    def test_get_constant_data(self):
        ir = popxl.Ir()
        with ir.main_graph:
            c0 = popxl.constant(1, popxl.int32, name="c0")
            c2 = popxl.constant(np.arange(6, dtype=np.float16).reshape(2, 3), name="c2")
            v = popxl.variable(2.5, name="v")
            d = popxl.d2h_stream((), popxl.float32, "d")
            ops.host_store(d, v + 1)
        sess = popxl.Session(ir, "ipu_model")
        got = sess.get_tensors_data([c0, c2, v])  # detached: host copies
        assert got[c0].shape == () and got[c0].dtype == np.int32 and got[c0] == 1
        assert got[c2].shape == (2, 3) and got[c2].dtype == np.float16
        np.testing.assert_array_equal(got[c2], np.arange(6).reshape(2, 3))
        assert got[v].shape == () and got[v] == np.float32(2.5)

    def test_get_tensor_data_is_not_aliased_by_later_runs(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            first = sess.get_tensor_data(w).copy()
            sess.run()
            np.testing.assert_array_equal(first, [0, 1])


class TestWriteVariables:
    def test_write_detached_then_attach(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        sess.write_variable_data(w, np.array([5, 6], np.int32))
        np.testing.assert_array_equal(sess.get_tensor_data(w), [5, 6])
        with sess:
            np.testing.assert_array_equal(sess.run()[d], [15, 16])

    def test_write_attached(self):
        ir, w, c, d = _counter_ir()
        with popxl.Session(ir, "ipu_model") as sess:
            sess.run()
            sess.write_variable_data(w, np.array([100, 200], np.int32))
            np.testing.assert_array_equal(sess.get_tensor_data(w), [100, 200])
            np.testing.assert_array_equal(sess.run()[d], [110, 210])
        np.testing.assert_array_equal(sess.get_tensor_data(w), [101, 201])

    def test_write_keeps_other_device_values(self):
        ir = popxl.Ir()
        with ir.main_graph:
            a = popxl.variable(np.zeros(2, np.float32), name="a")
            b = popxl.variable(np.zeros(2, np.float32), name="b")
            ops.add_(a, popxl.constant(np.ones(2, np.float32)))
            ops.add_(b, popxl.constant(np.ones(2, np.float32)))
        with popxl.Session(ir, "ipu_model") as sess:
            sess.run()
            sess.write_variable_data(a, np.full(2, 7, np.float32))
            datas = sess.get_tensors_data([a, b])
        np.testing.assert_array_equal(datas[a], [7, 7])
        np.testing.assert_array_equal(datas[b], [1, 1])

    def test_write_variables_data(self):
        ir = popxl.Ir()
        with ir.main_graph:
            a = popxl.variable(np.zeros(2, np.float32), name="a")
            b = popxl.variable(np.zeros((), np.int32), name="b")
            d = popxl.d2h_stream((2,), popxl.float32, "d")
            ops.host_store(d, a * 2)
        with popxl.Session(ir, "ipu_model") as sess:
            sess.write_variables_data({a: np.array([1, 2], np.float32), b: np.int32(9)})
            np.testing.assert_array_equal(sess.run()[d], [2, 4])
            assert sess.get_tensor_data(b) == 9

    def test_python_scalar_is_cast(self):
        ir = popxl.Ir()
        with ir.main_graph:
            v = popxl.variable(np.float32(1), name="v")
            d = popxl.d2h_stream((), popxl.float32, "d")
            ops.host_store(d, v + 0)
        with popxl.Session(ir, "ipu_model") as sess:
            sess.write_variable_data(v, 3)
            assert sess.run()[d] == 3
            assert sess.get_tensor_data(v).dtype == np.float32

    @pytest.mark.parametrize("attached", [False, True])
    def test_bad_writes(self, attached):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        if attached:
            sess.__enter__()
        try:
            with pytest.raises(TypeError):
                sess.write_variable_data(w, np.array([1, 2], np.int64))  # dtype must match exactly
            with pytest.raises(TypeError):
                sess.write_variable_data(w, np.array([1, 2], np.float32))
            with pytest.raises(ValueError):
                sess.write_variable_data(w, np.array([1, 2, 3], np.int32))  # shape
            with pytest.raises(ValueError):
                sess.write_variable_data(w, np.array([[1, 2]], np.int32))
            with pytest.raises(TypeError):
                sess.write_variable_data(c, np.array([1, 2], np.int32))  # a Constant
            np.testing.assert_array_equal(sess.get_tensor_data(w), [0, 1])
        finally:
            if attached:
                sess.__exit__(None, None, None)


class TestContexts:
    def test_nested(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        with sess:
            with sess:
                sess.run()
            assert sess.is_attached
            # The inner exit did not copy weights back: the host copy is stale
            # until get_tensor_data syncs it lazily.
            np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 2])
            with sess:
                sess.run()
            assert sess.is_attached
        assert not sess.is_attached
        np.testing.assert_array_equal(sess.get_tensor_data(w), [2, 3])

    def test_enter_returns_session(self):
        ir, w, c, d = _counter_ir()
        sess = popxl.Session(ir, "ipu_model")
        with sess as s:
            assert s is sess


class TestDevices:
    def test_cpu_and_ipu_model_agree(self):
        results = []
        for device in ("cpu", "ipu_model"):
            ir, h, d = _scale_ir(factor=0.5)
            with popxl.Session(ir, device) as sess:
                results.append(sess.run({h: X})[d])
        np.testing.assert_array_equal(results[0], results[1])
        np.testing.assert_allclose(results[0], X * 0.5)

    def test_default_device_is_cpu(self):
        ir, h, d = _scale_ir()
        with popxl.Session(ir) as sess:
            np.testing.assert_allclose(sess.run({h: X})[d], X * 2)

    def test_ipu_hw_falls_back_with_warning(self, capfd, monkeypatch):
        monkeypatch.delenv("IPUXL_REQUIRE_IPU_HW", raising=False)
        monkeypatch.delenv("POPXL_OFFLINE_DEVICE", raising=False)
        ir, h, d = _scale_ir()
        sess = popxl.Session(ir, "ipu_hw")
        err = capfd.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "ipu_hw" in lines[0]
        with sess:
            np.testing.assert_allclose(sess.run({h: X})[d], X * 2)

    def test_ipu_hw_warning_does_not_take_the_alias_for_the_sdk(self, capfd, monkeypatch):
        # With the compat alias installed, `import popart` finds ipuxl's own
        # module; that is not a Poplar SDK and the warning must say so.
        import importlib.util

        from ipuxl import compat

        monkeypatch.delenv("IPUXL_REQUIRE_IPU_HW", raising=False)
        monkeypatch.delenv("POPXL_OFFLINE_DEVICE", raising=False)
        compat.install()
        try:
            assert importlib.util.find_spec("popart") is not None
            ir, h, d = _scale_ir()
            popxl.Session(ir, "ipu_hw")
        finally:
            compat.uninstall()
        err = capfd.readouterr().err
        assert "no Poplar SDK is importable" in err, err

    def test_ipu_hw_required(self, monkeypatch):
        monkeypatch.setenv("IPUXL_REQUIRE_IPU_HW", "1")
        monkeypatch.delenv("POPXL_OFFLINE_DEVICE", raising=False)
        ir, h, d = _scale_ir()
        with pytest.raises(RuntimeError):
            popxl.Session(ir, "ipu_hw")

    def test_empty_ir(self):
        with pytest.raises(RuntimeError):
            popxl.Session(popxl.Ir(), "ipu_model")

    def test_ir_with_variables_but_no_ops(self):
        ir = popxl.Ir()
        with ir.main_graph:
            popxl.variable(1)
        with pytest.raises(RuntimeError):
            popxl.Session(ir, "ipu_model")
