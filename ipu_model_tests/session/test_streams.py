"""Conformance of host streams (h2d_stream / d2h_stream) and host_load /
host_store at build time."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def test_properties_and_default_names():
    ir = popxl.Ir()
    with ir.main_graph:
        h = popxl.h2d_stream((2, 3), popxl.float16)
        d = popxl.d2h_stream([4], popxl.int32)
    assert isinstance(h, popxl.HostToDeviceStream) and isinstance(d, popxl.DeviceToHostStream)
    assert h.shape == (2, 3) and h.dtype == popxl.float16
    assert h.spec == popxl.TensorSpec((2, 3), popxl.float16)
    assert d.shape == (4,) and d.dtype == popxl.int32
    assert h.tensor_id == "h2d_stream" and d.tensor_id == "d2h_stream"
    assert str(h) == "HostToDeviceStream h2d_stream"
    assert str(d) == "DeviceToHostStream d2h_stream"


def test_names_unique_and_hashable():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.h2d_stream((1,), popxl.float32, "in")
        b = popxl.h2d_stream((1,), popxl.float32, "in")
    assert a.tensor_id == "in" and b.tensor_id != "in"
    assert a != b and a == a
    assert len({a, b, a}) == 2


def test_stream_created_in_subgraph_belongs_to_ir():
    ir = popxl.Ir()
    g = ir.create_empty_graph()
    with ir.main_graph, g:
        h = popxl.h2d_stream((2,), popxl.float32, "h")
        x = ops.host_load(h, "x")
        d = popxl.d2h_stream((2,), popxl.float32, "d")
        ops.host_store(d, x)
    assert x.graph == g
    assert ir.get_all_h2d_streams() == {h}
    assert ir.get_all_d2h_streams() == {d}


def test_host_load_output():
    ir = popxl.Ir()
    with ir.main_graph:
        h = popxl.h2d_stream((3, 1), popxl.uint8, "h")
        x = ops.host_load(h, "pixels")
        y = ops.host_load(h)
    assert x.shape == (3, 1) and x.dtype == popxl.uint8
    assert x.name.startswith("pixels")
    assert y.shape == h.shape


def test_host_load_needs_stream():
    with popxl.Ir().main_graph:
        d = popxl.d2h_stream((1,), popxl.float32)
        with pytest.raises(TypeError):
            ops.host_load(d)
        with pytest.raises(TypeError):
            ops.host_load("stream")


def test_host_store_checks():
    with popxl.Ir().main_graph:
        h = popxl.h2d_stream((2,), popxl.float32)
        d = popxl.d2h_stream((2,), popxl.float32)
        x = popxl.variable(np.zeros(2, np.float32))
        with pytest.raises(TypeError):
            ops.host_store(h, x)  # not a DeviceToHostStream
        with pytest.raises(ValueError):
            ops.host_store(d, popxl.variable(np.zeros(3, np.float32)))  # shape
        with pytest.raises(ValueError):
            ops.host_store(d, popxl.variable(np.zeros(2, np.int32)))  # dtype


def test_stream_of_other_ir():
    ir1, ir2 = popxl.Ir(), popxl.Ir()
    with ir1.main_graph:
        h = popxl.h2d_stream((1,), popxl.float32)
    with ir2.main_graph:
        with pytest.raises(ValueError):
            ops.host_load(h)


def test_streams_round_trip_dtypes():
    for dt in (popxl.float32, popxl.float16, popxl.int32, popxl.uint8, popxl.bool):
        ir = popxl.Ir()
        with ir.main_graph:
            h = popxl.h2d_stream((2, 2), dt, "h")
            d = popxl.d2h_stream((2, 2), dt, "d")
            ops.host_store(d, ops.host_load(h))
        data = (np.arange(4).reshape(2, 2) % 2).astype(dt.as_numpy())
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({h: data})[d]
        assert out.dtype == dt.as_numpy()
        np.testing.assert_array_equal(out, data)
