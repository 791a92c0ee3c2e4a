"""addons.InputStreams / OutputStreams: named h2d/d2h streams reached by
attribute, name or position, iterating over the streams; a round trip
through a Session checks them against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops


def test_access_and_iteration():
    ir = popxl.Ir()
    with ir.main_graph:
        ins = addons.InputStreams(x=((1, 4), popxl.float32), y=((4,), popxl.int32))
        outs = addons.OutputStreams(z=((2,), popxl.float16))
    assert isinstance(ins.x, popxl.HostToDeviceStream)
    assert ins.x.shape == (1, 4) and ins.x.dtype == popxl.float32
    assert ins.y.shape == (4,) and ins.y.dtype == popxl.int32
    assert ins[0] == ins.x and ins[1] == ins["y"] and ins[-1] == ins.y
    assert ins[0:2] == [ins.x, ins.y]
    assert list(ins) == [ins.x, ins.y]
    assert list(ins.keys()) == ["x", "y"]
    assert isinstance(outs.z, popxl.DeviceToHostStream) and list(outs) == [outs.z]
    with pytest.raises(AttributeError, match="Available Keys"):
        _ = ins.w
    with pytest.raises(KeyError):
        _ = ins["w"]
    again = addons.InputStreams.from_streams([ins.x, ins.y])
    assert list(again) == [ins.x, ins.y]
    assert list(again.keys()) == [ins.x.tensor_id, ins.y.tensor_id]


def test_session_round_trip():
    ir = popxl.Ir()
    with ir.main_graph:
        ins = addons.InputStreams(a=((2, 3), popxl.float32), b=((3,), popxl.float32))
        outs = addons.OutputStreams(c=((2, 3), popxl.float32))
        ops.host_store(outs.c, ops.host_load(ins.a) * ops.host_load(ins.b))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, -2, 0.5], np.float32)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run({ins.a: a, ins.b: b})
    np.testing.assert_allclose(got[outs.c], a * b)
