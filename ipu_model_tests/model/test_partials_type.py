"""The matmul partials type (poplin's ``partialsType``) in the IPU model.

PopXL's ``ops.matmul`` takes ``partials_type`` (float16 or float32) and
otherwise the Ir's session option ``partialsTypeMatMuls`` when the op is
created (float by default); PopART's MatMulOpx passes it to poplin as
``partialsType``, and the gradient ops take the forward op's. In poplin a
float16 matmul with half partials keeps its partial sums in 2 bytes and
runs on ``Target::getFp16InFp16OutConvUnitsPerTile`` conv units (16 on
IPU2), one with float partials in 4 bytes on
``getFp16InFp32OutConvUnitsPerTile`` units (8 on IPU2: poplin's
``ConvPartial1x4SLIC_half_float_8_and_half_half_16`` vertex). Each unit
takes 16 float16 inputs (``getWeightsPerConvUnit``), and the
ConvPartial1x1Out inner loop spends 4 cycles per output element for float16
inputs whatever the partials, so a tile does 16 x 16 / 4 = 64 MACs a cycle
with half partials (the Mk2 datasheet's FP16.16 peak: 64 x 2 flop x 1472
tiles x 1.325 GHz = 250 TFLOPS) and 8 x 16 / 4 = 32 with float partials.
The expected figures below are derived from those numbers, not read from
the model.
"""
import math
import re

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir

MACS_PER_CYCLE = {"half": 16 * 16 // 4, "float": 8 * 16 // 4}  # IPU2, float16 inputs


def _matmul_ir(m, k, n, partials=None, option=None, dtype=popxl.float16):
    ir = popxl.Ir()
    if option is not None:
        ir._pb_ir.getSessionOptions().partialsTypeMatMuls = option
    with ir.main_graph:
        xs = popxl.h2d_stream((m, k), dtype, "x")
        ws = popxl.h2d_stream((k, n), dtype, "w")
        y = ops.matmul(ops.host_load(xs), ops.host_load(ws), partials_type=partials)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    return ir


def _matmul_op(p):
    o = p.ops
    (i,) = [i for i, c in enumerate(o["cost_class"]) if c == "matmul"]
    return {k: o[k][i] for k in ("vertex", "tiles", "temp_bytes", "plan", "compute_cycles")}


def _plan(op):
    g = re.match(r"tiles (\d+) = groups (\d+) x rows (\d+) x cols (\d+) x k (\d+)", op["plan"])
    assert g, op["plan"]
    return dict(zip(("tiles", "groups", "rows", "cols", "k"), map(int, g.groups())))


@pytest.mark.parametrize("option, arg, want", [
    (None, None, "float"),              # PopART's default
    ("", None, "float"),
    ("float", None, "float"),
    ("half", None, "float16"),          # the session option
    ("HALF", None, "float16"),          # any letter case, as PopART reads it
    ("half", popxl.float32, "float"),   # the op's own partials_type wins
    ("", popxl.float16, "float16"),
])
def test_the_partials_type_follows_popxl(option, arg, want):
    p = profile_ir(_matmul_ir(256, 512, 256, arg, option), "ipu2")
    assert _matmul_op(p)["vertex"] == f"poplin::ConvPartial1x1Out<float16,{want}>"


def test_the_session_option_applies_to_matmuls_created_after_it():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((64, 64), np.float16), name="x")
        ops.matmul(x, x)
        ir._pb_ir.getSessionOptions().partialsTypeMatMuls = "half"
        ops.matmul(x, x)
    p = profile_ir(ir, "ipu2")
    o = p.ops
    vs = [o["vertex"][i] for i, c in enumerate(o["cost_class"]) if c == "matmul"]
    assert sorted(vs) == sorted(["poplin::ConvPartial1x1Out<float16,float>",
                                 "poplin::ConvPartial1x1Out<float16,float16>"])


def test_an_invalid_partials_type_is_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((4, 4), np.float16), name="x")
        with pytest.raises(ValueError, match="must be float16 or float32"):
            ops.matmul(x, x, partials_type=popxl.int32)


def test_gradient_matmuls_take_the_forward_partials_type():
    # PopART's MatMulLhsGradOp / MatMulRhsGradOp copy the forward op's
    # partials type, whatever the session option says.
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().partialsTypeMatMuls = "float"
    with ir.main_graph:
        x = popxl.variable(np.zeros((128, 256), np.float16), name="x")
        w = popxl.variable(np.zeros((256, 128), np.float16), name="w")
        fwd = ir.create_graph(lambda a, b: ops.matmul(a, b, partials_type=popxl.float16), x, w)
        bwd = popxl.transforms.autodiff(fwd)
        info = ops.call_with_info(fwd, x, w)
        g = popxl.variable(np.zeros((128, 128), np.float16), name="g")
        ops.call(bwd.graph, g, inputs_dict=bwd.inputs_dict(info))
    p = profile_ir(ir, "ipu2")
    o = p.ops
    vs = [o["vertex"][i] for i, c in enumerate(o["cost_class"]) if c == "matmul"]
    assert vs == ["poplin::ConvPartial1x1Out<float16,float16>"] * 3


def test_float_inputs_keep_float_partials():
    # No conv units take float inputs to half partials: poplin plans float
    # AMP partials (ConvVertexType.cpp), so nothing changes.
    a = _matmul_op(profile_ir(_matmul_ir(256, 512, 256, dtype=popxl.float32), "ipu2"))
    b = _matmul_op(profile_ir(_matmul_ir(256, 512, 256, popxl.float16, dtype=popxl.float32),
                              "ipu2"))
    assert a == b
    assert a["vertex"] == "poplin::ConvPartial1x1Out<float32,float>"


def test_half_partials_double_the_float16_amp_rate():
    # One tile, so the plan cannot split: every MAC runs there.
    m, k, n = 6 * 256, 256, 256
    model = popxl.IpuModel(tiles_per_ipu=1, allow_out_of_memory=True)
    got = {pt: _matmul_op(profile_ir(_matmul_ir(m, k, n, dt), model))["compute_cycles"]
           for pt, dt in (("half", popxl.float16), ("float", popxl.float32))}
    macs = m * k * n
    for pt, cycles in got.items():
        ideal = macs / MACS_PER_CYCLE[pt]
        # No faster than the peak; vertex overheads (a few cycles per worker
        # and pass, the weight loads) within 5% here.
        assert ideal <= cycles <= 1.05 * ideal, (pt, cycles, ideal)
    assert 1.9 <= got["float"] / got["half"] <= 2.0


def test_half_partials_halve_the_partials_temporaries():
    # A long contraction on 16 tiles: the plan splits K over all of them,
    # and the op's temporaries are poplin's reduceTempBytes, each tile's
    # partial sums of its K share and the partials it receives to reduce
    # its share of the output (the operands are laid out by the plan, as
    # PopART lets a matmul create them, so each tile already holds its
    # pieces). N is one group of 16 columns for either unit count.
    m, k, n = 192, 8192, 16
    model = popxl.IpuModel(tiles_per_ipu=16, allow_out_of_memory=True)
    got = {pt: _matmul_op(profile_ir(_matmul_ir(m, k, n, dt), model))
           for pt, dt in (("half", popxl.float16), ("float", popxl.float32))}
    for pt, pb in (("half", 2), ("float", 4)):
        p = _plan(got[pt])
        assert p == dict(tiles=16, groups=1, rows=1, cols=1, k=16), got[pt]["plan"]
        partials = math.ceil(m / p["rows"]) * n * pb
        received = math.ceil(m * n / p["tiles"]) * p["k"] * pb
        assert got[pt]["temp_bytes"] == (partials + received) * p["tiles"]
    assert got["float"]["temp_bytes"] == 2 * got["half"]["temp_bytes"]
