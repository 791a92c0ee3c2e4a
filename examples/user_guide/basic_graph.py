"""Build a subgraph from a Python function and call it.

Mirrors the PopXL user-guide program ``basic_graph.py``: ``ir.create_graph``
traces ``add_one`` with the shape and dtype of ``x``; adding a NumPy array to
a tensor turns the array into a constant of the tensor's dtype.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def add_one(x: popxl.Tensor):
    return x + np.ones(x.shape, x.dtype.as_numpy())


ir = popxl.Ir()
with ir.main_graph:
    in_stream = popxl.h2d_stream([2, 2], popxl.float32, name="x_stream")
    x = ops.host_load(in_stream, "x")
    add_one_graph = ir.create_graph(add_one, x)
    (y,) = ops.call(add_one_graph, x)
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

print(f"graph name: {add_one_graph.name}")
assert add_one_graph.name == "add_one_subgraph(0)"
assert [t.name for t in add_one_graph.inputs] == ["x"]
assert len(add_one_graph.outputs) == 1 and len(add_one_graph.constants) == 1

x_data = np.arange(4, dtype=np.float32).reshape(2, 2) / 4
with popxl.Session(ir, "ipu_model") as session:
    results = session.run({in_stream: x_data})

print(f"x = {x_data.tolist()}")
print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], x_data + 1)
print("basic_graph: OK")
