"""Call one two-input subgraph from two call sites with different weights.

Mirrors the PopXL user-guide program ``multi_callsites_of_a_graph.py``: the
graph is traced from ``add`` with the first weight only for its shape and
dtype; at each call site a different variable is bound to the input.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def add(x: popxl.Tensor, value: popxl.Tensor):
    return x + value


ir = popxl.Ir()
with ir.main_graph:
    in_stream = popxl.h2d_stream([2, 2], popxl.float32, name="x_stream")
    x = ops.host_load(in_stream, "x")
    v1 = popxl.variable(np.full(x.shape, 1.5, x.dtype.as_numpy()), name="v1")
    graph = ir.create_graph(add, x, v1)
    v2 = popxl.variable(np.full(x.shape, -4, x.dtype.as_numpy()), name="v2")
    (y,) = ops.call(graph, x, v1)
    (y,) = ops.call(graph, y, v2)
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

assert [t.name for t in graph.inputs] == ["x", "value"]

x_data = np.arange(4, dtype=np.float32).reshape(2, 2)
with popxl.Session(ir, "ipu_model") as session:
    results = session.run({in_stream: x_data})

print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], x_data + 1.5 - 4)
print("multi_callsites_of_a_graph: OK")
