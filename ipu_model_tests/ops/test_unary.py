"""Elementwise unary ops checked against NumPy / PyTorch (CPU)."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

SHAPES = [(), (0, 3), (7,), (2, 3, 4)]
RNG = np.random.default_rng(1234)


def _data(shape, dtype, low=-3.0, high=3.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def _tol(dtype):
    return dict(rtol=1e-2, atol=2e-3) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-6)


def _torch_ref(fn):
    def ref(x):
        return fn(torch.from_numpy(np.ascontiguousarray(x))).numpy()
    return ref


FLOAT_OPS = {
    "sqrt": (ops.sqrt, np.sqrt, (0.0, 4.0)),
    "exp": (ops.exp, np.exp, (-3.0, 3.0)),
    "log": (ops.log, np.log, (0.05, 5.0)),
    "log2": (ops.log2, np.log2, (0.05, 5.0)),
    "sin": (ops.sin, np.sin, (-4.0, 4.0)),
    "cos": (ops.cos, np.cos, (-4.0, 4.0)),
    "tanh": (ops.tanh, np.tanh, (-4.0, 4.0)),
    "ceil": (ops.ceil, np.ceil, (-4.0, 4.0)),
    "floor": (ops.floor, np.floor, (-4.0, 4.0)),
    "gelu": (ops.gelu, _torch_ref(lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
             (-5.0, 5.0)),
    "geluerf": (ops.geluerf, _torch_ref(torch.nn.functional.gelu), (-5.0, 5.0)),
    "swish": (ops.swish, _torch_ref(torch.nn.functional.silu), (-6.0, 6.0)),
    "relu": (ops.relu, lambda x: np.maximum(x, 0), (-3.0, 3.0)),
    "abs": (ops.abs, np.abs, (-3.0, 3.0)),
    "negate": (ops.negate, np.negative, (-3.0, 3.0)),
    "sign": (ops.sign, np.sign, (-3.0, 3.0)),
}


@pytest.mark.parametrize("name", sorted(FLOAT_OPS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float_forward(name, shape, dtype):
    fn, ref, (lo, hi) = FLOAT_OPS[name]
    x = _data(shape, dtype, lo, hi)
    got = run_fn(fn, x)
    want = np.asarray(ref(x.astype(np.float32))).astype(dtype)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **_tol(dtype))


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh", "gelu", "relu"])
def test_float64(name):
    fn, ref, (lo, hi) = FLOAT_OPS[name]
    x = _data((4, 5), np.float64, lo, hi)
    got = run_fn(fn, x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref(x), rtol=1e-12, atol=1e-15)


def test_gelu_tails_and_special_values():
    # Deep negative tail (values down to ~1e-37), huge inputs and IEEE
    # specials: float64 for the finite values, PyTorch's tanh GELU for the
    # specials (-inf and NaN give NaN, +inf gives +inf).
    x = np.concatenate([np.linspace(-12.0, 12.0, 241), [-30.0, -1e20, 1e20, 1e-30]])
    x = x.astype(np.float32)
    got = run_fn(ops.gelu, x)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        want = x64 / (1.0 + np.exp(-2.0 * np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-37)
    specials = np.array([-np.inf, np.inf, np.nan], np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(specials), approximate="tanh").numpy()
    np.testing.assert_array_equal(run_fn(ops.gelu, specials), ref)


def test_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0], np.float32)
    with np.errstate(all="ignore"):
        got = run_fn(lambda t: (ops.relu(t), ops.sign(t), ops.ceil(t), ops.floor(t),
                                ops.sqrt(t), ops.log(t), ops.abs(t)), x)
        np.testing.assert_array_equal(got[0], [np.nan, np.inf, 0, 0, 0, 0])
        # PopXL documents sign(NaN) == 0.
        np.testing.assert_array_equal(got[1], [0, 1, -1, 0, 0, -1])
        np.testing.assert_array_equal(got[2], np.ceil(x))
        np.testing.assert_array_equal(got[3], np.floor(x))
        np.testing.assert_array_equal(got[4], np.sqrt(x))
        np.testing.assert_array_equal(got[5], np.log(x))
        np.testing.assert_array_equal(got[6], np.abs(x))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.int64, np.uint8])
def test_integer_ops(dtype):
    info = np.iinfo(dtype)
    if info.min == 0:
        x = np.array([0, 1, 7, 100, info.max], dtype=dtype)
    else:
        x = np.array([info.min, info.min + 1, -7, -1, 0, 1, 9, info.max], dtype=dtype)
    got = run_fn(lambda t: (ops.abs(t), ops.negate(t), ops.relu(t), ops.sign(t)), x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got[0], np.abs(x))  # wraps: abs(MIN) == MIN
        np.testing.assert_array_equal(got[1], np.negative(x))
    np.testing.assert_array_equal(got[2], np.maximum(x, 0).astype(dtype))
    np.testing.assert_array_equal(got[3], np.sign(x))
    for g in got:
        assert g.dtype == dtype


@pytest.mark.parametrize("shape", SHAPES)
def test_isnan_isinf_isfinite(shape):
    x = _data(shape, np.float32)
    flat = x.reshape(-1)
    specials = [np.nan, np.inf, -np.inf]
    flat[: min(3, flat.size)] = specials[: min(3, flat.size)]
    got = run_fn(lambda t: (ops.isnan(t), ops.isinf(t), ops.isfinite(t)), x)
    for g, ref in zip(got, (np.isnan, np.isinf, np.isfinite)):
        assert g.dtype == np.bool_ and g.shape == shape
        np.testing.assert_array_equal(g, ref(x))


def test_isnan_float16_and_int():
    x = np.array([np.nan, 1.0, np.inf, -np.inf], np.float16)
    got = run_fn(lambda t: (ops.isnan(t), ops.isinf(t), ops.isfinite(t)), x)
    np.testing.assert_array_equal(got[0], np.isnan(x))
    np.testing.assert_array_equal(got[1], np.isinf(x))
    np.testing.assert_array_equal(got[2], np.isfinite(x))
    i = np.array([1, -2, 3], np.int32)
    got = run_fn(lambda t: (ops.isnan(t), ops.isinf(t), ops.isfinite(t)), i)
    np.testing.assert_array_equal(got[0], [False] * 3)
    np.testing.assert_array_equal(got[1], [False] * 3)
    np.testing.assert_array_equal(got[2], [True] * 3)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bounds", [(-1.0, 1.5), (0.0, None), (None, -0.5), (2.0, -2.0)])
def test_clip(shape, dtype, bounds):
    lo, hi = bounds
    x = _data(shape, dtype)
    kwargs = {}
    if lo is not None:
        kwargs["min"] = lo
    if hi is not None:
        kwargs["max"] = hi
    got = run_fn(lambda t: ops.clip(t, **kwargs), x)
    want = torch.clamp(torch.from_numpy(x.astype(np.float32)), min=lo, max=hi).numpy()
    np.testing.assert_allclose(got.astype(np.float32), want.astype(dtype).astype(np.float32),
                               **_tol(dtype))


def test_clip_nan_and_clamp_alias():
    assert ops.clamp is ops.clip
    x = np.array([np.nan, -5.0, 5.0, 0.25], np.float32)
    got = run_fn(lambda t: ops.clamp(t, -1, 1), x)
    np.testing.assert_array_equal(got, [np.nan, -1.0, 1.0, 0.25])
    # Defaults: no clipping at all.
    np.testing.assert_array_equal(run_fn(ops.clip, x), x)


def test_clip_int():
    x = np.arange(-10, 10, dtype=np.int32)
    got = run_fn(lambda t: ops.clip(t, -2.5, 3.5), x)
    np.testing.assert_array_equal(got, np.clip(x, -2, 3))
    x8 = np.array([-128, 0, 127], np.int8)
    got = run_fn(lambda t: ops.clip(t, -1e9, 1e9), x8)  # bounds saturate at the type range
    np.testing.assert_array_equal(got, x8)


INPLACE = {
    "exp_": (ops.exp_, np.exp),
    "relu_": (ops.relu_, lambda x: np.maximum(x, 0)),
    "gelu_": (ops.gelu_, FLOAT_OPS["gelu"][1]),
    "geluerf_": (ops.geluerf_, FLOAT_OPS["geluerf"][1]),
    "swish_": (ops.swish_, FLOAT_OPS["swish"][1]),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_inplace(name, dtype):
    fn, ref = INPLACE[name]
    x = _data((3, 4), dtype)
    ops_seen = []

    def body(t):
        out = fn(t)
        ops_seen.append(out.producer)
        return out, t  # `t` itself must hold the result after the op

    got, modified = run_fn(body, x)
    want = np.asarray(ref(x.astype(np.float32))).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **_tol(dtype))
    np.testing.assert_array_equal(modified, got)
    op = ops_seen[0]
    assert op.type.endswith("Inplace") and op.aliases == [(0, 0)] and op.modified == {0}


def test_inplace_variable():
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    got = run_fn(lambda t: (ops.relu_(t), t)[1], x, as_variables=True)
    np.testing.assert_array_equal(got, [0.0, 0.5, 2.0])


def test_kernel_types():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.float32))
        assert ops.negate(t).producer.type == "Neg"
        assert ops.gelu(t).producer.type == "Gelu"
        assert ops.geluerf(t).producer.type == "GeluErf"
        assert ops.clip(t).producer.type == "Clip"
        l2 = ops.log2(t)
        assert l2.producer.type == "Div"
        assert l2.producer.inputs[0].producer.type == "Log"
        assert ops.isfinite(t).producer.type == "Identity"


# ---- bad inputs

def _foreign_tensor(ir):
    g = ir.create_empty_graph("other")
    with g:
        return popxl.graph_input((3,), popxl.float32, "x")


@pytest.mark.parametrize("fn", [ops.sqrt, ops.exp, ops.log, ops.sin, ops.gelu, ops.geluerf,
                                ops.swish, ops.ceil, ops.floor, ops.exp_, ops.tanh])
def test_float_only_rejects_int(fn):
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.int32), name="ints")
        with pytest.raises(TypeError, match=r"'ints'.*int32.*floating point"):
            fn(t)


@pytest.mark.parametrize("fn", [ops.abs, ops.negate, ops.relu, ops.sign, ops.isnan, ops.clip])
def test_numeric_rejects_bool(fn):
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.bool_), name="flags")
        with pytest.raises(TypeError, match=r"'flags'.*bool"):
            fn(t)


@pytest.mark.parametrize("fn", [ops.relu, ops.relu_, ops.isfinite, ops.log2, ops.clip])
def test_rejects_other_graph(fn):
    ir = popxl.Ir()
    x = _foreign_tensor(ir)
    with ir.main_graph:
        with pytest.raises(ValueError, match="other"):
            fn(x)


def test_rejects_non_tensor():
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(TypeError, match="relu.*Tensor"):
            ops.relu(np.ones(3))


def test_clip_bad_bounds():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.float32))
        with pytest.raises(ValueError, match="clip: min must not be NaN"):
            ops.clip(t, min=float("nan"))
        with pytest.raises(TypeError, match="clip: max must be a number, not a Tensor"):
            ops.clip(t, max=t)
        with pytest.raises(TypeError, match="clip: min must be a float"):
            ops.clip(t, min="0")
