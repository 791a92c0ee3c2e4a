"""Write to a subgraph input and make the write visible to the caller.

Mirrors the PopXL user-guide program ``call_with_info.py``: the subgraph
updates its input ``x`` in place with ``copy_var_update_``; the call site
marks the parent tensor as modified with
``CallSiteInfo.set_parent_input_modified``, so the caller sees ``x + value``.
``in_sequence`` keeps the host_store after the call.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def increment_in_place(x: popxl.Tensor):
    # A second input created inside the function, appended after ``x``.
    value = popxl.graph_input(x.shape, x.dtype, "value")
    ops.var_updates.copy_var_update_(x, x + value)


ir = popxl.Ir()
with ir.main_graph, popxl.in_sequence():
    x = popxl.variable(1, name="x")
    one = popxl.constant(1, name="one")
    graph = ir.create_graph(increment_in_place, x)
    info = ops.call_with_info(graph, x, one)
    info.set_parent_input_modified(x)
    out_stream = popxl.d2h_stream(x.shape, x.dtype, name="x_stream")
    ops.host_store(out_stream, x)

assert [t.name for t in graph.inputs] == ["x", "value"]
assert graph.outputs == ()
assert info.called_graph == graph
assert info.parent_input(0) == x and info.parent_input(1) == one
assert info.graph_to_parent(graph.inputs[1]) == one
assert info.parent_to_graph(x) == graph.inputs[0]

with popxl.Session(ir, "ipu_model") as session:
    results = session.run()
    x_after = session.get_tensor_data(x)

print(f"x after the call = {results[out_stream]}")
np.testing.assert_array_equal(results[out_stream], np.int32(2))
# The variable itself was modified on the device.
np.testing.assert_array_equal(x_after, np.int32(2))
print("call_with_info: OK")
