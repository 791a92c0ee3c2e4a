"""Host transfers inside a repeated graph.

Mirrors the PopXL user-guide program ``repeat_graph_2.py``: the repeated
graph loads a fresh ``x`` from a host stream and stores ``x @ W + b`` in every
iteration. With 8 iterations ``ir.num_host_transfers`` is 8, the input array
has shape (8, 2, 2) and the output comes back as (8, 2, 2), one row per
iteration.
"""
from typing import Optional

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

REPEAT_COUNT = 8
SHAPE = (2, 2)


class StreamedLinear(popxl.Module):
    def __init__(self, x_stream: popxl.HostToDeviceStream, y_stream: popxl.DeviceToHostStream):
        self.x_stream = x_stream
        self.y_stream = y_stream
        self.W: Optional[popxl.Tensor] = None
        self.b: Optional[popxl.Tensor] = None

    def build(self, x: popxl.Tensor, out_features: int) -> popxl.Tensor:
        # The loop-carried x is ignored: each iteration loads the next one.
        x = ops.host_load(self.x_stream, "x")
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        self.b = popxl.graph_input((out_features,), popxl.float32, "b")
        y = x @ self.W + self.b
        ops.host_store(self.y_stream, y)
        return y


ir = popxl.Ir()
with ir.main_graph:
    x_stream = popxl.h2d_stream(SHAPE, popxl.float32, name="x_stream")
    y_stream = popxl.d2h_stream(SHAPE, popxl.float32, name="y_stream")
    W_data = np.array([[1, -1], [0.5, 2]], np.float32)
    b_data = np.array([0.25, -3], np.float32)
    W = popxl.variable(W_data, name="W")
    b = popxl.variable(b_data, name="b")
    carried = ops.init(SHAPE, popxl.float32, "carried")
    linear = StreamedLinear(x_stream, y_stream)
    graph = ir.create_graph(linear, carried, out_features=2)
    (last,) = ops.repeat(graph, REPEAT_COUNT, carried, inputs_dict={linear.W: W, linear.b: b})

ir.num_host_transfers = REPEAT_COUNT

x_data = np.random.default_rng(2).standard_normal((REPEAT_COUNT,) + SHAPE).astype(np.float32)
with popxl.Session(ir, "ipu_model") as session:
    results = session.run({x_stream: x_data})

y_data = results[y_stream]
print(f"output shape = {y_data.shape}")
assert y_data.shape == (REPEAT_COUNT,) + SHAPE
for i in range(REPEAT_COUNT):
    np.testing.assert_allclose(y_data[i], x_data[i] @ W_data + b_data, rtol=1e-5, atol=1e-6)
print(f"y[0] = {y_data[0].tolist()}")
print("repeat_graph_2: OK")
