"""The IPU model with work on several IPUs of a replica: memory and cycles
per IPU, and ipu_copy as a global exchange over the IPU-Links."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import IpuModel, profile_ir


def _two_ipu_program(n0: int, n1: int, copy_elems: int):
    """A weight of n0 floats used on IPU 0, one of n1 floats on IPU 1, and
    a copy of ``copy_elems`` floats from IPU 0 to IPU 1."""
    ir = popxl.Ir()
    with ir.main_graph:
        w0 = popxl.variable(np.ones(n0, np.float32), name="w0")
        w1 = popxl.variable(np.ones(n1, np.float32), name="w1")
        xs = popxl.h2d_stream((copy_elems,), popxl.float32, "x")
        with popxl.ipu(0):
            x = ops.host_load(xs)
            s0 = ops.sum(w0) + x
        y = s0.copy_to_ipu(1)
        with popxl.ipu(1):
            z = y * ops.sum(w1)
            ops.host_store(popxl.d2h_stream(z.shape, z.dtype, "z"), z)
    return ir


def test_memory_per_ipu():
    ir = _two_ipu_program(400_000, 1000, 1024)
    prof = profile_ir(ir, "ipu2")
    assert prof.target["num_ipus"] == 2
    rows = prof.per_ipu()
    assert [r["ipu"] for r in rows] == [0, 1]
    # Each weight is on the IPU of the op that reads it.
    assert rows[0]["variables"] >= 400_000 * 4
    assert 1000 * 4 <= rows[1]["variables"] < 400_000 * 4
    # Per-IPU rows add up to the whole.
    for cat in prof.categories:
        assert sum(r[cat] for r in rows) == pytest.approx(prof.totals[cat], abs=len(rows))
    # Both IPUs run code (the control program) and work.
    assert rows[0]["code"] > 0 and rows[1]["code"] > 0
    assert rows[0]["cycles"] > 0 and rows[1]["cycles"] > 0
    # The copy's exchange code is global exchange code, on both IPUs.
    tpi = int(prof.target["tiles_per_ipu"])
    gx = prof.per_tile["globalExchangeCode"]
    assert gx[:tpi].sum() > 0 and gx[tpi:].sum() > 0


def test_copy_costs_the_ipu_link_bandwidth():
    small = profile_ir(_two_ipu_program(1000, 1000, 1024), "ipu2").ipu_copies()
    big = profile_ir(_two_ipu_program(1000, 1000, 1024 * 256), "ipu2").ipu_copies()
    assert len(small) == len(big) == 1
    s, b = small[0], big[0]
    assert (s["source"], s["destination"], s["bytes"]) == (0, 1, 4096)
    assert b["bytes"] == 4096 * 256 and b["executions"] == 1
    # 32 GB/s over the IPU-Links at 1.325 GHz: ~24.15 bytes per cycle.
    per_byte = (b["cycles"] - s["cycles"]) / (b["bytes"] - s["bytes"])
    assert per_byte == pytest.approx(1.325e9 / 32e9, rel=0.02)
    # Far slower than the same bytes over one IPU's exchange (4 B/cycle/tile).
    assert b["cycles"] > b["bytes"] / (1472 * 4)


def test_summary_lists_ipus_and_copies():
    prof = profile_ir(_two_ipu_program(1000, 1000, 64), "ipu2")
    text = prof.summary()
    assert "2 IPU(s)" in text and "busy cycles" in text
    assert "copies between IPUs: 1" in text and "ipu 0 -> 1: 1 copies" in text


def test_num_ipus_rounds_up_and_can_be_given():
    ir = popxl.Ir()
    with ir.main_graph:
        with popxl.ipu(0):
            a = popxl.variable(np.ones(4, np.float32)) + 1
        b = a.copy_to_ipu(2)
        with popxl.ipu(2):
            ops.host_store(popxl.d2h_stream(b.shape, b.dtype), b + 1)
    assert profile_ir(ir, "ipu2").target["num_ipus"] == 4  # 2 ** ceil(log2(3)), as PopXL
    assert len(profile_ir(ir, IpuModel("ipu2", num_ipus=8)).per_ipu()) == 8
    with pytest.raises(Exception, match="places work on 3 IPUs but num_ipus=2"):
        profile_ir(ir, IpuModel("ipu2", num_ipus=2))


def test_session_runs_and_profiles_two_ipus():
    ir = _two_ipu_program(100, 10, 8)
    (xs,) = [t for t in ir._streams if t.tensor_id == "x"] or [None]
    x = np.arange(8, dtype=np.float32)
    with popxl.Session(ir, "ipu_model") as s:
        got = list(s.run({xs: x}).values())[0]
        prof = s.profile()
    np.testing.assert_array_equal(got, (100 + x) * 10)
    assert prof.target["num_ipus"] == 2 and len(prof.ipu_copies()) == 1
