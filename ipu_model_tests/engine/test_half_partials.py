"""float16 matmuls with half partials (cpp/core/hgemm.hpp).

Where the CPU has AVX512-FP16 at the avx512 level, a float16 product whose
partials type is half accumulates in float16: along K, each block of 256
products is summed by float16 fused multiply-adds in order of k (one
rounding to float16 per step), and the blocks' sums are added in float32.
The oracle is that contract written in NumPy: each step's a*b + c in
float64 (exact for these magnitudes) rounded once to float16. Every result
must match it bit for bit, at one thread and at two, through the kernel and
through PopXL programs (plain, batched with folded transposes, with a fused
bias, the folded SGD update and the gradients, which inherit the forward's
partials type as in PopART). Elsewhere half partials accumulate in float32:
those tests check the float32 product within float16 rounding instead.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import _core as core

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NATIVE = core.half_partials_native()
BLOCK = 256
f16 = np.float16


def emulate(a, b, block=BLOCK):
    """The float32 result of op(A) @ op(B) with float16 partials (the module
    docstring's contract), from float16 a [M, K] and b [K, N]."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    out = None
    for k0 in range(0, a.shape[1], block):
        acc = np.zeros((a.shape[0], b.shape[1]), f16)
        for k in range(k0, min(a.shape[1], k0 + block)):
            acc = (a[:, k, None] * b[None, k, :] + acc.astype(np.float64)).astype(f16)
        out = acc.astype(np.float32) if out is None else out + acc.astype(np.float32)
    if out is None:
        out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    return out


def same_bits(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape
    diff = x.view(np.uint16 if x.dtype == f16 else np.uint32) != \
        y.view(np.uint16 if y.dtype == f16 else np.uint32)
    return int(diff.sum())


def close_to_float_partials(got, a, b):
    """Within float16 rounding of the float64 product (float32 partials)."""
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 2.0 ** -10 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 1e-7
    return bool(np.all(np.abs(got.astype(np.float64) - ref) <= tol))


needs_native = pytest.mark.skipif(not NATIVE, reason="needs AVX512-FP16 at the avx512 level")

SHAPES = [(1, 1, 1), (13, 70, 5), (29, 129, 300), (15, 64, 64), (30, 190, 600), (3, 65, 257)]


@needs_native
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_kernel_matches_the_contract_bit_for_bit(ta, tb):
    rng = np.random.default_rng(3)
    for M, N, K in SHAPES:
        a = rng.standard_normal((M, K)).astype(f16)
        b = rng.standard_normal((K, N)).astype(f16)
        got = core._test_hgemm(ta, tb, np.ascontiguousarray(a.T) if ta else a,
                               np.ascontiguousarray(b.T) if tb else b)
        assert same_bits(got, emulate(a, b)) == 0, (M, N, K)


@needs_native
def test_kernel_bits_do_not_depend_on_the_thread_count():
    code = ("import numpy as np; from ipuxl import _core as c; r=np.random.default_rng(5); "
            "a=r.standard_normal((300,700)).astype(np.float16); "
            "b=r.standard_normal((700,450)).astype(np.float16); "
            "import hashlib; print(hashlib.sha1(c._test_hgemm(False,False,a,b).tobytes()).hexdigest())")
    env = dict(os.environ)
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = [subprocess.run([sys.executable, "-c", code], env=dict(env, IPUXL_NUM_THREADS=n),
                          capture_output=True, text=True, check=True).stdout for n in ("1", "2")]
    assert out[0] == out[1] and len(out[0]) > 20


def test_kernel_refuses_where_it_cannot_run():
    if NATIVE:
        with pytest.raises(ValueError, match="float16"):
            core._test_hgemm(False, False, np.zeros((2, 2), np.float32), np.zeros((2, 2), f16))
    else:
        with pytest.raises(ValueError, match="AVX512-FP16"):
            core._test_hgemm(False, False, np.zeros((2, 2), f16), np.zeros((2, 2), f16))


def _run(build):
    """Runs build() in a fresh main graph; returns {name: array}."""
    ir = popxl.Ir()
    streams = {}
    with ir.main_graph:
        for k, t in build(ir).items():
            s = popxl.d2h_stream(t.shape, t.dtype, k)
            ops.host_store(s, t)
            streams[k] = s
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    return {k: r[s] for k, s in streams.items()}


def _check(got, a, b):
    """float16 output of a product: the contract rounded to float16 where
    native, float32 partials within float16 rounding elsewhere."""
    if NATIVE:
        assert same_bits(got, emulate(a, b).astype(f16)) == 0
    else:
        assert close_to_float_partials(got, a, b)


def test_plain_batched_and_transposed_products():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((40, 520)).astype(f16)  # K over two blocks
    b = rng.standard_normal((520, 70)).astype(f16)
    q = rng.standard_normal((2, 3, 17, 24)).astype(f16)
    k = rng.standard_normal((2, 3, 19, 24)).astype(f16)

    def build(ir):
        ta, tb, tq, tk = (popxl.variable(v, popxl.float16) for v in (a, b, q, k))
        return {"plain": ops.matmul(ta, tb, partials_type=popxl.float16),
                "scores": ops.matmul(tq, ops.transpose(tk, (0, 1, 3, 2)),
                                     partials_type=popxl.float16)}

    r = _run(build)
    _check(r["plain"], a, b)
    for i in range(2):
        for j in range(3):
            _check(r["scores"][i, j], q[i, j], k[i, j].T)


def test_session_option_and_fused_bias():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((24, 300)).astype(f16)
    w = (rng.standard_normal((300, 40)) * 0.1).astype(f16)
    bias = rng.standard_normal(40).astype(f16)

    def build(ir):
        ir._pb_ir.getSessionOptions().partialsTypeMatMuls = "half"
        tx, tw, tb = (popxl.variable(v, popxl.float16) for v in (x, w, bias))
        return {"y": tx @ tw + tb}

    y = _run(build)["y"]
    if NATIVE:
        p = emulate(x, w).astype(f16)
        assert same_bits(y, (p.astype(np.float32) + bias.astype(np.float32)).astype(f16)) == 0
    else:
        assert close_to_float_partials(y - bias, x, w) or np.allclose(
            y, (x.astype(np.float32) @ w.astype(np.float32) + bias).astype(f16), rtol=4e-3,
            atol=4e-3)


def test_folded_update_and_gradients_inherit_half_partials():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((32, 48)).astype(f16)
    w0 = rng.standard_normal((48, 20)).astype(f16)
    g = rng.standard_normal((32, 20)).astype(f16)
    lr = 0.125

    ir = popxl.Ir()
    with ir.main_graph:
        sub = ir.create_graph(lambda t, v: ops.matmul(t, v, partials_type=popxl.float16),
                              popxl.TensorSpec(x.shape, popxl.float16),
                              popxl.TensorSpec(w0.shape, popxl.float16))
        import ipuxl.transforms as transforms

        bwd = transforms.autodiff(sub)
        tx = popxl.variable(x, popxl.float16)
        tw = popxl.variable(w0, popxl.float16)
        tg = popxl.variable(g, popxl.float16)
        info = ops.call_with_info(sub, tx, tw)
        acts = bwd.inputs_dict(info)
        dx, dw = ops.call(bwd.graph, tg, inputs_dict=acts)
        sx = popxl.d2h_stream(dx.shape, dx.dtype, "dx")
        ops.host_store(sx, dx)
        upd = ops.matmul(ops.transpose(tx), tg, partials_type=popxl.float16)
        ops.scaled_add_(tw, upd, b=-lr)  # folded into the product's GEMM
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
        w1 = sess.get_tensor_data(tw)
    _check(out[sx], g, w0.T)
    p = emulate(x.T, g).astype(f16) if NATIVE else None
    if NATIVE:
        want = (np.float32(1.0) * w0.astype(np.float32) +
                np.float32(-lr) * p.astype(np.float32)).astype(f16)
        assert same_bits(w1, want) == 0
    else:
        ref = w0.astype(np.float64) - lr * (x.astype(np.float64).T @ g.astype(np.float64))
        assert np.allclose(w1, ref, rtol=4e-3, atol=4e-3)
    del dw
