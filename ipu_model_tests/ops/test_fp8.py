"""float8: the host conversions (popxl.fp8_utils) against a brute-force
oracle that enumerates every representable value, the device casts against
the host ones, fp8 streams and variables, and the pow2-scaled matmul and
conv against PyTorch."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.fp8_utils import (host_fp8_mse_scale, host_pow2scale_cast_from_fp8,
                             host_pow2scale_cast_to_fp8)
from harness import run_fn

FORMATS = {popxl.float8_143: (4, 3, 8), popxl.float8_152: (5, 2, 16)}
RNG = np.random.default_rng(3)


def _values(fmt):
    """Every byte's value from the format's definition (0x80 is NaN)."""
    e_bits, m_bits, bias = FORMATS[fmt]
    vals = []
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> m_bits) & ((1 << e_bits) - 1)
        m = b & ((1 << m_bits) - 1)
        v = m * 2.0 ** (1 - bias - m_bits) if e == 0 else (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)
        vals.append(s * v)
    vals[0x80] = np.nan
    return np.array(vals)


def _oracle(x, fmt, nan_on_overflow):
    """Nearest representable value (ties to the even byte), by search."""
    vals = _values(fmt)
    finite = [b for b in range(256) if b != 0x80]
    top = max(vals[b] for b in finite)
    out = []
    for v in x:
        if not np.isfinite(v):
            out.append(0x80)
            continue
        d = [abs(vals[b] - v) for b in finite]
        best = min(d)
        cands = [b for b, dd in zip(finite, d) if dd == best]
        b = min(cands, key=lambda c: (c & 1, c))  # even mantissa on a tie; +0 over -0
        if abs(v) > top and best > 0:
            # beyond the largest number: saturate, or NaN when rounding goes past it
            ulp = top - max(vals[c] for c in finite if vals[c] < top)
            if abs(v) >= top + ulp / 2 and nan_on_overflow:
                b = 0x80
        if b != 0x80 and vals[b] == 0:
            b = 0  # -0 is the NaN code: zeros of both signs are stored as +0
        out.append(b)
    return np.array(out, np.uint8)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("nan_on_overflow", [True, False])
def test_host_cast_matches_oracle(fmt, nan_on_overflow):
    top = np.nanmax(_values(fmt))
    x = np.concatenate([RNG.standard_normal(300) * top / 8, RNG.uniform(-2, 2, 200) * 2.0 ** -9,
                        [0.0, -0.0, top, -top, top * 1.03, top * 1.2, -top * 3, np.inf, -np.inf,
                         np.nan, 1e-30, -1e-30]])
    got = host_pow2scale_cast_to_fp8(x, fmt, 0, nan_on_overflow).view(np.uint8)
    np.testing.assert_array_equal(got, _oracle(x, fmt, nan_on_overflow))
    back = host_pow2scale_cast_from_fp8(host_pow2scale_cast_to_fp8(x, fmt, 3), popxl.float64, -3)
    ok = np.abs(x) < top / 8
    np.testing.assert_allclose(back[ok], x[ok], rtol=0.13, atol=2.0 ** -10)


def test_host_cast_known_bytes():
    assert host_pow2scale_cast_to_fp8(np.float32([0.75]), popxl.float8_143, -2, False) \
        .view(np.uint8)[0] == 0b00101100
    assert host_pow2scale_cast_to_fp8(np.float16([70000.0]), popxl.float8_152, 0, False) \
        .view(np.uint8)[0] == 0x80  # float16 overflow is inf, which is NaN
    assert host_pow2scale_cast_to_fp8(np.float32([70000.0]), popxl.float8_152, 0, False) \
        .view(np.uint8)[0] == 0x7F
    assert host_fp8_mse_scale(np.float32([2.0 ** -17, 57344]), popxl.float8_152)[1] == 0


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("src_dt", [np.float16, np.float32])
@pytest.mark.parametrize("scale", [-3, 0, 2])
def test_device_casts_match_host(fmt, src_dt, scale):
    x = (RNG.standard_normal((5, 7)) * 20).astype(src_dt)
    x[0, 0] = 1e4  # overflows: NaN on the device, as nan_on_overflow=True
    s = np.array(scale, np.int32)
    got = run_fn(lambda a, b: ops.pow2scale_cast_to_fp8(a, b, fmt), x, s)
    want = host_pow2scale_cast_to_fp8(x, fmt, scale, True)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    dt = popxl.dtypes.dtype.as_dtype(src_dt)
    back = run_fn(lambda a, b: ops.pow2scale_cast_from_fp8(
        ops.pow2scale_cast_to_fp8(a, b, fmt), ops.negate(b), dt), x, s)
    np.testing.assert_array_equal(back, host_pow2scale_cast_from_fp8(want, dt, -scale))
    unscaled = run_fn(lambda a: ops.cast(a, popxl.float32), want)
    np.testing.assert_array_equal(unscaled, host_pow2scale_cast_from_fp8(want, popxl.float32, 0))


def test_fp8_streams_variables_and_views():
    data = host_pow2scale_cast_to_fp8(RNG.random((4, 6)), popxl.float8_143, 1)
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable([[1.0, 2.0], [3.0, 4.0]], popxl.float8_152, log2_scale=1)
        s = popxl.h2d_stream((4, 6), popxl.float8_143)
        t = ops.host_load(s)
        y = ops.transpose(ops.slice(t, start=1, stop=3, axis=0))
        o = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(o, y)
        z = popxl.d2h_stream(v.shape, v.dtype)
        ops.host_store(z, ops.gather(v, popxl.constant(np.array([1, 0], np.int32))))
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run({s: data.view(np.uint8)})  # bytes as uint8, as PopXL accepts
        assert r[o].dtype == popxl.dtypes.np_dtype_float8_143
        np.testing.assert_array_equal(r[o], data[1:3].T)
        want = host_pow2scale_cast_to_fp8(np.array([[3.0, 4.0], [1.0, 2.0]]), popxl.float8_152, 1)
        np.testing.assert_array_equal(r[z], want)
        np.testing.assert_array_equal(sess.get_tensor_data(v), want[::-1])


@pytest.mark.parametrize("fa,fb", [(popxl.float8_143, popxl.float8_143),
                                   (popxl.float8_152, popxl.float8_143)])
def test_matmul_and_conv_pow2scaled(fa, fb):
    torch = pytest.importorskip("torch")
    a8 = host_pow2scale_cast_to_fp8(RNG.standard_normal((2, 3, 4)), fa)
    b8 = host_pow2scale_cast_to_fp8(RNG.standard_normal((4, 5)), fb)
    a, b = (host_pow2scale_cast_from_fp8(q, popxl.float64) for q in (a8, b8))
    got = run_fn(lambda x, y, s: ops.matmul_pow2scaled(x, y, s), a8, b8, np.array(-2, np.int32))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, (a @ b * 0.25).astype(np.float16), rtol=1e-3, atol=1e-3)
    x8 = host_pow2scale_cast_to_fp8(RNG.random((2, 3, 6, 6)), fa)
    w8 = host_pow2scale_cast_to_fp8(RNG.random((4, 3, 3, 3)), fb)
    x, w = (torch.tensor(host_pow2scale_cast_from_fp8(q, popxl.float32)) for q in (x8, w8))
    got = run_fn(lambda p, q, s: ops.conv_pow2scaled(p, q, s, padding=(1, 1, 1, 1)), x8, w8,
                 np.array(1, np.int32))
    want = torch.nn.functional.conv2d(x, w, padding=1).numpy() * 2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    with pytest.raises(Exception, match="log2 scale 40 is outside"):
        run_fn(lambda x, y, s: ops.matmul_pow2scaled(x, y, s), a8, b8, np.array(40, np.int32))


def test_fp8_errors():
    with popxl.Ir().main_graph:
        f = popxl.variable(np.zeros((2, 2), np.float32))
        q = popxl.variable(host_pow2scale_cast_to_fp8(np.zeros((2, 2)), popxl.float8_143),
                           popxl.float8_143)
        s = popxl.constant(0, popxl.int32)
        with pytest.raises(TypeError, match="Scaled matmul operands must be of dtype"):
            ops.matmul_pow2scaled(f, f, s)
        with pytest.raises(ValueError, match="must be a scalar tensor"):
            ops.matmul_pow2scaled(q, q, popxl.constant([1, 2], popxl.int32))
        with pytest.raises(TypeError, match="must be of type popxl.int32"):
            ops.pow2scale_cast_to_fp8(f, popxl.constant(0, popxl.int8), popxl.float8_143)
        with pytest.raises(TypeError, match="not supported for pow2scale_cast_to_fp8"):
            ops.pow2scale_cast_to_fp8(f, s, popxl.float16)
        with pytest.raises(TypeError, match="add|dtype"):
            ops.add(q, q)
        with pytest.raises(TypeError, match="explicit dtype"):
            popxl.constant(host_pow2scale_cast_to_fp8(np.zeros(2), popxl.float8_143))
