"""What the IPU model holds while softmax and layer normalisation run, and
when a Function's output aliased with its caller's tensor starts to hold
data, against what Poplar allocates (the figures are computed here from
shapes, dtypes and the tiles each op runs on):

* softmax: PopART's SoftmaxOpx is a cloneNcopy (the output) and
  popnn::nonLinearityInPlace on it, so its only temporaries are the row
  statistics (a max and an fp32 sum, 8 B per row) of the rows each tile's
  elements touch;
* layer norm: poplin::normWhiten makes x - mean in x's type (scaled in
  place; normalise's mul by gamma is the output), and the statistics (an
  fp32 sum and sum of squares, 8 B per group) of the groups each tile
  touches;
* an output that AliasZeroCopy aliases with the call site's tensor is
  written by the callee's last op: Poplar's liveness starts it there, not
  at the call;
* a Function called from two nesting levels (directly, and from a repeat
  body that has the same tensor as an aliased parameter) binds one
  storage at every site, so AliasZeroCopy aliases its parameter too."""
import math

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import profile_ir

F16 = popxl.float16


def _op(p, name):
    o = p.ops
    (i,) = [i for i, n in enumerate(o["name"]) if n == name]
    return {k: o[k][i] for k in ("name", "tiles", "temp_bytes")}


def _per_tile(rows, row_len, tiles, itemsize):
    """(elements on a full tile, rows they touch)."""
    n_t = math.ceil(rows * row_len / tiles)
    return n_t, min(rows, math.ceil(n_t / row_len) + 1)


def test_softmax_keeps_only_row_statistics_beside_its_output():
    rows, row_len = 512, 1024  # 1 MiB of float16
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((rows, row_len), F16, "x")
        y = ops.softmax(ops.gelu(ops.host_load(xs)), axis=1)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    p = profile_ir(ir, "ipu2")
    op = _op(p, "softmax")
    n_t, touched = _per_tile(rows, row_len, op["tiles"], 2)
    assert op["temp_bytes"] == op["tiles"] * touched * 8
    # Not a copy of the input (the output is the clone it works in).
    assert op["temp_bytes"] < rows * row_len * 2 / 16
    x = np.random.default_rng(0).standard_normal((rows, row_len)).astype(np.float16)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run({xs: x})[ys].astype(np.float64)
    g = x.astype(np.float64)
    g = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
    e = np.exp(g - g.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), atol=2e-3)


def test_layer_norm_holds_one_whitened_copy_and_its_groups_statistics():
    rows, hidden = 4096, 1024  # 8 MiB of float16
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((rows, hidden), F16, "x")
        gamma = popxl.variable(np.ones(hidden, np.float16), name="gamma")
        beta = popxl.variable(np.zeros(hidden, np.float16), name="beta")
        y = ops.layer_norm(ops.gelu(ops.host_load(xs)), gamma, beta)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    p = profile_ir(ir, "ipu2")
    (name,) = [n for n, c in zip(p.ops["name"], p.ops["cost_class"]) if c == "norm"]
    op = _op(p, name)
    n_t, touched = _per_tile(rows, hidden, op["tiles"], 2)
    # x - mean in float16 (2 B an element), 8 B of statistics per group.
    assert op["temp_bytes"] == op["tiles"] * (n_t * 2 + touched * 8)


def test_an_aliased_output_is_live_from_the_op_writing_it():
    shape = (1024, 1024)
    whole = 1024 * 1024 * 4
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(shape, popxl.float32, "x")
        x = ops.gelu(ops.host_load(xs))
        g = ir.create_graph(lambda t: ops.gelu(ops.gelu(t)) + 1.0, x)
        (y,) = ops.call(g, x)
        s = ops.sum(y)
        ss = popxl.d2h_stream(s.shape, s.dtype, "s")
        ops.host_store(ss, s)
    p = profile_ir(ir, "ipu2")
    labels = list(p.steps["label"])
    live = int(p.steps["live_bytes"][labels.index("call")])
    # Inside the call, at most two such tensors at once: the caller's x
    # (aliased with the callee's input, its last use the first gelu) with
    # the first gelu, then the first and second gelu, then the second and
    # the output (its 1.0 broadcast: at most 4 B on each tile). Counting
    # the output from the call, or x for the whole call, would make three.
    assert 2 * whole <= live <= 2 * whole + whole // 64
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs: np.full(shape, 0.5, np.float32)})[ss]

    def gelu(v):
        return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    want = (gelu(gelu(gelu(0.5))) + 1.0) * shape[0] * shape[1]
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_a_parameter_bound_through_nested_aliases_is_one_storage():
    shape = (1024, 1024)
    whole = 1024 * 1024 * 4
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(shape, popxl.float32, "x")
        w = ops.gelu(ops.host_load(xs))
        a = ir.create_graph(lambda t: ops.sum(t * 2.0), w)

        def body(acc, t):
            (s,) = ops.call(a, t)
            return acc + s

        b = ir.create_graph(body, popxl.constant(0.0, popxl.float32, name="acc0"), w)

        def outer(t):
            (s0,) = ops.call(a, t)
            (s1,) = ops.repeat(b, 3, s0, inputs_dict={b.inputs[1]: t})
            return s1

        (r,) = ops.call(ir.create_graph(outer, w), w)
        rs = popxl.d2h_stream(r.shape, r.dtype, "r")
        ops.host_store(rs, r)
    p = profile_ir(ir, "ipu2")
    # At most w and t * 2.0 (and scalars): a's parameter is w itself at
    # both of its call sites (outer's t, and the body's t aliased with it).
    assert max(p.steps["live_bytes"]) <= 2 * whole + whole // 64
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs: np.full(shape, 0.5, np.float32)})[rs]
    g = 0.5 * 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (0.5 + 0.044715 * 0.5 ** 3)))
    np.testing.assert_allclose(got, 4 * 2 * g * shape[0] * shape[1], rtol=1e-4)


def test_a_matmul_reads_an_operand_already_in_its_layout_in_place():
    # poplin rearranges a matmul input into its plan's layout only when it
    # differs ("these copies will be elided if the inputs already use the
    # expected memory layout and tile mapping", poplin/Convolution.cpp);
    # otherwise the AMP vertices are connected to the input where it lies
    # and Poplar exchanges onto each tile only the part of its piece that
    # other tiles hold. Two [1024, 256] x [256, 256] float16 matmuls on 16
    # tiles plan rows 4 x cols 4: the second's A (gelu of the first's
    # output, spread over the same 16 tiles) is in its layout already, as
    # is each weight (the op creates it), so both receive the same bytes.
    m, k, tiles = 1024, 256, 16
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((m, k), F16, "x")
        w1 = popxl.variable(np.full((k, k), 1 / 256, np.float16), name="w1")
        w2 = popxl.variable(np.full((k, k), 1 / 256, np.float16), name="w2")
        y = ops.matmul(ops.gelu(ops.matmul(ops.host_load(xs), w1)), w2)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    p = profile_ir(ir, popxl.IpuModel(tiles_per_ipu=tiles, allow_out_of_memory=True))
    first, second = _op(p, "matmul"), _op(p, "matmul_1")
    pm = pn = 4
    for op in (first, second):
        assert op["tiles"] == tiles
        assert p.ops["plan"][list(p.ops["name"]).index(op["name"])] == (
            f"tiles {tiles} = groups 1 x rows {pm} x cols {pn} x k 1")
    # Each tile: A's [m/pm, k] piece less the quarter it holds (its piece
    # is spread over the pn tiles of its row), B's [k, k/pn] piece less
    # the quarter it holds (spread over the pm tiles of its column); no
    # partials beside the output (K is not split).
    a_piece, b_piece = (m // pm) * k * 2, k * (k // pn) * 2
    per_tile = a_piece - a_piece // pn + b_piece - b_piece // pm
    assert first["temp_bytes"] == second["temp_bytes"] == tiles * per_tile
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float16)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run({xs: x})[ys].astype(np.float64)
    h = x.astype(np.float64) @ np.full((k, k), 1 / 256)
    g = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    np.testing.assert_allclose(got, g @ np.full((k, k), 1 / 256), atol=5e-3)
