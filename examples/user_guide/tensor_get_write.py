"""Read and write tensor data through the Session.

Mirrors the PopXL user-guide program ``tensor_get_write.py``:
``get_tensor_data`` returns the values of a variable and a constant, and
``write_variable_data`` while attached updates the device copy at once.
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

ir.num_host_transfers = 1
with popxl.Session(ir, "ipu_model") as session:
    results = session.run()
    print(f"a + b = {results[out_stream]}")
    np.testing.assert_array_equal(results[out_stream], 4)

    a_data = session.get_tensor_data(a)
    b_data = session.get_tensor_data(b)
    print(f"a = {a_data}, b = {b_data}")
    assert a_data == np.array(3) and a_data.dtype == np.int32
    assert b_data == np.array(1) and b_data.dtype == np.int32
    assert a_data.shape == a.shape and b_data.shape == b.shape

    # Written to the host copy, then weights_from_host because we are attached.
    session.write_variable_data(a, np.array(5).astype(np.int32))
    assert session.get_tensor_data(a) == np.array(5)

    # The next run sees the new value on the device.
    results = session.run()
    print(f"a + b after the write = {results[out_stream]}")
    np.testing.assert_array_equal(results[out_stream], 6)
print("tensor_get_write: OK")
