"""Shared fixtures of the bad-input catalogue (issue 13, item 6).

Every case is one bad or unusual input; it asserts PopXL's exception type and
that the message names the culprit (op, tensor, stream, option, file), or
checks the result against NumPy. docs/fuzzing.md describes the catalogue."""
from types import SimpleNamespace

import numpy as np
import pytest

import ipuxl as popxl


@pytest.fixture
def T():
    """A main graph holding a few named tensors of common shapes/dtypes."""
    ir = popxl.Ir()
    with ir.main_graph:
        yield SimpleNamespace(
            ir=ir,
            f=popxl.variable(np.ones((2, 3), np.float32), name="f"),
            g=popxl.variable(np.ones((3, 4), np.float32), name="g"),
            h=popxl.variable(np.ones((2, 3), np.float16), name="h"),
            i=popxl.variable(np.ones((2, 3), np.int32), name="i"),
            b=popxl.variable(np.ones((2, 3), bool), name="b"),
            s=popxl.variable(np.float32(1), name="s"),
            v=popxl.variable(np.ones(4, np.float32), name="v"),
            x4=popxl.variable(np.ones((1, 2, 4, 4), np.float32), name="x4"),
            idx=popxl.constant(np.array([0, 1], np.int32), name="idx"),
            fidx=popxl.constant(np.array([0.0, 1.0], np.float32), name="fidx"),
            u0=popxl.constant(np.array([0], np.uint32), name="u0"),
        )


def run_graph(fn, *arrays, **session_kw):
    """Builds ``fn(*variables)`` in the main graph, stores its result and
    runs it once; returns the result as a numpy array."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = [popxl.variable(a, name=f"a{k}", downcast=False) for k, a in enumerate(arrays)]
        y = fn(*xs)
        s = popxl.d2h_stream(y.shape, y.dtype, name="y")
        popxl.ops.host_store(s, y)
    with popxl.Session(ir, "ipu_model", **session_kw) as sess:
        return sess.run()[s]
