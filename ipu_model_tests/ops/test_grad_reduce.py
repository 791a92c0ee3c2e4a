"""Gradient rules of reductions, softmax, nll_loss, topk, cumsum and
lamb_square, checked against PyTorch autograd (float64 references): first
order over shapes, axes (negative, all, none, keepdims) and dtypes, and
second order (Hessian-vector products) where the rule claims it."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ipuxl as popxl  # noqa: E402
import ipuxl.ops as ops  # noqa: E402
from grad_harness import (grads_of, second_order_of, torch_grads,  # noqa: E402
                          torch_second_order)

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float16: dict(rtol=2e-2, atol=2e-2)}


def _f64(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _check(actual, expected, dtype, like=None, **tol):
    actual = np.asarray(actual)
    if like is not None:
        assert actual.shape == np.shape(like), (actual.shape, np.shape(like))
        assert actual.dtype == np.asarray(like).dtype, (actual.dtype, np.asarray(like).dtype)
    t = dict(TOL[dtype])
    t.update(tol)
    np.testing.assert_allclose(actual.astype(np.float64), np.asarray(expected, np.float64), **t)


def _first(fn, tfn, *arrays, dtype=np.float32, **tol):
    """Compare grads_of(fn) with torch autograd of tfn on float64 copies."""
    outs, grads = grads_of(fn, *arrays)
    seeds = [np.asarray(s) for s in _seeds_like(outs)]
    t_outs, t_grads = torch_grads(tfn, *[_f64(a) for a in arrays],
                                  seeds=[_f64(s) for s in seeds])
    for o, to in zip(outs, t_outs):
        _check(o, to, dtype, **tol)
    for a, g, tg in zip(arrays, grads, t_grads):
        if g is None:
            continue
        _check(g, tg, dtype, like=a, **tol)
    return grads


def _seeds_like(outs):
    from grad_harness import default_seeds

    return default_seeds([(o.shape, o.dtype) for o in outs])


def _second(fn, tfn, *arrays, dtype=np.float32, **tol):
    second, seeds, v = second_order_of(fn, *arrays)
    ref = torch_second_order(tfn, *[_f64(a) for a in arrays], seeds=[_f64(s) for s in seeds],
                             v=[_f64(x) for x in v])
    for a, s, r in zip(arrays, second, ref):
        if s is None:
            continue
        _check(s, r, dtype, like=a, **tol)


# ---- torch references: move the reduced axes last, flatten them, reduce.

def _norm_axes(axis, rank):
    if axis is None:
        return list(range(rank))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % rank for a in axes)


def _out_shape(shape, axes, keepdims):
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _torch_reduce(red, axis, keepdims):
    def f(x):
        axes = _norm_axes(axis, x.dim())
        kept = [i for i in range(x.dim()) if i not in axes]
        xt = x.permute(*(kept + axes)) if x.dim() else x
        flat = xt.reshape(tuple(x.shape[i] for i in kept) + (-1,))
        return red(flat).reshape(_out_shape(tuple(x.shape), axes, keepdims))
    return f


TORCH_RED = {
    "sum": lambda f: f.sum(-1),
    "mean": lambda f: f.mean(-1),
    "max": lambda f: torch.amax(f, -1),
    "min": lambda f: torch.amin(f, -1),
    "median": lambda f: torch.median(f, -1).values,
    "prod": lambda f: torch.prod(f, -1),
    "l1": lambda f: f.abs().sum(-1),
    "l2": lambda f: torch.linalg.vector_norm(f, dim=-1),
    "logsum": lambda f: torch.log(f.sum(-1)),
    "logsumexp": lambda f: torch.logsumexp(f, -1),
    "sumsquare": lambda f: (f * f).sum(-1),
}

AXIS_CASES = [
    ((2, 3, 4), None, False),
    ((2, 3, 4), None, True),
    ((2, 3, 4), 1, False),
    ((2, 3, 4), -1, True),
    ((2, 3, 4), (0, 2), False),
    ((2, 3, 4), (-1, -3), True),
    ((2, 3, 4), (0, 1), True),
    ((2, 3, 4), (1, 2), False),
    ((5,), 0, False),
    ((), None, False),
    ((3, 1, 4), (1,), False),
]


def _input(op, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if op == "logsum":
        x = rng.uniform(0.5, 2.0, shape)
    elif op == "prod":
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        x = rng.standard_normal(shape)
        if op == "l1":
            x = np.where(np.abs(x) < 1e-2, 0.5, x)
    return np.asarray(x, dtype)


def _ipu_reduce(op, axis, keepdims):
    return lambda t: getattr(ops, op)(t, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("shape,axis,keepdims", AXIS_CASES)
def test_reduce_sum_grad(shape, axis, keepdims):
    x = _input("sum", shape, np.float32)
    _first(_ipu_reduce("sum", axis, keepdims),
           _torch_reduce(TORCH_RED["sum"], axis, keepdims), x)


@pytest.mark.parametrize("op", sorted(TORCH_RED))
@pytest.mark.parametrize("shape,axis,keepdims", AXIS_CASES)
def test_reduce_grad_f32(op, shape, axis, keepdims):
    x = _input(op, shape, np.float32)
    _first(_ipu_reduce(op, axis, keepdims), _torch_reduce(TORCH_RED[op], axis, keepdims), x)


@pytest.mark.parametrize("op", sorted(TORCH_RED))
@pytest.mark.parametrize("shape,axis,keepdims", [((3, 4), -1, False), ((2, 3, 4), (0, 2), True),
                                                 ((6,), None, False)])
def test_reduce_grad_f16(op, shape, axis, keepdims):
    x = _input(op, shape, np.float16, seed=3)
    _first(_ipu_reduce(op, axis, keepdims), _torch_reduce(TORCH_RED[op], axis, keepdims), x,
           dtype=np.float16)


@pytest.mark.parametrize("op", ["sum", "mean", "l1", "sumsquare"])
def test_reduce_grad_empty_axes_is_identity(op):
    # axis=[] reduces nothing (PopART); the gradient is the elementwise one.
    x = _input(op, (2, 3), np.float32)
    elementwise = {"sum": lambda t: t, "mean": lambda t: t, "l1": lambda t: t.abs(),
                   "sumsquare": lambda t: t * t}[op]
    _first(_ipu_reduce(op, [], False), elementwise, x)


def test_reduce_sum_grad_float16_broadcast_shape():
    x = _input("sum", (4, 1, 3), np.float16)
    _first(_ipu_reduce("sum", (0, 2), False), _torch_reduce(TORCH_RED["sum"], (0, 2), False), x,
           dtype=np.float16)


def test_reduce_sum_grad_empty_input():
    x = np.zeros((0, 3), np.float32)
    _, (g,) = grads_of(_ipu_reduce("sum", 0, False), x)
    assert g.shape == (0, 3) and g.dtype == np.float32


def test_reduce_mean_grad_empty_group():
    x = np.zeros((2, 0), np.float32)
    _, (g,) = grads_of(_ipu_reduce("mean", 1, True), x)
    assert g.shape == (2, 0)


@pytest.mark.parametrize("op", ["max", "min"])
def test_reduce_extremum_ties_split_equally(op):
    x = np.array([[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, -1.0, 0.0]],
                 np.float32)
    if op == "min":
        x = -x
    grads = _first(_ipu_reduce(op, -1, False), _torch_reduce(TORCH_RED[op], -1, False), x)
    # Each row's gradient sums to its seed, shared among the tied elements.
    outs, _ = grads_of(_ipu_reduce(op, -1, False), x)
    seeds = _seeds_like(outs)[0]
    np.testing.assert_allclose(grads[0].sum(-1), seeds, rtol=1e-6)
    assert grads[0][1, 0] == pytest.approx(seeds[1] / 4)


def test_reduce_max_ties_over_all_axes():
    x = np.array([[4.0, 1.0], [4.0, 4.0]], np.float32)
    _first(_ipu_reduce("max", None, False), lambda t: torch.amax(t), x)


def test_reduce_median_ties_pick_first():
    x = np.array([[2.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0]], np.float32)
    outs, (g,) = grads_of(_ipu_reduce("median", -1, False), x)
    s = _seeds_like(outs)[0]
    expected = np.array([[s[0], 0, 0, 0], [s[1], 0, 0, 0]], np.float32)
    np.testing.assert_allclose(g, expected, rtol=1e-6)


def test_reduce_median_all_axes_ties_split_equally():
    # As torch.median(x) without dim.
    x = np.array([[5.0, 1.0, 5.0], [9.0, 5.0, 0.0]], np.float32)
    _first(_ipu_reduce("median", None, False), lambda t: torch.median(t), x)


def test_reduce_median_multi_axis_ties_first_row_major():
    # axes (0, 2) of a (2, 2, 2) tensor: output i reduces x[:, i, :].
    x = np.array([[[1.0, 3.0], [5.0, 2.0]], [[3.0, 7.0], [2.0, 9.0]]], np.float32)
    outs, (g,) = grads_of(_ipu_reduce("median", (0, 2), False), x)
    s = _seeds_like(outs)[0]
    expected = np.zeros_like(x)
    expected[0, 0, 1] = s[0]   # [1, 3, 3, 7] -> 3, first at [0, 0, 1] (not [1, 0, 0])
    expected[0, 1, 1] = s[1]   # [5, 2, 2, 9] -> 2, first at [0, 1, 1] (not [1, 1, 0])
    np.testing.assert_allclose(g, expected, rtol=1e-6)


PROD_ZERO_CASES = {
    "one_zero": np.array([[0.5, 0.0, 2.0, -1.5], [1.2, -0.7, 0.9, 1.1]], np.float32),
    "two_zeros": np.array([[0.0, 1.5, 0.0, 2.0], [1.2, 0.0, 0.9, 1.1]], np.float32),
    "all_zero": np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 1.0]], np.float32),
}


@pytest.mark.parametrize("case", sorted(PROD_ZERO_CASES))
@pytest.mark.parametrize("axis", [-1, None, 0])
def test_reduce_prod_grad_with_zeros(case, axis):
    x = PROD_ZERO_CASES[case]
    _first(_ipu_reduce("prod", axis, False), _torch_reduce(TORCH_RED["prod"], axis, False), x)


def test_reduce_l2_grad_zero_norm_is_zero():
    x = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, -4.0]], np.float32)
    _, (g,) = grads_of(_ipu_reduce("l2", -1, False), x, seeds=[np.array([1.0, 1.0], np.float32)])
    np.testing.assert_allclose(g, [[0, 0, 0], [0.6, 0, -0.8]], rtol=1e-6, atol=1e-7)


# ---- second order

# Rules whose gradient depends on x differentiably (for sum, mean, max, l1
# the gradient of the reduction alone is constant in x: see the nonlinear
# test below).
SECOND_OPS = ["logsumexp", "l2", "sumsquare", "prod", "logsum"]


@pytest.mark.parametrize("op", SECOND_OPS)
@pytest.mark.parametrize("shape,axis,keepdims", [((3, 4), -1, False), ((2, 3, 4), (0, 2), True),
                                                 ((5,), None, False)])
def test_reduce_second_order(op, shape, axis, keepdims):
    x = _input(op, shape, np.float32, seed=7)
    _second(_ipu_reduce(op, axis, keepdims), _torch_reduce(TORCH_RED[op], axis, keepdims), x,
            atol=1e-4)


@pytest.mark.parametrize("op", sorted(TORCH_RED))
@pytest.mark.parametrize("axis", [1, None])
def test_reduce_second_order_nonlinear_use(op, axis):
    # exp(op(x)) * x: a non-trivial Hessian for every reduction, exercising the
    # rules' outputs as inputs of further differentiated ops.
    x = _input(op, (3, 4), np.float32, seed=11)
    _second(lambda t: ops.exp(getattr(ops, op)(t, axis=axis, keepdims=True)) * t,
            lambda t: torch.exp(_torch_reduce(TORCH_RED[op], axis, True)(t)) * t, x, atol=1e-4)


@pytest.mark.parametrize("axis", [-1, None])
def test_reduce_prod_second_order_with_one_zero(axis):
    # Exact for groups holding at most one zero (row 0 has one, row 1 none).
    x = PROD_ZERO_CASES["one_zero"]
    _second(_ipu_reduce("prod", axis, False), _torch_reduce(TORCH_RED["prod"], axis, False), x,
            atol=1e-4)


# ---- softmax

@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((2, 3, 4), 1), ((2, 3, 4), 0), ((6,), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softmax_grad(shape, axis, dtype):
    x = np.random.default_rng(5).standard_normal(shape).astype(dtype)
    _first(lambda t: ops.softmax(t, axis), lambda t: torch.softmax(t, axis), x, dtype=dtype)


@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((2, 3, 4), 1)])
def test_softmax_second_order(shape, axis):
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    _second(lambda t: ops.softmax(t, axis), lambda t: torch.softmax(t, axis), x, atol=1e-4)


# ---- nll_loss

def _torch_nll(reduction, ignore_index=None, log_prob=False):
    def f(probs, labels):
        n_cls = probs.shape[-1]
        lab = labels.long()
        valid = (lab >= 0) & (lab < n_cls)
        keep = torch.ones_like(valid) if ignore_index is None else (lab != ignore_index)
        sel = torch.nn.functional.one_hot(torch.where(valid, lab, 0), n_cls).to(probs.dtype)
        sel = sel * (valid & keep).unsqueeze(-1).to(probs.dtype)
        p = (probs * sel).sum(-1)
        per = -p if log_prob else -torch.log(torch.clamp(p, min=1e-7))
        per = per * keep.to(probs.dtype)
        if reduction == "none":
            return per
        if reduction == "sum":
            return per.sum()
        return per.sum() / keep.sum()
    return f


def _nll_inputs(shape, dtype, log_prob, seed=0, n_cls=5):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(shape + (n_cls,))
    e = np.exp(logits - logits.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    if log_prob:
        probs = np.log(probs)
    labels = rng.integers(0, n_cls, shape).astype(np.int32)
    return probs.astype(dtype), labels


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("log_prob", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 2])
@pytest.mark.parametrize("shape", [(6,), (2, 3), ()])
def test_nll_grad(reduction, log_prob, ignore_index, shape):
    probs, labels = _nll_inputs(shape, np.float32, log_prob)
    if ignore_index is not None and labels.size > 1:
        labels.reshape(-1)[0] = ignore_index  # at least one ignored sample
        labels.reshape(-1)[-1] = (ignore_index + 1) % 5  # and one counted
    kw = dict(ignore_index=ignore_index, reduction=reduction, log_prob=log_prob)
    _first(lambda p, l: ops.nll_loss(p, l, **kw), _torch_nll(reduction, ignore_index, log_prob),
           probs, labels)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("log_prob", [False, True])
def test_nll_grad_f16(reduction, log_prob):
    probs, labels = _nll_inputs((4, 3), np.float16, log_prob, seed=2)
    _first(lambda p, l: ops.nll_loss(p, l, reduction=reduction, log_prob=log_prob),
           _torch_nll(reduction, None, log_prob), probs, labels, dtype=np.float16)


def test_nll_grad_uint32_labels_and_ignore_index():
    probs, labels = _nll_inputs((6,), np.float32, False, seed=4)
    labels = labels.astype(np.uint32)
    labels[2] = 2**32 - 1    # the ignore index -1 as uint32: a zero gradient row
    outs, (g, gl) = grads_of(lambda p, l: ops.nll_loss(p, l, ignore_index=-1, reduction="sum"),
                             probs, labels)
    assert gl is None
    s = _seeds_like(outs)[0]
    expected = np.zeros_like(probs)
    for i, lab in enumerate(labels):
        if lab < 5:
            expected[i, lab] = -s / probs[i, lab]
    np.testing.assert_allclose(g, expected, rtol=1e-5)


def test_nll_grad_mean_all_ignored_is_nan():
    probs, labels = _nll_inputs((3,), np.float32, False)
    labels[:] = 1
    _, (g, _) = grads_of(lambda p, l: ops.nll_loss(p, l, ignore_index=1), probs, labels)
    assert np.isnan(g).all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [None, 0])
def test_nll_second_order(reduction, ignore_index):
    probs, labels = _nll_inputs((2, 3), np.float32, False, seed=8)
    labels[0, 0] = 0
    labels[1, 2] = 3
    kw = dict(ignore_index=ignore_index, reduction=reduction)
    _second(lambda p, l: ops.nll_loss(p, l, **kw), _torch_nll(reduction, ignore_index), probs,
            labels, rtol=1e-4, atol=1e-3)


def test_nll_of_softmax_second_order():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    labels = np.array([0, 3, 1], np.int32)
    _second(lambda t, l: ops.nll_loss(ops.softmax(t, -1), l),
            lambda t, l: _torch_nll("mean")(torch.softmax(t, -1), l), x, labels, atol=1e-4)


def test_nll_with_softmax_grad_has_no_rule():
    probs, labels = _nll_inputs((3,), np.float32, False)
    with pytest.raises(NotImplementedError, match="NlllWithSoftmaxGradDirect"):
        grads_of(lambda p, l: ops.nll_loss_with_softmax_grad(p, l)[0], probs, labels)


# ---- topk, cumsum, lamb_square

@pytest.mark.parametrize("shape,k,axis", [((3, 6), 3, -1), ((3, 6), 2, 0), ((7,), 7, 0),
                                          ((2, 4, 5), 1, 1), ((3, 4), 0, 1)])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_topk_grad(shape, k, axis, largest, dtype):
    x = np.random.default_rng(10).permutation(np.arange(np.prod(shape))).reshape(shape)
    x = (x * 0.25 - 1.0).astype(dtype)  # distinct values: no tie-order ambiguity
    _first(lambda t: ops.topk(t, k, axis, largest, True)[0],
           lambda t: torch.topk(t, k, axis, largest, True).values, x, dtype=dtype)


def test_topk_second_order_via_square():
    x = np.random.default_rng(12).standard_normal((3, 5)).astype(np.float32)
    _second(lambda t: ops.topk(t * t, 2, -1, True, True)[0],
            lambda t: torch.topk(t * t, 2, -1, True, True).values, x, atol=1e-4)


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -1),
                                       ((2, 1, 3), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cumsum_grad(shape, dim, dtype):
    x = np.random.default_rng(13).standard_normal(shape).astype(dtype)
    _first(lambda t: ops.cumsum(t, dim), lambda t: torch.cumsum(t, dim), x, dtype=dtype)


def test_cumsum_second_order_via_square():
    x = np.random.default_rng(14).standard_normal((3, 4)).astype(np.float32)
    _second(lambda t: ops.cumsum(t * t, 1), lambda t: torch.cumsum(t * t, 1), x, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lamb_square_grad(dtype):
    x = np.random.default_rng(15).standard_normal((3, 4)).astype(dtype)
    outs, (g,) = grads_of(lambda t: ops.lamb_square(t), x)
    s = _seeds_like(outs)[0]
    assert g.dtype == dtype and g.shape == x.shape
    _check(g, 2.0 * x.astype(np.float64) * np.float64(s.astype(dtype)), dtype)


def test_argmax_in_graph_needs_no_gradient():
    x = np.random.default_rng(16).standard_normal((3, 4)).astype(np.float32)

    def fn(t):
        idx = ops.argmax(t, 1)
        return ops.sum(t, axis=1) * ops.cast(idx, popxl.float32)

    _first(fn, lambda t: t.sum(1) * torch.argmax(t, 1).to(t.dtype), x)


# ---- which forward tensors the gradient graph reads (PopART's grad ops'
# forward inputs, so autodiff stitches the same tensors as PopXL)

def _fwd_reads(fn, shape=(3, 4)):
    from ipuxl import transforms

    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.ones(shape, np.float32))
        g = ir.create_graph(fn, v.spec)
        x, y = g.inputs[0], g.outputs[0]
        info = transforms.autodiff(g, grads_provided=[y], grads_required=[x])
    reads = set()
    for ec in info.expected_inputs:
        if ec.connection_type.name == "Fwd":
            t = ec.fwd_tensor
            reads.add("x" if t is x else "y" if t is y else "other")
    return reads


@pytest.mark.parametrize("op,reads", [
    ("sum", set()), ("mean", set()), ("max", {"x", "y"}), ("min", {"x", "y"}),
    ("logsumexp", {"x", "y"}), ("l2", {"x", "y"}), ("logsum", {"y"}), ("sumsquare", {"x"}),
    ("l1", {"x"}), ("prod", {"x"}),
])
def test_reduce_grad_reads_popart_forward_tensors(op, reads):
    assert _fwd_reads(lambda t: getattr(ops, op)(t, axis=1)) == reads


def test_softmax_cumsum_topk_grad_reads():
    assert _fwd_reads(lambda t: ops.softmax(t, 1)) == {"y"}
    assert _fwd_reads(lambda t: ops.cumsum(t, 1)) == set()
    assert _fwd_reads(lambda t: ops.topk(t, 2, 1, True, True)[0]) == {"other"}  # the indices
