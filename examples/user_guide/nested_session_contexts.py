"""Nested ``with session`` blocks.

Mirrors the PopXL user-guide program ``nested_session_contexts.py``: only the
outermost context attaches (and runs weights_from_host) and only it detaches
(after weights_to_host); inner contexts change nothing.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(3, dtype=popxl.int32, name="variable_a")
    b = popxl.constant(1, dtype=popxl.int32, name="constant_b")
    c = a + b
    out_stream = popxl.d2h_stream(c.shape, c.dtype, name="sum_stream")
    ops.host_store(out_stream, c)
    # a += 1 on the device, so that the copy back on the outer exit is visible.
    ops.add_(a, popxl.constant(1, popxl.int32, name="one"))

ir.num_host_transfers = 1

with popxl.Session(ir, "ipu_model") as session:
    assert session.is_attached
    with session:
        assert session.is_attached
        assert session.run()[out_stream] == 4
    # The inner exit neither detached nor copied weights back.
    assert session.is_attached
    assert session.run()[out_stream] == 5
assert not session.is_attached

a_host = session.get_tensor_data(a)
print(f"a after two runs = {a_host}")
np.testing.assert_array_equal(a_host, 5)
print("nested_session_contexts: OK")
