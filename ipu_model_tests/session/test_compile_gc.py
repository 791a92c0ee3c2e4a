"""Session construction pauses the cyclic garbage collector (ipuxl._gc):
afterwards the collector is in the state the caller left it in, also when
compiling fails, and the Session keeps working with what it kept."""
import gc

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def _program(n=1024):
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.arange(n, dtype=np.float32), name="v")
        s = popxl.d2h_stream((n,), popxl.float32, name="out")
        ops.host_store(s, v * 2.0 + 1.0)
    return ir, s


@pytest.fixture
def restore_gc():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_session_leaves_the_collector_as_it_found_it(restore_gc, enabled):
    (gc.enable if enabled else gc.disable)()
    ir, s = _program()
    with popxl.Session(ir, "ipu_model") as sess:
        assert gc.isenabled() is enabled
        out = sess.run()
    np.testing.assert_array_equal(out[s], np.arange(1024, dtype=np.float64) * 2 + 1)
    assert gc.isenabled() is enabled


def test_failed_compile_reenables_the_collector(restore_gc):
    gc.enable()
    ir, _ = _program(1 << 20)  # 4 MiB: more than one 624 KiB tile holds
    with pytest.raises(Exception, match="(?i)memory"):
        popxl.Session(ir, popxl.IpuModel(tiles_per_ipu=1))
    assert gc.isenabled()
