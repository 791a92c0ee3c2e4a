"""Gradient rules of the elementwise families (unary, misc, where, cast,
scaled_add) against PyTorch autograd, first and second order, and the
decompositions (Gelu, GeluErf, Swish, Tanh) against both the rules and
PyTorch.

PyTorch references run in float64 on the same inputs and seeds, so the
comparison measures ipuxl's error only. Random inputs avoid the points where
an op is not differentiable (0 for abs/relu/sign, the clip bounds, the jumps
of fmod)."""

import numpy as np
import pytest

import ipuxl
import ipuxl.ops as ops
from grad_harness import (default_seeds, grads_of, second_order_of, torch_grads,
                          torch_second_order)

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float16: dict(rtol=2e-2, atol=4e-3)}
TOL2 = dict(rtol=2e-4, atol=2e-5)  # second order, float32
SHAPES = [(), (7,), (3, 4), (2, 3, 4)]


def _rng(k=0):
    return np.random.default_rng(100 + k)


def normal(shape, dtype=np.float32, k=0):
    return _rng(k).standard_normal(shape).astype(dtype)


def away_from_zero(shape, dtype=np.float32, k=0, gap=0.1):
    r = _rng(k)
    x = r.standard_normal(shape)
    return (np.where(x < 0, -1, 1) * (gap + np.abs(x))).astype(dtype)


def positive(shape, dtype=np.float32, k=0):
    return (0.5 + np.abs(_rng(k).standard_normal(shape))).astype(dtype)


def _f64(arrays):
    return [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
            for a in arrays]


def _tol(arrays):
    dts = {np.asarray(a).dtype.type for a in arrays if np.asarray(a).dtype.kind == "f"}
    return TOL[np.float16] if np.float16 in dts else TOL[np.float32]


def _scale(ref):
    # Tolerances are relative to the reference's magnitude: an atol scaled by
    # the largest gradient, so large-valued cases are not held to 1e-5.
    m = float(np.max(np.abs(ref))) if np.asarray(ref).size and np.all(np.isfinite(ref)) else 1.0
    return max(m, 1.0)


def assert_close(got, ref, rtol, atol, what=""):
    assert got.shape == np.shape(ref), f"{what}: shape {got.shape} != {np.shape(ref)}"
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=atol * _scale(ref),
                               equal_nan=True, err_msg=what)


def check_first(fn, tfn, *arrays, tol=None):
    """ipuxl gradients of fn vs PyTorch (float64) gradients of tfn; returns
    ipuxl's gradients."""
    tol = tol or _tol(arrays)
    outs, grads = grads_of(fn, *arrays)
    seeds = default_seeds([(o.shape, o.dtype) for o in outs])
    touts, tgr = torch_grads(tfn, *_f64(arrays), seeds=_f64(seeds))
    for o, to in zip(outs, touts):
        assert_close(o, to, what="forward", **tol)
    for i, (a, g, tg) in enumerate(zip(arrays, grads, tgr)):
        a = np.asarray(a)
        if a.dtype.kind != "f":
            assert g is None
            continue
        assert g.dtype == a.dtype and g.shape == a.shape, f"grad {i}: {g.dtype}{g.shape}"
        assert_close(g, tg, what=f"grad of input {i}", **tol)
    return grads


def check_second(fn, tfn, *arrays, tol=TOL2):
    got, seeds, v = second_order_of(fn, *arrays)
    ref = torch_second_order(tfn, *_f64(arrays), seeds=_f64(seeds), v=_f64(v))
    for i, (a, g, r) in enumerate(zip(arrays, got, ref)):
        if np.asarray(a).dtype.kind != "f":
            continue
        assert g.shape == np.shape(a)
        assert_close(g, r, what=f"second order, input {i}", **tol)
    return got


# ---------------------------------------------------------------- unary ops

UNARY = {
    # name: (ipuxl fn, torch fn, input maker)
    "abs": (ops.abs, torch.abs, away_from_zero),
    "negate": (ops.negate, torch.neg, normal),
    "sqrt": (ops.sqrt, torch.sqrt, positive),
    "exp": (ops.exp, torch.exp, normal),
    "log": (ops.log, torch.log, positive),
    "log2": (ops.log2, torch.log2, positive),
    "sin": (ops.sin, torch.sin, normal),
    "cos": (ops.cos, torch.cos, normal),
    "tanh": (ops.tanh, torch.tanh, normal),
    "relu": (ops.relu, torch.relu, away_from_zero),
    "gelu": (ops.gelu, lambda x: F.gelu(x, approximate="tanh"), normal),
    "geluerf": (ops.geluerf, F.gelu, normal),
    "swish": (ops.swish, F.silu, normal),
}
# Piecewise linear ops have a zero second derivative: their second order is
# tested on op(x)**2, which differentiates the rule's own ops again.
SQUARED_FOR_SECOND = {"abs", "negate", "relu"}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_first_order_f32(name, shape):
    fn, tfn, make = UNARY[name]
    check_first(fn, tfn, make(shape, np.float32))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_first_order_f16(name):
    fn, tfn, make = UNARY[name]
    x = make((4, 5), np.float16, k=3)
    if name == "exp":
        x = np.clip(x, -3, 3).astype(np.float16)
    check_first(fn, tfn, x)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_second_order(name):
    fn, tfn, make = UNARY[name]
    x = make((3, 4), np.float32, k=1)
    if name in SQUARED_FOR_SECOND:
        check_second(lambda t: fn(t) * fn(t), lambda t: tfn(t) * tfn(t), x)
    else:
        check_second(fn, tfn, x)


def test_gelu_rule_is_derivative_of_kernel_formula():
    # Large |x| too, where tanh saturates and the cubic term dominates.
    x = np.array([-6.0, -3.0, -1.0, -0.2, 0.0, 0.3, 1.5, 4.0, 8.0], np.float32)
    check_first(ops.gelu, lambda t: F.gelu(t, approximate="tanh"), x)


def test_geluerf_rule_near_zero_and_tails():
    # Both sides of the |x| = 0.1 switch between series and geluerf(x)/x,
    # exact zero, and the tails.
    x = np.array([-12.0, -5.0, -0.1001, -0.0999, -1e-4, 0.0, 1e-30, 0.05, 0.0999, 0.1001,
                  3.0, 12.0], np.float32)
    check_first(ops.geluerf, F.gelu, x)
    check_second(ops.geluerf, F.gelu, x)


@pytest.mark.parametrize("name,ref", [("ceil", torch.ceil), ("floor", torch.floor),
                                      ("sign", torch.sign)])
def test_piecewise_constant_gradients_are_zero(name, ref):
    fn = getattr(ops, name)
    x = away_from_zero((3, 4), k=2) + np.float32(0.25)  # keep off integers
    x = np.where(np.abs(x - np.round(x)) < 0.05, x + 0.1, x).astype(np.float32)
    _, grads = grads_of(fn, x)
    assert grads[0].shape == x.shape and not np.any(grads[0])
    # Inside a product the zero gradient simply drops out.
    check_first(lambda t: fn(t) * t, lambda t: ref(t) * t, x)
    check_second(lambda t: fn(t) * t * t, lambda t: ref(t) * t * t, x)


# ---------------------------------------------------------------- clip

@pytest.mark.parametrize("lo,hi", [(-0.5, 0.7), (-0.3, float("inf")), (float("-inf"), 0.2),
                                   (float("-inf"), float("inf"))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_clip_first_order(lo, hi, dtype):
    x = normal((4, 6), np.float32, k=4)
    for b in (lo, hi):
        if np.isfinite(b):
            x = np.where(np.abs(x - b) < 0.05, x + 0.1, x)
    x = x.astype(dtype)
    check_first(lambda t: ops.clip(t, lo, hi), lambda t: torch.clamp(t, lo, hi), x)


def test_clip_second_order():
    x = normal((3, 5), k=5)
    x = np.where(np.abs(np.abs(x) - 0.6) < 0.05, x * 1.2, x).astype(np.float32)
    check_second(lambda t: ops.clip(t, -0.6, 0.6) * t, lambda t: torch.clamp(t, -0.6, 0.6) * t,
                 x)


def test_clip_gradient_at_the_bounds_follows_popart():
    # PopART's ClipGrad masks elements whose output equals a bound, so the
    # gradient at x == min or x == max is 0 (PyTorch's clamp passes it).
    x = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 2.0], np.float32)
    seeds = [np.arange(1, 7, dtype=np.float32)]
    _, grads = grads_of(lambda t: ops.clip(t, -0.5, 0.5), x, seeds=seeds)
    np.testing.assert_array_equal(grads[0], [0, 0, 3, 4, 0, 0])
    _, grads = grads_of(lambda t: ops.clip(t, 1.0, -1.0), x, seeds=seeds)  # min > max
    np.testing.assert_array_equal(grads[0], np.zeros(6, np.float32))


# ---------------------------------------------------------------- decompositions

DECOMPOSED = {
    "Gelu": ("gelu", 2e-5),
    "GeluErf": ("geluerf", 3e-5),  # the erfc fit's slope is within ~1e-5
    "Swish": ("swish", 2e-5),
    "Tanh": ("tanh", 2e-5),
}


@pytest.mark.parametrize("op_type", sorted(DECOMPOSED))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_decomposition_matches_rule_and_torch(op_type, dtype):
    name, atol = DECOMPOSED[op_type]
    fn, tfn, _ = UNARY[name]
    x = (normal((5, 6), np.float32, k=6) * 2.5).astype(dtype)
    tol = dict(rtol=1e-4, atol=atol) if dtype == np.float32 else TOL[np.float16]
    rule = check_first(fn, tfn, x, tol=tol)
    with ipuxl.grad.force_decomposition(op_type):
        assert ipuxl.grad.get_grad_rule(op_type) is None
        dec = check_first(fn, tfn, x, tol=tol)
    assert_close(dec[0], rule[0].astype(np.float64), what="decomposition vs rule", **tol)


@pytest.mark.parametrize("op_type", sorted(DECOMPOSED))
def test_decomposition_second_order(op_type):
    name, atol = DECOMPOSED[op_type]
    fn, tfn, _ = UNARY[name]
    x = normal((4, 5), k=7) * 2.0
    rule = check_second(fn, tfn, x)
    with ipuxl.grad.force_decomposition(op_type):
        dec = check_second(fn, tfn, x, tol=dict(rtol=2e-4, atol=max(atol, 2e-5) * 4))
    assert_close(dec[0], rule[0].astype(np.float64), rtol=2e-4, atol=max(atol, 2e-5) * 4,
                 what="second order: decomposition vs rule")


def test_tanh_decomposition_saturates_without_nan():
    x = np.array([-80.0, -25.0, -19.0, 0.0, 19.0, 25.0, 80.0], np.float32)
    with ipuxl.grad.force_decomposition("Tanh"):
        check_first(ops.tanh, torch.tanh, x)


def test_gelu_uses_tanh_decomposition_when_both_forced():
    x = normal((3, 4), k=8)
    with ipuxl.grad.force_decomposition("Gelu", "Tanh"):
        check_first(ops.gelu, lambda t: F.gelu(t, approximate="tanh"), x)
        check_second(ops.gelu, lambda t: F.gelu(t, approximate="tanh"), x)


# ---------------------------------------------------------------- fmod / pow / max

BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,))]


def _fmod_inputs(sa, sb, dtype=np.float32, k=0):
    a = normal(sa, np.float64, k=k) * 3.0
    b = away_from_zero(sb, np.float64, k=k + 1, gap=0.5)
    q = a / b  # keep a/b away from whole numbers (the jumps)
    frac = np.abs(q - np.round(q))
    a = np.where(frac < 0.05, a + 0.2 * b, a)
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES)
def test_fmod_first_order(sa, sb):
    a, b = _fmod_inputs(sa, sb)
    check_first(ops.fmod, torch.fmod, a, b)


def test_fmod_f16_and_second_order():
    a, b = _fmod_inputs((3, 4), (4,), np.float16, k=3)
    check_first(ops.fmod, torch.fmod, a, b)
    a, b = _fmod_inputs((3, 4), (4,), k=5)
    check_second(lambda x, y: ops.fmod(x, y) * ops.fmod(x, y),
                 lambda x, y: torch.fmod(x, y) ** 2, a, b)


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES)
def test_pow_tensor_exponent(sa, sb):
    a = positive(sa, k=1)
    e = normal(sb, k=2)
    check_first(ops.pow, torch.pow, a, e)


@pytest.mark.parametrize("e", [2.0, 3, 0.5, -1.5, 0.0, [1.0, 0.0, 2.5, -2.0]])
def test_pow_host_exponent(e):
    a = positive((3, 4), k=3)
    check_first(lambda t: ops.pow(t, e), lambda t: torch.pow(t, torch.tensor(e, dtype=t.dtype)),
                a)
    check_second(lambda t: ops.pow(t, e),
                 lambda t: torch.pow(t, torch.tensor(e, dtype=t.dtype)), a)


def test_pow_negative_base_integer_host_exponent():
    a = away_from_zero((3, 4), k=4)
    check_first(lambda t: ops.pow(t, 3.0), lambda t: t ** 3, a)


def test_pow_zero_and_negative_base_with_tensor_exponent():
    # torch: d/de is 0 where base == 0 and e >= 0; NaN for a negative base.
    a = np.array([0.0, 0.0, 0.0, -2.0, 1.5, 0.0], np.float32)
    e = np.array([2.0, 0.0, 3.0, 2.0, 0.0, 1.0], np.float32)
    grads = check_first(ops.pow, torch.pow, a, e)
    assert np.isnan(grads[1][3])
    assert grads[1][0] == 0 and grads[1][1] == 0 and grads[0][1] == 0


def test_pow_f16_and_second_order_tensor_exponent():
    a = positive((3, 4), np.float16, k=5)
    e = (normal((4,), k=6) * 0.5).astype(np.float16)
    check_first(ops.pow, torch.pow, a, e)
    check_second(ops.pow, torch.pow, positive((3, 4), k=7), normal((3, 1), k=8))


@pytest.mark.parametrize("shapes", [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)],
                                    [(3, 4), (1, 4), (3, 1)], [(5,)]])
def test_max_first_order(shapes):
    arrays = [normal(s, k=i) for i, s in enumerate(shapes)]

    def tmax(*ts):
        r = ts[0]
        for t in ts[1:]:
            r = torch.maximum(r, t)
        return r
    check_first(lambda *ts: ops.maximum(*ts), tmax, *arrays)


def test_max_ties_split_equally():
    a = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    b = np.array([1.0, 5.0, 3.0, -2.0], np.float32)
    check_first(ops.maximum, torch.maximum, a, b)  # torch.maximum also halves ties
    c = np.array([1.0, 0.0, 3.0, -1.0], np.float32)
    seeds = [np.array([3.0, 1.0, 6.0, 1.0], np.float32)]
    _, (ga, gb, gc) = grads_of(lambda x, y, z: ops.maximum(x, y, z), a, b, c, seeds=seeds)
    np.testing.assert_allclose(ga, [1, 0, 2, 0.5])
    np.testing.assert_allclose(gb, [1, 1, 2, 0])
    np.testing.assert_allclose(gc, [1, 0, 2, 0.5])


def test_max_f16_and_second_order():
    a, b = normal((3, 4), np.float16, k=1), normal((4,), np.float16, k=2)
    check_first(ops.maximum, torch.maximum, a, b)
    a, b = normal((3, 4), k=3), normal((4,), k=4)
    check_second(lambda x, y: ops.maximum(x, y) * ops.maximum(x, y),
                 lambda x, y: torch.maximum(x, y) ** 2, a, b)


# ---------------------------------------------------------------- identity / detach / increment_mod

def test_identity():
    x = normal((3, 4))
    check_first(ops.identity, lambda t: t * 1, x)
    check_second(lambda t: ops.identity(t) * ops.identity(t), lambda t: t * t, x)


def test_detach_stops_gradient():
    x = normal((3, 4))
    check_first(lambda t: t * ops.detach(t), lambda t: t * t.detach(), x)
    check_second(lambda t: t * t * ops.detach(t), lambda t: t * t * t.detach(), x)


def test_detach_alone_has_no_gradient_path():
    with pytest.raises(Exception, match="no differentiable path"):
        grads_of(ops.detach, normal((3,)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_increment_mod(dtype):
    x = (np.abs(normal((3, 4), k=2)) * 0.5).astype(dtype)  # x + 0.3 stays below 1.7 or wraps
    check_first(lambda t: ops.increment_mod(t, 0.3, 1.7), lambda t: torch.fmod(t + 0.3, 1.7), x)
    if dtype == np.float32:
        check_second(lambda t: ops.increment_mod(t, 0.3, 1.7) * t,
                     lambda t: torch.fmod(t + 0.3, 1.7) * t, x)


# ---------------------------------------------------------------- where

WHERE_SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((2, 1, 4), (3, 1), ()),
                ((5,), (), ())]


@pytest.mark.parametrize("sc,sl,sr", WHERE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_where_first_order(sc, sl, sr, dtype):
    c = _rng(9).random(sc) > 0.5
    lhs, rhs = normal(sl, dtype, k=1), normal(sr, dtype, k=2)
    check_first(ops.where, torch.where, c, lhs, rhs)


def test_where_host_operand_and_second_order():
    c = _rng(10).random((3, 4)) > 0.4
    x = normal((3, 4), k=3)
    check_first(lambda cc, t: ops.where(cc, t, 0.0), lambda cc, t: torch.where(cc, t, 0.0), c, x)
    y = normal((4,), k=4)
    check_second(lambda cc, t, u: ops.where(cc, t * t, u * t),
                 lambda cc, t, u: torch.where(cc, t * t, u * t), c, x, y)


# ---------------------------------------------------------------- cast

@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float16, np.float32),
                                     (np.float32, np.float32)])
def test_cast_float_to_float(src, dst):
    x = normal((3, 4), src, k=1)
    # The reference runs in float64, so it only checks the gradient's value;
    # ipuxl's gradient must come back in the input's dtype (check_first).
    grads = check_first(lambda t: ops.cast(t, ipuxl.dtypes.dtype.as_dtype(dst)),
                        lambda t: t * 1, x, tol=TOL[np.float16])
    assert grads[0].dtype == src


def test_cast_through_integer_carries_no_gradient():
    x = normal((3, 4), k=2) * 3

    def f(t):
        return ops.cast(ops.cast(t, ipuxl.int32), ipuxl.float32) * t + t

    def tf(t):
        return t.to(torch.int32).to(t.dtype) * t + t
    check_first(f, tf, x)
    check_second(lambda t: ops.cast(t, ipuxl.float16) * ops.cast(t, ipuxl.float16),
                 lambda t: t * t, x, tol=dict(rtol=2e-3, atol=1e-3))


# ---------------------------------------------------------------- scaled_add

@pytest.mark.parametrize("a,b", [(1.0, 1.0), (0.5, -2.0), (0.0, 3.0)])
@pytest.mark.parametrize("shape", [(), (3, 4)])
def test_scaled_add_float_scales(a, b, shape):
    x, y = normal(shape, k=1), normal(shape, k=2)
    check_first(lambda p, q: ops.scaled_add(p, q, a, b), lambda p, q: a * p + b * q, x, y)


@pytest.mark.parametrize("sa,sb", [((), ()), ((1,), (1, 1)), ((), None), (None, (1,))])
def test_scaled_add_tensor_scales(sa, sb):
    x, y = normal((3, 4), k=1), normal((3, 4), k=2)
    arrays = [x, y]
    if sa is not None:
        arrays.append(normal(sa, k=3))
    if sb is not None:
        arrays.append(normal(sb, k=4))

    def f(p, q, *s):
        s = list(s)
        a = s.pop(0) if sa is not None else 0.7
        b = s.pop(0) if sb is not None else -1.3
        return ops.scaled_add(p, q, a, b)

    def tf(p, q, *s):
        s = list(s)
        a = s.pop(0).reshape(()) if sa is not None else 0.7
        b = s.pop(0).reshape(()) if sb is not None else -1.3
        return a * p + b * q
    check_first(f, tf, *arrays)
    check_second(lambda p, q, *s: f(p, q, *s) * p, lambda p, q, *s: tf(p, q, *s) * p, *arrays)


def test_scaled_add_mixed_dtypes_and_integer_scale():
    x, y = normal((3, 4), k=1), normal((3, 4), np.float16, k=2)
    a = np.array(2, np.int32)  # an integer scale gets no gradient
    b = normal((), k=3)
    grads = check_first(lambda p, q, s, t: ops.scaled_add(p, q, s, t),
                        lambda p, q, s, t: s * p + t * q, x, y, a, b, tol=TOL[np.float16])
    assert grads[1].dtype == np.float16 and grads[2] is None and grads[3].dtype == np.float32


def test_gelu_grad_kernel_at_large_magnitudes():
    # GeluGrad's tails: no overflow of x * u'(x) into inf/NaN however large |x|
    # (real MNIST pixels reach pre-activations of hundreds); 0 below about
    # -10, 1 above about 10; NaN stays NaN.
    x = np.array([-3e38, -1e20, -1e6, -100.0, -12.0, -9.0, -3.0, -0.5, 0.0, 0.5, 3.0, 9.0,
                  12.0, 100.0, 1e6, 1e20, 3e38, np.nan], np.float32)
    _, grads = grads_of(ops.gelu, x, seeds=[np.ones_like(x)])
    g = np.asarray(grads[0], np.float64)
    xt = torch.tensor(x[:-1].astype(np.float64), requires_grad=True)
    F.gelu(xt, approximate="tanh").sum().backward()
    ref = np.nan_to_num(xt.grad.numpy())  # torch's own formula gives NaN at +-3e38
    np.testing.assert_allclose(g[:-1], ref, rtol=2e-5, atol=1e-6)
    assert np.isnan(g[-1])


def test_swish_float16_gradient_in_the_tails():
    # Regression (fuzz graph 2026:20711): the float16 rule evaluated the
    # sigmoid as (1 + tanh(x/2)) / 2 in float16, which cancels to 0 once
    # tanh rounds to -1 (x < -8), so swish'(-10) = -4.1e-4, a float16 number,
    # came out 0. Each gradient must be within a few float16 ulps of its own
    # value, not of the largest one.
    x = np.array([-16.0, -12.0, -10.0, -9.0, -6.0, -1.28, 0.0, 1.0, 6.0, 10.0, 16.0], np.float16)
    seeds = [np.ones(x.shape, np.float16)]
    _, (g,) = grads_of(ops.swish, x, seeds=seeds)
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    (ref,) = torch.autograd.grad(F.silu(t).sum(), [t])
    ref = ref.numpy()
    assert np.all(np.abs(g.astype(np.float64) - ref) <= 4e-3 * np.abs(ref) + 1e-7), (g, ref)


@pytest.mark.parametrize("fn, grad_type", [(ops.tanh, "TanhGrad"), (ops.relu, "ReluGrad")])
def test_nonlinearity_gradient_is_one_grad_op_as_popart(fn, grad_type):
    # PopART's TanhOp / ReluOp::getGradOps give one TanhGradOp / ReluGradOp
    # (grad, fwd out); the gradient graph holds it and nothing else (no
    # constant, comparison, Where, Sub or Mul).
    ir = ipuxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(fn, ipuxl.TensorSpec((2, 3), ipuxl.float32))
        info = ipuxl.transforms.autodiff(g)
    types = [op.type for op in info.graph.ops]
    assert types == [grad_type], types
    fwd_out = info.graph.ops[0].inputs[1]  # the forward output, an input of the gradient graph
    assert fwd_out in info.graph.inputs and fwd_out.shape == (2, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_relu_grad_kernel_at_zero_inf_and_nan(dtype):
    # g where y > 0: +0 and -0 give 0, +inf passes the gradient, NaN gives 0.
    x = np.array([-np.inf, -3.0, -0.0, 0.0, 6e-8, 0.5, 7.0, np.inf, np.nan], dtype)
    seed = np.arange(1, x.size + 1).astype(dtype)
    _, grads = grads_of(ops.relu, x, seeds=[seed])
    want = np.where(np.nan_to_num(x, nan=-1.0) > 0, seed, 0).astype(dtype)
    np.testing.assert_array_equal(grads[0], want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_tanh_grad_kernel_saturation_and_nan(dtype):
    # 1 - y*y at |y| -> 1 goes to 0 without going negative; NaN propagates.
    x = np.array([-30.0, -8.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 8.0, 30.0, np.nan], dtype)
    seeds = [np.linspace(-2, 2, x.size).astype(dtype)]
    _, grads = grads_of(ops.tanh, x, seeds=seeds)
    g = np.asarray(grads[0], np.float64)
    xt = torch.tensor(x[:-1].astype(np.float64), requires_grad=True)
    (torch.tanh(xt) * torch.tensor(seeds[0][:-1].astype(np.float64))).sum().backward()
    tol = TOL[dtype]
    np.testing.assert_allclose(g[:-1], xt.grad.numpy(), **tol)
    assert np.all(g[:-1] * np.sign(seeds[0][:-1]) >= 0)  # 1 - y*y >= 0
    assert np.isnan(g[-1])
