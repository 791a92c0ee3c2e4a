"""The host passes' rewrites (transposes folded into GEMMs, bias and GELU
epilogues, unread results skipped) and the results they keep."""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def test_transposes_read_only_by_matmuls_become_gemm_flags():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((6, 7)).astype(np.float32)
    c = rng.standard_normal((3, 7, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        ta, tb, tc = (popxl.variable(v, name=n) for v, n in ((a, "a"), (b, "b"), (c, "c")))
        r1 = ops.matmul(ta, ops.transpose(tb))               # a @ b.T (folded)
        r2 = ops.matmul(ops.transpose(ta), ta)               # a.T @ a (folded)
        r3 = ops.matmul(ops.transpose(tc, (0, 2, 1)), tc)    # batched c^T c (folded)
        bt = ops.transpose(tb)
        r4 = ops.matmul(ta, bt)
        r5 = bt + 1.0                                        # bt also read elsewhere: kept
        outs = []
        for t in (r1, r2, r3, r4, r5):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            outs.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
        text = sess.engine.describe(host=True)
    np.testing.assert_allclose(got[outs[0]], a @ b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[outs[1]], a.T @ a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[outs[2]], np.transpose(c, (0, 2, 1)) @ c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[outs[3]], a @ b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[outs[4]], b.T + 1.0, rtol=1e-6)
    assert text.count("Execute(Transpose") == 1


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def test_bias_and_gelu_fuse_into_the_matmul_and_keep_results():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((80, 96)).astype(np.float32)
    w = rng.standard_normal((96, 64)).astype(np.float32) * 0.2
    b = rng.standard_normal(64).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, popxl.float32, name="x")
        xt = ops.host_load(xs)
        wt, bt = popxl.variable(w, name="w"), popxl.variable(b, name="b")
        h1 = ops.gelu(xt @ wt + bt)                 # fused: bias + gelu
        h2 = bt + xt @ wt                           # fused: bias first, no gelu
        s3 = xt @ wt + bt                           # not fused into gelu: read twice
        h3 = ops.gelu(s3) + s3
        outs = []
        for t in (h1, h2, h3):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            outs.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({xs: x})
        text = sess.engine.describe(host=True)
    ref = x.astype(np.float64) @ w + b
    np.testing.assert_allclose(got[outs[0]], _gelu_tanh(ref), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[outs[1]], ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[outs[2]], _gelu_tanh(ref) + ref, rtol=2e-5, atol=2e-5)
    assert text.count("Execute(Gelu") == 1  # only the unfusable one runs on its own


def test_results_nobody_reads_are_not_computed():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xv, wv = popxl.variable(x, name="x"), popxl.variable(w, name="w")
        g = ir.create_graph(lambda a, b: ops.sum(a @ b), xv, wv)
        info = ops.call_with_info(g, xv, wv)
        gi = popxl.transforms.autodiff(g)
        one = popxl.constant(np.float32(1.0))
        dx, dw = ops.call(gi.graph, one, inputs_dict=gi.inputs_dict(info))  # dx unused
        s = popxl.d2h_stream(dw.shape, dw.dtype)
        ops.host_store(s, dw)
        unused = ops.exp(wv)  # dead in the main graph too
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()[s]
        text = sess.engine.describe(host=True)
    np.testing.assert_allclose(got, x.T @ np.ones((4, 3), np.float32), rtol=1e-5, atol=1e-5)
    bwd = text.split(f"Function {gi.graph.name}:")[1].split("Function ")[0]
    assert bwd.count("Execute(MatMul") == 1  # dW only; dX = G @ W^T is not run
    assert "Execute(Exp" not in text
    del unused
