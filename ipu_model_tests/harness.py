"""Test harness: run a function of ipuxl tensors on host arrays.

``run_fn(fn, *arrays)`` builds an Ir whose main graph loads each array from a
host stream, applies ``fn`` to the loaded tensors, stores every output to a
stream and runs it once on the ipu_model simulator. Results come back as
numpy arrays (a single array when ``fn`` returns one tensor). Use it to check
an op against NumPy or PyTorch; never against ipuxl itself.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def run_fn(fn, *arrays, device="ipu_model", as_variables=False):
    ir = popxl.Ir()
    with ir.main_graph:
        feeds = {}
        tensors = []
        for i, a in enumerate(arrays):
            a = np.asarray(a)
            dt = popxl.dtypes.dtype.as_dtype(a.dtype)
            if as_variables:
                tensors.append(popxl.variable(a, dt, name=f"in{i}", downcast=False))
            else:
                s = popxl.h2d_stream(a.shape, dt, name=f"in{i}")
                feeds[s] = a
                tensors.append(ops.host_load(s, f"in{i}"))
        result = fn(*tensors)
        single = isinstance(result, popxl.Tensor)
        outs = [result] if single else list(result)
        streams = []
        for j, t in enumerate(outs):
            s = popxl.d2h_stream(t.shape, t.dtype, name=f"out{j}")
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, device) as session:
        got = session.run(feeds)
    vals = [got[s] for s in streams]
    return vals[0] if single else vals
