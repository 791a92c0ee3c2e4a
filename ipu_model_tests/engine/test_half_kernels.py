"""float16 elementwise, reduction, softmax and layer-norm kernels
(cpp/kernels/f16_block.hpp: blocks converted in bulk, float32 formulas) and
the float16 host fusions (bias / GELU epilogues, folded transposes).

Oracles: NumPy float32 arithmetic rounded to float16 (bit-exact for the
arithmetic ops, whose float16 result is one rounding of the float32 one),
float64 formulas within float16 rounding for the transcendental ones,
softmax, layer norm and their gradients, and the unfused program (the same
bits: a fused float16 chain rounds after each op). Every instruction-set
level and thread count must give the same bits (each in a fresh
interpreter).
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ipuxl import _core as core

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)

# Builds `results` (name -> float16 array) and `inputs`; shared by the
# in-process oracle checks and the per-level subprocesses.
_PROGRAM = """
import sys
import numpy as np
import ipuxl as popxl
import ipuxl.ops as ops
sys.path.insert(0, TESTS)
from grad_harness import grads_of

f16 = np.float16
rng = np.random.default_rng(7)
R, C = 96, 1000  # odd sizes: partial blocks and vector tails
x = rng.standard_normal((R, C)).astype(f16)
y = (rng.standard_normal((R, C)) * 3).astype(f16)
specials = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 65504, -65504, 6e-8, -6e-8, 1e-5,
                     300.0, -300.0, 11.0, -11.0], f16)
x.flat[:len(specials)] = specials
y.flat[5:5 + len(specials)] = specials
bias = rng.standard_normal(C).astype(f16)
inputs = {"x": x, "y": y, "bias": bias}

ir = popxl.Ir()
streams = {}
with ir.main_graph:
    tx, ty, tb = (popxl.variable(v, popxl.float16) for v in (x, y, bias))
    two = popxl.constant(np.array(2.5, f16))
    outs = {
        "add": tx + ty, "sub": tx - ty, "mul": tx * ty, "div": tx / ty,
        "add_scalar": tx + two, "scalar_div": two / tx, "add_row": tx + tb,
        "gelu": ops.gelu(tx), "relu": ops.relu(tx), "exp": ops.exp(tx), "tanh": ops.tanh(tx),
        "scaled_add": ops.scaled_add(tx, ty, 0.75, -1.5),
        "softmax": ops.softmax(tx, axis=1),
        "sum_rows": ops.sum(tx, axis=0),
    }
    for k, t in outs.items():
        s = popxl.d2h_stream(t.shape, t.dtype)
        ops.host_store(s, t)
        streams[k] = s
with popxl.Session(ir, "ipu_model") as sess:
    r = sess.run()
results = {k: r[s] for k, s in streams.items()}

# Gradients (GeluGrad, SoftmaxGrad, GroupNormGrad, ReduceSum of bias grads).
xs = (rng.standard_normal((64, 768)) * 2).astype(f16)
w = (1 + 0.1 * rng.standard_normal(768)).astype(f16)
b = (0.1 * rng.standard_normal(768)).astype(f16)
seed = [rng.standard_normal((64, 768)).astype(f16)]
inputs.update(xs=xs, w=w, b=b, seed=seed[0])
(o,), (g,) = grads_of(lambda t: ops.gelu(t), xs, seeds=seed)
results.update(gelu_fwd=o, gelu_grad=g)
(o,), (g,) = grads_of(lambda t: ops.softmax(t, axis=1), xs, seeds=seed)
results.update(softmax_fwd=o, softmax_grad=g)
(o,), (gx, gw, gb) = grads_of(lambda t, ww, bb: ops.layer_norm(t, ww, bb, 1e-5), xs, w, b,
                             seeds=seed)
results.update(ln_fwd=o, ln_dx=gx, ln_dw=gw, ln_db=gb)

# A float16 MLP layer with and without the host passes: y = gelu(a @ w1 + c),
# z = y @ w2^T (a transpose read by a matmul).
a = rng.standard_normal((200, 384)).astype(f16)
w1 = (rng.standard_normal((384, 520)) / 20).astype(f16)
w2 = (rng.standard_normal((136, 520)) / 20).astype(f16)
c = rng.standard_normal(520).astype(f16)
inputs.update(a=a, w1=w1, w2=w2, c=c)
def mlp(host_passes):
    ir = popxl.Ir()
    with ir.main_graph:
        ta, t1, t2, tc = (popxl.variable(v, popxl.float16) for v in (a, w1, w2, c))
        h = ops.gelu(ta @ t1 + tc)
        outs = {"mlp_h": h, "mlp_z": h @ ops.transpose(t2), "mlp_bias": ta @ t1 + tc}
        st = {}
        for k, t in outs.items():
            st[k] = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(st[k], t)
    with popxl.Session(ir, "ipu_model", host_passes=host_passes) as sess:
        rr = sess.run()
        plan = sess.engine.describe(host=True)
    return {k: rr[s] for k, s in st.items()}, plan
fused, plan = mlp("all")
unfused, _ = mlp("none")
results.update(fused)
results.update({k + "_unfused": v for k, v in unfused.items()})
host_plan = plan

# A float16 SGD update W += -0.01 * X^T @ G, folded into one accumulating GEMM.
wu = rng.standard_normal((384, 136)).astype(f16)
gu = rng.standard_normal((200, 136)).astype(f16)
inputs.update(wu=wu, gu=gu)
def sgd(host_passes):
    ir = popxl.Ir()
    with ir.main_graph:
        tw, ta, tg = (popxl.variable(v, popxl.float16) for v in (wu, a, gu))
        ops.scaled_add_(tw, ops.transpose(ta) @ tg, b=-0.01)
        st = popxl.d2h_stream(tw.shape, tw.dtype)
        ops.host_store(st, tw)
    with popxl.Session(ir, "ipu_model", host_passes=host_passes) as sess:
        rr = sess.run()
        plan = sess.engine.describe(host=True)
    return rr[st], plan
results["sgd"], update_plan = sgd("all")
results["sgd_unfused"], _ = sgd("none")
"""


def _hashes(**env_extra):
    env = dict(os.environ)
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("IPUXL_ISA", None)
    env.update(env_extra)
    code = (f"TESTS = {TESTS!r}\n" + textwrap.dedent(_PROGRAM) +
            "\nimport hashlib, json\nprint(json.dumps({k: hashlib.sha256(np.ascontiguousarray(v)"
            ".tobytes()).hexdigest() for k, v in results.items()}))\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def run():
    ns = {"TESTS": TESTS}
    exec(compile(textwrap.dedent(_PROGRAM), "half_kernels", "exec"), ns)  # noqa: S102
    return ns


def _bits(v):
    return np.asarray(v, np.float16).view(np.uint16)


def _same_bits(got, want):
    """Equal float16 bits, every NaN counted equal to every NaN."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = _bits(got)[~nan] != _bits(want)[~nan]
    assert not bad.any(), (got[~nan][bad][:8], want[~nan][bad][:8])


def _within_f16(got, want, ulps=1.0, atol=0.0):
    """got (float16) within `ulps` float16 units of the float64 `want`."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    with np.errstate(over="ignore"):
        fin = np.isfinite(want.astype(np.float16))  # beyond 65520: float16 infinity
    assert np.array_equal(np.isfinite(got), fin)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~fin], want.astype(np.float16)[~fin].astype(np.float64)) or \
        np.isnan(got[~fin]).any()
    unit = np.maximum(np.abs(want[fin]), 2.0 ** -14) * 2.0 ** -10
    err = np.abs(got[fin] - want[fin])
    atol = np.broadcast_to(atol, want.shape)[fin]
    assert np.all(err <= ulps * unit + atol), float(np.max((err - atol) / unit))


def test_arithmetic_is_one_rounding_of_float32(run):
    r, i = run["results"], run["inputs"]
    x, y, b = (i[k].astype(np.float32) for k in ("x", "y", "bias"))
    with np.errstate(all="ignore"):
        want = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y,
                "add_scalar": x + np.float32(2.5), "scalar_div": np.float32(2.5) / x,
                "add_row": x + b, "relu": np.where(np.isnan(x), x, np.maximum(x, 0)),
                "scaled_add": np.float32(0.75) * x + np.float32(-1.5) * y}
    for k, v in want.items():
        with np.errstate(over="ignore"):
            _same_bits(r[k], v.astype(np.float16))


def test_transcendental_ops_against_float64(run):
    r, i = run["results"], run["inputs"]
    x = i["x"].astype(np.float64)
    with np.errstate(all="ignore"):
        gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
        gelu[np.isneginf(x)] = np.nan  # the tanh form's -inf * 0
        want = {"gelu": gelu, "exp": np.exp(x), "tanh": np.tanh(x)}
    for k, v in want.items():
        _within_f16(r[k], v, ulps=1.0, atol=2.0 ** -24)


def test_softmax_layer_norm_and_gradients_against_float64(run):
    r, i = run["results"], run["inputs"]
    xs, w, b, g = (i[k].astype(np.float64) for k in ("xs", "w", "b", "seed"))
    e = np.exp(xs - xs.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    _within_f16(r["softmax_fwd"], sm, atol=2.0 ** -24)
    # The gradient of the float16 forward output y the kernel reads (its own
    # rounding is the forward's): g - s cancels, so float32's error of s
    # relative to |g| + |s|, then one rounding.
    y16 = r["softmax_fwd"].astype(np.float64)
    s = (g * y16).sum(1, keepdims=True)
    _within_f16(r["softmax_grad"], y16 * (g - s), ulps=1,
                atol=y16 * (np.abs(g) + np.abs(s)) * 2.0 ** -18 + 2.0 ** -24)
    # gelu'(x) of the tanh form
    k, a = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(k * (xs + a * xs ** 3))
    dgelu = 0.5 * (1 + t) + 0.5 * xs * (1 - t * t) * k * (1 + 3 * a * xs * xs)
    _within_f16(r["gelu_grad"], g * dgelu, ulps=2, atol=2.0 ** -20)
    mean = xs.mean(1, keepdims=True)
    inv = 1 / np.sqrt(xs.var(1, keepdims=True) + 1e-5)
    xh = (xs - mean) * inv
    _within_f16(r["ln_fwd"], xh * w + b, ulps=2, atol=2.0 ** -14)
    gw = g * w
    dx = inv * (gw - gw.mean(1, keepdims=True) - xh * (gw * xh).mean(1, keepdims=True))
    _within_f16(r["ln_dx"], dx, ulps=3, atol=2.0 ** -12)
    _within_f16(r["ln_dw"], (g * xh).sum(0), ulps=2, atol=2.0 ** -10)
    _within_f16(r["ln_db"], g.sum(0), ulps=1, atol=2.0 ** -12)
    x = i["x"].astype(np.float64)
    # Float16 inputs summed over 96 rows; one rounding of the (double) sum.
    _within_f16(r["sum_rows"], x.sum(0), ulps=1.0, atol=2.0 ** -14)


def test_fused_float16_chain_gives_the_unfused_bits(run):
    r = run["results"]
    for k in ("mlp_h", "mlp_z", "mlp_bias"):
        _same_bits(r[k], r[k + "_unfused"])
    i = run["inputs"]
    a, w1, c = (i[k].astype(np.float64) for k in ("a", "w1", "c"))
    p = a @ w1
    # The product rounded to float16, then the sum: one unit of each.
    _within_f16(r["mlp_bias"], p + c, ulps=1,
                atol=(np.abs(p) + 2.0 ** -14) * 2.0 ** -10 + 2.0 ** -24)


def test_folded_float16_update_gives_the_unfused_bits(run):
    r, i = run["results"], run["inputs"]
    plan = run["update_plan"]
    assert plan.count("Execute(MatMul") == 1 and "ScaledAdd" not in plan, plan
    assert "Transpose" not in plan, plan
    _same_bits(r["sgd"], r["sgd_unfused"])
    a, wu, gu = (i[k].astype(np.float32) for k in ("a", "wu", "gu"))
    # float32 oracle of the two roundings: the product, then the update.
    prod = (a.astype(np.float64).T @ gu.astype(np.float64)).astype(np.float16).astype(np.float32)
    want = (wu + np.float32(-0.01) * prod).astype(np.float16)
    # One unit of the result, and of the product (float32 and float64 sums may
    # round it to neighbouring float16 values) scaled by the step.
    close = np.abs(r["sgd"].astype(np.float32) - want.astype(np.float32)) <= \
        (np.abs(want.astype(np.float32)) + 0.01 * np.abs(prod)) * 2.0 ** -10 + 2.0 ** -24
    assert close.all()


def test_fusions_apply_to_float16(run):
    plan = run["host_plan"]
    # Three GEMMs left: the bias adds, the GELU and the transpose fused away.
    assert plan.count("Execute(MatMul") == 3, plan
    for k in ("Add", "Gelu", "Transpose"):
        assert f"Execute({k}" not in plan, plan


def test_every_level_and_thread_count_gives_the_same_bits():
    levels = core.isa_levels()
    runs = {(lv, n): _hashes(IPUXL_ISA=lv, IPUXL_NUM_THREADS=str(n))
            for lv, n in [(lv, 1) for lv in levels] + [(levels[-1], 2)]}
    first = next(iter(runs.values()))
    for key, r in runs.items():
        diff = [k for k in first if r[k] != first[k]]
        assert not diff, (key, diff)
