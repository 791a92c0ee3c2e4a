"""Depth is bounded by memory, not by the C or Python stack: 10,000 nested
calls build, differentiate, compile and run (issue 13). bench/deep_calls.py
goes to 100,000 and prints time and memory per depth."""
import sys
import threading

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

DEPTH = 10_000


def _nested(depth):
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((3,), popxl.float32)
        g = ir.create_graph(lambda x: x * 1.5, spec)
        for _ in range(depth - 1):
            inner = g
            g = ir.create_graph(lambda x, inner=inner: ops.call(inner, x)[0] + 1.0, spec)
        x = popxl.variable(np.array([1.0, 2.0, -1.0], np.float32), name="x")
        info = ops.call_with_info(g, x)
        gi = popxl.transforms.autodiff(g)
        (dx,) = ops.call(gi.graph, popxl.constant(np.full(3, 2.0, np.float32)),
                         inputs_dict=gi.inputs_dict(info))
        streams = []
        for t in (info.outputs[0], dx):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    return ir, streams


@pytest.mark.slow  # builds and runs 10,000 nested calls
def test_ten_thousand_nested_calls_on_default_stacks():
    # The default recursion limit and a default-sized thread stack: nothing
    # may recurse per call level.
    assert sys.getrecursionlimit() <= 10_000
    result = {}

    def work():
        try:
            ir, (sy, sd) = _nested(DEPTH)
            # "cpu": 20,000 functions' control code does not fit one modelled
            # IPU (the "ipu_model" device says so at Session creation).
            with popxl.Session(ir, "cpu") as sess:
                result["out"] = sess.run()
                result["streams"] = (sy, sd)
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    t = threading.Thread(target=work)  # default thread stack (8 MiB or less)
    t.start()
    t.join()
    assert "error" not in result, repr(result.get("error"))
    sy, sd = result["streams"]
    x = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(result["out"][sy], x * 1.5 + (DEPTH - 1), rtol=1e-6)
    np.testing.assert_allclose(result["out"][sd], np.full(3, 3.0), rtol=1e-6)
