"""One Python function, two graphs: input shapes decide the graph.

Mirrors the PopXL user-guide program ``create_multi_graphs_from_same_func.py``:
``matmul_fn`` is traced once with a (2, 2) weight and once with a (2,) weight,
giving two different subgraphs (with different names) that are called in turn.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def matmul_fn(x: popxl.Tensor, w: popxl.Tensor):
    return x @ w


ir = popxl.Ir()
with ir.main_graph:
    in_stream = popxl.h2d_stream([2, 2], popxl.float32, name="x_stream")
    x = ops.host_load(in_stream, "x")
    w_matrix = np.array([[1, 2], [3, 4]], dtype=np.float32)
    w_vector = np.array([0.5, -1], dtype=np.float32)
    w1 = popxl.variable(w_matrix, name="w1")
    w2 = popxl.variable(w_vector, name="w2")

    matrix_graph = ir.create_graph(matmul_fn, x, w1)
    vector_graph = ir.create_graph(matmul_fn, x, w2)

    (h,) = ops.call(matrix_graph, x, w1)
    (y,) = ops.call(vector_graph, h, w2)
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

print(f"graphs: {matrix_graph.name}, {vector_graph.name}")
assert matrix_graph.name == "matmul_fn_subgraph(0)"
assert vector_graph.name == "matmul_fn_subgraph(1)"
assert matrix_graph.outputs[0].shape == (2, 2)
assert vector_graph.outputs[0].shape == (2,)
assert y.shape == (2,)

x_data = np.array([[1, 0], [2, 1]], dtype=np.float32)
with popxl.Session(ir, "ipu_model") as session:
    results = session.run({in_stream: x_data})

expected = (x_data @ w_matrix) @ w_vector
print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], expected, rtol=1e-6)
print("create_multi_graphs_from_same_func: OK")
