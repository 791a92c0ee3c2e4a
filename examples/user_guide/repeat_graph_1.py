"""Repeat a Module's graph, binding its inner inputs with ``inputs_dict``.

Mirrors the PopXL user-guide program ``repeat_graph_1.py``: ``Linear.build``
creates the inputs ``W`` and ``b`` with ``graph_input`` and keeps them as
attributes, so the call site can bind them by key. ``x`` is carried between
the two iterations: ones @ ones + 1 = 3, then 3s @ ones + 1 = 7.
"""
from typing import Optional

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


class Linear(popxl.Module):
    def __init__(self):
        self.W: Optional[popxl.Tensor] = None
        self.b: Optional[popxl.Tensor] = None

    def build(self, x: popxl.Tensor, out_features: int, bias: bool = True) -> popxl.Tensor:
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        y = x @ self.W
        if bias:
            self.b = popxl.graph_input((out_features,), popxl.float32, "b")
            y = y + self.b
        return y


ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(np.ones([2, 2], np.float32), name="x")
    W = popxl.variable(np.ones([2, 2], np.float32), name="W")
    b = popxl.variable(np.ones([2], np.float32), name="b")
    linear = Linear()
    graph = ir.create_graph(linear, x, out_features=2)
    (y,) = ops.repeat(graph, 2, x, inputs_dict={linear.W: W, linear.b: b})
    out_stream = popxl.d2h_stream(y.shape, y.dtype, name="y_stream")
    ops.host_store(out_stream, y)

print(f"graph name: {graph.name}")
assert graph.name == "Linear_subgraph(0)"
assert [t.name for t in graph.inputs] == ["x", "W", "b"]

with popxl.Session(ir, "ipu_model") as session:
    results = session.run()

expected = np.ones([2, 2], np.float32)
for _ in range(2):
    expected = expected @ np.ones([2, 2], np.float32) + np.ones([2], np.float32)
print(f"y = {results[out_stream].tolist()}")
np.testing.assert_allclose(results[out_stream], expected)
np.testing.assert_allclose(results[out_stream], [[7, 7], [7, 7]])
print("repeat_graph_1: OK")
