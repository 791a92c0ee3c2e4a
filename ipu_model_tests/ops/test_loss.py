"""nll_loss and nll_loss_with_softmax_grad against PyTorch.

PopXL puts the classes on the *last* axis of probs; the references flatten
probs to (N, C) and labels to (N,) for torch.nn.functional.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

SHAPES = [(6, 4), (2, 3, 5), (1, 7), (5, 1)]


def _inputs(shape, seed, ignore=None, dtype=np.float32):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=shape).astype(np.float32) * 2
    labels = rng.integers(0, shape[-1], size=shape[:-1]).astype(np.int32)
    if ignore is not None:
        labels.flat[::3] = ignore
    probs = torch.softmax(torch.from_numpy(logits), dim=-1).numpy().astype(dtype)
    return logits, probs, labels


def _torch_nll(logp, labels, reduction, ignore_index):
    c = logp.shape[-1]
    out = F.nll_loss(torch.from_numpy(logp.reshape(-1, c)).double(),
                     torch.from_numpy(labels.reshape(-1).astype(np.int64)),
                     reduction=reduction,
                     ignore_index=-100 if ignore_index is None else ignore_index)
    out = out.numpy()
    return out.reshape(labels.shape) if reduction == "none" else out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_nll_loss_matches_torch(shape, reduction, ignore_index, dtype):
    if ignore_index is not None and ignore_index >= shape[-1]:
        ignore_index = 0
    _, probs, labels = _inputs(shape, 7, ignore_index, dtype)
    got, got_lp = run_fn(lambda p, l: [
        ops.nll_loss(p, l, ignore_index=ignore_index, reduction=reduction),
        ops.nll_loss(p, l, ignore_index, reduction, log_prob=True)], probs, labels)
    eps = 6.104e-05 if dtype == np.float16 else 1e-7
    logp = np.log(np.maximum(probs.astype(np.float64), eps))
    want = _torch_nll(logp, labels, reduction, ignore_index)
    want_lp = _torch_nll(probs.astype(np.float64), labels, reduction, ignore_index)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-6)
    for g, w in [(got, want), (got_lp, want_lp)]:
        assert g.dtype == dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g.astype(np.float64), w, **tol)


def test_nll_loss_clamps_zero_probability_and_handles_edge_labels():
    probs = np.array([[0.0, 1.0], [0.5, 0.5], [0.25, 0.75]], np.float32)
    labels = np.array([0, 0, 1], np.int32)  # p = 0 is clamped to eps
    got = run_fn(lambda p, l: ops.nll_loss(p, l, reduction="none"), probs, labels)
    np.testing.assert_allclose(got, [-np.log(1e-7), -np.log(0.5), -np.log(0.75)], rtol=1e-6)
    # Labels outside [0, C) are an error naming the sample (as PyTorch), not a
    # silent loss of -log(eps); an out-of-range ignore_index is fine.
    for bad in ([0, 5, 1], [0, 1, -1]):
        with pytest.raises(RuntimeError, match=r"label (5|-1) of sample (1|2) is outside \[0, 2\)"):
            run_fn(lambda p, l: ops.nll_loss(p, l, reduction="none"), probs,
                   np.array(bad, np.int32))
    got = run_fn(lambda p, l: ops.nll_loss(p, l, reduction="none", ignore_index=-1), probs,
                 np.array([1, 0, -1], np.int32))
    np.testing.assert_allclose(got, [0.0, -np.log(0.5), 0.0], atol=1e-6)
    got16 = run_fn(lambda p, l: ops.nll_loss(p, l, reduction="sum"), probs.astype(np.float16),
                   np.array([0, 1, 1], np.int32))
    want = -np.log(6.104e-05) - np.log(0.5) - np.log(0.75)
    np.testing.assert_allclose(got16, want, rtol=1e-3)


def test_nll_loss_uint32_labels_and_all_ignored_mean():
    _, probs, labels = _inputs((4, 3), 8)
    got = run_fn(lambda p, l: ops.nll_loss(p, l), probs, labels.astype(np.uint32))
    np.testing.assert_allclose(got, _torch_nll(np.log(probs.astype(np.float64)), labels, "mean",
                                               None), rtol=1e-6)
    got = run_fn(lambda p, l: [ops.nll_loss(p, l, ignore_index=1),
                               ops.nll_loss(p, l, ignore_index=1, reduction="sum")],
                 probs, np.ones(4, np.int32))
    assert np.isnan(got[0]) and got[1] == 0  # as torch: mean over no samples is NaN


def _torch_ce_and_grad(logits, labels, reduction, ignore_index, loss_grad):
    c = logits.shape[-1]
    x = torch.from_numpy(logits.reshape(-1, c)).double().requires_grad_()
    loss = F.cross_entropy(x, torch.from_numpy(labels.reshape(-1).astype(np.int64)),
                           reduction=reduction,
                           ignore_index=-100 if ignore_index is None else ignore_index)
    g = torch.as_tensor(np.asarray(loss_grad, np.float64).reshape(loss.shape))
    loss.backward(g)
    out = loss.detach().numpy()
    if reduction == "none":
        out = out.reshape(labels.shape)
    return out, x.grad.numpy().reshape(logits.shape)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, 1])
@pytest.mark.parametrize("shape", SHAPES)
def test_nll_loss_with_softmax_grad_matches_torch(shape, reduction, ignore_index):
    if ignore_index is not None and ignore_index >= shape[-1]:
        ignore_index = 0
    logits, probs, labels = _inputs(shape, 9, ignore_index)
    loss, dx = run_fn(lambda p, l: ops.nll_loss_with_softmax_grad(
        p, l, ignore_index=ignore_index, reduction=reduction), probs, labels)
    _, want_dx = _torch_ce_and_grad(logits, labels, reduction, ignore_index,
                                    np.ones(labels.shape if reduction == "none" else ()))
    # The op's loss is -log(p + 1e-7), not exactly cross entropy.
    want_loss = _torch_nll(np.log(probs.astype(np.float64) + 1e-7), labels, reduction,
                           ignore_index)
    assert loss.shape == np.shape(want_loss) and dx.shape == probs.shape
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-5)
    if reduction == "mean" and ignore_index is not None and (labels == ignore_index).all():
        # PopART scales by 1/0 here: NaN, where torch gives zeros
        assert np.isnan(dx).all()
    else:
        np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("probs_shape,labels_shape", [((5, 7), (5, 1)), ((2, 3, 4), (6,)),
                                                      ((6, 4), (2, 3))])
def test_nll_loss_with_softmax_grad_takes_one_label_per_row_in_any_shape(
        probs_shape, labels_shape, reduction):
    # PopART's NlllWithSoftmaxGradDirectOp checks no label shape (its Opx
    # flattens labels): (n, 1) labels for (n, C) probs, as BERT passes them.
    logits, probs, labels = _inputs(probs_shape, 4, None)
    labels = labels.reshape(labels_shape)
    loss, dx = run_fn(lambda p, l: ops.nll_loss_with_softmax_grad(
        p, l, loss_grad=1, reduction=reduction), probs, labels)
    rows = labels.reshape(probs_shape[:-1])
    _, want_dx = _torch_ce_and_grad(logits, rows, reduction, None,
                                    np.ones(rows.shape if reduction == "none" else ()))
    want_loss = _torch_nll(np.log(probs.astype(np.float64) + 1e-7), rows, reduction, None)
    if reduction == "none":
        want_loss = np.reshape(want_loss, labels_shape)
    assert loss.shape == np.shape(want_loss) and dx.shape == probs.shape
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)


def test_softmax_then_nll_grad_like_the_mnist_tutorial():
    logits, _, labels = _inputs((8, 10), 10)
    loss, dx = run_fn(lambda x, l: ops.nll_loss_with_softmax_grad(ops.softmax(x, 1), l, 2.5),
                      logits, labels)
    want_loss, want_dx = _torch_ce_and_grad(logits, labels, "mean", None, 2.5)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-4)  # within the 1e-7 epsilon
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-7)


def test_loss_grad_tensor_per_sample_and_float16():
    logits, probs, labels = _inputs((3, 2, 4), 11)
    g = np.random.default_rng(0).uniform(0.5, 2, size=(3, 2)).astype(np.float32)
    loss, dx = run_fn(lambda p, l, gr: ops.nll_loss_with_softmax_grad(p, l, gr, reduction="none"),
                      probs, labels, g)
    _, want_dx = _torch_ce_and_grad(logits, labels, "none", None, g)
    want_loss = _torch_nll(np.log(probs.astype(np.float64) + 1e-7), labels, "none", None)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-7)
    # float16 probs with a float32 loss_grad (PopXL's documented mix) and a float16 one
    p16 = probs.astype(np.float16)
    out = run_fn(lambda p, l, g32, g16: [*ops.nll_loss_with_softmax_grad(p, l, g32),
                                         *ops.nll_loss_with_softmax_grad(p, l, g16)],
                 p16, labels, np.float32(0.5), np.float16(0.5))
    want_loss, want_dx = _torch_ce_and_grad(logits, labels, "mean", None, 0.5)
    for loss16, dx16 in [out[:2], out[2:]]:
        assert loss16.dtype == np.float16 and dx16.dtype == np.float16
        np.testing.assert_allclose(loss16.astype(np.float64), want_loss, rtol=2e-3)
        np.testing.assert_allclose(dx16.astype(np.float64), want_dx, rtol=2e-2, atol=2e-4)


def test_softmax_grad_out_of_range_label_and_all_ignored():
    probs = np.array([[0.25, 0.75], [0.5, 0.5]], np.float32)
    with pytest.raises(RuntimeError, match=r"label 7 of sample 1 is outside \[0, 2\)"):
        run_fn(lambda p, l: ops.nll_loss_with_softmax_grad(p, l, reduction="sum"),
               probs, np.array([1, 7], np.int32))
    loss, dx = run_fn(lambda p, l: ops.nll_loss_with_softmax_grad(p, l, ignore_index=3),
                      probs, np.array([3, 3], np.int32))
    assert np.isnan(loss) and np.isnan(dx).all()


def _build(fn, shapes=((4, 3), (4,)), dtypes=(popxl.float32, popxl.int32)):
    ir = popxl.Ir()
    with ir.main_graph:
        ts = [popxl.variable(np.zeros(s, d.as_numpy()), d) for s, d in zip(shapes, dtypes)]
        return fn(*ts)


def test_bad_inputs():
    with pytest.raises(ValueError, match="label tensor .* must have shape \\(4,\\)"):
        _build(lambda p, l: ops.nll_loss(p, l), shapes=((4, 3), (3,)))
    with pytest.raises(ValueError, match="must have 6 elements, one per row"):
        _build(lambda p, l: ops.nll_loss_with_softmax_grad(p, l), shapes=((2, 3, 4), (2, 4)))
    with pytest.raises(ValueError, match="Not a valid reduction: 'avg'"):
        _build(lambda p, l: ops.nll_loss(p, l, reduction="avg"))
    with pytest.raises(TypeError, match="labels must have one of: int32, uint32"):
        _build(lambda p, l: ops.nll_loss(p, l), dtypes=(popxl.float32, popxl.float32))
    with pytest.raises(TypeError, match="probs must have one of: float16, float32"):
        _build(lambda p, l: ops.nll_loss(p, l), dtypes=(popxl.int32, popxl.int32))
    with pytest.raises(ValueError, match="probs .* must have rank >= 1"):
        _build(lambda p, l: ops.nll_loss(p, l), shapes=((), ()))
    with pytest.raises(TypeError, match="ignore_index must be None or an int"):
        _build(lambda p, l: ops.nll_loss(p, l, ignore_index=1.5))
    with pytest.raises(ValueError, match="loss_grad .* has shape \\(4,\\); expected a single"):
        _build(lambda p, l, g: ops.nll_loss_with_softmax_grad(p, l, g),
               shapes=((4, 3), (4,), (4,)), dtypes=(popxl.float32, popxl.int32, popxl.float32))
    with pytest.raises(TypeError, match="loss_grad .* has dtype float16; expected float32"):
        _build(lambda p, l, g: ops.nll_loss_with_softmax_grad(p, l, g),
               shapes=((4, 3), (4,), ()), dtypes=(popxl.float32, popxl.int32, popxl.float16))
    with pytest.raises(TypeError, match="loss_grad must be a number or a Tensor"):
        _build(lambda p, l: ops.nll_loss_with_softmax_grad(p, l, "1"))
