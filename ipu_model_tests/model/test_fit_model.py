"""Layouts and temporaries the IPU model gives ops whose operands are much
larger than their output or than a tile: a ScatterReduce into a small
table from many updates (poplibs' multiUpdateAdd plan splits the lookups
over the updates' tiles), a matmul operand laid out by its plan (spread
over all the plan's tiles, as poplin's createWeights does), a matmul that
fits no single-pass plan (serial column steps), and remote buffers'
landing pads (live only during their load or store)."""
import math

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir

TILES, TILE_BYTES = 1472, 638976  # ipu2


def _op(p, cost_class):
    o = p.ops
    (i,) = [i for i, c in enumerate(o["cost_class"]) if c == cost_class]
    return {k: o[k][i] for k in ("name", "tiles", "temp_bytes", "plan")}


def _scatter_reduce_ir(n, buckets):
    ir = popxl.Ir()
    with ir.main_graph:
        ds = popxl.h2d_stream((n,), popxl.float32, "data")
        js = popxl.h2d_stream((n,), popxl.int32, "idx")
        y = ops.scatter_reduce(ops.host_load(ds), ops.host_load(js), "sum", axis_size=buckets)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    return ir, ds, js, ys


def test_scatter_reduce_into_a_small_table_spreads_its_temporaries():
    n, buckets = 256 * 1024, 64  # 1 MiB of float32 updates into a 256 B table
    ir, ds, js, ys = _scatter_reduce_ir(n, buckets)
    p = profile_ir(ir, "ipu2")
    assert p.fits
    op = _op(p, "scatter")
    upd_bytes, out_bytes = n * 4, buckets * 4
    # It runs on the updates' tiles, not on the output's one tile ...
    assert op["tiles"] > 1
    per_tile = op["temp_bytes"] / op["tiles"]
    # ... each holding an fp32 partial of the table and one reduction
    # stage's received partials: at most 1 + ceil(sqrt(tiles)) partials.
    assert out_bytes <= per_tile <= out_bytes * (1 + math.ceil(math.sqrt(TILES)))
    assert per_tile < upd_bytes / 100
    rng = np.random.default_rng(0)
    data = rng.standard_normal(n).astype(np.float32)
    idx = rng.integers(0, buckets, n).astype(np.int32)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({ds: data, js: idx})[ys]
    want = np.zeros(buckets, np.float64)
    np.add.at(want, idx, data.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)


def test_a_plan_created_operand_is_spread_over_the_plans_tiles():
    m, k, n = 2048, 1024, 4096  # w: 8 MiB of float16, 13x a tile
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((m, k), popxl.float16, "x")
        w = popxl.variable(np.zeros((k, n), np.float16), name="w")
        g = ir.create_graph(lambda a, b: a @ b, ops.host_load(xs), w)
        (y,) = ops.call(g, ops.host_load(xs), w)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    p = profile_ir(ir, "ipu2")
    op = _op(p, "matmul")
    t = p.tensors
    w_bytes = k * n * 2
    # The subgraph's parameter for w (nobody else lays it out).
    (i,) = [i for i, gr in enumerate(t["graph"]) if gr != "main" and t["bytes"][i] == w_bytes]
    # Every tile of the plan holds its share, no tile more than that.
    assert t["tiles"][i] == op["tiles"]
    assert t["bytes_per_tile"][i] <= math.ceil(w_bytes / 2 / op["tiles"]) * 2
    assert t["bytes_per_tile"][i] < TILE_BYTES // 4


def test_a_matmul_no_single_pass_plan_fits_takes_serial_steps():
    # GPT-J's LM head on one IPU: (12288 x 4096) @ (4096 x 12600) float16,
    # 100 MB and 103 MB operands and a 310 MB output.
    m, k, n = 12288, 4096, 12600
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((m, k), popxl.float16, "x")
        ws = popxl.h2d_stream((k, n), popxl.float16, "w")
        y = ops.host_load(xs) @ ops.host_load(ws)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    p = profile_ir(ir, popxl.IpuModel(allow_out_of_memory=True))
    op = _op(p, "matmul")
    assert "serial steps" in op["plan"]
    # Its temporaries keep within the available memory proportion (0.6).
    assert op["temp_bytes"] / op["tiles"] <= 0.6 * TILE_BYTES
