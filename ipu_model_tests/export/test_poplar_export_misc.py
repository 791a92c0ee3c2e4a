"""``ipuxl export poplar`` of PrintTensor (``program::PrintTensor``),
BatchNormInference (``popops::map`` of the folded scale and shift),
Histogram (``popops::histogram``), ReduceMedian (``popops::topK``) and
TanhGrad and ReluGrad (``popnn::nonLinearityInputGradient``):
exported, built against ipuxl's Poplar, run, and compared with
``Session.run`` and a float64 NumPy / PyTorch oracle (slow: compiles C++)."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from poplar_roundtrip import roundtrip

torch = pytest.importorskip("torch")


def _ir(shape, dtype, fn):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(shape, dtype, name="x")
        y = fn(ops.host_load(xs, "x"))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir, xs


@pytest.mark.slow
def test_print_tensor_prints_and_passes_the_tensor_through(tmp_path):
    ir, xs = _ir((2, 3), popxl.float32, lambda x: ops.print_tensor(x, "probe") * 2.0)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert 'poplar::program::PrintTensor("probe", ' in src
    np.testing.assert_array_equal(got["y"], 2 * x)
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.slow
@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
def test_batch_norm_inference_roundtrip(dt, tmp_path):
    rng = np.random.default_rng(3)
    c = 4
    scale, bias, mean = (rng.normal(size=c).astype(dt.as_numpy()) for _ in range(3))
    var = (rng.random(c) + 0.5).astype(dt.as_numpy())

    def fn(x):
        consts = [popxl.constant(v, dt) for v in (scale, bias, mean, var)]
        return ops.batch_norm_inference(x, *consts, epsilon=1e-3)

    ir, xs = _ir((2, c, 3, 5), dt, fn)
    x = rng.normal(size=(2, c, 3, 5)).astype(dt.as_numpy())
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "ipuxl_export::batchNormInference(" in src
    oracle = torch.nn.functional.batch_norm(
        torch.tensor(x.astype(np.float64)), torch.tensor(mean.astype(np.float64)),
        torch.tensor(var.astype(np.float64)), torch.tensor(scale.astype(np.float64)),
        torch.tensor(bias.astype(np.float64)), training=False, eps=1e-3).numpy()
    tol = dict(rtol=2e-3, atol=4e-3) if dt == popxl.float16 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y"].astype(np.float64), oracle, **tol)
    np.testing.assert_allclose(got["y"].astype(np.float64), want["y"].astype(np.float64), **tol)


@pytest.mark.slow
@pytest.mark.parametrize("absolute", [False, True])
def test_histogram_roundtrip(absolute, tmp_path):
    levels = [-1.0, 0.0, 0.5, 2.0]
    ir, xs = _ir((7, 9), popxl.float32, lambda x: ops.histogram(x, levels, absolute))
    x = np.random.default_rng(5).normal(size=(7, 9)).astype(np.float32)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, 0.5, -1.0  # NaN: last bin; values on an edge: the upper bin
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "popops::histogram(" in src
    v = np.abs(x) if absolute else x
    edges = np.array(levels)
    oracle = np.array([np.sum(v < edges[0])] +
                      [np.sum((v >= edges[i - 1]) & (v < edges[i])) for i in range(1, len(edges))] +
                      [np.sum(~(v < edges[-1]))], np.uint32)
    np.testing.assert_array_equal(got["y"], oracle)
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.slow
@pytest.mark.parametrize("axes,keep", [([1], False), ([0, 2], True)])
def test_reduce_median_roundtrip(axes, keep, tmp_path):
    ir, xs = _ir((4, 6, 3), popxl.float32, lambda x: ops.median(x, axes, keep))
    x = np.random.default_rng(9).normal(size=(4, 6, 3)).astype(np.float32)
    x[3, 2, 1] = np.nan  # its group's median is NaN
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "popops::topK(" in src
    t = torch.tensor(x.astype(np.float64))
    moved = t.permute([d for d in range(3) if d not in axes] + axes).reshape(
        [x.shape[d] for d in range(3) if d not in axes] + [-1])
    oracle = torch.median(moved, dim=-1).values.numpy()  # the lower middle; NaN if any
    if keep:
        oracle = oracle.reshape([1 if d in axes else x.shape[d] for d in range(3)])
    np.testing.assert_array_equal(got["y"], oracle.astype(np.float32))
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mean", "max"])
def test_all_reduce_across_ipus_roundtrip(op, tmp_path):
    """ops.collectives.all_reduce of tensors on IPUs 0 and 1 of one
    replica: every output, on its input's IPU, is the reduction of both."""
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((2, 3), popxl.float32, name="x")
        with popxl.ipu(0):
            a = ops.host_load(xs, "x") * 1.5
        with popxl.ipu(1):
            b = popxl.variable(np.array([[1.0, -2.0, 4.0], [0.5, 8.0, -1.0]], np.float32), name="b") + 0.0
        ra, rb = ops.collectives.all_reduce([a, b], ipus=[0, 1], op=op)
        with popxl.ipu(0):
            ops.host_store(popxl.d2h_stream(ra.shape, ra.dtype, name="ya"), ra)
        with popxl.ipu(1):
            ops.host_store(popxl.d2h_stream(rb.shape, rb.dtype, name="yb"), rb)
    x = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert src.count("popops::reduceWithOutput(graph, poplar::concat(") == 2
    # each output on its input's IPU, the other input copied there
    assert '"all_reduce/in1_on_ipu0"' in src and '"all_reduce/in0_on_ipu1"' in src
    both = np.stack([x.astype(np.float64) * 1.5, [[1.0, -2.0, 4.0], [0.5, 8.0, -1.0]]])
    oracle = {"add": both.sum(0), "mean": both.mean(0), "max": both.max(0)}[op].astype(np.float32)
    for k in ("ya", "yb"):
        np.testing.assert_allclose(got[k], oracle, rtol=1e-6)
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("dt", [popxl.float16, popxl.float32])
def test_nll_with_softmax_grad_roundtrip(dt, tmp_path):
    """nll_loss_with_softmax_grad (BERT's loss, float16 probabilities and
    uint32 labels in its fp16 runs): the generated vertex computes in
    float32, its outputs rounded to the probabilities' type."""
    labels = np.array([2, 0, 4, 1], np.uint32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((4, 5), dt, name="x")
        probs = ops.softmax(ops.host_load(xs, "x"), axis=-1)
        loss, dx = ops.nll_loss_with_softmax_grad(probs, popxl.constant(labels, popxl.uint32, name="l"),
                                                  ignore_index=4, reduction="mean")
        ops.host_store(popxl.d2h_stream(loss.shape, loss.dtype, name="loss"), loss)
        ops.host_store(popxl.d2h_stream(dx.shape, dx.dtype, name="dx"), dx)
    x = np.random.default_rng(3).normal(size=(4, 5)).astype(dt.as_numpy())
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    assert "ipuxl_export::nllSoftmaxGrad(" in src
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    ref = torch.nn.functional.cross_entropy(t, torch.tensor(labels.astype(np.int64)), ignore_index=4)
    ref.backward()
    tol = dict(rtol=3e-3, atol=3e-3) if dt == popxl.float16 else dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["loss"].astype(np.float64), ref.item(), **tol)
    np.testing.assert_allclose(got["dx"].astype(np.float64), t.grad.numpy(), **tol)
    np.testing.assert_allclose(got["loss"].astype(np.float64), want["loss"].astype(np.float64), **tol)
    np.testing.assert_allclose(got["dx"].astype(np.float64), want["dx"].astype(np.float64), **tol)


@pytest.mark.slow
@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("name", ["tanh", "relu"])
def test_nonlinearity_grad_roundtrip(name, dt, tmp_path):
    # The gradients of tanh and relu are PopART's TanhGradOp / ReluGradOp,
    # grown as popnn::nonLinearityInputGradient of the forward output.
    fn, tfn = {"tanh": (ops.tanh, torch.tanh), "relu": (ops.relu, torch.relu)}[name]
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(3, 4)) * 2).astype(dt.as_numpy())
    seed = rng.normal(size=(3, 4)).astype(dt.as_numpy())
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((3, 4), dt, name="x")
        xt = ops.host_load(xs, "x")
        g = ir.create_graph(fn, xt)
        info = popxl.transforms.autodiff(g)
        fwd = ops.call_with_info(g, xt)
        (dx,) = ops.call(info.graph, popxl.constant(seed, dt),
                         inputs_dict=info.inputs_dict(fwd))
        ops.host_store(popxl.d2h_stream(dx.shape, dx.dtype, name="dx"), dx)
    got, _, want, _, src, _ = roundtrip(ir, tmp_path, inputs={xs: x})
    kind = name.upper()
    assert f"popnn::nonLinearityInputGradient(graph, popnn::NonLinearityType::{kind}" in src
    xt64 = torch.tensor(x.astype(np.float64), requires_grad=True)
    (tfn(xt64) * torch.tensor(seed.astype(np.float64))).sum().backward()
    tol = dict(rtol=1e-5, atol=1e-6) if dt == popxl.float32 else dict(rtol=1e-2, atol=4e-3)
    np.testing.assert_allclose(got["dx"].astype(np.float64), xt64.grad.numpy(), **tol)
    # Within rounding, not bit-identical: the forward tanh is the Session's
    # vectorised kernel on one side and ipuxl's Poplar's codelet on the other.
    np.testing.assert_allclose(got["dx"].astype(np.float64), want["dx"].astype(np.float64),
                               **tol)
