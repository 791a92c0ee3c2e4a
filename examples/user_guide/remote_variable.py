"""A variable kept in Streaming Memory: load it, update it, store it back.

Mirrors the PopXL user-guide program ``remote_variable.py``: a remote buffer
of one int32 entry holds the remote variable ``x = 1``; the program loads
it, adds a variable ``y = 2`` to the loaded copy in place, stores the
result back and streams it to the host. ``get_tensor_data`` reads the
remote variable from the buffer: 3.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph, popxl.in_sequence():
    x_host = np.array(1, np.int32)
    buffer = popxl.remote_buffer(x_host.shape, popxl.int32, 1)
    remote_x = popxl.remote_variable(x_host, buffer, 0, name="remote_x")
    loaded_x = ops.remote_load(buffer, 0)
    y = popxl.variable(2, name="y")
    ops.var_updates.accumulate_(loaded_x, y)
    ops.remote_store(buffer, 0, loaded_x)
    out = popxl.d2h_stream(loaded_x.shape, loaded_x.dtype, name="out")
    ops.host_store(out, loaded_x)

with popxl.Session(ir, "ipu_model") as session:
    outputs = session.run({})
    final = session.get_tensor_data(remote_x)

print(f"stored = {int(outputs[out])}, remote variable = {int(final)}")
assert outputs[out] == 3 and final == 3
print("remote_variable: OK")
