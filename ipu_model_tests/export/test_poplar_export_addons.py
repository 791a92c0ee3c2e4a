"""``ipuxl export poplar`` of popxl-addons' RotaryPosEmbed (+ its gradient)
and GroupQuantizeDecompress, LambSquare and Subsample: exported, built
against ipuxl's Poplar, run, and compared with ``Session.run`` and with a
float64 NumPy / PyTorch oracle. The round trips compile C++ (slow)."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.addons.ops.group_quantize_decompress import (group_quantize_compress_numpy,
                                                        group_quantize_decompress)
from ipuxl.addons.ops.rotary_pos_embed import rotary_pos_embed, trig_tables
from poplar_roundtrip import roundtrip

torch = pytest.importorskip("torch")


def _ir(inputs, fn):
    ir = popxl.Ir()
    with ir.main_graph:
        streams = [popxl.h2d_stream(s, dt, name=n) for n, (s, dt) in inputs.items()]
        y = fn(*[ops.host_load(s, s.tensor_id) for s in streams])
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, streams


def _rotate(x, sin, cos, r, inverse):
    """float64 oracle: complex multiplication by exp(+-i angle)."""
    x = x.astype(np.float64)
    z = x[..., 0:r:2] + 1j * x[..., 1:r:2]
    s, c = sin.astype(np.float64), cos.astype(np.float64)
    if s.ndim == 2:
        s, c = s[None], c[None]
    w = c[:, :, None, :] + (-1j if inverse else 1j) * s[:, :, None, :]
    out = x.copy()
    zr = z * w
    out[..., 0:r:2], out[..., 1:r:2] = zr.real, zr.imag
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("rotary_dim", [8, 4])
def test_rotary_pos_embed_and_grad_roundtrip(dt, rotary_dim, tmp_path):
    b, s, h, hh = 2, 5, 3, 8
    sin, cos = (a.astype(dt.as_numpy()) for a in trig_tables(s, rotary_dim))

    def fn(x, g):
        with popxl.in_sequence(True):
            sn, cs = popxl.constant(sin, dt, name="sin"), popxl.constant(cos, dt, name="cos")
            y = rotary_pos_embed(x, sn, cs, rotary_dim)
            # the gradient op (the adjoint rotation) applied to g, as autodiff emits it
            from ipuxl.op import create_op
            gx = create_op("RotaryPosEmbedGrad", [g, sn.reshape((1, s, rotary_dim // 2)),
                                                  cs.reshape((1, s, rotary_dim // 2))], ["gx"],
                           {"rotary_dim": rotary_dim}, name="rpe_grad").outputs[0]
            return ops.concat([y, gx], axis=0)

    ir, (xs, gs) = _ir({"x": ((b, s, h, hh), dt), "g": ((b, s, h, hh), dt)}, fn)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(b, s, h, hh)).astype(dt.as_numpy())
    g = rng.normal(size=(b, s, h, hh)).astype(dt.as_numpy())
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x, gs: g})
    assert src.count("ipuxl_export::rotaryPosEmbed(") == 2
    oracle = np.concatenate([_rotate(x, sin, cos, rotary_dim, False), _rotate(g, sin, cos, rotary_dim, True)])
    tol = dict(rtol=2e-3, atol=2e-3) if dt == popxl.float16 else dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["y"].astype(np.float64), oracle, **tol)
    np.testing.assert_allclose(got["y"].astype(np.float64), want["y"].astype(np.float64), **tol)
    # the elements past rotary_dim are copied exactly
    np.testing.assert_array_equal(got["y"][:b, ..., rotary_dim:], x[..., rotary_dim:])


@pytest.mark.slow
def test_group_quantize_decompress_roundtrip(tmp_path):
    rng = np.random.default_rng(6)
    w = rng.normal(size=(6, 32)).astype(np.float16)
    packed, scale, bias = group_quantize_compress_numpy(w, 8)

    def fn(t, sc, bi):
        return group_quantize_decompress(t, sc, bi)

    ir, (ts, ss, bs) = _ir({"t": (packed.shape, popxl.uint16), "s": (scale.shape, popxl.float16),
                            "b": (bias.shape, popxl.float16)}, fn)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={ts: packed, ss: scale, bs: bias})
    assert "ipuxl_export::groupQuantizeDecompress(" in src
    ids = np.stack([(packed.astype(np.int64) >> (12 - 4 * j)) & 15 for j in range(4)], -1)
    prod = (ids * scale.astype(np.float64)[..., None]).astype(np.float16)  # each step rounded
    oracle = (prod.astype(np.float64) + bias.astype(np.float64)[..., None]).astype(np.float16)
    np.testing.assert_array_equal(got["y"], oracle.reshape(6, -1))
    np.testing.assert_array_equal(got["y"], want["y"])
    assert np.max(np.abs(got["y"].astype(np.float32) - w)) < 0.2  # and it decompresses w


@pytest.mark.slow
def test_lamb_square_and_subsample_roundtrip(tmp_path):
    def fn(x):
        ls = ops.lamb_square(x)
        sub = ops.subsample(x, [2, 3])
        return ops.concat([ops.reshape(sub, (-1,)), ops.reshape(ls, (1,))], axis=0)

    ir, (xs,) = _ir({"x": ((5, 7), popxl.float32)}, fn)
    x = np.random.default_rng(8).normal(size=(5, 7)).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert ".subSample(2, 0).subSample(3, 1)" in src and "SQUARE_ADD" in src
    oracle = np.concatenate([x[::2, ::3].reshape(-1), [np.sum(x.astype(np.float64) ** 2)]]).astype(np.float32)
    np.testing.assert_allclose(got["y"], oracle, rtol=1e-6)
    np.testing.assert_array_equal(got["y"][:-1], want["y"][:-1])
    np.testing.assert_allclose(got["y"][-1], want["y"][-1], rtol=1e-6)


@pytest.mark.slow
def test_identical_inputs_all_reduce_and_its_gradient(tmp_path):
    """popxl-addons' tensor-parallel pair on two replicas: the identical-
    inputs all-reduce is an identity forward whose gradient all-reduces;
    autodiff of y = allreduce_identical_inputs(x) * w gives the gradient
    of x as the all-reduce of g * w over the group."""
    from ipuxl.addons.ops.replicated_strided_collectives import (
        replicated_all_reduce_strided_identical_inputs as identical_inputs)

    ir = popxl.Ir(replication=2)
    main = ir.main_graph
    with main:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        gs = popxl.h2d_stream((3,), popxl.float32, name="g")
        x, g = ops.host_load(xs, "x"), ops.host_load(gs, "g")
        w = popxl.variable(np.array([1.0, -2.0, 0.5], np.float32), name="w")
        fwd = ir.create_graph(lambda a, b: identical_inputs(a) * b, x, w)
        bwd = popxl.transforms.autodiff(fwd)
        info = ops.call_with_info(fwd, x, w)
        y = info.outputs[0]
        dx = ops.call(bwd.graph, g, inputs_dict=bwd.inputs_dict(info))[0]
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
        ops.host_store(popxl.d2h_stream(dx.shape, dx.dtype, name="dx"), dx)
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    g = rng.normal(size=(2, 3)).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x, gs: g})
    assert "gcl::allReduceCrossReplica(" in src
    wv = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(got["y"], x * wv, rtol=1e-6)                 # identity forward
    for r in range(2):
        np.testing.assert_allclose(got["dx"][r], (g * wv).sum(0), rtol=1e-6)  # all-reduced gradient
    np.testing.assert_allclose(got["dx"], want["dx"], rtol=1e-6)
