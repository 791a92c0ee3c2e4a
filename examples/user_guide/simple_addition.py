"""Add two scalars streamed from the host.

Mirrors the PopXL user-guide program ``simple_addition.py``: two host-to-device
streams feed ``ops.add``, the sum goes back through a device-to-host stream.
The Session is created once, outside any ``with`` block, and entered twice:
first with ``Session.run`` (which allocates the outputs), then with
``Session.run_with_outputs`` writing into a preallocated array.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    lhs_stream = popxl.h2d_stream([1], popxl.float32, name="lhs_stream")
    rhs_stream = popxl.h2d_stream([1], popxl.float32, name="rhs_stream")
    lhs = ops.host_load(lhs_stream, "lhs")
    rhs = ops.host_load(rhs_stream, "rhs")
    total = ops.add(lhs, rhs)
    out_stream = popxl.d2h_stream(total.shape, total.dtype, name="sum_stream")
    ops.host_store(out_stream, total)

session = popxl.Session(ir, "ipu_model")

rng = np.random.default_rng(0)
lhs_data = rng.random(1, dtype=np.float32)
rhs_data = rng.random(1, dtype=np.float32)
feeds = {lhs_stream: lhs_data, rhs_stream: rhs_data}
expected = lhs_data + rhs_data

# First attach: run() creates the output arrays itself.
with session:
    results = session.run(feeds)
print(f"lhs = {lhs_data}, rhs = {rhs_data}")
print(f"run: sum = {results[out_stream]}")
assert results[out_stream].shape == (1,) and results[out_stream].dtype == np.float32
np.testing.assert_allclose(results[out_stream], expected, rtol=1e-6)

# Second attach of the same session: the caller owns the output buffer.
buffer = {out_stream: np.zeros([1], dtype=np.float32)}
with session:
    session.run_with_outputs(feeds, buffer)
print(f"run_with_outputs: sum = {buffer[out_stream]}")
np.testing.assert_allclose(buffer[out_stream], expected, rtol=1e-6)
assert not session.is_attached
print("simple_addition: OK")
