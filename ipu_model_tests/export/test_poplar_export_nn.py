"""``ipuxl export poplar`` of convolutions and pooling: training steps
exported, built against ipuxl's Poplar (``poplin::convolution``,
``calculateWeightDeltas``, ``popnn::pooling``), run, and compared with
``Session.run`` and with PyTorch (float64 autograd), an oracle apart from
both. Building needs a C++ compiler, so the round trips are marked slow.
"""
import re

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.export import export_poplar
from poplar_roundtrip import roundtrip

torch = pytest.importorskip("torch")
F = torch.nn.functional

LR = 0.05


def _close(got, want, what, rtol=1e-5, atol=1e-6):
    assert set(want) <= set(got), f"{what}: missing {sorted(set(want) - set(got))}"
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=f"{what} {k}")


def _tpad(x, pads):
    """ONNX pads [b1, b2, ..., e1, e2, ...] as F.pad's (last axis first) list."""
    n = len(pads) // 2
    tp = []
    for i in reversed(range(n)):
        tp += [pads[i], pads[n + i]]
    return F.pad(x, tp)


# (pool kind, pool kernel, stride, padding, ceil_mode); the second
# convolution is strided, padded unevenly, dilated and grouped
NETS = {
    "conv_relu": None,
    "max_pool": ("max", (2, 2), (1, 1), (0, 0, 0, 0), False),
    "avg_pool_ceil": ("avg", (3, 3), (2, 2), (1, 1, 1, 1), True),
}
X_SHAPE = (3, 2, 9, 8)


def _weights(net):
    rng = np.random.default_rng(21)
    w1 = rng.normal(0, 0.3, (4, 2, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.3, (6, 2, 2, 3)).astype(np.float32)
    return w1, w2


def _pool(h, spec, lib):
    if spec is None:
        return h
    kind, k, s, p, ceil = spec
    if lib == "torch":
        n = len(p) // 2
        assert all(p[i] == p[n + i] for i in range(n))  # torch pads symmetrically
        if kind == "max":
            return F.max_pool2d(h, k, stride=s, padding=p[:n], ceil_mode=ceil)
        return F.avg_pool2d(h, k, stride=s, padding=p[:n], ceil_mode=ceil, count_include_pad=False)
    fn = ops.max_pool if kind == "max" else ops.average_pool
    return fn(h, k, stride=s, padding=p, ceil_mode=ceil)


def _conv_net_ir(net):
    """One SGD step of loss = mean(conv2(pool(relu(conv1(x))))^2), the
    gradients from autodiff (Conv's ConvDataGrad / ConvWeightsGrad)."""
    spec = NETS[net]
    w1, w2 = _weights(net)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream(X_SHAPE, popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        v1 = popxl.variable(w1, name="w1")
        v2 = popxl.variable(w2, name="w2")

        def fwd(t, a, b):
            h = _pool(ops.relu(ops.conv(t, a, padding=(1, 1, 1, 1))), spec, "popxl")
            y = ops.conv(h, b, stride=(2, 1), padding=(1, 0, 0, 1), dilation=(1, 2), groups=2)
            return ops.mean(y * y)

        g = ir.create_graph(fwd, x, v1, v2)
        info = ops.call_with_info(g, x, v1, v2)
        loss = info.outputs[0]
        grad = transforms.autodiff(g, grads_required=list(g.inputs[1:]))
        seed = popxl.constant(np.ones((), np.float32), name="dloss")
        d1, d2 = ops.call(grad.graph, seed, inputs_dict=grad.inputs_dict(info))
        ops.scaled_add_(v1, d1, b=-LR)
        ops.scaled_add_(v2, d2, b=-LR)
        ls = popxl.d2h_stream(loss.shape, loss.dtype, name="loss")
        ops.host_store(ls, loss)
    return ir, xs, (v1, v2)


def _torch_step(net, x):
    spec = NETS[net]
    w1, w2 = (torch.tensor(w.astype(np.float64), requires_grad=True) for w in _weights(net))
    h = _pool(F.relu(F.conv2d(torch.tensor(x.astype(np.float64)), w1, padding=1)), spec, "torch")
    y = F.conv2d(_tpad(h, (1, 0, 0, 1)), w2, stride=(2, 1), dilation=(1, 2), groups=2)
    loss = (y * y).mean()
    loss.backward()
    return (loss.item(), (w1 - LR * w1.grad).detach().numpy(), (w2 - LR * w2.grad).detach().numpy())


@pytest.mark.slow
@pytest.mark.parametrize("net", list(NETS))
def test_conv_net_training_step(net, tmp_path):
    ir, xs, (v1, v2) = _conv_net_ir(net)
    x = np.random.default_rng(5).normal(size=X_SHAPE).astype(np.float32)
    got, got_w, want, want_w, src, summary = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "poplin::convolution(" in src and "poplin::calculateWeightDeltas(" in src
    assert "poplin::getGradientParams(" in src  # the input gradient of the second conv
    if NETS[net]:
        assert "popnn::pooling::pool(" in src and "popnn::pooling::poolInputGradient(" in src
    assert not summary["codelets"]  # every op through a PopLibs call
    _close(got, want, "loss")
    _close(got_w, want_w, "weight")
    loss, w1, w2 = _torch_step(net, x)
    np.testing.assert_allclose(got["loss"], loss, rtol=1e-5)
    np.testing.assert_allclose(got_w[v1.id], w1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w[v2.id], w2, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_conv_transpose_forward(tmp_path):
    """conv_transpose is a ConvDataGrad: strided, padded, output_padding."""
    rng = np.random.default_rng(8)
    w = rng.normal(0, 0.5, (3, 2, 3, 2)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((2, 3, 4, 5), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        y = ops.conv_transpose(x, popxl.variable(w, name="w"), stride=(2, 3), padding=(1, 0, 0, 1),
                               output_padding=(1, 2))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    xv = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: xv})
    assert "transposeAndFlipWeights" not in src and ", true, prog," in src
    _close(got, want, "y")
    ref = F.conv_transpose2d(torch.tensor(xv, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                             stride=(2, 3), output_padding=(1, 2))
    ref = ref[:, :, 1:, :ref.shape[3] - 1]  # ONNX pads (1, 0) begin, (0, 1) end
    np.testing.assert_allclose(got["y"], ref.numpy(), rtol=1e-5, atol=1e-6)


def test_float8_conv_is_refused(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((1, 1, 3, 3), np.float32), name="x")
        w = popxl.variable(np.ones((1, 1, 2, 2), np.float32), name="w")
        s = popxl.constant(0, popxl.int32)
        x8 = ops.pow2scale_cast_to_fp8(x, s, popxl.float8_143)
        w8 = ops.pow2scale_cast_to_fp8(w, s, popxl.float8_143)
        y = ops.conv_pow2scaled(x8, w8, s)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    with pytest.raises(NotImplementedError, match=r"Pow2ScaleThenCast|float8"):
        export_poplar(ir, str(tmp_path))


def test_dilated_pooling_is_refused(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((1, 1, 6, 6), np.float32), name="x")
        y = ops.max_pool(x, (2, 2), dilation=(2, 2))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    with pytest.raises(NotImplementedError, match=r"op MaxPool \(.*dilations"):
        export_poplar(ir, str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest, tmp_path):
    """TopK on a middle axis, with ties (equal values keep index order) and
    a NaN (larger than every number), against torch.topk."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((3, 9, 4), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        v, i = ops.topk(x, 4, axis=1, largest=largest, sorted=True)
        ops.host_store(popxl.d2h_stream(v.shape, v.dtype, name="v"), v)
        ops.host_store(popxl.d2h_stream(i.shape, i.dtype, name="i"), i)
    xv = np.random.default_rng(9).integers(-3, 4, size=(3, 9, 4)).astype(np.float32)  # many ties
    xv[1, 5, 2] = np.nan
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: xv})
    assert "popops::topKWithPermutation(" in src
    for k in ("v", "i"):
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    # torch.topk (stable=True via a stable sort: ties in index order)
    t = torch.tensor(xv)
    ref_v, ref_i = torch.sort(t, dim=1, descending=largest, stable=True)
    np.testing.assert_array_equal(got["v"], ref_v[:, :4].numpy())
    np.testing.assert_array_equal(got["i"], ref_i[:, :4].numpy().astype(np.int32))
    assert got["i"].dtype == np.int32


def _two_ipu_ir():
    rng = np.random.default_rng(12)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((4, 5), popxl.float32, name="x")
        w0 = popxl.variable(rng.normal(0, 0.5, (5, 6)).astype(np.float32), name="w0")
        w1 = popxl.variable(rng.normal(0, 0.5, (6, 3)).astype(np.float32), name="w1")
        with popxl.ipu(0):
            x = ops.host_load(xs, "x")
            h = ops.relu(x @ w0)
        h1 = h.copy_to_ipu(1)
        with popxl.ipu(1):
            y = ops.sum(h1 @ w1, axis=[1])
            ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, xs, rng


@pytest.mark.slow
def test_two_ipu_program_builds_each_op_on_its_ipu_graph(tmp_path):
    ir, xs, _ = _two_ipu_ir()
    x = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    got, got_w, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "NUM_IPUS = 2;" in (tmp_path / "exported" / "program.hpp").read_text()
    tiles = 1472  # the IPU model's tiles per IPU
    assert f"topGraph.createVirtualGraph(0, {tiles})" in src
    assert f"topGraph.createVirtualGraph({tiles}, {2 * tiles})" in src
    assert "poputil::cloneToIpu(graph," in src  # the copy between them, on the whole graph
    _close(got, want, "y")
    ref = (np.maximum(x @ got_w["w0"], 0) @ got_w["w1"]).sum(1)  # NumPy
    np.testing.assert_allclose(got["y"], ref, rtol=1e-5)


def test_single_ipu_program_uses_the_whole_graph(tmp_path):
    ir, _, _ = _conv_net_ir("conv_relu")
    export_poplar(ir, str(tmp_path))
    assert "createVirtualGraph(" not in (tmp_path / "program.cpp").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("stride", [1, 2])
def test_collectives_over_replica_groups(stride, tmp_path):
    """Four replicas in groups of two (consecutive, or strided), all-reduce
    and all-gather within each group, as gcl::CommGroup calls."""
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        rg = ir.replica_grouping(stride=stride, group_size=2)
        s = ops.collectives.replicated_all_reduce(x, op="add", group=rg)
        g = ops.collectives.replicated_all_gather(x * 2.0, group=rg)
        ops.host_store(popxl.d2h_stream(s.shape, s.dtype, name="s"), s)
        ops.host_store(popxl.d2h_stream(g.shape, g.dtype, name="g"), g)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) ** 1.5
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "gcl::CommGroup(gcl::CommGroupType::CONSECUTIVE, 2" in src
    _close(got, want, "s")
    _close(got, want, "g")
    groups = [[0, 1], [2, 3]] if stride == 1 else [[0, 2], [1, 3]]
    for grp in groups:  # NumPy
        for r in grp:
            np.testing.assert_allclose(got["s"][r], x[grp].sum(0), rtol=1e-6)
            np.testing.assert_allclose(got["g"][r].reshape(-1), (2 * x[grp]).reshape(-1), rtol=1e-6)


@pytest.mark.slow
def test_io_tile_copy_round_trip(tmp_path):
    """With numIOTiles: ops on the IO tiles, built on the IO tiles' virtual
    graph (tiles [0, 32)), an io_tile_copy to the compute tiles (a new
    variable with the model's mapping, and a Copy), the ops after it on the
    compute tiles' graph (tiles [32, tiles per IPU))."""
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph:
        xs = popxl.h2d_stream((4, 3), popxl.float32, name="x")
        with popxl.io_tiles():
            x = ops.host_load(xs, "x")
            x2 = x * 2.0
        y = ops.io_tile_copy(x2) + 1.0
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: xv})
    tiles = int(re.search(r"TILES_PER_IPU = (\d+)", open(tmp_path / "exported" / "program.hpp").read())[1])
    assert "topGraph.createVirtualGraph(0, 32);  // IPU 0's IO tiles" not in src  # (comment first)
    io = re.findall(r"// IPU 0's IO tiles\n\s*poplar::Graph graph = topGraph.createVirtualGraph\(0, 32\)", src)
    compute = re.findall(r"// IPU 0's compute tiles\n\s*poplar::Graph graph = "
                         rf"topGraph.createVirtualGraph\(32, {tiles}\)", src)
    assert len(io) >= 2 and len(compute) >= 2  # host_load, x * 2; the add, host_store
    _close(got, want, "y")
    np.testing.assert_allclose(got["y"], 2 * xv + 1)


@pytest.mark.slow
def test_accumulate_mean(tmp_path):
    """accumulate_mean_ (PopART's AccumulateOpx in mean mode) with a constant
    and with a tensor step, as one popops::mapInPlace each."""
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((5,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        a = popxl.variable(np.full(5, 2.0, np.float32), name="a")
        b = popxl.variable(np.full(5, -1.0, np.float32), name="b")
        step = popxl.variable(np.array(3.0, np.float32), name="step")
        ops.var_updates.accumulate_mean_(a, x, 1.0)
        ops.var_updates.accumulate_mean_(b, x, step)
    xv = np.arange(5, dtype=np.float32)
    got, got_w, want, want_w, src, _ = roundtrip(ir, tmp_path, inputs={xs: xv})
    _close(got_w, want_w, "weight")
    np.testing.assert_allclose(got_w["a"], (2.0 + xv) / 2, rtol=1e-6)
    np.testing.assert_allclose(got_w["b"], (3 * -1.0 + xv) / 4, rtol=1e-6)


@pytest.mark.slow
def test_topk_gradient_scatters(tmp_path):
    """The gradient of TopK is a Scatter into zeros at the indices
    (popops::groupedMultiUpdate); a training step of a weight through it."""
    rng = np.random.default_rng(14)
    w0 = rng.normal(size=(3, 7, 2)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((3, 3, 2), popxl.float32, name="c")
        c = ops.host_load(xs, "c")
        w = popxl.variable(w0, name="w")

        def fwd(a, cc):
            v, _ = ops.topk(a, 3, axis=1, largest=True, sorted=True)
            return ops.sum(v * cc)

        g = ir.create_graph(fwd, w, c)
        info = ops.call_with_info(g, w, c)
        grad = transforms.autodiff(g, grads_required=[g.inputs[0]])
        (dw,) = ops.call(grad.graph, popxl.constant(np.ones((), np.float32), name="dl"),
                         inputs_dict=grad.inputs_dict(info))
        ops.scaled_add_(w, dw, b=-0.5)
        ops.host_store(popxl.d2h_stream(dw.shape, dw.dtype, name="dw"), dw)
    cv = rng.normal(size=(3, 3, 2)).astype(np.float32)
    got, got_w, want, want_w, src, _ = roundtrip(ir, tmp_path, inputs={xs: cv})
    assert "popops::groupedMultiUpdate(" in src
    _close(got, want, "dw")
    _close(got_w, want_w, "weight")
    ref = np.zeros_like(w0)  # NumPy: c scattered to the top-3 positions along axis 1
    order = np.argsort(-w0, axis=1, kind="stable")[:, :3]
    np.put_along_axis(ref, order, cv, axis=1)
    np.testing.assert_array_equal(got["dw"], ref)


@pytest.mark.slow
@pytest.mark.parametrize("retrieval", ["one_per_group", "all_replicas"])
def test_variables_of_several_replica_groups(retrieval, tmp_path):
    """Four replicas, a variable with one value per group of two (host data
    (2, 3), as PopXL holds it): each replica starts from its group's row and
    adds its own input; the saved weights are the first replica of each
    group, or every replica's value for retrieval_mode="all_replicas", as
    Session.get_tensors_data returns them."""
    ir = popxl.Ir(replication=4)
    init = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], np.float32)
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        rg = ir.replica_grouping(group_size=2)  # groups {0, 1}, {2, 3}
        w = popxl.variable(init, name="w", replica_grouping=rg, retrieval_mode=retrieval)
        ops.var_updates.accumulate_(w, x)
        ops.host_store(popxl.d2h_stream(w.shape, w.dtype, name="y"), w + 0.0)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    got, got_w, want, want_w, _, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    per_replica = init[[0, 0, 1, 1]] + x  # NumPy
    np.testing.assert_array_equal(got["y"], per_replica)
    oracle = per_replica if retrieval == "all_replicas" else per_replica[[0, 2]]
    np.testing.assert_array_equal(got_w["w"], oracle)
    np.testing.assert_array_equal(got_w["w"], want_w["w"])
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.slow
def test_remote_variable_of_several_replica_groups(tmp_path):
    """As above for a remote variable (BERT's phased programs keep their
    per-group seed so): replica r's remote entry starts from its group's
    row, is loaded, has the replica's input added and is stored back; the
    saved value is the first replica of each group."""
    ir = popxl.Ir(replication=4)
    init = np.array([[1.0, 2.0], [-3.0, 0.25]], np.float32)
    with ir.main_graph:
        xs = popxl.h2d_stream((2,), popxl.float32, name="x")
        x = ops.host_load(xs, "x")
        rg = ir.replica_grouping(group_size=2)
        buf = popxl.remote_buffer((2,), popxl.float32, entries=1)
        w = popxl.remote_variable(init, buf, 0, name="w", replica_grouping=rg)
        v = ops.remote_load(buf, 0)
        v = v + x
        ops.remote_store(buf, 0, v)
        ops.host_store(popxl.d2h_stream(v.shape, v.dtype, name="y"), v)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    got, got_w, want, want_w, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "static const unsigned row[] = {0, 0, 1, 1};" in src
    per_replica = init[[0, 0, 1, 1]] + x  # NumPy
    np.testing.assert_array_equal(got["y"], per_replica)
    np.testing.assert_array_equal(got_w["remote/w"], per_replica[[0, 2]])
    np.testing.assert_array_equal(got_w["remote/w"], want_w["remote/w"])
