"""``ipuxl export poplar`` of random ops: the exported program carries
the Session's generator (Philox4x32-10, poplar_random.py), so its float32
samples, dropout masks and derived seeds must equal ``Session.run`` bit
for bit. The samples are also checked against their distributions
(Kolmogorov-Smirnov against SciPy's CDFs, moments), an oracle apart from
both implementations. Building needs a C++ compiler: marked slow."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from poplar_roundtrip import roundtrip

stats = pytest.importorskip("scipy.stats")

N = 4099  # not a multiple of 4: the last Philox block is used in part


def _random_ir():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((6, 7), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        seed = popxl.variable(np.array([20261202, 44], np.uint32), popxl.uint32, name="seed")
        s0, s1, s2 = ops.split_random_seed(seed, 3)
        u = ops.random_uniform(s0, (N,), low=-2.0, high=3.0)
        z = ops.random_normal(s1, (N,), mean=0.5, std=2.0)
        d = ops.dropout(x, s2, 0.3)
        sd = ops.shaped_dropout(x, s1, (1, 7), 0.5)
        nxt = ops.create_random_seed(s2, popxl.constant(-3, popxl.int32))
        ops.var_updates.copy_var_update_(seed, nxt)  # a fresh seed for the next run
        for name, t in (("u", u), ("z", z), ("d", d), ("sd", sd), ("s0", s0)):
            ops.host_store(popxl.d2h_stream(t.shape, t.dtype, name=name), t)
    return ir, xs, seed


@pytest.mark.slow
def test_random_ops_bit_identical_to_session(tmp_path):
    ir, xs, seed = _random_ir()
    x = np.random.default_rng(2).normal(size=(6, 7)).astype(np.float32) + 4.0  # no zeros
    got, got_w, want, want_w, src, summary = roundtrip(ir, tmp_path, inputs={xs: x}, runs=2)
    assert {"PhiloxDraw", "PhiloxSeed"} <= set(summary["codelets"])
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    np.testing.assert_array_equal(got_w[seed.id], want_w[seed.id])
    assert not np.array_equal(got_w[seed.id], [20261202, 44])  # the seed moved on

    u, z, d, sd = got["u"], got["z"], got["d"], got["sd"]
    assert u.min() >= -2.0 and u.max() < 3.0
    assert stats.kstest(u, stats.uniform(-2.0, 5.0).cdf).pvalue > 1e-3
    assert stats.kstest(z, stats.norm(0.5, 2.0).cdf).pvalue > 1e-3
    assert abs(z.mean() - 0.5) < 4 * 2.0 / np.sqrt(N) and abs(z.std() - 2.0) < 0.1
    kept = d != 0
    np.testing.assert_allclose(d[kept], x[kept] / np.float32(0.7), rtol=1e-7)
    col = sd != 0  # whole columns kept or dropped together
    assert (col == col[:1]).all()
    np.testing.assert_allclose(sd[col], x[col] * 2.0, rtol=1e-7)
