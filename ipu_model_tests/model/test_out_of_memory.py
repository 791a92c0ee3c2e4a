"""Out of memory at Session creation (Poplar fails the compile), the
IPUModel's run-anyway option, targets and multi-IPU placement."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import OutOfMemoryError, profile_ir


def big_ir(nelms=256 * 1024 * 1024):
    """A 1 GiB float32 variable on one IPU (the Mk2 has ~897 MiB)."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((4,), popxl.float32, name="x")
        big = popxl.variable(np.zeros((nelms,), np.float32), name="big")
        y = ops.host_load(xs) + big[:4]
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    return ir, xs, ys


@pytest.mark.slow  # models programs of gigabytes
def test_1gb_variable_does_not_fit():
    ir, _, _ = big_ir()
    with pytest.raises(OutOfMemoryError) as info:
        popxl.Session(ir, "ipu_model")
    e = info.value
    assert isinstance(e, MemoryError)
    msg = str(e)
    assert "Out of memory" in msg and "tile" in msg and "'big'" in msg and "variables" in msg
    assert e.categories["variables"] > 638976 - 4096
    assert e.tensors[0][0] == "big"
    assert not e.profile.fits


@pytest.mark.slow  # models programs of gigabytes
def test_ipu_hw_fallback_also_raises(monkeypatch):
    ir, _, _ = big_ir()
    monkeypatch.delenv("IPUXL_REQUIRE_IPU_HW", raising=False)
    with pytest.raises(OutOfMemoryError):
        popxl.Session(ir, "ipu_hw")


@pytest.mark.slow  # models programs of gigabytes
def test_run_anyway_and_report_the_overflow(capfd):
    ir, xs, ys = big_ir()
    s = popxl.Session(ir, popxl.IpuModel(allow_out_of_memory=True))
    assert "out of memory" in capfd.readouterr().err
    with s:
        out = s.run({xs: np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(out[ys], np.arange(4, dtype=np.float32))
    p = s.profile()
    assert not p.fits and p.overflow_tiles.size > 1000
    assert p.total_per_tile.max() > p.memory_per_tile
    assert "OUT OF MEMORY" in p.summary()


def test_run_anyway_from_the_environment(monkeypatch):
    ir, xs, ys = big_ir(nelms=64 * 1024)  # 256 KiB: too big for 4 tiles of 64 KiB
    monkeypatch.setenv("IPUXL_IPU_MODEL", "tiles_per_ipu=4,memory_per_tile=65536")
    with pytest.raises(OutOfMemoryError, match="4 tiles"):
        popxl.Session(ir, "ipu_model")
    monkeypatch.setenv("IPUXL_IPU_MODEL", "tiles_per_ipu=4,memory_per_tile=65536,allow_out_of_memory=1")
    with popxl.Session(ir, "ipu_model") as s:
        s.run({xs: np.zeros(4, np.float32)})
    assert not s.profile().fits


@pytest.mark.slow  # models programs of gigabytes
def test_cpu_device_has_no_tile_limit():
    ir, xs, ys = big_ir(nelms=64 * 1024 * 1024)
    s = popxl.Session(ir, "cpu")  # 256 MiB on "one tile": no limit
    p = s.profile()
    assert p.num_tiles == 1 and p.memory_per_tile == 0 and p.fits


@pytest.mark.parametrize("version,tiles,mem", [("ipu1", 1216, 256 * 1024), ("ipu2", 1472, 638976),
                                               ("ipu21", 1472, 638976)])
def test_targets(version, tiles, mem):
    ir, _, _ = big_ir(nelms=1024)
    p = profile_ir(ir, version)
    assert p.target["tiles_per_ipu"] == tiles and p.memory_per_tile == mem
    assert p.per_tile["variables"].size == tiles


def test_bow_is_faster_than_mk2_in_seconds():
    ir, _, _ = big_ir(nelms=1 << 20)
    assert profile_ir(ir, "ipu21").seconds < profile_ir(ir, "ipu2").seconds


def test_unknown_version():
    with pytest.raises(ValueError, match="version"):
        popxl.IpuModel(version="ipu3")


def test_placement_on_two_ipus():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, 256), popxl.float32, name="x")
        x = ops.host_load(xs)
        with popxl.ipu(0):
            w0 = popxl.variable(np.ones((256, 256), np.float32), name="w0")
            a = x @ w0
        with popxl.ipu(1):
            w1 = popxl.variable(np.ones((256, 256), np.float32), name="w1")
            b = a @ w1
        ys = popxl.d2h_stream(b.shape, b.dtype, name="y")
        ops.host_store(ys, b)
    p = profile_ir(ir, "ipu2")
    assert p.target["num_ipus"] == 2 and p.num_tiles == 2 * 1472
    v = p.per_tile["variables"]
    assert v[:1472].sum() == v[1472:].sum() == 256 * 256 * 4
    # Reading a tensor of IPU 0 on IPU 1 is a global exchange.
    assert p.totals["globalExchangeCode"] > 0
