"""Copies of views large enough to be split over the core's threads
(cpp/kernels/shape_common.hpp: from 256 KiB, by rows of the innermost
axis): transposes with a contiguous and with a strided innermost axis,
a reversed slice and float16, against NumPy, at one and two threads."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cases():
    rng = np.random.default_rng(21)
    x = rng.standard_normal((8, 128, 12, 64)).astype(np.float32)   # 3 MiB
    y = rng.standard_normal((300, 517)).astype(np.float32)
    h = rng.standard_normal((64, 33, 70)).astype(np.float16)
    ir = popxl.Ir()
    streams = {}
    with ir.main_graph:
        tx, ty, th = popxl.variable(x), popxl.variable(y), popxl.variable(h)
        outs = {"heads": ops.transpose(tx, (0, 2, 1, 3)),   # rows of 64 contiguous
                "last": ops.transpose(tx, (3, 1, 0, 2)),    # innermost axis strided
                "t2d": ops.transpose(ty),
                "rev": ty[::-1, 3:500:2],
                "half": ops.transpose(th, (2, 0, 1))}
        for k, t in outs.items():
            s = popxl.d2h_stream(t.shape, t.dtype, k)
            ops.host_store(s, t)
            streams[k] = s
    with popxl.Session(ir, "ipu_model") as sess:
        r = sess.run()
    want = {"heads": x.transpose(0, 2, 1, 3), "last": x.transpose(3, 1, 0, 2), "t2d": y.T,
            "rev": y[::-1, 3:500:2], "half": h.transpose(2, 0, 1)}
    return {k: (r[s], want[k]) for k, s in streams.items()}


def test_large_view_copies_match_numpy():
    for k, (got, want) in _cases().items():
        assert got.dtype == want.dtype and got.shape == want.shape, k
        assert np.array_equal(got, want), k


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_view_copies_at_each_thread_count(threads):
    env = dict(os.environ, IPUXL_NUM_THREADS=threads)
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    code = ("import sys; sys.path.insert(0, %r); import test_large_view_copies as t; "
            "t.test_large_view_copies_match_numpy(); print('ok')" % os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
