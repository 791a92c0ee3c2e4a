"""fmod, pow, maximum, identity/rename, detach and increment_mod against
NumPy / PyTorch (CPU)."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from harness import run_fn

RNG = np.random.default_rng(99)
BCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((), (2, 2)), ((0, 3), (1, 3)),
         ((5,), ())]


def _data(shape, dtype, low=-5.0, high=5.0):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(int(low), int(high), size=shape, endpoint=True).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def _tol(dtype):
    return dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)


def _foreign_tensor(ir):
    with ir.create_empty_graph("other"):
        return popxl.graph_input((3,), popxl.float32, "x")


# ---- fmod

@pytest.mark.parametrize("shapes", BCAST)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_fmod(shapes, dtype):
    a = _data(shapes[0], dtype, -20, 20)
    signs = np.where(_data(shapes[1], np.float32) > 0, 1, -1).astype(dtype)
    b = _data(shapes[1], dtype, 1, 7) * signs
    got = run_fn(ops.fmod, a, b)
    wide = np.float32 if dtype == np.float16 else dtype
    want = torch.fmod(torch.from_numpy(np.asarray(a, dtype=wide)),
                      torch.from_numpy(np.asarray(b, dtype=wide))).numpy()
    assert got.dtype == dtype and got.shape == np.broadcast_shapes(shapes[0], shapes[1])
    np.testing.assert_allclose(got.astype(np.float64), want.astype(dtype).astype(np.float64),
                               **_tol(dtype))


def test_fmod_by_zero_and_operator():
    i = np.array([7, -7, np.iinfo(np.int32).min, 5], np.int32)
    j = np.array([0, 0, -1, 3], np.int32)
    got = run_fn(ops.fmod, i, j)
    np.testing.assert_array_equal(got, [0, 0, 0, 2])  # integer fmod by 0 is defined as 0
    f = np.array([1.0, -2.5], np.float32)
    got = run_fn(lambda x: (ops.fmod(x, np.zeros(2, np.float32)), x % 2.0), f)
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], np.fmod(f, 2.0))


# ---- pow

@pytest.mark.parametrize("shapes", BCAST)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pow_tensor(shapes, dtype):
    a = _data(shapes[0], dtype, 0.1, 3)
    e = _data(shapes[1], dtype, -2, 2)
    got = run_fn(ops.pow, a, e)
    want = np.power(a.astype(np.float32), e.astype(np.float32)).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **_tol(dtype))


@pytest.mark.parametrize("e", [2, 3.0, 0.5, -1, 0])
def test_pow_scalar(e):
    a = _data((3, 4), np.float32, 0.1, 3)
    got = run_fn(lambda t: (ops.pow(t, e), t ** e), a)
    for g in got:
        np.testing.assert_allclose(g, np.power(a, np.float32(e)), rtol=1e-6)


def test_pow_int():
    a = np.array([2, -3, 0, 1, -1, 5, 7], np.int32)
    got = run_fn(lambda t: (ops.pow(t, 3), ops.pow(t, 0), ops.pow(t, 2.0)), a)
    np.testing.assert_array_equal(got[0], a ** 3)
    np.testing.assert_array_equal(got[1], np.ones_like(a))
    np.testing.assert_array_equal(got[2], a ** 2)
    # Negative exponents: 1 for base 1, +-1 for base -1, 0 otherwise.
    got = run_fn(lambda t: (ops.pow(t, -1), ops.pow(t, -2)), a)
    np.testing.assert_array_equal(got[0], [0, 0, 0, 1, -1, 0, 0])
    np.testing.assert_array_equal(got[1], [0, 0, 0, 1, 1, 0, 0])
    # Overflow wraps modulo 2**32, as torch's int32 pow.
    big = np.array([7, 3], np.int32)
    got = run_fn(lambda t: ops.pow(t, 40), big)
    want = torch.pow(torch.from_numpy(big), 40).numpy()
    np.testing.assert_array_equal(got, want)


def test_pow_bad():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.int32), name="ints")
        f = popxl.variable(np.ones(3, np.float32), name="floats")
        with pytest.raises(TypeError, match="pow: .*fractional exponent"):
            ops.pow(t, 0.5)
        with pytest.raises(TypeError, match="pow: inputs must have the same dtype"):
            ops.pow(f, t)
        with pytest.raises(ValueError, match="pow: shapes do not broadcast"):
            ops.pow(f, popxl.variable(np.ones(2, np.float32)))
        with pytest.raises(TypeError, match="pow: exponent must be"):
            ops.pow(f, "2")
    x = _foreign_tensor(ir)
    with ir.main_graph:
        with pytest.raises(ValueError, match="pow: .*in graph 'other"):
            ops.pow(x, 2.0)


# ---- maximum

@pytest.mark.parametrize("shapes", BCAST)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_maximum_two(shapes, dtype):
    a = _data(shapes[0], dtype)
    b = _data(shapes[1], dtype)
    got = run_fn(ops.maximum, a, b)
    np.testing.assert_array_equal(got, np.maximum(a, b))
    assert got.dtype == dtype


def test_maximum_variadic():
    a = _data((2, 1, 3), np.float32)
    b = _data((4, 1), np.float32)
    c = _data((), np.float32)
    d = _data((3,), np.float32)
    got = run_fn(ops.maximum, a, b, c, d)
    np.testing.assert_array_equal(got, np.maximum(np.maximum(np.maximum(a, b), c), d))
    np.testing.assert_array_equal(run_fn(ops.maximum, a), a)


def test_maximum_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(run_fn(ops.maximum, a, b), np.maximum(a, b))


def test_maximum_bad():
    ir = popxl.Ir()
    with ir.main_graph:
        f = popxl.variable(np.ones(3, np.float32), name="f")
        i = popxl.variable(np.ones(3, np.int32), name="i")
        with pytest.raises(ValueError, match="maximum: at least one"):
            ops.maximum()
        with pytest.raises(TypeError, match="maximum: inputs must have the same dtype"):
            ops.maximum(f, i)
        with pytest.raises(ValueError, match="maximum: shapes do not broadcast"):
            ops.maximum(f, popxl.variable(np.ones(4, np.float32)))
        with pytest.raises(TypeError, match="maximum: .*must be a Tensor"):
            ops.maximum(f, 1.0)


# ---- identity / rename / detach

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_identity_detach(dtype):
    x = _data((2, 3), np.float32).astype(dtype)
    got = run_fn(lambda t: (ops.identity(t), ops.rename(t, "renamed"), ops.detach(t),
                            ops.detach_(t)), x)
    for g in got:
        np.testing.assert_array_equal(g, x)
        assert g.dtype == dtype


def test_identity_names_and_aliases():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.ones(3, np.float32), name="w")
        assert ops.identity(t).name == "identity_w"
        assert ops.rename(t, "other_name").name == "other_name"
        assert ops.rename is ops.identity
        d = ops.detach(t)
        assert d.producer.type == "Detach" and not d.producer.aliases
        d_ = ops.detach_(t)
        assert d_.producer.type == "DetachInplace"
        assert d_.producer.aliases == [(0, 0)] and not d_.producer.modified
        assert t.detach().producer.type == "Detach"


def test_detach_inplace_is_view():
    # Writing through the detach_ view updates the original tensor.
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    got = run_fn(lambda t: (ops.relu_(ops.detach_(t)), t)[1], x)
    np.testing.assert_array_equal(got, [0.0, 2.0, 0.0])


def test_identity_bad():
    ir = popxl.Ir()
    x = _foreign_tensor(ir)
    with ir.main_graph:
        for fn in (ops.identity, ops.detach, ops.detach_):
            with pytest.raises(ValueError, match="in graph 'other"):
                fn(x)
        with pytest.raises(TypeError, match="must be a Tensor"):
            ops.identity([1, 2])


# ---- increment_mod

@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16, np.int64])
def test_increment_mod_int(dtype):
    x = np.arange(0, 12, dtype=dtype)
    got = run_fn(lambda t: ops.increment_mod(t, 3, 5), x)
    np.testing.assert_array_equal(got, ((x.astype(np.int64) + 3) % 5).astype(dtype))
    assert got.dtype == dtype


def test_increment_mod_int_truncation_and_sign():
    x = np.array([-7, -1, 0, 4, 2147483647], np.int32)
    # increment 2.9 -> 2 and modulus 5.5 -> 5 (PopART converts them to the
    # tensor type); the remainder has the sign of the dividend; no overflow.
    got = run_fn(lambda t: ops.increment_mod(t, 2.9, 5.5), x)
    want = np.fmod(x.astype(np.int64) + 2, 5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(), (0, 3), (4, 5)])
def test_increment_mod_float(dtype, shape):
    x = _data(shape, dtype, 0, 10)
    got = run_fn(lambda t: ops.increment_mod(t, 1.5, 4.0), x)
    want = np.fmod(x.astype(np.float32) + np.float32(1.5), np.float32(4.0)).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **_tol(dtype))


def test_increment_mod_inplace():
    x = np.arange(6, dtype=np.int32)
    seen = []

    def body(t):
        out = ops.increment_mod_(t, 1, 4)
        seen.append(out.producer)
        return out, t

    got, modified = run_fn(body, x)
    np.testing.assert_array_equal(got, (x + 1) % 4)
    np.testing.assert_array_equal(modified, (x + 1) % 4)
    assert seen[0].type == "IncrementModInplace" and seen[0].modified == {0}


def test_increment_mod_bad():
    ir = popxl.Ir()
    with ir.main_graph:
        i = popxl.variable(np.ones(3, np.int8), name="i8")
        f = popxl.variable(np.ones(3, np.float32), name="f")
        with pytest.raises(ValueError, match="increment_mod: modulus must not be 0"):
            ops.increment_mod(f, 1, 0)
        with pytest.raises(ValueError, match="increment_mod_: modulus must not be 0"):
            ops.increment_mod_(i, 1, 0.5)
        with pytest.raises(ValueError, match="increment_mod: increment 1000 is out of range"):
            ops.increment_mod(i, 1000, 3)
        with pytest.raises(ValueError, match="increment_mod: modulus must be finite"):
            ops.increment_mod(f, 1, float("inf"))
        with pytest.raises(TypeError, match="increment_mod: increment must be a number"):
            ops.increment_mod(f, f, 3)
        with pytest.raises(TypeError, match="increment_mod: .*'b'.*bool"):
            ops.increment_mod(popxl.variable(np.ones(2, np.bool_), name="b"), 1, 2)
