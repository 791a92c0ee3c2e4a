"""Bulk float16 conversions (cpp/core/half.cpp) and the float16 matmul built
on them.

Oracles: NumPy's IEEE float16 (round to nearest even) for every non-NaN
value, the scalar rule of cpp/core/dtype.hpp for NaNs (float -> half: the
quiet NaN 0x7e00 with the sign; half -> float: the payload kept), and
float64 matmuls. Every instruction-set level the CPU has must give the same
bits, whatever the thread count (each level in a fresh interpreter).
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
from ipuxl import _core as core

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_PROGRAM = """
import hashlib, json
import numpy as np
import ipuxl as popxl
import ipuxl.ops as ops

def floats():
    rng = np.random.default_rng(11)
    edges = [0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 2.0 ** -24, 2.0 ** -25,
             2.0 ** -25 * 1.0000001, 2.0 ** -14, 2.0 ** -14 * (1 - 2 ** -11), 1e-45,
             np.inf, -np.inf, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11]
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    near = rng.uniform(-70000, 70000, 50_000).astype(np.float32)
    tiny = (rng.uniform(-1, 1, 50_000) * 2.0 ** -13).astype(np.float32)
    nans = np.array([0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff], np.uint32).view(np.float32)
    return np.concatenate([np.array(edges, np.float32), bits.view(np.float32), near, tiny,
                           nans, np.arange(-40000, 40000, 0.37, dtype=np.float32)])

x = floats()
h = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
rng = np.random.default_rng(3)
a = rng.standard_normal((3, 5, 37, 70)).astype(np.float16)
b = rng.standard_normal((3, 1, 70, 45)).astype(np.float16)
c = rng.standard_normal((300, 260)).astype(np.float16)
d = rng.standard_normal((260, 190)).astype(np.float16)
ir = popxl.Ir()
with ir.main_graph:
    outs = {}
    for name, v, f in [("to_half", x, lambda t: ops.cast(t, popxl.float16)),
                       ("to_float", h, lambda t: ops.cast(t, popxl.float32))]:
        t = f(popxl.variable(v))
        s = popxl.d2h_stream(t.shape, t.dtype)
        ops.host_store(s, t)
        outs[name] = s
    for name, (p, q) in {"batched": (a, b), "single": (c, d)}.items():
        t = popxl.variable(p) @ popxl.variable(q)
        s = popxl.d2h_stream(t.shape, t.dtype)
        ops.host_store(s, t)
        outs[name] = s
with popxl.Session(ir, "cpu") as sess:
    r = sess.run()
res = {k: r[s] for k, s in outs.items()}
print(json.dumps({k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
                  for k, v in res.items()}))
"""


def _run_program(**env_extra):
    env = dict(os.environ)
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("IPUXL_ISA", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_PROGRAM)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _in_process():
    ns = {}
    code = textwrap.dedent(_PROGRAM).split("print(json.dumps(")[0]
    exec(compile(code, "half_program", "exec"), ns)  # noqa: S102 - the test's own program
    return ns


def test_conversions_match_ieee_and_the_scalar_rule():
    ns = _in_process()
    x, h, res = ns["x"], ns["h"], ns["res"]
    got = res["to_half"].view(np.uint16)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    sign = (x[nan].view(np.uint32) >> 16).astype(np.uint16) & 0x8000
    np.testing.assert_array_equal(got[nan], sign | 0x7e00)
    back = res["to_float"]
    hn = np.isnan(h)
    np.testing.assert_array_equal(back[~hn].view(np.uint32), h[~hn].astype(np.float32).view(
        np.uint32))
    hb = h[hn].view(np.uint16).astype(np.uint32)
    want_nan = ((hb & 0x8000) << 16) | 0x7f800000 | ((hb & 0x3ff) << 13)
    np.testing.assert_array_equal(back[hn].view(np.uint32), want_nan)


def test_float16_matmul_against_float64():
    ns = _in_process()
    for name, (p, q) in {"batched": (ns["a"], ns["b"]), "single": (ns["c"], ns["d"])}.items():
        ref = np.matmul(p.astype(np.float64), q.astype(np.float64))
        got = ns["res"][name].astype(np.float64)
        # float32 partials, one rounding to float16: within a float16 unit
        # of the exact product, plus float32 rounding of the sums.
        tol = np.abs(ref) * 2.0 ** -10 + 1e-3
        assert np.all(np.abs(got - ref) <= tol), name


def test_every_level_and_thread_count_gives_the_same_bits():
    levels = core.isa_levels()
    runs = {(lv, n): _run_program(IPUXL_ISA=lv, IPUXL_NUM_THREADS=str(n))
            for lv, n in [(lv, 1) for lv in levels] + [(levels[-1], 2), (levels[-1], 3)]}
    first = next(iter(runs.values()))
    for key, r in runs.items():
        assert r == first, key
