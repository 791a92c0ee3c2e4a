"""ipuxl.export.onnx_model / ``ipuxl export onnx``: the inference program as
ONNX opset 11, checked with onnx.checker (inside onnx_model) and run in
onnxruntime, an independent implementation of every op, against
Session.run within float32 rounding."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs onnx (pip install 'ipuxl[export]')")
ort = pytest.importorskip("onnxruntime",
                          reason="running the exported model needs onnxruntime "
                                 "(pip install 'ipuxl[export]')")

import ipuxl as popxl  # noqa: E402
import ipuxl.ops as ops  # noqa: E402
from ipuxl.cli import main  # noqa: E402
from ipuxl.export import OPSET, onnx_model  # noqa: E402
from repo_modules import ROOT, load  # noqa: E402


def _ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def _session_run(ir, feeds):
    with popxl.Session(ir, "ipu_model") as s:
        return s.run(feeds)


def _node_types(model):
    return [n.op_type for n in model.graph.node]


def test_mnist_inference_graph():
    mnist = load("examples/mnist_popxl.py")
    ir, img, out, params = mnist.build_test_ir(8)
    rng = np.random.default_rng(1)
    # Weights as after training: not the initial ones, passed as Session.get_tensors_data gives.
    weights = {v: rng.normal(0, 0.1, v.shape).astype(np.float32) for v in params.values()}
    model = onnx_model(ir, weights=weights)
    assert model.opset_import[0].version == OPSET == 11
    assert {i.name for i in model.graph.initializer} >= {"W0", "b0", "W1", "b1"}
    assert [i.name for i in model.graph.input] == ["images"]
    assert [o.name for o in model.graph.output] == ["logits"]
    assert "MatMul" in _node_types(model) and "Tanh" in _node_types(model)  # gelu decomposed
    x = rng.random((8, 28, 28), dtype=np.float32)
    got = _ort_run(model, {"images": x})["logits"]
    with popxl.Session(ir, "ipu_model") as s:
        s.write_variables_data(weights)
        want = s.run({img: x})[out]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _transformer_block(seq=8, hidden=16, heads=2, seed=0):
    rng = np.random.default_rng(seed)
    dh = hidden // heads

    def w(*shape):
        return rng.normal(0, 0.2, shape).astype(np.float32)

    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((seq, hidden), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        g1, b1 = popxl.variable(1 + w(hidden), name="ln1_w"), popxl.variable(w(hidden), name="ln1_b")
        g2, b2 = popxl.variable(1 + w(hidden), name="ln2_w"), popxl.variable(w(hidden), name="ln2_b")
        wq, wk, wv, wo = (popxl.variable(w(hidden, hidden), name=n) for n in ("wq", "wk", "wv", "wo"))
        w1, c1 = popxl.variable(w(hidden, 4 * hidden), name="w1"), popxl.variable(w(4 * hidden), name="c1")
        w2, c2 = popxl.variable(w(4 * hidden, hidden), name="w2"), popxl.variable(w(hidden), name="c2")
        h = ops.layer_norm(x, g1, b1, eps=1e-5)

        def heads_of(t, perm):
            return ops.transpose(ops.reshape(t, (seq, heads, dh)), perm)

        q, k, v = heads_of(h @ wq, (1, 0, 2)), heads_of(h @ wk, (1, 2, 0)), heads_of(h @ wv, (1, 0, 2))
        scores = (q @ k) * popxl.constant(np.float32(1 / np.sqrt(dh)), name="scale")
        attn = ops.softmax(scores, axis=-1) @ v
        attn = ops.reshape(ops.transpose(attn, (1, 0, 2)), (seq, hidden)) @ wo
        x = x + attn
        m = ops.gelu(ops.layer_norm(x, g2, b2, eps=1e-5) @ w1 + c1) @ w2 + c2
        y = x + m
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    return ir, xs, ys


def test_transformer_block_forward():
    ir, xs, ys = _transformer_block()
    model = onnx_model(ir)
    types = set(_node_types(model))
    assert {"MatMul", "Softmax", "Transpose", "Reshape", "ReduceMean", "Tanh"} <= types
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
    x = np.random.default_rng(2).normal(size=(8, 16)).astype(np.float32)
    got = _ort_run(model, {"x": x})["y"]
    want = _session_run(ir, {xs: x})[ys]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_decompositions_inner_softmax_gelu_erf_group_norm():
    rng = np.random.default_rng(3)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((2, 4, 3, 5), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        w = popxl.variable(rng.normal(size=4).astype(np.float32), name="w")
        b = popxl.variable(rng.normal(size=4).astype(np.float32), name="b")
        y = ops.group_norm(ops.softmax(x, axis=1), w, b, num_groups=2, eps=1e-3)
        y = ops.geluerf(y)
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
        s = ops.sum(ops.exp(x), axis=[1, 3], keepdims=False)
        ss = popxl.d2h_stream(s.shape, s.dtype, name="s")
        ops.host_store(ss, s)
    model = onnx_model(ir)
    assert "Erf" in _node_types(model)
    x = rng.normal(size=(2, 4, 3, 5)).astype(np.float32)
    got = _ort_run(model, {"x": x})
    want = _session_run(ir, {xs: x})
    np.testing.assert_allclose(got["y"], want[ys], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["s"], want[ss], rtol=1e-5, atol=1e-6)


def test_inplace_on_activation_read_after():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        y = x * 2.0
        z = y + 0.0     # reads y before the in-place add
        y += 1.0        # AddLhsInplace writes y
        out = y * z     # reads the written y
        os_ = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(os_, out)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    got = _ort_run(onnx_model(ir), {"x": x})["out"]
    np.testing.assert_allclose(got, (2 * x + 1) * (2 * x), rtol=1e-6)
    np.testing.assert_allclose(got, _session_run(ir, {xs: x})[os_], rtol=1e-6)


def test_call_writing_a_by_ref_activation():
    def add_one_(t: popxl.TensorByRef):
        t += 1.0

    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((2,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        h = x * 3.0
        g = ir.create_graph(add_one_, h)
        ops.call(g, h)
        out = h * 2.0
        os_ = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(os_, out)
    x = np.array([1.0, 2.0], np.float32)
    got = _ort_run(onnx_model(ir), {"x": x})["out"]
    np.testing.assert_allclose(got, (3 * x + 1) * 2, rtol=1e-6)
    np.testing.assert_allclose(got, _session_run(ir, {xs: x})[os_], rtol=1e-6)


def test_variable_update_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.ones(2, np.float32), name="w")
        ops.scaled_add_(w, popxl.constant(np.ones(2, np.float32)), b=-0.1)
        ops.host_store(popxl.d2h_stream(w.shape, w.dtype, name="w_out"), w)
    with pytest.raises(NotImplementedError, match="updates variable 'w'"):
        onnx_model(ir)


def test_remote_buffer_refused(tmp_path, capsys):
    script = os.path.join(ROOT, "examples", "user_guide", "remote_variable.py")
    assert main(["export", "onnx", script, "--out", str(tmp_path / "m.onnx")]) == 1
    assert "op Remote" in capsys.readouterr().err


def test_training_step_refused_naming_the_op():
    mnist = load("examples/mnist_popxl.py")
    ir = mnist.build_train_ir(4, 0.1)[0]
    with pytest.raises(NotImplementedError, match=r"ONNX export: op \w+ \("):
        onnx_model(ir)


def test_repeat_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones(2, np.float32), name="a")
        g = ir.create_graph(lambda t: t + 1.0, a)
        (r,) = ops.repeat(g, 3, a)
        ops.host_store(popxl.d2h_stream(r.shape, r.dtype, name="r"), r)
    with pytest.raises(NotImplementedError, match="op Repeat"):
        onnx_model(ir)


def test_random_refused():
    ir = popxl.Ir()
    with ir.main_graph:
        seed = popxl.variable(np.array([1, 2], np.uint32), popxl.uint32, name="seed")
        r = ops.random_uniform(seed, (3,))
        ops.host_store(popxl.d2h_stream(r.shape, r.dtype, name="r"), r)
    with pytest.raises(NotImplementedError, match="op RandomUniform"):
        onnx_model(ir)


def test_cli_exports_the_scripts_session(tmp_path):
    out = tmp_path / "model.onnx"
    script = os.path.join(ROOT, "examples", "user_guide", "simple_addition.py")
    assert main(["export", "onnx", script, "--out", str(out)]) == 0
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    a, b = np.array([1.5], np.float32), np.array([2.25], np.float32)
    got = _ort_run(model, {"lhs_stream": a, "rhs_stream": b})["sum_stream"]
    np.testing.assert_array_equal(got, a + b)


def test_cli_exports_trained_mnist_test_session(tmp_path, capsys):
    """The example trains, then tests a second Session holding the trained
    weights; exporting that one (--session 2) gives a model whose accuracy
    on the same test batches in onnxruntime is the one the script printed."""
    mnist = load("examples/mnist_popxl.py")
    script = os.path.join(ROOT, "examples", "mnist_popxl.py")
    args = ["--dataset", "synthetic", "--limit-steps", "60", "--limit-test-steps", "3",
            "--no-progress"]
    out = tmp_path / "mnist.onnx"
    # The training Session (which ran most) is refused, with the hint.
    assert main(["export", "onnx", script, *args, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "op NlllWithSoftmaxGradDirect" in err and "--session N" in err
    assert main(["export", "onnx", "--session", "2", script, *args, "--out", str(out)]) == 0
    printed = [ln for ln in capsys.readouterr().out.splitlines() if "Accuracy on test set" in ln]
    model = onnx.load(str(out))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    _, test_data = mnist.get_data(mnist.parse_args(args))
    correct = seen = 0
    for images, labels in test_data:
        logits = sess.run(None, {"images": images.astype(np.float32)})[0]
        correct += int(np.sum(np.argmax(logits, axis=-1) == labels))
        seen += len(labels)
    assert printed == [f"Accuracy on test set: {100.0 * correct / seen:.2f}%"]
    assert correct > seen // 5  # trained weights, not the initial ones (chance is 1/10)


def test_cli_refusal_names_the_op(tmp_path, capsys):
    script = os.path.join(ROOT, "examples", "user_guide", "repeat_graph_0.py")
    assert main(["export", "onnx", script, "--out", str(tmp_path / "m.onnx")]) == 1
    assert "op Repeat" in capsys.readouterr().err


def test_gather_concat_slice_split_where_sum():
    """The indexing ops of an embedding-style model: gather with zero_OOR
    (an index out of range gives zeros, one negative), concat, slices with
    a positive and a negative step, split, where and n-ary sum; checked
    against NumPy and the Session."""
    rng = np.random.default_rng(5)
    table = rng.normal(size=(7, 4)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((3, 4), popxl.float32, name="x")
        ids = popxl.h2d_stream((2, 3), popxl.int32, name="ids")
        x, i = ops.host_load(xs, "x"), ops.host_load(ids, "ids")
        w = popxl.variable(table, name="table")
        g = ops.gather(w, i, zero_OOR=True)                      # (2, 3, 4)
        c = ops.concat([ops.reshape(g, (6, 4)), x], axis=0)       # (9, 4)
        s = c[1:8:3]                                              # rows 1, 4, 7
        r = ops.slice(c, start=8, stop=None, step=-2, axis=0)     # rows 8, 6, 4, 2, 0
        a, bb = ops.split(r, [2, 3], axis=0)
        y = ops.where(ops.greater(s, bb), s, bb)
        z = y + bb + s
        outs = {}
        for name, t in (("g", g), ("a", a), ("z", z)):
            st = popxl.d2h_stream(t.shape, t.dtype, name=name)
            ops.host_store(st, t)
            outs[name] = st
    model = onnx_model(ir)
    for typ in ("Gather", "Concat", "Slice", "Split", "Where"):
        assert typ in _node_types(model), typ
    x = rng.normal(size=(3, 4)).astype(np.float32)
    idx = np.array([[0, 6, 7], [-1, 3, 2]], np.int32)
    got = _ort_run(model, {"x": x, "ids": idx})
    want = _session_run(ir, {xs: x, ids: idx})
    valid = (idx >= 0) & (idx < 7)
    g_np = np.where(valid[..., None], table[np.clip(idx, 0, 6)], 0).astype(np.float32)
    c_np = np.concatenate([g_np.reshape(6, 4), x])
    s_np, r_np = c_np[1:8:3], c_np[8::-2]
    a_np, b_np = r_np[:2], r_np[2:]
    z_np = np.where(s_np > b_np, s_np, b_np) + b_np + s_np
    for name, ref in (("g", g_np), ("a", a_np), ("z", z_np)):
        np.testing.assert_allclose(got[name], ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[name], want[outs[name]], rtol=1e-6, atol=1e-6)
