"""Code loads inside called graphs, and graphs passed to create_graph.

Mirrors the PopXL user-guide program ``code_loading_nested.py``: ``g2``
loads the code of ``g1`` when called; ``create_graph(load_graph, g1)``
passes a Graph (not a tensor) to the traced function, so each of ``g3`` /
``g4`` loads the code of the graph it was made with.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(np.float32(1), name="x")


def expensive_id(x: popxl.Tensor) -> popxl.Tensor:
    return x.T.T


g1 = ir.create_graph(expensive_id, x.spec)


def load_g1():
    ops.remote_code_load(g1, destination="executable")


g2 = ir.create_graph(load_g1)

with ir.main_graph, popxl.in_sequence():
    ops.remote_code_load(g1, destination="executable")
    ops.call(g2)
    (y,) = ops.call(g1, x)


def load_graph(g: popxl.Graph):
    ops.remote_code_load(g, destination="executable")


g3 = ir.create_graph(load_graph, g1)
g4 = ir.create_graph(load_graph, g2)
with ir.main_graph, popxl.in_sequence():
    ops.remote_code_load(g3, destination="executable")
    ops.call(g3)
    ops.remote_code_load(g4, destination="executable")
    ops.call(g4)
    out = popxl.d2h_stream(y.shape, y.dtype, name="y")
    ops.host_store(out, y)

with popxl.Session(ir, "ipu_model") as session:
    assert session.run()[out] == 1.0
loads = [op for g in (g2, g3, g4) for op in g.ops if op.type == "RemoteCodeLoad"]
print(f"code loads inside graphs: {len(loads)}")
print("code_loading_nested: OK")
