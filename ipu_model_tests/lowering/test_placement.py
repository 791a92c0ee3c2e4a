"""Placement (virtual IPU, tile set) and execution contexts travel from the
Ir to the core: describe() shows them, and ops placed in the weight
transfer contexts run with weights_from_host / weights_to_host."""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.context import _execution_context


def test_placement_is_visible_in_describe():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(4, np.float32), name="x")
        with popxl.ipu(1):
            y = ops.exp(x)
        with popxl.io_tiles():
            z = ops.identity(x, "on_io")
        w = popxl.variable(np.zeros(4, np.float32), name="w")
        with _execution_context(popxl.ExecutionContext.WeightsFromHostFragment):
            ops.var_updates.copy_var_update_(w, x)
        for t in (y, z):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
    with popxl.Session(ir, "ipu_model") as sess:
        text = sess.engine.describe()
    assert "Execute(Exp:exp) [ipu 1]" in text
    assert "Execute(Identity:identity) [io tiles]" in text
    assert "Program weights_from_host:" in text
    assert "Execute(CopyVarUpdate:copy_var_update_) [weights_from_host]" in text
    main = text.split("Program:")[1].split("Program weights_from_host:")[0]
    assert "CopyVarUpdate" not in main


def test_weight_transfer_contexts_run_with_the_transfers():
    w0 = np.arange(3, dtype=np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(w0, name="w")
        seen = popxl.variable(np.zeros(3, np.float32), name="seen")
        with _execution_context(popxl.ExecutionContext.WeightsFromHostFragment):
            ops.add_(w, 10.0)  # runs when weights are loaded
        with _execution_context(popxl.ExecutionContext.WeightsToHostFragment):
            ops.var_updates.copy_var_update_(seen, w)  # runs before weights are read
        ops.mul_(w, 2.0)  # the main program
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.run()
        got = sess.get_tensors_data([w, seen])
    np.testing.assert_array_equal(got[w], (w0 + 10.0) * 4)
    np.testing.assert_array_equal(got[seen], (w0 + 10.0) * 4)


def test_tensors_record_their_placement():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(2):
            v = popxl.variable(np.zeros(2, np.float32))
            t = v + 1.0
        with popxl.io_tiles():
            u = popxl.variable(np.zeros(2, np.float32))
    assert (v._ipu, t._ipu, u._tile_set, t._tile_set) == (2, 2, "io", "compute")
