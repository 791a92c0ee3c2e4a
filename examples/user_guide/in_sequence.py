"""Order an in-place update before a host_store with ``in_sequence``.

Mirrors the PopXL user-guide program ``in_sequence.py``: ``copy_var_update_``
overwrites the variable with 5; inside ``popxl.in_sequence()`` the
``host_store`` that follows is guaranteed to run after it, so the host sees 5.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(1, popxl.float32, name="x")
    five = popxl.constant(5, popxl.float32, name="five")
    with popxl.in_sequence():
        ops.var_updates.copy_var_update_(x, five)
        out_stream = popxl.d2h_stream(x.shape, x.dtype, name="x_stream")
        ops.host_store(out_stream, x)

with popxl.Session(ir, "ipu_model") as session:
    results = session.run()
    x_after = session.get_tensor_data(x)

print(f"stored x = {results[out_stream]}")
np.testing.assert_array_equal(results[out_stream], np.float32(5))
np.testing.assert_array_equal(x_after, np.float32(5))
print("in_sequence: OK")
