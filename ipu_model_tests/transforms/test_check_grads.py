"""``ipuxl.testing.check_grads``: passes for correct rules, fails for a
deliberately wrong one."""
import numpy as np
import pytest

import ipuxl.ops as ops
from ipuxl import grad as _grad
from ipuxl.testing import check_grads, get_all_dtypes, get_all_int_dtypes


def _args(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("order", [1, 2])
def test_passes_for_correct_rules(order):
    check_grads(lambda x, w: ops.tanh(x @ w) * ops.sin(x @ w), _args((3, 4), (4, 2)),
                order=order)


def test_passes_float16_and_broadcasting():
    check_grads(lambda x, b: x * b + b, _args((2, 3), (3,), dtype=np.float16))


def test_int_inputs_held_fixed():
    x = _args((3,))[0]
    check_grads(lambda x, i: x * ops.cast(i, x.dtype), [x, np.array([1, 2, 3], np.int32)])


# A deliberately wrong rule must be caught. A rule-only throwaway op type
# could not run (no kernel), so the wrong rule temporarily replaces Sin's
# (a runnable op) and the registry entry is restored afterwards.


@pytest.fixture
def wrong_rule():
    saved_rule = _grad._RULES.get("Sin")
    # Register a deliberately wrong rule for Sin: d sin = g * sin(x) (should be cos).
    @_grad.register_grad("Sin")
    def _bad(ctx):
        return [ctx.g() * ops.sin(ctx.x(0))]
    try:
        yield
    finally:
        if saved_rule is None:
            _grad._RULES.pop("Sin", None)
        else:
            _grad._RULES["Sin"] = saved_rule


def test_fails_for_wrong_rule(wrong_rule):
    with pytest.raises(AssertionError, match="disagrees with central differences"):
        check_grads(lambda x: ops.sin(x) * 2.0, _args((5,)))


def test_registry_restored_after_wrong_rule():
    check_grads(lambda x: ops.sin(x) * 2.0, _args((5,)))


def test_fails_second_order_for_wrong_rule(wrong_rule):
    with pytest.raises(AssertionError, match="order-2"):
        check_grads(lambda x: ops.sin(x) * x, _args((4,)), order=2)


def test_bad_arguments():
    with pytest.raises(NotImplementedError, match="fwd"):
        check_grads(lambda x: x * x, _args((2,)), modes=("fwd", "rev"))
    with pytest.raises(ValueError):
        check_grads(lambda x: x * x, _args((2,)), order=3)
    with pytest.raises(ValueError):
        check_grads(lambda i: i * 2, [np.array([1, 2], np.int32)])  # nothing to differentiate


def test_dtype_lists_kept():
    # popxl.testing's lists: ints (signed, then unsigned), floats, complex; no bool
    names = [d.name for d in get_all_dtypes()]
    assert names == ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float8_143", "float8_152", "float16", "float32", "float64",
                     "complex64", "complex128"]
    assert all(d.is_int for d in get_all_int_dtypes())
    assert [d.name for d in get_all_int_dtypes(include_signed=False)] == \
        ["uint8", "uint16", "uint32", "uint64"]
    assert [d.name for d in get_all_int_dtypes(include_unsigned=False)] == \
        ["int8", "int16", "int32", "int64"]
