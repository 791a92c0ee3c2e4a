"""Loading a graph's code from Streaming Memory before calling it.

Mirrors the PopXL user-guide program ``code_loading.py``: ``expensive_id``
(``x.T.T``) is a graph whose code ``ops.remote_code_load`` brings on chip
before the calls that use it; the code is live from the load to the last
call before the next load. The values are unchanged by code loading; the
IPU model counts the loaded code as not-always-live memory.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir

ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(np.arange(4, dtype=np.float32).reshape(2, 2), name="x")


def expensive_id(x: popxl.Tensor) -> popxl.Tensor:
    return x.T.T


g = ir.create_graph(expensive_id, x.spec)

with ir.main_graph, popxl.in_sequence():
    ops.remote_code_load(g, destination="executable")
    ops.call(g, x)
    ops.call(g, x)
    (y,) = ops.call(g, x)
    # Load again before each call: the code is dead between a call and the
    # next load.
    for _ in range(3):
        ops.remote_code_load(g, destination="executable")
        ops.call(g, x)
    out = popxl.d2h_stream(y.shape, y.dtype, name="y")
    ops.host_store(out, y)

with popxl.Session(ir, "ipu_model") as session:
    result = session.run()[out]
np.testing.assert_array_equal(result, np.arange(4, dtype=np.float32).reshape(2, 2))

profile = profile_ir(ir, "ipu2")
(graph,) = [gr for gr in profile.graphs if gr["code_loaded"]]
print(f"graph {graph['name']}: code loaded, {int(profile.loaded_code.sum()):,} B of code moved "
      "off the always-live memory")
print("code_loading: OK")
