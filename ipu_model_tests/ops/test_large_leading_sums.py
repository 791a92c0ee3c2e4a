"""Large float32 sums split over the core's threads: sums and means over
the leading axis (bias gradients; cpp/kernels/reduce.cpp: each column
summed down the rows in double, so the float64 sum rounded once) and the
elementwise Sum of N tensors (gradient accumulation; cpp/kernels/sum.cpp:
((x0 + x1) + x2) + ... in float32, element by element), at one thread and
at two."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def check():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((1024, 3001)) * 100).astype(np.float32)
    y = rng.standard_normal((7, 130, 70)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        tx, ty = popxl.variable(x), popxl.variable(y)
        outs = {"sum": ops.sum(tx, axis=[0]), "mean": ops.mean(ty, axis=[0, 1])}
        streams = {}
        for k, t in outs.items():
            streams[k] = popxl.d2h_stream(t.shape, t.dtype, k)
            ops.host_store(streams[k], t)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    x64, y64 = x.astype(np.float64), y.astype(np.float64).reshape(7 * 130, 70)
    np.testing.assert_array_equal(r[streams["sum"]], x64.sum(axis=0).astype(np.float32))
    np.testing.assert_allclose(r[streams["mean"]], y64.mean(axis=0), rtol=1e-6, atol=1e-7)
    check_sum_n()


def check_sum_n():
    from ipuxl.ops.sum_n import sum_n

    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((300, 1001)).astype(np.float32) for _ in range(5)]
    ir = popxl.Ir()
    with ir.main_graph:
        ts = [popxl.variable(x) for x in xs]
        outs = {n: sum_n(ts[:n]) for n in (2, 3, 5)}
        streams = {}
        for n, t in outs.items():
            streams[n] = popxl.d2h_stream(t.shape, t.dtype, f"sum{n}")
            ops.host_store(streams[n], t)
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    for n in (2, 3, 5):
        want = xs[0].copy()
        for x in xs[1:n]:
            want = want + x  # float32, in order
        np.testing.assert_array_equal(r[streams[n]], want)


def test_leading_sums_match_float64():
    check()


@pytest.mark.parametrize("threads", ["1", "2"])
def test_leading_sums_at_each_thread_count(threads):
    env = dict(os.environ, IPUXL_NUM_THREADS=threads)
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_large_leading_sums as t; t.check()"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
