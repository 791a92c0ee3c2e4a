"""When the Session copies weights between host and device.

Mirrors the PopXL user-guide program ``tensor_get_write_adv.py`` and checks
each step: a write while detached reaches the device on the next attach;
``get_tensor(s)_data`` syncs from the device only when a run has made the host
copy stale; a write while attached does not make it stale; leaving the
context copies the device weights back. A second variable, incremented in
place by every run, makes the syncs observable.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    a = popxl.variable(3, dtype=popxl.int32, name="variable_a")
    b = popxl.constant(1, dtype=popxl.int32, name="constant_b")
    runs = popxl.variable(0, dtype=popxl.int32, name="runs")
    c = a + b
    out_stream = popxl.d2h_stream(c.shape, c.dtype, name="sum_stream")
    ops.host_store(out_stream, c)
    ops.add_(runs, popxl.constant(1, popxl.int32, name="one"))  # runs += 1 on the device

ir.num_host_transfers = 1
new_value = np.array(5).astype(np.int32)

session = popxl.Session(ir, "ipu_model")

# Detached: only the host copy changes; the device gets it on the next attach.
session.write_variable_data(a, new_value)
assert session.get_tensor_data(a) == 5

with session:
    # No run yet, so the host copy is still in sync: no weights_to_host.
    assert session.get_tensor_data(a) == 5

    results = session.run()
    assert results[out_stream] == 6  # the device used the value written while detached

    # Only a constant: never synced from the device.
    assert session.get_tensor_data(b) == 1
    # A variable after a run: one weights_to_host, which brings runs == 1.
    datas = session.get_tensors_data([a, b, runs])
    assert datas[a] == 5 and datas[b] == 1 and datas[runs] == 1

    # Attached write: host copy, then weights_from_host (the device keeps runs == 1).
    session.write_variable_data(a, np.array(7).astype(np.int32))
    assert session.get_tensor_data(a) == 7

    results = session.run()
    assert results[out_stream] == 8

# Leaving the context ran weights_to_host: the host copy has both runs.
datas = session.get_tensors_data([a, b, runs])
print(f"after the context: a = {datas[a]}, b = {datas[b]}, runs = {datas[runs]}")
assert datas[a] == 7 and datas[b] == 1 and datas[runs] == 2
print("tensor_get_write_adv: OK")
