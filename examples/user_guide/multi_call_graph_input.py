"""Call one subgraph twice; its second input is created inside the function.

Mirrors the PopXL user-guide program ``multi_call_graph_input.py``: the graph
body exists once, and each call site binds its own tensor to the ``value``
input declared with ``popxl.graph_input``.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def add_value(x: popxl.Tensor):
    value = popxl.graph_input(x.shape, x.dtype, "value")
    return x + value


ir = popxl.Ir()
with ir.main_graph:
    in_stream = popxl.h2d_stream([2, 2], popxl.float32, name="x_stream")
    x = ops.host_load(in_stream, "x")
    graph = ir.create_graph(add_value, x)
    ones = popxl.variable(np.ones(x.shape, x.dtype.as_numpy()), name="ones")
    twos = popxl.variable(2 * np.ones(x.shape, x.dtype.as_numpy()), name="twos")
    (y,) = ops.call(graph, x, ones)
    (y,) = ops.call(graph, y, twos)
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

assert [t.name for t in graph.inputs] == ["x", "value"]

x_data = np.array([[0.25, -1], [3, 10]], dtype=np.float32)
with popxl.Session(ir, "ipu_model") as session:
    results = session.run({in_stream: x_data})

print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], x_data + 3)
print("multi_call_graph_input: OK")
