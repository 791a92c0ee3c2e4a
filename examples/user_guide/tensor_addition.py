"""The three kinds of tensor: a variable, a constant and an op output.

Mirrors the PopXL user-guide program ``tensor_addition.py``: int8 variable 3
plus int8 constant 1, stored to the host with ``num_host_transfers = 1`` and a
``run()`` that needs no inputs.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(3, dtype=popxl.int8, name="variable_a")
    b = popxl.constant(1, dtype=popxl.int8, name="constant_b")
    c = a + b  # an ActGrad tensor produced by ops.add
    out_stream = popxl.d2h_stream(c.shape, c.dtype, name="sum_stream")
    ops.host_store(out_stream, c)

assert isinstance(a, popxl.Variable) and isinstance(b, popxl.Constant)
assert not isinstance(c, (popxl.Variable, popxl.Constant))
assert c.dtype == popxl.int8 and c.shape == ()

ir.num_host_transfers = 1
with popxl.Session(ir, "ipu_model") as session:
    results = session.run()

value = results[out_stream]
print(f"sum = {value} ({value.dtype})")
assert value.dtype == np.int8
np.testing.assert_array_equal(value, np.int8(3) + np.int8(1))
print("tensor_addition: OK")
