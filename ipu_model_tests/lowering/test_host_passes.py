"""Host passes: each is switchable by name, declines rather than rejects, and
never changes a result (checked against NumPy and against the unfused
program); describe() shows the faithful program."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.lowering import host_passes
from ipuxl.testing import HostPassChecker


def _store(t):
    s = popxl.d2h_stream(t.shape, t.dtype)
    ops.host_store(s, t)
    return s


def test_pass_selection_by_name(monkeypatch):
    names = host_passes.NAMES
    assert host_passes.enabled_passes("all") == names
    assert host_passes.enabled_passes("none") == ()
    assert host_passes.enabled_passes("-fuse_epilogues,-reshape_views") == tuple(
        n for n in names if n not in ("fuse_epilogues", "reshape_views"))
    assert host_passes.enabled_passes(["fold_transposes"]) == ("fold_transposes",)
    with pytest.raises(ValueError, match="unknown pass.*no_such_pass"):
        host_passes.enabled_passes("no_such_pass")
    with pytest.raises(ValueError, match="not both"):
        host_passes.enabled_passes("fold_transposes,-fuse_epilogues")
    monkeypatch.setenv("IPUXL_HOST_PASSES", "none")
    assert host_passes.enabled_passes() == ()
    monkeypatch.delenv("IPUXL_HOST_PASSES")
    monkeypatch.setenv("IPUXL_NO_FUSION", "1")
    assert host_passes.enabled_passes() == ()


def test_bias_made_after_the_matmul_is_not_dropped():
    # Issue 13, case 1: the epilogue fusion ran the GEMM where the matmul was,
    # before the bias existed, and z came back as x @ x.
    rng = np.random.default_rng(0)
    xv = rng.random((4, 4)).astype(np.float32)
    vv = rng.random(4).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xv)
        v = popxl.variable(vv)
        y = x @ x
        b = ops.negate(v)  # a bias, made after the matmul in the schedule
        z = y + b
        s = _store(z)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()[s]
        assert "epilogue" not in sess.engine.describe()
    np.testing.assert_allclose(got, xv @ xv - vv, rtol=1e-5, atol=1e-6)


def test_bias_written_between_matmul_and_add_declines_the_fusion():
    xv = np.eye(3, dtype=np.float32) * 2
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(xv)
        b = popxl.variable(np.ones(3, np.float32))
        y = x @ x
        ops.add_(x, 1.0)  # writes an operand of the matmul after it ran
        z = y + b
        s = _store(z)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()[s]
    np.testing.assert_allclose(got, xv @ xv + 1.0, rtol=1e-6)


def test_batched_product_with_a_bias_is_not_fused_and_runs():
    # Issue 13, case 2: a 1-D x batched matmul plus a bias was rejected at
    # Session creation ("a fused epilogue needs a single float32 product").
    rng = np.random.default_rng(1)
    a = rng.standard_normal(4).astype(np.float32)
    bm = rng.standard_normal((3, 4, 5)).astype(np.float32)
    c = rng.standard_normal(5).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        out = (popxl.variable(a) @ popxl.variable(bm)) + popxl.variable(c)
        s = _store(out)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()[s]
    np.testing.assert_allclose(got, np.matmul(a, bm) + c, rtol=1e-5, atol=1e-5)


def _mlp_training_step(batch=8):
    rng = np.random.default_rng(4)
    sizes = [20, 96, 80, 10]
    ws = [rng.standard_normal((i, o)).astype(np.float32) * 0.2 for i, o in zip(sizes, sizes[1:])]
    bs = [rng.standard_normal(o).astype(np.float32) * 0.1 for o in sizes[1:]]
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((batch, sizes[0]), popxl.float32, name="x")
        ls = popxl.h2d_stream((batch,), popxl.int32, name="labels")
        wv = [popxl.variable(w, name=f"w{i}") for i, w in enumerate(ws)]
        bv = [popxl.variable(b, name=f"b{i}") for i, b in enumerate(bs)]

        def forward(x, *params):
            h = x
            for i in range(3):
                h = h @ params[i] + params[3 + i]
                if i < 2:
                    h = ops.gelu(h)
            return h

        g = ir.create_graph(forward, popxl.TensorSpec((batch, sizes[0]), popxl.float32),
                            *[w.spec for w in wv], *[b.spec for b in bv])
        x = ops.host_load(xs)
        labels = ops.host_load(ls)
        info = ops.call_with_info(g, x, *wv, *bv)
        logits = info.outputs[0]
        probs = ops.softmax(logits, 1)
        loss, dlogits = ops.nll_loss_with_softmax_grad(probs, labels)
        gi = popxl.transforms.autodiff(g, grads_required=g.inputs[1:])
        grads = ops.call(gi.graph, dlogits, inputs_dict=gi.inputs_dict(info))
        for p, d in zip(wv + bv, grads):
            ops.scaled_add_(p, d, b=-0.1)
        out = _store(loss)
    feeds = {xs: rng.standard_normal((batch, sizes[0])).astype(np.float32),
             ls: rng.integers(0, 10, batch).astype(np.int32)}
    return ir, feeds, out, wv + bv


@pytest.mark.parametrize("batch", [8, 64])
def test_results_with_and_without_host_passes_agree(batch):
    results = {}
    for passes in ("all", "none"):
        ir, feeds, out, params = _mlp_training_step(batch)
        with popxl.Session(ir, "ipu_model", host_passes=passes) as sess:
            losses = [float(sess.run(feeds)[out]) for _ in range(3)]
            applied = sess._prog.host_passes
            weights = sess.get_tensors_data(params)
        results[passes] = (losses, [weights[p] for p in params])
        if passes == "all":
            assert applied["fuse_epilogues"] > 0 and applied["fold_updates"] > 0
        else:
            assert applied == {}
    for a, b in zip(results["all"][0], results["none"][0]):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    for a, b in zip(results["all"][1], results["none"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_check_mode_runs_both_programs_and_compares(monkeypatch):
    monkeypatch.setenv("IPUXL_CHECK_HOST_PASSES", "1")
    ir, feeds, out, _ = _mlp_training_step(8)
    with popxl.Session(ir, "ipu_model") as sess:
        assert isinstance(sess._host_pass_checker, HostPassChecker)
        for _ in range(2):
            sess.run(feeds)


def test_check_mode_catches_a_pass_that_changes_results(monkeypatch):
    # A deliberately wrong pass (doubles the learning rate of folded
    # updates): the check must notice.
    from ipuxl.lowering.host_passes import update_folding

    real = update_folding.run

    def broken(prog):
        n = real(prog)
        for g in prog.graphs:
            for e in prog.entries[g]:
                if e.attrs.get("epilogue") == "accumulate":
                    e.attrs["alpha"] *= 2
        return n

    monkeypatch.setattr(update_folding, "run", broken)
    monkeypatch.setenv("IPUXL_CHECK_HOST_PASSES", "1")
    ir, feeds, out, _ = _mlp_training_step(8)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(AssertionError, match="host passes changed a result"):
            sess.run(feeds)


def test_describe_shows_the_faithful_program_and_host_plan_on_request():
    ir, feeds, out, _ = _mlp_training_step(8)
    with popxl.Session(ir, "ipu_model") as sess:
        faithful = sess.engine.describe()
        host = sess.engine.describe(host=True)
    # PopXL's program: every op of the Ir, nothing fused.
    assert faithful.count("Execute(Gelu:") == 2
    assert faithful.count("Execute(ScaledAddLhsInplace:") == 6
    assert "MatMulInputGradUpdate" not in faithful and "Transpose" in faithful
    # The host plan: biases in the GEMMs, updates folded into them.
    def forward(text):
        return text.split("forward_subgraph(0):")[1].split("Function")[0]

    assert forward(faithful).count("Execute(Add:") == 3 and "Add" not in forward(host)
    assert host.count("ScaledAddLhsInplace") < 6
