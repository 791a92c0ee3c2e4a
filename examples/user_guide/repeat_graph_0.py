"""Repeat a subgraph with a loop-carried value.

Mirrors the PopXL user-guide program ``repeat_graph_0.py``: ``ops.repeat``
runs ``add`` twice; output 0 is copied into input 0 between iterations while
input 1 (``value``) keeps its value. Starting from ones, two iterations give 3.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def add(x: popxl.Tensor, value: popxl.Tensor):
    return x + value


ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(np.ones([2, 2], np.float32), name="x")
    value = popxl.variable(np.ones(x.shape, x.dtype.as_numpy()), name="value")
    graph = ir.create_graph(add, x, value)
    (y,) = ops.repeat(graph, 2, x, value)
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

with popxl.Session(ir, "ipu_model") as session:
    results = session.run()
    x_after = session.get_tensor_data(x)

print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], [[3, 3], [3, 3]])
# repeat passes inputs by value: the variable x itself is unchanged.
np.testing.assert_allclose(x_after, np.ones([2, 2]))
print("repeat_graph_0: OK")
